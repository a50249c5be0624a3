//! The events-stream function driven through the Lambda Runtime API's streaming protocol: a
//! local Runtime API on 127.0.0.1 hands Function URL events to the real `lambda_runtime` loop
//! running `events_stream::handle`, and reads each response as Lambda does — a chunked POST
//! with `Lambda-Runtime-Function-Response-Mode: streaming`, a JSON metadata prelude (status,
//! headers), eight NUL bytes, then the body as it is written. The events of a running query
//! reach the Runtime API before the query's output exists.
//!
//! One test on purpose: the runtime reads its endpoint from process environment variables.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::follow::FollowSettings;
use switchyard_engine::ports::Store;
use switchyard_engine::EngineSettings;
use switchyard_tests::tokens::Issuer;
use switchyard_tests::*;
use tokio::sync::{mpsc, Mutex};

/// What the Runtime API saw of one streamed response.
#[derive(Debug)]
enum Seen {
    /// The response's request headers.
    Start(HeaderMap),
    /// A body chunk.
    Chunk(bytes::Bytes),
    /// The body ended (or the connection was cut by the Runtime API).
    End,
    /// The function reported an invocation error.
    Error(String),
}

#[derive(Clone)]
struct RuntimeApi {
    invocations: Arc<Mutex<mpsc::Receiver<(String, Value)>>>,
    seen: mpsc::UnboundedSender<Seen>,
    /// Stop reading a response after this many chunks (a client that goes away).
    cut_after: Arc<std::sync::Mutex<Option<usize>>>,
}

async fn next(State(api): State<RuntimeApi>) -> Response {
    let Some((request_id, event)) = api.invocations.lock().await.recv().await else {
        return StatusCode::GONE.into_response();
    };
    let deadline = chrono::Utc::now().timestamp_millis() + 120_000;
    let mut response = Response::new(Body::from(event.to_string()));
    let headers = response.headers_mut();
    headers.insert("lambda-runtime-aws-request-id", request_id.parse().expect("id"));
    headers.insert("lambda-runtime-deadline-ms", deadline.to_string().parse().expect("deadline"));
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:events-stream".parse().expect("arn"),
    );
    headers.insert("lambda-runtime-trace-id", "Root=1-6741f3a2-0123456789abcdef01234567".parse().expect("trace"));
    headers.insert("content-type", "application/json".parse().expect("type"));
    response
}

async fn response(State(api): State<RuntimeApi>, headers: HeaderMap, body: Body) -> StatusCode {
    let _ = api.seen.send(Seen::Start(headers));
    let cut_after = api.cut_after.lock().expect("lock").take();
    let mut stream = body.into_data_stream();
    let mut n = 0;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { break };
        let _ = api.seen.send(Seen::Chunk(chunk));
        n += 1;
        if cut_after.is_some_and(|c| n >= c) {
            break;
        }
    }
    let _ = api.seen.send(Seen::End);
    StatusCode::ACCEPTED
}

async fn error(State(api): State<RuntimeApi>, body: String) -> StatusCode {
    let _ = api.seen.send(Seen::Error(body));
    StatusCode::ACCEPTED
}

/// A Function URL event for `GET /v1/queries/{id}/events` with `headers`.
fn url_event(id: &str, headers: &[(&str, &str)]) -> Value {
    let mut event: Value = serde_json::from_str(&fixture_text("events/function-url-request.json")).expect("fixture");
    let path = format!("/v1/queries/{id}/events");
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["requestId"] = json!(uuid::Uuid::new_v4().to_string());
    let map = event["headers"].as_object_mut().expect("headers");
    map.remove("authorization");
    map.remove("last-event-id");
    for (k, v) in headers {
        map.insert((*k).to_string(), json!(v));
    }
    event
}

/// A streamed response as the Runtime API received it.
struct Streamed {
    headers: HeaderMap,
    prelude: Value,
    body: String,
    /// Event ids that reached the Runtime API before the query's output existed.
    before_output: Vec<String>,
    error: Option<String>,
}

fn ids_in(text: &str) -> Vec<String> {
    text.lines().filter_map(|l| l.strip_prefix("id: ")).map(str::to_string).collect()
}

/// Read one response from `seen`; `store`/`query` to check when each chunk arrived.
async fn read_response(seen: &mut mpsc::UnboundedReceiver<Seen>, store: &dyn Store, query: &str) -> Streamed {
    let mut headers = HeaderMap::new();
    let mut raw = Vec::new();
    let mut before_output = Vec::new();
    let mut error = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(60), seen.recv()).await.expect("the runtime answers") {
            Some(Seen::Start(h)) => headers = h,
            Some(Seen::Chunk(c)) => {
                if store.get_output(query).await.expect("store").is_none() {
                    before_output.extend(ids_in(&String::from_utf8_lossy(&c)));
                }
                raw.extend_from_slice(&c);
            }
            Some(Seen::End) => break,
            Some(Seen::Error(e)) => {
                error = Some(e);
                break;
            }
            None => panic!("the Runtime API stopped"),
        }
    }
    let delimiter = [0u8; 8];
    let split = raw.windows(8).position(|w| w == delimiter);
    let (prelude, body) = match split {
        Some(at) => (
            serde_json::from_slice(&raw[..at]).expect("the prelude is JSON"),
            String::from_utf8(raw[at + 8..].to_vec()).expect("UTF-8"),
        ),
        None => (Value::Null, String::from_utf8_lossy(&raw).to_string()),
    };
    Streamed { headers, prelude, body, before_output, error }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_stream_function_streams_through_the_lambda_runtime_protocol() {
    // GIVEN the embedded system, an issuer, and a local Runtime API on loopback
    let settings = EngineSettings {
        follow: FollowSettings {
            first_poll: Duration::from_millis(20),
            max_poll: Duration::from_millis(100),
            heartbeat: Duration::from_millis(300),
            ..FollowSettings::default()
        },
        ..EngineSettings::default()
    };
    let h = Harness::from_system(switchyard_agents::embedded(
        Arc::new(manifest_fixture("manifests/scripted.yaml")),
        settings,
    ));
    let issuer = Issuer::new();
    let (invoke, invocations) = mpsc::channel::<(String, Value)>(8);
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let cut_after = Arc::new(std::sync::Mutex::new(None));
    let api =
        RuntimeApi { invocations: Arc::new(Mutex::new(invocations)), seen: seen_tx, cut_after: cut_after.clone() };
    let app = axum::Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(response))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .with_state(api);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The function's own handler under the real runtime loop.
    std::env::set_var("AWS_LAMBDA_RUNTIME_API", address.to_string());
    std::env::set_var("AWS_LAMBDA_FUNCTION_NAME", "events-stream");
    std::env::set_var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256");
    std::env::set_var("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST");
    // On its own thread and runtime, as in a function's process.
    let deps = h.system.deps.clone();
    let verifier = issuer.verifier();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(events_stream::run(&deps, &verifier))
    });

    let now = h.system.deps.clock.now().timestamp();
    let bearer = format!("Bearer {}", issuer.token("owner", &[], now));
    let store = h.system.store.clone();

    // WHEN the owner connects right after posting a query that takes a few retries
    let id = post_query(&h, "bravo flaky question").await;
    invoke.send(("req-1".into(), url_event(&id, &[("authorization", &bearer)]))).await.expect("invoke");
    let first = read_response(&mut seen, store.as_ref(), &id).await;

    // THEN the runtime streamed: the streaming headers, a prelude with 200 and SSE headers ...
    assert_eq!(first.error, None);
    assert_eq!(
        first.headers.get("lambda-runtime-function-response-mode").map(|v| v.as_bytes()),
        Some(&b"streaming"[..])
    );
    assert_eq!(
        first.headers.get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/vnd.awslambda.http-integration-response"[..])
    );
    assert_eq!(first.prelude["statusCode"], 200, "{}", first.prelude);
    assert_eq!(first.prelude["headers"]["content-type"], "text/event-stream");
    // ... events that arrived before the query's output existed, then everything up to final
    assert!(first.before_output.len() >= 3, "only {:?} before the output", first.before_output);
    let log: Vec<String> = store.list_events(&id).await.expect("log").into_iter().map(|e| e.key).collect();
    assert_eq!(ids_in(&first.body), log);
    assert!(first.body.trim_end().lines().any(|l| l == "event: final"));

    // WHEN it reconnects with Last-Event-ID
    invoke
        .send(("req-2".into(), url_event(&id, &[("authorization", &bearer), ("last-event-id", &log[2])])))
        .await
        .expect("invoke");
    let resumed = read_response(&mut seen, store.as_ref(), &id).await;
    // THEN it gets exactly the events after that one
    assert_eq!(ids_in(&resumed.body), log[3..].to_vec());

    // WHEN the token is forged (another issuer's key), or missing
    let forged = format!("Bearer {}", Issuer::new().token("owner", &[], now));
    for (request, headers) in [("req-3", vec![("authorization", forged.as_str())]), ("req-4", vec![])] {
        invoke.send((request.into(), url_event(&id, &headers))).await.expect("invoke");
        let refused = read_response(&mut seen, store.as_ref(), &id).await;
        // THEN the prelude says 401 and the body is the JSON error, no events
        assert_eq!(refused.prelude["statusCode"], 401, "{request}");
        let body: Value = serde_json::from_str(&refused.body).expect("JSON error");
        assert_eq!(body["error"]["code"], "unauthenticated");
        assert!(body["error"]["message"].as_str().expect("message").starts_with("Authorization: "));
    }

    // WHEN a client goes away mid-stream (the Runtime API stops reading after two chunks)
    let slow = post_query(&h, "delta sleepy question").await;
    *cut_after.lock().expect("lock") = Some(2);
    invoke.send(("req-5".into(), url_event(&slow, &[("authorization", &bearer)]))).await.expect("invoke");
    let cut = read_response(&mut seen, store.as_ref(), &slow).await;
    assert!(store.get_output(&slow).await.expect("store").is_none(), "cut while the query runs: {}", cut.body);
    // THEN the query still finishes and stores its output ...
    let output = h.output(&slow).await;
    assert!(!output.response_text.is_empty());
    // ... and the function serves the next invocation: someone else's query is not found
    let other = format!("Bearer {}", issuer.token("intruder", &[], now));
    invoke.send(("req-6".into(), url_event(&slow, &[("authorization", &other)]))).await.expect("invoke");
    let not_found = read_response(&mut seen, store.as_ref(), &slow).await;
    assert_eq!(not_found.prelude["statusCode"], 404);

    // WHEN a streamed chat completion comes through the same Function URL (base64, as a URL
    // may send a body)
    let ask = json!({
        "model": "scripted-scenarios",
        "stream": true,
        "messages": [{ "role": "user", "content": "alpha steady question" }],
    });
    invoke.send(("req-7".into(), chat_event(&ask, &[("authorization", &bearer)]))).await.expect("invoke");
    let chat = read_response(&mut seen, store.as_ref(), "none").await;
    // THEN the prelude says 200 and SSE, and the chunks end with [DONE]; the content is the answer
    assert_eq!(chat.prelude["statusCode"], 200, "{}", chat.body);
    assert_eq!(chat.prelude["headers"]["content-type"], "text/event-stream");
    assert!(chat.body.ends_with("data: [DONE]\n\n"), "{}", chat.body);
    let chunks: Vec<Value> = chat
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("a JSON chunk"))
        .collect();
    let content: String =
        chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect::<Vec<_>>().concat();
    let last = chunks.last().expect("a final chunk");
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    let query_id = last["switchyard"]["query_id"].as_str().expect("query id");
    assert_eq!(content, h.output(query_id).await.response_text);
    assert_eq!(h.system.deps.store.get_query(query_id).await.expect("store").expect("query").user_id, "owner");
    // AND without a token: 401 in the OpenAI error shape, before any chunk
    invoke.send(("req-8".into(), chat_event(&ask, &[]))).await.expect("invoke");
    let refused = read_response(&mut seen, store.as_ref(), "none").await;
    assert_eq!(refused.prelude["statusCode"], 401);
    let body: Value = serde_json::from_str(&refused.body).expect("JSON error");
    assert_eq!(
        (body["error"]["type"].as_str(), body["error"]["code"].as_str()),
        (Some("authentication_error"), Some("unauthenticated"))
    );
}

/// A Function URL event for `POST /v1/chat/completions` with `body` (base64) and `headers`.
fn chat_event(body: &Value, headers: &[(&str, &str)]) -> Value {
    use base64::Engine as _;
    let mut event = url_event("x", headers);
    event["rawPath"] = json!("/v1/chat/completions");
    event["requestContext"]["http"]["path"] = json!("/v1/chat/completions");
    event["requestContext"]["http"]["method"] = json!("POST");
    event["headers"]["content-type"] = json!("application/json");
    event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(body.to_string()));
    event["isBase64Encoded"] = json!(true);
    event
}

async fn post_query(h: &Harness, question: &str) -> String {
    let r = h.post(question, "owner", "").await;
    assert_eq!(r.status_code, 202, "{}", text_body(&r));
    json_body(&r)["query_id"].as_str().expect("id").to_string()
}
