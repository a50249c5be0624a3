//! Rendering: the manifest's topology turned into the SAM template, byte for byte the same
//! for the same manifest.

use super::yaml::*;
use super::*;
use serde_yaml::{Mapping, Value};
use switchyard_engine::handlers::HTTP_ROUTES;
use switchyard_engine::jwt::{ENV_JWT_AUDIENCE, ENV_JWT_ISSUER, ENV_JWT_JWKS};
use switchyard_engine::ports::{QueueId, QueueKind};
use switchyard_model::manifest::{env_references, Manifest};
use switchyard_model::topology::{QueueSpec, Topology, ENV_ENCODER, ENV_TABLE, ENV_TIER};

pub(crate) fn queue_description(id: QueueId) -> String {
    match id.kind {
        QueueKind::Route => "route queue (intake -> router)".to_string(),
        QueueKind::Tier(t) => format!("tier-{t} queue (router and workers -> tier-{t} agent-worker)"),
        QueueKind::Synth => "synth queue (workers and deadlines -> synthesizer)".to_string(),
    }
}

/// Models of the tier's `llm` agents whose provider is Bedrock.
pub(crate) fn bedrock_models(manifest: &Manifest, tier: u8) -> Vec<String> {
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
pub(crate) fn lambda_functions(manifest: &Manifest, tier: u8) -> Vec<String> {
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
pub(crate) fn lambda_arns(function: &str) -> Vec<Value> {
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
    let secrets = tool_secrets(manifest);
    let mut parameters = parameters();
    if let Value::Mapping(m) = &mut parameters {
        for (variable, parameter) in &secrets {
            m.insert(s(parameter), secret_parameter(variable));
        }
    }
    root.insert(s("Parameters"), parameters);
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
    if let Some(layer) = encoder_layer(manifest) {
        resources.insert(s(ENCODER_LAYER_ID), layer);
    }
    for f in &functions {
        let stem = pascal_case(&f.name);
        resources.insert(s(&format!("{stem}LogGroup")), log_group());
        resources.insert(s(&format!("{stem}Role")), role(f, &stem));
        resources.insert(s(&function_id(&f.name)), function(f, &stem, &secrets));
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

/// The layer that ships the cascade's sentence encoder, when the manifest names one: its folder
/// as the manifest resolves it, written for a template in `infra/` beside that folder's
/// workspace (an absolute folder as it is). Lambda unpacks it at `/opt`.
pub(crate) fn encoder_layer(manifest: &Manifest) -> Option<Value> {
    let encoder = manifest.classifier.encoder.as_ref()?;
    let folder = manifest.encoder_folder()?;
    let content = if folder.is_absolute() {
        folder.display().to_string()
    } else {
        format!("../{}", folder.display().to_string().trim_start_matches("./"))
    };
    Some(map(vec![
        ("Type", s("AWS::Serverless::LayerVersion")),
        (
            "Properties",
            map(vec![
                (
                    "Description",
                    s(&format!(
                        "The cascade's sentence encoder (classifier.encoder.model: {}), read at {LAYER_MOUNT} by the functions that classify questions.",
                        encoder.model
                    )),
                ),
                ("ContentUri", s(&content)),
                ("CompatibleArchitectures", strings(&[ARCHITECTURE])),
                ("CompatibleRuntimes", strings(&[RUNTIME])),
                ("RetentionPolicy", s("Delete")),
            ]),
        ),
    ]))
}

/// serde_yaml writes `2012-10-17` bare, which YAML 1.1 readers (CloudFormation's among them) may
/// take for a date; the template and policy language versions must stay strings.
pub(crate) fn quote_dates(body: &str) -> String {
    ["2010-09-09", "2012-10-17"]
        .iter()
        .fold(body.to_string(), |text, date| text.replace(&format!(": {date}\n"), &format!(": '{date}'\n")))
}

pub(crate) fn header(manifest: &Manifest) -> String {
    format!(
        "# Switchyard on AWS, generated from routing.yaml (manifest `{}`) by `switchyard infra render`.\n\
         # Do not edit by hand: change routing.yaml, then run\n\
         #   {RENDER_COMMAND}\n\
         # `switchyard infra check` and tests/infra_template.rs fail when the two disagree.\n",
        manifest.name
    )
}

/// A blank line before each top-level section and each resource, for the reader.
pub(crate) fn space_out(body: &str) -> String {
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

/// Each `${VAR}` the manifest's tool sources read (URLs and headers), with the template
/// parameter that names where its value is kept: `ORDERS_TOKEN` → `ToolSecretOrdersToken`.
pub(crate) fn tool_secrets(manifest: &Manifest) -> Vec<(String, String)> {
    let mut names = std::collections::BTreeSet::new();
    for source in &manifest.tools {
        let mut texts: Vec<&str> = Vec::new();
        if let Some(m) = &source.mcp {
            texts.push(&m.url);
            texts.extend(m.headers.values().map(String::as_str));
        }
        if let Some(h) = &source.http {
            texts.push(&h.url);
            texts.extend(h.headers.values().map(String::as_str));
        }
        for text in texts {
            names.extend(env_references(text).unwrap_or_default().into_iter().map(str::to_string));
        }
    }
    names.into_iter().map(|v| (v.clone(), format!("ToolSecret{}", pascal_case(&v.to_lowercase())))).collect()
}

/// The parameter naming where `${variable}` is kept: a Secrets Manager secret or an SSM
/// parameter, resolved by CloudFormation into the agent workers' environment at deploy time.
fn secret_parameter(variable: &str) -> Value {
    map(vec![
        ("Type", s("String")),
        ("Default", s(&format!("secretsmanager:switchyard/{variable}"))),
        ("AllowedPattern", s("^(secretsmanager|ssm):.+$")),
        (
            "Description",
            s(&format!(
                "Where the tools' ${{{variable}}} is kept: `secretsmanager:<secret name or ARN>[:SecretString:<json key>]` or `ssm:<parameter name>` (a String parameter; Lambda environments cannot take SecureString references)."
            )),
        ),
    ])
}

pub(crate) fn parameters() -> Value {
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

pub(crate) fn globals(topology: &Topology) -> Value {
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

pub(crate) fn http_api() -> Value {
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
pub(crate) fn projection(index: &switchyard_model::topology::IndexSpec) -> Value {
    if index.include.is_empty() {
        return map(vec![("ProjectionType", s("KEYS_ONLY"))]);
    }
    map(vec![("ProjectionType", s("INCLUDE")), ("NonKeyAttributes", seq(index.include.iter().map(|a| s(a)).collect()))])
}

pub(crate) fn table(topology: &Topology) -> Value {
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

pub(crate) fn queue(q: &QueueSpec) -> Value {
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

pub(crate) fn dead_letter_queue(_q: &QueueSpec) -> Value {
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

pub(crate) fn log_group() -> Value {
    map(vec![
        ("Type", s("AWS::Logs::LogGroup")),
        ("DeletionPolicy", s("Delete")),
        ("UpdateReplacePolicy", s("Delete")),
        ("Properties", map(vec![("RetentionInDays", n(LOG_RETENTION_DAYS))])),
    ])
}

pub(crate) fn role(f: &FunctionSpec, stem: &str) -> Value {
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

pub(crate) fn function_description(f: &FunctionSpec) -> String {
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

pub(crate) fn function(f: &FunctionSpec, stem: &str, secrets: &[(String, String)]) -> Value {
    let mut props = vec![
        ("Description", s(&function_description(f))),
        ("Timeout", n(f.timeout_s)),
        ("Role", get_att(&format!("{stem}Role"), "Arn")),
        ("LoggingConfig", map(vec![("LogFormat", s("JSON")), ("LogGroup", reference(&format!("{stem}LogGroup")))])),
    ];
    if let Some(c) = f.reserved_concurrency {
        props.push(("ReservedConcurrentExecutions", n(u64::from(c))));
    }
    let mut variables = Vec::new();
    if let Some(t) = f.tier {
        variables.push((ENV_TIER, s(&t.to_string())));
    }
    if f.streaming {
        // A Function URL has no JWT authorizer: the function checks the token itself, against
        // the same issuer and audiences as the HTTP API's authorizer.
        let audience = map(vec![("Fn::Join", seq(vec![s(","), reference("JwtAudience")]))]);
        variables.push((ENV_JWT_ISSUER, reference("JwtIssuer")));
        variables.push((ENV_JWT_AUDIENCE, audience));
        variables.push((ENV_JWT_JWKS, reference("JwtJwks")));
    }
    if f.encoder {
        variables.push((ENV_ENCODER, s(LAYER_MOUNT)));
    }
    if f.tier.is_some() {
        // The agents' tools read `${VAR}` from the environment; the value comes from the
        // secret or parameter its template parameter names.
        for (variable, parameter) in secrets {
            variables.push((variable.as_str(), sub(&format!("{{{{resolve:${{{parameter}}}}}}}"))));
        }
    }
    if !variables.is_empty() {
        props.push(("Environment", map(vec![("Variables", map(variables))])));
    }
    if f.encoder {
        props.push(("Layers", seq(vec![reference(ENCODER_LAYER_ID)])));
    }
    if f.streaming {
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
pub(crate) fn http_event_name(method: &str, path: &str) -> String {
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
        "/approval" => "QueryApproval",
        _ => "Route",
    };
    format!("{}{what}", pascal_case(method))
}

pub(crate) fn alarm(description: String, metric: &str, queue: Value, threshold: u64, periods: u64) -> Value {
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

pub(crate) fn dead_letter_alarm(q: &QueueSpec) -> Value {
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

pub(crate) fn age_alarm(q: &QueueSpec) -> Value {
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

pub(crate) fn outputs(topology: &Topology) -> Value {
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
