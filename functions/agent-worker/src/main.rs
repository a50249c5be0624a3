//! agent-worker: dispatch jobs of the tier in `SWITCHYARD_TIER` → one attempt, retry, fallback,
//! handoff, fan-in. One deployment per tier, from this one binary.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use switchyard_aws::{tier_from_env, AwsSystem};
use switchyard_engine::handlers::{handle_sqs, Function};

#[tokio::main]
async fn main() -> Result<(), Error> {
    switchyard_engine::telemetry::init("agent-worker", switchyard_engine::telemetry::LogOutput::JsonStdout, "info");
    let system = AwsSystem::from_env(Default::default()).await?;
    let tier = tier_from_env(&system.deps.manifest)?;
    let deps = &system.deps;
    run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
        let response =
            handle_sqs(deps, Function::Worker { tier: Some(tier) }, event.payload).await.map_err(Error::from);
        // Spans leave before Lambda freezes the process (a no-op without OTLP export).
        switchyard_engine::telemetry::otlp::flush(std::time::Duration::from_secs(2)).await;
        response
    }))
    .await
}
