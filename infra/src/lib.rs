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
#![warn(missing_docs)]

use serde_yaml::value::{Tag, TaggedValue};
use serde_yaml::{Mapping, Value};
use std::collections::BTreeSet;
use switchyard_engine::handlers::HTTP_ROUTES;
use switchyard_engine::jwt::{ENV_JWT_AUDIENCE, ENV_JWT_ISSUER, ENV_JWT_JWKS};
use switchyard_engine::ports::{QueueId, QueueKind};
use switchyard_model::limits::{LAMBDA_MAX_TIMEOUT_S, MAX_ATTEMPT_TIMEOUT_MS, SQS_MAX_DELAY_S, WORKER_MARGIN_S};
use switchyard_model::manifest::{Manifest, TierTimeout};
use switchyard_model::topology::{
    QueueSpec, Topology, CONTROL_FUNCTION_TIMEOUT_S, ENV_TABLE, ENV_TIER, VISIBILITY_FACTOR,
};

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
    };
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

// ---- rendering -----------------------------------------------------------------------------

fn s(text: &str) -> Value {
    Value::String(text.to_string())
}

fn n(number: u64) -> Value {
    Value::Number(number.into())
}

fn seq(items: Vec<Value>) -> Value {
    Value::Sequence(items)
}

fn strings(items: &[&str]) -> Value {
    seq(items.iter().map(|i| s(i)).collect())
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    let mut m = Mapping::new();
    for (k, v) in entries {
        m.insert(s(k), v);
    }
    Value::Mapping(m)
}

fn tagged(tag: &str, value: Value) -> Value {
    Value::Tagged(Box::new(TaggedValue { tag: Tag::new(tag), value }))
}

fn reference(id: &str) -> Value {
    tagged("Ref", s(id))
}

fn get_att(id: &str, attribute: &str) -> Value {
    tagged("GetAtt", s(&format!("{id}.{attribute}")))
}

fn sub(text: &str) -> Value {
    tagged("Sub", s(text))
}

fn policy(name: &str, statements: Vec<Value>) -> Value {
    map(vec![
        ("PolicyName", s(name)),
        ("PolicyDocument", map(vec![("Version", s("2012-10-17")), ("Statement", seq(statements))])),
    ])
}

fn allow(actions: &[&str], resources: Vec<Value>) -> Value {
    map(vec![("Effect", s("Allow")), ("Action", strings(actions)), ("Resource", seq(resources))])
}

fn queue_description(id: QueueId) -> String {
    match id.kind {
        QueueKind::Route => "route queue (intake -> router)".to_string(),
        QueueKind::Tier(t) => format!("tier-{t} queue (router and workers -> tier-{t} agent-worker)"),
        QueueKind::Synth => "synth queue (workers and deadlines -> synthesizer)".to_string(),
    }
}

/// Models of the tier's `llm` agents whose provider is Bedrock.
fn bedrock_models(manifest: &Manifest, tier: u8) -> Vec<String> {
    let mut models: Vec<String> = manifest
        .agents
        .iter()
        .filter(|a| a.tier == tier)
        .filter_map(|a| a.llm.as_ref())
        .filter_map(|llm| {
            let provider = manifest.providers.iter().find(|p| p.id == llm.provider)?;
            (provider.kind == switchyard_model::manifest::ProviderKind::Bedrock)
                .then(|| llm.model.clone().or_else(|| provider.model.clone()))?
        })
        .collect();
    models.sort();
    models.dedup();
    models
}

/// Functions the tier's `lambda` agents invoke.
fn lambda_functions(manifest: &Manifest, tier: u8) -> Vec<String> {
    let mut names: Vec<String> = manifest
        .agents
        .iter()
        .filter(|a| a.tier == tier)
        .filter_map(|a| a.lambda.as_ref())
        .map(|l| l.function.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The ARN pattern of a function named by name or ARN (any version or alias).
fn lambda_arns(function: &str) -> Vec<Value> {
    if function.starts_with("arn:") {
        vec![s(function), s(&format!("{function}:*"))]
    } else {
        vec![
            sub(&format!("arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:${{AWS::AccountId}}:function:{function}")),
            sub(&format!("arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:${{AWS::AccountId}}:function:{function}:*")),
        ]
    }
}

/// The SAM template for `manifest`, as committed in `infra/template.yaml`.
pub fn render(manifest: &Manifest) -> String {
    let topology = Topology::for_manifest(manifest);
    let functions = functions(manifest, &topology);
    let tiers: Vec<String> = topology
        .queues
        .iter()
        .filter_map(|q| match q.id.kind {
            QueueKind::Tier(t) => Some(t.to_string()),
            _ => None,
        })
        .collect();

    let mut root = Mapping::new();
    root.insert(s("AWSTemplateFormatVersion"), s("2010-09-09"));
    root.insert(s("Transform"), s("AWS::Serverless-2016-10-31"));
    root.insert(
        s("Description"),
        s(&format!(
            "Switchyard multi-agent orchestrator for manifest `{}`: HTTP API, router, one agent-worker per tier ({}), synthesizer, SQS queues with dead-letter queues, one DynamoDB table.",
            manifest.name,
            tiers.join(", ")
        )),
    );
    root.insert(s("Parameters"), parameters());
    root.insert(
        s("Conditions"),
        map(vec![(
            "HasAlarmTopic",
            map(vec![("Fn::Not", seq(vec![map(vec![("Fn::Equals", seq(vec![reference("AlarmTopicArn"), s("")]))])]))]),
        )]),
    );
    root.insert(s("Globals"), globals(&topology));

    let mut resources = Mapping::new();
    resources.insert(s(API_ID), http_api());
    resources.insert(s(TABLE_ID), table(&topology));
    for q in &topology.queues {
        resources.insert(s(&queue_id(q.id)), queue(q));
        resources.insert(s(&queue_id(q.id.dlq())), dead_letter_queue(q));
    }
    for f in &functions {
        let stem = pascal_case(&f.name);
        resources.insert(s(&format!("{stem}LogGroup")), log_group());
        resources.insert(s(&format!("{stem}Role")), role(f, &stem));
        resources.insert(s(&function_id(&f.name)), function(f, &stem));
    }
    for q in &topology.queues {
        let stem = pascal_case(&q.name);
        resources.insert(s(&format!("{stem}DeadLetterAlarm")), dead_letter_alarm(q));
        resources.insert(s(&format!("{stem}AgeAlarm")), age_alarm(q));
    }
    root.insert(s("Resources"), Value::Mapping(resources));
    root.insert(s("Outputs"), outputs(&topology));

    let body = match serde_yaml::to_string(&Value::Mapping(root)) {
        Ok(text) => text,
        Err(e) => return format!("# switchyard infra render failed: {e}\n"),
    };
    format!("{}{}", header(manifest), space_out(&quote_dates(&body)))
}

/// serde_yaml writes `2012-10-17` bare, which YAML 1.1 readers (CloudFormation's among them) may
/// take for a date; the template and policy language versions must stay strings.
fn quote_dates(body: &str) -> String {
    ["2010-09-09", "2012-10-17"]
        .iter()
        .fold(body.to_string(), |text, date| text.replace(&format!(": {date}\n"), &format!(": '{date}'\n")))
}

fn header(manifest: &Manifest) -> String {
    format!(
        "# Switchyard on AWS, generated from routing.yaml (manifest `{}`) by `switchyard infra render`.\n\
         # Do not edit by hand: change routing.yaml, then run\n\
         #   {RENDER_COMMAND}\n\
         # `switchyard infra check` and tests/infra_template.rs fail when the two disagree.\n",
        manifest.name
    )
}

/// A blank line before each top-level section and each resource, for the reader.
fn space_out(body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1024);
    let mut in_resources = false;
    for (i, line) in body.lines().enumerate() {
        let top_level = !line.starts_with(' ') && !line.starts_with('-');
        if top_level {
            in_resources = line == "Resources:";
        }
        let resource = in_resources && line.starts_with("  ") && !line.starts_with("   ") && line.ends_with(':');
        if i > 0 && (top_level || resource) {
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn parameters() -> Value {
    map(vec![
        (
            "JwtIssuer",
            map(vec![
                ("Type", s("String")),
                ("Description", s("Issuer (iss) of the JWTs callers present, e.g. a Cognito user pool URL.")),
            ]),
        ),
        (
            "JwtAudience",
            map(vec![
                ("Type", s("CommaDelimitedList")),
                ("Description", s("Accepted audiences (aud) of the JWTs, comma separated.")),
            ]),
        ),
        (
            "JwtJwks",
            map(vec![
                ("Type", s("String")),
                (
                    "Description",
                    s("The issuer's JWKS document (JSON, e.g. the user pool's /.well-known/jwks.json): the keys the events-stream function verifies tokens with, since its Function URL has no authorizer."),
                ),
            ]),
        ),
        (
            "AlarmTopicArn",
            map(vec![
                ("Type", s("String")),
                ("Default", s("")),
                ("Description", s("SNS topic the alarms notify; empty for none.")),
            ]),
        ),
    ])
}

fn globals(topology: &Topology) -> Value {
    let mut variables = vec![(ENV_TABLE.to_string(), reference(TABLE_ID))];
    for q in &topology.queues {
        variables.push((q.url_env.clone(), reference(&queue_id(q.id))));
    }
    let mut vars = Mapping::new();
    for (k, v) in variables {
        vars.insert(Value::String(k), v);
    }
    map(vec![(
        "Function",
        map(vec![
            ("CodeUri", s("..")),
            ("Runtime", s(RUNTIME)),
            ("Handler", s(HANDLER)),
            ("Architectures", strings(&[ARCHITECTURE])),
            ("MemorySize", n(MEMORY_MB)),
            // X-Ray traces of every invocation (SAM adds the write permission to each role).
            ("Tracing", s("Active")),
            ("Environment", map(vec![("Variables", Value::Mapping(vars))])),
        ]),
    )])
}

fn http_api() -> Value {
    map(vec![
        ("Type", s("AWS::Serverless::HttpApi")),
        (
            "Properties",
            map(vec![
                (
                    "Auth",
                    map(vec![
                        (
                            "Authorizers",
                            map(vec![(
                                AUTHORIZER,
                                map(vec![
                                    ("IdentitySource", s("$request.header.Authorization")),
                                    (
                                        "JwtConfiguration",
                                        map(vec![
                                            ("issuer", reference("JwtIssuer")),
                                            ("audience", reference("JwtAudience")),
                                        ]),
                                    ),
                                ]),
                            )]),
                        ),
                        ("DefaultAuthorizer", s(AUTHORIZER)),
                    ]),
                ),
                ("FailOnWarnings", Value::Bool(true)),
            ]),
        ),
    ])
}

/// An index's projection: keys only, or the keys and its `include` attributes.
fn projection(index: &switchyard_model::topology::IndexSpec) -> Value {
    if index.include.is_empty() {
        return map(vec![("ProjectionType", s("KEYS_ONLY"))]);
    }
    map(vec![("ProjectionType", s("INCLUDE")), ("NonKeyAttributes", seq(index.include.iter().map(|a| s(a)).collect()))])
}

fn table(topology: &Topology) -> Value {
    let t = &topology.table;
    let mut attributes = vec![t.partition_key, t.sort_key];
    for index in &t.indexes {
        attributes.push(index.partition_key);
        attributes.push(index.sort_key);
    }
    let key_schema = |pk: &str, sk: &str| {
        seq(vec![
            map(vec![("AttributeName", s(pk)), ("KeyType", s("HASH"))]),
            map(vec![("AttributeName", s(sk)), ("KeyType", s("RANGE"))]),
        ])
    };
    map(vec![
        ("Type", s("AWS::DynamoDB::Table")),
        ("DeletionPolicy", s("Retain")),
        ("UpdateReplacePolicy", s("Retain")),
        (
            "Properties",
            map(vec![
                ("BillingMode", s("PAY_PER_REQUEST")),
                (
                    "AttributeDefinitions",
                    seq(attributes
                        .iter()
                        .map(|a| map(vec![("AttributeName", s(a)), ("AttributeType", s("S"))]))
                        .collect()),
                ),
                ("KeySchema", key_schema(t.partition_key, t.sort_key)),
                (
                    "GlobalSecondaryIndexes",
                    seq(t
                        .indexes
                        .iter()
                        .map(|i| {
                            map(vec![
                                ("IndexName", s(i.name)),
                                ("KeySchema", key_schema(i.partition_key, i.sort_key)),
                                ("Projection", projection(i)),
                            ])
                        })
                        .collect()),
                ),
                (
                    "TimeToLiveSpecification",
                    map(vec![("AttributeName", s(t.ttl_attribute)), ("Enabled", Value::Bool(true))]),
                ),
                ("PointInTimeRecoverySpecification", map(vec![("PointInTimeRecoveryEnabled", Value::Bool(true))])),
                ("SSESpecification", map(vec![("SSEEnabled", Value::Bool(true))])),
            ]),
        ),
    ])
}

fn queue(q: &QueueSpec) -> Value {
    map(vec![
        ("Type", s("AWS::SQS::Queue")),
        ("DeletionPolicy", s("Delete")),
        ("UpdateReplacePolicy", s("Delete")),
        (
            "Properties",
            map(vec![
                ("VisibilityTimeout", n(q.visibility_timeout_s)),
                ("MessageRetentionPeriod", n(QUEUE_RETENTION_S)),
                ("SqsManagedSseEnabled", Value::Bool(true)),
                (
                    "RedrivePolicy",
                    map(vec![
                        ("deadLetterTargetArn", get_att(&queue_id(q.id.dlq()), "Arn")),
                        ("maxReceiveCount", n(u64::from(q.max_receive_count))),
                    ]),
                ),
            ]),
        ),
    ])
}

fn dead_letter_queue(_q: &QueueSpec) -> Value {
    map(vec![
        ("Type", s("AWS::SQS::Queue")),
        ("DeletionPolicy", s("Delete")),
        ("UpdateReplacePolicy", s("Delete")),
        (
            "Properties",
            map(vec![("MessageRetentionPeriod", n(DLQ_RETENTION_S)), ("SqsManagedSseEnabled", Value::Bool(true))]),
        ),
    ])
}

fn log_group() -> Value {
    map(vec![
        ("Type", s("AWS::Logs::LogGroup")),
        ("DeletionPolicy", s("Delete")),
        ("UpdateReplacePolicy", s("Delete")),
        ("Properties", map(vec![("RetentionInDays", n(LOG_RETENTION_DAYS))])),
    ])
}

fn role(f: &FunctionSpec, stem: &str) -> Value {
    let mut policies = vec![
        policy(
            "logs",
            vec![allow(
                &["logs:CreateLogStream", "logs:PutLogEvents"],
                vec![get_att(&format!("{stem}LogGroup"), "Arn")],
            )],
        ),
        policy(
            "table",
            vec![allow(&TABLE_ACTIONS, vec![get_att(TABLE_ID, "Arn"), sub(&format!("${{{TABLE_ID}.Arn}}/index/*"))])],
        ),
    ];
    if !f.sends_to.is_empty() {
        policies.push(policy(
            "send",
            vec![allow(&["sqs:SendMessage"], f.sends_to.iter().map(|q| get_att(&queue_id(*q), "Arn")).collect())],
        ));
    }
    if let Some(q) = f.consumes {
        policies.push(policy("consume", vec![allow(&CONSUME_ACTIONS, vec![get_att(&queue_id(q), "Arn")])]));
    }
    // Only the models and functions the tier's agents name (least privilege).
    let mut agent_statements = Vec::new();
    if !f.bedrock_models.is_empty() {
        let models = f
            .bedrock_models
            .iter()
            .map(|m| sub(&format!("arn:${{AWS::Partition}}:bedrock:${{AWS::Region}}::foundation-model/{m}")))
            .collect();
        agent_statements.push(allow(&["bedrock:InvokeModel"], models));
    }
    if !f.lambda_functions.is_empty() {
        agent_statements
            .push(allow(&["lambda:InvokeFunction"], f.lambda_functions.iter().flat_map(|n| lambda_arns(n)).collect()));
    }
    if !agent_statements.is_empty() {
        policies.push(policy("agents", agent_statements));
    }
    map(vec![
        ("Type", s("AWS::IAM::Role")),
        (
            "Properties",
            map(vec![
                (
                    "AssumeRolePolicyDocument",
                    map(vec![
                        ("Version", s("2012-10-17")),
                        (
                            "Statement",
                            seq(vec![map(vec![
                                ("Effect", s("Allow")),
                                ("Principal", map(vec![("Service", s("lambda.amazonaws.com"))])),
                                ("Action", s("sts:AssumeRole")),
                            ])]),
                        ),
                    ]),
                ),
                ("Policies", seq(policies)),
            ]),
        ),
    ])
}

fn function_description(f: &FunctionSpec) -> String {
    match (f.tier, f.consumes.map(|q| q.kind)) {
        (Some(t), _) => format!("Runs the tier-{t} agents: timeout, retries, fallback, handoff, fan-in."),
        (None, Some(QueueKind::Route)) => "Classifies, plans and dispatches each query; arms its deadline.".to_string(),
        (None, Some(QueueKind::Synth)) => "Merges handoffs into the final answer; fires deadlines.".to_string(),
        _ if f.streaming => {
            "The streamed routes: verifies the caller's JWT; streams a query's events, and chat completions as they are written.".to_string()
        }
        _ => "The HTTP API: accepts queries, serves their status and events.".to_string(),
    }
}

fn function(f: &FunctionSpec, stem: &str) -> Value {
    let mut props = vec![
        ("Description", s(&function_description(f))),
        ("Timeout", n(f.timeout_s)),
        ("Role", get_att(&format!("{stem}Role"), "Arn")),
        ("LoggingConfig", map(vec![("LogFormat", s("JSON")), ("LogGroup", reference(&format!("{stem}LogGroup")))])),
    ];
    if let Some(c) = f.reserved_concurrency {
        props.push(("ReservedConcurrentExecutions", n(u64::from(c))));
    }
    if let Some(t) = f.tier {
        props.push(("Environment", map(vec![("Variables", map(vec![(ENV_TIER, s(&t.to_string()))]))])));
    }
    if f.streaming {
        // A Function URL has no JWT authorizer: the function checks the token itself, against
        // the same issuer and audiences as the HTTP API's authorizer.
        let audience = map(vec![("Fn::Join", seq(vec![s(","), reference("JwtAudience")]))]);
        props.push((
            "Environment",
            map(vec![(
                "Variables",
                map(vec![
                    (ENV_JWT_ISSUER, reference("JwtIssuer")),
                    (ENV_JWT_AUDIENCE, audience),
                    (ENV_JWT_JWKS, reference("JwtJwks")),
                ]),
            )]),
        ));
        props.push(("FunctionUrlConfig", map(vec![("AuthType", s("NONE")), ("InvokeMode", s(STREAM_INVOKE_MODE))])));
        return map(vec![
            ("Type", s("AWS::Serverless::Function")),
            (
                "Metadata",
                map(vec![("BuildMethod", s(BUILD_METHOD)), ("BuildProperties", map(vec![("Binary", s(f.binary))]))]),
            ),
            ("Properties", map(props)),
        ]);
    }
    let events = match f.consumes {
        Some(q) => map(vec![(
            "Queue",
            map(vec![
                ("Type", s("SQS")),
                (
                    "Properties",
                    map(vec![
                        ("Queue", get_att(&queue_id(q), "Arn")),
                        ("BatchSize", n(u64::from(f.batch_size.unwrap_or(1)))),
                        ("FunctionResponseTypes", strings(&[REPORT_BATCH_ITEM_FAILURES])),
                    ]),
                ),
            ]),
        )]),
        None => {
            let mut events = Mapping::new();
            for (method, path) in HTTP_ROUTES {
                let method = &method.to_lowercase();
                events.insert(
                    s(&http_event_name(method, path)),
                    map(vec![
                        ("Type", s("HttpApi")),
                        (
                            "Properties",
                            map(vec![("ApiId", reference(API_ID)), ("Method", s(method)), ("Path", s(path))]),
                        ),
                    ]),
                );
            }
            Value::Mapping(events)
        }
    };
    props.push(("Events", events));
    map(vec![
        ("Type", s("AWS::Serverless::Function")),
        (
            "Metadata",
            map(vec![("BuildMethod", s(BUILD_METHOD)), ("BuildProperties", map(vec![("Binary", s(f.binary))]))]),
        ),
        ("Properties", map(props)),
    ])
}

/// `("get", "/v1/queries/{id}/events")` -> `GetQueryEvents`.
fn http_event_name(method: &str, path: &str) -> String {
    if path == "/v1/manifest/routes" {
        return format!("{}ManifestRoutes", pascal_case(method));
    }
    if path == "/v1/signals" {
        return format!("{}Signals", pascal_case(method));
    }
    if path == "/v1/chat/completions" {
        return format!("{}ChatCompletions", pascal_case(method));
    }
    if path == "/v1/models" {
        return format!("{}Models", pascal_case(method));
    }
    let what = match path.trim_start_matches("/v1/queries").trim_start_matches("/{id}") {
        "" if path.ends_with("{id}") => "Query",
        "" => "Queries",
        "/events" => "QueryEvents",
        "/feedback" => "QueryFeedback",
        _ => "Route",
    };
    format!("{}{what}", pascal_case(method))
}

fn alarm(description: String, metric: &str, queue: Value, threshold: u64, periods: u64) -> Value {
    map(vec![
        ("Type", s("AWS::CloudWatch::Alarm")),
        (
            "Properties",
            map(vec![
                ("AlarmDescription", s(&description)),
                ("Namespace", s("AWS/SQS")),
                ("MetricName", s(metric)),
                ("Dimensions", seq(vec![map(vec![("Name", s("QueueName")), ("Value", queue)])])),
                ("Statistic", s("Maximum")),
                ("Period", n(60)),
                ("EvaluationPeriods", n(periods)),
                ("Threshold", n(threshold)),
                ("ComparisonOperator", s("GreaterThanThreshold")),
                ("TreatMissingData", s("notBreaching")),
                (
                    "AlarmActions",
                    map(vec![(
                        "Fn::If",
                        seq(vec![s("HasAlarmTopic"), seq(vec![reference("AlarmTopicArn")]), reference("AWS::NoValue")]),
                    )]),
                ),
            ]),
        ),
    ])
}

fn dead_letter_alarm(q: &QueueSpec) -> Value {
    alarm(
        format!(
            "Messages of the {} failed {} receives and wait in its dead-letter queue.",
            queue_description(q.id),
            q.max_receive_count
        ),
        "ApproximateNumberOfMessagesVisible",
        get_att(&queue_id(q.id.dlq()), "QueueName"),
        0,
        1,
    )
}

fn age_alarm(q: &QueueSpec) -> Value {
    let threshold = age_alarm_threshold_s(q);
    alarm(
        format!(
            "The oldest message of the {} is older than {threshold} s: its consumer is stuck or starved.",
            queue_description(q.id)
        ),
        "ApproximateAgeOfOldestMessage",
        get_att(&queue_id(q.id), "QueueName"),
        threshold,
        1,
    )
}

fn outputs(topology: &Topology) -> Value {
    let mut out = Mapping::new();
    out.insert(
        s("ApiUrl"),
        map(vec![
            ("Description", s("Base URL of the HTTP API (POST /v1/queries).")),
            ("Value", sub(&format!("https://${{{API_ID}}}.execute-api.${{AWS::Region}}.${{AWS::URLSuffix}}"))),
        ]),
    );
    out.insert(
        s(STREAM_URL_OUTPUT),
        map(vec![
            (
                "Description",
                s("Base URL of the streamed routes (GET /v1/queries/{id}/events and POST /v1/chat/completions, sent as written through Lambda response streaming; Authorization: Bearer <JWT>)."),
            ),
            ("Value", get_att(&format!("{}Url", function_id(STREAM_FUNCTION)), "FunctionUrl")),
        ]),
    );
    out.insert(
        s("TableName"),
        map(vec![("Description", s(&format!("{ENV_TABLE}: the DynamoDB table."))), ("Value", reference(TABLE_ID))]),
    );
    for q in &topology.queues {
        let id = queue_id(q.id);
        out.insert(
            s(&format!("{id}Url")),
            map(vec![
                ("Description", s(&format!("{}: URL of the {}.", q.url_env, queue_description(q.id)))),
                ("Value", reference(&id)),
            ]),
        );
        let dlq = queue_id(q.id.dlq());
        out.insert(
            s(&format!("{dlq}Url")),
            map(vec![
                ("Description", s(&format!("URL of the {}'s dead-letter queue.", q.name))),
                ("Value", reference(&dlq)),
            ]),
        );
    }
    Value::Mapping(out)
}

// ---- checking ------------------------------------------------------------------------------

/// Every way `template_text` disagrees with the deployment `manifest` needs; empty when none.
///
/// Each message starts with the logical id of the resource at fault (or `routing.yaml` for a
/// problem of the manifest itself) and says what the manifest requires.
pub fn check(template_text: &str, manifest: &Manifest) -> Vec<String> {
    let mut problems = manifest_problems(manifest);
    let doc: Value = match serde_yaml::from_str(template_text) {
        Ok(doc) => doc,
        Err(e) => {
            problems.push(format!("the template is not YAML: {e}"));
            return problems;
        }
    };
    let empty = Mapping::new();
    let resources = doc.get("Resources").and_then(Value::as_mapping).unwrap_or(&empty);
    if resources.is_empty() {
        problems.push("the template has no Resources".to_string());
        return problems;
    }
    let template = Template { resources, globals: doc.get("Globals").and_then(|g| g.get("Function")) };
    let topology = Topology::for_manifest(manifest);
    let functions = functions(manifest, &topology);

    check_table(&template, &topology, &mut problems);
    check_api(&template, &mut problems);
    for q in &topology.queues {
        check_queue(&template, q, &mut problems);
    }
    for f in &functions {
        check_function(&template, &topology, f, &mut problems);
    }
    check_strays(&template, &topology, &functions, &mut problems);
    check_outputs(&doc, &topology, &mut problems);
    problems
}

/// Problems of the manifest itself that no template can fix.
fn manifest_problems(manifest: &Manifest) -> Vec<String> {
    let mut problems = Vec::new();
    let max_s = MAX_ATTEMPT_TIMEOUT_MS / 1_000;
    let too_long = |ms: u64| ms > MAX_ATTEMPT_TIMEOUT_MS;
    for tier in &manifest.tiers {
        if let TierTimeout::Fixed(d) = tier.timeout {
            if too_long(d.as_millis()) {
                problems.push(format!(
                    "routing.yaml: tier {} timeout {} s is longer than an attempt can run in one worker invocation ({max_s} s: Lambda's {LAMBDA_MAX_TIMEOUT_S} s less a {WORKER_MARGIN_S} s margin); the AgentWorkerTier{}Function timeout is capped at {LAMBDA_MAX_TIMEOUT_S} s and its attempts would be cut short",
                    tier.tier,
                    d.as_millis().div_ceil(1_000),
                    tier.tier
                ));
            }
        }
    }
    for agent in &manifest.agents {
        if let Some(d) = agent.timeout {
            if too_long(d.as_millis()) {
                problems.push(format!(
                    "routing.yaml: agent `{}` timeout {} s is longer than an attempt can run in one tier-{} worker invocation ({max_s} s)",
                    agent.id,
                    d.as_millis().div_ceil(1_000),
                    agent.tier
                ));
            }
        }
    }
    let mut tiers: Vec<_> = manifest.tiers.iter().filter_map(|t| Some((t.tier, t.reserved_concurrency?))).collect();
    tiers.sort_unstable();
    for pair in tiers.windows(2) {
        let ((lower, lower_c), (higher, higher_c)) = (pair[0], pair[1]);
        if higher_c > lower_c {
            problems.push(format!(
                "routing.yaml: tier {higher} reserves {higher_c} concurrent executions, more than tier {lower}'s {lower_c}; a lower tier has priority and must reserve at least as many"
            ));
        }
    }
    problems
}

struct Template<'a> {
    resources: &'a Mapping,
    globals: Option<&'a Value>,
}

impl<'a> Template<'a> {
    fn resource(&self, id: &str) -> Option<&'a Value> {
        self.resources.get(id)
    }

    /// The properties of resource `id` when it exists with type `ty`; otherwise a problem.
    fn typed(&self, id: &str, ty: &str, what: &str) -> Result<&'a Value, String> {
        let resource = self.resource(id).ok_or_else(|| format!("{id}: the {what} is missing"))?;
        let actual = resource.get("Type").and_then(Value::as_str).unwrap_or("");
        if actual != ty {
            return Err(format!("{id}: the {what} must be of type {ty}, not `{actual}`"));
        }
        Ok(resource.get("Properties").unwrap_or(&Value::Null))
    }

    /// A function property, falling back to `Globals.Function` as SAM does.
    fn function_property(&self, props: &'a Value, key: &str) -> Option<&'a Value> {
        props.get(key).or_else(|| self.globals.and_then(|g| g.get(key)))
    }

    /// A function's environment variables: `Globals` merged with its own, as SAM does.
    fn environment(&self, props: &'a Value) -> Vec<(String, &'a Value)> {
        let mut vars: Vec<(String, &'a Value)> = Vec::new();
        let sources = [self.globals, Some(props)];
        for source in sources.into_iter().flatten() {
            let Some(m) = source.get("Environment").and_then(|e| e.get("Variables")).and_then(Value::as_mapping) else {
                continue;
            };
            for (k, v) in m {
                let Some(k) = k.as_str() else { continue };
                vars.retain(|(existing, _)| existing != k);
                vars.push((k.to_string(), v));
            }
        }
        vars
    }
}

/// An intrinsic function call in either spelling: (`Ref` / `Fn::GetAtt` / …, its argument).
fn intrinsic(v: &Value) -> Option<(String, &Value)> {
    match v {
        Value::Tagged(t) => {
            let tag = t.tag.to_string();
            let name = tag.trim_start_matches('!');
            let name = if name == "Ref" { name.to_string() } else { format!("Fn::{name}") };
            Some((name, &t.value))
        }
        Value::Mapping(m) if m.len() == 1 => {
            let (k, arg) = m.iter().next()?;
            let k = k.as_str()?;
            (k == "Ref" || k.starts_with("Fn::")).then(|| (k.to_string(), arg))
        }
        _ => None,
    }
}

/// `!Ref X` / `{Ref: X}` -> `X`.
fn ref_target(v: &Value) -> Option<String> {
    let (name, arg) = intrinsic(v)?;
    (name == "Ref").then(|| arg.as_str().map(str::to_string)).flatten()
}

/// `!GetAtt X.Arn` / `{Fn::GetAtt: [X, Arn]}` -> `(X, Arn)`.
fn get_att_target(v: &Value) -> Option<(String, String)> {
    let (name, arg) = intrinsic(v)?;
    if name != "Fn::GetAtt" {
        return None;
    }
    match arg {
        Value::String(text) => {
            let (id, attribute) = text.split_once('.')?;
            Some((id.to_string(), attribute.to_string()))
        }
        Value::Sequence(items) if items.len() == 2 => {
            Some((items[0].as_str()?.to_string(), items[1].as_str()?.to_string()))
        }
        _ => None,
    }
}

/// A number written as a YAML number or a string (CloudFormation accepts both).
fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(t) => Some(t.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A value that may be a single item or a list of them.
fn items(v: Option<&Value>) -> Vec<&Value> {
    match v {
        Some(Value::Sequence(list)) => list.iter().collect(),
        Some(other) => vec![other],
        None => Vec::new(),
    }
}

fn check_table(template: &Template<'_>, topology: &Topology, problems: &mut Vec<String>) {
    let props = match template.typed(TABLE_ID, "AWS::DynamoDB::Table", "DynamoDB table") {
        Ok(props) => props,
        Err(problem) => return problems.push(problem),
    };
    let t = &topology.table;
    let keys = |schema: Option<&Value>| -> Vec<(String, String)> {
        items(schema)
            .into_iter()
            .filter_map(|k| Some((text(k.get("AttributeName"))?, text(k.get("KeyType"))?)))
            .collect()
    };
    let want = |pk: &str, sk: &str| vec![(pk.to_string(), "HASH".to_string()), (sk.to_string(), "RANGE".to_string())];
    if keys(props.get("KeySchema")) != want(t.partition_key, t.sort_key) {
        problems.push(format!(
            "{TABLE_ID}: the key schema must be `{}` (HASH) and `{}` (RANGE)",
            t.partition_key, t.sort_key
        ));
    }
    if text(props.get("BillingMode")).as_deref() != Some("PAY_PER_REQUEST") {
        problems.push(format!("{TABLE_ID}: BillingMode must be PAY_PER_REQUEST"));
    }
    let ttl = props.get("TimeToLiveSpecification");
    let ttl_on = ttl.and_then(|t| t.get("Enabled")).and_then(Value::as_bool) == Some(true);
    if !ttl_on || text(ttl.and_then(|t| t.get("AttributeName"))).as_deref() != Some(t.ttl_attribute) {
        problems.push(format!("{TABLE_ID}: TTL must be enabled on `{}`", t.ttl_attribute));
    }
    let pitr = props.get("PointInTimeRecoverySpecification").and_then(|p| p.get("PointInTimeRecoveryEnabled"));
    if pitr.and_then(Value::as_bool) != Some(true) {
        problems.push(format!("{TABLE_ID}: point-in-time recovery must be enabled"));
    }
    for index in &t.indexes {
        let found = items(props.get("GlobalSecondaryIndexes"))
            .into_iter()
            .find(|i| text(i.get("IndexName")).as_deref() == Some(index.name));
        match found {
            None => problems.push(format!("{TABLE_ID}: the global secondary index `{}` is missing", index.name)),
            Some(i) if keys(i.get("KeySchema")) != want(index.partition_key, index.sort_key) => problems.push(format!(
                "{TABLE_ID}: index `{}` must be keyed on `{}` (HASH) and `{}` (RANGE)",
                index.name, index.partition_key, index.sort_key
            )),
            Some(_) => {}
        }
    }
}

fn check_api(template: &Template<'_>, problems: &mut Vec<String>) {
    let props = match template.typed(API_ID, "AWS::Serverless::HttpApi", "HTTP API") {
        Ok(props) => props,
        Err(problem) => return problems.push(problem),
    };
    let auth = props.get("Auth");
    let default = text(auth.and_then(|a| a.get("DefaultAuthorizer")));
    let jwt = default
        .as_deref()
        .and_then(|name| auth.and_then(|a| a.get("Authorizers")).and_then(|a| a.get(name)))
        .and_then(|a| a.get("JwtConfiguration"));
    if jwt.is_none() {
        problems.push(format!("{API_ID}: the default authorizer must be a JWT authorizer (Auth.DefaultAuthorizer naming one with JwtConfiguration)"));
    }
}

fn check_queue(template: &Template<'_>, q: &QueueSpec, problems: &mut Vec<String>) {
    let id = queue_id(q.id);
    let dlq = queue_id(q.id.dlq());
    match template.typed(&id, "AWS::SQS::Queue", &format!("{} queue", q.name)) {
        Err(problem) => problems.push(problem),
        Ok(props) => {
            let redrive = props.get("RedrivePolicy");
            let target = redrive.and_then(|r| r.get("deadLetterTargetArn")).and_then(get_att_target);
            if target != Some((dlq.clone(), "Arn".to_string())) {
                problems.push(format!("{id}: RedrivePolicy.deadLetterTargetArn must be !GetAtt {dlq}.Arn"));
            }
            match number(redrive.and_then(|r| r.get("maxReceiveCount"))) {
                Some(count) if count >= u64::from(q.max_receive_count) => {}
                Some(count) => problems.push(format!(
                    "{id}: maxReceiveCount {count} is below {}: a message must get {} receives before it is dead-lettered",
                    q.max_receive_count, q.max_receive_count
                )),
                None => problems.push(format!("{id}: RedrivePolicy.maxReceiveCount is missing (want {})", q.max_receive_count)),
            }
            // The function timeout that matters is the larger of the template's and the topology's.
            let function_timeout = template
                .resource(&function_id(&q.consumer))
                .and_then(|f| f.get("Properties"))
                .and_then(|p| number(template.function_property(p, "Timeout")))
                .unwrap_or(0)
                .max(q.function_timeout_s);
            let visibility = number(props.get("VisibilityTimeout")).unwrap_or(30);
            if visibility < VISIBILITY_FACTOR * function_timeout {
                problems.push(format!(
                    "{id}: VisibilityTimeout {visibility} s is less than {VISIBILITY_FACTOR} × the {} timeout ({VISIBILITY_FACTOR} × {function_timeout} s = {} s)",
                    function_id(&q.consumer),
                    VISIBILITY_FACTOR * function_timeout
                ));
            }
        }
    }
    if let Err(problem) = template.typed(&dlq, "AWS::SQS::Queue", &format!("{} dead-letter queue", q.name)) {
        problems.push(problem);
    }
    let stem = pascal_case(&q.name);
    let alarms = [
        (format!("{stem}DeadLetterAlarm"), "ApproximateNumberOfMessagesVisible", dlq.as_str()),
        (format!("{stem}AgeAlarm"), "ApproximateAgeOfOldestMessage", id.as_str()),
    ];
    for (alarm, metric, watched) in alarms {
        let Ok(props) = template.typed(&alarm, "AWS::CloudWatch::Alarm", &format!("{metric} alarm on {watched}"))
        else {
            problems.push(format!("{alarm}: the {metric} alarm on {watched} is missing"));
            continue;
        };
        let watches = items(props.get("Dimensions"))
            .into_iter()
            .filter_map(|d| get_att_target(d.get("Value")?))
            .any(|(target, _)| target == watched);
        if text(props.get("MetricName")).as_deref() != Some(metric) || !watches {
            problems.push(format!("{alarm}: must alarm on {metric} of {watched}"));
        }
    }
}

fn check_function(template: &Template<'_>, topology: &Topology, f: &FunctionSpec, problems: &mut Vec<String>) {
    let id = function_id(&f.name);
    let what = match f.tier {
        Some(t) => format!("tier-{t} agent-worker function"),
        None => format!("{} function", f.name),
    };
    let props = match template.typed(&id, "AWS::Serverless::Function", &what) {
        Ok(props) => props,
        Err(problem) => return problems.push(problem),
    };
    let prop = |key: &str| template.function_property(props, key);

    match number(prop("Timeout")) {
        None => problems.push(format!("{id}: Timeout is missing (Lambda's default is 3 s; the {what} needs {} s)", f.timeout_s)),
        Some(t) if t < f.timeout_s => problems.push(match f.tier {
            Some(tier) => format!(
                "{id}: Timeout {t} s is shorter than tier {tier} needs ({} s: its longest attempt plus a {WORKER_MARGIN_S} s margin)",
                f.timeout_s
            ),
            None => format!("{id}: Timeout {t} s is shorter than the {} s the {what} needs", f.timeout_s),
        }),
        Some(t) if t > LAMBDA_MAX_TIMEOUT_S => {
            problems.push(format!("{id}: Timeout {t} s is over Lambda's maximum of {LAMBDA_MAX_TIMEOUT_S} s"))
        }
        Some(_) => {}
    }
    if text(prop("Runtime")).as_deref() != Some(RUNTIME) {
        problems.push(format!("{id}: Runtime must be {RUNTIME}"));
    }
    if text(prop("Handler")).as_deref() != Some(HANDLER) {
        problems.push(format!("{id}: Handler must be {HANDLER}"));
    }
    let archs: Vec<String> = items(prop("Architectures")).into_iter().filter_map(|a| text(Some(a))).collect();
    if archs != [ARCHITECTURE] {
        problems.push(format!("{id}: Architectures must be [{ARCHITECTURE}]"));
    }
    if text(prop("Tracing")).as_deref() != Some("Active") {
        problems.push(format!("{id}: Tracing must be Active"));
    }
    let logging = prop("LoggingConfig").and_then(|l| l.get("LogFormat"));
    if text(logging).as_deref() != Some("JSON") {
        problems.push(format!("{id}: LoggingConfig.LogFormat must be JSON"));
    }
    let metadata = template.resource(&id).and_then(|r| r.get("Metadata"));
    let build_method = text(metadata.and_then(|m| m.get("BuildMethod")));
    let binary = text(metadata.and_then(|m| m.get("BuildProperties")).and_then(|b| b.get("Binary")));
    if build_method.as_deref() != Some(BUILD_METHOD) || binary.as_deref() != Some(f.binary) {
        problems.push(format!(
            "{id}: Metadata must be BuildMethod {BUILD_METHOD} with BuildProperties.Binary `{}`",
            f.binary
        ));
    }

    match (f.reserved_concurrency, number(prop("ReservedConcurrentExecutions"))) {
        (Some(want), Some(got)) if got != u64::from(want) => problems.push(format!(
            "{id}: ReservedConcurrentExecutions {got} differs from routing.yaml's reserved_concurrency {want}"
        )),
        (Some(want), None) => {
            problems.push(format!("{id}: ReservedConcurrentExecutions is missing (routing.yaml reserves {want})"))
        }
        (None, Some(got)) => problems.push(format!("{id}: ReservedConcurrentExecutions {got} is not in routing.yaml")),
        _ => {}
    }

    check_environment(template, topology, f, &id, props, problems);
    check_events(f, &id, props, problems);
    check_permissions(template, f, &id, props, problems);
}

fn check_environment(
    template: &Template<'_>,
    topology: &Topology,
    f: &FunctionSpec,
    id: &str,
    props: &Value,
    problems: &mut Vec<String>,
) {
    let vars = template.environment(props);
    let get = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let mut expected: Vec<(String, String)> = vec![(ENV_TABLE.to_string(), TABLE_ID.to_string())];
    for q in &topology.queues {
        expected.push((q.url_env.clone(), queue_id(q.id)));
    }
    if f.streaming {
        expected.push((ENV_JWT_ISSUER.to_string(), "JwtIssuer".to_string()));
        expected.push((ENV_JWT_JWKS.to_string(), "JwtJwks".to_string()));
        if get(ENV_JWT_AUDIENCE).is_none() {
            problems.push(format!("{id}: environment variable {ENV_JWT_AUDIENCE} is missing (want the JwtAudience list joined with commas)"));
        }
    }
    for (name, target) in &expected {
        match get(name) {
            None => problems.push(format!("{id}: environment variable {name} is missing (want !Ref {target})")),
            Some(v) if ref_target(v).as_deref() != Some(target) => {
                problems.push(format!("{id}: environment variable {name} must be !Ref {target}"))
            }
            Some(_) => {}
        }
    }
    match (f.tier, text(get(ENV_TIER))) {
        (Some(t), Some(got)) if got != t.to_string() => {
            problems.push(format!("{id}: environment variable {ENV_TIER} is `{got}`, want `{t}`"))
        }
        (Some(t), None) => problems.push(format!("{id}: environment variable {ENV_TIER} is missing (want `{t}`)")),
        (None, Some(_)) => problems
            .push(format!("{id}: environment variable {ENV_TIER} is set on a function that is not an agent-worker")),
        _ => {}
    }
    for (name, _) in &vars {
        let known =
            name == ENV_TIER || (f.streaming && name == ENV_JWT_AUDIENCE) || expected.iter().any(|(e, _)| e == name);
        if name.starts_with("SWITCHYARD_") && !known {
            problems.push(format!(
                "{id}: environment variable {name} names nothing in routing.yaml's topology (a tier removed without re-rendering?)"
            ));
        }
    }
}

fn check_events(f: &FunctionSpec, id: &str, props: &Value, problems: &mut Vec<String>) {
    let empty = Mapping::new();
    let events = props.get("Events").and_then(Value::as_mapping).unwrap_or(&empty);
    let of_type = |ty: &str| -> Vec<(String, &Value)> {
        events
            .iter()
            .filter(|(_, e)| text(e.get("Type")).as_deref() == Some(ty))
            .map(|(name, e)| (name.as_str().unwrap_or("?").to_string(), e.get("Properties").unwrap_or(&Value::Null)))
            .collect()
    };
    let consumed = of_type("SQS");
    if f.streaming {
        for (name, _) in events.iter() {
            problems.push(format!(
                "{id}: event {} on the events-stream function; it is reached through its Function URL only",
                name.as_str().unwrap_or("?")
            ));
        }
        let url = props.get("FunctionUrlConfig");
        if text(url.and_then(|u| u.get("InvokeMode"))).as_deref() != Some(STREAM_INVOKE_MODE) {
            problems.push(format!(
                "{id}: FunctionUrlConfig.InvokeMode must be {STREAM_INVOKE_MODE}; a buffered URL delivers the live events only when the query ends"
            ));
        }
        if text(url.and_then(|u| u.get("AuthType"))).as_deref() != Some("NONE") {
            problems.push(format!(
                "{id}: FunctionUrlConfig.AuthType must be NONE: callers present the JWT the HTTP API accepts, and the function verifies it"
            ));
        }
        return;
    }
    match f.consumes {
        None => {
            for (name, _) in &consumed {
                problems.push(format!("{id}: event {name} consumes a queue, but the {} reads none", f.name));
            }
            for (method, path) in HTTP_ROUTES {
                let method = method.to_lowercase();
                let served = of_type("HttpApi").iter().any(|(_, p)| {
                    text(p.get("Method")).map(|m| m.to_lowercase()) == Some(method.clone())
                        && text(p.get("Path")).as_deref() == Some(path)
                        && p.get("ApiId").and_then(ref_target).as_deref() == Some(API_ID)
                });
                if !served {
                    problems.push(format!("{id}: the route {} {path} on {API_ID} is missing", method.to_uppercase()));
                }
            }
        }
        Some(q) => {
            let queue = queue_id(q);
            for (name, event) in &consumed {
                let source = event.get("Queue").and_then(get_att_target);
                if source != Some((queue.clone(), "Arn".to_string())) {
                    problems.push(format!("{id}: event {name} must consume !GetAtt {queue}.Arn, and only that queue"));
                    continue;
                }
                let want = u64::from(f.batch_size.unwrap_or(10));
                let batch = number(event.get("BatchSize")).unwrap_or(10);
                if batch != want {
                    problems.push(format!("{id}: event {name} has BatchSize {batch}, want {want}"));
                }
                let types: Vec<String> =
                    items(event.get("FunctionResponseTypes")).into_iter().filter_map(|t| text(Some(t))).collect();
                if !types.iter().any(|t| t == REPORT_BATCH_ITEM_FAILURES) {
                    problems.push(format!(
                        "{id}: event {name} lacks FunctionResponseTypes: [{REPORT_BATCH_ITEM_FAILURES}]; one bad message would fail its whole batch"
                    ));
                }
            }
            if consumed.is_empty() {
                problems.push(format!("{id}: no SQS event source consumes {queue}"));
            }
        }
    }
}

/// The logical ids of the queues a function's permissions let it send to, and any problems with
/// how they are granted.
fn send_targets(template: &Template<'_>, id: &str, props: &Value, problems: &mut Vec<String>) -> BTreeSet<String> {
    let mut targets = BTreeSet::new();
    // SAM policy templates on the function itself.
    for p in items(props.get("Policies")) {
        if let Some(queue) = p.get("SQSSendMessagePolicy").and_then(|t| t.get("QueueName")) {
            match get_att_target(queue) {
                Some((q, _)) => {
                    targets.insert(q);
                }
                None => problems
                    .push(format!("{id}: SQSSendMessagePolicy must name its queue with !GetAtt <Queue>.QueueName")),
            }
        }
    }
    let Some((role, _)) = props.get("Role").and_then(get_att_target) else {
        return targets;
    };
    let Some(role_props) = template.resource(&role).and_then(|r| r.get("Properties")) else {
        problems.push(format!("{id}: its Role {role} is missing"));
        return targets;
    };
    for p in items(role_props.get("Policies")) {
        for statement in items(p.get("PolicyDocument").and_then(|d| d.get("Statement"))) {
            let actions: Vec<String> =
                items(statement.get("Action")).into_iter().filter_map(|a| text(Some(a))).collect();
            for resource in items(statement.get("Resource")) {
                if text(Some(resource)).as_deref() == Some("*") {
                    problems.push(format!("{role}: grants {} on every resource; scope it", actions.join(", ")));
                }
            }
            if !actions.iter().any(|a| a == "sqs:SendMessage" || a == "sqs:*" || a == "*") {
                continue;
            }
            for resource in items(statement.get("Resource")) {
                match get_att_target(resource) {
                    Some((q, attribute)) if attribute == "Arn" => {
                        targets.insert(q);
                    }
                    _ => problems.push(format!("{role}: sqs:SendMessage must name each queue as !GetAtt <Queue>.Arn")),
                }
            }
        }
    }
    targets
}

fn check_permissions(template: &Template<'_>, f: &FunctionSpec, id: &str, props: &Value, problems: &mut Vec<String>) {
    let granted = send_targets(template, id, props, problems);
    let wanted: BTreeSet<String> = f.sends_to.iter().map(|q| queue_id(*q)).collect();
    for q in wanted.difference(&granted) {
        problems.push(format!("{id}: may not send to {q}, which the {} writes", f.name));
    }
    for q in granted.difference(&wanted) {
        problems.push(format!("{id}: may send to {q}, which the {} never writes (least privilege)", f.name));
    }
}

fn check_strays(template: &Template<'_>, topology: &Topology, functions: &[FunctionSpec], problems: &mut Vec<String>) {
    let mut known: BTreeSet<String> = BTreeSet::new();
    for q in &topology.queues {
        known.insert(queue_id(q.id));
        known.insert(queue_id(q.id.dlq()));
    }
    for f in functions {
        known.insert(function_id(&f.name));
    }
    for (id, resource) in template.resources {
        let (Some(id), Some(ty)) = (id.as_str(), resource.get("Type").and_then(Value::as_str)) else { continue };
        let counted = ty == "AWS::SQS::Queue" || ty == "AWS::Serverless::Function";
        if counted && !known.contains(id) {
            problems.push(format!(
                "{id}: a {ty} that routing.yaml's topology does not have (a tier removed without re-rendering?)"
            ));
        }
    }
}

fn check_outputs(doc: &Value, topology: &Topology, problems: &mut Vec<String>) {
    let outputs = doc.get("Outputs");
    let has = |key: &str| outputs.and_then(|o| o.get(key)).is_some();
    let mut wanted = vec!["ApiUrl".to_string(), STREAM_URL_OUTPUT.to_string(), "TableName".to_string()];
    wanted.extend(topology.queues.iter().map(|q| format!("{}Url", queue_id(q.id))));
    for key in wanted {
        if !has(&key) {
            problems.push(format!("Outputs: {key} is missing"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> Manifest {
        Manifest::embedded().expect("shipped manifest is valid")
    }

    #[test]
    fn a_tier_with_bedrock_and_lambda_agents_may_invoke_exactly_those_and_no_other_tier_may() {
        let yaml = r#"
version: 1
name: thinking
providers:
  - {id: claude, kind: bedrock, model: anthropic.claude-3-5-haiku-20241022-v1:0}
tiers:
  - {tier: 2, timeout: 30s, max_retries: 1, fallback: none}
  - {tier: 4, timeout: 30s, max_retries: 1, fallback: none}
agents:
  - id: analyst
    tier: 2
    kind: llm
    llm: {provider: claude, system: You analyse., output_schema: {name: analysis, schema: {type: object}}}
  - {id: scorer, tier: 2, kind: lambda, lambda: {function: score-leads}}
  - {id: plain, tier: 4, kind: builtin, builtin: {response: ok, confidence: 0.9}}
intents:
  - {id: ask, route: {primary: analyst, supporting: [scorer, plain]}, keywords: [ask]}
"#;
        let manifest = Manifest::from_yaml(yaml, "thinking.yaml").expect("valid");
        let topology = Topology::for_manifest(&manifest);
        let specs = functions(&manifest, &topology);
        let tier2 = specs.iter().find(|f| f.tier == Some(2)).expect("tier 2 worker");
        assert_eq!(tier2.bedrock_models, ["anthropic.claude-3-5-haiku-20241022-v1:0"]);
        assert_eq!(tier2.lambda_functions, ["score-leads"]);
        let tier4 = specs.iter().find(|f| f.tier == Some(4)).expect("tier 4 worker");
        assert!(tier4.bedrock_models.is_empty() && tier4.lambda_functions.is_empty());
        let template = render(&manifest);
        let role = template
            .split("AgentWorkerTier2Role:")
            .nth(1)
            .and_then(|r| r.split("AgentWorkerTier2Function:").next())
            .expect("role");
        assert!(
            role.contains("bedrock:InvokeModel")
                && role.contains("foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"),
            "{role}"
        );
        assert!(role.contains("lambda:InvokeFunction") && role.contains(":function:score-leads"), "{role}");
        let other = template
            .split("AgentWorkerTier4Role:")
            .nth(1)
            .and_then(|r| r.split("AgentWorkerTier4Function:").next())
            .expect("role");
        assert!(!other.contains("bedrock:") && !other.contains("lambda:InvokeFunction"), "{other}");
        assert!(check(&template, &manifest).is_empty(), "{:?}", check(&template, &manifest));
    }

    #[test]
    fn function_and_queue_ids_are_pascal_case_stems() {
        assert_eq!(function_id("agent-worker-tier-2"), "AgentWorkerTier2Function");
        assert_eq!(queue_id(QueueId::tier(3)), "Tier3Queue");
        assert_eq!(queue_id(QueueId::route().dlq()), "RouteDeadLetterQueue");
        assert_eq!(http_event_name("get", "/v1/queries/{id}/events"), "GetQueryEvents");
        assert_eq!(http_event_name("get", "/v1/queries/{id}"), "GetQuery");
        assert_eq!(http_event_name("post", "/v1/queries"), "PostQueries");
        assert_eq!(http_event_name("get", "/v1/queries"), "GetQueries");
        assert_eq!(http_event_name("get", "/v1/manifest/routes"), "GetManifestRoutes");
    }

    #[test]
    fn the_shipped_manifest_renders_a_template_that_checks_clean() {
        let m = shipped();
        let problems = check(&render(&m), &m);
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn long_form_intrinsics_read_the_same_as_short_tags() {
        let short: Value = serde_yaml::from_str("a: !GetAtt Tier2Queue.Arn\nb: !Ref Table").expect("yaml");
        let long: Value = serde_yaml::from_str("a: {'Fn::GetAtt': [Tier2Queue, Arn]}\nb: {Ref: Table}").expect("yaml");
        for doc in [short, long] {
            assert_eq!(doc.get("a").and_then(get_att_target), Some(("Tier2Queue".into(), "Arn".into())));
            assert_eq!(doc.get("b").and_then(ref_target).as_deref(), Some("Table"));
        }
    }

    #[test]
    fn a_template_in_long_form_json_checks_clean() {
        // JSON is YAML: a template converted by a tool to long-form intrinsics still passes.
        let m = shipped();
        let rendered: Value = serde_yaml::from_str(&render(&m)).expect("yaml");
        let json = serde_json::to_string(&long_form(rendered)).expect("json");
        let problems = check(&json, &m);
        assert!(problems.is_empty(), "{problems:#?}");
    }

    fn long_form(v: Value) -> serde_json::Value {
        match v {
            Value::Tagged(t) => {
                let tag = t.tag.to_string();
                let name = tag.trim_start_matches('!');
                let key = if name == "Ref" { name.to_string() } else { format!("Fn::{name}") };
                let arg = match (name, t.value) {
                    ("GetAtt", Value::String(text)) => {
                        let (a, b) = text.split_once('.').expect("dotted");
                        serde_json::json!([a, b])
                    }
                    (_, other) => long_form(other),
                };
                serde_json::json!({ key: arg })
            }
            Value::Mapping(m) => serde_json::Value::Object(
                m.into_iter().map(|(k, v)| (k.as_str().expect("string key").to_string(), long_form(v))).collect(),
            ),
            Value::Sequence(items) => serde_json::Value::Array(items.into_iter().map(long_form).collect()),
            Value::String(text) => serde_json::Value::String(text),
            Value::Number(n) => serde_json::to_value(n).expect("number"),
            Value::Bool(b) => serde_json::Value::Bool(b),
            Value::Null => serde_json::Value::Null,
        }
    }

    /// The template text with the first `line` after `resource:` replaced by `replacement`.
    fn edit_after(text: &str, resource: &str, line: &str, replacement: &str) -> String {
        let start = text.find(&format!("\n  {resource}:\n")).expect("resource");
        let at = start + text[start..].find(line).expect("line");
        format!("{}{replacement}{}", &text[..at], &text[at + line.len()..])
    }

    #[test]
    fn a_buffered_or_iam_guarded_events_url_and_a_missing_jwks_are_reported() {
        let m = shipped();
        let text =
            edit_after(&render(&m), "EventsStreamFunction", "InvokeMode: RESPONSE_STREAM", "InvokeMode: BUFFERED");
        let text = edit_after(&text, "EventsStreamFunction", "AuthType: NONE", "AuthType: AWS_IAM");
        let text = edit_after(&text, "EventsStreamFunction", "          SWITCHYARD_JWT_JWKS: !Ref JwtJwks\n", "");
        let problems = check(&text, &m);
        assert_eq!(
            problems,
            [
                "EventsStreamFunction: environment variable SWITCHYARD_JWT_JWKS is missing (want !Ref JwtJwks)",
                "EventsStreamFunction: FunctionUrlConfig.InvokeMode must be RESPONSE_STREAM; a buffered URL delivers the live events only when the query ends",
                "EventsStreamFunction: FunctionUrlConfig.AuthType must be NONE: callers present the JWT the HTTP API accepts, and the function verifies it",
            ]
        );
    }

    #[test]
    fn the_live_stream_ends_before_its_function_times_out() {
        let follow = switchyard_engine::follow::FollowSettings::default();
        assert!(follow.max_duration.as_secs() + 30 <= STREAM_FUNCTION_TIMEOUT_S, "{follow:?}");
        let f = functions(&shipped(), &Topology::for_manifest(&shipped()));
        let stream = f.iter().find(|f| f.streaming).expect("events-stream");
        assert_eq!((stream.binary, stream.timeout_s, stream.sends_to.len()), ("events-stream", 900, 1));
    }

    #[test]
    fn a_router_that_cannot_send_to_synth_and_a_synthesizer_that_may_send_to_a_tier_are_both_reported() {
        let m = shipped();
        let synth = "            - !GetAtt SynthQueue.Arn\n";
        let text = edit_after(&render(&m), "RouterRole", synth, "");
        let text =
            edit_after(&text, "SynthesizerRole", synth, &format!("{synth}            - !GetAtt Tier0Queue.Arn\n"));
        let problems = check(&text, &m);
        assert_eq!(
            problems,
            [
                "RouterFunction: may not send to SynthQueue, which the router writes",
                "SynthesizerFunction: may send to Tier0Queue, which the synthesizer never writes (least privilege)",
            ]
        );
    }

    #[test]
    fn functions_without_active_tracing_are_reported_one_by_one() {
        let m = shipped();
        let text = render(&m);
        assert!(text.contains("    Tracing: Active\n"), "Globals.Function sets Tracing");
        let problems = check(&text.replacen("    Tracing: Active\n", "", 1), &m);
        assert!(!problems.is_empty());
        assert!(problems.iter().all(|p| p.ends_with(": Tracing must be Active")), "{problems:?}");
        assert!(problems.iter().any(|p| p.starts_with("RouterFunction:")), "{problems:?}");
    }

    #[test]
    fn an_sqs_event_without_report_batch_item_failures_is_reported() {
        let m = shipped();
        let types = "            FunctionResponseTypes:\n            - ReportBatchItemFailures\n";
        let problems = check(&edit_after(&render(&m), "RouterFunction", types, ""), &m);
        assert_eq!(
            problems,
            ["RouterFunction: event Queue lacks FunctionResponseTypes: [ReportBatchItemFailures]; one bad message would fail its whole batch"]
        );
    }

    #[test]
    fn a_visibility_timeout_under_six_function_timeouts_and_too_few_receives_are_reported() {
        let m = shipped();
        let text =
            edit_after(&render(&m), "Tier4Queue", "      VisibilityTimeout: 588\n", "      VisibilityTimeout: 120\n");
        let text = edit_after(&text, "Tier4Queue", "        maxReceiveCount: 5\n", "        maxReceiveCount: 2\n");
        let problems = check(&text, &m);
        assert_eq!(
            problems,
            [
                "Tier4Queue: maxReceiveCount 2 is below 5: a message must get 5 receives before it is dead-lettered",
                "Tier4Queue: VisibilityTimeout 120 s is less than 6 × the AgentWorkerTier4Function timeout (6 × 98 s = 588 s)",
            ]
        );
    }

    #[test]
    fn a_worker_with_the_wrong_tier_or_a_stale_queue_variable_is_reported() {
        let m = shipped();
        let extra = "          SWITCHYARD_TIER: '4'\n          SWITCHYARD_QUEUE_TIER_9: !Ref Tier3Queue\n";
        let text = edit_after(&render(&m), "AgentWorkerTier3Function", "          SWITCHYARD_TIER: '3'\n", extra);
        let problems = check(&text, &m);
        assert_eq!(
            problems,
            [
                "AgentWorkerTier3Function: environment variable SWITCHYARD_TIER is `4`, want `3`",
                "AgentWorkerTier3Function: environment variable SWITCHYARD_QUEUE_TIER_9 names nothing in routing.yaml's topology (a tier removed without re-rendering?)",
            ]
        );
    }

    #[test]
    fn reserved_concurrency_must_not_grow_with_the_tier() {
        let yaml = switchyard_model::manifest::EMBEDDED_ROUTING_YAML.replacen(
            "reserved_concurrency: 4",
            "reserved_concurrency: 40",
            1,
        );
        let m = Manifest::from_yaml(&yaml, "routing.yaml").expect("valid");
        let problems = check(&render(&m), &m);
        assert_eq!(
            problems,
            ["routing.yaml: tier 5 reserves 40 concurrent executions, more than tier 4's 8; a lower tier has priority and must reserve at least as many"]
        );
    }
}
