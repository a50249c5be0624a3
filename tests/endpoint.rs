//! The local AWS endpoint (a moto server started by `scripts/test.sh` / `scripts/test-aws.sh`):
//! reaching it, resetting it once per test binary, and SDK clients for it.
//!
//! A test that needs the endpoint and cannot reach it fails with the reason; it never skips.

use std::time::Duration;
use switchyard_aws::sdk::aws_config_from_env;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OnceCell;

/// How to run tests that need the endpoint.
pub const HOW_TO_RUN: &str =
    "run these tests through scripts/test.sh or scripts/test-aws.sh (or `source scripts/moto.sh && \
     moto_start && trap moto_stop EXIT` first), which start a local moto server and set AWS_ENDPOINT_URL";

/// `host:port` of `AWS_ENDPOINT_URL`; panics (fails the test) when it is not set.
pub fn authority() -> String {
    let url = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    assert!(!url.trim().is_empty(), "AWS_ENDPOINT_URL is not set: {HOW_TO_RUN}");
    let rest = url.trim().trim_start_matches("http://");
    assert!(!rest.starts_with("https://"), "AWS_ENDPOINT_URL must be a plain-HTTP local endpoint, got {url}");
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// One HTTP/1.1 POST without a body; answers the status line.
pub async fn post(authority: &str, path: &str) -> std::io::Result<String> {
    let mut stream = tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(authority)).await??;
    let request =
        format!("POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await??;
    Ok(String::from_utf8_lossy(&response).lines().next().unwrap_or_default().to_string())
}

static READY: OnceCell<()> = OnceCell::const_new();

/// Check that the endpoint answers, resetting moto once per test binary before any test of
/// that binary has created a resource (every test waits here first). Test binaries run one
/// after another, so a reset never hits another binary's running test.
pub async fn ready() {
    READY
        .get_or_init(|| async {
            let authority = authority();
            match post(&authority, "/moto-api/reset").await {
                Ok(status) if status.contains(" 200") => {}
                Ok(status) => {
                    panic!("POST /moto-api/reset on {authority} answered {status:?}: is it a moto server? {HOW_TO_RUN}")
                }
                Err(e) => panic!("nothing answers at {authority} ({e}): {HOW_TO_RUN}"),
            }
        })
        .await;
}

/// The SDK configuration for the endpoint, once it answers.
pub async fn config() -> aws_config::SdkConfig {
    ready().await;
    aws_config_from_env().await
}

/// SDK clients for the endpoint (built per test: each test has its own runtime).
pub async fn clients() -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client) {
    let config = config().await;
    (aws_sdk_dynamodb::Client::new(&config), aws_sdk_sqs::Client::new(&config))
}

/// A unique resource prefix, so tests can share the endpoint in parallel.
pub fn prefix() -> String {
    format!("t{}", uuid::Uuid::new_v4().simple())
}

/// The table and queues `manifest` needs, created on the endpoint under a new [`prefix`].
pub async fn resources(
    manifest: &switchyard_model::manifest::Manifest,
    config: &aws_config::SdkConfig,
) -> switchyard_aws::sdk::ResourceUrls {
    let p = prefix();
    switchyard_aws::sdk::ensure_resources(
        &aws_sdk_dynamodb::Client::new(config),
        &aws_sdk_sqs::Client::new(config),
        &switchyard_model::topology::Topology::for_manifest(manifest),
        &format!("{p}-table"),
        &format!("{p}-"),
    )
    .await
    .expect("resources are created on the endpoint")
}
