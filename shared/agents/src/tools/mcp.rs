//! A client of one MCP server over the Streamable HTTP transport.
//!
//! Every message is a `POST` of one JSON-RPC message to the server's endpoint, accepting
//! `application/json` and `text/event-stream`; the answer is a JSON body or a server-sent
//! event stream whose event carrying the request's id is the answer (other messages on the
//! stream, notifications and pings, are skipped). The session starts with `initialize`; the
//! server's `Mcp-Session-Id`, when it sends one, goes on every later request with the
//! negotiated `MCP-Protocol-Version`, after an `notifications/initialized`. A 404 on a
//! request that carried a session id means the session expired: the client initializes again
//! and sends the request once more. The tool list is read on first use and kept for the
//! process.

use super::ToolError;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use switchyard_engine::http_client::{HttpClient, HttpResponse};
use tokio::sync::Mutex;

/// The protocol revision asked for; the server's answer decides the one used.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// Pages of `tools/list` read at most (a server that never stops paging is an error).
const MAX_LIST_PAGES: usize = 32;

/// One tool an MCP server offers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// Its name on the server.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its arguments' JSON Schema.
    pub input_schema: Value,
}

/// A tool call's answer: its text and whether the server flagged it an error.
#[derive(Debug, Clone, PartialEq)]
pub struct McpResult {
    /// The content's text parts joined (other parts described; structured content as JSON
    /// when there is no text).
    pub text: String,
    /// `isError` of the result.
    pub is_error: bool,
}

#[derive(Debug, Clone, Default)]
struct Session {
    id: Option<String>,
    protocol: String,
}

/// A client of one server, shared by every call of the process.
pub struct McpClient {
    http: HttpClient,
    url: String,
    headers: Vec<(String, String)>,
    timeout: Duration,
    session: Mutex<Option<Session>>,
    tools: Mutex<Option<std::sync::Arc<Vec<McpTool>>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Headers may carry secrets: never printed.
        f.debug_struct("McpClient").field("url", &self.url).finish_non_exhaustive()
    }
}

impl McpClient {
    /// A client of the server at `url` (environment references already read), sending
    /// `headers` with every request, each exchange within `timeout`.
    pub fn new(http: HttpClient, url: String, headers: Vec<(String, String)>, timeout: Duration) -> McpClient {
        McpClient {
            http,
            url,
            headers,
            timeout,
            session: Mutex::new(None),
            tools: Mutex::new(None),
            next_id: AtomicU64::new(1),
        }
    }

    /// The server's tools, read on the first call and kept (a failed read is not kept).
    pub async fn tools(&self) -> Result<std::sync::Arc<Vec<McpTool>>, ToolError> {
        let mut cached = self.tools.lock().await;
        if let Some(tools) = cached.as_ref() {
            return Ok(tools.clone());
        }
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let result = self.rpc("tools/list", params, self.timeout).await?;
            let listed = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| ToolError::Protocol("tools/list answered without `tools`".into()))?;
            for t in listed {
                let Some(name) = t.get("name").and_then(Value::as_str) else {
                    return Err(ToolError::Protocol("a listed tool has no name".into()));
                };
                tools.push(McpTool {
                    name: name.to_string(),
                    description: t.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                    input_schema: t.get("inputSchema").cloned().unwrap_or_else(|| json!({ "type": "object" })),
                });
            }
            cursor = result.get("nextCursor").and_then(Value::as_str).map(str::to_string);
            if cursor.is_none() {
                let tools = std::sync::Arc::new(tools);
                *cached = Some(tools.clone());
                return Ok(tools);
            }
        }
        Err(ToolError::Protocol(format!("tools/list kept paging past {MAX_LIST_PAGES} pages")))
    }

    /// Call tool `name` with `arguments`; `key` goes in the request's `_meta` as
    /// `idempotency_key`, so the server can recognise a repeat.
    pub async fn call(
        &self,
        name: &str,
        arguments: &Value,
        key: Option<&str>,
        timeout: Duration,
    ) -> Result<McpResult, ToolError> {
        let mut params = json!({ "name": name, "arguments": arguments });
        if let Some(key) = key {
            params["_meta"] = json!({ "idempotency_key": key });
        }
        let result = self.rpc("tools/call", params, timeout).await?;
        Ok(read_result(&result))
    }

    /// One request in the session (started first when there is none); a 404 for a session
    /// the server forgot starts a new one and sends the request once more.
    async fn rpc(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, ToolError> {
        for fresh in [false, true] {
            let session = self.session(fresh, timeout).await?;
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
            let response = self.post(&message, Some(&session), id, timeout).await?;
            if response.status == 404 && session.id.is_some() && !fresh {
                tracing::info!(url = %self.url, "the MCP session expired; initializing again");
                continue;
            }
            return answer_of(&response, id);
        }
        Err(ToolError::Protocol("the server forgot a session it had just started".into()))
    }

    /// The current session, or a new one (`fresh`: the current one expired).
    async fn session(&self, fresh: bool, timeout: Duration) -> Result<Session, ToolError> {
        let mut current = self.session.lock().await;
        if let (Some(s), false) = (current.as_ref(), fresh) {
            return Ok(s.clone());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let init = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": { "name": "switchyard", "version": env!("CARGO_PKG_VERSION") },
            },
        });
        let response = self.post(&init, None, id, timeout).await?;
        let result = answer_of(&response, id)?;
        let session = Session {
            id: response.header("mcp-session-id").map(str::to_string),
            protocol: result.get("protocolVersion").and_then(Value::as_str).unwrap_or(PROTOCOL_VERSION).to_string(),
        };
        let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let ack = self.post(&initialized, Some(&session), 0, timeout).await?;
        if !(200..300).contains(&ack.status) {
            return Err(ToolError::Status(ack.status));
        }
        *current = Some(session.clone());
        Ok(session)
    }

    async fn post(
        &self,
        message: &Value,
        session: Option<&Session>,
        id: u64,
        timeout: Duration,
    ) -> Result<HttpResponse, ToolError> {
        let mut headers = self.headers.clone();
        headers.push(("content-type".into(), "application/json".into()));
        headers.push(("accept".into(), "application/json, text/event-stream".into()));
        if let Some(s) = session {
            headers.push(("mcp-protocol-version".into(), s.protocol.clone()));
            if let Some(id) = &s.id {
                headers.push(("mcp-session-id".into(), id.clone()));
            }
        }
        let body = serde_json::to_vec(message).map_err(|e| ToolError::Protocol(e.to_string()))?;
        // An event stream is read until the event that answers `id` (the server may keep
        // the stream open after it).
        let enough = move |bytes: &[u8]| sse_answer(bytes, id).is_some();
        self.http.request("POST", &self.url, &headers, Some(body), timeout, &enough).await.map_err(ToolError::from)
    }
}

/// The JSON-RPC result answering `id` in a response (JSON or an event stream).
fn answer_of(response: &HttpResponse, id: u64) -> Result<Value, ToolError> {
    if !(200..300).contains(&response.status) {
        return Err(ToolError::Status(response.status));
    }
    let is_sse = response.header("content-type").is_some_and(|c| c.starts_with("text/event-stream"));
    let message = if is_sse {
        sse_answer(&response.body, id)
            .ok_or_else(|| ToolError::Protocol("the event stream ended without an answer".into()))?
    } else {
        serde_json::from_slice::<Value>(&response.body)
            .map_err(|e| ToolError::Protocol(format!("the answer is not JSON: {e}")))?
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(ToolError::Protocol("the answer is not a JSON-RPC 2.0 message".into()));
    }
    if message.get("id").and_then(Value::as_u64) != Some(id) {
        return Err(ToolError::Protocol(format!("the answer does not carry the request's id {id}")));
    }
    if let Some(error) = message.get("error") {
        return Err(ToolError::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error.get("message").and_then(Value::as_str).unwrap_or("error").chars().take(500).collect(),
        });
    }
    message.get("result").cloned().ok_or_else(|| ToolError::Protocol("the answer has neither result nor error".into()))
}

/// The message of an event stream that answers `id`, once its event is complete.
fn sse_answer(bytes: &[u8], id: u64) -> Option<Value> {
    let text = std::str::from_utf8(bytes).ok()?;
    let text = text.replace("\r\n", "\n");
    let mut events = text.split("\n\n").collect::<Vec<_>>();
    // The last piece may be an event still arriving.
    if !text.ends_with("\n\n") {
        events.pop();
    }
    for event in events {
        let data: Vec<&str> =
            event.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        if data.is_empty() {
            continue;
        }
        if let Ok(message) = serde_json::from_str::<Value>(&data.join("\n")) {
            let answers = message.get("id").and_then(Value::as_u64) == Some(id)
                && (message.get("result").is_some() || message.get("error").is_some());
            if answers {
                return Some(message);
            }
        }
    }
    None
}

/// A `tools/call` result as text.
fn read_result(result: &Value) -> McpResult {
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let mut parts = Vec::new();
    for block in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => parts.push(block.get("text").and_then(Value::as_str).unwrap_or_default().to_string()),
            Some("resource") => {
                let text = block.pointer("/resource/text").and_then(Value::as_str);
                parts.push(text.map_or_else(|| "[a resource]".to_string(), str::to_string));
            }
            Some(other) => parts.push(format!("[{other} content]")),
            None => {}
        }
    }
    if parts.is_empty() {
        if let Some(structured) = result.get("structuredContent") {
            parts.push(structured.to_string());
        }
    }
    McpResult { text: parts.join("\n"), is_error }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stream_answers_with_the_event_carrying_the_requests_id() {
        let stream = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"ok\":true}}\n\n";
        assert_eq!(sse_answer(stream, 7), Some(json!({"jsonrpc": "2.0", "id": 7, "result": {"ok": true}})));
        assert_eq!(sse_answer(stream, 8), None);
        let unfinished = b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}";
        assert_eq!(sse_answer(unfinished, 7), None, "an event is complete at its blank line");
    }

    #[test]
    fn malformed_json_rpc_is_a_protocol_error_and_an_error_object_an_rpc_error() {
        let reply = |body: &str| HttpResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: bytes::Bytes::from(body.to_string()),
        };
        assert!(matches!(answer_of(&reply("{not json"), 1), Err(ToolError::Protocol(_))));
        assert!(matches!(answer_of(&reply(r#"{"id":1,"result":{}}"#), 1), Err(ToolError::Protocol(_))));
        assert!(matches!(answer_of(&reply(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#), 1), Err(ToolError::Protocol(_))));
        assert!(matches!(
            answer_of(&reply(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}"#), 1),
            Err(ToolError::Rpc { code: -32602, .. })
        ));
    }

    #[test]
    fn call_results_read_their_text_and_error_flag() {
        let r = read_result(&json!({"content": [{"type": "text", "text": "a"}, {"type": "image"}], "isError": true}));
        assert_eq!(r, McpResult { text: "a\n[image content]".into(), is_error: true });
        let r = read_result(&json!({"content": [], "structuredContent": {"n": 1}}));
        assert_eq!(r.text, r#"{"n":1}"#);
    }
}
