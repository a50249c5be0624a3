//! Amazon Bedrock Knowledge Bases `Retrieve` as a retriever backend: `POST
//! {endpoint}/knowledgebases/{id}/retrieve`, signed with SigV4 (service `bedrock`) through the
//! SDK stack's own signer and credential chain, sent with the shared HTTP client. The
//! knowledge base searches (hybrid or semantic) on AWS; its `retrievalResults` become the
//! retriever's ranked candidates, cited by chunk id.
//!
//! The endpoint is the knowledge base's `endpoint_url`, else `AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME`,
//! else `AWS_ENDPOINT_URL` (a recording server in tests), else the regional
//! `https://bedrock-agent-runtime.{region}.amazonaws.com`.

use aws_credential_types::provider::ProvideCredentials;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};
use switchyard_engine::http_client::HttpClient;
use switchyard_model::manifest::KnowledgeBaseSettings;

/// Longest result text kept, in characters.
const MAX_RESULT_CHARS: usize = 4_000;

/// One result of `Retrieve`, as a candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct KbResult {
    /// `x-amz-bedrock-kb-chunk-id`, else `<source uri>#<rank>`.
    pub chunk_id: String,
    /// The chunk text.
    pub text: String,
    /// The source document's URI.
    pub source: String,
    /// The source's file name.
    pub title: String,
    /// A `date` or `year` metadata attribute, when the documents carry one.
    pub date: Option<String>,
    /// The knowledge base's relevance score.
    pub score: f64,
}

/// Why a `Retrieve` call failed, and whether a retry can help.
#[derive(Debug, Clone, PartialEq)]
pub struct KbError {
    /// What went wrong.
    pub message: String,
    /// Whether another attempt may succeed.
    pub retryable: bool,
}

fn fail(message: impl Into<String>, retryable: bool) -> KbError {
    KbError { message: message.into(), retryable }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Call `Retrieve` for `query` and return the results best first.
/// `config` supplies the credentials (and the region unless the knowledge base names one).
pub async fn retrieve(
    http: &HttpClient,
    config: &aws_config::SdkConfig,
    kb: &KnowledgeBaseSettings,
    query: &str,
    results: usize,
    timeout: Duration,
) -> Result<Vec<KbResult>, KbError> {
    let region = kb
        .region
        .clone()
        .or_else(|| config.region().map(|r| r.to_string()))
        .ok_or_else(|| fail("no AWS region is configured", false))?;
    let credentials = config
        .credentials_provider()
        .ok_or_else(|| fail("no AWS credentials provider is configured", false))?
        .provide_credentials()
        .await
        .map_err(|e| fail(format!("no AWS credentials: {e}"), false))?;
    let endpoint = kb
        .endpoint_url
        .clone()
        .or_else(|| env("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME"))
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|| format!("https://bedrock-agent-runtime.{region}.amazonaws.com"));
    let url = format!("{}/knowledgebases/{}/retrieve", endpoint.trim_end_matches('/'), kb.id);
    let mut vector = json!({ "numberOfResults": results });
    if let Some(t) = kb.search_type {
        vector["overrideSearchType"] = json!(t.as_str());
    }
    let body = json!({
        "retrievalQuery": { "text": query },
        "retrievalConfiguration": { "vectorSearchConfiguration": vector },
    })
    .to_string()
    .into_bytes();
    let host = url.split("://").nth(1).and_then(|r| r.split('/').next()).unwrap_or_default().to_string();
    let mut headers = vec![("host".to_string(), host), ("content-type".to_string(), "application/json".to_string())];
    let identity = credentials.into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(&region)
        .name("bedrock")
        .time(SystemTime::now())
        .settings(aws_sigv4::http_request::SigningSettings::default())
        .build()
        .map_err(|e| fail(format!("cannot sign the request: {e}"), false))?
        .into();
    let signable = aws_sigv4::http_request::SignableRequest::new(
        "POST",
        url.as_str(),
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        aws_sigv4::http_request::SignableBody::Bytes(&body),
    )
    .map_err(|e| fail(format!("cannot sign the request: {e}"), false))?;
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &params)
        .map_err(|e| fail(format!("cannot sign the request: {e}"), false))?
        .into_parts();
    headers.extend(instructions.headers().map(|(k, v)| (k.to_string(), v.to_string())));
    headers.retain(|(k, _)| k != "host" && k != "content-type");
    let reply = http.post_json(&url, &headers, body, timeout).await.map_err(|e| {
        let retryable = e.is_retryable();
        fail(format!("Retrieve: {e}"), retryable)
    })?;
    if reply.status != 200 {
        let text: String = String::from_utf8_lossy(&reply.body).chars().take(300).collect();
        return Err(fail(
            format!("Retrieve answered HTTP {}: {text}", reply.status),
            reply.status == 429 || reply.status >= 500,
        ));
    }
    let value: Value =
        serde_json::from_slice(&reply.body).map_err(|e| fail(format!("Retrieve: not JSON: {e}"), false))?;
    results_of(&value)
}

/// `retrievalResults` → candidates, best first (results without text are skipped).
pub fn results_of(value: &Value) -> Result<Vec<KbResult>, KbError> {
    let items = value
        .get("retrievalResults")
        .and_then(Value::as_array)
        .ok_or_else(|| fail("Retrieve: the answer has no `retrievalResults` list", false))?;
    let mut out: Vec<KbResult> = Vec::new();
    for (n, item) in items.iter().enumerate() {
        let text = item.pointer("/content/text").and_then(Value::as_str).unwrap_or_default().trim();
        if text.is_empty() {
            continue;
        }
        let meta = |k: &str| item.get("metadata").and_then(|m| m.get(k));
        let source = item
            .pointer("/location/s3Location/uri")
            .or_else(|| item.pointer("/location/webLocation/url"))
            .or_else(|| meta("x-amz-bedrock-kb-source-uri"))
            .and_then(Value::as_str)
            .unwrap_or("knowledge-base")
            .to_string();
        let chunk_id = meta("x-amz-bedrock-kb-chunk-id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{source}#{}", n + 1));
        if out.iter().any(|r| r.chunk_id == chunk_id) {
            continue;
        }
        let date = meta("date").or_else(|| meta("year")).and_then(|d| match d {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
        out.push(KbResult {
            title: source.rsplit('/').next().unwrap_or(&source).to_string(),
            chunk_id,
            text: text.chars().take(MAX_RESULT_CHARS).collect(),
            source,
            date,
            score: item.get("score").and_then(Value::as_f64).filter(|s| s.is_finite()).unwrap_or(0.0),
        });
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_become_candidates_by_chunk_id_best_first_and_bad_answers_are_named() {
        let v = json!({"retrievalResults": [
            {"content": {"text": "B text"}, "location": {"s3Location": {"uri": "s3://kb/b.md"}}, "score": 0.4,
             "metadata": {"x-amz-bedrock-kb-chunk-id": "cb", "year": 2023}},
            {"content": {"text": "A text"}, "location": {"s3Location": {"uri": "s3://kb/a.md"}}, "score": 0.9},
            {"content": {"text": "  "}, "score": 1.0},
            {"content": {"text": "dup"}, "score": 0.3, "metadata": {"x-amz-bedrock-kb-chunk-id": "cb"}}
        ]});
        let r = results_of(&v).expect("ok");
        assert_eq!(r.iter().map(|r| r.chunk_id.as_str()).collect::<Vec<_>>(), ["s3://kb/a.md#2", "cb"]);
        assert_eq!((r[1].title.as_str(), r[1].date.as_deref()), ("b.md", Some("2023")));
        assert_eq!(
            results_of(&json!({"results": []})).expect_err("bad").message,
            "Retrieve: the answer has no `retrievalResults` list"
        );
    }
}
