//! Lambda events in, responses out: API Gateway HTTP API (v2) for intake, SQS for the rest.
//!
//! SQS records are parsed one by one from their string bodies, so one malformed message is one
//! batch item failure, never a failed batch (docs/architecture.md#rules, rule 5). HTTP errors are mapped to status
//! codes in one place ([`error_response`]): 4xx bodies name the field and the rule; 5xx bodies
//! carry the request id and nothing internal.

use super::follow::{self, LAST_EVENT_ID};
use super::intake::{self, Caller, IntakeError, QueryView};
use super::worker::{self, DispatchJob};
use super::{approval, chat, learning, listing, router, synth, Deps, StepError};
use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderValue, Method};
use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use base64::Engine as _;
use serde::Serialize;
use serde_json::{json, Value};
use std::time::Duration;
use switchyard_model::jobs::{Job, JobMessage};
use tracing::{error, info_span, warn, Instrument};

/// Which SQS-triggered function is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// Consumes the route queue.
    Router,
    /// Consumes a tier's queue (`None`: any tier).
    Worker {
        /// The tier from `SWITCHYARD_TIER`.
        tier: Option<u8>,
    },
    /// Consumes the synth queue (synth and deadline jobs).
    Synthesizer,
}

/// An SQS event the handler refuses as a whole.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// A record without a message id cannot be reported as a batch item failure.
    #[error("SQS record {0} has no messageId")]
    MissingMessageId(usize),
}

/// One SQS record as a handler reads it, borrowed from a Lambda event ([`handle_sqs`]) or from
/// the messages a poller received ([`crate::pollers`]): nothing is copied to handle it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The message id (a batch item failure names it).
    pub message_id: &'a str,
    /// The body, if the record has one.
    pub body: Option<&'a str>,
    /// SQS `ApproximateReceiveCount`.
    pub receive_count: u32,
    /// The `traceparent` message attribute, if any.
    pub traceparent: Option<&'a str>,
}

impl<'a> RecordRef<'a> {
    /// The fields of a Lambda SQS record.
    pub fn of(record: &'a SqsMessage) -> RecordRef<'a> {
        RecordRef {
            message_id: record.message_id.as_deref().unwrap_or_default(),
            body: record.body.as_deref(),
            receive_count: record.attributes.get("ApproximateReceiveCount").and_then(|c| c.parse().ok()).unwrap_or(1),
            traceparent: record
                .message_attributes
                .get(crate::ports::ATTR_TRACEPARENT)
                .and_then(|a| a.string_value.as_deref()),
        }
    }
}

/// Handle an SQS event; returns the records to retry.
pub async fn handle_sqs(deps: &Deps, function: Function, event: SqsEvent) -> Result<SqsBatchResponse, HandlerError> {
    // A record without a message id reads as an empty id, which refuses the batch.
    let records: Vec<RecordRef<'_>> = event.records.iter().map(RecordRef::of).collect();
    let results = handle_records(deps, function, &records).await?;
    let mut response = SqsBatchResponse::default();
    for (record, ok) in records.iter().zip(results) {
        if !ok {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = record.message_id.to_string();
            response.batch_item_failures.push(failure);
        }
    }
    Ok(response)
}

/// Handle a batch of records, concurrently; whether each succeeded, in order. A record without
/// a message id refuses the batch (it could not be reported as a batch item failure).
pub async fn handle_records(
    deps: &Deps,
    function: Function,
    records: &[RecordRef<'_>],
) -> Result<Vec<bool>, HandlerError> {
    if let Some(i) = records.iter().position(|r| r.message_id.is_empty()) {
        return Err(HandlerError::MissingMessageId(i));
    }
    // (A batch of one awaited directly instead is no cheaper: the handler's large future then
    // sits in the invocation's task and is copied when the task is spawned and completed.)
    Ok(futures::future::join_all(records.iter().map(|record| handle_record(deps, function, record))).await)
}

async fn handle_record(deps: &Deps, function: Function, record: &RecordRef<'_>) -> bool {
    let message_id = record.message_id;
    let receive_count = record.receive_count;
    let traceparent = record.traceparent;
    let trace_id = traceparent.and_then(super::trace_id).unwrap_or_default();
    let parent_span_id = traceparent.and_then(super::parent_span_id).unwrap_or_default();
    let function_name = match function {
        Function::Router => "router",
        Function::Worker { .. } => "agent-worker",
        Function::Synthesizer => "synthesizer",
    };
    let span = info_span!(
        "sqs_record",
        function = function_name,
        message_id,
        receive_count,
        trace_id,
        parent_span_id,
        query_id = tracing::field::Empty
    );
    async {
        let Some(body) = record.body else {
            error!("refused: the record has no body");
            return false;
        };
        let job = match JobMessage::parse(body) {
            Ok(job) => job,
            Err(e) => {
                error!(reason = %e, "refused: malformed message body");
                return false;
            }
        };
        tracing::Span::current().record("query_id", job.query_id());
        let result = match (function, job) {
            (Function::Router, Job::Route { query_id }) => router::route(deps, &query_id).await,
            (Function::Worker { tier }, Job::Dispatch { query_id, dispatch_id, attempt, timeout_ms }) => {
                let job = DispatchJob { query_id, dispatch_id, attempt, timeout_ms, receive_count };
                worker::run_dispatch(deps, tier, &job).await
            }
            (Function::Synthesizer, Job::Synthesize { query_id }) => synth::synthesize(deps, &query_id).await,
            (Function::Synthesizer, Job::Deadline { query_id, fire_at }) => {
                synth::deadline(deps, &query_id, fire_at).await
            }
            (function, job) => Err(StepError::Permanent(format!("{job:?} delivered to the {function:?} function"))),
        };
        match result {
            Ok(()) => true,
            Err(StepError::Retryable(reason)) => {
                warn!(%reason, "will be retried");
                false
            }
            Err(StepError::Permanent(reason)) => {
                error!(%reason, "cannot succeed; retried until it is dead-lettered");
                false
            }
        }
    }
    .instrument(span)
    .await
}

// ------------------------------------------------------------------------------------------
// HTTP
// ------------------------------------------------------------------------------------------

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'a str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Value>,
    request_id: &'a str,
}

pub(super) fn json_response(
    status: i64,
    body: &impl Serialize,
    headers: &[(&'static str, String)],
) -> ApiGatewayV2httpResponse {
    let mut response = ApiGatewayV2httpResponse::default();
    response.status_code = status;
    let text = serde_json::to_string_pretty(body).unwrap_or_else(|_| "{}".into());
    response.body = Some(Body::Text(text));
    let mut map = HeaderMap::new();
    map.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            map.insert(*name, v);
        }
    }
    response.headers = map;
    response
}

/// The answer to `POST /v1/queries`, written straight from the accepted query (its keys in
/// the order a JSON map of them has always printed them: alphabetical).
#[derive(Serialize)]
struct AcceptedBody<'a> {
    confidence: f64,
    intent: &'a str,
    links: Links<'a>,
    query_id: &'a str,
    replayed: bool,
    session_id: &'a str,
    status: crate::ports::QueryStatus,
    warnings: &'a [String],
}

impl<'a> AcceptedBody<'a> {
    fn new(accepted: &'a intake::Accepted, links: Links<'a>) -> AcceptedBody<'a> {
        AcceptedBody {
            confidence: accepted.confidence,
            intent: &accepted.intent,
            links,
            query_id: &accepted.query_id,
            replayed: accepted.replayed,
            session_id: &accepted.session_id,
            status: accepted.status,
            warnings: &accepted.warnings,
        }
    }
}

#[derive(Serialize)]
struct Links<'a> {
    events: &'a str,
    #[serde(rename = "self")]
    self_: &'a str,
}

fn with_header(mut response: ApiGatewayV2httpResponse, name: &'static str, value: &str) -> ApiGatewayV2httpResponse {
    if let Ok(v) = HeaderValue::from_str(value) {
        response.headers.insert(name, v);
    }
    response
}

/// The one place errors become HTTP responses: a status, a string `code`, a message that names
/// the field and the rule for a caller's mistake, and the `request_id` — never internals.
pub fn error_response(e: &IntakeError, request_id: &str) -> ApiGatewayV2httpResponse {
    let (status, code, details, message, headers) = error_parts(e, request_id);
    let body = json!({ "error": ErrorBody { code, message, details, request_id } });
    json_response(status, &body, &headers)
}

/// The same errors in the OpenAI error shape, for the chat completions routes
/// ([`super::chat::error_body`]): same status, same code, the field at fault as `param`.
pub fn openai_error_response(e: &IntakeError, request_id: &str) -> ApiGatewayV2httpResponse {
    let (status, code, _, message, mut headers) = error_parts(e, request_id);
    // The official clients retry 408, 409, 429 and 5xx by default: a retry of a turn that was
    // accepted would ask it again, so only an unavailable dependency or a rate limit (the
    // request was not read) invites one.
    if !matches!(e, IntakeError::Unavailable(_) | IntakeError::RateLimited { .. }) {
        headers.push(("x-should-retry", "false".to_string()));
    }
    headers.push(("x-request-id", request_id.to_string()));
    json_response(status, &super::chat::error_body(status, code, &message, e), &headers)
}

type ErrorParts = (i64, &'static str, Option<Value>, String, Vec<(&'static str, String)>);

fn error_parts(e: &IntakeError, request_id: &str) -> ErrorParts {
    let (status, code, details) = match e {
        IntakeError::Invalid(v) => (400, "invalid_input", serde_json::to_value(&v.errors).ok()),
        IntakeError::Unauthenticated | IntakeError::BadToken(_) => (401, "unauthenticated", None),
        IntakeError::Forbidden { .. } | IntakeError::RoleRequired { .. } => (403, "forbidden", None),
        IntakeError::NotFound | IntakeError::UnknownRoute => (404, "not_found", None),
        IntakeError::MethodNotAllowed { .. } => (405, "method_not_allowed", None),
        IntakeError::BodyTimeout { .. } => (408, "request_timeout", None),
        IntakeError::UnknownHost => (421, "misdirected_request", None),
        IntakeError::Conflict(_) => (409, "conflict", None),
        IntakeError::RateLimited { .. } => (429, "rate_limited", None),
        IntakeError::TooLarge { .. } => (413, "too_large", None),
        IntakeError::NotReady { query_id, .. } => (504, "not_ready", Some(json!({ "query_id": query_id }))),
        IntakeError::Unavailable(reason) => {
            error!(request_id, %reason, "request failed on a dependency");
            (503, "unavailable", None)
        }
    };
    let message = match e {
        IntakeError::Invalid(v) => {
            v.errors.iter().map(|f| format!("{}: {}", f.field, f.rule)).collect::<Vec<_>>().join("; ")
        }
        IntakeError::Unavailable(_) => "temporarily unavailable; retry with the same Idempotency-Key".to_string(),
        other => other.to_string(),
    };
    let headers = match e {
        IntakeError::Unavailable(_) => vec![("retry-after", "1".to_string())],
        IntakeError::RateLimited { retry_after } => {
            vec![("retry-after", super::intake::retry_after_secs(*retry_after).to_string())]
        }
        IntakeError::MethodNotAllowed { allowed } => vec![("allow", (*allowed).to_string())],
        IntakeError::BadToken(_) => vec![("www-authenticate", "Bearer error=\"invalid_token\"".to_string())],
        _ => vec![],
    };
    (status, code, details, message, headers)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Roles from a claim value: `["a","b"]`, `[a b]`, `a,b` or `a b`.
fn parse_roles(claim: &str) -> Vec<String> {
    claim
        .trim_matches(|c| c == '[' || c == ']')
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(|r| r.trim_matches('"').trim())
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect()
}

/// The caller: the JWT authorizer's `sub` and `roles` (or `cognito:groups`) claims; with
/// `dev_identity_headers`, `x-switchyard-user` / `x-switchyard-roles`.
pub fn caller(deps: &Deps, request: &ApiGatewayV2httpRequest) -> Option<Caller> {
    let claims = request.request_context.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).map(|j| &j.claims);
    if let Some(sub) = claims.and_then(|c| c.get("sub")).filter(|s| !s.is_empty()) {
        let roles = claims
            .and_then(|c| c.get("roles").or_else(|| c.get("cognito:groups")))
            .map(|r| parse_roles(r))
            .unwrap_or_default();
        return Some(Caller { user_id: sub.clone(), roles });
    }
    if deps.settings.dev_identity_headers {
        let roles = header(&request.headers, "x-switchyard-roles").map(parse_roles).unwrap_or_default();
        if let Some(user) = header(&request.headers, "x-switchyard-user") {
            return (!user.is_empty() && user.len() <= 128).then(|| Caller { user_id: user.to_string(), roles });
        }
        // A client that can only set an API key (most chat front ends) names its dev user
        // as `Authorization: Bearer dev:<user>`.
        let user = header(&request.headers, "authorization")
            .and_then(|a| a.strip_prefix("Bearer dev:"))
            .filter(|u| !u.is_empty() && u.len() <= 128 && u.chars().all(|c| c.is_ascii_graphic()))?;
        return Some(Caller { user_id: user.to_string(), roles });
    }
    None
}

pub use super::follow::sse_frame;

fn wants_sse(request: &ApiGatewayV2httpRequest) -> bool {
    header(&request.headers, "accept").is_some_and(|a| a.contains("text/event-stream"))
}

/// Handle an API Gateway HTTP API request.
pub async fn handle_http(deps: &Deps, request: ApiGatewayV2httpRequest) -> ApiGatewayV2httpResponse {
    let request_id = request.request_context.request_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    match serve_http(deps, &request).await {
        Ok(response) => response,
        Err(e) if is_openai_path(&route_path(&request)) => openai_error_response(&e, &request_id),
        Err(e) => error_response(&e, &request_id),
    }
}

/// The request's path (`rawPath`, else the context's).
pub(super) fn route_path(request: &ApiGatewayV2httpRequest) -> String {
    request.raw_path.clone().or_else(|| request.request_context.http.path.clone()).unwrap_or_default()
}

fn route_of(request: &ApiGatewayV2httpRequest) -> (Method, Vec<String>) {
    let path = route_path(request);
    let segments = path.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect();
    (request.request_context.http.method.clone(), segments)
}

fn invalid(field: &str, rule: &str) -> IntakeError {
    IntakeError::Invalid(switchyard_core::admission::ValidationError {
        errors: vec![switchyard_core::admission::FieldError { field: field.into(), rule: rule.into() }],
    })
}

/// The OpenAPI 3.1 document of these routes (`docs/openapi.json`), served at `/openapi.json`
/// without identity; tests/openapi.rs keeps the two in step.
pub const OPENAPI_JSON: &str = include_str!("../../../docs/openapi.json");

/// The routes the HTTP handler serves: (method, path template). The SAM template declares
/// exactly these, and a test asks the handler for each.
pub const HTTP_ROUTES: [(&str, &str); 10] = [
    ("POST", "/v1/queries"),
    ("GET", "/v1/queries"),
    ("GET", "/v1/queries/{id}"),
    ("GET", "/v1/queries/{id}/events"),
    ("POST", "/v1/queries/{id}/feedback"),
    ("POST", "/v1/queries/{id}/approval"),
    ("GET", "/v1/signals"),
    ("GET", "/v1/manifest/routes"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
];

/// The largest request body `path`'s route reads, in bytes: a chat completion
/// ([`super::chat::MAX_CHAT_BODY_BYTES`]), feedback
/// ([`switchyard_model::records::MAX_FEEDBACK_BYTES`]), else a query
/// ([`switchyard_core::admission::MAX_BODY_BYTES`]). A server that reads bodies itself
/// (`switchyard serve`) stops there and answers 413 with this limit.
pub fn body_limit(path: &str) -> usize {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["v1", "chat", "completions"] => super::chat::MAX_CHAT_BODY_BYTES,
        ["v1", "queries", _, "feedback"] => switchyard_model::records::MAX_FEEDBACK_BYTES,
        _ => switchyard_core::admission::MAX_BODY_BYTES,
    }
}

/// Whether `path` is one of the OpenAI-compatible routes, whose errors take the OpenAI shape
/// ([`openai_error_response`]).
pub fn is_openai_path(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    matches!(segments.as_slice(), ["v1", "chat", "completions"] | ["v1", "models"])
}

/// The route template of a path, if the API has one: `/v1/queries/abc/events` →
/// `/v1/queries/{id}/events`.
fn route_template(segments: &[&str]) -> Option<&'static str> {
    HTTP_ROUTES.iter().map(|(_, path)| *path).find(|path| {
        let template: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        template.len() == segments.len()
            && template.iter().zip(segments).all(|(t, s)| (t.starts_with('{') && !s.is_empty()) || t == s)
    })
}

/// The methods a route template answers, for `allow`.
fn allowed_methods(template: &str) -> &'static str {
    let serves = |method: &str| HTTP_ROUTES.iter().any(|(m, p)| *p == template && *m == method);
    match (serves("GET"), serves("POST")) {
        (true, true) => "GET, POST",
        (false, true) => "POST",
        _ => "GET",
    }
}

/// The request body as bytes (API Gateway may send it base64-encoded).
pub(super) fn body_bytes(request: &ApiGatewayV2httpRequest) -> Result<Vec<u8>, IntakeError> {
    match (&request.body, request.is_base64_encoded) {
        (None, _) => Ok(Vec::new()),
        (Some(b), false) => Ok(b.clone().into_bytes()),
        (Some(b), true) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|_| invalid("body", "base64 body does not decode")),
    }
}

async fn serve_http(deps: &Deps, request: &ApiGatewayV2httpRequest) -> Result<ApiGatewayV2httpResponse, IntakeError> {
    let (method, segments) = route_of(request);
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    if segments.as_slice() == ["openapi.json"] {
        if method != Method::GET {
            return Err(IntakeError::MethodNotAllowed { allowed: "GET" });
        }
        let mut response = ApiGatewayV2httpResponse::default();
        response.status_code = 200;
        response.body = Some(Body::Text(OPENAPI_JSON.to_string()));
        response.headers.insert("content-type", HeaderValue::from_static("application/json"));
        return Ok(response);
    }
    let template = route_template(&segments).ok_or(IntakeError::UnknownRoute)?;
    if !HTTP_ROUTES.iter().any(|(m, p)| *p == template && *m == method.as_str()) {
        return Err(IntakeError::MethodNotAllowed { allowed: allowed_methods(template) });
    }
    let caller = caller(deps, request).ok_or(IntakeError::Unauthenticated)?;
    let wait = match request.query_string_parameters.first("wait") {
        None => None,
        Some(w) => match w.parse::<u64>() {
            Ok(n) if n <= deps.settings.max_wait.as_secs() => Some(Duration::from_secs(n)),
            _ => {
                return Err(invalid(
                    "wait",
                    &format!("a whole number of seconds from 0 to {}", deps.settings.max_wait.as_secs()),
                ))
            }
        },
    };
    match (method, segments.as_slice()) {
        (Method::POST, ["v1", "queries"]) => {
            let body = body_bytes(request)?;
            let key = header(&request.headers, "idempotency-key");
            let accepted = intake::submit(deps, &caller, &body, key).await?;
            let location = format!("/v1/queries/{}", accepted.query_id);
            if let Some(wait) = wait {
                if let Ok(Some(output)) = intake::wait_for_output(deps, &accepted.query_id, wait).await {
                    return Ok(json_response(200, &output, &[("location", location)]));
                }
            }
            let status = if accepted.replayed { 200 } else { 202 };
            let events = format!("{location}/events");
            let body = AcceptedBody::new(&accepted, Links { events: &events, self_: &location });
            let response = json_response(status, &body, &[]);
            Ok(with_header(response, "location", &location))
        }
        (Method::GET, ["v1", "queries"]) => {
            let limit = match request.query_string_parameters.first("limit") {
                None => listing::DEFAULT_LIST_LIMIT,
                Some(l) => match l.parse::<usize>() {
                    Ok(n) if (1..=listing::MAX_LIST_LIMIT).contains(&n) => n,
                    _ => {
                        return Err(invalid("limit", &format!("a whole number from 1 to {}", listing::MAX_LIST_LIMIT)))
                    }
                },
            };
            let queries = listing::recent_queries(deps, &caller, limit).await?;
            Ok(json_response(200, &json!({ "queries": queries }), &[]))
        }
        (Method::POST, ["v1", "queries", id, "feedback"]) => {
            let recorded = learning::give_feedback(deps, &caller, id, &body_bytes(request)?).await?;
            let status = if recorded.replaced { 200 } else { 201 };
            Ok(json_response(status, &recorded, &[]))
        }
        (Method::POST, ["v1", "queries", id, "approval"]) => {
            let decision = approval::Decision::parse(&body_bytes(request)?)?;
            let decided = approval::decide(deps, approval::Decider::Caller(&caller), id, &decision).await?;
            Ok(json_response(200, &decided, &[]))
        }
        (Method::GET, ["v1", "signals"]) => {
            let p = &request.query_string_parameters;
            let query = learning::SignalQuery {
                since: p.first("since"),
                min_reward: p.first("min_reward"),
                limit: p.first("limit"),
                cursor: p.first("cursor"),
            };
            let page = learning::signal_page(deps, &caller, &query).await?;
            Ok(json_response(200, &json!({ "signals": page.records, "next": page.next }), &[]))
        }
        (Method::POST, ["v1", "chat", "completions"]) => {
            let chat_request = chat::parse_request(&body_bytes(request)?, &deps.manifest)?;
            let key = header(&request.headers, "idempotency-key");
            if !chat_request.stream {
                return Ok(json_response(200, &chat::complete(deps, &caller, &chat_request, key).await?, &[]));
            }
            // Behind a buffering API (API Gateway HTTP APIs do not stream) the whole stream in
            // one response, bounded by the wait limit; the events-stream function's URL sends
            // it as it is written (crate::live).
            let settings = follow::FollowSettings { max_duration: deps.settings.max_wait, ..deps.settings.follow };
            let chunks: Vec<bytes::Bytes> =
                futures::StreamExt::collect(chat::stream(deps, &caller, &chat_request, key, settings).await?).await;
            let mut response = ApiGatewayV2httpResponse::default();
            response.status_code = 200;
            response.body = Some(Body::Text(chunks.iter().map(|c| String::from_utf8_lossy(c)).collect()));
            let mut map = HeaderMap::new();
            map.insert("content-type", HeaderValue::from_static("text/event-stream"));
            map.insert("cache-control", HeaderValue::from_static("no-cache"));
            response.headers = map;
            Ok(response)
        }
        (Method::GET, ["v1", "models"]) => Ok(json_response(200, &chat::models(deps), &[])),
        (Method::GET, ["v1", "manifest", "routes"]) => {
            Ok(json_response(200, &listing::routing_table(&deps.manifest), &[]))
        }
        (Method::GET, ["v1", "queries", id]) => {
            if let Some(wait) = wait {
                intake::owned_query(deps, &caller, id).await?;
                let _ = intake::wait_for_output(deps, id, wait).await;
            }
            let view = intake::view(deps, &caller, id).await?;
            let status = if matches!(view, QueryView::Done(_)) { 200 } else { 202 };
            Ok(json_response(status, &view, &[]))
        }
        (Method::GET, ["v1", "queries", id, "events"]) => {
            let events = intake::events(deps, &caller, id).await?;
            if wants_sse(request) {
                // Behind a buffering API the log so far, in one response; resumable like the
                // live stream (crate::follow).
                let resume_after = match header(&request.headers, LAST_EVENT_ID) {
                    None => None,
                    Some(value) => Some(follow::parse_last_event_id(value).map_err(IntakeError::Invalid)?),
                };
                let (events, _) = follow::events_after(events, resume_after.as_deref());
                let mut response = ApiGatewayV2httpResponse::default();
                response.status_code = 200;
                response.body = Some(Body::Text(events.iter().map(sse_frame).collect()));
                let mut map = HeaderMap::new();
                map.insert("content-type", HeaderValue::from_static("text/event-stream"));
                map.insert("cache-control", HeaderValue::from_static("no-cache"));
                response.headers = map;
                return Ok(response);
            }
            Ok(json_response(200, &json!({ "query_id": id, "events": events }), &[]))
        }
        _ => Err(IntakeError::MethodNotAllowed { allowed: allowed_methods(template) }),
    }
}
