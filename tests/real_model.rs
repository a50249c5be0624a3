//! A real model in the loop: the shipped examples whose agents are `llm`, the synthesis agent,
//! fifty calls on one connection pool, and the faults a real server has (not there, killed
//! mid-answer, a prompt over its context, an answer cut at `max_tokens`), against llama.cpp's
//! `llama-server` running SmolLM2-135M-Instruct on loopback.
//!
//! scripts/test.sh starts the server (scripts/llama.sh) and exports SWITCHYARD_LLAMA_URL,
//! SWITCHYARD_LLAMA_BIN and SWITCHYARD_LLAMA_MODEL; without them every test fails and says
//! so: these tests never skip. They check the mechanics (answers parsed, tokens joining to the
//! answer, status and band agreeing, every query ending, nothing hanging), not what a 135M
//! model knows: temperature 0, small answer budgets, real time.

use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_agents::Agents;
use switchyard_engine::ports::{AgentReply, AgentRuntime, Event, EventKind, TokenSink};
use switchyard_engine::synth::band;
use switchyard_model::contracts::{AgentDispatch, ConfidenceBand, OrchestratorOutput, OutputStatus};
use switchyard_model::manifest::Manifest;
use switchyard_tests::*;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: run these tests through scripts/test.sh, which starts llama-server (scripts/llama.sh)"
        )
    })
}

/// The running server's OpenAI-compatible base URL.
fn server() -> String {
    env("SWITCHYARD_LLAMA_URL")
}

/// `example` (a folder of examples/) with every `llm` agent on the OpenAI-compatible server at
/// `base`: temperature 0, at most `max_tokens` (4× on retries after a cut answer), and `extra`
/// YAML mapping entries added at the top (a `synthesis` section, say).
fn on_model(example: &str, base: &str, max_tokens: u64, extra: &str) -> Manifest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(example).join("routing.yaml");
    let text = std::fs::read_to_string(&path).expect("example");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    let provider = format!("{{id: local, kind: openai, base_url: \"{base}\", model: smollm2, timeout: 60s}}");
    doc["providers"].as_sequence_mut().expect("providers").push(serde_yaml::from_str(&provider).expect("provider"));
    for agent in doc["agents"].as_sequence_mut().expect("agents") {
        if let Some(llm) = agent.get_mut("llm").and_then(serde_yaml::Value::as_mapping_mut) {
            llm.insert("provider".into(), "local".into());
            llm.insert("temperature".into(), 0.0.into());
            let budget = llm.get("max_tokens").and_then(serde_yaml::Value::as_u64).unwrap_or(1024).min(max_tokens);
            llm.insert("max_tokens".into(), budget.into());
            // An answer cut at the budget gets twice the room on its retry (up to 4×).
            llm.insert("max_tokens_limit".into(), (budget * 4).into());
        }
    }
    if !extra.is_empty() {
        let extra: serde_yaml::Mapping = serde_yaml::from_str(extra).expect("extra");
        doc.as_mapping_mut().expect("mapping").extend(extra);
    }
    let text = serde_yaml::to_string(&doc).expect("yaml");
    let mut manifest = Manifest::from_yaml(&text, &path.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    manifest.base_dir = path.parent().map(PathBuf::from);
    manifest.source = Some(path);
    manifest
}

/// Ask `question` and follow the event log (real time) until the final event, within `limit`.
async fn ask(h: &Harness, question: &str, limit: Duration) -> (OrchestratorOutput, Vec<Event>) {
    let response = h.post(question, "user-1", "").await;
    assert_eq!(response.status_code, 202, "intake answered {}", text_body(&response));
    let id = json_body(&response)["query_id"].as_str().expect("query id").to_string();
    let store = &h.system.deps.store;
    let started = Instant::now();
    while started.elapsed() < limit {
        let events = store.list_events(&id).await.expect("events");
        if events.iter().any(|e| e.kind == EventKind::Final) {
            let output = store.get_output(&id).await.expect("store").expect("output after the final event");
            return (Arc::unwrap_or_clone(output), events);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("`{question}` did not end within {limit:?}: a query hung");
}

/// The text of one stream's token events, in order.
fn stream_text(events: &[Event], stream: &str) -> String {
    let mut batches: Vec<(u64, String)> = events
        .iter()
        .filter(|e| e.kind == EventKind::Token && e.detail["stream"] == stream)
        .map(|e| (e.detail["seq"].as_u64().expect("seq"), e.detail["text"].as_str().expect("text").to_string()))
        .collect();
    batches.sort();
    batches.into_iter().map(|(_, t)| t).collect()
}

/// What every answered output must show: a status with its band, the band matching the
/// confidence, no band `confidence_high` without a reported confidence, no transport error
/// from connection reuse, and the named answer stream spelling the answer.
fn check_output(example: &str, output: &OrchestratorOutput, events: &[Event]) {
    let summary = serde_json::to_string_pretty(output).unwrap_or_default();
    assert!(
        matches!(output.status, OutputStatus::Success | OutputStatus::Partial),
        "{example} must answer (success or partial) with a real model: {summary}"
    );
    assert_eq!(output.final_reason, Some(band(output.response_confidence)), "{example}: band and confidence agree");
    if output.caveats.iter().any(|c| c.contains("no confidence was reported")) {
        assert_ne!(output.final_reason, Some(ConfidenceBand::ConfidenceHigh), "{example}: {summary}");
    }
    for r in &output.agent_results {
        let error = r.error.clone().unwrap_or_default();
        assert!(!error.contains("transport error"), "{example}: {} failed on the wire: {error}", r.agent_id);
        assert!(r.latency_ms >= r.attempt_latency_ms, "{example}: the agent's time covers its attempts");
    }
    let stream = events
        .iter()
        .find(|e| e.kind == EventKind::Synthesis)
        .and_then(|e| e.detail["answer_stream"].as_str().map(String::from));
    if let Some(stream) = stream {
        assert_eq!(
            stream_text(events, &stream),
            output.response_text,
            "{example}: the streamed tokens spell the answer"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_llm_examples_answer_their_own_questions_with_a_real_model() {
    let base = server();
    let cases = [
        ("unified-chat", "How many vacation days can I carry over?"),
        ("negotiation", "We can offer 500 units at $4.20 each."),
        ("research-assistant", "What are the recent advances in retrieval-augmented generation evaluation?"),
    ];
    for (example, question) in cases {
        let h = Harness::start(on_model(example, &base, 200, ""));
        let (output, events) = ask(&h, question, Duration::from_secs(240)).await;
        check_output(example, &output, &events);
        // Usage is counted where the server reports it (llama-server does, streamed or not).
        // Whether an agent's answer passed its schema is the model's doing, not checked here.
        let handoffs = h.system.deps.store.list_handoffs(&output.query_id).await.expect("handoffs");
        for h in handoffs.iter().filter(|h| h.handoff.metadata.model_used.contains("SmolLM2")) {
            assert!(h.handoff.metadata.input_tokens > 0, "{example}: {} reported no usage", h.handoff.agent_id);
        }
        if example == "unified-chat" {
            assert!(events.iter().any(|e| e.kind == EventKind::Token), "the answerer streams its answer");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_synthesis_agent_writes_the_final_answer_with_a_real_model() {
    let m = on_model("unified-chat", &server(), 160, "synthesis: {agent: policy_answerer, timeout: 40s}");
    let h = Harness::start(m);
    let (output, events) = ask(&h, "How many vacation days can I carry over?", Duration::from_secs(240)).await;
    check_output("unified-chat with synthesis", &output, &events);
    let report = output.orchestration.as_ref().map(|o| o["synthesis"].clone()).unwrap_or(Value::Null);
    assert!(report["answered_by"].is_string(), "the synthesis step reports who answered: {report}");
    if report["answered_by"] == "synthesis_agent" {
        assert!(report["input_tokens"].as_u64() > Some(0), "{report}");
    }
}

/// One dispatch to unified-chat's answerer.
fn dispatch() -> AgentDispatch {
    agent_dispatch(
        "policy_answerer",
        "policy_question",
        serde_json::json!({ "question": "How many vacation days carry over?", "policy_excerpts": "§4.2: up to five days carry over." }),
        60_000,
    )
}

/// Run the answerer once, streamed or not; the reply and the streamed pieces joined.
async fn call(agents: &Agents, m: &Manifest, streamed: bool) -> (Result<AgentReply, String>, String) {
    let agent = m.agent("policy_answerer").expect("agent");
    if !streamed {
        return (agents.run(agent, &dispatch(), 1).await.map_err(|e| e.message), String::new());
    }
    let (sink, mut rx) = TokenSink::channel();
    let run = async move {
        let sink = sink;
        agents.run_streaming(agent, &dispatch(), 1, &sink).await.map_err(|e| e.message)
    };
    let collect = async {
        let mut text = String::new();
        while let Some(p) = rx.recv().await {
            text.push_str(&p);
        }
        text
    };
    tokio::join!(run, collect)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sequential_calls_on_one_pool_meet_no_transport_error_and_count_their_usage() {
    let mut m = on_model("unified-chat", &server(), 128, "");
    for agent in m.agents.iter_mut().filter(|a| a.id == "policy_answerer") {
        agent.llm.as_mut().expect("llm").system = "You answer in one short sentence.".into();
    }
    let agents = Agents::new(&m);
    let (mut answered, mut other_errors) = (0, Vec::new());
    for i in 0..50 {
        let streamed = i % 2 == 0;
        let (reply, pieces) = call(&agents, &m, streamed).await;
        match reply {
            Ok(AgentReply::Answer(v)) => {
                answered += 1;
                assert!(v["input_tokens"].as_u64() > Some(0), "call {i}: usage counted: {v}");
                if streamed {
                    assert_eq!(pieces, v["primary_output"]["answer"].as_str().unwrap_or_default(), "call {i}");
                }
            }
            Ok(_) => other_errors.push(format!("call {i}: not the schema")),
            Err(e) => {
                assert!(!e.contains("transport error"), "call {i} (streamed: {streamed}) failed on the wire: {e}");
                other_errors.push(format!("call {i}: {e}"));
            }
        }
    }
    assert!(answered > 0, "no call answered: {other_errors:?}");
}

/// What the output says failed: its caveats and the agents' errors.
fn why(output: &OrchestratorOutput) -> String {
    let errors = output.agent_results.iter().filter_map(|r| r.error.clone());
    output.caveats.iter().cloned().chain(errors).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_at_max_tokens_ends_the_query_naming_the_setting() {
    let mut m = on_model("unified-chat", &server(), 6, "");
    for llm in m.agents.iter_mut().filter_map(|a| a.llm.as_mut()) {
        llm.max_tokens_limit = None; // no room to grow: the cut is final
    }
    let h = Harness::start(m);
    let (output, _) = ask(&h, "How many vacation days can I carry over?", Duration::from_secs(120)).await;
    let answerer = output.agent_results.iter().find(|r| r.agent_id == "policy_answerer").expect("answerer result");
    assert!(
        why(&output).contains("policy_answerer did not answer (local: the answer was cut at max_tokens=6"),
        "{output:#?}"
    );
    assert_eq!(answerer.attempts, 1, "a cut answer is not retried with the same budget");
    assert_ne!(output.status, OutputStatus::Success, "{output:?}");
    assert_eq!(output.final_reason, Some(band(output.response_confidence)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_over_the_context_fails_at_once_and_is_not_retried() {
    let m = on_model("unified-chat", &server(), 32, "");
    let agents = Agents::new(&m);
    let mut d = dispatch();
    d.payload.context["policy_excerpts"] = Value::String("Employees may carry over vacation days. ".repeat(1_500));
    let started = Instant::now();
    let error = agents.run(m.agent("policy_answerer").expect("agent"), &d, 1).await.expect_err("over the context");
    assert!(!error.recoverable, "{error:?}");
    assert!(error.message.ends_with("the prompt is longer than the model's context (HTTP 400)"), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// A second llama-server of our own on a free port (the tests kill it); its base URL.
fn own_server() -> (std::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let child = std::process::Command::new(env("SWITCHYARD_LLAMA_BIN"))
        .args(["-m", &env("SWITCHYARD_LLAMA_MODEL"), "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["-t", "1", "-np", "1", "-c", "2048", "--no-webui"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start llama-server");
    (child, format!("http://127.0.0.1:{port}/v1"))
}

async fn wait_healthy(base: &str) {
    let health = base.trim_end_matches("/v1").to_string() + "/health";
    for _ in 0..300 {
        if let Ok(out) = tokio::process::Command::new("curl").args(["-sf", &health]).output().await {
            if out.status.success() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("llama-server at {base} did not become healthy in 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_answer_ends_the_attempt_with_a_retryable_error_and_no_hang() {
    let (mut child, base) = own_server();
    wait_healthy(&base).await;
    let m = on_model("unified-chat", &base, 400, "");
    let agents = Agents::new(&m);
    let agent = m.agent("policy_answerer").expect("agent");
    let (sink, mut rx) = TokenSink::channel();
    let run = async move {
        let sink = sink;
        agents.run_streaming(agent, &dispatch(), 1, &sink).await
    };
    let kill = async {
        let first = rx.recv().await;
        let _ = child.kill();
        let _ = child.wait();
        while rx.recv().await.is_some() {}
        first
    };
    let started = Instant::now();
    let (reply, first) = tokio::join!(run, kill);
    assert!(first.is_some(), "the answer had started streaming");
    let error = reply.expect_err("the server died mid-answer");
    assert!(error.recoverable, "another attempt may reach a restarted server: {error:?}");
    assert!(started.elapsed() < Duration::from_secs(60), "no hang");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_down_from_the_start_ends_the_query_with_the_cause() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let h = Harness::start(on_model("unified-chat", &format!("http://127.0.0.1:{port}/v1"), 64, ""));
    let (output, _) = ask(&h, "How many vacation days can I carry over?", Duration::from_secs(120)).await;
    let why = why(&output).to_lowercase();
    assert!(why.contains("policy_answerer did not answer") && why.contains("connection refused"), "{output:#?}");
    assert_ne!(output.status, OutputStatus::Success);
    assert_eq!(output.final_reason, Some(band(output.response_confidence)));
}
