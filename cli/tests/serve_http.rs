//! `switchyard serve` as a load balancer or an attacker meets it: the binary on `127.0.0.1:0`,
//! spoken to over raw TCP. A slow head is cut off at the header timeout, a kept-alive
//! connection at the idle timeout, a slow body is answered 408, a connection over the cap is
//! answered 503, and thousands of idle sockets leave a normal request answered at once. A
//! foreign `Host` is answered 421; dev identity headers off loopback refuse to start; with
//! `--auth jwt` tokens are verified against a JWKS served on loopback, as the events-stream
//! function verifies them (the same cases, `switchyard_tests::tokens::refused`).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard_tests::tokens::{self, Issuer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A running `switchyard serve`, stopped when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `switchyard serve --port 0 ARGS…` and wait for its `listening on` line.
fn serve(args: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("switchyard serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("a line from serve");
    let addr = line.trim().strip_prefix("listening on http://").expect("listening line").parse().expect("address");
    Server { child, addr }
}

/// Send `request` on a new connection and read the answer to its end: (status, whole text).
async fn exchange(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    read_answer(&mut stream).await
}

async fn read_answer(stream: &mut TcpStream) -> (u16, String) {
    let mut text = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut text)).await;
    let text = String::from_utf8_lossy(&text).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

const MODELS: &str = "GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nx-switchyard-user: u1\r\nconnection: close\r\n\r\n";

/// Whether the server has closed `stream`, waiting at most `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn a_slowloris_client_is_cut_off_within_the_header_timeout() {
    // GIVEN a server with a 3 s header timeout
    let server = serve(&["--header-timeout", "3s"]);
    // WHEN a client sends half a request line, then one byte every 2 s
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let started = Instant::now();
    stream.write_all(b"GET /v1/mod").await.expect("write");
    let mut buf = [0u8; 1024];
    let cut_after = loop {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => break started.elapsed(),
                Ok(_) => panic!("the server answered a request it never got whole"),
            },
            () = tokio::time::sleep(Duration::from_secs(2)) => {
                if stream.write_all(b"e").await.is_err() {
                    break started.elapsed();
                }
                assert!(started.elapsed() < Duration::from_secs(20), "still open after 20 s");
            }
        }
    };
    // THEN the connection is closed at the header timeout, whatever the trickle
    assert!(cut_after >= Duration::from_millis(2900), "cut after {cut_after:?}, before the timeout");
    assert!(cut_after <= Duration::from_millis(4000), "cut after {cut_after:?}");
    // AND the server still answers a whole request
    assert_eq!(exchange(server.addr, MODELS).await.0, 200);
}

#[tokio::test]
async fn a_kept_alive_connection_is_closed_after_the_idle_timeout_not_before_its_answer() {
    // GIVEN an idle timeout (1 s) much shorter than the header timeout (10 s)
    let server = serve(&["--idle-timeout", "1s", "--header-timeout", "10s"]);
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    // WHEN a request is answered on a kept-alive connection
    stream
        .write_all(b"GET /v1/models HTTP/1.1\r\nhost: localhost\r\nx-switchyard-user: u1\r\n\r\n")
        .await
        .expect("write");
    let mut buf = vec![0u8; 64 * 1024];
    let n = stream.read(&mut buf).await.expect("answer");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    let answered = Instant::now();
    // THEN the connection stays open for the next request a while, and is closed at the idle timeout
    assert!(closed_within(&mut stream, Duration::from_secs(5)).await, "open 5 s after its answer");
    let idle = answered.elapsed();
    assert!(idle >= Duration::from_millis(900) && idle < Duration::from_millis(2500), "closed after {idle:?} idle");
}

#[tokio::test]
async fn a_body_slower_than_the_body_timeout_is_answered_408() {
    let server = serve(&["--body-timeout", "1s"]);
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let started = Instant::now();
    stream
        .write_all(b"POST /v1/queries HTTP/1.1\r\nhost: 127.0.0.1\r\nx-switchyard-user: u1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"query\":")
        .await
        .expect("write");
    let (status, text) = read_answer(&mut stream).await;
    assert_eq!(status, 408, "{text}");
    assert_eq!(body_of(&text)["error"]["code"], "request_timeout", "{text}");
    assert!(started.elapsed() < Duration::from_secs(3), "answered after {:?}", started.elapsed());
}

#[tokio::test]
async fn a_connection_over_the_cap_is_answered_503_and_a_freed_slot_serves_again() {
    // GIVEN a cap of 2 connections, both held by idle sockets
    let server = serve(&["--max-connections", "2", "--header-timeout", "30s"]);
    let first = TcpStream::connect(server.addr).await.expect("connect");
    let _second = TcpStream::connect(server.addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(200)).await;
    // WHEN a third client asks
    let (status, text) = exchange(server.addr, MODELS).await;
    // THEN it is told to retry, in the API's error shape
    assert_eq!(status, 503, "{text}");
    assert!(text.to_ascii_lowercase().contains("retry-after: 1"), "{text}");
    assert_eq!(body_of(&text)["error"]["code"], "unavailable", "{text}");
    // AND once an idle socket goes away, a request is served again
    drop(first);
    let mut status = 0;
    for _ in 0..50 {
        status = exchange(server.addr, MODELS).await.0;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200);
}

#[tokio::test]
async fn five_thousand_idle_sockets_leave_a_normal_request_answered_within_100_ms() {
    // GIVEN a low cap and header timeout, and 5,000 sockets opened that send nothing
    let server = serve(&["--max-connections", "100", "--header-timeout", "1s"]);
    let mut idle = Vec::with_capacity(5000);
    for _ in 0..5000 {
        match TcpStream::connect(server.addr).await {
            Ok(s) => idle.push(s),
            Err(e) => panic!("connect {} failed: {e}", idle.len()),
        }
    }
    // WHEN a normal request comes while they are all open
    let started = Instant::now();
    let (status, text) = exchange(server.addr, MODELS).await;
    let during = started.elapsed();
    // THEN it is answered at once: served, or told to retry while the slots are taken
    assert!(status == 200 || status == 503, "{text}");
    assert!(during <= Duration::from_millis(100), "answered after {during:?} during the flood");
    // AND once the header timeout has closed the idle ones, it is served within 100 ms
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let started = Instant::now();
    let (status, text) = exchange(server.addr, MODELS).await;
    let after = started.elapsed();
    assert_eq!(status, 200, "{text}");
    assert!(after <= Duration::from_millis(100), "answered after {after:?}");
    eprintln!("5,000 idle sockets: answered {status} in {after:?} (during the flood: {during:?})");
    drop(idle);
}

/// `GET path` with `headers` (each `name: value`), `Host: 127.0.0.1` unless one is given.
fn get(path: &str, headers: &[&str]) -> String {
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    if !headers.iter().any(|h| h.to_ascii_lowercase().starts_with("host:")) {
        request.push_str("host: 127.0.0.1\r\n");
    }
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("connection: close\r\n\r\n");
    request
}

/// The JSON body of an answer.
fn body_of(text: &str) -> Value {
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    serde_json::from_str(body).unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_foreign_host_is_refused_421_and_the_servers_own_names_are_answered() {
    // GIVEN a server that also answers for one name given with --allow-host
    let server = serve(&["--allow-host", "switchyard.internal"]);
    let port = server.addr.port();
    // WHEN a page rebound to this address asks with its own Host
    for path in ["/v1/queries", "/"] {
        let (status, text) =
            exchange(server.addr, &get(path, &["host: attacker.example", "x-switchyard-user: u1"])).await;
        // THEN it is refused before anything is read or run
        assert_eq!(status, 421, "{path}: {text}");
        assert_eq!(body_of(&text)["error"]["code"], "misdirected_request", "{text}");
    }
    // AND the loopback names, with or without port, and the allowed name are answered
    for host in [
        format!("host: localhost:{port}"),
        "host: 127.0.0.1".to_string(),
        format!("host: [::1]:{port}"),
        "host: SWITCHYARD.internal:8080".to_string(),
    ] {
        let (status, text) = exchange(server.addr, &get("/v1/queries", &[&host, "x-switchyard-user: u1"])).await;
        assert_eq!(status, 200, "{host}: {text}");
    }
}

#[tokio::test]
async fn a_body_over_its_routes_limit_is_answered_413_with_that_limit() {
    let server = serve(&[]);
    let post = |path: &str, length: usize| {
        format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-switchyard-user: u1\r\ncontent-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n"
        )
    };
    let id = uuid::Uuid::new_v4();
    // A declared size over the limit is refused unread, the size and the route's own limit named.
    for (path, limit, shape) in [
        ("/v1/queries".to_string(), 64 * 1024, "error"),
        (format!("/v1/queries/{id}/feedback"), 8 * 1024, "error"),
        ("/v1/chat/completions".to_string(), 512 * 1024, "openai"),
    ] {
        let (status, text) = exchange(server.addr, &post(&path, limit + 1)).await;
        assert_eq!(status, 413, "{path}: {text}");
        let body = body_of(&text);
        let message = body["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains(&format!("{} bytes", limit + 1)), "{path}: {message}");
        assert!(message.contains(&format!("this route's limit is {limit} bytes")), "{path}: {message}");
        if shape == "error" {
            assert_eq!(body["error"]["code"], "too_large", "{text}");
        }
    }
    // A chunked body has no declared size: it is read up to the limit and refused there.
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let chunk = "x".repeat(16 * 1024);
    let mut request = String::from(
        "POST /v1/queries HTTP/1.1\r\nhost: 127.0.0.1\r\nx-switchyard-user: u1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
    );
    for _ in 0..5 {
        request.push_str(&format!("{:x}\r\n{chunk}\r\n", chunk.len()));
    }
    request.push_str("0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let (status, text) = read_answer(&mut stream).await;
    assert_eq!(status, 413, "{text}");
    let message = body_of(&text)["error"]["message"].as_str().unwrap_or_default().to_string();
    assert_eq!(message, "request body is over this route's limit of 65536 bytes");
    // A body within a larger route's limit is read whole and judged by its route.
    let within = "{\"model\": 1}";
    let (status, text) =
        exchange(server.addr, &format!("{}{within}", post("/v1/chat/completions", within.len()))).await;
    assert_eq!(status, 400, "{text}");
}

#[tokio::test]
async fn a_caller_past_its_rate_is_answered_429_with_retry_after_and_others_are_not() {
    // GIVEN a rate of 1 request a second with a burst of 3
    let server = serve(&["--rate-limit", "1", "--rate-burst", "3"]);
    let models = |user: &str| get("/v1/models", &[&format!("x-switchyard-user: {user}")]);
    // WHEN one caller sends 5 requests at once
    let mut statuses = Vec::new();
    let mut last = String::new();
    for _ in 0..5 {
        let (status, text) = exchange(server.addr, &models("u1")).await;
        statuses.push(status);
        last = text;
    }
    // THEN the burst is served and the rest is refused, saying when to come back
    assert_eq!(statuses, [200, 200, 200, 429, 429], "{last}");
    assert_eq!(body_of(&last)["error"]["code"], "rate_limited", "{last}");
    let retry_after = last
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("retry-after: ").map(str::to_string))
        .expect("a retry-after header");
    assert_eq!(retry_after.trim(), "1", "{last}");
    // AND another caller has a bucket of its own
    assert_eq!(exchange(server.addr, &models("u2")).await.0, 200);
    // AND after the wait the caller is served again
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(exchange(server.addr, &models("u1")).await.0, 200);
    // AND a chat completion past the rate is refused in the OpenAI shape, inviting the retry
    for _ in 0..3 {
        let _ = exchange(server.addr, &models("u3")).await;
    }
    let chat = "{\"model\": \"x\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
    let (status, text) = exchange(
        server.addr,
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nx-switchyard-user: u3\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{chat}",
            chat.len()
        ),
    )
    .await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(body_of(&text)["error"]["type"], "rate_limit_error", "{text}");
    assert!(!text.to_ascii_lowercase().contains("x-should-retry: false"), "{text}");
}

#[test]
fn a_non_loopback_bind_with_the_dev_identity_headers_refuses_to_start() {
    // WHEN serve is asked to bind every address with the dev headers
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--bind", "0.0.0.0", "--port", "0"])
        .env_remove("SWITCHYARD_SERVE_AUTH")
        .output()
        .expect("switchyard runs");
    // THEN it does not start, and says what to do instead
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("refusing to serve on 0.0.0.0") && stderr.contains("--dev-auth"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening on"));
    // AND with --auth jwt it is the token settings that are asked for, not --dev-auth
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--bind", "0.0.0.0", "--port", "0", "--auth", "jwt"])
        .env_remove("SWITCHYARD_JWT_ISSUER")
        .output()
        .expect("switchyard runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("SWITCHYARD_JWT_ISSUER is not set"), "{stderr}");
}

/// A JWKS document served on loopback, counting its fetches; the document can be replaced.
struct Jwks {
    url: String,
    fetches: Arc<AtomicUsize>,
    document: Arc<Mutex<String>>,
}

async fn jwks_server(document: String) -> Jwks {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/jwks.json", listener.local_addr().expect("addr"));
    let fetches = Arc::new(AtomicUsize::new(0));
    let document = Arc::new(Mutex::new(document));
    let (f, d) = (fetches.clone(), document.clone());
    let app = axum::Router::new().route(
        "/jwks.json",
        axum::routing::get(move || {
            let (f, d) = (f.clone(), d.clone());
            async move {
                f.fetch_add(1, Ordering::SeqCst);
                d.lock().expect("document").clone()
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Jwks { url, fetches, document }
}

fn serve_jwt(jwks: &Jwks) -> Server {
    serve(&[
        "--auth",
        "jwt",
        "--jwt-issuer",
        tokens::ISSUER,
        "--jwt-audience",
        tokens::AUDIENCE,
        "--jwt-jwks-url",
        &jwks.url,
    ])
}

fn bearer(token: &str) -> String {
    format!("authorization: Bearer {token}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_auth_jwt_accepts_valid_tokens_and_refuses_the_rest_as_the_function_does() {
    // GIVEN serve --auth jwt with the issuer's JWKS on loopback
    let issuer = Issuer::new();
    let jwks = jwks_server(issuer.jwks()).await;
    let server = serve_jwt(&jwks);
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 1, "fetched once at start");
    let now = chrono::Utc::now().timestamp();
    // WHEN valid RS256 and ES256 tokens are sent THEN they are accepted
    let rs256 = issuer.sign(&json!({ "alg": "RS256", "kid": "rsa-1" }), &tokens::claims("owner", &[], now));
    let (status, text) = exchange(server.addr, &get("/v1/queries", &[&bearer(&rs256)])).await;
    assert_eq!(status, 200, "{text}");
    let es256 = issuer.token("owner", &[], now);
    assert_eq!(exchange(server.addr, &get("/v1/queries", &[&bearer(&es256)])).await.0, 200);
    // AND the dev identity headers are not trusted
    let (status, text) = exchange(server.addr, &get("/v1/queries", &["x-switchyard-user: owner"])).await;
    assert_eq!(status, 401, "{text}");
    // AND every token the function refuses is refused, naming the rule
    for (authorization, rule) in tokens::refused(&issuer, now) {
        let header = authorization.map(|a| format!("authorization: {a}"));
        let headers: Vec<&str> = header.iter().map(String::as_str).collect();
        let (status, text) = exchange(server.addr, &get("/v1/queries", &headers)).await;
        assert_eq!(status, 401, "{rule}: {text}");
        assert!(
            text.to_ascii_lowercase().contains("www-authenticate: bearer error=\"invalid_token\""),
            "{rule}: {text}"
        );
        let message = body_of(&text)["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(message.starts_with("Authorization: ") && message.contains(rule), "{rule}: {message}");
    }
    // AND the unknown kid among them was refused after one fetch of the JWKS, and another
    // unknown kid right after causes none (rate-limited)
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 2);
    let unknown = issuer.sign(&json!({ "alg": "RS256", "kid": "rsa-9" }), &tokens::claims("owner", &[], now));
    let (status, text) = exchange(server.addr, &get("/v1/queries", &[&bearer(&unknown)])).await;
    assert_eq!(status, 401, "{text}");
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 2);
    // AND the OpenAPI document needs no token
    assert_eq!(exchange(server.addr, &get("/openapi.json", &[])).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_auth_jwt_follows_a_key_rotation_and_streams_only_to_the_owner() {
    // GIVEN serve --auth jwt, then the issuer publishes a new key pair beside the old
    let old = Issuer::new();
    let new = Issuer::new();
    let jwks = jwks_server(old.jwks()).await;
    let server = serve_jwt(&jwks);
    let mut rotated: Value = serde_json::from_str(&old.jwks()).expect("jwks");
    let added = tokens::jwks_with_kids(&new, "2");
    rotated["keys"].as_array_mut().expect("keys").extend(added["keys"].as_array().expect("keys").iter().cloned());
    *jwks.document.lock().expect("document") = rotated.to_string();
    let now = chrono::Utc::now().timestamp();
    // WHEN a token signed with the new key comes
    let token = new.sign(&json!({ "alg": "RS256", "kid": "rsa-2" }), &tokens::claims("owner", &[], now));
    let body = json!({ "query": "hello there" }).to_string();
    let post = format!(
        "POST /v1/queries HTTP/1.1\r\nhost: 127.0.0.1\r\n{}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        bearer(&token),
        body.len()
    );
    let (status, text) = exchange(server.addr, &post).await;
    // THEN the keys are fetched once more and it is accepted
    assert_eq!(status, 202, "{text}");
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 2);
    let id = body_of(&text)["query_id"].as_str().expect("query id").to_string();
    // AND the owner's stream opens with a token of the new key, another caller's does not
    let events = format!("/v1/queries/{id}/events");
    let (status, text) = exchange(server.addr, &get(&events, &[&bearer(&token), "accept: text/event-stream"])).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("text/event-stream"), "{text}");
    let stranger = new.sign(&json!({ "alg": "ES256", "kid": "ec-2" }), &tokens::claims("stranger", &[], now));
    let (status, text) = exchange(server.addr, &get(&events, &[&bearer(&stranger), "accept: text/event-stream"])).await;
    assert_eq!(status, 404, "{text}");
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 2);
}
