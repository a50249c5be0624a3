//! The OpenAI-compatible chat completions API on the embedded default, through intake's HTTP
//! handler and the streamed route (`switchyard_engine::live`, as `switchyard serve` and the
//! events-stream function serve it): messages as the session (seeded, kept, rewritten, owned),
//! live content from a sole streamed agent, the answer not ready in time, and hostile input.
//! The official `openai` package drives the same routes over HTTP in tests/openai_client.py.

use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::live::{handle_stream, Identity};
use switchyard_engine::ports::SessionRecord;
use switchyard_engine::EngineSettings;
use switchyard_tests::*;

const ANALYST: &str = "analyst-1";
const FIRST: &str = "What is the market share of Kisqali in the Northeast?";

fn chat_request(body: &Value, user: &str) -> aws_lambda_events::apigw::ApiGatewayV2httpRequest {
    api_request("POST", "/v1/chat/completions", "", Some(&body.to_string()), user, "")
}

async fn complete(h: &Harness, body: Value, user: &str) -> ApiGatewayV2httpResponse {
    handle_http(&h.system.deps, chat_request(&body, user)).await
}

fn ask(model: &str, messages: Value) -> Value {
    json!({ "model": model, "messages": messages })
}

/// The completion's `switchyard` extension, once its turn is recorded in its session.
async fn answered(h: &Harness, response: &ApiGatewayV2httpResponse, user: &str) -> (String, Value) {
    assert_eq!(response.status_code, 200, "{}", text_body(response));
    let body = json_body(response);
    let ext = body["switchyard"].clone();
    let (query, session) = (ext["query_id"].as_str().expect("id"), ext["session_id"].as_str().expect("session"));
    for _ in 0..1_000 {
        if session_of(h, user, session).await.is_some_and(|s| s.has_recorded(query)) {
            let text = body["choices"][0]["message"]["content"].as_str().expect("content").to_string();
            return (text, ext);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("turn {query} was never recorded");
}

async fn session_of(h: &Harness, user: &str, session: &str) -> Option<SessionRecord> {
    h.system.deps.store.get_session(user, session).await.expect("store")
}

fn carried(ext: &Value) -> Vec<String> {
    let mut values: Vec<String> = ext["entities"]
        .as_array()
        .expect("entities")
        .iter()
        .filter(|e| e["source"] == "context")
        .map(|e| e["value"].as_str().expect("value").to_string())
        .collect();
    values.sort();
    values
}

#[tokio::test(start_paused = true)]
async fn earlier_messages_are_the_session_seeded_kept_and_rewritten() {
    let h = Harness::start(shipped_manifest());
    let model = "e2i";
    // GIVEN a first turn: a new session named after its query
    let (a1, first) =
        answered(&h, &complete(&h, ask(model, json!([{"role": "user", "content": FIRST}])), ANALYST).await, ANALYST)
            .await;
    assert_eq!(first["session_id"], first["query_id"]);
    // WHEN the follow-up comes with the first exchange as messages
    let two = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": a1},
        {"role": "user", "content": "And for Fabhalta?"}
    ]);
    let (a2, second) = answered(&h, &complete(&h, ask(model, two), ANALYST).await, ANALYST).await;
    // THEN it is routed with the first as context, in a session the messages seeded
    assert_eq!(second["intent"], first["intent"]);
    assert_eq!(carried(&second), vec!["Northeast".to_string(), "market_share".to_string()]);
    let session_id = second["session_id"].as_str().expect("session").to_string();
    assert!(session_id.starts_with("chat-"), "{session_id}");
    let seeded = session_of(&h, ANALYST, &session_id).await.expect("the seeded session");
    assert_eq!(seeded.turn_count, 2);
    assert_eq!(seeded.turns[0].question, FIRST);
    assert_eq!(seeded.turns[0].intent, first["intent"].as_str().expect("intent"), "the seeded turn is classified");
    // WHEN the third turn carries both exchanges as the session holds them
    let three = json!([
        {"role": "user", "content": FIRST}, {"role": "assistant", "content": a1},
        {"role": "user", "content": "And for Fabhalta?"}, {"role": "assistant", "content": a2},
        {"role": "user", "content": "What about the Midwest?"}
    ]);
    let (_, third) = answered(&h, &complete(&h, ask(model, three), ANALYST).await, ANALYST).await;
    // THEN the session is continued as stored (its recorded turn kept), not rewritten
    assert_eq!(third["session_id"], json!(session_id));
    assert_eq!(third["intent"], first["intent"]);
    let kept = session_of(&h, ANALYST, &session_id).await.expect("session");
    assert_eq!(kept.turn_count, 3);
    assert!(kept.has_recorded(second["query_id"].as_str().expect("id")), "the second turn's record is kept");
    // WHEN a client edits an earlier answer
    let edited = json!([
        {"role": "user", "content": FIRST}, {"role": "assistant", "content": a1},
        {"role": "user", "content": "And for Fabhalta?"}, {"role": "assistant", "content": "(edited by the user)"},
        {"role": "user", "content": "What about the Midwest?"}
    ]);
    let (_, fourth) = answered(&h, &complete(&h, ask(model, edited), ANALYST).await, ANALYST).await;
    // THEN the messages are the truth: the session is rewritten from them, then the turn added
    let rewritten = session_of(&h, ANALYST, &session_id).await.expect("session");
    assert_eq!(fourth["session_id"], json!(session_id));
    assert_eq!(rewritten.turn_count, 3);
    assert_eq!(rewritten.turns[1].answer, "(edited by the user)");
}

#[tokio::test(start_paused = true)]
async fn a_session_id_names_the_callers_own_session_only() {
    let h = Harness::start(shipped_manifest());
    let mine = ask("e2i", json!([{"role": "user", "content": FIRST}]));
    let mut mine = mine;
    mine["session_id"] = json!("team-chat");
    let (_, first) = answered(&h, &complete(&h, mine, ANALYST).await, ANALYST).await;
    assert_eq!(first["session_id"], "team-chat");
    // WHEN another caller continues "team-chat" with a follow-up
    let mut theirs = ask("e2i", json!([{"role": "user", "content": "And for Fabhalta?"}]));
    theirs["session_id"] = json!("team-chat");
    let (_, other) = answered(&h, &complete(&h, theirs, "intruder").await, "intruder").await;
    // THEN nothing of the first caller's conversation reaches it, and theirs is untouched
    assert!(carried(&other).is_empty(), "{other}");
    assert_eq!(session_of(&h, ANALYST, "team-chat").await.expect("mine").turn_count, 1);
    assert_eq!(session_of(&h, "intruder", "team-chat").await.expect("theirs").turn_count, 1);
    // AND messages claiming history do not reach the first caller's session either
    let mut claims = ask(
        "e2i",
        json!([{"role": "user", "content": FIRST}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "And for Fabhalta?"}]),
    );
    claims["session_id"] = json!("team-chat");
    let _ = answered(&h, &complete(&h, claims, "intruder").await, "intruder").await;
    assert_eq!(session_of(&h, ANALYST, "team-chat").await.expect("mine").turn_count, 1);
}

/// The chunks of an SSE body: each `data:` line's JSON (the `[DONE]` line as a string).
fn chunks(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| if d == "[DONE]" { json!("[DONE]") } else { serde_json::from_str(d).expect("a JSON chunk") })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_sole_streamed_agent_is_relayed_as_content_while_the_query_runs() {
    let h = Harness::start(manifest_fixture("manifests/chat-live.yaml"));
    let deps = &h.system.deps;
    let body = json!({
        "model": "chat-live", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "How many vacation days can I carry over?"}],
        "temperature": 0.1
    });
    let reply = handle_stream(deps, Identity::Gateway, &chat_request(&body, ANALYST)).await;
    assert_eq!(reply.status, 200);
    assert!(reply.headers.iter().any(|(k, v)| k == "content-type" && v == "text/event-stream"));
    let mut stream = reply.body;
    let (mut text, mut content_before_output, mut query_id) = (String::new(), 0, String::new());
    while let Some(bytes) = stream.next().await {
        let piece = String::from_utf8(bytes.to_vec()).expect("UTF-8");
        for chunk in chunks(&piece) {
            if let Some(id) = chunk["id"].as_str() {
                query_id = id.trim_start_matches("chatcmpl-").to_string();
            }
            if chunk["choices"][0]["delta"]["content"].as_str().is_some_and(|c| !c.is_empty())
                && deps.store.get_output(&query_id).await.expect("store").is_none()
            {
                content_before_output += 1;
            }
        }
        text.push_str(&piece);
    }
    let all = chunks(&text);
    // THEN the answer's words came as content while the query ran ...
    assert!(content_before_output >= 3, "{content_before_output} content chunks before the output");
    let content: String = all.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    let output = h.output(&query_id).await;
    assert_eq!(content, output.response_text, "the joined deltas are the answer");
    // ... the final chunk says stop and carries the extension, then usage, then [DONE]
    let n = all.len();
    assert_eq!(all[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(all[n - 3]["choices"][0]["finish_reason"], "stop");
    let ext = &all[n - 3]["switchyard"];
    assert_eq!((ext["query_id"].as_str(), ext["revised"].as_bool()), (Some(query_id.as_str()), Some(false)));
    assert!(!ext["citations"].as_array().expect("citations").is_empty());
    assert_eq!(ext["ignored_parameters"], json!(["temperature"]));
    assert_eq!(all[n - 2]["choices"], json!([]));
    assert!(all[n - 2]["usage"]["completion_tokens"].as_u64().is_some_and(|t| t > 0), "{}", all[n - 2]);
    assert_eq!(all[n - 1], json!("[DONE]"));
}

#[tokio::test(start_paused = true)]
async fn an_answer_not_ready_in_time_is_a_504_naming_the_query_which_goes_on() {
    let settings = EngineSettings { max_wait: Duration::from_millis(200), ..EngineSettings::default() };
    let h = Harness::from_system(switchyard_agents::embedded(
        Arc::new(manifest_fixture("manifests/chat-live.yaml")),
        settings,
    ));
    let body = ask("chat-live", json!([{"role": "user", "content": "How many vacation days can I carry over?"}]));
    let r = complete(&h, body, ANALYST).await;
    assert_eq!(r.status_code, 504, "{}", text_body(&r));
    assert_eq!(r.headers.get("x-should-retry").and_then(|v| v.to_str().ok()), Some("false"));
    let error = &json_body(&r)["error"];
    assert_eq!((error["code"].as_str(), error["type"].as_str()), (Some("not_ready"), Some("server_error")));
    let id = error["message"].as_str().expect("message").split("query ").nth(1).expect("names the query");
    let id = id.split(' ').next().expect("id");
    assert!(!h.output(id).await.response_text.is_empty(), "the query finished after the 504");
}

#[tokio::test(start_paused = true)]
async fn hostile_and_malformed_requests_are_refused_in_the_openai_shape_and_record_nothing() {
    let h = Harness::start(shipped_manifest());
    let deps = &h.system.deps;
    let raw = |body: String, user: &str| api_request("POST", "/v1/chat/completions", "", Some(&body), user, "");
    let huge = json!({"model": "e2i", "messages": (0..20).map(|_| json!({"role": "user", "content": "x".repeat(30_000)})).collect::<Vec<_>>()});
    let cases: Vec<(aws_lambda_events::apigw::ApiGatewayV2httpRequest, i64, &str)> = vec![
        (raw("{not json".into(), ANALYST), 400, "body"),
        (raw("[]".into(), ANALYST), 400, "body"),
        (raw(format!("{}{}", "[".repeat(64), "]".repeat(64)), ANALYST), 400, "body"),
        (raw(huge.to_string(), ANALYST), 413, ""),
        (raw(json!({"model": "e2i", "messages": [{"role": "user", "content": "hi"}]}).to_string(), ""), 401, ""),
        (raw(json!({"model": "e2i", "messages": [{"role": "user", "content": "Retrain the churn model on the latest data"}]}).to_string(), ANALYST), 403, ""),
        (raw(json!({"model": "e2i", "messages": [{"role": "user", "content": "hi"}], "session_id": "../../etc"}).to_string(), ANALYST), 400, "session_id"),
        (raw(json!({"model": "e2i", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}).to_string(), ANALYST), 400, "tools"),
        (raw(json!({"model": "e2i", "messages": [{"role": "assistant", "content": "hi"}]}).to_string(), ANALYST), 400, "messages[0].role"),
        (api_request("GET", "/v1/chat/completions", "", None, ANALYST, ""), 405, ""),
    ];
    for (request, status, param) in cases {
        let path = request.raw_path.clone().unwrap_or_default();
        for r in [handle_http(deps, request.clone()).await, {
            let reply = handle_stream(deps, Identity::Gateway, &request).await;
            let body: Vec<bytes::Bytes> = reply.body.collect().await;
            let mut r = ApiGatewayV2httpResponse::default();
            r.status_code = i64::from(reply.status);
            r.body = Some(aws_lambda_events::encodings::Body::Text(String::from_utf8(body.concat()).expect("UTF-8")));
            r
        }] {
            assert_eq!(r.status_code, status, "{path}: {}", text_body(&r));
            let error = &json_body(&r)["error"];
            assert!(error["type"].is_string() && error["code"].is_string() && error["message"].is_string(), "{error}");
            if !param.is_empty() {
                assert_eq!(error["param"], json!(param), "{error}");
            }
        }
    }
    let listed = deps.store.list_user_queries(ANALYST, 10).await.expect("store");
    assert!(
        listed.is_empty(),
        "a refused request recorded a query: {:?}",
        listed.iter().map(|q| &q.query_id).collect::<Vec<_>>()
    );
    // AND the model list names the manifest
    let models = handle_http(deps, api_request("GET", "/v1/models", "", None, ANALYST, "")).await;
    assert_eq!(json_body(&models)["data"][0]["id"], "e2i");
}
