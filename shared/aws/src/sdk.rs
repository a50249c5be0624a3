//! AWS configuration and resource setup for the DynamoDB and SQS adapters.
//!
//! - [`aws_config_from_env`] loads the SDK configuration once (credentials, region, and
//!   `AWS_ENDPOINT_URL` for a local endpoint such as moto).
//! - [`ensure_resources`] creates what a [`Topology`] needs: the table (on-demand, `pk`/`sk`,
//!   the `by_user` index, TTL on `expires_at`) and, for each queue, its dead-letter queue and
//!   then the queue itself with its visibility timeout and redrive policy. It is idempotent:
//!   existing resources are kept and their queue attributes brought in line with the topology.
//!   It answers the URLs and the environment variables the functions read
//!   ([`ResourceUrls::export_lines`] prints them for `switchyard setup --backend aws`).

use aws_config::meta::region::RegionProviderChain;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TimeToLiveSpecification, TimeToLiveStatus,
};
use aws_sdk_sqs::types::QueueAttributeName;
use std::collections::BTreeMap;
use std::time::Duration;
use switchyard_engine::ports::QueueId;
use switchyard_model::topology::{Topology, ENV_TABLE};

/// Environment variable naming a custom endpoint for every AWS service (a local moto server).
pub const ENV_ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";
/// Region used with a custom endpoint when none is configured.
pub const LOCAL_DEFAULT_REGION: &str = "us-east-1";
/// How long [`ensure_resources`] waits for a new table to become active.
pub const TABLE_ACTIVE_WAIT: Duration = Duration::from_secs(300);
/// Retention of dead letters: 14 days, SQS's longest, to leave time to look at them.
pub const DLQ_RETENTION_S: u64 = 14 * 24 * 60 * 60;

/// The SDK configuration from the environment, loaded once per process.
///
/// Honours the usual sources (environment, profile, container and instance credentials) and
/// `AWS_ENDPOINT_URL`: with an endpoint set and no region configured, the region is
/// `us-east-1`, which local endpoints accept.
///
/// When the credentials are in the environment — always the case on Lambda, which sets
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` for the function's
/// role — they are read from there directly. The default chain would find them there too
/// (the environment is its first source), but building it also builds the profile, web
/// identity (an STS client with its own endpoint rules), container and instance providers:
/// about 0.9 million instructions of every function's init.
pub async fn aws_config_from_env() -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if env_credentials() {
        loader = loader
            .credentials_provider(aws_config::environment::credentials::EnvironmentVariableCredentialsProvider::new());
    }
    let endpoint = std::env::var(ENV_ENDPOINT_URL).ok().filter(|e| !e.trim().is_empty());
    let native_roots = endpoint.is_some() || std::env::var(ENV_NATIVE_ROOTS).is_ok_and(|v| v == "1");
    loader = with_shared_client(loader, native_roots);
    if let Some(endpoint) = endpoint {
        loader = loader
            .endpoint_url(endpoint)
            .region(RegionProviderChain::default_provider().or_else(Region::new(LOCAL_DEFAULT_REGION)));
    }
    loader.load().await
}

/// Whether the environment holds an access key id and a secret key (non-empty).
fn env_credentials() -> bool {
    ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"].iter().all(|k| std::env::var(k).is_ok_and(|v| !v.trim().is_empty()))
}

/// Set to `1` to trust the system's certificate store for AWS calls instead of Amazon's roots.
pub const ENV_NATIVE_ROOTS: &str = "SWITCHYARD_NATIVE_ROOTS";

/// The roots AWS service endpoints chain to: Amazon Root CA 1–4 and Starfield Services Root
/// G2 (public certificates, as shipped by every CA bundle).
const AMAZON_ROOTS_PEM: &[u8] = include_bytes!("../certs/amazon-roots.pem");

/// One HTTPS client for the configuration's credential providers and every SDK client built
/// from it, trusting only [`AMAZON_ROOTS_PEM`].
///
/// Why: with the SDK's default client each function start parsed the system's whole CA bundle
/// (~140 PEM certificates) twice — once for aws-config's STS client, once for the service
/// clients — which was about half of a function's init instructions (docs/performance.md#cold-start). Five roots compiled in cost next to nothing. With a custom endpoint
/// (`AWS_ENDPOINT_URL`: a local endpoint, a proxy) or `SWITCHYARD_NATIVE_ROOTS=1` the system
/// store is used, still through one shared client. If the TLS context cannot be built the
/// SDK's default client applies.
fn with_shared_client(loader: aws_config::ConfigLoader, native_roots: bool) -> aws_config::ConfigLoader {
    use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode, TlsContext, TrustStore};
    let store = if native_roots {
        TrustStore::default()
    } else {
        TrustStore::empty().with_native_roots(false).with_pem_certificate(AMAZON_ROOTS_PEM)
    };
    match TlsContext::builder().with_trust_store(store).build() {
        Ok(context) => loader.http_client(
            aws_smithy_http_client::Builder::new()
                .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
                .tls_context(context)
                .build_https(),
        ),
        Err(_) => loader,
    }
}

/// What [`ensure_resources`] created or found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceUrls {
    /// The table's name.
    pub table: String,
    /// Every queue's URL, dead-letter queues under [`QueueId::dlq`].
    pub queues: BTreeMap<QueueId, String>,
    /// Every dead-letter queue's ARN, under the id of the queue it serves.
    pub dead_letter_arns: BTreeMap<QueueId, String>,
    /// The environment the functions read: `SWITCHYARD_TABLE`, `SWITCHYARD_QUEUE_<NAME>` and
    /// `SWITCHYARD_QUEUE_<NAME>_DLQ`.
    pub env: BTreeMap<String, String>,
}

impl ResourceUrls {
    /// `export NAME=value` lines for a shell.
    pub fn export_lines(&self) -> Vec<String> {
        self.env.iter().map(|(name, value)| format!("export {name}={value}")).collect()
    }
}

/// Why setting up resources failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A request failed.
    #[error("{step}: {message}")]
    Request {
        /// What was being done (`CreateTable switchyard`, `CreateQueue tier-2-dlq`, …).
        step: String,
        /// What the service said.
        message: String,
        /// The SDK error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// An answer lacked something it must carry (a queue URL or ARN).
    #[error("{step}: the answer has no {what}")]
    Incomplete {
        /// What was being done.
        step: String,
        /// What was missing.
        what: &'static str,
    },
    /// A queue name the topology and prefix produce is not a valid SQS name.
    #[error("queue name {0:?} is not valid (1–80 characters: letters, digits, '-', '_')")]
    InvalidQueueName(String),
}

fn request_error<E>(step: impl Into<String>, err: E) -> SetupError
where
    E: std::error::Error + Send + Sync + 'static,
{
    SetupError::Request {
        step: step.into(),
        message: DisplayErrorContext(&err).to_string(),
        source: Some(Box::new(err)),
    }
}

fn build_error<E>(step: &str) -> impl FnOnce(E) -> SetupError + '_
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |e| request_error(format!("{step} (building the request)"), e)
}

fn valid_queue_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 80 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Create (or find) the table and the queues of `topology`.
///
/// The table is `table_name`; each queue is named `queue_prefix` + its spec name
/// (`switchyard-tier-2`, dead-letter queue `switchyard-tier-2-dlq`). Idempotent: run it again
/// after a manifest change and new tiers get their queues, existing queues get the topology's
/// visibility timeout and redrive policy.
pub async fn ensure_resources(
    ddb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    topology: &Topology,
    table_name: &str,
    queue_prefix: &str,
) -> Result<ResourceUrls, SetupError> {
    ensure_table(ddb, topology, table_name).await?;
    let mut urls = ResourceUrls {
        table: table_name.to_string(),
        queues: BTreeMap::new(),
        dead_letter_arns: BTreeMap::new(),
        env: BTreeMap::new(),
    };
    urls.env.insert(ENV_TABLE.to_string(), table_name.to_string());
    for spec in &topology.queues {
        let dlq_name = format!("{queue_prefix}{}", spec.id.dlq().name());
        let dlq_attributes =
            BTreeMap::from([(QueueAttributeName::MessageRetentionPeriod, DLQ_RETENTION_S.to_string())]);
        let dlq_url = ensure_queue(sqs, &dlq_name, dlq_attributes).await?;
        let dlq_arn = queue_arn(sqs, &dlq_name, &dlq_url).await?;
        let redrive = serde_json::json!({
            "deadLetterTargetArn": dlq_arn,
            "maxReceiveCount": spec.max_receive_count,
        });
        let name = format!("{queue_prefix}{}", spec.name);
        let attributes = BTreeMap::from([
            (QueueAttributeName::VisibilityTimeout, spec.visibility_timeout_s.to_string()),
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
        ]);
        let url = ensure_queue(sqs, &name, attributes).await?;
        urls.env.insert(spec.url_env.clone(), url.clone());
        urls.env.insert(format!("{}{}", spec.url_env, crate::sqs::DLQ_ENV_SUFFIX), dlq_url.clone());
        urls.queues.insert(spec.id, url);
        urls.queues.insert(spec.id.dlq(), dlq_url);
        urls.dead_letter_arns.insert(spec.id, dlq_arn);
    }
    Ok(urls)
}

/// Create the table unless it exists, wait until it is active, and turn TTL on.
async fn ensure_table(ddb: &aws_sdk_dynamodb::Client, topology: &Topology, table: &str) -> Result<(), SetupError> {
    let spec = &topology.table;
    let step = format!("CreateTable {table}");
    let key = |name: &str, key_type: KeyType| {
        KeySchemaElement::builder().attribute_name(name).key_type(key_type).build().map_err(build_error(&step))
    };
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(build_error(&step))
    };
    let mut request = ddb
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(spec.partition_key)?)
        .attribute_definitions(attribute(spec.sort_key)?)
        .key_schema(key(spec.partition_key, KeyType::Hash)?)
        .key_schema(key(spec.sort_key, KeyType::Range)?);
    for index in &spec.indexes {
        request = request
            .attribute_definitions(attribute(index.partition_key)?)
            .attribute_definitions(attribute(index.sort_key)?)
            .global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(index.name)
                    .key_schema(key(index.partition_key, KeyType::Hash)?)
                    .key_schema(key(index.sort_key, KeyType::Range)?)
                    .projection(if index.include.is_empty() {
                        Projection::builder().projection_type(ProjectionType::KeysOnly).build()
                    } else {
                        Projection::builder()
                            .projection_type(ProjectionType::Include)
                            .set_non_key_attributes(Some(index.include.iter().map(|a| a.to_string()).collect()))
                            .build()
                    })
                    .build()
                    .map_err(build_error(&step))?,
            );
    }
    match request.send().await {
        Ok(_) => {}
        Err(e) if e.code() == Some("ResourceInUseException") => {}
        Err(e) => return Err(request_error(step, e)),
    }
    ddb.wait_until_table_exists()
        .table_name(table)
        .wait(TABLE_ACTIVE_WAIT)
        .await
        .map_err(|e| request_error(format!("waiting for table {table}"), e))?;

    let step = format!("UpdateTimeToLive {table}");
    let ttl = ddb
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .map_err(|e| request_error(format!("DescribeTimeToLive {table}"), e))?;
    let status = ttl.time_to_live_description.and_then(|d| d.time_to_live_status);
    if !matches!(status, Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)) {
        let specification = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(spec.ttl_attribute)
            .build()
            .map_err(build_error(&step))?;
        ddb.update_time_to_live()
            .table_name(table)
            .time_to_live_specification(specification)
            .send()
            .await
            .map_err(|e| request_error(step, e))?;
    }
    Ok(())
}

/// Create a queue with `attributes`, or find it and set them; answers its URL.
async fn ensure_queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    attributes: BTreeMap<QueueAttributeName, String>,
) -> Result<String, SetupError> {
    if !valid_queue_name(name) {
        return Err(SetupError::InvalidQueueName(name.to_string()));
    }
    let step = format!("CreateQueue {name}");
    let mut create = sqs.create_queue().queue_name(name);
    for (key, value) in &attributes {
        create = create.attributes(key.clone(), value.clone());
    }
    match create.send().await {
        Ok(out) => return out.queue_url.ok_or(SetupError::Incomplete { step, what: "queue URL" }),
        // Exists with other attributes: find it and bring the attributes in line.
        Err(e) if e.code().is_some_and(|c| c.contains("QueueAlreadyExists") || c.contains("QueueNameExists")) => {}
        Err(e) => return Err(request_error(step, e)),
    }
    let step = format!("GetQueueUrl {name}");
    let url = sqs
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .map_err(|e| request_error(step.clone(), e))?
        .queue_url
        .ok_or(SetupError::Incomplete { step, what: "queue URL" })?;
    let mut set = sqs.set_queue_attributes().queue_url(&url);
    for (key, value) in attributes {
        set = set.attributes(key, value);
    }
    set.send().await.map_err(|e| request_error(format!("SetQueueAttributes {name}"), e))?;
    Ok(url)
}

async fn queue_arn(sqs: &aws_sdk_sqs::Client, name: &str, url: &str) -> Result<String, SetupError> {
    let step = format!("GetQueueAttributes {name}");
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| request_error(step.clone(), e))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or(SetupError::Incomplete { step, what: "queue ARN" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_follow_sqs_rules() {
        assert!(valid_queue_name("switchyard-tier-2-dlq"));
        assert!(!valid_queue_name("switchyard.tier"));
        assert!(!valid_queue_name(&"x".repeat(81)));
    }

    #[test]
    fn export_lines_name_every_variable() {
        let urls = ResourceUrls {
            table: "t".into(),
            queues: BTreeMap::new(),
            dead_letter_arns: BTreeMap::new(),
            env: BTreeMap::from([("SWITCHYARD_TABLE".to_string(), "t".to_string())]),
        };
        assert_eq!(urls.export_lines(), ["export SWITCHYARD_TABLE=t"]);
    }
}
