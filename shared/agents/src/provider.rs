//! What every model provider answers to: a request, a response, and the errors a provider
//! reports (the `llm` agents and the Bedrock and OpenAI-compatible providers share them).

use async_trait::async_trait;
use serde_json::Value;
use std::time::Duration;
use switchyard_engine::http_client::HttpError;

/// One request to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// Model id.
    pub model: String,
    /// System prompt.
    pub system: String,
    /// The user message.
    pub prompt: String,
    /// Output schema name.
    pub schema_name: String,
    /// Output JSON schema.
    pub schema: Value,
    /// Longest answer.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: Option<f64>,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The text (expected to be JSON).
    pub text: String,
    /// Model that answered.
    pub model: String,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Answer tokens.
    pub output_tokens: u64,
    /// Whether a prompt cache served part of the input.
    pub cache_hit: bool,
}

/// Why a model call failed. The text of each error is Switchyard's own words, safe to show
/// a caller; what the provider itself said (its error body) is kept apart, for the logs
/// ([`ProviderError::detail`]).
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// 429 / throttling: wait and retry.
    #[error("throttled by the provider")]
    Throttled {
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// The provider answered with an error status; retryable for 5xx.
    #[error("the provider answered HTTP {status}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The error body (truncated), for the logs only.
        body: String,
    },
    /// The server does not accept this way of asking for structured output (its
    /// `response_format`); another form may work, the same one never will.
    #[error("the provider does not accept `structured_output: {form}` (HTTP {status})")]
    FormRefused {
        /// The refused form.
        form: &'static str,
        /// HTTP status.
        status: u16,
        /// The error body (truncated), for the logs only.
        body: String,
    },
    /// The prompt does not fit the model's context; retrying cannot help.
    #[error("the prompt is longer than the model's context (HTTP {status})")]
    ContextOverflow {
        /// HTTP status.
        status: u16,
        /// The error body (truncated), for the logs only.
        body: String,
    },
    /// The model stopped because it reached the answer budget (`finish_reason: length`).
    #[error("the answer was cut at max_tokens={max_tokens}")]
    Cut {
        /// The budget it reached.
        max_tokens: u32,
    },
    /// The provider's answer is not the API's shape; a retry may help.
    #[error("unexpected provider response: {0}")]
    Decode(String),
    /// The provider cannot be used as configured (missing key, unknown provider); retrying
    /// cannot help.
    #[error("provider not usable: {0}")]
    Config(String),
    /// The HTTP exchange failed.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// An SDK call failed.
    #[error("{message}")]
    Sdk {
        /// What failed.
        message: String,
        /// Whether a retry may help.
        retryable: bool,
        /// The SDK error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl ProviderError {
    /// Whether another attempt may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Throttled { .. } | ProviderError::Decode(_) => true,
            ProviderError::Status { status, .. } => *status >= 500 || *status == 408,
            ProviderError::FormRefused { .. } | ProviderError::ContextOverflow { .. } | ProviderError::Cut { .. } => {
                false
            }
            ProviderError::Config(_) => false,
            ProviderError::Http(e) => e.is_retryable(),
            ProviderError::Sdk { retryable, .. } => *retryable,
        }
    }

    /// What the provider said, for the logs: its error body, or the error's causes.
    pub fn detail(&self) -> String {
        match self {
            ProviderError::Status { body, .. }
            | ProviderError::FormRefused { body, .. }
            | ProviderError::ContextOverflow { body, .. } => body.clone(),
            other => switchyard_engine::http_client::causes(other),
        }
    }

    /// The error for an HTTP error answer: a refusal of the structured-output `form` (the
    /// body names `response_format` or the form), a context overflow, or a plain status.
    pub fn from_status(status: u16, body: &[u8], form: &'static str) -> ProviderError {
        let body: String = String::from_utf8_lossy(body).chars().take(2_000).collect();
        let lower = body.to_lowercase();
        let about_context = ["exceed_context_size", "context length", "context_length", "maximum context", "n_ctx"]
            .iter()
            .any(|k| lower.contains(k));
        let about_form = lower.contains("response_format")
            || (form != "prompt" && lower.contains(form))
            || lower.contains("json_object")
            || lower.contains("'text'");
        if about_context && (400..500).contains(&status) {
            ProviderError::ContextOverflow { status, body }
        } else if about_form && matches!(status, 400 | 422 | 500 | 501) {
            ProviderError::FormRefused { form, status, body }
        } else {
            ProviderError::Status { status, body }
        }
    }
}

/// Receives a streamed answer's text, piece by piece, in order.
pub type OnText<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A model API.
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// Send one request.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError>;

    /// Send one request and hand the answer's text to `on_text` as it arrives; the returned
    /// response holds the whole text (the concatenation of the pieces) and the usage. A
    /// stream that breaks before the provider's end marker is an error a retry may fix (the
    /// pieces already handed over belong to this attempt only). Providers that cannot stream
    /// answer whole, as one piece.
    async fn stream(&self, request: &ModelRequest, on_text: OnText<'_>) -> Result<ModelResponse, ProviderError> {
        let response = self.complete(request).await?;
        on_text(&response.text);
        Ok(response)
    }

    /// One turn of a conversation with tools: the request's system prompt (the output schema
    /// stated in it) and user message, then `turns`, with `tools` offered. With no tools
    /// offered the model must answer. Providers that cannot call tools refuse.
    async fn converse(
        &self,
        request: &ModelRequest,
        turns: &[Turn],
        tools: &[ToolOffer],
    ) -> Result<ModelTurn, ProviderError> {
        let _ = (request, turns, tools);
        Err(ProviderError::Config("this provider cannot call tools".into()))
    }
}

/// The system prompt of a conversation with tools: the agent's, with the answer's schema
/// stated (no `response_format` is sent while tools are offered: a server that constrains
/// the output to the schema could never ask for a call).
pub fn system_with_schema(request: &ModelRequest) -> String {
    format!(
        "{}\n\nWhen you have what you need, answer with one JSON object and nothing else. It must match this JSON Schema (`{}`):\n{}",
        request.system, request.schema_name, request.schema
    )
}

/// A tool as offered to a model: the provider-safe name, what it does, its arguments' schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOffer {
    /// A name the provider accepts (`orders__issue_refund`).
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The arguments' JSON Schema.
    pub parameters: Value,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    /// The provider's id of the call (results are matched to it).
    pub id: String,
    /// The provider-safe tool name the model wrote.
    pub name: String,
    /// The arguments as the model wrote them.
    pub raw_arguments: String,
    /// The arguments parsed (`Err` with the parser's words when they are not JSON).
    pub arguments: Result<Value, String>,
}

/// What a tool call gave back to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    /// The call's id.
    pub id: String,
    /// The provider-safe tool name.
    pub name: String,
    /// The result text (already cut to its limit).
    pub content: String,
    /// Whether the call failed (unknown tool, bad arguments, tool error, timeout).
    pub is_error: bool,
}

/// One exchange of a conversation with tools, after the first user message.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// The model asked for these calls (with any text it wrote beside them).
    Calls {
        /// Text beside the calls.
        text: String,
        /// The calls.
        calls: Vec<ToolRequest>,
    },
    /// The calls' results, in the calls' order.
    Results(Vec<ToolReply>),
}

/// A model's answer in a conversation with tools: calls to make, or (no calls) the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTurn {
    /// The text and usage of this turn.
    pub response: ModelResponse,
    /// The calls asked for; empty when `response.text` is the answer.
    pub calls: Vec<ToolRequest>,
}

/// Parse a model's argument text: a JSON object, or the reason it is not one.
pub fn parse_arguments(raw: &str) -> Result<Value, String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!("the arguments are {}, not a JSON object", kind_of(&other))),
        Err(e) => Err(format!("the arguments are not JSON: {e}")),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
