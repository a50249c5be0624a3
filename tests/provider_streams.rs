//! Streamed model calls on the wire: the OpenAI-compatible `stream: true` answer (server-sent
//! chunks) and Bedrock `ConverseStream` (binary `vnd.amazon.eventstream` frames, written with
//! the SDK's own framing crate), served by a tiny server on 127.0.0.1:0 that sends the body in
//! small pieces with real gaps, and can cut the connection mid-answer. The payloads under
//! `tests/fixtures/providers/` follow each provider's wire format chunk for chunk.

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_agents::llm::LlmAgents;
use switchyard_agents::{Agents, Bedrock};
use switchyard_engine::ports::{AgentReply, AgentRuntime, EventKind, TokenSink};
use switchyard_model::contracts::{AgentDispatch, OutputStatus};
use switchyard_model::manifest::Manifest;
use switchyard_tests::*;
use tokio::io::AsyncWriteExt;

/// One streamed response: its content type, the body in the pieces it is written in, and
/// whether the connection is cut before the last piece (the declared length is never reached).
#[derive(Clone)]
struct Streamed {
    status: u16,
    content_type: &'static str,
    pieces: Vec<Vec<u8>>,
    cut_after: Option<usize>,
}

/// Serve `responses` in order (the last repeats) on 127.0.0.1:0, one piece every 5 ms; the
/// base URL and the JSON bodies of the requests received.
async fn serve(responses: Vec<Streamed>) -> (String, Arc<Mutex<Vec<Value>>>) {
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
                let Some((_, request)) = switchyard_tests::read_http_request(&mut socket).await else { return };
                let body = serde_json::from_slice(&request).unwrap_or(Value::Null);
                log.lock().expect("log").push(body);
                let total: usize = response.pieces.iter().map(Vec::len).sum();
                let head = format!(
                    "HTTP/1.1 {} Recorded\r\ncontent-type: {}\r\ncontent-length: {total}\r\nconnection: close\r\n\r\n",
                    response.status, response.content_type
                );
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for (i, piece) in response.pieces.iter().enumerate() {
                    if response.cut_after.is_some_and(|cut| i >= cut) {
                        break; // the connection drops mid-answer
                    }
                    if socket.write_all(piece).await.is_err() {
                        return;
                    }
                    let _ = socket.flush().await;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    (base, received)
}

/// The recorded OpenAI stream, one piece per server-sent event.
fn openai_stream(cut_after: Option<usize>) -> Streamed {
    let text = fixture_text("providers/openai-chat-stream.sse");
    let pieces = text.split_inclusive("\n\n").map(|e| e.as_bytes().to_vec()).collect();
    Streamed { status: 200, content_type: "text/event-stream", pieces, cut_after }
}

/// The recorded Bedrock events, framed as the service sends them: one frame per piece.
fn bedrock_stream(cut_after: Option<usize>) -> Streamed {
    let events: Vec<Value> =
        serde_json::from_str(&fixture_text("providers/bedrock-converse-stream.json")).expect("events");
    let pieces = events
        .iter()
        .map(|e| {
            let message = Message::new(e["payload"].to_string().into_bytes())
                .add_header(Header::new(":message-type", HeaderValue::String("event".into())))
                .add_header(Header::new(
                    ":event-type",
                    HeaderValue::String(e["event"].as_str().expect("event").to_string().into()),
                ))
                .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())));
            let mut frame = Vec::new();
            aws_smithy_eventstream::frame::write_message_to(&message, &mut frame).expect("frame");
            frame
        })
        .collect();
    Streamed { status: 200, content_type: "application/vnd.amazon.eventstream", pieces, cut_after }
}

const ANSWER: &str = "Up to five unused vacation days carry over; they expire on March 31 (Handbook §4.2).";

fn manifest(base: &str, provider: &str) -> Manifest {
    let yaml = format!(
        r#"
version: 1
name: streams
tiers:
  - {{tier: 2, timeout: 5s, max_retries: 1, fallback: none, backoff: {{base: 10ms, max: 10ms}}}}
tokens: {{flush_interval: 20ms, flush_chars: 30}}
providers:
  - {{id: compatible, kind: openai, base_url: "{base}/v1", model: gpt-4o-mini, timeout: 5s}}
  - {{id: bedrock, kind: bedrock, model: anthropic.claude-3-5-haiku-20241022-v1:0}}
agents:
  - id: answerer
    tier: 2
    kind: llm
    llm:
      provider: {provider}
      system: You answer from the handbook.
      prompt: "Question: {{question}}"
      stream: answer
      output_schema:
        name: answer_question
        schema: {{type: object, required: [answer], properties: {{answer: {{type: string}}, confidence: {{type: number}}}}}}
intents:
  - {{id: policy_question, route: {{primary: answerer}}, keywords: [vacation], utterances: ["How many vacation days carry over?"]}}
"#
    );
    Manifest::from_yaml(&yaml, "<streams>").unwrap_or_else(|e| panic!("{e}"))
}

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
    let llm = LlmAgents::new(m, &switchyard_engine::http_client::HttpClient::new()).with_provider(
        "bedrock",
        Arc::new(Bedrock::from_client(client, Duration::from_secs(5))),
        provider,
    );
    Agents::new(m).with_llm(llm)
}

fn dispatch() -> AgentDispatch {
    agent_dispatch("answerer", "policy_question", json!({ "question": "How many vacation days carry over?" }), 5_000)
}

/// Run the agent streaming; the reply, and the pieces the sink received with the time each
/// arrived.
async fn run_streaming(agents: &Agents, m: &Manifest) -> (Result<AgentReply, String>, Vec<(String, Duration)>) {
    let (sink, mut rx) = TokenSink::channel();
    let started = tokio::time::Instant::now();
    let agent = m.agent("answerer").expect("agent");
    let run = async move {
        let sink = sink;
        agents.run_streaming(agent, &dispatch(), 1, &sink).await.map_err(|e| e.message)
    };
    let collect = async {
        let mut pieces = Vec::new();
        while let Some(p) = rx.recv().await {
            pieces.push((p, started.elapsed()));
        }
        pieces
    };
    tokio::join!(run, collect)
}

fn answer(reply: Result<AgentReply, String>) -> Value {
    match reply {
        Ok(AgentReply::Answer(v)) => v,
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[tokio::test]
async fn an_openai_stream_arrives_piece_by_piece_and_its_pieces_spell_the_answer_field() {
    let (base, received) = serve(vec![openai_stream(None)]).await;
    let m = manifest(&base, "compatible");
    let (reply, pieces) = run_streaming(&Agents::new(&m), &m).await;
    let reply = answer(reply);
    assert_eq!(reply["primary_output"]["answer"], ANSWER);
    assert_eq!(reply["model_used"], "gpt-4o-mini-2024-07-18");
    assert_eq!(reply["tokens_consumed"], 443, "usage from the stream's last chunk");
    let text: String = pieces.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(text, ANSWER, "only the answer field is streamed, decoded");
    assert!(pieces.len() > 10, "{} pieces", pieces.len());
    let (first, last) = (pieces[0].1, pieces[pieces.len() - 1].1);
    assert!(last > first + Duration::from_millis(50), "pieces arrived over time: {first:?} .. {last:?}");
    let body = received.lock().expect("log")[0].clone();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn an_openai_stream_cut_mid_answer_fails_the_attempt_as_recoverable() {
    let (base, _) = serve(vec![openai_stream(Some(12))]).await;
    let m = manifest(&base, "compatible");
    let (reply, pieces) = run_streaming(&Agents::new(&m), &m).await;
    let text: String = pieces.iter().map(|(p, _)| p.as_str()).collect();
    assert!(!text.is_empty() && ANSWER.starts_with(&text) && text.len() < ANSWER.len(), "{text:?}");
    match reply {
        Err(message) => assert!(message.starts_with("compatible:"), "{message}"),
        other => panic!("a cut stream is not an answer: {other:?}"),
    }
    let m2 = manifest(&base, "compatible");
    let error = Agents::new(&m2)
        .run_streaming(m2.agent("answerer").expect("agent"), &dispatch(), 1, &TokenSink::channel().0)
        .await
        .expect_err("cut");
    assert!(error.recoverable, "the tier's retry can fix a broken stream: {error}");
}

#[tokio::test]
async fn a_bedrock_converse_stream_arrives_frame_by_frame_with_its_usage() {
    let (base, _) = serve(vec![bedrock_stream(None)]).await;
    let m = manifest(&base, "bedrock");
    let (reply, pieces) = run_streaming(&bedrock_agents(&m, &base), &m).await;
    let reply = answer(reply);
    assert_eq!(reply["primary_output"]["answer"], ANSWER);
    assert_eq!(reply["tokens_consumed"], 431);
    let text: String = pieces.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(text, ANSWER);
    let first = pieces.first().expect("pieces").1;
    let last = pieces.last().expect("pieces").1;
    assert!(last > first + Duration::from_millis(50), "pieces arrived over time: {first:?} .. {last:?}");
}

#[tokio::test]
async fn a_bedrock_stream_cut_before_message_stop_fails_the_attempt_as_recoverable() {
    let (base, _) = serve(vec![bedrock_stream(Some(20))]).await;
    let m = manifest(&base, "bedrock");
    let agents = bedrock_agents(&m, &base);
    let error = agents
        .run_streaming(m.agent("answerer").expect("agent"), &dispatch(), 1, &TokenSink::channel().0)
        .await
        .expect_err("cut");
    assert!(error.recoverable, "{error}");
}

/// End to end, real time: the first attempt's stream breaks mid-answer, the tier retries, the
/// second stream completes. The log holds both streams; the answer is the second's text,
/// exactly, with none of the first attempt's words repeated.
async fn a_broken_stream_is_retried_without_duplicated_tokens(provider: &str) {
    let (first, full) = match provider {
        "bedrock" => (bedrock_stream(Some(15)), bedrock_stream(None)),
        _ => (openai_stream(Some(15)), openai_stream(None)),
    };
    let (base, received) = serve(vec![first, full]).await;
    let m = manifest(&base, provider);
    let agents = if provider == "bedrock" { bedrock_agents(&m, &base) } else { Agents::new(&m) };
    let system = switchyard_engine::Embedded::with_agents(Arc::new(m), Default::default(), Arc::new(agents));
    let h = Harness::from_system(system);
    let response = h.post("How many vacation days carry over?", "user-1", "").await;
    let id = json_body(&response)["query_id"].as_str().expect("id").to_string();
    let output = h.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    assert_eq!(output.response_text, ANSWER);
    if provider != "bedrock" {
        assert_eq!(received.lock().expect("log").len(), 2);
    }
    let events = h.system.deps.store.list_events(&id).await.expect("events");
    let winner = events
        .iter()
        .find(|e| e.kind == EventKind::Synthesis)
        .and_then(|e| e.detail["answer_stream"].as_str())
        .expect("answer stream")
        .to_string();
    assert!(winner.ends_with("-a2"), "{winner}");
    let text_of = |stream: &str| -> String {
        events
            .iter()
            .filter(|e| e.kind == EventKind::Token && e.detail["stream"] == stream)
            .map(|e| e.detail["text"].as_str().expect("text"))
            .collect()
    };
    assert_eq!(text_of(&winner), ANSWER, "the accepted stream spells the answer, once");
    let broken = text_of(&format!("{}-a1", winner.strip_suffix("-a2").expect("attempt 2")));
    assert!(!broken.is_empty() && ANSWER.starts_with(&broken) && broken.len() < ANSWER.len(), "{broken:?}");
    assert!(events.iter().any(|e| e.kind == EventKind::Retry));
}

#[tokio::test]
async fn a_broken_openai_stream_is_retried_and_the_answer_has_no_duplicated_tokens() {
    a_broken_stream_is_retried_without_duplicated_tokens("compatible").await;
}

#[tokio::test]
async fn a_broken_bedrock_stream_is_retried_and_the_answer_has_no_duplicated_tokens() {
    a_broken_stream_is_retried_without_duplicated_tokens("bedrock").await;
}
