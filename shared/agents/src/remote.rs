//! `http` and `lambda` agents: the dispatch goes out as the E2I design's dispatch envelope
//! (`{"dispatch": …}`), the answer comes back as a handoff (`{"handoff": …}`, a bare handoff,
//! or a result-shaped object) and is validated by the worker like every agent's.
//!
//! Status codes decide retries: 429, 408 and 5xx (and a function error of the Lambda
//! runtime) are recoverable; other 4xx are not. The HTTP call is bounded by the dispatch's
//! timeout, inside the worker's own per-attempt timeout.

use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use switchyard_engine::http_client::HttpClient;
use switchyard_engine::ports::{AgentError, AgentReply};
use switchyard_model::contracts::{AgentDispatch, DispatchEnvelope};
use switchyard_model::manifest::{Agent, HttpSettings, LambdaSettings};

fn envelope(dispatch: &AgentDispatch) -> Result<Vec<u8>, AgentError> {
    serde_json::to_vec(&DispatchEnvelope { dispatch: dispatch.clone() })
        .map_err(|e| AgentError { message: format!("cannot encode the dispatch: {e}"), recoverable: false })
}

fn answer(body: &[u8]) -> AgentReply {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.is_object() => AgentReply::Answer(v),
        _ => AgentReply::Malformed(String::from_utf8_lossy(body).into_owned()),
    }
}

/// Runs `http` agents on the process's HTTP client.
#[derive(Debug, Clone)]
pub struct HttpAgents {
    http: HttpClient,
    /// Bearer tokens read from the environment at start-up, per variable name.
    tokens: BTreeMap<String, String>,
}

impl HttpAgents {
    /// Read the bearer tokens the manifest's `http` agents name, once.
    pub fn new(manifest: &switchyard_model::manifest::Manifest, http: &HttpClient) -> HttpAgents {
        let tokens = manifest
            .agents
            .iter()
            .filter_map(|a| a.http.as_ref()?.bearer_env.clone())
            .filter_map(|name| std::env::var(&name).ok().map(|v| (name, v)))
            .collect();
        HttpAgents { http: http.clone(), tokens }
    }

    /// Run one attempt of an `http` agent.
    pub async fn run(
        &self,
        agent: &Agent,
        settings: &HttpSettings,
        dispatch: &AgentDispatch,
    ) -> Result<AgentReply, AgentError> {
        let mut headers: Vec<(String, String)> = settings.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if let Some(name) = &settings.bearer_env {
            match self.tokens.get(name) {
                Some(token) => headers.push(("authorization".into(), format!("Bearer {token}"))),
                None => {
                    return Err(AgentError {
                        message: format!("{} is not set; agent `{}` needs its bearer token", name, agent.id),
                        recoverable: false,
                    })
                }
            }
        }
        let timeout = Duration::from_millis(dispatch.routing.timeout_ms.max(1));
        let reply = self
            .http
            .post_json(&settings.url, &headers, envelope(dispatch)?, timeout)
            .await
            .map_err(|e| AgentError { message: format!("{}: {e}", agent.id), recoverable: e.is_retryable() })?;
        match reply.status {
            200..=299 => Ok(answer(&reply.body)),
            status => {
                let body: String = String::from_utf8_lossy(&reply.body).chars().take(300).collect();
                Err(AgentError {
                    message: format!("{} answered HTTP {status}: {body}", settings.url),
                    recoverable: status == 429 || status == 408 || status >= 500,
                })
            }
        }
    }
}

/// Lambda clients by (region, endpoint).
type LambdaClients = BTreeMap<(Option<String>, Option<String>), aws_sdk_lambda::Client>;

/// Runs `lambda` agents; one SDK client per region / endpoint, created on first use.
#[derive(Debug, Default)]
pub struct LambdaAgents {
    clients: tokio::sync::Mutex<LambdaClients>,
    fixed: Option<aws_sdk_lambda::Client>,
}

impl LambdaAgents {
    /// Use this client for every `lambda` agent (its configuration decides region, endpoint
    /// and credentials).
    pub fn with_client(client: aws_sdk_lambda::Client) -> LambdaAgents {
        LambdaAgents { clients: Default::default(), fixed: Some(client) }
    }

    async fn client(&self, settings: &LambdaSettings) -> aws_sdk_lambda::Client {
        if let Some(c) = &self.fixed {
            return c.clone();
        }
        let key = (settings.region.clone(), settings.endpoint_url.clone());
        let mut clients = self.clients.lock().await;
        if let Some(c) = clients.get(&key) {
            return c.clone();
        }
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = &settings.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        if let Some(url) = &settings.endpoint_url {
            loader = loader.endpoint_url(url.clone());
        }
        let client = aws_sdk_lambda::Client::new(&loader.load().await);
        clients.insert(key, client.clone());
        client
    }

    /// Run one attempt of a `lambda` agent: a synchronous invocation.
    pub async fn run(
        &self,
        agent: &Agent,
        settings: &LambdaSettings,
        dispatch: &AgentDispatch,
    ) -> Result<AgentReply, AgentError> {
        let client = self.client(settings).await;
        let mut call = client
            .invoke()
            .function_name(settings.function.clone())
            .payload(aws_sdk_lambda::primitives::Blob::new(envelope(dispatch)?));
        if let Some(q) = &settings.qualifier {
            call = call.qualifier(q.clone());
        }
        let output = call.send().await.map_err(|e| {
            let retryable = match &e {
                aws_sdk_lambda::error::SdkError::ServiceError(s) => {
                    s.err().is_too_many_requests_exception() || s.err().is_service_exception()
                }
                _ => true,
            };
            AgentError {
                message: format!(
                    "invoking {} for `{}`: {}",
                    settings.function,
                    agent.id,
                    aws_sdk_lambda::error::DisplayErrorContext(&e)
                ),
                recoverable: retryable,
            }
        })?;
        let body = output.payload().map(|b| b.as_ref().to_vec()).unwrap_or_default();
        if let Some(kind) = output.function_error() {
            let text: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            return Err(AgentError {
                message: format!("{} raised {kind}: {text}", settings.function),
                recoverable: true,
            });
        }
        Ok(answer(&body))
    }
}
