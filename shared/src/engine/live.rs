//! The routes answered with a streamed response: today the live events endpoint
//! (`GET /v1/queries/{id}/events` following the log until the query ends). `switchyard serve`
//! sends these through its HTTP server; on AWS the `events-stream` function sends them through
//! Lambda response streaming behind a Function URL (docs/operations.md#streaming-on-aws).
//!
//! A route here answers a status, headers and a body that is a stream of chunks; errors are
//! answered by [`super::handlers::error_response`] like every other route. New streamed routes
//! (an OpenAI-compatible `POST /v1/chat/completions` with `stream: true`) join
//! [`STREAM_ROUTES`] and the match in [`handle_stream`]; the function, its URL and the template
//! do not change.

use super::follow::{self, LAST_EVENT_ID};
use super::handlers::{self, error_response};
use super::intake::{self, Caller, IntakeError};
use super::Deps;
use crate::jwt::JwtVerifier;
use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::Method;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;

/// The routes [`handle_stream`] serves: (method, path template).
pub const STREAM_ROUTES: [(&str, &str); 1] = [("GET", "/v1/queries/{id}/events")];

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

fn caller(deps: &Deps, identity: Identity<'_>, request: &ApiGatewayV2httpRequest) -> Result<Caller, IntakeError> {
    match identity {
        Identity::Gateway => handlers::caller(deps, request).ok_or(IntakeError::Unauthenticated),
        Identity::Jwt(verifier) => {
            let now = deps.clock.now().timestamp();
            match verifier.verify_authorization(header(request, "authorization"), now) {
                Ok(token) => Ok(Caller { user_id: token.subject, roles: token.roles }),
                Err(e) => {
                    tracing::info!(reason = %e, "refused: bad bearer token");
                    Err(IntakeError::BadToken(e.to_string()))
                }
            }
        }
    }
}

/// Whether `path` is a route [`handle_stream`] serves (any method).
pub fn is_stream_route(path: &str) -> bool {
    route(path).is_some()
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
        Err(e) => StreamReply::from_response(error_response(&e, &request_id)),
    }
}

async fn open(
    deps: &Deps,
    identity: Identity<'_>,
    request: &ApiGatewayV2httpRequest,
) -> Result<StreamReply, IntakeError> {
    let path = request.raw_path.clone().or_else(|| request.request_context.http.path.clone()).unwrap_or_default();
    let (template, id) = route(&path).ok_or(IntakeError::UnknownRoute)?;
    let method = &request.request_context.http.method;
    if !STREAM_ROUTES.iter().any(|(m, t)| *t == template && *m == method.as_str()) {
        return Err(IntakeError::MethodNotAllowed { allowed: "GET" });
    }
    let caller = caller(deps, identity, request)?;
    match (method, template) {
        (&Method::GET, "/v1/queries/{id}/events") => {
            let id = id.unwrap_or_default();
            let resume_after = match header(request, LAST_EVENT_ID) {
                None => None,
                Some(value) => Some(follow::parse_last_event_id(value).map_err(IntakeError::Invalid)?),
            };
            intake::owned_query(deps, &caller, &id).await?;
            let body = follow::follow(deps.store.clone(), id, resume_after, deps.settings.follow).boxed();
            Ok(StreamReply {
                status: 200,
                headers: vec![
                    ("content-type".into(), "text/event-stream".into()),
                    ("cache-control".into(), "no-cache".into()),
                    // Proxies that buffer by default (nginx) pass the stream through.
                    ("x-accel-buffering".into(), "no".into()),
                ],
                body,
            })
        }
        _ => Err(IntakeError::MethodNotAllowed { allowed: "GET" }),
    }
}
