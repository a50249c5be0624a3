//! The AWS SAM template of a deployment, rendered from the manifest and checked against it.
//!
//! [`render`] turns [`Topology::for_manifest`] into `infra/template.yaml`: one queue and
//! dead-letter queue per tier (plus route and synth), one agent-worker function per tier, the
//! table, the HTTP API, a least-privilege role per function and alarms on every queue. The
//! output is deterministic, so the committed template can be compared byte for byte with a fresh
//! render.
//!
//! [`check`] reads any template (the committed one, or one edited by hand, with `!Ref` short
//! tags or `{"Ref": …}` long forms) and reports every way it disagrees with the manifest: a
//! missing tier queue, dead-letter queue or worker, a timeout too short for the tier, a
//! visibility timeout under 6 × the function timeout, too few receives before dead-lettering, an
//! SQS event source without `ReportBatchItemFailures`, a wrong batch size or reserved
//! concurrency, a missing or wrong environment variable, a send permission too many or too few,
//! an events-stream function without its response-streaming Function URL.
//!
//! This crate is linked only by the `switchyard` CLI and the tests: the Lambda functions never
//! render templates, so they do not carry this code.
//!
//! # Layout
//!
//! - this file: the functions, queues and names a deployment has, shared by both sides;
//! - [`render`]: the template written from the manifest;
//! - [`check`]: a template read and compared with the manifest;
//! - `yaml`: the YAML writer the renderer builds values with.
#![warn(missing_docs)]

use switchyard_engine::ports::{QueueId, QueueKind};
use switchyard_model::limits::{LAMBDA_MAX_TIMEOUT_S, SQS_MAX_DELAY_S};
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::{QueueSpec, Topology, CONTROL_FUNCTION_TIMEOUT_S};

mod check;
mod render;
mod yaml;

pub use check::check;
pub use render::render;
use render::{bedrock_models, lambda_functions};

/// The command that rewrites the committed template; drift messages tell the reader to run it.
pub const RENDER_COMMAND: &str = "switchyard infra render > infra/template.yaml";

/// Where the committed template lives, relative to the workspace root.
pub const TEMPLATE_PATH: &str = "infra/template.yaml";

/// Logical id of the DynamoDB table.
pub const TABLE_ID: &str = "Table";
/// Logical id of the HTTP API.
pub const API_ID: &str = "HttpApi";
/// Name of the HTTP API's JWT authorizer.
pub const AUTHORIZER: &str = "JwtAuthorizer";
/// Days the functions' log groups keep their logs.
pub const LOG_RETENTION_DAYS: u64 = 30;
/// Memory of every function, in MB.
pub const MEMORY_MB: u64 = 256;
/// How long a queue keeps a message nobody consumed (SQS's default, 4 days, written out): far
/// past any query's deadline, so only a dead consumer lets a message expire.
pub const QUEUE_RETENTION_S: u64 = 4 * 24 * 3_600;
/// How long a dead-letter queue keeps a message (SQS's maximum, 14 days), so there is time to look.
pub const DLQ_RETENTION_S: u64 = 14 * 24 * 3_600;

/// Logical id of the layer that ships the cascade's sentence encoder (`classifier.encoder`).
pub const ENCODER_LAYER_ID: &str = "EncoderLayer";

/// Where Lambda unpacks a layer: the encoder's folder in the functions that read it
/// (`SWITCHYARD_ENCODER`).
pub const LAYER_MOUNT: &str = "/opt";

const RUNTIME: &str = "provided.al2023";
const ARCHITECTURE: &str = "arm64";
const HANDLER: &str = "bootstrap";
const BUILD_METHOD: &str = "rust-cargolambda";
const REPORT_BATCH_ITEM_FAILURES: &str = "ReportBatchItemFailures";
/// The events-stream function's timeout: Lambda's longest, so a live stream can follow a query
/// for 15 minutes; the follower ends its stream a minute earlier
/// (`switchyard_engine::follow::FollowSettings::max_duration`) and the client resumes.
pub const STREAM_FUNCTION_TIMEOUT_S: u64 = LAMBDA_MAX_TIMEOUT_S;
/// The Function URL's invoke mode that sends the response as it is written.
pub const STREAM_INVOKE_MODE: &str = "RESPONSE_STREAM";
/// What intake and events-stream (which accepts streamed chat completions) may do with the
/// table; the SQS consumers use the same set.
const TABLE_ACTIONS: [&str; 9] = [
    "dynamodb:BatchGetItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:DescribeTable",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
];
const CONSUME_ACTIONS: [&str; 4] =
    ["sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"];

/// One Lambda function of a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSpec {
    /// Function name: `intake`, `router`, `agent-worker-tier-2`, `synthesizer`.
    pub name: String,
    /// The workspace binary it runs: `intake`, `router`, `agent-worker`, `synthesizer`.
    pub binary: &'static str,
    /// The tier an agent-worker serves (its `SWITCHYARD_TIER`).
    pub tier: Option<u8>,
    /// The queue it consumes, if any (intake is fed by the HTTP API).
    pub consumes: Option<QueueId>,
    /// Its timeout, in seconds.
    pub timeout_s: u64,
    /// Lambda event source batch size of the queue it consumes.
    pub batch_size: Option<u32>,
    /// Reserved concurrency, when the manifest sets one.
    pub reserved_concurrency: Option<u32>,
    /// The queues it writes to: the only ones its role may send to.
    pub sends_to: Vec<QueueId>,
    /// Bedrock models its agents call (`llm` agents on a `bedrock` provider).
    pub bedrock_models: Vec<String>,
    /// Lambda functions its agents invoke (`lambda` agents).
    pub lambda_functions: Vec<String>,
    /// Served by a Function URL with response streaming (and verifies callers' JWTs itself),
    /// instead of the HTTP API or a queue.
    pub streaming: bool,
    /// Classifies questions with a manifest that names a sentence encoder: it gets the encoder
    /// layer, and `SWITCHYARD_ENCODER` pointing at it.
    pub encoder: bool,
}

/// The output naming the Function URL of the streamed routes.
pub const STREAM_URL_OUTPUT: &str = "EventsStreamUrl";

/// Name (and binary) of the function that serves the streamed routes.
pub const STREAM_FUNCTION: &str = "events-stream";

/// The functions of a deployment: intake, router, one agent-worker per tier, synthesizer, and
/// events-stream (the streamed routes: live events and chat completions, behind a Function URL).
///
/// Who writes where: intake -> route; router -> every tier (dispatches) and synth (the deadline);
/// a worker -> every tier (its own for retries, another for a fallback agent) and synth (fan-in);
/// synthesizer -> synth (the deadline, chained past SQS's 15-minute delay).
pub fn functions(manifest: &Manifest, topology: &Topology) -> Vec<FunctionSpec> {
    let tiers: Vec<QueueId> =
        topology.queues.iter().filter(|q| matches!(q.id.kind, QueueKind::Tier(_))).map(|q| q.id).collect();
    let mut to_tiers_and_synth = tiers.clone();
    to_tiers_and_synth.push(QueueId::synth());
    let consumer = |q: &QueueSpec, binary: &'static str, tier: Option<u8>, sends_to: Vec<QueueId>| FunctionSpec {
        name: q.consumer.clone(),
        binary,
        tier,
        consumes: Some(q.id),
        timeout_s: q.function_timeout_s,
        batch_size: Some(q.batch_size),
        reserved_concurrency: q.reserved_concurrency,
        sends_to,
        bedrock_models: tier.map(|t| bedrock_models(manifest, t)).unwrap_or_default(),
        lambda_functions: tier.map(|t| lambda_functions(manifest, t)).unwrap_or_default(),
        streaming: false,
        encoder: false,
    };
    // Intake and the streamed chat completions classify questions; only they read the encoder.
    let encoder = manifest.classifier.encoder.is_some();
    let mut functions = vec![FunctionSpec {
        name: "intake".to_string(),
        binary: "intake",
        tier: None,
        consumes: None,
        timeout_s: CONTROL_FUNCTION_TIMEOUT_S,
        batch_size: None,
        reserved_concurrency: None,
        sends_to: vec![QueueId::route()],
        bedrock_models: Vec::new(),
        lambda_functions: Vec::new(),
        streaming: false,
        encoder,
    }];
    for q in &topology.queues {
        functions.push(match q.id.kind {
            QueueKind::Route => consumer(q, "router", None, to_tiers_and_synth.clone()),
            QueueKind::Tier(t) => consumer(q, "agent-worker", Some(t), to_tiers_and_synth.clone()),
            QueueKind::Synth => consumer(q, "synthesizer", None, vec![QueueId::synth()]),
        });
    }
    // Intake, router, workers by tier, synthesizer: the order of the flow.
    let synth = functions.iter().position(|f| f.consumes == Some(QueueId::synth()));
    if let Some(i) = synth {
        let f = functions.remove(i);
        functions.push(f);
    }
    // The streamed routes: the live events endpoint reads the table; a chat completion is a
    // query accepted as intake accepts one (its record, its route job).
    functions.push(FunctionSpec {
        name: STREAM_FUNCTION.to_string(),
        binary: STREAM_FUNCTION,
        tier: None,
        consumes: None,
        timeout_s: STREAM_FUNCTION_TIMEOUT_S,
        batch_size: None,
        reserved_concurrency: None,
        sends_to: vec![QueueId::route()],
        bedrock_models: Vec::new(),
        lambda_functions: Vec::new(),
        streaming: true,
        encoder,
    });
    functions
}

/// `agent-worker-tier-2` -> `AgentWorkerTier2`: the stem of a function's logical ids.
pub fn pascal_case(name: &str) -> String {
    name.split(['-', '_'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

/// Logical id of a function: `RouterFunction`, `AgentWorkerTier2Function`.
pub fn function_id(name: &str) -> String {
    format!("{}Function", pascal_case(name))
}

/// Logical id of a queue: `Tier2Queue`, or `Tier2DeadLetterQueue` for its dead-letter queue.
pub fn queue_id(id: QueueId) -> String {
    let base = pascal_case(&QueueId { kind: id.kind, dead_letter: false }.name());
    if id.dead_letter {
        format!("{base}DeadLetterQueue")
    } else {
        format!("{base}Queue")
    }
}

/// Alarm threshold on a queue's `ApproximateAgeOfOldestMessage`, in seconds: two visibility
/// timeouts (a message received and lost twice), plus SQS's longest delay on the queues that carry
/// delayed messages (tier retries with backoff, synth deadlines), so a delayed message is never
/// mistaken for a stuck one.
pub fn age_alarm_threshold_s(queue: &QueueSpec) -> u64 {
    let delayed = if queue.id.kind == QueueKind::Route { 0 } else { SQS_MAX_DELAY_S };
    2 * queue.visibility_timeout_s + delayed
}

#[cfg(test)]
mod tests;
