use super::check::{get_att_target, ref_target};
use super::render::http_event_name;
use super::*;
use serde_yaml::Value;

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
    let text = edit_after(&render(&m), "EventsStreamFunction", "InvokeMode: RESPONSE_STREAM", "InvokeMode: BUFFERED");
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
    let text = edit_after(&text, "SynthesizerRole", synth, &format!("{synth}            - !GetAtt Tier0Queue.Arn\n"));
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

#[test]
fn a_tool_secret_in_a_header_reaches_the_agent_workers_from_secrets_manager_or_ssm_never_the_template_text() {
    // GIVEN tools whose MCP header and HTTP URL read `${…}` variables
    let yaml = r#"
version: 1
name: acting
tiers: [{tier: 2, timeout: 30s, max_retries: 1, fallback: none}]
providers: [{id: m, kind: scripted, responses: {answer: [{reply: {response: ok}}]}}]
tools:
  - id: orders
    mcp: {url: "https://orders.example/mcp", headers: {Authorization: "Bearer ${ORDERS_TOKEN}"}}
  - id: weather
    http: {url: "https://weather.example/forecast/{city}?key=${WEATHER_KEY}"}
    parameters: {type: object, properties: {city: {type: string}}}
agents:
  - id: support
    tier: 2
    kind: llm
    llm: {provider: m, system: Help., output_schema: {name: answer, schema: {type: object}}, tools: [orders, weather]}
intents: [{id: ask, route: {primary: support}, keywords: [ask]}]
"#;
    let manifest = Manifest::from_yaml(yaml, "acting.yaml").expect("valid");
    // WHEN the template is rendered
    let text = render(&manifest);
    let doc: Value = serde_yaml::from_str(&text).expect("yaml");
    // THEN each variable has a parameter naming where it is kept (Secrets Manager by default)
    let parameter = &doc["Parameters"]["ToolSecretOrdersToken"];
    assert_eq!(parameter["Default"].as_str(), Some("secretsmanager:switchyard/ORDERS_TOKEN"));
    assert_eq!(parameter["AllowedPattern"].as_str(), Some("^(secretsmanager|ssm):.+$"));
    assert!(doc["Parameters"]["ToolSecretWeatherKey"].is_mapping());
    // and the agent worker reads it through a dynamic reference; the intake does not get it
    let worker = &doc["Resources"]["AgentWorkerTier2Function"]["Properties"]["Environment"]["Variables"];
    let env = serde_yaml::to_string(&worker["ORDERS_TOKEN"]).expect("yaml");
    assert!(env.contains("!Sub") && env.contains("{{resolve:${ToolSecretOrdersToken}}}"), "{env}");
    assert!(doc["Resources"]["IntakeFunction"]["Properties"]["Environment"]["Variables"]["ORDERS_TOKEN"].is_null());
    // and the rendered template checks clean against its manifest
    let problems = check(&text, &manifest);
    assert!(problems.is_empty(), "{problems:#?}");
}
