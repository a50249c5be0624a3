//! The clients that leave the process — the OpenAI-compatible and Bedrock Converse model
//! providers, the `http` and `lambda` agent kinds — on the wire, against recorded responses
//! served by a tiny HTTP server on 127.0.0.1:0 in the test. No internet, real time (the
//! timeouts are real sockets), short durations.

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_agents::llm::LlmAgents;
use switchyard_agents::remote::LambdaAgents;
use switchyard_agents::{Agents, Bedrock};
use switchyard_engine::ports::{AgentReply, AgentRuntime};
use switchyard_model::contracts::AgentDispatch;
use switchyard_model::manifest::Manifest;
use switchyard_tests::fixture_text;
use tokio::io::AsyncWriteExt;

/// A recorded response: status, extra headers, body, and how long to wait before answering.
#[derive(Clone)]
struct Recorded {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
    delay: Duration,
}

fn ok(body: String) -> Recorded {
    Recorded { status: 200, headers: vec![], body, delay: Duration::ZERO }
}

/// A request the server received.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: String,
    body: Value,
}

/// Serve `responses` in order (the last one repeats) on 127.0.0.1:0; returns the base URL and
/// the requests received.
async fn serve(responses: Vec<Recorded>) -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        let mut n = 0usize;
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let response = responses[n.min(responses.len() - 1)].clone();
            n += 1;
            let log = log.clone();
            tokio::spawn(async move {
                let Some((head, request)) = switchyard_tests::read_http_request(&mut socket).await else { return };
                let path = head.split_whitespace().nth(1).unwrap_or_default().to_string();
                let body = serde_json::from_slice(&request).unwrap_or(Value::Null);
                log.lock().expect("log").push(Received { path, headers: head.to_lowercase(), body });
                tokio::time::sleep(response.delay).await;
                let mut out = format!(
                    "HTTP/1.1 {} Recorded\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    response.status,
                    response.body.len()
                );
                for (k, v) in &response.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&response.body);
                let _ = socket.write_all(out.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (base, received)
}

/// A manifest with one agent of each remote kind, aimed at `base`.
fn manifest(base: &str, provider_timeout: &str) -> Manifest {
    let yaml = format!(
        r#"
version: 1
name: wire
tiers:
  - {{tier: 2, timeout: 5s, max_retries: 1, fallback: none}}
providers:
  - {{id: compatible, kind: openai, base_url: "{base}/v1", model: gpt-4o-mini, timeout: {provider_timeout}, throttle_retries: 2, throttle_backoff: 10ms}}
  - {{id: bedrock, kind: bedrock, model: anthropic.claude-3-5-haiku-20241022-v1:0, throttle_retries: 2, throttle_backoff: 10ms}}
agents:
  - id: critic_openai
    tier: 2
    kind: llm
    llm:
      provider: compatible
      system: You review answers.
      prompt: "Question: {{question}}"
      output_schema:
        name: evaluate_answer
        schema: {{type: object, required: [verdict, critique], properties: {{verdict: {{enum: [accept, reject]}}}}}}
  - id: critic_bedrock
    tier: 2
    kind: llm
    llm:
      provider: bedrock
      system: You review answers.
      prompt: "Question: {{question}}"
      output_schema:
        name: evaluate_answer
        schema: {{type: object, required: [verdict, critique], properties: {{verdict: {{enum: [accept, reject]}}}}}}
  - {{id: remote_service, tier: 2, kind: http, http: {{url: "{base}/agent", headers: {{x-team: analytics}}}}}}
  - {{id: user_function, tier: 2, kind: lambda, lambda: {{function: my-agent, qualifier: live}}}}
intents:
  - {{id: review, route: {{primary: critic_openai}}, keywords: [review]}}
"#
    );
    Manifest::from_yaml(&yaml, "<wire>").unwrap_or_else(|e| panic!("{e}"))
}

fn dispatch(agent: &str, timeout_ms: u64) -> AgentDispatch {
    switchyard_tests::agent_dispatch(agent, "review", json!({ "question": "Is the draft grounded?" }), timeout_ms)
}

async fn run(
    agents: &Agents,
    m: &Manifest,
    agent: &str,
    timeout_ms: u64,
) -> Result<AgentReply, switchyard_engine::ports::AgentError> {
    agents.run(m.agent(agent).expect("agent"), &dispatch(agent, timeout_ms), 1).await
}

fn answer(reply: AgentReply) -> Value {
    match reply {
        AgentReply::Answer(v) => v,
        AgentReply::Typed(a) => a.to_value(),
        AgentReply::Malformed(raw) => panic!("malformed: {raw}"),
        AgentReply::AwaitingApproval => panic!("no tool of these agents waits for approval"),
    }
}

/// Bedrock aimed at the loopback server with static credentials and the SDK's retries off.
fn bedrock_agents(m: &Manifest, base: &str) -> Agents {
    use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(base)
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", None, None, "test"))
        .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
        .build();
    let client = aws_sdk_bedrockruntime::Client::from_conf(config);
    let provider = m.provider("bedrock").expect("provider").clone();
    let http = switchyard_engine::http_client::HttpClient::new();
    let llm = LlmAgents::new(m, &http).with_provider(
        "bedrock",
        Arc::new(Bedrock::from_client(client, Duration::from_millis(500))),
        provider,
    );
    Agents::new(m).with_llm(llm)
}

// ---- OpenAI-compatible -----------------------------------------------------------------------

#[tokio::test]
async fn an_openai_compatible_answer_is_parsed_with_its_tokens_model_and_cache_hit() {
    let (base, received) = serve(vec![ok(fixture_text("providers/openai-chat-completion.json"))]).await;
    let m = manifest(&base, "2s");
    let agents = Agents::new(&m);
    let reply = answer(run(&agents, &m, "critic_openai", 2_000).await.expect("answer"));
    assert_eq!(reply["primary_output"]["verdict"], "accept");
    assert_eq!(reply["confidence"], 0.91);
    assert_eq!(reply["model_used"], "gpt-4o-mini-2024-07-18");
    assert_eq!(reply["tokens_consumed"], 1163);
    assert_eq!(reply["cache_hit"], true);
    let requests = received.lock().expect("log").clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    let body = &requests[0].body;
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["messages"][0], json!({ "role": "system", "content": "You review answers." }));
    assert_eq!(body["messages"][1]["content"], "Question: Is the draft grounded?");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "evaluate_answer");
}

#[tokio::test]
async fn an_openai_compatible_answer_in_prose_is_malformed_with_the_raw_text() {
    let (base, _) = serve(vec![ok(fixture_text("providers/openai-chat-completion-prose.json"))]).await;
    let m = manifest(&base, "2s");
    match run(&Agents::new(&m), &m, "critic_openai", 2_000).await.expect("a reply") {
        AgentReply::Malformed(raw) => assert_eq!(raw, "I think the answer looks fine overall, nice work!"),
        other => panic!("expected malformed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_429_is_backed_off_and_the_retried_request_succeeds() {
    let limited = Recorded {
        status: 429,
        headers: vec![("retry-after", "0")],
        body: fixture_text("providers/openai-rate-limited.json"),
        delay: Duration::ZERO,
    };
    let (base, received) = serve(vec![limited, ok(fixture_text("providers/openai-chat-completion.json"))]).await;
    let m = manifest(&base, "2s");
    let reply = answer(run(&Agents::new(&m), &m, "critic_openai", 2_000).await.expect("answer after the 429"));
    assert_eq!(reply["primary_output"]["verdict"], "accept");
    assert_eq!(received.lock().expect("log").len(), 2);
}

#[tokio::test]
async fn a_provider_that_keeps_throttling_fails_the_attempt_as_recoverable() {
    let limited = Recorded {
        status: 429,
        headers: vec![],
        body: fixture_text("providers/openai-rate-limited.json"),
        delay: Duration::ZERO,
    };
    let (base, received) = serve(vec![limited]).await;
    let m = manifest(&base, "2s");
    let error = run(&Agents::new(&m), &m, "critic_openai", 2_000).await.expect_err("still throttled");
    assert!(error.recoverable, "the tier's retry policy takes over: {error}");
    assert_eq!(received.lock().expect("log").len(), 3, "one request and throttle_retries: 2");
}

#[tokio::test]
async fn a_provider_that_does_not_answer_in_time_fails_the_attempt_as_recoverable() {
    let slow = Recorded { delay: Duration::from_secs(3), ..ok(fixture_text("providers/openai-chat-completion.json")) };
    let (base, _) = serve(vec![slow]).await;
    let m = manifest(&base, "200ms");
    let started = std::time::Instant::now();
    let error = run(&Agents::new(&m), &m, "critic_openai", 2_000).await.expect_err("timed out");
    assert!(error.recoverable && error.message.contains("no response within 200 ms"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_client_error_is_not_retried_but_a_server_error_is() {
    let (base, _) = serve(vec![Recorded {
        status: 401,
        headers: vec![],
        body: r#"{"error":{"message":"bad key"}}"#.into(),
        delay: Duration::ZERO,
    }])
    .await;
    let m = manifest(&base, "2s");
    let error = run(&Agents::new(&m), &m, "critic_openai", 2_000).await.expect_err("401");
    assert!(!error.recoverable && error.message.contains("401"), "{error}");
    let (base, _) =
        serve(vec![Recorded { status: 503, headers: vec![], body: "{}".into(), delay: Duration::ZERO }]).await;
    let m = manifest(&base, "2s");
    assert!(run(&Agents::new(&m), &m, "critic_openai", 2_000).await.expect_err("503").recoverable);
}

// ---- Bedrock Converse ------------------------------------------------------------------------

#[tokio::test]
async fn a_bedrock_converse_answer_is_parsed_with_its_tokens() {
    let (base, received) = serve(vec![ok(fixture_text("providers/bedrock-converse.json"))]).await;
    let m = manifest(&base, "2s");
    let reply = answer(run(&bedrock_agents(&m, &base), &m, "critic_bedrock", 2_000).await.expect("answer"));
    assert_eq!(reply["primary_output"]["verdict"], "reject");
    assert_eq!(reply["tokens_consumed"], 435);
    assert_eq!(reply["cache_hit"], false);
    assert_eq!(reply["model_used"], "anthropic.claude-3-5-haiku-20241022-v1:0");
    let requests = received.lock().expect("log").clone();
    assert_eq!(requests[0].path, "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse");
    assert!(requests[0].headers.contains("authorization: aws4-hmac-sha256"), "signed: {}", requests[0].headers);
    let body = &requests[0].body;
    assert!(body["system"][0]["text"]
        .as_str()
        .is_some_and(|s| s.starts_with("You review answers.") && s.contains("evaluate_answer")));
    assert_eq!(body["messages"][0]["content"][0]["text"], "Question: Is the draft grounded?");
}

#[tokio::test]
async fn a_bedrock_answer_in_prose_is_malformed_with_the_raw_text() {
    let (base, _) = serve(vec![ok(fixture_text("providers/bedrock-converse-prose.json"))]).await;
    let m = manifest(&base, "2s");
    match run(&bedrock_agents(&m, &base), &m, "critic_bedrock", 2_000).await.expect("a reply") {
        AgentReply::Malformed(raw) => assert_eq!(raw, "Here is my review: the draft is mostly fine."),
        other => panic!("expected malformed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_bedrock_answer_stopped_at_max_tokens_or_over_the_context_fails_saying_so_without_the_service_text() {
    let cut = fixture_text("providers/bedrock-converse.json")
        .replace(r#""stopReason": "end_turn""#, r#""stopReason": "max_tokens""#);
    let (base, _) = serve(vec![ok(cut)]).await;
    let m = manifest(&base, "2s");
    let error = run(&bedrock_agents(&m, &base), &m, "critic_bedrock", 2_000).await.expect_err("cut");
    assert!(!error.recoverable && error.message.contains("the answer was cut at max_tokens=1024"), "{error:?}");
    let too_long = Recorded {
        status: 400,
        headers: vec![("x-amzn-errortype", "ValidationException")],
        body: r#"{"message":"Input is too long for requested model. (account 123456789012)"}"#.into(),
        delay: Duration::ZERO,
    };
    let (base, _) = serve(vec![too_long]).await;
    let m = manifest(&base, "2s");
    let error = run(&bedrock_agents(&m, &base), &m, "critic_bedrock", 2_000).await.expect_err("too long");
    assert!(!error.recoverable, "{error:?}");
    assert!(error.message.ends_with("the prompt is longer than the model's context (HTTP 400)"), "{error:?}");
    assert!(!error.message.contains("123456789012"), "the service's text stays in the logs: {error:?}");
}

#[tokio::test]
async fn a_bedrock_throttling_exception_is_backed_off_and_the_retried_request_succeeds() {
    let throttled = Recorded {
        status: 429,
        headers: vec![("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")],
        body: fixture_text("providers/bedrock-throttling.json"),
        delay: Duration::ZERO,
    };
    let (base, received) = serve(vec![throttled, ok(fixture_text("providers/bedrock-converse.json"))]).await;
    let m = manifest(&base, "2s");
    let reply =
        answer(run(&bedrock_agents(&m, &base), &m, "critic_bedrock", 2_000).await.expect("answer after throttling"));
    assert_eq!(reply["primary_output"]["verdict"], "reject");
    assert_eq!(received.lock().expect("log").len(), 2);
}

#[tokio::test]
async fn a_bedrock_call_that_does_not_answer_in_time_fails_as_recoverable() {
    let slow = Recorded { delay: Duration::from_secs(3), ..ok(fixture_text("providers/bedrock-converse.json")) };
    let (base, _) = serve(vec![slow]).await;
    let m = manifest(&base, "2s");
    let error = run(&bedrock_agents(&m, &base), &m, "critic_bedrock", 2_000).await.expect_err("timed out");
    assert!(error.recoverable, "{error}");
}

// ---- http and lambda agents ------------------------------------------------------------------

#[tokio::test]
async fn an_http_agent_gets_the_dispatch_envelope_and_its_handoff_comes_back() {
    let handoff = json!({ "handoff": { "status": "success", "primary_output": { "response": "Remote answer." }, "confidence": 0.83 } });
    let (base, received) = serve(vec![ok(handoff.to_string())]).await;
    let m = manifest(&base, "2s");
    let reply = answer(run(&Agents::new(&m), &m, "remote_service", 2_000).await.expect("answer"));
    assert_eq!(reply["handoff"]["primary_output"]["response"], "Remote answer.");
    let requests = received.lock().expect("log").clone();
    assert_eq!(requests[0].path, "/agent");
    assert!(requests[0].headers.contains("x-team: analytics"));
    assert_eq!(requests[0].body["dispatch"]["dispatch_id"], "6f1c2a7e-0000-4000-8000-000000000001");
    assert_eq!(requests[0].body["dispatch"]["payload"]["context"]["question"], "Is the draft grounded?");
}

#[tokio::test]
async fn an_http_agent_slower_than_its_dispatch_timeout_is_cut_off() {
    let slow = Recorded { delay: Duration::from_secs(3), ..ok("{}".into()) };
    let (base, _) = serve(vec![slow]).await;
    let m = manifest(&base, "2s");
    let started = std::time::Instant::now();
    let error = run(&Agents::new(&m), &m, "remote_service", 300).await.expect_err("timed out");
    assert!(error.recoverable && error.message.contains("no response within 300 ms"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_lambda_agent_invokes_the_function_with_the_dispatch_and_reports_function_errors() {
    let handoff = json!({ "status": "success", "primary_output": { "response": "From Lambda." }, "confidence": 0.8 });
    let crashed = Recorded {
        headers: vec![("x-amz-function-error", "Unhandled")],
        ..ok(r#"{"errorMessage":"boom","errorType":"Error"}"#.into())
    };
    let (base, received) = serve(vec![ok(handoff.to_string()), crashed]).await;
    let m = manifest(&base, "2s");
    use aws_sdk_lambda::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_lambda::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(&base)
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", None, None, "test"))
        .build();
    let agents = Agents::new(&m).with_lambda(LambdaAgents::with_client(aws_sdk_lambda::Client::from_conf(config)));
    let reply = answer(run(&agents, &m, "user_function", 2_000).await.expect("answer"));
    assert_eq!(reply["primary_output"]["response"], "From Lambda.");
    let requests = received.lock().expect("log").clone();
    assert_eq!(requests[0].path, "/2015-03-31/functions/my-agent/invocations?Qualifier=live");
    assert_eq!(requests[0].body["dispatch"]["target_agent"], "user_function");
    let error = run(&agents, &m, "user_function", 2_000).await.expect_err("function error");
    assert!(error.recoverable && error.message.contains("Unhandled") && error.message.contains("boom"), "{error}");
}

// ---- embedding providers for the retriever's dense list --------------------------------------

/// Three one-chunk documents; "cash" answers the question below without sharing a word with it.
fn embedding_corpus(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-embeddings-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    for (file, text) in [
        ("cash.md", "date: 2024\n\nThe company ended the year holding more money in the bank than ever before."),
        ("margin.md", "date: 2023\n\nOperating margin was 15.1% on a statutory basis."),
        ("staff.md", "date: 2024\n\nHeadcount rose to 9,400 people across four regions."),
    ] {
        std::fs::write(dir.join(file), text).expect("write");
    }
    dir
}

const LIQUIDITY: &str = "What were the liquidity reserves?";

fn embedding_manifest(provider: &str, index: &std::path::Path) -> Manifest {
    let yaml = format!(
        r#"
version: 1
name: embeddings
tiers:
  - {{tier: 2, timeout: 5s, max_retries: 1, fallback: none}}
providers:
  {provider}
agents:
  - id: finder
    tier: 2
    kind: retriever
    retriever:
      index: "{}"
      embeddings: {{provider: emb}}
      top_k: 2
      attempts: [{{name: dense, mode: dense, min_score: 0.5}}]
intents:
  - {{id: review, route: {{primary: finder}}, keywords: [review]}}
"#,
        index.display()
    );
    Manifest::from_yaml(&yaml, "<embeddings>").unwrap_or_else(|e| panic!("{e}"))
}

fn retrieval_dispatch(question: &str) -> AgentDispatch {
    let mut d = dispatch("finder", 5_000);
    d.payload.context = json!({ "question": question });
    d
}

fn chunk_ids(out: &Value) -> Vec<String> {
    out["primary_output"]["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .map(|c| c["chunk_id"].as_str().expect("id").to_string())
        .collect()
}

#[tokio::test]
async fn an_index_built_with_openai_embeddings_finds_the_chunk_that_shares_no_word_with_the_question() {
    // GIVEN recorded /embeddings answers: the three chunks, then the question
    let (base, received) = serve(vec![
        ok(fixture_text("providers/openai-embeddings-corpus.json")),
        ok(fixture_text("providers/openai-embeddings-query.json")),
    ])
    .await;
    let provider = format!(r#"- {{id: emb, kind: openai, base_url: "{base}/v1", model: text-embedding-3-small}}"#);
    let dir = embedding_corpus("openai");
    let index = dir.join("index.json");
    // WHEN the index is built with embeddings (what `index build --embeddings emb` does)
    let m = embedding_manifest(&provider, &index);
    let http = switchyard_engine::http_client::HttpClient::new();
    let embedder =
        switchyard_agents::embeddings::Embedder::from_provider(m.provider("emb").expect("provider"), None, &http)
            .expect("embedder");
    let file = switchyard_core::retrieval::IndexFile::build(&dir, Default::default()).expect("build");
    let file = switchyard_agents::embeddings::embed_index(file, &embedder).await.expect("embed");
    file.write(&index).expect("write");
    // AND the retriever searches it
    let agents = Agents::new(&m);
    assert!(agents.problems().is_empty(), "{:?}", agents.problems());
    let out =
        answer(agents.run(m.agent("finder").expect("agent"), &retrieval_dispatch(LIQUIDITY), 1).await.expect("ok"));
    // THEN the dense list ranks the stored embeddings, and the money chunk comes first
    assert_eq!(chunk_ids(&out)[0], "cash#c1", "{out:#}");
    let lists = &out["primary_output"]["retrieval"]["attempts"][0]["lists"];
    assert_eq!(lists[0]["list"], "embedding:question", "{lists}");
    // AND the wire carried the chunks in one batch, then the question, with the model
    let got = received.lock().expect("log").clone();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|r| r.path == "/v1/embeddings"));
    assert_eq!(got[0].body["model"], "text-embedding-3-small");
    assert_eq!(got[0].body["input"].as_array().map(Vec::len), Some(3));
    assert_eq!(got[1].body["input"], json!([LIQUIDITY]));
    // AND the index file keeps the vectors, so loading it needs no provider
    let loaded = switchyard_core::retrieval::Index::load(&index).expect("load");
    assert_eq!(loaded.embedding_model(), Some(("openai", "text-embedding-3-small", 4)));
}

#[tokio::test]
async fn bad_embedding_answers_and_mismatched_indexes_fail_with_what_was_wrong() {
    let dir = embedding_corpus("bad");
    let index = dir.join("index.json");
    // An index without embeddings, for a retriever that wants them: an init problem.
    switchyard_core::retrieval::IndexFile::build(&dir, Default::default())
        .expect("build")
        .write(&index)
        .expect("write");
    let plain =
        embedding_manifest(r#"- {id: emb, kind: openai, base_url: "http://127.0.0.1:9/v1", model: m1}"#, &index);
    let problems = Agents::new(&plain).problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("its index holds no embeddings; build it with `switchyard index build --embeddings`"));
    // An index embedded with another model: an init problem naming both.
    let (base, _) = serve(vec![ok(fixture_text("providers/openai-embeddings-corpus.json"))]).await;
    let provider = format!(r#"- {{id: emb, kind: openai, base_url: "{base}/v1", model: text-embedding-3-small}}"#);
    let m = embedding_manifest(&provider, &index);
    let http = switchyard_engine::http_client::HttpClient::new();
    let embedder =
        switchyard_agents::embeddings::Embedder::from_provider(m.provider("emb").expect("p"), None, &http).expect("e");
    let file = switchyard_core::retrieval::IndexFile::build(&dir, Default::default()).expect("build");
    switchyard_agents::embeddings::embed_index(file, &embedder).await.expect("embed").write(&index).expect("write");
    let other = embedding_manifest(&provider.replace("text-embedding-3-small", "text-embedding-3-large"), &index);
    let problems = Agents::new(&other).problems();
    assert!(
        problems[0].contains("holds `openai` embeddings of `text-embedding-3-small`, but the retriever embeds queries with `openai` `text-embedding-3-large`"),
        "{problems:?}"
    );
    // Wrong count, wrong dimensions, not numbers, a server error: the agent fails, saying why;
    // only the server error may be retried.
    for (recorded, message, recoverable) in [
        (
            ok(fixture_text("providers/openai-embeddings-corpus.json")),
            "the embedding provider's answer is unusable: 3 embeddings for 1 inputs",
            false,
        ),
        (ok(json!({"data": [{"index": 0, "embedding": [0.1, 0.2]}]}).to_string()), "its dimensions differ", false),
        (
            ok(json!({"data": [{"index": 0, "embedding": [0.1, null, 0.3, 0.4]}]}).to_string()),
            "`data[0].embedding` holds something that is not a number",
            false,
        ),
        (
            ok(json!({"data": [{"index": 0, "embedding": [0.0, 0.0, 0.0, 0.0]}]}).to_string()),
            "embedding 0 is all zeros",
            false,
        ),
        (
            Recorded { status: 500, headers: vec![], body: "{\"error\":\"overloaded\"}".into(), delay: Duration::ZERO },
            "the embedding provider answered HTTP 500",
            true,
        ),
    ] {
        let (base, _) = serve(vec![recorded]).await;
        let m = embedding_manifest(
            &format!(r#"- {{id: emb, kind: openai, base_url: "{base}/v1", model: text-embedding-3-small}}"#),
            &index,
        );
        let agents = Agents::new(&m);
        assert!(agents.problems().is_empty(), "{:?}", agents.problems());
        let e =
            agents.run(m.agent("finder").expect("agent"), &retrieval_dispatch(LIQUIDITY), 1).await.expect_err(message);
        assert!(e.message.starts_with("embedding the query with `text-embedding-3-small`: "), "{}", e.message);
        assert!(e.message.contains(message), "{} — wanted {message}", e.message);
        assert_eq!(e.recoverable, recoverable, "{}", e.message);
    }
}

#[tokio::test]
async fn an_index_built_with_bedrock_titan_embeddings_is_searched_through_invoke_model() {
    use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
    // GIVEN recorded Titan InvokeModel answers: one per chunk, then the question's
    let bodies: Vec<Value> =
        serde_json::from_str(&fixture_text("providers/bedrock-titan-embeddings.json")).expect("fixture");
    let (base, received) = serve(bodies.iter().map(|b| ok(b.to_string())).collect()).await;
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(&base)
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", None, None, "test"))
        .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
        .build();
    let client = aws_sdk_bedrockruntime::Client::from_conf(config);
    let titan = || {
        switchyard_agents::embeddings::Embedder::titan_from_client(
            client.clone(),
            "amazon.titan-embed-text-v2:0",
            Duration::from_secs(2),
        )
    };
    let dir = embedding_corpus("titan");
    let index = dir.join("index.json");
    let file = switchyard_core::retrieval::IndexFile::build(&dir, Default::default()).expect("build");
    switchyard_agents::embeddings::embed_index(file, &titan()).await.expect("embed").write(&index).expect("write");
    let m = embedding_manifest("- {id: emb, kind: bedrock, model: \"amazon.titan-embed-text-v2:0\"}", &index);
    let retrievers = switchyard_agents::retriever::RetrieverAgents::with_http(
        &m,
        &switchyard_engine::http_client::HttpClient::new(),
    )
    .with_embedder("finder", titan());
    let agents = Agents::new(&m).with_retrievers(retrievers);
    assert!(agents.problems().is_empty(), "{:?}", agents.problems());
    // WHEN the retriever searches
    let out =
        answer(agents.run(m.agent("finder").expect("agent"), &retrieval_dispatch(LIQUIDITY), 1).await.expect("ok"));
    // THEN the Titan vectors rank the money chunk first
    assert_eq!(chunk_ids(&out)[0], "cash#c1", "{out:#}");
    // AND each text went to InvokeModel on its own, as Titan's `inputText`
    let got = received.lock().expect("log").clone();
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|r| r.path == "/model/amazon.titan-embed-text-v2%3A0/invoke"), "{:?}", got[0].path);
    assert!(got[0].body["inputText"].as_str().is_some_and(|t| t.contains("money in the bank")));
    assert_eq!(got[3].body["inputText"], LIQUIDITY);
    assert!(got[3].headers.contains("authorization: aws4-hmac-sha256"), "signed: {}", got[3].headers);
}

// ---- Amazon Bedrock Knowledge Bases Retrieve ---------------------------------------------------

fn kb_agents(m: &Manifest) -> Agents {
    use aws_sdk_bedrockruntime::config::{Credentials, Region, SharedCredentialsProvider};
    let config = aws_config::SdkConfig::builder()
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG",
            None,
            None,
            "test",
        )))
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    let retrievers =
        switchyard_agents::retriever::RetrieverAgents::with_http(m, &switchyard_engine::http_client::HttpClient::new())
            .with_aws_config(config);
    Agents::new(m).with_retrievers(retrievers)
}

fn kb_manifest(base: &str) -> Manifest {
    let yaml = format!(
        r#"
version: 1
name: kb
tiers:
  - {{tier: 2, timeout: 5s, max_retries: 1, fallback: none}}
agents:
  - id: finder
    tier: 2
    kind: retriever
    citation_source: document
    retriever:
      knowledge_base: {{id: KB12EXAMPL, endpoint_url: "{base}", search_type: hybrid}}
      top_k: 3
intents:
  - {{id: review, route: {{primary: finder}}, keywords: [review]}}
"#
    );
    Manifest::from_yaml(&yaml, "<kb>").unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn a_knowledge_base_retrieve_answer_becomes_ranked_candidates_signed_and_filtered_by_year() {
    // GIVEN a recorded Retrieve answer on loopback
    let (base, received) = serve(vec![ok(fixture_text("providers/bedrock-kb-retrieve.json"))]).await;
    let m = kb_manifest(&base);
    let agents = kb_agents(&m);
    assert!(agents.problems().is_empty(), "{:?}", agents.problems());
    // WHEN the retriever searches
    let out = answer(
        agents
            .run(m.agent("finder").expect("agent"), &retrieval_dispatch("How did Cloud revenue grow?"), 1)
            .await
            .expect("ok"),
    );
    // THEN the results are the candidates, best first, cited by the knowledge base's chunk ids
    assert_eq!(chunk_ids(&out), ["1%3A0%3AaBcD1234", "1%3A0%3AeFgH5678", "1%3A0%3AiJkL9012"]);
    assert_eq!(out["evidence"][0]["source_id"], "1%3A0%3AaBcD1234");
    assert!(out["primary_output"]["response"].as_str().is_some_and(|r| r.contains("Cloud revenue grew 41% in 2024")));
    assert_eq!(out["primary_output"]["retrieval"]["attempts"][0]["setting"], "knowledge_base");
    // AND the request was the Retrieve API's, SigV4-signed for `bedrock`
    let got = received.lock().expect("log").clone();
    assert_eq!(got[0].path, "/knowledgebases/KB12EXAMPL/retrieve");
    assert_eq!(got[0].body["retrievalQuery"]["text"], "How did Cloud revenue grow?");
    assert_eq!(got[0].body["retrievalConfiguration"]["vectorSearchConfiguration"]["overrideSearchType"], "HYBRID");
    assert!(got[0].headers.contains("authorization: aws4-hmac-sha256 credential=akidexample/"), "{}", got[0].headers);
    assert!(got[0].headers.contains("/us-east-1/bedrock/aws4_request"), "{}", got[0].headers);
    // AND a year filter keeps only that year's results
    let mut d = retrieval_dispatch("How did Cloud revenue grow?");
    d.payload.context["preferences"] = json!({ "requested_years": [2023] });
    let out = answer(agents.run(m.agent("finder").expect("agent"), &d, 1).await.expect("ok"));
    assert_eq!(chunk_ids(&out), ["1%3A0%3AeFgH5678"]);
}

#[tokio::test]
async fn a_knowledge_base_that_throttles_or_answers_nonsense_fails_the_agent_saying_why() {
    for (recorded, message, recoverable) in [
        (
            Recorded {
                status: 429,
                headers: vec![],
                body: "{\"message\":\"Rate exceeded\"}".into(),
                delay: Duration::ZERO,
            },
            "Retrieve answered HTTP 429",
            true,
        ),
        (ok("{\"results\": []}".into()), "Retrieve: the answer has no `retrievalResults` list", false),
        (ok("<html>".into()), "Retrieve: not JSON", false),
    ] {
        let (base, _) = serve(vec![recorded]).await;
        let m = kb_manifest(&base);
        let e = kb_agents(&m)
            .run(m.agent("finder").expect("agent"), &retrieval_dispatch("How did Cloud revenue grow?"), 1)
            .await
            .expect_err(message);
        assert!(e.message.starts_with(message), "{} — wanted {message}", e.message);
        assert_eq!(e.recoverable, recoverable);
    }
}
