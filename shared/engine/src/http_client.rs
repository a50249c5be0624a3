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

    /// Send `request` (a POST to `url`); a transport failure names the URL.
    async fn send(
        &self,
        request: hyper::Request<Full<Bytes>>,
        url: &str,
    ) -> Result<hyper::Response<hyper::body::Incoming>, HttpError> {
        self.client()
            .request(request)
            .await
            .map_err(|e| HttpError::Transport { message: format!("POST {url}"), source: Box::new(e) })
    }

    /// POST `body` as JSON to `url` with `headers`; the whole exchange within `timeout`.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<HttpReply, HttpError> {
        let request = json_post(url, headers, body, "application/json")?;
        let exchange = async {
            let response = self.send(request, url).await?;
            let status = response.status().as_u16();
            let retry_after = retry_after(response.headers());
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| HttpError::Transport {
                    message: format!("reading the response of {url}"),
                    source: Box::new(e),
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
        let request = json_post(url, headers, body, "text/event-stream")?;
        let exchange = async {
            let response = self.send(request, url).await?;
            let status = response.status().as_u16();
            let retry_after = retry_after(response.headers());
            let mut incoming = response.into_body();
            let mut error_body = Vec::new();
            while let Some(frame) = incoming.frame().await {
                let frame = frame.map_err(|e| HttpError::Transport {
                    message: format!("reading the response of {url}"),
                    source: Box::new(e),
                })?;
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

/// A POST of a JSON `body` to `url` with `headers`, accepting `accept`.
fn json_post(
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
    accept: &str,
) -> Result<hyper::Request<Full<Bytes>>, HttpError> {
    let mut request = hyper::Request::post(url).header("content-type", "application/json").header("accept", accept);
    for (k, v) in headers {
        request = request.header(k.as_str(), v.as_str());
    }
    request.body(Full::new(Bytes::from(body))).map_err(|e| HttpError::Invalid(e.to_string()))
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
