//! The live events endpoint (`switchyard_engine::live` over `switchyard_engine::follow`): events
//! arrive while the query runs, `Last-Event-ID` resumes, idle streams get heartbeats, the
//! stream ends after `final`, a client that leaves loses nothing, and hostile requests (bad
//! `Last-Event-ID`, someone else's query, bad, expired or forged tokens) are refused before
//! the first byte with an error that names the field and the rule.

use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::follow::{FollowSettings, HEARTBEAT_FRAME};
use switchyard_engine::handlers::handle_http;
use switchyard_engine::live::{handle_stream, Identity, StreamReply};
use switchyard_engine::ports::Store;
use switchyard_engine::EngineSettings;
use switchyard_tests::tokens::{self, Issuer};
use switchyard_tests::*;

fn settings() -> EngineSettings {
    EngineSettings {
        follow: FollowSettings {
            first_poll: Duration::from_millis(20),
            max_poll: Duration::from_millis(100),
            heartbeat: Duration::from_millis(250),
            ..FollowSettings::default()
        },
        ..EngineSettings::default()
    }
}

fn harness() -> Harness {
    Harness::from_system(switchyard_agents::embedded(Arc::new(manifest_fixture("manifests/scripted.yaml")), settings()))
}

async fn post(h: &Harness, question: &str, user: &str) -> String {
    let r = h.post(question, user, "").await;
    assert_eq!(r.status_code, 202, "{}", text_body(&r));
    json_body(&r)["query_id"].as_str().expect("query id").to_string()
}

/// `GET /v1/queries/{id}/events` from `user` (API Gateway claims), with extra headers.
fn events_request(id: &str, user: &str, headers: &[(&str, &str)]) -> aws_lambda_events::apigw::ApiGatewayV2httpRequest {
    let mut request = api_request("GET", &format!("/v1/queries/{id}/events"), "", None, user, "");
    request.headers.insert("accept", "text/event-stream".parse().expect("header"));
    for (k, v) in headers {
        request.headers.insert(
            aws_lambda_events::http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
            v.parse().expect("value"),
        );
    }
    request
}

/// One SSE frame.
#[derive(Debug, Clone, PartialEq)]
enum Frame {
    Event { id: String, kind: String, data: Value },
    Comment(String),
    Retry(u64),
}

fn parse_frames(text: &str) -> Vec<Frame> {
    let mut frames = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.is_empty()) {
        let (mut id, mut kind, mut data) = (None, None, None);
        for line in block.lines() {
            if let Some(c) = line.strip_prefix(": ") {
                frames.push(Frame::Comment(c.to_string()));
            } else if let Some(r) = line.strip_prefix("retry: ") {
                frames.push(Frame::Retry(r.parse().expect("retry ms")));
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("event: ") {
                kind = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(serde_json::from_str(v).expect("data is JSON"));
            } else {
                panic!("unexpected SSE line {line:?}");
            }
        }
        if let Some(kind) = kind {
            frames.push(Frame::Event { id: id.unwrap_or_default(), kind, data: data.unwrap_or(Value::Null) });
        }
    }
    frames
}

fn event_ids(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Event { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

/// Read a reply to its end (bounded, so a stream that never ends fails the test).
async fn read_all(reply: StreamReply) -> Vec<Frame> {
    let chunks: Vec<bytes::Bytes> = tokio::time::timeout(Duration::from_secs(600), reply.body.collect())
        .await
        .expect("the stream ends after the final event");
    parse_frames(&chunks.iter().map(|c| String::from_utf8(c.to_vec()).expect("UTF-8")).collect::<String>())
}

async fn log_keys(h: &Harness, id: &str) -> Vec<String> {
    h.system.store.list_events(id).await.expect("log").into_iter().map(|e| e.key).collect()
}

fn error_of(frames_text: &str) -> Value {
    serde_json::from_str(frames_text).expect("error body is JSON")
}

async fn body_text(reply: StreamReply) -> String {
    let chunks: Vec<bytes::Bytes> = reply.body.collect().await;
    chunks.iter().map(|c| String::from_utf8(c.to_vec()).expect("UTF-8")).collect()
}

#[tokio::test(start_paused = true)]
async fn a_client_connected_right_after_posting_gets_events_before_the_output_exists_and_the_stream_ends_after_final() {
    let h = harness();
    // GIVEN a query whose agent fails twice before it answers (retries with backoff)
    let id = post(&h, "bravo flaky question", "u1").await;
    // WHEN the client connects at once
    let reply = handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[])).await;
    assert_eq!(reply.status, 200);
    assert!(reply.headers.contains(&("content-type".into(), "text/event-stream".into())));
    let mut body = reply.body;
    let mut text = String::new();
    let mut before_output = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(600), body.next()).await.expect("no stall") {
        let exists = h.system.store.get_output(&id).await.expect("store").is_some();
        let chunk = String::from_utf8(chunk.to_vec()).expect("UTF-8");
        if !exists {
            before_output.extend(event_ids(&parse_frames(&chunk)));
        }
        text.push_str(&chunk);
    }
    // THEN events arrived while the query was still running
    assert!(before_output.len() >= 3, "only {before_output:?} arrived before the output existed");
    // AND the stream is the whole log, in order, each event once, ending with final
    let frames = parse_frames(&text);
    assert_eq!(frames.first(), Some(&Frame::Retry(1000)));
    let ids = event_ids(&frames);
    assert_eq!(ids, log_keys(&h, &id).await);
    let Some(Frame::Event { kind, data, .. }) = frames.iter().rev().find(|f| matches!(f, Frame::Event { .. })) else {
        panic!("no events")
    };
    assert_eq!(kind, "final");
    assert_eq!(data["query_id"], json!(id));
    assert!(frames.iter().any(|f| matches!(f, Frame::Event { kind, .. } if kind == "retry")));
    assert!(h.system.store.get_output(&id).await.expect("store").is_some());
}

#[tokio::test(start_paused = true)]
async fn last_event_id_resumes_right_after_that_event_and_a_resume_after_final_ends_at_once() {
    let h = harness();
    let id = post(&h, "alpha steady question", "u1").await;
    h.output(&id).await;
    let all = log_keys(&h, &id).await;
    assert!(all.len() >= 5, "{all:?}");
    for k in [0, 2, all.len() - 2] {
        let reply =
            handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[("last-event-id", &all[k])]))
                .await;
        assert_eq!(reply.status, 200);
        assert_eq!(event_ids(&read_all(reply).await), all[k + 1..].to_vec(), "resumed after {}", all[k]);
    }
    let last = all.last().expect("final");
    let reply =
        handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[("last-event-id", last)])).await;
    assert_eq!(read_all(reply).await, vec![Frame::Retry(1000)]);
}

#[tokio::test(start_paused = true)]
async fn an_event_id_the_log_does_not_hold_replays_the_whole_log() {
    let h = harness();
    let id = post(&h, "alpha steady question", "u1").await;
    h.output(&id).await;
    let reply = handle_stream(
        &h.system.deps,
        Identity::Gateway,
        &events_request(&id, "u1", &[("last-event-id", "00-99-no-such-event")]),
    )
    .await;
    assert_eq!(event_ids(&read_all(reply).await), log_keys(&h, &id).await);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_disconnects_mid_stream_loses_nothing() {
    let h = harness();
    // GIVEN a slow query (its agent hangs, times out, and a fallback answers)
    let id = post(&h, "delta sleepy question", "u1").await;
    let reply = handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[])).await;
    let mut body = reply.body;
    let mut seen = Vec::new();
    while seen.is_empty() {
        let chunk = body.next().await.expect("a chunk");
        seen.extend(event_ids(&parse_frames(std::str::from_utf8(&chunk).expect("UTF-8"))));
    }
    assert!(h.system.store.get_output(&id).await.expect("store").is_none(), "the query is still running");
    // WHEN the client goes away mid-stream
    drop(body);
    // THEN the query still finishes and its output is stored
    let output = h.output(&id).await;
    assert!(!output.response_text.is_empty());
    // AND reconnecting with the last id it saw gives exactly the rest
    let last = seen.last().expect("an id").clone();
    let reply =
        handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[("last-event-id", &last)])).await;
    let rest = event_ids(&read_all(reply).await);
    let mut both = seen.clone();
    both.extend(rest);
    assert_eq!(both, log_keys(&h, &id).await);
}

#[tokio::test(start_paused = true)]
async fn an_idle_stream_gets_heartbeat_comments_until_the_final_event() {
    let h = harness();
    let id = post(&h, "delta sleepy question", "u1").await;
    let reply = handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[])).await;
    let frames = read_all(reply).await;
    let beats = frames.iter().filter(|f| **f == Frame::Comment("heartbeat".into())).count();
    assert!(beats >= 2, "{beats} heartbeats in {frames:?}");
    assert_eq!(HEARTBEAT_FRAME, ": heartbeat\n\n");
    assert!(matches!(frames.last(), Some(Frame::Event { kind, .. }) if kind == "final"));
}

#[tokio::test(start_paused = true)]
async fn a_heartbeat_shorter_than_the_wait_between_reads_does_not_starve_the_reads() {
    // GIVEN heartbeats every 30 ms and reads 200 to 400 ms apart
    let mut s = settings();
    s.follow = FollowSettings {
        first_poll: Duration::from_millis(200),
        max_poll: Duration::from_millis(400),
        heartbeat: Duration::from_millis(30),
        max_duration: Duration::from_secs(120),
        ..FollowSettings::default()
    };
    let h = Harness::from_system(switchyard_agents::embedded(Arc::new(manifest_fixture("manifests/scripted.yaml")), s));
    let id = post(&h, "delta sleepy question", "u1").await;
    // WHEN the query's events are followed
    let frames =
        read_all(handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[])).await).await;
    // THEN the heartbeats come, and so does every event up to the final one (not the time limit)
    assert!(frames.iter().any(|f| *f == Frame::Comment("heartbeat".into())), "{frames:?}");
    assert!(matches!(frames.last(), Some(Frame::Event { kind, .. }) if kind == "final"), "{frames:?}");
    assert_eq!(event_ids(&frames), log_keys(&h, &id).await);
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_reaches_its_time_limit_ends_with_a_comment_and_resumes_where_it_stopped() {
    let mut s = settings();
    s.follow.max_duration = Duration::from_millis(1500);
    let h = Harness::from_system(switchyard_agents::embedded(Arc::new(manifest_fixture("manifests/scripted.yaml")), s));
    let id = post(&h, "delta sleepy question", "u1").await;
    let first = read_all(handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[])).await).await;
    assert!(matches!(first.last(), Some(Frame::Comment(c)) if c.contains("reconnect with Last-Event-ID")), "{first:?}");
    let mut ids = event_ids(&first);
    // Reconnect until the final event, as an EventSource does.
    for _ in 0..50 {
        let last = ids.last().expect("an id").clone();
        let next = read_all(
            handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[("last-event-id", &last)]))
                .await,
        )
        .await;
        ids.extend(event_ids(&next));
        if next.iter().any(|f| matches!(f, Frame::Event { kind, .. } if kind == "final")) {
            break;
        }
    }
    assert_eq!(ids, log_keys(&h, &id).await);
}

#[tokio::test(start_paused = true)]
async fn hostile_last_event_ids_are_refused_naming_the_header_and_the_rule() {
    let h = harness();
    let id = post(&h, "alpha steady question", "u1").await;
    h.output(&id).await;
    let long = "a".repeat(257);
    for (value, rule) in [
        ("", "must not be empty"),
        (long.as_str(), "at most 256 characters"),
        ("x y", "an event id from this stream"),
        ("<script>alert(1)</script>", "an event id from this stream"),
        ("id\tevent", "an event id from this stream"),
    ] {
        let reply =
            handle_stream(&h.system.deps, Identity::Gateway, &events_request(&id, "u1", &[("last-event-id", value)]))
                .await;
        assert_eq!(reply.status, 400, "{value:?}");
        let body = error_of(&body_text(reply).await);
        assert_eq!(body["error"]["details"][0]["field"], "Last-Event-ID", "{body}");
        assert!(body["error"]["details"][0]["rule"].as_str().expect("rule").contains(rule), "{body}");
        // The buffered route (HTTP API) applies the same rule.
        let buffered = handle_http(&h.system.deps, events_request(&id, "u1", &[("last-event-id", value)])).await;
        assert_eq!(buffered.status_code, 400, "{value:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_buffered_events_route_also_resumes_after_last_event_id() {
    let h = harness();
    let id = post(&h, "alpha steady question", "u1").await;
    h.output(&id).await;
    let all = log_keys(&h, &id).await;
    let r = handle_http(&h.system.deps, events_request(&id, "u1", &[("last-event-id", &all[1])])).await;
    assert_eq!(r.status_code, 200);
    assert_eq!(event_ids(&parse_frames(&text_body(&r))), all[2..].to_vec());
}

#[tokio::test(start_paused = true)]
async fn someone_elses_query_an_unknown_query_and_other_routes_are_refused_before_the_stream_opens() {
    let h = harness();
    let id = post(&h, "alpha steady question", "owner").await;
    for (request, status) in [
        (events_request(&id, "intruder", &[]), 404),
        (events_request(&uuid::Uuid::new_v4().to_string(), "owner", &[]), 404),
        (events_request("not-a-uuid", "owner", &[]), 404),
        (api_request("POST", &format!("/v1/queries/{id}/events"), "", None, "owner", ""), 405),
        (api_request("GET", &format!("/v1/queries/{id}"), "", None, "owner", ""), 404),
        (api_request("GET", "/v1/queries/x/events/more", "", None, "owner", ""), 404),
    ] {
        let reply = handle_stream(&h.system.deps, Identity::Gateway, &request).await;
        assert_eq!(reply.status, status, "{:?}", request.raw_path);
        assert!(reply.headers.contains(&("content-type".into(), "application/json".into())));
        let body = error_of(&body_text(reply).await);
        assert!(body["error"]["request_id"].is_string(), "{body}");
    }
}

// ---- tokens verified in the function (Identity::Jwt) ---------------------------------------

/// The events request with only an `Authorization` header as identity (a Function URL event
/// carries no authorizer claims).
fn url_request(id: &str, authorization: Option<&str>) -> aws_lambda_events::apigw::ApiGatewayV2httpRequest {
    let mut request = events_request(id, "ignored", &[]);
    request.request_context.authorizer = None;
    if let Some(a) = authorization {
        request.headers.insert("authorization", a.parse().expect("header"));
    }
    request
}

#[tokio::test(start_paused = true)]
async fn a_valid_es256_or_rs256_token_of_the_owner_opens_the_stream() {
    let h = harness();
    let issuer = Issuer::new();
    let verifier = issuer.verifier();
    let id = post(&h, "alpha steady question", "owner").await;
    h.output(&id).await;
    let now = h.system.deps.clock.now().timestamp();
    let es = issuer.token("owner", &["analyst"], now);
    let rs = issuer.sign(&json!({ "alg": "RS256", "kid": "rsa-1" }), &tokens::claims("owner", &[], now));
    for token in [es, rs] {
        let reply = handle_stream(
            &h.system.deps,
            Identity::Jwt(&verifier),
            &url_request(&id, Some(&format!("Bearer {token}"))),
        )
        .await;
        assert_eq!(reply.status, 200);
        assert_eq!(event_ids(&read_all(reply).await), log_keys(&h, &id).await);
    }
    // A token of someone else is a query that does not exist for them.
    let other = issuer.token("intruder", &[], now);
    let reply =
        handle_stream(&h.system.deps, Identity::Jwt(&verifier), &url_request(&id, Some(&format!("Bearer {other}"))))
            .await;
    assert_eq!(reply.status, 404);
}

#[tokio::test(start_paused = true)]
async fn missing_bad_expired_and_forged_tokens_are_refused_with_401_naming_the_rule() {
    let h = harness();
    let issuer = Issuer::new();
    let verifier = issuer.verifier();
    let id = post(&h, "alpha steady question", "owner").await;
    let now = h.system.deps.clock.now().timestamp();
    let cases = tokens::refused(&issuer, now);
    for (authorization, rule) in cases {
        let reply =
            handle_stream(&h.system.deps, Identity::Jwt(&verifier), &url_request(&id, authorization.as_deref())).await;
        assert_eq!(reply.status, 401, "{rule}");
        assert!(reply.headers.iter().any(|(k, v)| k == "www-authenticate" && v.contains("invalid_token")), "{rule}");
        let body = error_of(&body_text(reply).await);
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.starts_with("Authorization: ") && message.contains(rule), "{rule}: {message}");
        assert_eq!(body["error"]["code"], "unauthenticated");
    }
    // Claims from an API Gateway authorizer are not trusted on the token-verifying door.
    let mut request = events_request(&id, "owner", &[]);
    request.headers.remove("authorization");
    let reply = handle_stream(&h.system.deps, Identity::Jwt(&verifier), &request).await;
    assert_eq!(reply.status, 401);
}

#[test]
fn a_verifier_refuses_a_configuration_without_issuer_audience_or_usable_keys() {
    use switchyard_engine::jwt::JwtVerifier;
    let jwks = Issuer::new().jwks();
    let aud = [tokens::AUDIENCE.to_string()];
    assert!(JwtVerifier::new("", &aud, &jwks).unwrap_err().to_string().contains("SWITCHYARD_JWT_ISSUER"));
    assert!(JwtVerifier::new(tokens::ISSUER, &[" ".into()], &jwks)
        .unwrap_err()
        .to_string()
        .contains("SWITCHYARD_JWT_AUDIENCE"));
    for (bad, says) in [
        ("not json", "not a JWKS document"),
        (r#"{"keys":[]}"#, "no RS256"),
        (r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#, "no RS256"),
        (r#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}"#, "keys[0].n: RSA keys must be at least 2048 bits"),
        (r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ"}]}"#, "keys[0]: P-256 x and y must be 32 bytes"),
    ] {
        let e = JwtVerifier::new(tokens::ISSUER, &aud, bad).unwrap_err().to_string();
        assert!(e.starts_with("SWITCHYARD_JWT_JWKS: ") && e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn a_function_url_event_reads_as_a_payload_2_0_request() {
    let event: aws_lambda_events::apigw::ApiGatewayV2httpRequest =
        serde_json::from_str(&fixture_text("events/function-url-request.json")).expect("Function URL event parses");
    assert_eq!(event.raw_path.as_deref(), Some("/v1/queries/8b3f1c2e-6a4d-4c1e-9f7a-2d5e6b7c8a90/events"));
    assert_eq!(event.request_context.http.method, aws_lambda_events::http::Method::GET);
    assert!(event.headers.get("authorization").is_some());
    assert!(event.request_context.authorizer.is_none());
    assert_eq!(
        event.headers.get("last-event-id").and_then(|v| v.to_str().ok()),
        Some("01-40-dispatch-0c9d7d3e-2b1a-4f55-8c33-1f0e9d8c7b6a")
    );
}
