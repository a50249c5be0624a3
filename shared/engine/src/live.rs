//! The routes answered with a streamed response: today the live events endpoint
//! (`GET /v1/queries/{id}/events` following the log until the query ends). `switchyard serve`
//! sends these through its HTTP server; on AWS the `events-stream` function sends them through
//! Lambda response streaming behind a Function URL (docs/operations.md#streaming-on-aws).
//!
//! A route here answers a status, headers and a body that is a stream of chunks; errors are
//! answered by [`super::handlers::error_response`] like every other route (in the OpenAI shape
//! on the chat completions route). The routes: the live events endpoint, and
//! `POST /v1/chat/completions` ([`super::chat`]): streamed when its body says `stream: true`,
//! else one `chat.completion` sent as a one-chunk stream, so a chat client needs one base URL.

use super::follow::{self, LAST_EVENT_ID};
use super::handlers::{self, error_response, openai_error_response};
use super::intake::{self, Caller, IntakeError};
use super::{chat, Deps};
use crate::jwt::JwtVerifier;
use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::Method;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;

/// The routes [`handle_stream`] serves: (method, path template).
pub const STREAM_ROUTES: [(&str, &str); 2] = [("GET", "/v1/queries/{id}/events"), ("POST", "/v1/chat/completions")];

/// Where a streamed route's caller comes from.
#[derive(Debug, Clone, Copy)]
pub enum Identity<'a> {
    /// Verify the `Authorization: Bearer` JWT here (a Function URL has no authorizer).
    Jwt(&'a JwtVerifier),
    /// Trust the request as [`handlers::caller`] does: an API Gateway authorizer's claims, or
    /// the dev identity headers of `switchyard serve`.
    Gateway,
}

/// A streamed response: status and headers first, then the body as it is produced.
pub struct StreamReply {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<(String, String)>,
    /// The body's chunks.
    pub body: BoxStream<'static, Bytes>,
}

impl std::fmt::Debug for StreamReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReply").field("status", &self.status).field("headers", &self.headers).finish()
    }
}

impl StreamReply {
    /// A `200` server-sent-events stream of `body`.
    pub fn events(body: BoxStream<'static, Bytes>) -> StreamReply {
        StreamReply {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream".into()),
                ("cache-control".into(), "no-cache".into()),
                // Proxies that buffer by default (nginx) pass the stream through.
                ("x-accel-buffering".into(), "no".into()),
            ],
            body,
        }
    }

    /// A whole (buffered) response sent as a one-chunk stream: how errors are answered.
    pub fn from_response(response: ApiGatewayV2httpResponse) -> StreamReply {
        let body = match response.body {
            Some(Body::Text(t)) => Bytes::from(t),
            Some(Body::Binary(b)) => Bytes::from(b),
            _ => Bytes::new(),
        };
        let headers = response
            .headers
            .iter()
            .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_string(), v.to_string())))
            .collect();
        StreamReply {
            status: u16::try_from(response.status_code).unwrap_or(500),
            headers,
            body: futures::stream::once(async move { body }).boxed(),
        }
    }
}

fn header<'a>(request: &'a ApiGatewayV2httpRequest, name: &str) -> Option<&'a str> {
    request.headers.get(name).and_then(|v| v.to_str().ok())
}

async fn caller(deps: &Deps, identity: Identity<'_>, request: &ApiGatewayV2httpRequest) -> Result<Caller, IntakeError> {
    match identity {
        Identity::Gateway => handlers::caller(deps, request).ok_or(IntakeError::Unauthenticated),
        Identity::Jwt(verifier) => {
            let now = deps.clock.now().timestamp();
            match verifier.verify_authorization_fresh(header(request, "authorization"), now).await {
                Ok(token) => Ok(Caller { user_id: token.subject, roles: token.roles }),
                Err(e) => {
                    tracing::info!(reason = %e, "refused: bad bearer token");
                    Err(IntakeError::BadToken(e.to_string()))
                }
            }
        }
    }
}

/// Whether a server that can stream (`switchyard serve`) sends this request through
/// [`handle_stream`]: a chat completion, or the events endpoint asked for as
/// `text/event-stream`. The rest go to [`super::handlers::handle_http`].
pub fn wants_stream(request: &ApiGatewayV2httpRequest) -> bool {
    let path = handlers::route_path(request);
    let method = &request.request_context.http.method;
    let sse = header(request, "accept").is_some_and(|a| a.contains("text/event-stream"));
    match route(&path) {
        Some(("/v1/chat/completions", _)) => true,
        Some(_) => *method == Method::GET && sse,
        None => false,
    }
}

/// The route template `path` matches, with its `{id}`.
fn route(path: &str) -> Option<(&'static str, Option<String>)> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    STREAM_ROUTES.iter().find_map(|(_, template)| {
        let parts: Vec<&str> = template.split('/').filter(|s| !s.is_empty()).collect();
        if parts.len() != segments.len() {
            return None;
        }
        let mut id = None;
        for (t, s) in parts.iter().zip(&segments) {
            if t.starts_with('{') && !s.is_empty() {
                id = Some((*s).to_string());
            } else if t != s {
                return None;
            }
        }
        Some((*template, id))
    })
}

/// Serve a streamed route: route, caller, ownership and input are checked before the first
/// byte, so every refusal is an ordinary JSON error with its status.
pub async fn handle_stream(deps: &Deps, identity: Identity<'_>, request: &ApiGatewayV2httpRequest) -> StreamReply {
    let request_id = request.request_context.request_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    match open(deps, identity, request).await {
        Ok(reply) => reply,
        Err(e) if handlers::is_openai_path(&handlers::route_path(request)) => {
            StreamReply::from_response(openai_error_response(&e, &request_id))
        }
        Err(e) => StreamReply::from_response(error_response(&e, &request_id)),
    }
}

async fn open(
    deps: &Deps,
    identity: Identity<'_>,
    request: &ApiGatewayV2httpRequest,
) -> Result<StreamReply, IntakeError> {
    let path = handlers::route_path(request);
    let (template, id) = route(&path).ok_or(IntakeError::UnknownRoute)?;
    let method = &request.request_context.http.method;
    let allowed = if template == "/v1/chat/completions" { "POST" } else { "GET" };
    if !STREAM_ROUTES.iter().any(|(m, t)| *t == template && *m == method.as_str()) {
        return Err(IntakeError::MethodNotAllowed { allowed });
    }
    let caller = caller(deps, identity, request).await?;
    match (method, template) {
        (&Method::GET, "/v1/queries/{id}/events") => {
            let id = id.unwrap_or_default();
            let resume_after = match header(request, LAST_EVENT_ID) {
                None => None,
                Some(value) => Some(follow::parse_last_event_id(value).map_err(IntakeError::Invalid)?),
            };
            intake::owned_query(deps, &caller, &id).await?;
            Ok(StreamReply::events(follow::follow(deps.store.clone(), id, resume_after, deps.settings.follow).boxed()))
        }
        (&Method::POST, "/v1/chat/completions") => {
            let chat_request = chat::parse_request(&handlers::body_bytes(request)?, &deps.manifest)?;
            let key = header(request, "idempotency-key");
            if !chat_request.stream {
                let completion = chat::complete(deps, &caller, &chat_request, key).await?;
                return Ok(StreamReply::from_response(handlers::json_response(200, &completion, &[])));
            }
            Ok(StreamReply::events(chat::stream(deps, &caller, &chat_request, key, deps.settings.follow).await?))
        }
        _ => Err(IntakeError::MethodNotAllowed { allowed }),
    }
}
