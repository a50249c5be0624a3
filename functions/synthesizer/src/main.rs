//! synthesizer: synth and deadline jobs → the output, written once.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{run, service_fn, Error, LambdaEvent};
use shared::engine::handlers::{handle_sqs, Function};
use shared::system::AwsSystem;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let system = AwsSystem::from_env(Default::default()).await?;
    let deps = &system.deps;
    run(service_fn(|event: LambdaEvent<SqsEvent>| async move {
        handle_sqs(deps, Function::Synthesizer, event.payload).await.map_err(Error::from)
    }))
    .await
}
