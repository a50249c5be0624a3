//! The local HTTP server behind `switchyard serve`: each request becomes an API Gateway HTTP
//! API event for the intake handler; `GET …/events` with `Accept: text/event-stream` (the event
//! log as server-sent events until the query ends) and `POST /v1/chat/completions` (streamed
//! when asked) go through the same streamed routes as the `events-stream` Lambda function
//! (`switchyard_engine::live`, `switchyard_engine::chat`). `/`, `/console.js` and `/console.css`
//! are the web console ([`crate::console`]).
//!
//! # Connections
//! Each connection is served by hyper's HTTP/1.1 server under a deadline ([`Limits`],
//! docs/serve.md#connections): a request's head must arrive within the header timeout of its
//! first byte (or of the connection's opening), its body within the body timeout, and a
//! kept-alive connection with no request in flight is closed after the idle timeout. A
//! response being sent (an event stream, a streamed chat completion) has no deadline: its
//! heartbeat comments keep proxies and clients from closing it. At most
//! [`Limits::max_connections`] connections are served at once; one more is answered `503` and
//! closed, so a flood of idle sockets costs a descriptor each for a moment, not for ever.
//!
//! # Access
//! A request whose `Host` is not on the [`HostAllowlist`] (the loopback names, the bind
//! address and the `--allow-host` names) is answered `421` before anything else: a web page
//! that rebinds its own name to this address cannot reach the API. With `--auth jwt` the
//! caller is the bearer token's, verified by [`switchyard_engine::jwt::JwtVerifier`] as the
//! `events-stream` function verifies it; the dev identity headers are then ignored.
//!
//! # Quotas
//! Each caller (the verified token's subject, or the dev identity) has a token bucket
//! ([`RateLimiter`], docs/serve.md#rate-limit): past its rate a request is answered `429` with
//! `Retry-After`. The embedded store is bounded by [`Quotas::store_quota`].

use crate::backend::api_event;
use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use hyper::body::{Frame, SizeHint};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use switchyard_core::admission::{FieldError, ValidationError};
use switchyard_engine::handlers::{
    self, body_limit, error_response, handle_http, is_openai_path, openai_error_response,
};
use switchyard_engine::intake::IntakeError;
use switchyard_engine::jwt::{JwtError, JwtVerifier};
use switchyard_engine::live::{self, Identity, StreamReply};
use switchyard_engine::Deps;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tower::ServiceExt;

/// Refused connections (over the cap) kept open at once for a moment after their `503`, so a
/// request still arriving is read off and the close is not a reset; past this many, a refused
/// connection is closed as soon as its answer is written and what has arrived is read.
const MAX_REFUSALS_IN_FLIGHT: usize = 256;

/// How long a refused connection is kept open after its `503` for the rest of its request.
const REFUSAL_LINGER: Duration = Duration::from_millis(50);

/// The connection limits of `switchyard serve`: each a flag and an environment variable, with
/// defaults that hold behind a load balancer and on a laptop (docs/serve.md#connections).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Limits {
    /// Time allowed for a request's head (request line and headers), from its first byte, or
    /// from the connection's opening for its first request (e.g. 10, 10s, 500ms).
    #[arg(long = "header-timeout", env = "SWITCHYARD_SERVE_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// Time allowed for a request's body, once its head is read; past it the answer is 408.
    #[arg(long = "body-timeout", env = "SWITCHYARD_SERVE_BODY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub body_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    #[arg(long = "idle-timeout", env = "SWITCHYARD_SERVE_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Connections served at once; one more is answered 503 and closed.
    #[arg(long = "max-connections", env = "SWITCHYARD_SERVE_MAX_CONNECTIONS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 512,
        }
    }
}

/// The per-caller rate and the embedded store's bounds of `switchyard serve`: each a flag and an
/// environment variable (docs/serve.md#quotas).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Quotas {
    /// Records the embedded store holds (queries and sessions); past it the oldest finished
    /// ones are evicted. A running query is never evicted: with only those left, a new query is
    /// answered 503. (`--backend memory` only.)
    #[arg(long = "max-records", env = "SWITCHYARD_SERVE_MAX_RECORDS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub max_records: u64,
    /// Bytes the embedded store holds (the JSON size of its records), e.g. 256MiB, 64KiB or a
    /// number of bytes; past it the oldest finished records are evicted, as for --max-records.
    #[arg(long = "max-store-bytes", env = "SWITCHYARD_SERVE_MAX_STORE_BYTES", default_value = "256MiB", value_parser = parse_bytes)]
    pub max_store_bytes: u64,
    /// Requests per second each caller may send, sustained; past it (and its burst) the answer
    /// is 429 with Retry-After.
    #[arg(long = "rate-limit", env = "SWITCHYARD_SERVE_RATE_LIMIT", default_value_t = 50.0, value_parser = parse_rate)]
    pub rate: f64,
    /// Requests a caller may send at once, above its sustained rate (the bucket's size).
    #[arg(long = "rate-burst", env = "SWITCHYARD_SERVE_RATE_BURST", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub burst: u32,
}

impl Default for Quotas {
    fn default() -> Quotas {
        Quotas { max_records: 10_000, max_store_bytes: 256 * 1024 * 1024, rate: 50.0, burst: 100 }
    }
}

impl Quotas {
    /// The embedded store's bounds.
    pub fn store_quota(&self) -> switchyard_engine::memory::Quota {
        switchyard_engine::memory::Quota {
            max_records: usize::try_from(self.max_records).unwrap_or(usize::MAX),
            max_bytes: usize::try_from(self.max_store_bytes).unwrap_or(usize::MAX),
        }
    }
}

/// A size flag: bytes, or a number with KiB, MiB or GiB; at least 64 KiB (one query body).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let (number, scale) = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        .iter()
        .find_map(|(suffix, scale)| trimmed.strip_suffix(suffix).map(|n| (n, *scale)))
        .unwrap_or((trimmed, 1));
    match number.trim().parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
        Some(bytes) if bytes >= 64 * 1024 => Ok(bytes),
        _ => Err(format!("`{text}` is not a size: bytes, or a whole number of KiB, MiB or GiB, at least 64KiB")),
    }
}

/// A rate flag: requests per second, above 0 and at most a million (decimals allowed: 0.5 is
/// one request every 2 s).
pub fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1_000_000.0 => Ok(v),
        _ => Err(format!("`{text}` is not a rate: requests per second, above 0 and at most 1000000")),
    }
}

/// Callers whose buckets are kept before full (idle) ones are dropped.
const MAX_BUCKETS: usize = 65_536;

/// A token bucket per caller: `burst` requests at once, refilled at `rate` a second.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<std::collections::HashMap<String, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refilled(self, now: Instant, rate: f64, burst: f64) -> Bucket {
        Bucket { tokens: (self.tokens + (now - self.at).as_secs_f64() * rate).min(burst), at: now }
    }
}

impl RateLimiter {
    /// `rate` requests a second per caller, `burst` at once.
    pub fn new(rate: f64, burst: u32) -> RateLimiter {
        RateLimiter { rate, burst: f64::from(burst), buckets: Mutex::new(std::collections::HashMap::new()) }
    }

    /// Take one request from `caller`'s bucket, or say how long until one is there.
    pub fn take(&self, caller: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(caller) {
            // A full bucket is what a new caller gets: forgetting it changes nothing.
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, b| b.refilled(now, rate, burst).tokens < burst);
        }
        let bucket = buckets.entry(caller.to_string()).or_insert(Bucket { tokens: self.burst, at: now });
        *bucket = bucket.refilled(now, self.rate, self.burst);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.rate))
        }
    }
}

/// A duration flag: whole or decimal seconds (`10`, `10s`, `1.5`) or milliseconds (`500ms`),
/// more than zero and at most a day.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let (number, scale) = match (trimmed.strip_suffix("ms"), trimmed.strip_suffix('s')) {
        (Some(ms), _) => (ms, 0.001),
        (None, Some(s)) => (s, 1.0),
        (None, None) => (trimmed, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale <= 86_400.0 => Ok(Duration::from_secs_f64(v * scale)),
        _ => Err(format!(
            "`{text}` is not a duration: seconds (10, 10s, 1.5) or milliseconds (500ms), above 0 and at most a day"
        )),
    }
}

/// The `Host` names a server answers for (lower case, without port).
#[derive(Debug, Clone)]
pub struct HostAllowlist {
    names: Vec<String>,
}

impl HostAllowlist {
    /// `localhost`, `127.0.0.1`, `::1`, the address the server is bound to, and `extra`.
    pub fn new(bind: std::net::IpAddr, extra: &[String]) -> HostAllowlist {
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "::1"].iter().map(|n| n.to_string()).collect();
        names.push(bind.to_string());
        names.extend(extra.iter().map(|n| host_name(n).to_string()).filter(|n| !n.is_empty()));
        names.sort();
        names.dedup();
        HostAllowlist { names }
    }

    /// Whether a `Host` value (`name`, `name:port`, `[v6]:port`) names this server.
    pub fn admits(&self, host: &str) -> bool {
        let name = host_name(host);
        self.names.iter().any(|n| *n == name)
    }
}

/// The name of a `Host` value, lower case, without port, brackets or trailing dot.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or("")
    } else {
        host
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Who may use the server and as whom.
#[derive(Debug, Clone)]
pub struct Access {
    /// The `Host` names answered.
    pub hosts: HostAllowlist,
    /// With `--auth jwt`: the verifier of bearer tokens (else the dev identity headers).
    pub verifier: Option<Arc<JwtVerifier>>,
}

/// What the handler needs besides the request.
struct App {
    system: Arc<Deps>,
    limits: Limits,
    access: Access,
    rate: RateLimiter,
}

/// Serve until the process is stopped.
pub async fn run(
    listener: tokio::net::TcpListener,
    system: Arc<Deps>,
    limits: Limits,
    access: Access,
    quotas: Quotas,
) -> anyhow::Result<()> {
    let rate = RateLimiter::new(quotas.rate, quotas.burst);
    let app = axum::Router::new().fallback(handle).with_state(Arc::new(App { system, limits, access, rate }));
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before it was accepted:
                // wait a moment instead of spinning, and go on.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                tokio::spawn(connection(stream, app.clone(), limits, slot));
            }
            Err(_) => {
                refuse_over_capacity(&stream);
                if let Ok(refusal) = refusals.clone().try_acquire_owned() {
                    tokio::spawn(linger(stream, refusal));
                }
            }
        }
    }
}

/// Answer a connection over the cap with `503`, and read off what it has sent so far (a
/// socket closed with unread data is reset, and the client may lose the answer). Never
/// waits: a fresh socket's send buffer takes the whole answer.
fn refuse_over_capacity(stream: &TcpStream) {
    let body = serde_json::json!({ "error": {
        "code": "unavailable",
        "message": "the server is at its connection limit; retry shortly",
        "request_id": uuid::Uuid::new_v4().to_string(),
    }})
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
    drain_ready(stream);
}

/// Read whatever has arrived on `stream` without waiting; whether it has ended.
fn drain_ready(stream: &TcpStream) -> bool {
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match stream.try_read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
    false
}

/// Keep a refused connection open for [`REFUSAL_LINGER`], reading off the rest of its request.
async fn linger(mut stream: TcpStream, _refusal: OwnedSemaphorePermit) {
    let _ = tokio::time::timeout(REFUSAL_LINGER, async {
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < 64 * 1024 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

/// Serve one connection until it closes or its deadline ([`Watch::expired`]) passes.
async fn connection(stream: TcpStream, app: axum::Router, limits: Limits, _slot: OwnedSemaphorePermit) {
    let _ = stream.set_nodelay(true);
    let watch = Arc::new(Watch::new());
    let io = TokioIo::new(Watched { stream, watch: watch.clone() });
    let on_request = watch.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let app = app.clone();
        let busy = Busy::begin(on_request.clone());
        async move {
            let response = match app.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| Tracked { body, _busy: busy }))
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        // The deadlines are this module's (`Watch`), which tell a slow head from an idle
        // keep-alive; hyper's own header timeout would count both the same.
        .header_read_timeout(None::<Duration>)
        .serve_connection(io, service);
    tokio::select! {
        result = served => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        () = watch.expired(&limits) => tracing::debug!("connection closed at its deadline"),
    }
}

/// Where a connection is, for its deadline.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting since `since` for a request's first byte: the first request of the connection
    /// (`fresh`), or the next one on a kept-alive connection.
    Waiting { since: Instant, fresh: bool },
    /// A request's first byte came at `since`; its head has not been read yet.
    ReadingHead { since: Instant },
    /// This many requests are being answered (their response bodies not sent to the end).
    Busy(usize),
}

/// A connection's phase, shared by its reads, its requests and its deadline.
struct Watch {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl Watch {
    fn new() -> Watch {
        Watch { phase: Mutex::new(Phase::Waiting { since: Instant::now(), fresh: true }), changed: Notify::new() }
    }

    fn update(&self, next: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *phase = next(*phase);
        self.changed.notify_one();
    }

    /// Bytes arrived: a request has begun unless one is already being read or answered.
    fn on_bytes(&self) {
        let waiting = matches!(*self.phase.lock().unwrap_or_else(|p| p.into_inner()), Phase::Waiting { .. });
        if waiting {
            self.update(|phase| match phase {
                Phase::Waiting { .. } => Phase::ReadingHead { since: Instant::now() },
                other => other,
            });
        }
    }

    /// When the connection is closed if nothing changes; `None` while a request is answered.
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        match *self.phase.lock().unwrap_or_else(|p| p.into_inner()) {
            Phase::Waiting { since, fresh: true } | Phase::ReadingHead { since } => Some(since + limits.header_timeout),
            Phase::Waiting { since, fresh: false } => Some(since + limits.idle_timeout),
            Phase::Busy(_) => None,
        }
    }

    /// Completes when the connection's deadline has passed.
    async fn expired(&self, limits: &Limits) {
        loop {
            let changed = self.changed.notified();
            match self.deadline(limits) {
                None => changed.await,
                Some(at) => {
                    tokio::select! {
                        () = changed => {}
                        () = tokio::time::sleep_until(at) => {
                            if self.deadline(limits).is_some_and(|d| d <= Instant::now()) {
                                return;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A request being answered: from hyper's call of the service to the end of the response body.
struct Busy(Arc<Watch>);

impl Busy {
    fn begin(watch: Arc<Watch>) -> Busy {
        watch.update(|phase| match phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        });
        Busy(watch)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.update(|phase| match phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Waiting { since: Instant::now(), fresh: false },
        });
    }
}

/// A response body that keeps its connection [`Phase::Busy`] until it is sent or dropped.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The connection's socket, telling its [`Watch`] when bytes arrive.
struct Watched {
    stream: TcpStream,
    watch: Arc<Watch>,
}

impl AsyncRead for Watched {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.watch.on_bytes();
        }
        read
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A request refused before it reaches the handler, through the handler's one error mapping
/// (in the OpenAI shape on the OpenAI-compatible routes).
fn refuse(path: &str, e: IntakeError) -> Response {
    let request_id = uuid::Uuid::new_v4().to_string();
    if is_openai_path(path) {
        return to_response(openai_error_response(&e, &request_id));
    }
    to_response(error_response(&e, &request_id))
}

fn invalid(field: &str, rule: &str) -> IntakeError {
    IntakeError::Invalid(ValidationError { errors: vec![FieldError { field: field.into(), rule: rule.into() }] })
}

async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let host = request
        .uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| request.headers().get(axum::http::header::HOST).and_then(|h| h.to_str().ok()));
    match host {
        Some(host) if app.access.hosts.admits(host) => {}
        Some(_) => return refuse(request.uri().path(), IntakeError::UnknownHost),
        None => return refuse(request.uri().path(), invalid("host", "the Host header is required")),
    }
    if let Some(page) = crate::console::asset(request.method(), request.uri().path()) {
        return page;
    }
    let system = &app.system;
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    // The route's own limit: a larger body gets 413 before the intake sees it, and one whose
    // content-length says so is not read at all.
    let limit = body_limit(&path);
    let declared = parts
        .headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if declared.is_some_and(|size| size > limit) {
        return refuse(&path, IntakeError::TooLarge { size: declared, limit });
    }
    let bytes = match tokio::time::timeout(app.limits.body_timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => return refuse(&path, IntakeError::TooLarge { size: None, limit }),
        Err(_) => return refuse(&path, IntakeError::BodyTimeout { limit: app.limits.body_timeout }),
    };
    let body = if bytes.is_empty() {
        None
    } else {
        match String::from_utf8(bytes.to_vec()) {
            Ok(s) => Some(s),
            Err(_) => return refuse(&path, invalid("body", "must be UTF-8 JSON")),
        }
    };
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_string(), v.to_string())))
        .collect();
    let query = parts.uri.query().unwrap_or("").to_string();
    let event = match api_event(parts.method.as_str(), &path, &query, &headers, body, None) {
        Ok(e) => e,
        Err(_) => return refuse(&path, invalid("request", "could not be read as an API Gateway event")),
    };
    // The caller: with `--auth jwt` the bearer token's subject, verified here and its claims
    // put where API Gateway's authorizer puts them (the OpenAPI document is served without
    // identity, handlers::OPENAPI_JSON); else the dev identity, as the handler reads it.
    let (event, caller) = match &app.access.verifier {
        None => {
            let caller = handlers::caller(system, &event).map(|c| c.user_id);
            (event, caller)
        }
        Some(verifier) => {
            let authorization = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
            let now = system.clock.now().timestamp();
            match verifier.verify_authorization_fresh(authorization, now).await {
                Ok(token) => {
                    let claims = (token.subject.as_str(), token.roles.join(","));
                    match api_event(
                        parts.method.as_str(),
                        &path,
                        &query,
                        &headers,
                        event.body,
                        Some((claims.0, &claims.1)),
                    ) {
                        Ok(e) => (e, Some(token.subject.clone())),
                        Err(_) => {
                            return refuse(&path, invalid("request", "could not be read as an API Gateway event"))
                        }
                    }
                }
                Err(JwtError::Missing) if path == "/openapi.json" => (event, None),
                Err(e) => {
                    tracing::info!(reason = %e, "refused: bad bearer token");
                    return refuse(&path, IntakeError::BadToken(e.to_string()));
                }
            }
        }
    };
    if let Some(caller) = &caller {
        if let Err(retry_after) = app.rate.take(caller) {
            tracing::info!("refused: the caller is over its rate");
            return refuse(&path, IntakeError::RateLimited { retry_after });
        }
    }
    if live::wants_stream(&event) {
        // A stream's caller is read as the events-stream function reads it: the token
        // verified again there (the same call), or the dev identity.
        let identity = app.access.verifier.as_deref().map_or(Identity::Gateway, Identity::Jwt);
        return to_streamed(live::handle_stream(system, identity, &event).await);
    }
    to_response(handle_http(system, event).await)
}

/// An API Gateway response as an HTTP response.
fn to_response(response: ApiGatewayV2httpResponse) -> Response {
    let mut out = Response::new(Body::from(match response.body {
        Some(aws_lambda_events::encodings::Body::Text(t)) => t.into_bytes(),
        Some(aws_lambda_events::encodings::Body::Binary(b)) => b,
        _ => Vec::new(),
    }));
    *out.status_mut() = StatusCode::from_u16(response.status_code as u16).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (k, v) in response.headers.iter() {
        out.headers_mut().insert(k.clone(), v.clone());
    }
    out
}

/// A streamed reply as an HTTP response whose body is sent chunk by chunk.
fn to_streamed(reply: StreamReply) -> Response {
    use futures::StreamExt;
    let mut out = Response::new(Body::from_stream(reply.body.map(Ok::<_, std::io::Error>)));
    *out.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (k, v) in reply.headers {
        if let (Ok(name), Ok(value)) = (axum::http::HeaderName::try_from(k), HeaderValue::try_from(v)) {
            out.headers_mut().insert(name, value);
        }
    }
    out
}
