//! Embedding providers for the `retriever` kind's dense list: an OpenAI-compatible
//! `POST {base_url}/embeddings`, or Amazon Bedrock `InvokeModel` with a Titan text-embedding
//! model. `switchyard index build --embeddings` embeds every chunk once and stores the
//! vectors in the index file; a retriever whose `embeddings` names a provider embeds the
//! question (and revised query) per dispatch and ranks the stored vectors by cosine.
//!
//! Every response is checked before use: one vector per input, all of the same length, finite
//! and not all zeros; anything else is an error naming what was wrong.

use serde_json::{json, Value};
use std::time::Duration;
use switchyard_core::retrieval::index::{vector_problem, StoredEmbeddings, MAX_EMBEDDING_DIMENSIONS};
use switchyard_core::retrieval::IndexFile;
use switchyard_engine::http_client::{HttpClient, HttpError};
use switchyard_model::manifest::{Provider, ProviderKind};
use tokio::sync::OnceCell;

/// Inputs per `/embeddings` request.
const OPENAI_BATCH: usize = 64;
/// Longest text sent to be embedded, in characters (a chunk is far shorter; a question is
/// bounded at 2 000).
pub const MAX_EMBED_CHARS: usize = 8_000;

/// Why embedding failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The provider cannot be used as configured.
    #[error("{0}")]
    Config(String),
    /// The request failed on the way.
    #[error("{0}")]
    Http(#[from] HttpError),
    /// The provider answered with an error status.
    #[error("the embedding provider answered HTTP {status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer is not usable embeddings.
    #[error("the embedding provider's answer is unusable: {0}")]
    Decode(String),
    /// The Bedrock SDK failed.
    #[error("Bedrock InvokeModel: {message}")]
    Sdk {
        /// What failed.
        message: String,
        /// Whether another attempt may help.
        retryable: bool,
    },
}

impl EmbedError {
    /// Whether another attempt may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            EmbedError::Http(e) => e.is_retryable(),
            EmbedError::Status { status, .. } => *status == 429 || *status >= 500,
            EmbedError::Sdk { retryable, .. } => *retryable,
            EmbedError::Config(_) | EmbedError::Decode(_) => false,
        }
    }
}

/// An embedding provider.
pub enum Embedder {
    /// `POST {base_url}/embeddings`.
    OpenAi {
        /// The shared client.
        http: HttpClient,
        /// Base URL without the trailing slash.
        base_url: String,
        /// Bearer token.
        api_key: Option<String>,
        /// The model.
        model: String,
        /// Per request.
        timeout: Duration,
    },
    /// Bedrock `InvokeModel` with a Titan text-embedding model.
    Titan {
        /// Created on first use from the environment.
        client: OnceCell<aws_sdk_bedrockruntime::Client>,
        /// Region override.
        region: Option<String>,
        /// Endpoint override (a recording server in tests).
        endpoint_url: Option<String>,
        /// The model id, e.g. `amazon.titan-embed-text-v2:0`.
        model: String,
        /// Per request.
        timeout: Duration,
    },
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("provider", &self.provider()).field("model", &self.model()).finish()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Embedder {
    /// The embedder of a declared `openai` or `bedrock` provider; `model` overrides the
    /// provider's.
    pub fn from_provider(p: &Provider, model: Option<&str>, http: &HttpClient) -> Result<Embedder, String> {
        let model = model.map(str::to_string).or_else(|| p.model.clone()).filter(|m| !m.trim().is_empty());
        let Some(model) = model else {
            return Err(format!("provider `{}` names no embedding model; set `model`", p.id));
        };
        let timeout = p.timeout.map(|d| d.as_std()).unwrap_or(Duration::from_secs(30));
        match p.kind {
            ProviderKind::Openai => {
                let base = p.base_url_env.as_deref().and_then(env).or_else(|| p.base_url.clone()).ok_or_else(|| {
                    format!(
                        "provider `{}` has no base URL: set {}",
                        p.id,
                        p.base_url_env.as_deref().unwrap_or("`base_url`")
                    )
                })?;
                Ok(Embedder::OpenAi {
                    http: http.clone(),
                    base_url: base.trim_end_matches('/').to_string(),
                    api_key: p.api_key_env.as_deref().and_then(env),
                    model,
                    timeout,
                })
            }
            ProviderKind::Bedrock => Ok(Embedder::Titan {
                client: OnceCell::new(),
                region: p.region.clone(),
                endpoint_url: p.endpoint_url.clone(),
                model,
                timeout,
            }),
            ProviderKind::Scripted => {
                Err(format!("provider `{}` is `scripted`; embeddings need an `openai` or `bedrock` provider", p.id))
            }
        }
    }

    /// A Titan embedder around an existing client (tests: a loopback endpoint).
    pub fn titan_from_client(client: aws_sdk_bedrockruntime::Client, model: &str, timeout: Duration) -> Embedder {
        Embedder::Titan {
            client: OnceCell::new_with(Some(client)),
            region: None,
            endpoint_url: None,
            model: model.to_string(),
            timeout,
        }
    }

    /// `openai` or `bedrock`, as stored in an index.
    pub fn provider(&self) -> &'static str {
        match self {
            Embedder::OpenAi { .. } => "openai",
            Embedder::Titan { .. } => "bedrock",
        }
    }

    /// The model.
    pub fn model(&self) -> &str {
        match self {
            Embedder::OpenAi { model, .. } | Embedder::Titan { model, .. } => model,
        }
    }

    /// One embedding per text, in order, all of one length.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Some((n, _)) = texts.iter().enumerate().find(|(_, t)| t.trim().is_empty()) {
            return Err(EmbedError::Config(format!("text {n} to embed is empty")));
        }
        if let Some((n, _)) = texts.iter().enumerate().find(|(_, t)| t.chars().count() > MAX_EMBED_CHARS) {
            return Err(EmbedError::Config(format!("text {n} to embed is longer than {MAX_EMBED_CHARS} characters")));
        }
        let mut out = Vec::with_capacity(texts.len());
        match self {
            Embedder::OpenAi { http, base_url, api_key, model, timeout } => {
                for batch in texts.chunks(OPENAI_BATCH) {
                    let body = json!({ "model": model, "input": batch }).to_string().into_bytes();
                    let headers: Vec<(String, String)> =
                        api_key.iter().map(|k| ("authorization".to_string(), format!("Bearer {k}"))).collect();
                    let reply = http.post_json(&format!("{base_url}/embeddings"), &headers, body, *timeout).await?;
                    if reply.status != 200 {
                        let text = String::from_utf8_lossy(&reply.body);
                        return Err(EmbedError::Status {
                            status: reply.status,
                            body: text.chars().take(300).collect(),
                        });
                    }
                    let value: Value = serde_json::from_slice(&reply.body)
                        .map_err(|e| EmbedError::Decode(format!("not JSON: {e}")))?;
                    out.extend(openai_vectors(&value, batch.len())?);
                }
            }
            Embedder::Titan { client, region, endpoint_url, model, timeout } => {
                let client = titan_client(client, region, endpoint_url).await;
                for text in texts {
                    let body = json!({ "inputText": text }).to_string().into_bytes();
                    let call = client
                        .invoke_model()
                        .model_id(model.clone())
                        .content_type("application/json")
                        .accept("application/json")
                        .body(aws_sdk_bedrockruntime::primitives::Blob::new(body))
                        .send();
                    let output = tokio::time::timeout(*timeout, call)
                        .await
                        .map_err(|_| EmbedError::Http(HttpError::Timeout(timeout.as_millis() as u64)))?
                        .map_err(|e| {
                            let retryable = e.as_service_error().is_none_or(|s| {
                                s.is_throttling_exception()
                                    || s.is_internal_server_exception()
                                    || s.is_service_unavailable_exception()
                                    || s.is_model_timeout_exception()
                            });
                            EmbedError::Sdk {
                                message: aws_sdk_bedrockruntime::error::DisplayErrorContext(&e).to_string(),
                                retryable,
                            }
                        })?;
                    let value: Value = serde_json::from_slice(output.body().as_ref())
                        .map_err(|e| EmbedError::Decode(format!("not JSON: {e}")))?;
                    out.push(titan_vector(&value)?);
                }
            }
        }
        let dims = out.first().map(Vec::len).unwrap_or(0);
        if dims == 0 || dims > MAX_EMBEDDING_DIMENSIONS {
            return Err(EmbedError::Decode(format!("embeddings of {dims} dimensions; 1 – {MAX_EMBEDDING_DIMENSIONS}")));
        }
        for (n, v) in out.iter().enumerate() {
            if let Some(p) = vector_problem(v, dims) {
                return Err(EmbedError::Decode(format!("embedding {n} {p}")));
            }
        }
        Ok(out)
    }
}

/// The Bedrock client, created on first use from the environment (SDK retries off: the
/// tier's policy retries).
async fn titan_client<'a>(
    client: &'a OnceCell<aws_sdk_bedrockruntime::Client>,
    region: &Option<String>,
    endpoint_url: &Option<String>,
) -> &'a aws_sdk_bedrockruntime::Client {
    client
        .get_or_init(|| async {
            let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .retry_config(aws_config::retry::RetryConfig::disabled());
            if let Some(region) = region {
                loader = loader.region(aws_config::Region::new(region.clone()));
            }
            if let Some(url) = endpoint_url {
                loader = loader.endpoint_url(url.clone());
            }
            aws_sdk_bedrockruntime::Client::new(&loader.load().await)
        })
        .await
}

/// Embed every chunk of `file` and store the vectors in it.
pub async fn embed_index(mut file: IndexFile, embedder: &Embedder) -> Result<IndexFile, EmbedError> {
    let texts: Vec<String> = file.chunks.iter().map(|c| c.text.clone()).collect();
    let vectors = embedder.embed(&texts).await?;
    let dimensions = vectors.first().map(Vec::len).unwrap_or(0);
    file.embeddings = Some(StoredEmbeddings {
        provider: embedder.provider().to_string(),
        model: embedder.model().to_string(),
        dimensions,
        vectors,
    });
    Ok(file)
}

fn floats(v: &Value, what: &str) -> Result<Vec<f32>, EmbedError> {
    let items = v.as_array().ok_or_else(|| EmbedError::Decode(format!("{what} is not a list of numbers")))?;
    items
        .iter()
        .map(|x| x.as_f64().map(|f| f as f32))
        .collect::<Option<Vec<f32>>>()
        .ok_or_else(|| EmbedError::Decode(format!("{what} holds something that is not a number")))
}

/// The vectors of an OpenAI `/embeddings` answer (`data[].embedding`, ordered by `index`).
fn openai_vectors(value: &Value, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let data =
        value.get("data").and_then(Value::as_array).ok_or_else(|| EmbedError::Decode("no `data` list".into()))?;
    if data.len() != expected {
        return Err(EmbedError::Decode(format!("{} embeddings for {expected} inputs", data.len())));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (n, item) in data.iter().enumerate() {
        let index = item.get("index").and_then(Value::as_u64).map(|i| i as usize).unwrap_or(n);
        let slot = slots
            .get_mut(index)
            .ok_or_else(|| EmbedError::Decode(format!("`data[{n}].index` {index} is out of range")))?;
        if slot.is_some() {
            return Err(EmbedError::Decode(format!("`data[{n}].index` {index} appears twice")));
        }
        let v = item.get("embedding").ok_or_else(|| EmbedError::Decode(format!("`data[{n}]` has no `embedding`")))?;
        *slot = Some(floats(v, &format!("`data[{n}].embedding`"))?);
    }
    Ok(slots.into_iter().flatten().collect())
}

/// The vector of a Titan text-embedding answer (`embedding`).
fn titan_vector(value: &Value) -> Result<Vec<f32>, EmbedError> {
    let v = value.get("embedding").ok_or_else(|| EmbedError::Decode("no `embedding`".into()))?;
    floats(v, "`embedding`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_answers_are_ordered_by_index_and_bad_ones_are_named() {
        let v = json!({"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]});
        assert_eq!(openai_vectors(&v, 2).expect("ok"), vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        for (value, expected, message) in [
            (json!({}), 1, "no `data` list"),
            (json!({"data": [{"embedding": [1.0]}]}), 2, "1 embeddings for 2 inputs"),
            (json!({"data": [{"index": 5, "embedding": [1.0]}]}), 1, "`data[0].index` 5 is out of range"),
            (
                json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
                2,
                "`data[1].index` 0 appears twice",
            ),
            (json!({"data": [{"index": 0}]}), 1, "`data[0]` has no `embedding`"),
            (json!({"data": [{"embedding": "x"}]}), 1, "`data[0].embedding` is not a list of numbers"),
            (json!({"data": [{"embedding": [1, "x"]}]}), 1, "`data[0].embedding` holds something that is not a number"),
        ] {
            let e = openai_vectors(&value, expected).expect_err("bad");
            assert_eq!(e.to_string(), format!("the embedding provider's answer is unusable: {message}"), "{value}");
        }
        assert_eq!(titan_vector(&json!({"embedding": [0.5], "inputTextTokenCount": 2})).expect("ok"), vec![0.5]);
        assert!(titan_vector(&json!({"vector": [0.5]})).is_err());
    }
}
