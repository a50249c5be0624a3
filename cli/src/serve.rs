//! The local HTTP server behind `switchyard serve`: each request becomes an API Gateway HTTP
//! API event for the intake handler; `GET …/events` with `Accept: text/event-stream` tails the
//! event log as server-sent events until the query ends.

use crate::ask::api_event;
use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use shared::engine::handlers::{error_response, handle_http, sse_frame};
use shared::engine::intake::IntakeError;
use shared::engine::Deps;
use shared::ports::EventKind;
use shared::validation::{FieldError, ValidationError};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Largest request body read; larger bodies get 413 before the intake sees them.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// Serve until the process is stopped.
pub async fn run(listener: tokio::net::TcpListener, system: Arc<Deps>) -> anyhow::Result<()> {
    let app = axum::Router::new().fallback(handle).with_state(system);
    axum::serve(listener, app).await?;
    Ok(())
}

/// A request refused before it reaches the handler, through the handler's one error mapping.
fn refuse(e: IntakeError) -> Response {
    to_response(error_response(&e, &uuid::Uuid::new_v4().to_string()))
}

fn invalid(field: &str, rule: &str) -> IntakeError {
    IntakeError::Invalid(ValidationError { errors: vec![FieldError { field: field.into(), rule: rule.into() }] })
}

async fn handle(State(system): State<Arc<Deps>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(_) => return refuse(IntakeError::TooLarge { size: MAX_REQUEST_BYTES + 1, limit: MAX_REQUEST_BYTES }),
    };
    let body = if bytes.is_empty() {
        None
    } else {
        match String::from_utf8(bytes.to_vec()) {
            Ok(s) => Some(s),
            Err(_) => return refuse(invalid("body", "must be UTF-8 JSON")),
        }
    };
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_string(), v.to_string())))
        .collect();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let sse = parts.method == axum::http::Method::GET
        && path.ends_with("/events")
        && parts.headers.get("accept").and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"));
    let event = match api_event(parts.method.as_str(), &path, &query, &headers, body, None) {
        Ok(e) => e,
        Err(_) => return refuse(invalid("request", "could not be read as an API Gateway event")),
    };
    let response = handle_http(&system, event).await;
    if sse && response.status_code == 200 {
        let query_id = path.trim_end_matches("/events").rsplit('/').next().unwrap_or_default().to_string();
        return tail(system, query_id);
    }
    to_response(response)
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

/// Stream the event log as server-sent events, tailing it until the `final` event.
fn tail(system: Arc<Deps>, query_id: String) -> Response {
    let stream = futures::stream::unfold(
        (system, query_id, HashSet::<String>::new(), false),
        |(system, id, mut seen, done)| async move {
            if done {
                return None;
            }
            loop {
                let events = system.store.list_events(&id).await.unwrap_or_default();
                let fresh: Vec<_> = events.into_iter().filter(|e| !seen.contains(&e.key)).collect();
                if !fresh.is_empty() {
                    let finished = fresh.iter().any(|e| e.kind == EventKind::Final);
                    let text: String = fresh.iter().map(sse_frame).collect();
                    seen.extend(fresh.into_iter().map(|e| e.key));
                    return Some((Ok::<_, std::io::Error>(text), (system, id, seen, finished)));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        },
    );
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert("content-type", HeaderValue::from_static("text/event-stream"));
    r.headers_mut().insert("cache-control", HeaderValue::from_static("no-cache"));
    r
}
