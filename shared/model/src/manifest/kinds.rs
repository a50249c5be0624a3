//! Settings of the agent kinds that call out of the process — `llm`, `http`, `lambda` — and
//! the model providers `llm` agents talk to.
//!
//! A provider is declared once under `providers:` and named by each `llm` agent, so the
//! client behind it is built once per process and shared by every agent that uses it.

use super::Dur;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Which API a model provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Amazon Bedrock's Converse API (`aws-sdk-bedrockruntime`), credentials from the
    /// environment's AWS configuration.
    Bedrock,
    /// Any OpenAI-compatible `POST {base_url}/chat/completions` endpoint.
    Openai,
    /// Answers from `responses`, keyed by the output schema's name: offline, deterministic,
    /// for tests and for running the examples with no model behind them.
    Scripted,
}

impl ProviderKind {
    /// The name written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Bedrock => "bedrock",
            ProviderKind::Openai => "openai",
            ProviderKind::Scripted => "scripted",
        }
    }
}

/// A model provider `llm` agents name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// Unique id; the `provider` of `llm` agents.
    pub id: String,
    /// Which API it speaks.
    pub kind: ProviderKind,
    /// Model used when the agent names none.
    #[serde(default)]
    pub model: Option<String>,
    /// `openai`: base URL, e.g. `https://api.openai.com/v1`. Read from the environment variable
    /// `base_url_env` when that is set.
    #[serde(default)]
    pub base_url: Option<String>,
    /// `openai`: environment variable holding the base URL (overrides `base_url`).
    #[serde(default)]
    pub base_url_env: Option<String>,
    /// `openai`: environment variable holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// `openai`: how the answer's JSON shape is asked for (default `auto`).
    #[serde(default)]
    pub structured_output: StructuredOutput,
    /// `bedrock`: AWS region (default: the environment's).
    #[serde(default)]
    pub region: Option<String>,
    /// `bedrock`: endpoint override (a VPC endpoint, or a local recording server).
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// Per-request timeout of the HTTP call (the tier's timeout still bounds the attempt).
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// How often a throttled (429) request is retried inside one attempt before the attempt
    /// fails as recoverable and the tier's retry policy takes over.
    #[serde(default = "default_throttle_retries")]
    pub throttle_retries: u32,
    /// First wait after a throttled request; doubles each time (a `Retry-After` header wins).
    #[serde(default = "default_throttle_backoff")]
    pub throttle_backoff: Dur,
    /// `scripted`: replies per output-schema name, first matching rule wins.
    #[serde(default)]
    pub responses: BTreeMap<String, Vec<ScriptedModelReply>>,
    /// `scripted`: when streamed, one word of the reply every `pace` (default: no wait), so
    /// offline runs show the timing of a real model.
    #[serde(default)]
    pub pace: Option<Dur>,
}

/// How an OpenAI-compatible provider is asked for JSON of the agent's output schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// `json_schema` first; when the server refuses that form of `response_format`, the next
    /// form (`json_object`, then `prompt`) once, and the form that worked is kept for the
    /// provider's later calls in the process.
    #[default]
    Auto,
    /// `response_format: {type: json_schema, json_schema: {…}}` (constrained decoding where
    /// the server supports it).
    JsonSchema,
    /// `response_format: {type: json_object}` with the schema in the system prompt.
    JsonObject,
    /// No `response_format`: the schema in the system prompt only.
    Prompt,
}

impl StructuredOutput {
    /// The name written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            StructuredOutput::Auto => "auto",
            StructuredOutput::JsonSchema => "json_schema",
            StructuredOutput::JsonObject => "json_object",
            StructuredOutput::Prompt => "prompt",
        }
    }
}

fn default_throttle_retries() -> u32 {
    3
}

fn default_throttle_backoff() -> Dur {
    Dur::from_millis(500)
}

/// One scripted model reply: used when the prompt contains `when` (or always, without it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedModelReply {
    /// The reply applies when the rendered prompt contains this text.
    #[serde(default)]
    pub when: Option<String>,
    /// The structured answer (sent as JSON text, as a model would).
    #[serde(default)]
    pub reply: Option<Value>,
    /// Raw text to answer with instead (e.g. not JSON, to exercise malformed answers).
    #[serde(default)]
    pub text: Option<String>,
    /// Input tokens reported.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens reported.
    #[serde(default)]
    pub output_tokens: u64,
    /// Tool calls to ask for instead of answering (a reply with calls is used once per
    /// conversation: after its calls were made, the next matching reply answers). Left out of
    /// the canonical JSON while empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedToolCall>,
}

/// One tool call a scripted model asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The tool's manifest name (`orders.issue_refund`, `weather`).
    pub tool: String,
    /// Its arguments.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    serde_json::json!({})
}

/// The JSON shape an `llm` agent must answer with; its `name` keys scripted replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSchema {
    /// Schema name (`orchestrate_decision`, `evaluate_answer`, …).
    pub name: String,
    /// JSON Schema subset: `type`, `properties`, `required`, `enum`, `items`, `minimum`,
    /// `maximum`.
    #[serde(default = "default_schema")]
    pub schema: Value,
}

fn default_schema() -> Value {
    serde_json::json!({ "type": "object" })
}

/// An `llm` agent: a system prompt, a prompt template over the dispatch's fields, a JSON
/// output schema, a model and a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// Id of a declared provider.
    pub provider: String,
    /// Model id; defaults to the provider's.
    #[serde(default)]
    pub model: Option<String>,
    /// System prompt.
    pub system: String,
    /// User message; `{field}` placeholders are filled from the dispatch context (objects as
    /// JSON). Default: every field the agent sees, as JSON.
    #[serde(default)]
    pub prompt: Option<String>,
    /// The answer's JSON shape.
    pub output_schema: OutputSchema,
    /// Longest answer, in tokens.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// When an answer is cut at `max_tokens`, the call is repeated with twice the budget, up
    /// to this many tokens. Without it, a cut answer fails, naming `max_tokens`.
    #[serde(default)]
    pub max_tokens_limit: Option<u32>,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Confidence of the handoff when the answer carries no `confidence` field. Without it,
    /// such an answer's confidence is unknown: it is rated [`UNKNOWN_CONFIDENCE`] with a
    /// caveat saying so, never `confidence_high`.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// A top-level string field of the output (e.g. `answer`) whose text is streamed into
    /// the query's event log as `token` events while the model writes it. Without it the
    /// call is not streamed.
    #[serde(default)]
    pub stream: Option<String>,
    /// Tools the model may call: a source id (every tool it offers) or one tool
    /// (`orders.issue_refund`). Left out of the canonical JSON while empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Most tool calls in one attempt (default 8); then the model answers without tools and
    /// the answer carries a caveat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
}

fn default_max_tokens() -> u32 {
    1_024
}

/// The confidence of an `llm` answer that reports none when the manifest sets no default:
/// the lower bound of `confidence_low_partial`, so the answer is given with its limitation.
pub const UNKNOWN_CONFIDENCE: f64 = 0.5;

/// An `http` agent: the dispatch is POSTed as JSON; the response body is the handoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// `http://` or `https://` URL.
    pub url: String,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Environment variable holding a bearer token (never the token itself).
    #[serde(default)]
    pub bearer_env: Option<String>,
}

/// A `lambda` agent: the user's function is invoked with the dispatch; its result is the
/// handoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LambdaSettings {
    /// Function name or ARN.
    pub function: String,
    /// Version or alias.
    #[serde(default)]
    pub qualifier: Option<String>,
    /// AWS region (default: the environment's).
    #[serde(default)]
    pub region: Option<String>,
    /// Endpoint override (a local Lambda emulator or recording server).
    #[serde(default)]
    pub endpoint_url: Option<String>,
}
