//! events-stream: Function URL (RESPONSE_STREAM) → verify the JWT, check ownership, follow
//! the query's event log as server-sent events until it ends.

use lambda_runtime::Error;
use switchyard_aws::AwsSystem;
use switchyard_engine::jwt::JwtVerifier;

#[tokio::main]
async fn main() -> Result<(), Error> {
    switchyard_engine::telemetry::init("events-stream", switchyard_engine::telemetry::LogOutput::JsonStdout, "info");
    let verifier = JwtVerifier::from_env()?;
    let system = AwsSystem::from_env(Default::default()).await?;
    // Chat completions are classified here as at intake: the same check of the trained router.
    system.require_router()?;
    events_stream::run(&system.deps, &verifier).await
}
