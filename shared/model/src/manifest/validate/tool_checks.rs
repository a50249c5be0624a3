//! Checks of `tools:` and of the `llm.tools` that name them. An MCP server's tool list is
//! read when it is first used, not here: a tool name under an MCP source is checked for its
//! form only, and `switchyard tools list` shows what the server offers. `${VAR}` references
//! are checked for their form; whether the variable is set is reported when the tool is used.

use super::{suggest, Check};
use crate::manifest::{env_references, ToolSource};
use serde_json::Value;

/// Longest tool source id (it is part of every tool's provider name, which OpenAI caps at 64).
const MAX_SOURCE_ID_CHARS: usize = 32;
/// Longest `max_tool_calls`.
const MAX_TOOL_CALLS: u32 = 64;
/// Largest `max_result_bytes` (a result travels in the model's context and in a record).
const MAX_RESULT_BYTES: usize = 256 * 1024;
/// HTTP methods an HTTP tool may use.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

fn is_tool_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The `{param}` names of an HTTP tool's URL.
pub(crate) fn url_params(url: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = url;
    while let Some(open) = rest.find('{') {
        if rest[..open].ends_with('$') {
            rest = &rest[open + 1..];
            continue;
        }
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        names.push(&after[..close]);
        rest = &after[close + 1..];
    }
    names
}

impl Check<'_> {
    /// Whether `name` is a declared source id or `<mcp source>.<tool>`.
    pub(super) fn names_a_tool(&self, name: &str) -> bool {
        match name.split_once('.') {
            Some((source, tool)) => self.m.tool_source(source).is_some_and(|s| s.mcp.is_some()) && is_tool_name(tool),
            None => self.m.tool_source(name).is_some(),
        }
    }

    /// `tools:` and every agent's `llm.tools`.
    pub(super) fn tools(&mut self) {
        self.unique("tools", "id", "tool source id", self.m.tools.iter().map(|t| t.id.clone()));
        for (i, source) in self.m.tools.iter().enumerate() {
            self.tool_source(i, source);
        }
        for (i, agent) in self.m.agents.iter().enumerate() {
            let Some(llm) = &agent.llm else { continue };
            for (j, name) in llm.tools.iter().enumerate() {
                if !self.names_a_tool(name) {
                    let head = name.split('.').next().unwrap_or(name);
                    let hint = suggest::did_you_mean(head, self.m.tools.iter().map(|t| t.id.as_str()));
                    self.report(
                        format!("agents[{i}].llm.tools[{j}]"),
                        format!(
                            "`{name}` is not a declared tool{hint}: name a source in `tools` (`orders`) or one tool of an MCP source (`orders.lookup`)"
                        ),
                    );
                }
            }
            if let Some(n) = llm.max_tool_calls {
                if n == 0 || n > MAX_TOOL_CALLS {
                    self.report(
                        format!("agents[{i}].llm.max_tool_calls"),
                        format!("max_tool_calls {n} is outside 1 – {MAX_TOOL_CALLS}"),
                    );
                }
                if llm.tools.is_empty() {
                    self.report(
                        format!("agents[{i}].llm.max_tool_calls"),
                        "max_tool_calls is set but `tools` is empty; name the tools the agent may call",
                    );
                }
            }
        }
    }

    fn tool_source(&mut self, i: usize, s: &ToolSource) {
        let at = |f: &str| format!("tools[{i}].{f}");
        let id_ok = s.id.len() <= MAX_SOURCE_ID_CHARS
            && s.id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && s.id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !id_ok {
            self.report(
                at("id"),
                format!(
                    "tool source id `{}` must match ^[a-z][a-z0-9_]{{0,31}}$ (it is part of every tool's name)",
                    s.id
                ),
            );
        }
        match (&s.mcp, &s.http) {
            (Some(_), Some(_)) | (None, None) => {
                self.report(
                    format!("tools[{i}]"),
                    "set exactly one of `mcp` (an MCP server) and `http` (one endpoint)",
                );
            }
            (Some(mcp), None) => {
                self.url(at("mcp.url"), &mcp.url);
                for (name, value) in &mcp.headers {
                    self.env_form(format!("tools[{i}].mcp.headers.{name}"), value);
                }
                if s.parameters.is_some() {
                    self.report(
                        at("parameters"),
                        "an MCP server states its tools' schemas; `parameters` is for `http` tools",
                    );
                }
                for name in s.effects.keys() {
                    if !is_tool_name(name) {
                        self.report(
                            format!("tools[{i}].effects.{name}"),
                            "a tool name is 1 – 64 letters, digits, `_` or `-`",
                        );
                    }
                }
            }
            (None, Some(http)) => {
                self.url(at("http.url"), &http.url);
                if !METHODS.contains(&http.method.as_str()) {
                    self.report(
                        at("http.method"),
                        format!("method `{}` is not one of {}", http.method, METHODS.join(", ")),
                    );
                }
                for (name, value) in &http.headers {
                    self.env_form(format!("tools[{i}].http.headers.{name}"), value);
                }
                let properties = s.parameters.as_ref().and_then(|p| p.get("properties")).and_then(Value::as_object);
                match &s.parameters {
                    Some(p) if p.get("type").and_then(Value::as_str) == Some("object") => {}
                    Some(_) => self.report(at("parameters"), "the arguments' schema must be `type: object`"),
                    None => {}
                }
                for param in url_params(&http.url) {
                    if !properties.is_some_and(|p| p.contains_key(param)) {
                        self.report(
                            at("http.url"),
                            format!("`{{{param}}}` in the URL is not a property of `parameters`; declare it"),
                        );
                    }
                }
                for name in s.effects.keys() {
                    if name != &s.id {
                        self.report(
                            format!("tools[{i}].effects.{name}"),
                            format!("an HTTP source is one tool named `{}`; key its effect by that id", s.id),
                        );
                    }
                }
            }
        }
        if s.timeout.is_some_and(|t| t.as_millis() == 0) {
            self.report(at("timeout"), "timeout must be longer than 0ms");
        }
        if s.max_result_bytes.is_some_and(|n| n == 0 || n > MAX_RESULT_BYTES) {
            self.report(at("max_result_bytes"), format!("max_result_bytes must be 1 – {MAX_RESULT_BYTES}"));
        }
        if let Some(approval) = &s.approval {
            if approval.tools.is_empty() {
                self.report(at("approval.tools"), "name the tools whose calls wait for a person");
            }
            for (j, name) in approval.tools.iter().enumerate() {
                let declared = if s.http.is_some() { name == &s.id } else { is_tool_name(name) };
                if !declared {
                    self.report(
                        format!("tools[{i}].approval.tools[{j}]"),
                        format!("`{name}` is not a tool of source `{}`", s.id),
                    );
                }
            }
            if approval.role.trim().is_empty() {
                self.report(at("approval.role"), "name the role a person needs to decide");
            }
            if approval.timeout.as_millis() == 0 {
                self.report(at("approval.timeout"), "timeout must be longer than 0ms");
            }
        }
    }

    fn url(&mut self, path: String, url: &str) {
        if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${")) {
            self.report(path.clone(), format!("`{url}` is not an http:// or https:// URL"));
        }
        self.env_form(path, url);
    }

    fn env_form(&mut self, path: String, value: &str) {
        if let Err(at) = env_references(value) {
            self.report(
                path,
                format!("`${{` at offset {at} is not a reference: write `${{NAME}}` with letters, digits and `_`"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::manifest::Manifest;

    const BASE: &str = r#"
version: 1
name: t
tiers: [{tier: 1, timeout: 5s, max_retries: 0, fallback: none}]
providers: [{id: m, kind: scripted, responses: {answer: [{reply: {response: ok}}]}}]
intents: [{id: ask, description: d, route: {primary: support}, utterances: [hello there]}]
"#;

    fn problems(extra: &str) -> Vec<String> {
        let yaml = format!("{BASE}{extra}");
        match Manifest::from_yaml(&yaml, "t.yaml") {
            Ok(_) => vec![],
            Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    const AGENT: &str = "agents: [{id: support, tier: 1, kind: llm, llm: {provider: m, system: s, output_schema: {name: answer}, tools: [orders, weather], max_tool_calls: 6}}]\n";

    #[test]
    fn the_issues_shape_of_tools_loads() {
        let tools = r#"
tools:
  - id: orders
    mcp: {url: "http://127.0.0.1:8931/mcp", headers: {Authorization: "Bearer ${ORDERS_TOKEN}"}}
    timeout: 5s
    effects: {issue_refund: write}
    approval: {tools: [issue_refund], role: approver, timeout: 1h}
  - id: weather
    http: {method: GET, url: "https://example.test/forecast?city={city}"}
    description: The forecast for a city.
    parameters: {type: object, required: [city], properties: {city: {type: string}}}
"#;
        assert_eq!(problems(&format!("{AGENT}{tools}")), Vec::<String>::new());
    }

    #[test]
    fn unknown_tools_and_bad_sources_are_reported_with_their_paths() {
        let tools = r#"
tools:
  - id: orders
    mcp: {url: "ftp://x", headers: {Authorization: "Bearer ${ORDERS"}}
    approval: {tools: ["bad name"], role: "", timeout: 0ms}
  - id: wether
    http: {method: FETCH, url: "https://x/{town}"}
    parameters: {type: object, properties: {city: {type: string}}}
    effects: {other: write}
"#;
        let found = problems(&format!("{AGENT}{tools}"));
        for expected in [
            "agents[0].llm.tools[1]: `weather` is not a declared tool (did you mean `wether`?)",
            "tools[0].mcp.url: `ftp://x` is not an http:// or https:// URL",
            "tools[0].mcp.headers.Authorization: `${` at offset 7",
            "tools[0].approval.tools[0]: `bad name` is not a tool of source `orders`",
            "tools[0].approval.role",
            "tools[0].approval.timeout",
            "tools[1].http.method: method `FETCH`",
            "tools[1].http.url: `{town}` in the URL is not a property",
            "tools[1].effects.other: an HTTP source is one tool named `wether`",
        ] {
            assert!(found.iter().any(|p| p.starts_with(expected)), "missing `{expected}` in {found:#?}");
        }
    }

    #[test]
    fn an_unset_environment_variable_is_not_a_validation_problem() {
        let tools = "tools: [{id: orders, mcp: {url: \"http://h/mcp\", headers: {A: \"${SURELY_UNSET_VARIABLE_54}\"}}}, {id: weather, http: {url: \"http://h\"}}]\n";
        assert_eq!(problems(&format!("{AGENT}{tools}")), Vec::<String>::new());
    }
}
