//! A small MCP server over Streamable HTTP on 127.0.0.1:0, for the tool tests: sessions
//! (`Mcp-Session-Id`), `initialize`, `tools/list`, `tools/call`, answers as JSON or as an
//! event stream, and the faults the tests ask for (a session it forgets, malformed JSON-RPC,
//! a slow tool, a huge result, a tool error). It counts every call by tool and keeps the
//! calls' arguments, `_meta` and `Authorization` headers.
#![allow(dead_code)]

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server misbehaves.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Answer requests as `text/event-stream` (a notification first, then the answer).
    pub sse: bool,
    /// Forget every session after this many requests in it (answer 404 to the next one).
    pub forget_sessions_after: Option<usize>,
    /// Answer `tools/call` with a body that is not JSON-RPC.
    pub malformed_calls: bool,
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// `(tool, arguments, _meta)` of every call, in order.
    pub calls: Vec<(String, Value, Value)>,
    /// `initialize` requests.
    pub initializations: usize,
    /// `Authorization` headers received.
    pub authorizations: Vec<String>,
    /// Requests answered 404 for a forgotten session.
    pub expired: usize,
    sessions: std::collections::BTreeMap<String, usize>,
    next_session: usize,
}

impl Seen {
    /// Calls of `tool`.
    pub fn count(&self, tool: &str) -> usize {
        self.calls.iter().filter(|(t, ..)| t == tool).count()
    }
}

#[derive(Clone)]
struct Server {
    faults: Faults,
    seen: Arc<Mutex<Seen>>,
}

/// Start the server; its endpoint URL and what it sees.
pub async fn start(faults: Faults) -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = axum::Router::new().route("/mcp", post(handle)).with_state(Server { faults, seen: seen.clone() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (url, seen)
}

fn tools() -> Value {
    json!([
        {"name": "lookup_order", "description": "An order's status.",
         "inputSchema": {"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}},
        {"name": "issue_refund", "description": "Refund an order.",
         "inputSchema": {"type": "object", "required": ["order_id", "amount"],
                         "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}}}},
        {"name": "slow", "description": "Answers after two seconds.", "inputSchema": {"type": "object"}},
        {"name": "huge", "description": "Answers 100 KB.", "inputSchema": {"type": "object"}},
        {"name": "broken", "description": "Always fails.", "inputSchema": {"type": "object"}}
    ])
}

async fn handle(State(server): State<Server>, headers: HeaderMap, body: String) -> Response {
    let Ok(message) = serde_json::from_str::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
    let id = message.get("id").cloned();
    let session_header = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    let session = {
        let mut seen = server.seen.lock().expect("seen");
        if let Some(a) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
            seen.authorizations.push(a.to_string());
        }
        if method == "initialize" {
            seen.initializations += 1;
            seen.next_session += 1;
            let sid = format!("session-{}", seen.next_session);
            seen.sessions.insert(sid.clone(), 0);
            sid
        } else {
            let Some(sid) = session_header else {
                return (StatusCode::BAD_REQUEST, "no session").into_response();
            };
            let limit = server.faults.forget_sessions_after;
            match seen.sessions.get_mut(&sid) {
                Some(n) if limit.is_none_or(|l| *n < l) => *n += 1,
                _ => {
                    seen.sessions.remove(&sid);
                    seen.expired += 1;
                    return (StatusCode::NOT_FOUND, "session expired").into_response();
                }
            }
            sid
        }
    };
    let Some(id) = id else {
        // A notification.
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match method.as_str() {
        "initialize" => json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "orders-test", "version": "1"}
        }),
        "tools/list" => json!({ "tools": tools() }),
        "tools/call" => {
            if server.faults.malformed_calls {
                return ([("content-type", "application/json")], r#"{"result": "no jsonrpc field"}"#).into_response();
            }
            let params = message.get("params").cloned().unwrap_or_default();
            let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let args = params.get("arguments").cloned().unwrap_or_default();
            let meta = params.get("_meta").cloned().unwrap_or_default();
            server.seen.lock().expect("seen").calls.push((name.clone(), args.clone(), meta));
            match name.as_str() {
                "lookup_order" => {
                    json!({"content": [{"type": "text", "text": format!("order {} shipped on 2026-11-30", args["order_id"].as_str().unwrap_or("?"))}]})
                }
                "issue_refund" => {
                    json!({"content": [{"type": "text", "text": format!("refund of {} for order {} issued", args["amount"], args["order_id"].as_str().unwrap_or("?"))}]})
                }
                "slow" => {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    json!({"content": [{"type": "text", "text": "late"}]})
                }
                "huge" => json!({"content": [{"type": "text", "text": "x".repeat(100_000)}]}),
                "broken" => json!({"content": [{"type": "text", "text": "the order system is down"}], "isError": true}),
                _ => {
                    let error =
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown tool"}});
                    return answer(&server.faults, &session, error);
                }
            }
        }
        _ => {
            let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}});
            return answer(&server.faults, &session, error);
        }
    };
    answer(&server.faults, &session, json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn answer(faults: &Faults, session: &str, message: Value) -> Response {
    let mut response = if faults.sse {
        let body = format!(
            "event: message\ndata: {}\n\nevent: message\ndata: {}\n\n",
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}}),
            message
        );
        ([("content-type", "text/event-stream")], body).into_response()
    } else {
        ([("content-type", "application/json")], message.to_string()).into_response()
    };
    if let Ok(v) = session.parse() {
        response.headers_mut().insert("mcp-session-id", v);
    }
    response
}
