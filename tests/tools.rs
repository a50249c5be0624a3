//! Tools of `llm` agents against a real MCP server on loopback (tests/support/mcp_server.rs,
//! Streamable HTTP) and a plain HTTP tool, with a scripted model that asks for exactly the
//! calls each test names: every branch of the tool loop — results back to the model, unknown
//! tools, bad arguments, tool errors, timeouts, huge results, the call limit, an expired
//! session, malformed JSON-RPC, a server down — and the write calls made once across
//! redeliveries, with an `unknown` outcome after a crash mid-call. Then the whole system,
//! embedded: the question, the call, the answer and the `tool_call` / `tool_result` events.

#[path = "support/approvals.rs"]
mod approvals;
#[path = "support/mcp_server.rs"]
mod mcp_server;

use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use switchyard_agents::llm::{
    LlmAgents, ModelProvider, ModelRequest, ModelResponse, ModelTurn, ProviderError, ToolOffer, ToolRequest, Turn,
};
use switchyard_agents::tools::ToolBox;
use switchyard_engine::memory::MemoryStore;
use switchyard_engine::ports::{
    AgentReply, Store, StoreError, TokioClock, ToolCallOutcome, ToolCallRecord, ToolCallStatus, ToolCalls, ToolClaim,
    ToolNote,
};
use switchyard_model::manifest::Manifest;

// ------------------------------------------------------------------------------------------
// A scripted model and a ledger
// ------------------------------------------------------------------------------------------

/// One turn of the scripted model: calls `(provider name, raw arguments)`, or an answer.
#[derive(Debug, Clone)]
enum Step {
    Call(Vec<(&'static str, String)>),
    Answer(Value),
}

/// Answers each turn with the next step; keeps what it was offered and shown.
#[derive(Default)]
struct Model {
    steps: Mutex<VecDeque<Step>>,
    offered: Mutex<Vec<Vec<String>>>,
    shown: Mutex<Vec<Turn>>,
}

impl Model {
    fn new(steps: Vec<Step>) -> Arc<Model> {
        Arc::new(Model { steps: Mutex::new(steps.into()), ..Model::default() })
    }

    /// The results the model was shown, in order (the last conversation's).
    fn results(&self) -> Vec<(String, String, bool)> {
        self.shown
            .lock()
            .expect("shown")
            .iter()
            .filter_map(|t| match t {
                Turn::Results(r) => {
                    Some(r.iter().map(|r| (r.name.clone(), r.content.clone(), r.is_error)).collect::<Vec<_>>())
                }
                Turn::Calls { .. } => None,
            })
            .flatten()
            .collect()
    }
}

#[async_trait]
impl ModelProvider for Model {
    async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        Err(ProviderError::Config("the test model only converses".into()))
    }

    async fn converse(
        &self,
        _: &ModelRequest,
        turns: &[Turn],
        tools: &[ToolOffer],
    ) -> Result<ModelTurn, ProviderError> {
        self.offered.lock().expect("offered").push(tools.iter().map(|t| t.name.clone()).collect());
        *self.shown.lock().expect("shown") = turns.to_vec();
        let step = self
            .steps
            .lock()
            .expect("steps")
            .pop_front()
            .ok_or_else(|| ProviderError::Config("no step left".into()))?;
        let response = |text: String| ModelResponse {
            text,
            model: "test".into(),
            input_tokens: 10,
            output_tokens: 5,
            cache_hit: false,
        };
        Ok(match step {
            Step::Answer(v) => ModelTurn { response: response(v.to_string()), calls: vec![] },
            Step::Call(calls) => ModelTurn {
                response: response(String::new()),
                calls: calls
                    .into_iter()
                    .enumerate()
                    .map(|(n, (name, raw))| ToolRequest {
                        id: format!("c{n}"),
                        name: name.to_string(),
                        arguments: switchyard_agents::provider::parse_arguments(&raw),
                        raw_arguments: raw,
                    })
                    .collect(),
            },
        })
    }
}

/// The dispatch's records on a memory store, and the events it was sent.
struct Ledger {
    store: MemoryStore,
    notes: Mutex<Vec<ToolNote>>,
    roles: Vec<String>,
}

impl Ledger {
    fn new(roles: &[&str]) -> Ledger {
        Ledger {
            store: MemoryStore::new(Arc::new(TokioClock::new())),
            notes: Mutex::new(Vec::new()),
            roles: roles.iter().map(|r| r.to_string()).collect(),
        }
    }

    /// `(tool, status, replayed)` of every result note, in the calls' order (calls of one
    /// turn run in parallel and end in any order).
    fn results(&self) -> Vec<(String, ToolCallStatus, bool)> {
        let mut results: Vec<(u32, String, ToolCallStatus, bool)> = self
            .notes
            .lock()
            .expect("notes")
            .iter()
            .filter_map(|n| match n {
                ToolNote::Result { index, tool, status, replayed, .. } => {
                    Some((*index, tool.clone(), *status, *replayed))
                }
                ToolNote::Call { .. } => None,
            })
            .collect();
        results.sort_by_key(|r| r.0);
        results.into_iter().map(|(_, t, s, r)| (t, s, r)).collect()
    }
}

#[async_trait]
impl ToolCalls for Ledger {
    fn caller_roles(&self) -> &[String] {
        &self.roles
    }
    async fn claim(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError> {
        self.store.claim_tool_call(record).await
    }
    async fn finish(&self, dispatch_id: &str, index: u32, outcome: &ToolCallOutcome) -> Result<(), StoreError> {
        self.store.finish_tool_call(QUERY, dispatch_id, index, outcome).await
    }
    async fn note(&self, _attempt: u32, note: ToolNote) -> Result<(), StoreError> {
        self.notes.lock().expect("notes").push(note);
        Ok(())
    }
    fn expires_at(&self) -> i64 {
        chrono::Utc::now().timestamp() + 3_600
    }
}

const QUERY: &str = "q-tools";

fn manifest(mcp_url: &str, http_url: &str, extra_llm: &str) -> Manifest {
    manifest_with(
        mcp_url,
        http_url,
        extra_llm,
        "{id: m, kind: scripted, responses: {answer: [{reply: {response: unused}}]}}",
    )
}

fn manifest_with(mcp_url: &str, http_url: &str, extra_llm: &str, provider: &str) -> Manifest {
    let yaml = format!(
        r#"
version: 1
name: tools-test
tiers: [{{tier: 2, timeout: 5s, max_retries: 0, fallback: none}}]
providers: [{provider}]
tools:
  - id: orders
    mcp: {{url: "{mcp_url}", headers: {{Authorization: "Bearer ${{ORDERS_TOKEN}}"}}}}
    timeout: 500ms
    effects: {{issue_refund: write}}
    max_result_bytes: 2000
  - id: weather
    http: {{method: GET, url: "{http_url}/forecast/{{city}}"}}
    description: The forecast for a city.
    parameters: {{type: object, required: [city], properties: {{city: {{type: string}}}}}}
  - id: vault
    http: {{method: POST, url: "{http_url}/vault"}}
    required_role: auditor
    effects: {{vault: write}}
agents:
  - id: support
    tier: 2
    kind: llm
    llm: {{provider: m, system: "Help.", output_schema: {{name: answer, schema: {{type: object, required: [response], properties: {{response: {{type: string}}}}}}}}, tools: [orders, weather, vault]{extra_llm}}}
intents: [{{id: ask, description: d, route: {{primary: support}}, utterances: [where is my order, has my order shipped, track my order], keywords: [order]}}]
"#
    );
    Manifest::from_yaml(&yaml, "tools.yaml").expect("manifest")
}

/// A plain HTTP endpoint: the forecast, and a vault that counts its writes and their keys.
async fn http_tools() -> (String, Arc<Mutex<Vec<String>>>) {
    use axum::routing::{get, post};
    let keys = Arc::new(Mutex::new(Vec::new()));
    let seen = keys.clone();
    let app = axum::Router::new()
        .route(
            "/forecast/{city}",
            get(|axum::extract::Path(city): axum::extract::Path<String>| async move { format!("sunny in {city}") }),
        )
        .route(
            "/vault",
            post(move |headers: axum::http::HeaderMap| {
                let seen = seen.clone();
                async move {
                    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                    seen.lock().expect("keys").push(key);
                    "stored"
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (url, keys)
}

fn agents(m: &Manifest, model: Arc<Model>) -> LlmAgents {
    let http = switchyard_engine::http_client::HttpClient::new();
    let env = Arc::new(|name: &str| (name == "ORDERS_TOKEN").then(|| "s3cr3t-token".to_string()));
    let provider = m.provider("m").expect("provider").clone();
    LlmAgents::new(m, &http).with_provider("m", model, provider).with_tools(ToolBox::with_env(m, &http, env))
}

async fn run(m: &Manifest, model: Arc<Model>, ledger: Option<&Ledger>, dispatch_id: &str) -> Result<Value, String> {
    let agent = m.agent("support").expect("agent");
    let settings = agent.llm.as_ref().expect("llm");
    let mut dispatch =
        switchyard_tests::agent_dispatch("support", "ask", json!({"question": "where is my order A-1?"}), 5_000);
    dispatch.dispatch_id = dispatch_id.to_string();
    dispatch.query_id = QUERY.to_string();
    let reply = agents(m, model)
        .run_with_tools(agent, settings, &dispatch, 1, None, ledger.map(|l| l as &dyn ToolCalls))
        .await
        .map_err(|e| e.message)?;
    match reply {
        AgentReply::Answer(v) => Ok(v),
        other => Err(format!("not an answer: {other:?}")),
    }
}

fn answer(text: &str) -> Step {
    Step::Answer(json!({"response": text, "confidence": 0.9}))
}

// ------------------------------------------------------------------------------------------
// The loop's branches
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_tool_result_reaches_the_model_and_the_answer_with_the_secret_header_sent_and_never_shown() {
    // GIVEN an MCP server, a plain HTTP tool, and a model that calls both in one turn
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let (http, _) = http_tools().await;
    let m = manifest(&mcp, &http, "");
    let model = Model::new(vec![
        Step::Call(vec![
            ("orders__lookup_order", r#"{"order_id": "A-1"}"#.into()),
            ("weather", r#"{"city": "São Paulo"}"#.into()),
        ]),
        answer("Order A-1 shipped; sunny."),
    ]);
    let ledger = Ledger::new(&[]);
    // WHEN the agent runs
    let out = run(&m, model.clone(), Some(&ledger), "d-read").await.expect("answer");
    // THEN the tools were called with the model's arguments, the results reached the model,
    // and the answer is the model's final one, with the usage of both turns
    assert_eq!(out["primary_output"]["response"], "Order A-1 shipped; sunny.");
    assert_eq!((out["input_tokens"].as_u64(), out["tool_calls"].as_u64()), (Some(20), Some(2)));
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.calls[0].0, "lookup_order");
    assert_eq!(seen.calls[0].1, json!({"order_id": "A-1"}));
    assert!(seen.authorizations.iter().all(|a| a == "Bearer s3cr3t-token"), "{:?}", seen.authorizations);
    let results = model.results();
    assert_eq!(results[0], ("orders__lookup_order".into(), "order A-1 shipped on 2026-11-30".into(), false));
    assert_eq!(results[1], ("weather".into(), "sunny in São Paulo".into(), false));
    // and the model was offered the MCP server's tools by provider-safe names, not the
    // tool needing a role the caller lacks
    let offered = model.offered.lock().expect("offered")[0].clone();
    assert!(offered.contains(&"orders__issue_refund".to_string()) && offered.contains(&"weather".to_string()));
    assert!(!offered.contains(&"vault".to_string()), "{offered:?}");
    // and the events name the tools as the manifest does, with digests, never the secret
    let notes = format!("{:?}", ledger.notes.lock().expect("notes"));
    assert!(notes.contains("tool: \"orders.lookup_order\"") && notes.contains("digest: \""), "{notes}");
    assert!(!notes.contains("s3cr3t") && !format!("{out}").contains("s3cr3t"));
    assert_eq!(ledger.results().iter().map(|r| r.1).collect::<Vec<_>>(), vec![ToolCallStatus::Ok, ToolCallStatus::Ok]);
}

#[tokio::test]
async fn unknown_tools_bad_arguments_errors_timeouts_and_huge_results_become_tool_results() {
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let (http, _) = http_tools().await;
    let m = manifest(&mcp, &http, "");
    let model = Model::new(vec![
        Step::Call(vec![
            ("orders__cancel_everything", "{}".into()),
            ("orders__lookup_order", r#"{"order": 1}"#.into()),
            ("orders__lookup_order", "not json".into()),
            ("orders__broken", "{}".into()),
            ("orders__slow", "{}".into()),
            ("orders__huge", "{}".into()),
            ("vault", "{}".into()),
        ]),
        answer("I could not do much."),
    ]);
    let ledger = Ledger::new(&[]);
    let out = run(&m, model.clone(), Some(&ledger), "d-faults").await.expect("the query does not crash");
    assert_eq!(out["primary_output"]["response"], "I could not do much.");
    let results = model.results();
    let text = |i: usize| results[i].1.clone();
    assert!(text(0).starts_with("unknown tool `orders__cancel_everything`; the tools are:"), "{}", text(0));
    assert!(text(1).contains("bad arguments for `orders.lookup_order`") && text(1).contains("order_id"), "{}", text(1));
    assert!(text(2).contains("the arguments are not JSON"), "{}", text(2));
    assert_eq!(text(3), "the tool reported an error: the order system is down");
    assert_eq!(text(4), "the tool did not answer within 500 ms");
    assert!(text(5).len() <= 2000 && text(5).ends_with("[cut: the result is 100000 bytes; the first ones are shown]"));
    assert!(text(6).contains("needs the role `auditor`"), "{}", text(6));
    assert!(
        results.iter().enumerate().all(|(i, r)| r.2 == (i != 5)),
        "only the cut result is not an error: {results:?}"
    );
    let statuses: Vec<ToolCallStatus> = ledger.results().iter().map(|r| r.1).collect();
    use ToolCallStatus::*;
    assert_eq!(statuses, vec![Refused, Refused, Refused, Error, Timeout, Ok, Refused]);
    assert_eq!(seen.lock().expect("seen").calls.len(), 3, "only the checked calls reached the server");
}

#[tokio::test]
async fn a_model_that_keeps_calling_stops_at_max_tool_calls_and_its_answer_says_so() {
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let (http, _) = http_tools().await;
    let m = manifest(&mcp, &http, ", max_tool_calls: 3");
    let call = || {
        Step::Call(vec![
            ("orders__lookup_order", r#"{"order_id": "A-1"}"#.into()),
            ("orders__lookup_order", r#"{"order_id": "A-2"}"#.into()),
        ])
    };
    let model = Model::new(vec![call(), call(), answer("Enough.")]);
    let out = run(&m, model.clone(), None, "d-loop").await.expect("answer");
    assert_eq!(seen.lock().expect("seen").calls.len(), 3, "three calls, not four");
    assert!(model.results()[3].1.contains("limit of 3 tool calls"));
    assert!(model.offered.lock().expect("offered").last().expect("turn").is_empty(), "the last turn offers no tools");
    let caveats = out["caveats"].to_string();
    assert!(caveats.contains("reached its limit of 3 tool calls"), "{caveats}");
}

#[tokio::test]
async fn an_expired_session_is_initialized_again_and_event_stream_answers_are_read() {
    let (mcp, seen) =
        mcp_server::start(mcp_server::Faults { sse: true, forget_sessions_after: Some(2), ..Default::default() }).await;
    let (http, _) = http_tools().await;
    let m = manifest(&mcp, &http, "");
    let lookups = (0..3).map(|n| Step::Call(vec![("orders__lookup_order", format!(r#"{{"order_id": "A-{n}"}}"#))]));
    let model = Model::new(lookups.chain([answer("All shipped.")]).collect());
    let out = run(&m, model.clone(), None, "d-session").await.expect("answer");
    assert_eq!(out["primary_output"]["response"], "All shipped.");
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.calls.len(), 3);
    assert!(
        seen.expired >= 1 && seen.initializations >= 2,
        "expired {}, initialized {}",
        seen.expired,
        seen.initializations
    );
    assert!(model.results().iter().all(|r| !r.2), "{:?}", model.results());
}

#[tokio::test]
async fn malformed_json_rpc_and_a_server_that_is_down_never_crash_the_query() {
    let (mcp, _) = mcp_server::start(mcp_server::Faults { malformed_calls: true, ..Default::default() }).await;
    let (http, _) = http_tools().await;
    let m = manifest(&mcp, &http, "");
    let model =
        Model::new(vec![Step::Call(vec![("orders__lookup_order", r#"{"order_id": "A-1"}"#.into())]), answer("Sorry.")]);
    run(&m, model.clone(), None, "d-malformed").await.expect("answer");
    assert!(model.results()[0].1.starts_with("the tool failed: malformed answer"), "{:?}", model.results());

    // A server that is not there: its tools are left out, and a call to one is unknown.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/mcp", l.local_addr().expect("addr"))
    };
    let m = manifest(&closed, &http, "");
    let model =
        Model::new(vec![Step::Call(vec![("orders__lookup_order", r#"{"order_id": "A-1"}"#.into())]), answer("Sorry.")]);
    run(&m, model.clone(), None, "d-down").await.expect("answer");
    assert!(!model.offered.lock().expect("offered")[0].iter().any(|t| t.starts_with("orders__")));
    assert!(model.results()[0].1.starts_with("unknown tool"), "{:?}", model.results());
}

// ------------------------------------------------------------------------------------------
// Effects once
// ------------------------------------------------------------------------------------------

fn refund() -> Step {
    Step::Call(vec![("orders__issue_refund", r#"{"order_id": "A-1", "amount": 25}"#.into())])
}

#[tokio::test]
async fn a_redelivered_dispatch_replays_a_recorded_write_instead_of_calling_again() {
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let (http, _) = http_tools().await;
    let m = manifest(&mcp, &http, "");
    let ledger = Ledger::new(&[]);
    // GIVEN a first delivery that made the refund
    run(&m, Model::new(vec![refund(), answer("Refunded.")]), Some(&ledger), "d-refund").await.expect("answer");
    // WHEN the same dispatch runs again (a redelivery) and the model asks for the same call
    let again = Model::new(vec![refund(), answer("Refunded.")]);
    run(&m, again.clone(), Some(&ledger), "d-refund").await.expect("answer");
    // THEN the tool was called once, with the idempotency key in `_meta`, and the second
    // run was given the recorded result
    let seen = seen.lock().expect("seen");
    assert_eq!(seen.count("issue_refund"), 1);
    assert_eq!(seen.calls[0].2, json!({"idempotency_key": "d-refund-call-0"}));
    assert_eq!(again.results()[0].1, "refund of 25 for order A-1 issued");
    assert_eq!(ledger.results()[1], ("orders.issue_refund".into(), ToolCallStatus::Ok, true));
}

#[tokio::test]
async fn a_write_whose_record_has_no_outcome_is_reported_unknown_and_not_repeated() {
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let (http, keys) = http_tools().await;
    let m = manifest(&mcp, &http, "");
    let ledger = Ledger::new(&["auditor"]);
    // GIVEN a delivery that claimed the call and stopped before recording its outcome
    let digest = switchyard_agents::tools::run::digest(&ToolRequest {
        id: "x".into(),
        name: "orders__issue_refund".into(),
        raw_arguments: String::new(),
        arguments: Ok(json!({"order_id": "A-1", "amount": 25})),
    });
    let claimed = ToolCallRecord {
        query_id: QUERY.into(),
        dispatch_id: "d-crash".into(),
        index: 0,
        tool: "orders.issue_refund".into(),
        arguments_digest: digest,
        idempotency_key: ToolCallRecord::key_for("d-crash", 0),
        claimed_at: chrono::Utc::now(),
        outcome: None,
        expires_at: chrono::Utc::now().timestamp() + 3_600,
    };
    assert_eq!(ledger.store.claim_tool_call(&claimed).await.expect("claim"), ToolClaim::Claimed);
    // WHEN the dispatch is delivered again
    let model = Model::new(vec![refund(), Step::Call(vec![("vault", "{}".into())]), answer("Check the refund.")]);
    let out = run(&m, model.clone(), Some(&ledger), "d-crash").await.expect("answer");
    // THEN the refund is not called again; the model and the answer are told its outcome
    // is unknown, with the idempotency key; the next write call has its own key
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 0);
    assert!(model.results()[0].1.contains("unknown") && model.results()[0].1.contains("d-crash-call-0"));
    assert!(out["caveats"].to_string().contains("d-crash-call-0"), "{}", out["caveats"]);
    assert_eq!(ledger.results()[0].1, ToolCallStatus::Unknown);
    assert_eq!(
        *keys.lock().expect("keys"),
        vec!["d-crash-call-1".to_string()],
        "the HTTP write carries its Idempotency-Key"
    );
}

#[tokio::test]
async fn without_call_records_a_write_tool_is_not_called() {
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let (http, _) = http_tools().await;
    let m = manifest(&mcp, &http, "");
    let model = Model::new(vec![refund(), answer("Not done.")]);
    run(&m, model.clone(), None, "d-norecord").await.expect("answer");
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 0);
    assert!(model.results()[0].1.contains("no call record is available"), "{:?}", model.results());
}

// ------------------------------------------------------------------------------------------
// The whole system, embedded, on an OpenAI-compatible model server
// ------------------------------------------------------------------------------------------

/// An OpenAI-compatible chat-completions server: asked without a tool result, it calls
/// `orders__lookup_order` for order A-1; shown a result, it answers with that result's text.
async fn openai_stub() -> (String, Arc<Mutex<Vec<Value>>>) {
    use axum::routing::post;
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |axum::Json(body): axum::Json<Value>| {
            let log = log.clone();
            async move {
                log.lock().expect("log").push(body.clone());
                let messages = body["messages"].as_array().cloned().unwrap_or_default();
                let result = messages.iter().rev().find(|m| m["role"] == "tool").and_then(|m| m["content"].as_str().map(str::to_string));
                let message = match result {
                    None => json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "orders__lookup_order", "arguments": "{\"order_id\":\"A-1\"}"}}
                    ]}),
                    Some(text) => json!({"role": "assistant", "content": json!({"response": format!("Your {text}."), "confidence": 0.9}).to_string()}),
                };
                let finish = if message["tool_calls"].is_null() { "stop" } else { "tool_calls" };
                axum::Json(json!({
                    "id": "x", "object": "chat.completion", "model": "stub",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 7}
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (url, requests)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_a_question_that_needs_the_tool_dispatches_it_and_its_result_reaches_the_answer() {
    // GIVEN an MCP server, an OpenAI-compatible model server, and an agent using both
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let (model_url, requests) = openai_stub().await;
    let (http, _) = http_tools().await;
    let m = manifest_with(&mcp, &http, "", &format!("{{id: m, kind: openai, base_url: \"{model_url}\", model: stub}}"));
    let http_client = switchyard_engine::http_client::HttpClient::new();
    let env = Arc::new(|name: &str| (name == "ORDERS_TOKEN").then(|| "s3cr3t-token".to_string()));
    let agents = switchyard_agents::Agents::new(&m)
        .with_llm(LlmAgents::new(&m, &http_client).with_tools(ToolBox::with_env(&m, &http_client, env)));
    let system = switchyard_engine::Embedded::with_agents(Arc::new(m), Default::default(), Arc::new(agents));
    let h = switchyard_tests::Harness::from_system(system);
    // WHEN a question whose answer needs the tool is asked
    let response = h.post("where is my order A-1", "u1", "").await;
    assert_eq!(response.status_code, 202, "{}", switchyard_tests::text_body(&response));
    let id = switchyard_tests::json_body(&response)["query_id"].as_str().expect("id").to_string();
    let output = h.output(&id).await;
    // THEN the tool was called with the model's arguments, and its result is in the answer
    assert_eq!(seen.lock().expect("seen").calls[0], ("lookup_order".into(), json!({"order_id": "A-1"}), Value::Null));
    assert_eq!(output.response_text, "Your order A-1 shipped on 2026-11-30.", "{output:?}");
    let requests = requests.lock().expect("requests");
    assert_eq!(requests[0]["tools"][0]["type"], "function");
    assert_eq!(requests[1]["messages"][3]["role"], "tool");
    // and the log holds the call and its result, named as the manifest names the tool
    let events = h.system.deps.store.list_events(&id).await.expect("events");
    let of = |kind: switchyard_engine::ports::EventKind| events.iter().filter(|e| e.kind == kind).collect::<Vec<_>>();
    let calls = of(switchyard_engine::ports::EventKind::ToolCall);
    let results = of(switchyard_engine::ports::EventKind::ToolResult);
    assert_eq!((calls.len(), results.len()), (1, 1), "{events:#?}");
    let call = serde_json::to_value(&*calls[0].detail).expect("detail");
    let result = serde_json::to_value(&*results[0].detail).expect("detail");
    assert_eq!(call["tool"], "orders.lookup_order");
    assert_eq!(call["arguments_digest"].as_str().map(str::len), Some(64));
    assert_eq!((result["status"].as_str(), result["size"].as_u64()), (Some("ok"), Some(31)));
    assert!(!format!("{events:?}").contains("s3cr3t"));
}

// ------------------------------------------------------------------------------------------
// A person in the loop, embedded
// ------------------------------------------------------------------------------------------

/// An embedded system whose refund waits for an `approver` (for `approval_timeout`), every
/// queue message delivered twice, and the query's own deadline `deadline`.
fn approval_system(mcp: &str, approval_timeout: &str, deadline: &str) -> switchyard_tests::Harness {
    let m = approvals::manifest(mcp, approval_timeout, deadline);
    let agents = approvals::agents(&m);
    let system = switchyard_engine::Embedded::with_queue(Arc::new(m), Default::default(), agents, |queue| {
        let faults =
            switchyard_testkit::faults::QueueFaults { duplicate: 1.0, max_extra_delay: std::time::Duration::ZERO };
        (Arc::new(switchyard_testkit::faults::FaultyQueue::new(queue, faults, 7)), Some(7))
    });
    switchyard_tests::Harness::from_system(system)
}

/// GET the query as `user`: (HTTP status, body).
async fn get_query(h: &switchyard_tests::Harness, id: &str, user: &str) -> (i64, Value) {
    let r = switchyard_engine::handlers::handle_http(
        &h.system.deps,
        switchyard_tests::api_request("GET", &format!("/v1/queries/{id}"), "", None, user, ""),
    )
    .await;
    (r.status_code, switchyard_tests::json_body(&r))
}

/// POST a decision on the query as `user` with `roles`: (HTTP status, body).
async fn decide(h: &switchyard_tests::Harness, id: &str, body: &str, user: &str, roles: &str) -> (i64, Value) {
    let r = switchyard_engine::handlers::handle_http(
        &h.system.deps,
        switchyard_tests::api_request("POST", &format!("/v1/queries/{id}/approval"), "", Some(body), user, roles),
    )
    .await;
    (r.status_code, switchyard_tests::json_body(&r))
}

/// Ask for the refund as u1 and wait until the query waits for a decision.
async fn ask_for_refund(h: &switchyard_tests::Harness) -> (String, Value) {
    let response = h.post("refund order A-1", "u1", "").await;
    assert_eq!(response.status_code, 202, "{}", switchyard_tests::text_body(&response));
    let id = switchyard_tests::json_body(&response)["query_id"].as_str().expect("id").to_string();
    for _ in 0..500 {
        let (status, body) = get_query(h, &id, "u1").await;
        if body["status"] == "awaiting_approval" {
            assert_eq!(status, 202);
            return (id, body);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("query {id} never waited for approval: {:?}", get_query(h, &id, "u1").await);
}

fn kinds(events: &[switchyard_engine::ports::Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| serde_json::to_value(e.kind).expect("kind").as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_write_is_called_exactly_once_although_every_message_is_delivered_twice() {
    // GIVEN a refund under approval, a queue that delivers every message twice, and a query
    // deadline far shorter than the wait for the person
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let h = approval_system(&mcp, "1h", "1500ms");
    // WHEN the question needs the refund
    let (id, waiting) = ask_for_refund(&h).await;
    // THEN the query shows the pending call, the event log says so, and the tool is not called
    let pending = &waiting["pending_approval"];
    assert_eq!(pending["tool"], "orders.issue_refund");
    assert_eq!(pending["arguments"], json!({"order_id": "A-1", "amount": 25}));
    assert!(pending["requested_at"].is_string() && pending["expires_at"].is_string(), "{waiting}");
    let events = h.system.deps.store.list_events(&id).await.expect("events");
    assert!(kinds(&events).contains(&"approval_requested".to_string()), "{:?}", kinds(&events));
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 0);
    // and the deadline is paused: past it, the query still waits
    tokio::time::sleep(std::time::Duration::from_millis(2_000)).await;
    assert_eq!(get_query(&h, &id, "u1").await.1["status"], "awaiting_approval");

    // WHEN someone else, a caller without the role, and a malformed decision try
    let approve = r#"{"decision": "approve", "note": "ok"}"#;
    let (other, _) = decide(&h, &id, approve, "u2", "approver").await;
    let (no_role, body) = decide(&h, &id, approve, "u1", "").await;
    let (bad, bad_body) = decide(&h, &id, r#"{"decision": "perhaps"}"#, "u1", "approver").await;
    // THEN 404, 403 naming the role, 400 naming the field
    assert_eq!((other, no_role, bad), (404, 403, 400));
    assert!(body.to_string().contains("approver"), "{body}");
    assert!(bad_body.to_string().contains("decision"), "{bad_body}");

    // WHEN the approver approves
    let (status, decided) = decide(&h, &id, approve, "u1", "approver").await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!((decided["decision"].as_str(), decided["status"].as_str()), (Some("approve"), Some("resumed")));
    // THEN the query finishes with the tool's result, the tool called once with its key
    let output = h.output(&id).await;
    assert_eq!(output.response_text, "Outcome: refund of 25 for order A-1 issued", "{output:?}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    {
        let seen = seen.lock().expect("seen");
        assert_eq!(seen.count("issue_refund"), 1, "{:?}", seen.calls);
        assert!(
            seen.calls[0].2["idempotency_key"].as_str().is_some_and(|k| k.ends_with("-call-0")),
            "{:?}",
            seen.calls
        );
    }
    // and a second decision is a conflict
    let (again, body) = decide(&h, &id, r#"{"decision": "reject"}"#, "u1", "approver").await;
    assert_eq!(again, 409, "{body}");
    let events = h.system.deps.store.list_events(&id).await.expect("events");
    let decided =
        events.iter().find(|e| e.kind == switchyard_engine::ports::EventKind::ApprovalDecided).expect("decided");
    let detail = serde_json::to_value(&*decided.detail).expect("detail");
    assert_eq!((detail["verdict"].as_str(), detail["decided_by"].as_str()), (Some("approve"), Some("u1")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_write_is_never_called_and_the_answer_says_why() {
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let h = approval_system(&mcp, "1h", "5s");
    let (id, _) = ask_for_refund(&h).await;
    let (status, body) =
        decide(&h, &id, r#"{"decision": "reject", "note": "over the refund limit"}"#, "u1", "approver").await;
    assert_eq!(status, 200, "{body}");
    let output = h.output(&id).await;
    assert_eq!(output.response_text, "Outcome: rejected by a person: over the refund limit", "{output:?}");
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_nobody_gives_expires_as_a_rejection_and_a_late_decision_is_a_conflict() {
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let h = approval_system(&mcp, "400ms", "5s");
    let (id, _) = ask_for_refund(&h).await;
    let output = h.output(&id).await;
    assert!(output.response_text.starts_with("Outcome: rejected: nobody decided by"), "{output:?}");
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 0);
    let (late, body) = decide(&h, &id, r#"{"decision": "approve"}"#, "u1", "approver").await;
    assert_eq!(late, 409, "{body}");
    assert!(body.to_string().contains("expired"), "{body}");
}
