//! How an `llm` agent reads what an OpenAI-compatible server answers, on the wire against a
//! small server on 127.0.0.1:0 that answers each request as the test scripts it (and can keep
//! a connection open, or close it under the client): the structured-output form that adapts
//! to the server, an answer cut at `max_tokens`, a prompt over the context, provider error
//! bodies kept out of what callers see, answers without (or with an impossible) confidence,
//! a pooled connection the server already closed, and a server that is not there.
//! tests/real_model.rs runs the same paths against a real model.

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_agents::Agents;
use switchyard_engine::ports::{AgentError, AgentReply, AgentRuntime};
use switchyard_model::contracts::AgentDispatch;
use switchyard_model::manifest::Manifest;
use tokio::io::AsyncWriteExt;

/// What the server does with one request.
#[derive(Clone)]
enum Reply {
    /// Answer with this status and JSON body; keep the connection open afterwards (HTTP/1.1
    /// keep-alive) or close it.
    Json { status: u16, body: Value, keep_alive: bool },
    /// Read the request, then close the connection without a word.
    Hang,
}

fn ok(body: Value) -> Reply {
    Reply::Json { status: 200, body, keep_alive: false }
}

/// A chat completion whose message is `content`, ended by `finish`.
fn completion(content: &str, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "local-model",
        "choices": [{ "index": 0, "finish_reason": finish, "message": { "role": "assistant", "content": content } }],
        "usage": { "prompt_tokens": 12, "completion_tokens": 7 }
    })
}

/// Serve the scripted replies in order, one per request (over every connection); the base
/// URL, the request bodies received, and how many connections were opened.
async fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Value>>>, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let received = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(Mutex::new(0usize));
    let script = Arc::new(Mutex::new(VecDeque::from(replies)));
    let (log, opened) = (received.clone(), connections.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            *opened.lock().expect("count") += 1;
            let (log, script) = (log.clone(), script.clone());
            tokio::spawn(async move {
                while let Some((_, request)) = switchyard_tests::read_http_request(&mut socket).await {
                    log.lock().expect("log").push(serde_json::from_slice(&request).unwrap_or(Value::Null));
                    let reply = script.lock().expect("script").pop_front();
                    let Some(Reply::Json { status, body, keep_alive }) = reply else { return };
                    let body = body.to_string();
                    let head = format!(
                        "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n",
                        body.len(),
                        if keep_alive { "" } else { "connection: close\r\n" }
                    );
                    if socket.write_all(format!("{head}{body}").as_bytes()).await.is_err() || !keep_alive {
                        return;
                    }
                }
            });
        }
    });
    (base, received, connections)
}

/// One `llm` agent on an OpenAI-compatible provider at `base`, with extra provider and agent
/// settings (YAML flow-mapping entries).
fn manifest(base: &str, provider_extra: &str, agent_extra: &str) -> Manifest {
    let yaml = format!(
        r#"
version: 1
name: answers
tiers:
  - {{tier: 2, timeout: 5s, max_retries: 1, fallback: none}}
providers:
  - {{id: local, kind: openai, base_url: "{base}", model: local-model, timeout: 2s{provider_extra}}}
agents:
  - id: answerer
    tier: 2
    kind: llm
    llm: {{provider: local, system: You answer questions., prompt: "Q: {{question}}", max_tokens: 64{agent_extra},
           output_schema: {{name: answer_question, schema: {{type: object, required: [answer], properties: {{answer: {{type: string}}, confidence: {{type: number}}}}}}}}}}
intents:
  - {{id: ask, route: {{primary: answerer}}, keywords: [question]}}
"#
    );
    Manifest::from_yaml(&yaml, "<answers>").unwrap_or_else(|e| panic!("{e}"))
}

fn dispatch() -> AgentDispatch {
    switchyard_tests::agent_dispatch(
        "answerer",
        "ask",
        json!({ "question": "How many vacation days carry over?" }),
        5_000,
    )
}

async fn run(agents: &Agents, m: &Manifest, attempt: u32) -> Result<AgentReply, AgentError> {
    agents.run(m.agent("answerer").expect("agent"), &dispatch(), attempt).await
}

fn answer(reply: Result<AgentReply, AgentError>) -> Value {
    match reply {
        Ok(AgentReply::Answer(v)) => v,
        other => panic!("expected an answer, got {other:?}"),
    }
}

/// llama-cpp-python's answer to a `json_schema` response format, as recorded from its server
/// (0.3.36, tests/fixtures/providers/llama-cpp-python-exchange.jsonl: the refusal, then the
/// streamed and buffered answers to `json_object` with the schema): HTTP 500, its own file
/// paths in the body.
fn refused_json_schema() -> Reply {
    let recorded = switchyard_tests::fixture_text("providers/llama-cpp-python-exchange.jsonl");
    let first: Value = serde_json::from_str(recorded.lines().next().expect("a line")).expect("json");
    assert_eq!(first["request"]["response_format"]["type"], "json_schema");
    let body = serde_json::from_str(first["response"].as_str().expect("body")).expect("json body");
    Reply::Json { status: first["status"].as_u64().expect("status") as u16, body, keep_alive: false }
}

#[tokio::test]
async fn a_server_that_refuses_json_schema_is_asked_once_more_with_json_object_and_the_choice_is_kept() {
    let good = ok(completion(r#"{"answer": "Five days.", "confidence": 0.9}"#, "stop"));
    let (base, received, _) = serve(vec![refused_json_schema(), good.clone(), good]).await;
    let m = manifest(&base, "", "");
    let agents = Agents::new(&m);
    assert_eq!(answer(run(&agents, &m, 1).await)["primary_output"]["answer"], "Five days.");
    assert_eq!(answer(run(&agents, &m, 1).await)["confidence"], 0.9);
    let bodies = received.lock().expect("log").clone();
    let forms: Vec<&str> = bodies.iter().map(|b| b["response_format"]["type"].as_str().unwrap_or("none")).collect();
    assert_eq!(forms, ["json_schema", "json_object", "json_object"], "one refusal, then the kept choice");
    assert_eq!(bodies[1]["response_format"]["schema"]["required"], json!(["answer"]), "json_object carries the schema");
    let system = bodies[1]["messages"][0]["content"].as_str().expect("system prompt");
    assert!(system.starts_with("You answer questions.") && system.contains(r#""required":["answer"]"#), "{system}");
}

#[tokio::test]
async fn a_form_refusal_is_not_retried_when_the_manifest_fixes_the_form() {
    let (base, received, _) = serve(vec![refused_json_schema()]).await;
    let m = manifest(&base, ", structured_output: json_schema", "");
    let error = run(&Agents::new(&m), &m, 1).await.expect_err("refused");
    assert!(!error.recoverable, "the same form cannot work on a retry: {error:?}");
    assert_eq!(error.message, "local: the provider does not accept `structured_output: json_schema` (HTTP 500)");
    assert_eq!(received.lock().expect("log").len(), 1);
    let (base, received, _) = serve(vec![ok(completion(r#"{"answer": "Yes."}"#, "stop"))]).await;
    let m = manifest(&base, ", structured_output: prompt", "");
    answer(run(&Agents::new(&m), &m, 1).await);
    let body = received.lock().expect("log")[0].clone();
    assert!(body.get("response_format").is_none(), "prompt form sends no response_format: {body}");
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_says_so_and_a_retry_gets_more_room_only_when_the_manifest_allows() {
    let cut = || ok(completion(r#"{"answer": "Up to five da"#, "length"));
    let (base, _, _) = serve(vec![cut()]).await;
    let m = manifest(&base, "", "");
    let error = run(&Agents::new(&m), &m, 1).await.expect_err("cut");
    assert!(!error.recoverable, "{error:?}");
    assert!(
        error.message.contains("the answer was cut at max_tokens=64")
            && error.message.contains("raise `max_tokens` of agent `answerer`"),
        "{error:?}"
    );
    let (base, received, _) = serve(vec![cut(), ok(completion(r#"{"answer": "Up to five days."}"#, "stop"))]).await;
    let m = manifest(&base, "", ", max_tokens_limit: 200");
    let agents = Agents::new(&m);
    let error = run(&agents, &m, 1).await.expect_err("cut");
    assert!(error.recoverable && error.message.contains("the next attempt may use up to 128"), "{error:?}");
    answer(run(&agents, &m, 2).await);
    let budgets: Vec<u64> =
        received.lock().expect("log").iter().map(|b| b["max_tokens"].as_u64().expect("max_tokens")).collect();
    assert_eq!(budgets, [64, 128]);
}

#[tokio::test]
async fn provider_error_bodies_stay_out_of_errors_and_a_prompt_over_the_context_is_not_retried() {
    let secret = "/home/ops/models/private.gguf";
    let (base, _, _) = serve(vec![Reply::Json {
        status: 500,
        body: json!({ "error": { "message": format!("failed to load {secret}") } }),
        keep_alive: false,
    }])
    .await;
    let m = manifest(&base, "", "");
    let error = run(&Agents::new(&m), &m, 1).await.expect_err("500");
    assert!(error.recoverable);
    assert_eq!(error.message, "local: the provider answered HTTP 500");
    let (base, _, _) = serve(vec![Reply::Json {
        status: 400,
        body: json!({ "error": { "code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 2048 } }),
        keep_alive: false,
    }])
    .await;
    let m = manifest(&base, "", "");
    let error = run(&Agents::new(&m), &m, 1).await.expect_err("context");
    assert!(!error.recoverable);
    assert_eq!(error.message, "local: the prompt is longer than the model's context (HTTP 400)");
}

#[tokio::test]
async fn an_answer_without_confidence_is_rated_unknown_and_one_outside_zero_to_one_breaks_the_schema() {
    let (base, _, _) = serve(vec![
        ok(completion(r#"{"answer": "22"}"#, "stop")),
        ok(completion(r#"{"answer": "Not applicable", "confidence": 100}"#, "stop")),
    ])
    .await;
    let m = manifest(&base, "", "");
    let agents = Agents::new(&m);
    let unrated = answer(run(&agents, &m, 1).await);
    assert_eq!(unrated["confidence"], switchyard_model::manifest::UNKNOWN_CONFIDENCE);
    assert!(unrated["confidence"].as_f64().expect("number") < 0.7, "never high: {unrated}");
    assert!(unrated["caveats"][0].as_str().expect("caveat").starts_with("no confidence was reported"), "{unrated}");
    match run(&agents, &m, 1).await {
        Ok(AgentReply::Malformed(raw)) => {
            assert!(raw.contains("$.confidence is 100, not a number between 0 and 1"), "{raw}")
        }
        other => panic!("expected a schema violation, got {other:?}"),
    }
    // A manifest that sets the default explicitly gets it.
    let (base, _, _) = serve(vec![ok(completion(r#"{"answer": "22"}"#, "stop"))]).await;
    let m = manifest(&base, "", ", confidence: 0.75");
    let rated = answer(run(&Agents::new(&m), &m, 1).await);
    assert_eq!((rated["confidence"].as_f64(), rated["caveats"].as_array().map(Vec::len)), (Some(0.75), Some(0)));
}

#[tokio::test]
async fn a_request_on_a_pooled_connection_the_server_closed_is_sent_again_on_a_new_connection() {
    let first = Reply::Json {
        status: 200,
        body: completion(r#"{"answer": "One.", "confidence": 0.8}"#, "stop"),
        keep_alive: true,
    };
    let second = ok(completion(r#"{"answer": "Two.", "confidence": 0.8}"#, "stop"));
    // The first connection stays open after its answer, then closes as the next request
    // arrives on it (as a server that says keep-alive but closes does).
    let (base, received, connections) = serve(vec![first, Reply::Hang, second]).await;
    let m = manifest(&base, "", "");
    let agents = Agents::new(&m);
    assert_eq!(answer(run(&agents, &m, 1).await)["primary_output"]["answer"], "One.");
    assert_eq!(answer(run(&agents, &m, 1).await)["primary_output"]["answer"], "Two.", "no attempt lost");
    assert_eq!(received.lock().expect("log").len(), 3);
    assert_eq!(*connections.lock().expect("count"), 2, "the second request went out again on a new connection");
}

#[tokio::test]
async fn a_server_that_is_not_there_fails_with_the_cause_and_is_not_sent_twice() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
    drop(listener);
    let m = manifest(&base, "", "");
    let started = std::time::Instant::now();
    let error = run(&Agents::new(&m), &m, 1).await.expect_err("refused");
    assert!(error.recoverable, "a server may come back: {error:?}");
    assert!(error.message.to_lowercase().contains("connection refused"), "the cause is kept: {error:?}");
    assert!(!error.message.contains("sent twice"), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}
