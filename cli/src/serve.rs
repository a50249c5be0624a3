//! The local HTTP server behind `switchyard serve`: each request becomes an API Gateway HTTP
//! API event for the intake handler; `GET …/events` with `Accept: text/event-stream` (the event
//! log as server-sent events until the query ends) and `POST /v1/chat/completions` (streamed
//! when asked) go through the same streamed routes as the `events-stream` Lambda function
//! (`switchyard_engine::live`, `switchyard_engine::chat`). `/`, `/console.js` and `/console.css`
//! are the web console ([`crate::console`]).

use crate::backend::api_event;
use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use std::sync::Arc;
use switchyard_core::admission::{FieldError, ValidationError};
use switchyard_engine::handlers::{error_response, handle_http, is_openai_path, openai_error_response};
use switchyard_engine::intake::IntakeError;
use switchyard_engine::live::{self, Identity, StreamReply};
use switchyard_engine::Deps;

/// Largest request body read; larger bodies get 413 before the intake sees them.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// Serve until the process is stopped.
pub async fn run(listener: tokio::net::TcpListener, system: Arc<Deps>) -> anyhow::Result<()> {
    let app = axum::Router::new().fallback(handle).with_state(system);
    axum::serve(listener, app).await?;
    Ok(())
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

async fn handle(State(system): State<Arc<Deps>>, request: Request) -> Response {
    if let Some(page) = crate::console::asset(request.method(), request.uri().path()) {
        return page;
    }
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let bytes = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return refuse(&path, IntakeError::TooLarge { size: MAX_REQUEST_BYTES + 1, limit: MAX_REQUEST_BYTES })
        }
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
    if live::wants_stream(&event) {
        return to_streamed(live::handle_stream(&system, Identity::Gateway, &event).await);
    }
    to_response(handle_http(&system, event).await)
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
