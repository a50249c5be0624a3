//! Tools `llm` agents call: the manifest's `tools:` sources, built once per process, and the
//! loop that runs a model's calls ([`run`]).
//!
//! # Layout
//! - [`mcp`]: a client of one MCP server (Streamable HTTP), its tool list cached per process;
//! - this module: [`ToolBox`], every source of the manifest, which lists an agent's tools
//!   ([`ToolSpec`]) and makes one call (MCP `tools/call`, the HTTP tool's request, or a
//!   [`ToolServer`] in the process);
//! - [`run`]: the tool loop of one attempt — calls checked, made in parallel, recorded once
//!   when they write, logged, and their results handed back to the model.
//!
//! `${VAR}` in a URL or header is read from the environment when the source is first used;
//! an unset variable is that call's error. Header values never reach a log, an event or a
//! result.

pub mod mcp;
pub mod run;

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::http_client::{HttpClient, HttpError};
use switchyard_model::manifest::{expand_env, provider_name, ApprovalSettings, Effect, Manifest, ToolSource};
use tokio::sync::OnceCell;

/// Why a tool call (or reading a tool list) failed. The text is safe to hand to a model and
/// to log: it never carries a header value.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The source cannot be used as configured (an unset environment variable).
    #[error("not configured: {0}")]
    Config(String),
    /// No answer within the timeout.
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// The server could not be reached or the exchange broke.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// The server answered with an HTTP error status.
    #[error("the server answered HTTP {0}")]
    Status(u16),
    /// The answer is not the protocol's shape (malformed JSON-RPC).
    #[error("malformed answer: {0}")]
    Protocol(String),
    /// The server answered with a JSON-RPC error.
    #[error("the server answered error {code}: {message}")]
    Rpc {
        /// JSON-RPC error code.
        code: i64,
        /// Its message (cut to 500 characters).
        message: String,
    },
}

impl From<HttpError> for ToolError {
    fn from(e: HttpError) -> ToolError {
        match e {
            HttpError::Timeout(ms) => ToolError::Timeout(ms),
            HttpError::Invalid(m) => ToolError::Config(m),
            HttpError::Transport { message, .. } => ToolError::Unreachable(message),
        }
    }
}

/// One tool as an agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The manifest's name (`orders.issue_refund`, `weather`): events and logs use it.
    pub name: String,
    /// The name the provider sees (`orders__issue_refund`).
    pub provider_name: String,
    /// The source's id.
    pub source: String,
    /// The tool's name within its source (an HTTP tool: the source id).
    pub tool: String,
    /// What it does.
    pub description: String,
    /// Its arguments' JSON Schema.
    pub parameters: Value,
    /// Whether it changes the world.
    pub effect: Effect,
    /// Whether its calls wait for a person.
    pub needs_approval: bool,
    /// Who decides, and how long a call waits (set when `needs_approval`).
    pub approval: Option<ApprovalSettings>,
    /// Each call's timeout.
    pub timeout: Duration,
    /// Largest result handed to the model.
    pub result_limit: usize,
    /// Argument fields never shown in events.
    pub sensitive: Vec<String>,
    /// The role a caller needs.
    pub required_role: Option<String>,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The result text.
    pub text: String,
    /// Whether the tool reported an error.
    pub is_error: bool,
}

/// A tool source served in the process instead of over the network: the manifest's source
/// (its effects, approvals, timeouts) with tools listed and called without a socket. The
/// simulation serves its tools this way, so they run on its virtual clock.
#[async_trait::async_trait]
pub trait ToolServer: Send + Sync {
    /// The tools offered, as an MCP server lists them.
    async fn tools(&self) -> Result<Vec<mcp::McpTool>, ToolError>;

    /// Make one call of `tool` with `arguments`; `key` is the call's idempotency key.
    async fn call(&self, tool: &str, arguments: &Value, key: Option<&str>) -> Result<ToolOutput, ToolError>;
}

#[derive(Clone)]
enum Built {
    /// An MCP server: its client, made on first use (the URL and headers read then).
    Mcp(Box<ToolSource>, OnceCell<Result<Arc<mcp::McpClient>, String>>),
    /// An HTTP tool.
    Http(Box<ToolSource>),
    /// A source served in the process.
    Served(Box<ToolSource>, Arc<dyn ToolServer>),
}

/// Every tool source of a manifest, built once per process and shared by its agents.
#[derive(Clone)]
pub struct ToolBox {
    sources: Arc<BTreeMap<String, Built>>,
    http: HttpClient,
    env: Arc<dyn Fn(&str) -> Option<String> + Send + Sync>,
}

impl std::fmt::Debug for ToolBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolBox").field("sources", &self.sources.keys().collect::<Vec<_>>()).finish()
    }
}

impl ToolBox {
    /// The sources of `manifest`; nothing is connected until a tool is first used.
    pub fn new(manifest: &Manifest, http: &HttpClient) -> ToolBox {
        ToolBox::with_env(manifest, http, Arc::new(|name: &str| std::env::var(name).ok()))
    }

    /// The same, reading `${VAR}` through `env` (tests).
    pub fn with_env(
        manifest: &Manifest,
        http: &HttpClient,
        env: Arc<dyn Fn(&str) -> Option<String> + Send + Sync>,
    ) -> ToolBox {
        let sources = manifest
            .tools
            .iter()
            .map(|s| {
                let built = if s.mcp.is_some() {
                    Built::Mcp(Box::new(s.clone()), OnceCell::new())
                } else {
                    Built::Http(Box::new(s.clone()))
                };
                (s.id.clone(), built)
            })
            .collect();
        ToolBox { sources: Arc::new(sources), http: http.clone(), env }
    }

    /// The same sources, the declared source `id` served by `server` in the process instead
    /// of its MCP server or HTTP endpoint (an undeclared id changes nothing).
    pub fn with_server(mut self, id: &str, server: Arc<dyn ToolServer>) -> ToolBox {
        let sources = Arc::make_mut(&mut self.sources);
        if let Some(source) = sources.get(id).map(Built::source).cloned() {
            sources.insert(id.to_string(), Built::Served(Box::new(source), server));
        }
        self
    }

    fn expand(&self, source: &str, text: &str) -> Result<String, ToolError> {
        expand_env(text, |n| (self.env)(n).filter(|v| !v.is_empty())).map_err(|name| {
            ToolError::Config(format!("tool source `{source}`: environment variable `{name}` is not set"))
        })
    }

    fn expand_headers(
        &self,
        source: &str,
        headers: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, String)>, ToolError> {
        headers.iter().map(|(k, v)| Ok((k.to_lowercase(), self.expand(source, v)?))).collect()
    }

    async fn mcp_client(
        &self,
        source: &ToolSource,
        cell: &OnceCell<Result<Arc<mcp::McpClient>, String>>,
    ) -> Result<Arc<mcp::McpClient>, ToolError> {
        let built = cell
            .get_or_init(|| async {
                let Some(settings) = &source.mcp else { return Err("not an MCP source".to_string()) };
                let url = self.expand(&source.id, &settings.url).map_err(|e| e.to_string())?;
                let headers = self.expand_headers(&source.id, &settings.headers).map_err(|e| e.to_string())?;
                Ok(Arc::new(mcp::McpClient::new(self.http.clone(), url, headers, source.call_timeout().as_std())))
            })
            .await;
        match built {
            Ok(client) => Ok(client.clone()),
            Err(why) => Err(ToolError::Config(why.clone())),
        }
    }

    /// The tools named by an agent's `llm.tools` (source ids or single tools), and the
    /// problems met reading them (a server down: its tools are left out).
    pub async fn specs(&self, names: &[String]) -> (Vec<ToolSpec>, Vec<String>) {
        let mut specs: Vec<ToolSpec> = Vec::new();
        let mut problems = Vec::new();
        for name in names {
            let (source_id, only) = match name.split_once('.') {
                Some((s, t)) => (s, Some(t)),
                None => (name.as_str(), None),
            };
            let Some(built) = self.sources.get(source_id) else {
                problems.push(format!("tool source `{source_id}` is not declared"));
                continue;
            };
            let source = built.source();
            let listed = match built {
                Built::Http(_) => {
                    specs.push(spec(source, &source.id, &source.description, source.parameters.clone()));
                    continue;
                }
                Built::Mcp(_, cell) => match self.mcp_client(source, cell).await {
                    Ok(client) => client.tools().await,
                    Err(e) => Err(e),
                },
                Built::Served(_, server) => server.tools().await.map(Arc::new),
            };
            match listed {
                Ok(tools) => {
                    let mut found = false;
                    for t in tools.iter().filter(|t| only.is_none_or(|o| o == t.name)) {
                        found = true;
                        specs.push(spec(source, &t.name, &t.description, Some(t.input_schema.clone())));
                    }
                    if let (Some(o), false) = (only, found) {
                        problems.push(format!("MCP source `{source_id}` offers no tool `{o}`"));
                    }
                }
                Err(e) => problems.push(format!("MCP source `{source_id}`: {e}")),
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        specs.retain(|s| seen.insert(s.name.clone()));
        (specs, problems)
    }

    /// Make one call of `spec` with `arguments` (already checked against its schema), within
    /// `timeout`; `key` is sent as the call's idempotency key.
    pub async fn call(
        &self,
        spec: &ToolSpec,
        arguments: &Value,
        key: Option<&str>,
        timeout: Duration,
    ) -> Result<ToolOutput, ToolError> {
        let Some(built) = self.sources.get(&spec.source) else {
            return Err(ToolError::Config(format!("tool source `{}` is not declared", spec.source)));
        };
        let call = async {
            match built {
                Built::Mcp(source, cell) => {
                    let client = self.mcp_client(source, cell).await?;
                    let r = client.call(&spec.tool, arguments, key, timeout).await?;
                    Ok(ToolOutput { text: r.text, is_error: r.is_error })
                }
                Built::Http(source) => self.http_call(source, arguments, key, timeout).await,
                Built::Served(_, server) => server.call(&spec.tool, arguments, key).await,
            }
        };
        tokio::time::timeout(timeout, call).await.map_err(|_| ToolError::Timeout(timeout.as_millis() as u64))?
    }

    async fn http_call(
        &self,
        source: &ToolSource,
        arguments: &Value,
        key: Option<&str>,
        timeout: Duration,
    ) -> Result<ToolOutput, ToolError> {
        let Some(settings) = &source.http else { return Err(ToolError::Config("not an HTTP source".into())) };
        let template = self.expand(&source.id, &settings.url)?;
        let args = arguments.as_object().cloned().unwrap_or_default();
        let (url, rest) = fill_url(&template, &args);
        let mut headers = self.expand_headers(&source.id, &settings.headers)?;
        headers.push(("accept".into(), "application/json, text/plain;q=0.9, */*;q=0.5".into()));
        if let Some(key) = key {
            headers.push(("idempotency-key".into(), key.to_string()));
        }
        let method = settings.method.as_str();
        let (url, body) = if matches!(method, "GET" | "DELETE") {
            (with_query(&url, &rest), None)
        } else {
            headers.push(("content-type".into(), "application/json".into()));
            (url, Some(Value::Object(rest).to_string().into_bytes()))
        };
        let response = self.http.request(method, &url, &headers, body, timeout, &|_| false).await?;
        let text = String::from_utf8_lossy(&response.body).into_owned();
        if (200..300).contains(&response.status) {
            Ok(ToolOutput { text, is_error: false })
        } else {
            let shown: String = text.chars().take(500).collect();
            Ok(ToolOutput { text: format!("HTTP {}: {shown}", response.status), is_error: true })
        }
    }

    /// Every tool of every source, or why a source's list could not be read (the CLI's
    /// `tools list`).
    pub async fn list_all(&self) -> Vec<(String, Result<Vec<ToolSpec>, String>)> {
        let mut out = Vec::new();
        for id in self.sources.keys() {
            let (specs, problems) = self.specs(std::slice::from_ref(id)).await;
            out.push((id.clone(), if problems.is_empty() { Ok(specs) } else { Err(problems.join("; ")) }));
        }
        out
    }
}

impl Built {
    fn source(&self) -> &ToolSource {
        match self {
            Built::Mcp(source, _) | Built::Http(source) | Built::Served(source, _) => source,
        }
    }
}

fn spec(source: &ToolSource, tool: &str, description: &str, parameters: Option<Value>) -> ToolSpec {
    let name = source.tool_name(tool);
    ToolSpec {
        provider_name: provider_name(&name),
        name,
        source: source.id.clone(),
        tool: tool.to_string(),
        description: description.to_string(),
        parameters: parameters.unwrap_or_else(|| serde_json::json!({ "type": "object" })),
        effect: source.effect(tool),
        needs_approval: source.needs_approval(tool),
        approval: source.approval.clone().filter(|_| source.needs_approval(tool)),
        timeout: source.call_timeout().as_std(),
        result_limit: source.result_limit(),
        sensitive: source.sensitive.clone(),
        required_role: source.required_role.clone(),
    }
}

/// `template` with each `{param}` filled from `args` (URL-encoded), and the arguments not used.
fn fill_url(template: &str, args: &Map<String, Value>) -> (String, Map<String, Value>) {
    let mut rest = args.clone();
    let mut out = String::with_capacity(template.len());
    let mut tail = template;
    while let Some(open) = tail.find('{') {
        let after = &tail[open + 1..];
        let Some(close) = after.find('}') else { break };
        let name = &after[..close];
        out.push_str(&tail[..open]);
        match rest.remove(name) {
            Some(Value::String(s)) => out.push_str(&encode(&s)),
            Some(other) => out.push_str(&encode(&other.to_string())),
            None => {}
        }
        tail = &after[close + 1..];
    }
    out.push_str(tail);
    (out, rest)
}

/// `url` with `args` appended as query parameters.
fn with_query(url: &str, args: &Map<String, Value>) -> String {
    if args.is_empty() {
        return url.to_string();
    }
    let pairs: Vec<String> = args
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{}={}", encode(k), encode(&v))
        })
        .collect();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{}", pairs.join("&"))
}

/// Percent-encoding of everything but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn url_parameters_are_filled_encoded_and_the_rest_kept_for_the_query_or_body() {
        let args = json!({"city": "São Paulo", "days": 3}).as_object().cloned().unwrap_or_default();
        let (url, rest) = fill_url("https://h/forecast/{city}", &args);
        assert_eq!(url, "https://h/forecast/S%C3%A3o%20Paulo");
        assert_eq!(with_query(&url, &rest), "https://h/forecast/S%C3%A3o%20Paulo?days=3");
        assert_eq!(with_query("https://h/x?a=1", &rest), "https://h/x?a=1&days=3");
    }
}
