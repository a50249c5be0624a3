//! router: route jobs → plan, dispatches on the tier queues, the deadline armed.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use switchyard_aws::AwsSystem;
use switchyard_engine::handlers::{handle_sqs, Function};

#[tokio::main]
async fn main() -> Result<(), Error> {
    switchyard_engine::telemetry::init("router", switchyard_engine::telemetry::LogOutput::JsonStdout, "info");
    let system = AwsSystem::from_env(Default::default()).await?;
    let deps = &system.deps;
    run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
        let response = handle_sqs(deps, Function::Router, event.payload).await.map_err(Error::from);
        // Spans leave before Lambda freezes the process (a no-op without OTLP export).
        switchyard_engine::telemetry::otlp::flush(std::time::Duration::from_secs(2)).await;
        response
    }))
    .await
}
