//! One HTTP client per process (hyper over rustls), shared by the `http` agents and the
//! OpenAI-compatible provider.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// Why an HTTP exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL or a header could not be used; retrying cannot help.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// No complete response within the timeout; a retry may help.
    #[error("no response within {0} ms")]
    Timeout(u64),
    /// Connecting, sending or reading failed; a retry may help.
    #[error("transport error: {message}")]
    Transport {
        /// What failed.
        message: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl HttpError {
    /// Whether another attempt may succeed.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, HttpError::Invalid(_))
    }
}

/// A response: status, `Retry-After` (seconds) when present, body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpReply {
    /// HTTP status code.
    pub status: u16,
    /// `Retry-After` in seconds, when the server sent one.
    pub retry_after: Option<Duration>,
    /// The body.
    pub body: Bytes,
}

/// The hyper client behind [`HttpClient`].
type Inner = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A pooled HTTP/1.1 client for `http://` and `https://` (native roots; with none available,
/// only plain HTTP works). Built on its first request, not when it is created: loading the
/// system's root certificates is more than half of a function's init otherwise (about 37
/// million instructions of 65 in a release router, callgrind), and the router, the
/// synthesizer and a worker whose agents make no HTTP call never need it. Clones share one
/// client.
#[derive(Clone)]
pub struct HttpClient {
    inner: std::sync::Arc<std::sync::OnceLock<Inner>>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

impl Default for HttpClient {
    fn default() -> Self {
        HttpClient::new()
    }
}

impl HttpClient {
    /// A client, built on its first request (create it once per process).
    pub fn new() -> HttpClient {
        HttpClient { inner: std::sync::Arc::new(std::sync::OnceLock::new()) }
    }

    /// The hyper client, built now if this is the first request.
    fn client(&self) -> &Inner {
        self.inner.get_or_init(Self::build)
    }

    fn build() -> Inner {
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match builder.with_provider_and_native_roots(provider.clone()) {
            Ok(b) => b,
            Err(_) => {
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map(|b| b.with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth());
                match config {
                    Ok(c) => hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(c),
                    Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(
                        rustls::ClientConfig::builder_with_protocol_versions(&[])
                            .with_root_certificates(rustls::RootCertStore::empty())
                            .with_no_client_auth(),
                    ),
                }
            }
        };
        let connector = builder.https_or_http().enable_http1().build();
        Client::builder(TokioExecutor::new()).build(connector)
    }

    /// POST `body` to `url`. A failure after the connection was made and before any answer
    /// (a pooled connection the server had already closed: "connection closed before
    /// message completed", a reset) is sent once more, on a new connection, before it counts;
    /// a failure to connect is not (nothing listens there). A transport failure names the
    /// URL and keeps its cause ("connection refused", "reset by peer").
    async fn send(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: Bytes,
        accept: &str,
    ) -> Result<hyper::Response<hyper::body::Incoming>, HttpError> {
        let first = self.client().request(json_post(url, headers, body.clone(), accept)?).await;
        let error = match first {
            Ok(response) => return Ok(response),
            Err(e) if e.is_connect() => return Err(transport(format!("POST {url}"), e)),
            Err(e) => e,
        };
        tracing::info!(url, error = %causes(&error), "the request failed before any answer; sending it once more on a new connection");
        self.client()
            .request(json_post(url, headers, body, accept)?)
            .await
            .map_err(|e| transport(format!("POST {url} (sent twice)"), e))
    }

    /// POST `body` as JSON to `url` with `headers`; the whole exchange within `timeout`.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<HttpReply, HttpError> {
        let exchange = async {
            let response = self.send(url, headers, Bytes::from(body), "application/json").await?;
            let status = response.status().as_u16();
            let retry_after = retry_after(response.headers());
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| transport(format!("reading the response of {url}"), e))?
                .to_bytes();
            Ok(HttpReply { status, retry_after, body })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| HttpError::Timeout(timeout.as_millis() as u64))?
    }

    /// GET `url` (a JWKS document); the whole exchange within `timeout`, a body longer than
    /// `max_bytes` is a transport error.
    pub async fn get(&self, url: &str, timeout: Duration, max_bytes: usize) -> Result<HttpReply, HttpError> {
        let request = hyper::Request::get(url)
            .header("accept", "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| HttpError::Invalid(format!("GET {url}: {e}")))?;
        let exchange = async {
            let response = self.client().request(request).await.map_err(|e| transport(format!("GET {url}"), e))?;
            let status = response.status().as_u16();
            let retry_after = retry_after(response.headers());
            let body = http_body_util::Limited::new(response.into_body(), max_bytes)
                .collect()
                .await
                .map_err(|source| HttpError::Transport {
                    message: format!("reading the response of {url} (at most {max_bytes} bytes): {source}"),
                    source,
                })?
                .to_bytes();
            Ok(HttpReply { status, retry_after, body })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| HttpError::Timeout(timeout.as_millis() as u64))?
    }

    /// POST `body` as JSON to `url` and hand each piece of a 2xx response's body to
    /// `on_chunk` as it arrives (a streamed answer); the whole exchange within `timeout`. The
    /// reply's body is empty for a 2xx answer and the error body otherwise.
    pub async fn post_json_streaming(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
        timeout: Duration,
        on_chunk: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<HttpReply, HttpError> {
        let exchange = async {
            let response = self.send(url, headers, Bytes::from(body), "text/event-stream").await?;
            let status = response.status().as_u16();
            let retry_after = retry_after(response.headers());
            let mut incoming = response.into_body();
            let mut error_body = Vec::new();
            while let Some(frame) = incoming.frame().await {
                let frame = frame.map_err(|e| transport(format!("reading the response of {url}"), e))?;
                if let Ok(data) = frame.into_data() {
                    if (200..300).contains(&status) {
                        on_chunk(&data);
                    } else if error_body.len() < 64 * 1024 {
                        error_body.extend_from_slice(&data);
                    }
                }
            }
            Ok(HttpReply { status, retry_after, body: Bytes::from(error_body) })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| HttpError::Timeout(timeout.as_millis() as u64))?
    }
}

/// A response with its headers (names lower-case).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpResponse {
    /// HTTP status code.
    pub status: u16,
    /// The response headers, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body (as far as it was read: see [`HttpClient::request`]).
    pub body: Bytes,
}

impl HttpResponse {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

impl HttpClient {
    /// Send `method` to `url` with `headers` and `body`; the whole exchange within `timeout`.
    /// The body is read until it ends, or until `enough` says the bytes so far are enough (a
    /// server-sent event stream that stays open after the answer it carries). A failure before
    /// any answer on a pooled connection is sent once more, as [`HttpClient::post_json`] does.
    pub async fn request(
        &self,
        method: &str,
        url: &str,
        headers: &[(String, String)],
        body: Option<Vec<u8>>,
        timeout: Duration,
        enough: &(dyn Fn(&[u8]) -> bool + Send + Sync),
    ) -> Result<HttpResponse, HttpError> {
        let body = Bytes::from(body.unwrap_or_default());
        let build = || -> Result<hyper::Request<Full<Bytes>>, HttpError> {
            let mut request = hyper::Request::builder().method(method).uri(url);
            for (k, v) in headers {
                request = request.header(k.as_str(), v.as_str());
            }
            request.body(Full::new(body.clone())).map_err(|e| HttpError::Invalid(e.to_string()))
        };
        let exchange = async {
            let response = match self.client().request(build()?).await {
                Ok(r) => r,
                Err(e) if e.is_connect() => return Err(transport(format!("{method} {url}"), e)),
                Err(e) => {
                    tracing::info!(url, error = %causes(&e), "the request failed before any answer; sending it once more on a new connection");
                    self.client()
                        .request(build()?)
                        .await
                        .map_err(|e| transport(format!("{method} {url} (sent twice)"), e))?
                }
            };
            let status = response.status().as_u16();
            let headers: Vec<(String, String)> = response
                .headers()
                .iter()
                .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_string(), v.to_string())))
                .collect();
            let mut incoming = response.into_body();
            let mut read = Vec::new();
            while let Some(frame) = incoming.frame().await {
                let frame = frame.map_err(|e| transport(format!("reading the response of {url}"), e))?;
                if let Ok(data) = frame.into_data() {
                    read.extend_from_slice(&data);
                    if enough(&read) {
                        break;
                    }
                }
            }
            Ok(HttpResponse { status, headers, body: Bytes::from(read) })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| HttpError::Timeout(timeout.as_millis() as u64))?
    }
}

/// A transport error: what failed, with the chain of causes in its text.
fn transport(what: String, e: impl std::error::Error + Send + Sync + 'static) -> HttpError {
    HttpError::Transport { message: format!("{what}: {}", causes(&e)), source: Box::new(e) }
}

/// An error and its sources, each once: "client error (SendRequest): connection closed
/// before message completed".
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    parts.join(": ")
}

/// A POST of a JSON `body` to `url` with `headers`, accepting `accept`.
fn json_post(
    url: &str,
    headers: &[(String, String)],
    body: Bytes,
    accept: &str,
) -> Result<hyper::Request<Full<Bytes>>, HttpError> {
    let mut request = hyper::Request::post(url).header("content-type", "application/json").header("accept", accept);
    for (k, v) in headers {
        request = request.header(k.as_str(), v.as_str());
    }
    request.body(Full::new(body)).map_err(|e| HttpError::Invalid(e.to_string()))
}

/// A `retry-after` header in seconds (a finite, non-negative number), if the reply has one.
fn retry_after(headers: &hyper::HeaderMap) -> Option<Duration> {
    headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}
