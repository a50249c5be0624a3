//! `tools:`: what `llm` agents may call while they answer — MCP servers (Streamable HTTP) and
//! plain HTTP endpoints — with each tool's effect and which calls wait for a person.
//!
//! A source is declared once and named by agents (`llm.tools: [orders, weather]`). An MCP
//! source offers every tool its server lists, named `<source>.<tool>` in the manifest, events
//! and logs; an HTTP source is one tool named by its id. Providers see a name they accept
//! ([`provider_name`]: `orders__issue_refund`), since an OpenAI function name allows no dot.

use super::Dur;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Separator between a source id and a tool name in the name a provider sees.
pub const PROVIDER_NAME_SEPARATOR: &str = "__";

/// A tool's timeout when its source sets none.
pub const DEFAULT_TOOL_TIMEOUT: Dur = Dur::from_millis(10_000);

/// Calls an agent makes in one attempt when its `max_tool_calls` is not set.
pub const DEFAULT_MAX_TOOL_CALLS: u32 = 8;

/// Largest tool result handed back to the model, in bytes; a longer one is cut, with a marker.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 16 * 1024;

/// What a tool does to the world.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Looks something up: calling it twice is harmless (the default).
    #[default]
    Read,
    /// Changes something: recorded before it is made, so one logical call is made once.
    Write,
}

impl Effect {
    /// The name written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
        }
    }
}

/// A source of tools: an MCP server or one HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSource {
    /// Unique id (`^[a-z][a-z0-9_]*$`); MCP tools are `<id>.<tool>`, an HTTP tool is `<id>`.
    pub id: String,
    /// An MCP server over Streamable HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpSettings>,
    /// One HTTP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpToolSettings>,
    /// What the tool does, for the model (HTTP tools; MCP tools describe themselves).
    #[serde(default)]
    pub description: String,
    /// The arguments' JSON Schema (HTTP tools; MCP tools state their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Each call's timeout (it still runs inside the attempt's timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Effect per tool name (`read` when not named); an HTTP tool's name is the source id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub effects: BTreeMap<String, Effect>,
    /// Tools whose calls wait for a person's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalSettings>,
    /// The role a caller needs for the agent to use these tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_role: Option<String>,
    /// Argument fields whose values are personal or secret: a `tool_call` event shows them as
    /// `"[sensitive]"` (the argument digest still covers them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive: Vec<String>,
    /// Largest result handed to the model, in bytes (default 16 KiB); longer ones are cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_result_bytes: Option<usize>,
}

impl ToolSource {
    /// Each call's timeout.
    pub fn call_timeout(&self) -> Dur {
        self.timeout.unwrap_or(DEFAULT_TOOL_TIMEOUT)
    }

    /// The effect of tool `name` of this source.
    pub fn effect(&self, name: &str) -> Effect {
        self.effects.get(name).copied().unwrap_or_default()
    }

    /// Whether calls of tool `name` wait for a person.
    pub fn needs_approval(&self, name: &str) -> bool {
        self.approval.as_ref().is_some_and(|a| a.tools.iter().any(|t| t == name))
    }

    /// The largest result handed to the model.
    pub fn result_limit(&self) -> usize {
        self.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT_BYTES)
    }

    /// The manifest name of this source's tool `name`: `<id>.<name>` for MCP, `<id>` for HTTP.
    pub fn tool_name(&self, name: &str) -> String {
        if self.mcp.is_some() {
            format!("{}.{name}", self.id)
        } else {
            self.id.clone()
        }
    }
}

/// An MCP server reached over the Streamable HTTP transport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    /// The server's MCP endpoint (`http://…/mcp`); `${VAR}` is read from the environment.
    pub url: String,
    /// Extra request headers; `${VAR}` in a value is read from the environment when the
    /// server is first used (a secret stays out of the manifest and out of every log).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// A plain HTTP endpoint as one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpToolSettings {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    #[serde(default = "default_method")]
    pub method: String,
    /// The URL; `{param}` is filled from the call's argument of that name (URL-encoded), and
    /// `${VAR}` from the environment. Arguments not in the URL go in the JSON body (or the
    /// query string for `GET` and `DELETE`).
    pub url: String,
    /// Extra request headers; `${VAR}` is read from the environment at use.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

fn default_method() -> String {
    "GET".into()
}

/// Which tools of a source wait for a person, who decides, and for how long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSettings {
    /// Tool names of the source (an HTTP tool: its id).
    pub tools: Vec<String>,
    /// The role a person needs to decide.
    pub role: String,
    /// How long a call waits; then it is treated as rejected.
    pub timeout: Dur,
}

/// The name a provider sees for manifest tool name `name`: `orders.issue_refund` becomes
/// `orders__issue_refund` (OpenAI function names allow `[a-zA-Z0-9_-]` only).
pub fn provider_name(name: &str) -> String {
    name.replacen('.', PROVIDER_NAME_SEPARATOR, 1)
}

/// The `${VAR}` names in `text`, or the offset of an unterminated or empty `${`.
pub fn env_references(text: &str) -> Result<Vec<&str>, usize> {
    let mut names = Vec::new();
    let mut at = 0;
    while let Some(start) = text[at..].find("${") {
        let open = at + start;
        let Some(len) = text[open + 2..].find('}') else { return Err(open) };
        let name = &text[open + 2..open + 2 + len];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(open);
        }
        names.push(name);
        at = open + 2 + len + 1;
    }
    Ok(names)
}

/// `text` with each `${VAR}` replaced by `lookup(VAR)`; the first name `lookup` has no value
/// for is the error.
pub fn expand_env(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let names = env_references(text).map_err(|at| format!("`${{` at offset {at} is not closed by a name and `}}`"))?;
    let mut out = text.to_string();
    for name in names {
        let value = lookup(name).ok_or_else(|| name.to_string())?;
        out = out.replacen(&format!("${{{name}}}"), &value, 1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names_replace_the_first_dot_only() {
        assert_eq!(provider_name("orders.issue_refund"), "orders__issue_refund");
        assert_eq!(provider_name("weather"), "weather");
    }

    #[test]
    fn environment_references_are_found_and_bad_ones_located() {
        assert_eq!(env_references("Bearer ${ORDERS_TOKEN} ${X}"), Ok(vec!["ORDERS_TOKEN", "X"]));
        assert_eq!(env_references("a ${open"), Err(2));
        assert_eq!(env_references("${}"), Err(0));
        assert_eq!(env_references("$HOME {x}"), Ok(vec![]));
        let lookup = |n: &str| (n == "T").then(|| "s3cr3t".to_string());
        assert_eq!(expand_env("Bearer ${T}", lookup), Ok("Bearer s3cr3t".into()));
        assert_eq!(expand_env("Bearer ${U}", lookup), Err("U".into()));
    }
}
