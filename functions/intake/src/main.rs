//! intake: API Gateway HTTP API → validate, classify, authorize, record, enqueue the route job.

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::engine::handlers::handle_http;
use shared::system::AwsSystem;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let system = AwsSystem::from_env(Default::default()).await?;
    let deps = &system.deps;
    run(service_fn(|event: LambdaEvent<ApiGatewayV2httpRequest>| async move {
        Ok::<_, Error>(handle_http(deps, event.payload).await)
    }))
    .await
}
