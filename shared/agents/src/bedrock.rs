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

use crate::provider::{ModelProvider, ModelRequest, ModelResponse, OnText, ProviderError};
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
}
