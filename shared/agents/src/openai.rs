//! The OpenAI-compatible provider: `POST {base_url}/chat/completions` with the answer's shape
//! asked for as the provider's `structured_output` says, streamed or not, and the tool loop's
//! turns (`tools`, `tool_calls`, `role: tool` results).

use crate::provider::{
    ModelProvider, ModelRequest, ModelResponse, ModelTurn, OnText, ProviderError, ToolOffer, ToolRequest, Turn,
};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::http_client::HttpClient;
use switchyard_model::manifest::StructuredOutput;

/// Any OpenAI-compatible chat-completions endpoint.
///
/// The answer's JSON shape is asked for as the provider's `structured_output` says. With
/// `auto`, a server that refuses a form (an error answer naming `response_format` or the
/// form) is asked again at once in the next one: `json_schema`; `json_object` carrying the
/// schema (servers such as llama-cpp-python's decode by it); plain `json_object`; the schema
/// in the prompt alone. The form that worked is kept for this provider's later calls. A
/// refused form is not a retryable server error: asking again the same way cannot work.
#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    http: HttpClient,
    base_url: String,
    api_key: Option<String>,
    timeout: Duration,
    /// The forms this provider may use, in order (one unless `auto`).
    forms: &'static [Form],
    /// The form in use: an index into `forms`, moved on by refusals.
    form: Arc<AtomicU8>,
}

/// One way of asking for the schema, as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `response_format: {type: json_schema, json_schema: {name, schema}}`.
    JsonSchema,
    /// `response_format: {type: json_object, schema}`, the schema in the system prompt too.
    JsonObjectWithSchema,
    /// `response_format: {type: json_object}`, the schema in the system prompt.
    JsonObject,
    /// No `response_format`; the schema in the system prompt.
    Prompt,
}

impl Form {
    /// The `structured_output` setting this form belongs to.
    fn setting(self) -> &'static str {
        match self {
            Form::JsonSchema => "json_schema",
            Form::JsonObjectWithSchema | Form::JsonObject => "json_object",
            Form::Prompt => "prompt",
        }
    }
}

/// The forms of each `structured_output` setting, in the order they are tried.
fn forms_of(setting: StructuredOutput) -> &'static [Form] {
    match setting {
        StructuredOutput::Auto => &[Form::JsonSchema, Form::JsonObjectWithSchema, Form::JsonObject, Form::Prompt],
        StructuredOutput::JsonSchema => &[Form::JsonSchema],
        StructuredOutput::JsonObject => &[Form::JsonObject],
        StructuredOutput::Prompt => &[Form::Prompt],
    }
}

impl OpenAiCompatible {
    /// A client for `base_url` (e.g. `https://api.openai.com/v1`) with an optional API key,
    /// asking for structured output the `auto` way.
    pub fn new(http: HttpClient, base_url: &str, api_key: Option<String>, timeout: Duration) -> OpenAiCompatible {
        OpenAiCompatible {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            timeout,
            forms: forms_of(StructuredOutput::Auto),
            form: Arc::new(AtomicU8::new(0)),
        }
    }

    /// Ask for structured output this way (`auto`: try the forms in turn).
    pub fn with_structured_output(mut self, structured: StructuredOutput) -> OpenAiCompatible {
        self.forms = forms_of(structured);
        self.form = Arc::new(AtomicU8::new(0));
        self
    }

    /// The form the next request uses.
    fn form(&self) -> Form {
        self.forms[usize::from(self.form.load(Ordering::Relaxed)).min(self.forms.len() - 1)]
    }

    /// After `refused` was refused: move to the next form when there is one (true), or stay
    /// (false: the refusal is the call's error).
    fn fall_back(&self, refused: Form) -> bool {
        let Some(at) = self.forms.iter().position(|f| *f == refused) else { return false };
        let Some(next) = self.forms.get(at + 1) else { return false };
        // Another call may have moved on already; never move back.
        self.form.fetch_max((at + 1) as u8, Ordering::Relaxed);
        tracing::info!(
            refused = ?refused,
            now = ?next,
            "the provider refused this structured-output form; using the next one from now on"
        );
        true
    }

    fn body(request: &ModelRequest, form: Form) -> Value {
        let system = match form {
            Form::JsonSchema => request.system.clone(),
            Form::JsonObjectWithSchema | Form::JsonObject | Form::Prompt => format!(
                "{}\n\nAnswer with one JSON object and nothing else. It must match this JSON Schema:\n{}",
                request.system, request.schema
            ),
        };
        let mut body = json!({
            "model": request.model,
            "messages": [
                { "role": "system", "content": system },
                { "role": "user", "content": request.prompt },
            ],
            "max_tokens": request.max_tokens,
        });
        match form {
            Form::JsonSchema => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": { "name": request.schema_name, "schema": request.schema, "strict": false },
                });
            }
            Form::JsonObjectWithSchema => {
                body["response_format"] = json!({ "type": "json_object", "schema": request.schema })
            }
            Form::JsonObject => body["response_format"] = json!({ "type": "json_object" }),
            Form::Prompt => {}
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    fn headers(&self) -> Vec<(String, String)> {
        let mut headers = Vec::new();
        if let Some(key) = &self.api_key {
            headers.push(("authorization".to_string(), format!("Bearer {key}")));
        }
        headers
    }

    /// One streamed exchange in `form`.
    async fn stream_once(
        &self,
        request: &ModelRequest,
        form: Form,
        on_text: OnText<'_>,
    ) -> Result<ModelResponse, ProviderError> {
        let mut body = OpenAiCompatible::body(request, form);
        body["stream"] = json!(true);
        body["stream_options"] = json!({ "include_usage": true });
        let url = format!("{}/chat/completions", self.base_url);
        let mut sse = super::streaming::SseDecoder::default();
        let mut state = ChunkState::default();
        let mut on_chunk = |bytes: &[u8]| {
            for data in sse.push(bytes) {
                state.take(&data, on_text);
            }
        };
        let reply = self
            .http
            .post_json_streaming(&url, &self.headers(), body.to_string().into_bytes(), self.timeout, &mut on_chunk)
            .await?;
        if reply.status == 429 {
            return Err(ProviderError::Throttled { retry_after: reply.retry_after });
        }
        if !(200..300).contains(&reply.status) {
            return Err(ProviderError::from_status(reply.status, &reply.body, form.setting()));
        }
        if let Some(data) = sse.finish() {
            state.take(&data, on_text);
        }
        if let Some(error) = state.error {
            return Err(ProviderError::Decode(error));
        }
        if state.finish_reason.as_deref() == Some("length") {
            return Err(ProviderError::Cut { max_tokens: request.max_tokens });
        }
        if state.finish_reason.is_none() && !state.done {
            return Err(ProviderError::Decode(format!(
                "the stream ended after {} characters, before the answer was complete (no finish_reason, no [DONE])",
                state.text.chars().count()
            )));
        }
        Ok(ModelResponse {
            model: state.model.unwrap_or_else(|| request.model.clone()),
            text: state.text,
            input_tokens: state.input_tokens,
            output_tokens: state.output_tokens,
            cache_hit: state.cached_tokens > 0,
        })
    }

    /// One buffered exchange in `form`.
    async fn complete_once(&self, request: &ModelRequest, form: Form) -> Result<ModelResponse, ProviderError> {
        let body = OpenAiCompatible::body(request, form);
        let url = format!("{}/chat/completions", self.base_url);
        let reply = self.http.post_json(&url, &self.headers(), body.to_string().into_bytes(), self.timeout).await?;
        if reply.status == 429 {
            return Err(ProviderError::Throttled { retry_after: reply.retry_after });
        }
        if !(200..300).contains(&reply.status) {
            return Err(ProviderError::from_status(reply.status, &reply.body, form.setting()));
        }
        let v: Value =
            serde_json::from_slice(&reply.body).map_err(|e| ProviderError::Decode(format!("not JSON: {e}")))?;
        if v.pointer("/choices/0/finish_reason").and_then(Value::as_str) == Some("length") {
            return Err(ProviderError::Cut { max_tokens: request.max_tokens });
        }
        let content = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| ProviderError::Decode("no choices[0].message.content".into()))?;
        let usage = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        Ok(ModelResponse {
            text: content.to_string(),
            model: v.get("model").and_then(Value::as_str).unwrap_or(&request.model).to_string(),
            input_tokens: usage("/usage/prompt_tokens"),
            output_tokens: usage("/usage/completion_tokens"),
            cache_hit: usage("/usage/prompt_tokens_details/cached_tokens") > 0,
        })
    }
}

/// What an OpenAI-compatible stream said so far.
#[derive(Debug, Default)]
struct ChunkState {
    text: String,
    model: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    cached_tokens: u64,
    finish_reason: Option<String>,
    done: bool,
    error: Option<String>,
}

impl ChunkState {
    /// Take one `data:` payload of the stream.
    fn take(&mut self, data: &str, on_text: OnText<'_>) {
        if data.trim() == "[DONE]" {
            self.done = true;
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            self.error.get_or_insert_with(|| "a stream chunk is not JSON".into());
            return;
        };
        if let Some(e) = v.get("error") {
            let message = e.get("message").and_then(Value::as_str).unwrap_or("error");
            tracing::warn!(detail = message, "the provider's stream reported an error");
            self.error.get_or_insert_with(|| "the stream reported an error".into());
            return;
        }
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.model.get_or_insert_with(|| m.to_string());
        }
        if let Some(piece) = v.pointer("/choices/0/delta/content").and_then(Value::as_str) {
            self.text.push_str(piece);
            on_text(piece);
        }
        if let Some(reason) = v.pointer("/choices/0/finish_reason").filter(|r| !r.is_null()) {
            self.finish_reason = Some(reason.as_str().unwrap_or("stop").to_string());
        }
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            let n = |p: &str| usage.pointer(p).and_then(Value::as_u64).unwrap_or(0);
            self.input_tokens = n("/prompt_tokens");
            self.output_tokens = n("/completion_tokens");
            self.cached_tokens = n("/prompt_tokens_details/cached_tokens");
        }
    }
}

#[async_trait]
impl ModelProvider for OpenAiCompatible {
    async fn stream(&self, request: &ModelRequest, on_text: OnText<'_>) -> Result<ModelResponse, ProviderError> {
        loop {
            let form = self.form();
            match self.stream_once(request, form, on_text).await {
                // A refusal answers before any text: asking again in the next form is safe.
                Err(ProviderError::FormRefused { .. }) if self.fall_back(form) => continue,
                other => return other,
            }
        }
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        loop {
            let form = self.form();
            match self.complete_once(request, form).await {
                Err(ProviderError::FormRefused { .. }) if self.fall_back(form) => continue,
                other => return other,
            }
        }
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        turns: &[Turn],
        tools: &[ToolOffer],
    ) -> Result<ModelTurn, ProviderError> {
        let body = OpenAiCompatible::conversation_body(request, turns, tools);
        let url = format!("{}/chat/completions", self.base_url);
        let reply = self.http.post_json(&url, &self.headers(), body.to_string().into_bytes(), self.timeout).await?;
        if reply.status == 429 {
            return Err(ProviderError::Throttled { retry_after: reply.retry_after });
        }
        if !(200..300).contains(&reply.status) {
            return Err(ProviderError::from_status(reply.status, &reply.body, "prompt"));
        }
        let v: Value =
            serde_json::from_slice(&reply.body).map_err(|e| ProviderError::Decode(format!("not JSON: {e}")))?;
        openai_turn(&v, request)
    }
}

impl OpenAiCompatible {
    /// The chat-completions body of a conversation with tools (`tools` empty: answer now).
    fn conversation_body(request: &ModelRequest, turns: &[Turn], tools: &[ToolOffer]) -> Value {
        let mut messages = vec![
            json!({ "role": "system", "content": crate::provider::system_with_schema(request) }),
            json!({ "role": "user", "content": request.prompt }),
        ];
        for turn in turns {
            match turn {
                Turn::Calls { text, calls } => {
                    let calls: Vec<Value> = calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": { "name": c.name, "arguments": c.raw_arguments },
                            })
                        })
                        .collect();
                    let content = if text.is_empty() { Value::Null } else { Value::String(text.clone()) };
                    messages.push(json!({ "role": "assistant", "content": content, "tool_calls": calls }));
                }
                Turn::Results(results) => {
                    for r in results {
                        messages.push(json!({ "role": "tool", "tool_call_id": r.id, "content": r.content }));
                    }
                }
            }
        }
        let mut body = json!({ "model": request.model, "messages": messages, "max_tokens": request.max_tokens });
        if !tools.is_empty() {
            let offered: Vec<Value> = tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": { "name": t.name, "description": t.description, "parameters": t.parameters },
                    })
                })
                .collect();
            body["tools"] = Value::Array(offered);
            body["tool_choice"] = json!("auto");
        }
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
        body
    }
}

/// An OpenAI chat-completions answer as a turn: its tool calls, or its text as the answer.
fn openai_turn(v: &Value, request: &ModelRequest) -> Result<ModelTurn, ProviderError> {
    let finish = v.pointer("/choices/0/finish_reason").and_then(Value::as_str);
    let message =
        v.pointer("/choices/0/message").ok_or_else(|| ProviderError::Decode("no choices[0].message".into()))?;
    let calls: Vec<ToolRequest> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(n, c)| {
                    let raw = match c.pointer("/function/arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => String::new(),
                    };
                    ToolRequest {
                        id: c.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{n}"), str::to_string),
                        name: c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string(),
                        arguments: crate::provider::parse_arguments(&raw),
                        raw_arguments: raw,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if calls.is_empty() && finish == Some("length") {
        return Err(ProviderError::Cut { max_tokens: request.max_tokens });
    }
    let text = message.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
    if calls.is_empty() && text.is_empty() {
        return Err(ProviderError::Decode("the answer has neither content nor tool calls".into()));
    }
    let usage = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    Ok(ModelTurn {
        response: ModelResponse {
            text,
            model: v.get("model").and_then(Value::as_str).unwrap_or(&request.model).to_string(),
            input_tokens: usage("/usage/prompt_tokens"),
            output_tokens: usage("/usage/completion_tokens"),
            cache_hit: usage("/usage/prompt_tokens_details/cached_tokens") > 0,
        },
        calls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_stream_chunks_that_are_not_json_or_report_an_error_fail_the_stream() {
        let ignore = |_: &str| {};
        let mut state = ChunkState::default();
        state.take(r#"{"choices":[{"delta":{"content":"{\"a"}}]}"#, &ignore);
        state.take("not json", &ignore);
        assert_eq!(state.text, "{\"a");
        assert_eq!(state.error.as_deref(), Some("a stream chunk is not JSON"));
        let mut state = ChunkState::default();
        state.take(r#"{"error":{"message":"overloaded","type":"server_error"}}"#, &ignore);
        assert_eq!(
            state.error.as_deref(),
            Some("the stream reported an error"),
            "the provider's words stay in the log"
        );
        let mut state = ChunkState::default();
        state.take(r#"{"choices":[{"delta":{},"finish_reason":"length"}],"usage":null}"#, &ignore);
        state.take(r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#, &ignore);
        state.take("[DONE]", &ignore);
        assert!(state.finish_reason.as_deref() == Some("length") && state.done && state.error.is_none());
        assert_eq!((state.input_tokens, state.output_tokens), (7, 3));
    }
}
