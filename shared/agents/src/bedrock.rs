//! Amazon Bedrock's Converse API as a [`ModelProvider`].
//!
//! The SDK client is created once, on first use, from the environment's AWS configuration
//! (region and endpoint from the provider's settings when given), with the SDK's own retries
//! off: throttling is backed off by the `llm` agent, other failures by the tier's policy.
//! Converse has no JSON-schema response format, so the schema is stated in the system prompt
//! and the answer is checked against it like every provider's.
//!
//! Streamed, the request goes to `ConverseStream`: the answer arrives as `contentBlockDelta`
//! events of the binary event stream, the usage in the `metadata` event; a stream that ends
//! before `messageStop` is an incomplete answer, which a retry may fix.
//!
//! With tools, the conversation goes to `Converse` with a `toolConfig`: the model's
//! `toolUse` blocks are its calls, answered by `toolResult` blocks in the next user message.

use crate::provider::{
    ModelProvider, ModelRequest, ModelResponse, ModelTurn, OnText, ProviderError, ToolOffer, ToolRequest, Turn,
};
use async_trait::async_trait;
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse::ConverseError;
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::ConverseStreamOutput as StreamEvent;
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ConversationRole, InferenceConfiguration, Message, StopReason, SystemContentBlock,
};
use std::time::Duration;
use tokio::sync::OnceCell;

/// Bedrock Converse.
pub struct Bedrock {
    client: OnceCell<aws_sdk_bedrockruntime::Client>,
    region: Option<String>,
    endpoint_url: Option<String>,
    timeout: Duration,
}

impl std::fmt::Debug for Bedrock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bedrock")
            .field("region", &self.region)
            .field("endpoint_url", &self.endpoint_url)
            .finish_non_exhaustive()
    }
}

impl Bedrock {
    /// A provider whose client is built on first use from the environment.
    pub fn new(region: Option<String>, endpoint_url: Option<String>, timeout: Duration) -> Bedrock {
        Bedrock { client: OnceCell::new(), region, endpoint_url, timeout }
    }

    /// A provider around an existing client (its configuration decides region, endpoint,
    /// credentials and retries).
    pub fn from_client(client: aws_sdk_bedrockruntime::Client, timeout: Duration) -> Bedrock {
        Bedrock { client: OnceCell::new_with(Some(client)), region: None, endpoint_url: None, timeout }
    }

    async fn client(&self) -> &aws_sdk_bedrockruntime::Client {
        self.client
            .get_or_init(|| async {
                let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .retry_config(aws_config::retry::RetryConfig::disabled());
                if let Some(region) = &self.region {
                    loader = loader.region(aws_config::Region::new(region.clone()));
                }
                if let Some(url) = &self.endpoint_url {
                    loader = loader.endpoint_url(url.clone());
                }
                aws_sdk_bedrockruntime::Client::new(&loader.load().await)
            })
            .await
    }
}

fn sdk_error(e: SdkError<ConverseError>) -> ProviderError {
    match &e {
        SdkError::ServiceError(service) => {
            let err = service.err();
            if err.is_throttling_exception() {
                return ProviderError::Throttled { retry_after: None };
            }
            let retryable = err.is_internal_server_exception()
                || err.is_service_unavailable_exception()
                || err.is_model_not_ready_exception()
                || err.is_model_timeout_exception();
            if let Some(overflow) = context_overflow(err.code(), err.message()) {
                return overflow;
            }
            // The service's own message stays in the error's source, for the logs.
            let message = format!("Bedrock Converse: the service answered {}", err.code().unwrap_or("an error"));
            ProviderError::Sdk { message, retryable, source: Box::new(e) }
        }
        _ => {
            let message = format!("Bedrock Converse: {}", aws_sdk_bedrockruntime::error::DisplayErrorContext(&e));
            ProviderError::Sdk { message, retryable: true, source: Box::new(e) }
        }
    }
}

/// A validation error that says the input is too long for the model: a context overflow,
/// which no retry can fix.
fn context_overflow(code: Option<&str>, message: Option<&str>) -> Option<ProviderError> {
    let message = message.unwrap_or_default();
    let lower = message.to_lowercase();
    (code == Some("ValidationException") && (lower.contains("too long") || lower.contains("context")))
        .then(|| ProviderError::ContextOverflow { status: 400, body: message.chars().take(2_000).collect() })
}

/// The system prompt (with the schema stated) and the message of a request.
fn parts(request: &ModelRequest) -> Result<(String, Message, InferenceConfiguration), ProviderError> {
    let system = format!(
        "{}\n\nAnswer with one JSON object and nothing else. It must match this JSON Schema (`{}`):\n{}",
        request.system, request.schema_name, request.schema
    );
    let message = Message::builder()
        .role(ConversationRole::User)
        .content(ContentBlock::Text(request.prompt.clone()))
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build the Converse message: {e}")))?;
    let mut inference = InferenceConfiguration::builder().max_tokens(request.max_tokens.min(i32::MAX as u32) as i32);
    if let Some(t) = request.temperature {
        inference = inference.temperature(t as f32);
    }
    Ok((system, message, inference.build()))
}

fn stream_error(e: SdkError<ConverseStreamError>) -> ProviderError {
    let message = format!("Bedrock ConverseStream: {}", aws_sdk_bedrockruntime::error::DisplayErrorContext(&e));
    match &e {
        SdkError::ServiceError(service) => {
            let err = service.err();
            if err.is_throttling_exception() {
                return ProviderError::Throttled { retry_after: None };
            }
            if let Some(overflow) = context_overflow(err.code(), err.message()) {
                return overflow;
            }
            let message = format!("Bedrock ConverseStream: the service answered {}", err.code().unwrap_or("an error"));
            let retryable = err.is_internal_server_exception()
                || err.is_service_unavailable_exception()
                || err.is_model_not_ready_exception()
                || err.is_model_timeout_exception()
                || err.is_model_stream_error_exception();
            ProviderError::Sdk { message, retryable, source: Box::new(e) }
        }
        _ => ProviderError::Sdk { message, retryable: true, source: Box::new(e) },
    }
}

fn timed_out(timeout: Duration) -> ProviderError {
    ProviderError::Http(switchyard_engine::http_client::HttpError::Timeout(timeout.as_millis() as u64))
}

#[async_trait]
impl ModelProvider for Bedrock {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let client = self.client().await;
        let (system, message, inference) = parts(request)?;
        let call = client
            .converse()
            .model_id(request.model.clone())
            .system(SystemContentBlock::Text(system))
            .messages(message)
            .inference_config(inference)
            .send();
        let output =
            tokio::time::timeout(self.timeout, call).await.map_err(|_| timed_out(self.timeout))?.map_err(sdk_error)?;
        let text: String = output
            .output()
            .and_then(|o| o.as_message().ok())
            .map(|m| m.content().iter().filter_map(|b| b.as_text().ok()).cloned().collect::<Vec<_>>().join(""))
            .ok_or_else(|| ProviderError::Decode("Converse returned no message".into()))?;
        if output.stop_reason() == &StopReason::MaxTokens {
            return Err(ProviderError::Cut { max_tokens: request.max_tokens });
        }
        let usage = output.usage();
        Ok(ModelResponse {
            text,
            model: request.model.clone(),
            input_tokens: usage.map(|u| u.input_tokens().max(0) as u64).unwrap_or(0),
            output_tokens: usage.map(|u| u.output_tokens().max(0) as u64).unwrap_or(0),
            cache_hit: usage.and_then(|u| u.cache_read_input_tokens()).is_some_and(|n| n > 0),
        })
    }

    async fn stream(&self, request: &ModelRequest, on_text: OnText<'_>) -> Result<ModelResponse, ProviderError> {
        let client = self.client().await;
        let (system, message, inference) = parts(request)?;
        let exchange = async {
            let mut output = client
                .converse_stream()
                .model_id(request.model.clone())
                .system(SystemContentBlock::Text(system))
                .messages(message)
                .inference_config(inference)
                .send()
                .await
                .map_err(stream_error)?;
            let mut response = ModelResponse {
                text: String::new(),
                model: request.model.clone(),
                input_tokens: 0,
                output_tokens: 0,
                cache_hit: false,
            };
            let mut stopped = None;
            loop {
                let event = output.stream.recv().await.map_err(|e| ProviderError::Sdk {
                    message: format!(
                        "Bedrock ConverseStream broke after {} characters: {}",
                        response.text.chars().count(),
                        aws_sdk_bedrockruntime::error::DisplayErrorContext(&e)
                    ),
                    retryable: true,
                    source: Box::new(e),
                })?;
                match event {
                    None => break,
                    Some(StreamEvent::ContentBlockDelta(delta)) => {
                        if let Some(piece) = delta.delta().and_then(|d| d.as_text().ok()) {
                            response.text.push_str(piece);
                            on_text(piece);
                        }
                    }
                    Some(StreamEvent::MessageStop(stop)) => stopped = Some(stop.stop_reason().clone()),
                    Some(StreamEvent::Metadata(meta)) => {
                        if let Some(u) = meta.usage() {
                            response.input_tokens = u.input_tokens().max(0) as u64;
                            response.output_tokens = u.output_tokens().max(0) as u64;
                            response.cache_hit = u.cache_read_input_tokens().is_some_and(|n| n > 0);
                        }
                    }
                    Some(_) => {}
                }
            }
            match stopped {
                None => Err(ProviderError::Decode(format!(
                    "the ConverseStream ended after {} characters, before messageStop",
                    response.text.chars().count()
                ))),
                Some(StopReason::MaxTokens) => Err(ProviderError::Cut { max_tokens: request.max_tokens }),
                Some(_) => Ok(response),
            }
        };
        tokio::time::timeout(self.timeout, exchange).await.map_err(|_| timed_out(self.timeout))?
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        turns: &[Turn],
        tools: &[ToolOffer],
    ) -> Result<ModelTurn, ProviderError> {
        use aws_sdk_bedrockruntime::types::{
            Tool, ToolConfiguration, ToolInputSchema, ToolResultBlock, ToolResultContentBlock, ToolResultStatus,
            ToolSpecification, ToolUseBlock,
        };
        let build = |e: aws_smithy_types::error::operation::BuildError| {
            ProviderError::Config(format!("cannot build the Converse request: {e}"))
        };
        let client = self.client().await;
        let (_, first, inference) = parts(request)?;
        let mut messages = vec![first];
        for turn in turns {
            let message = match turn {
                Turn::Calls { text, calls } => {
                    let mut m = Message::builder().role(ConversationRole::Assistant);
                    if !text.is_empty() {
                        m = m.content(ContentBlock::Text(text.clone()));
                    }
                    for c in calls {
                        let input = to_document(c.arguments.as_ref().unwrap_or(&serde_json::Value::Null));
                        m = m.content(ContentBlock::ToolUse(
                            ToolUseBlock::builder()
                                .tool_use_id(&c.id)
                                .name(&c.name)
                                .input(input)
                                .build()
                                .map_err(build)?,
                        ));
                    }
                    m.build().map_err(build)?
                }
                Turn::Results(results) => {
                    let mut m = Message::builder().role(ConversationRole::User);
                    for r in results {
                        let status = if r.is_error { ToolResultStatus::Error } else { ToolResultStatus::Success };
                        m = m.content(ContentBlock::ToolResult(
                            ToolResultBlock::builder()
                                .tool_use_id(&r.id)
                                .content(ToolResultContentBlock::Text(r.content.clone()))
                                .status(status)
                                .build()
                                .map_err(build)?,
                        ));
                    }
                    m.build().map_err(build)?
                }
            };
            messages.push(message);
        }
        let mut call = client
            .converse()
            .model_id(request.model.clone())
            .system(SystemContentBlock::Text(crate::provider::system_with_schema(request)))
            .set_messages(Some(messages))
            .inference_config(inference);
        if !tools.is_empty() {
            let mut config = ToolConfiguration::builder();
            for t in tools {
                config = config.tools(Tool::ToolSpec(
                    ToolSpecification::builder()
                        .name(&t.name)
                        .description(&t.description)
                        .input_schema(ToolInputSchema::Json(to_document(&t.parameters)))
                        .build()
                        .map_err(build)?,
                ));
            }
            call = call.tool_config(config.build().map_err(build)?);
        }
        let output = tokio::time::timeout(self.timeout, call.send())
            .await
            .map_err(|_| timed_out(self.timeout))?
            .map_err(sdk_error)?;
        let message = output
            .output()
            .and_then(|o| o.as_message().ok())
            .ok_or_else(|| ProviderError::Decode("Converse returned no message".into()))?;
        let mut text = String::new();
        let mut calls = Vec::new();
        for block in message.content() {
            match block {
                ContentBlock::Text(t) => text.push_str(t),
                ContentBlock::ToolUse(u) => {
                    let arguments = from_document(u.input());
                    calls.push(ToolRequest {
                        id: u.tool_use_id().to_string(),
                        name: u.name().to_string(),
                        raw_arguments: arguments.to_string(),
                        arguments: match arguments {
                            v @ serde_json::Value::Object(_) => Ok(v),
                            other => Err(format!("the arguments are {other}, not a JSON object")),
                        },
                    });
                }
                _ => {}
            }
        }
        if calls.is_empty() && output.stop_reason() == &StopReason::MaxTokens {
            return Err(ProviderError::Cut { max_tokens: request.max_tokens });
        }
        let usage = output.usage();
        Ok(ModelTurn {
            response: ModelResponse {
                text,
                model: request.model.clone(),
                input_tokens: usage.map(|u| u.input_tokens().max(0) as u64).unwrap_or(0),
                output_tokens: usage.map(|u| u.output_tokens().max(0) as u64).unwrap_or(0),
                cache_hit: usage.and_then(|u| u.cache_read_input_tokens()).is_some_and(|n| n > 0),
            },
            calls,
        })
    }
}

/// JSON as a Smithy document (Converse's tool inputs and schemas).
fn to_document(value: &serde_json::Value) -> aws_smithy_types::Document {
    use aws_smithy_types::{Document, Number};
    match value {
        serde_json::Value::Null => Document::Null,
        serde_json::Value::Bool(b) => Document::Bool(*b),
        serde_json::Value::Number(n) => Document::Number(match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Number::PosInt(u),
            (None, Some(i), _) => Number::NegInt(i),
            (_, _, f) => Number::Float(f.unwrap_or(0.0)),
        }),
        serde_json::Value::String(s) => Document::String(s.clone()),
        serde_json::Value::Array(items) => Document::Array(items.iter().map(to_document).collect()),
        serde_json::Value::Object(map) => {
            Document::Object(map.iter().map(|(k, v)| (k.clone(), to_document(v))).collect())
        }
    }
}

/// A Smithy document as JSON.
fn from_document(doc: &aws_smithy_types::Document) -> serde_json::Value {
    use aws_smithy_types::{Document, Number};
    match doc {
        Document::Null => serde_json::Value::Null,
        Document::Bool(b) => serde_json::Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => serde_json::json!(u),
        Document::Number(Number::NegInt(i)) => serde_json::json!(i),
        Document::Number(Number::Float(f)) => serde_json::json!(f),
        Document::String(s) => serde_json::Value::String(s.clone()),
        Document::Array(items) => serde_json::Value::Array(items.iter().map(from_document).collect()),
        Document::Object(map) => {
            serde_json::Value::Object(map.iter().map(|(k, v)| (k.clone(), from_document(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_survives_the_round_trip_through_a_smithy_document() {
        let v = serde_json::json!({"a": [1, -2, 2.5, "x", null, true], "b": {"c": {}}});
        assert_eq!(from_document(&to_document(&v)), v);
    }
}
