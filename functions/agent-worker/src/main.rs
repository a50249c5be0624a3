//! agent-worker: dispatch jobs of the tier in `SWITCHYARD_TIER` → one attempt, retry, fallback,
//! handoff, fan-in. One deployment per tier, from this one binary.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::engine::handlers::{handle_sqs, Function};
use shared::system::{tier_from_env, AwsSystem};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let system = AwsSystem::from_env(Default::default()).await?;
    let tier = tier_from_env(&system.deps.manifest)?;
    let deps = &system.deps;
    run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
        handle_sqs(deps, Function::Worker { tier: Some(tier) }, event.payload).await.map_err(Error::from)
    }))
    .await
}
