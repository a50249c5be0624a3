//! intake: API Gateway HTTP API → validate, classify, authorize, record, enqueue the route job.

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use switchyard_aws::AwsSystem;
use switchyard_engine::handlers::handle_http;

#[tokio::main]
async fn main() -> Result<(), Error> {
    switchyard_engine::telemetry::init("intake", switchyard_engine::telemetry::LogOutput::JsonStdout, "info");
    let system = AwsSystem::from_env(Default::default()).await?;
    system.require_router()?;
    let deps = &system.deps;
    run(service_fn(|event: LambdaEvent<ApiGatewayV2httpRequest>| async move {
        let response = Ok::<_, Error>(handle_http(deps, event.payload).await);
        // Spans leave before Lambda freezes the process (a no-op without OTLP export).
        switchyard_engine::telemetry::otlp::flush(std::time::Duration::from_secs(2)).await;
        response
    }))
    .await
}
