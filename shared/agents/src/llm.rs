//! `llm` agents: a system prompt, a prompt rendered from the dispatch's fields, a JSON output
//! schema, a model and a provider.
//!
//! Providers ([`ModelProvider`]) are built once per process from the manifest's `providers`
//! and shared by every agent that names them:
//! - [`OpenAiCompatible`]: `POST {base_url}/chat/completions` with a JSON-schema
//!   `response_format`, base URL and key from the environment;
//! - [`Bedrock`]: the Converse API through `aws-sdk-bedrockruntime`;
//! - [`ScriptedModel`]: replies from the manifest keyed by output-schema name (the negotiation design's
//!   routing mock), so experts running in parallel each get their own answer, offline.
//!
//! A throttled request (429 / `ThrottlingException`) is retried inside the attempt with
//! doubling waits (or the server's `Retry-After`); other provider errors end the attempt as a
//! recoverable or non-recoverable [`AgentError`], and the tier's retry policy takes over. The
//! answer is parsed and checked against the schema; anything else becomes
//! [`AgentReply::Malformed`] with the raw text, which the worker records as a failed handoff.

use super::schema;
pub use crate::openai::OpenAiCompatible;
pub use crate::provider::{
    ModelProvider, ModelRequest, ModelResponse, ModelTurn, OnText, ProviderError, ToolOffer, ToolReply, ToolRequest,
    Turn,
};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::http_client::HttpClient;
use switchyard_engine::ports::{AgentError, AgentReply, TokenSink};
use switchyard_model::contracts::{AgentDispatch, Evidence};
use switchyard_model::manifest::{
    Agent, LlmSettings, Manifest, Provider, ProviderKind, ScriptedModelReply, UNKNOWN_CONFIDENCE,
};

/// Environment variable naming a provider every `llm` agent on a `scripted` provider uses
/// instead (run the offline examples against a real model).
pub const PROVIDER_OVERRIDE_ENV: &str = "SWITCHYARD_MODEL_PROVIDER";

// ------------------------------------------------------------------------------------------
// Scripted
// ------------------------------------------------------------------------------------------

/// Replies from the manifest keyed by output-schema name: the first reply whose `when` text
/// occurs in the prompt (or that has no `when`). Streamed, the reply comes word by word, one
/// word every `pace` (the provider's `pace` setting), so tests and demos show real timing.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    responses: BTreeMap<String, Vec<ScriptedModelReply>>,
    pace: Duration,
}

impl ScriptedModel {
    /// A scripted model with these replies, streaming instantly.
    pub fn new(responses: BTreeMap<String, Vec<ScriptedModelReply>>) -> ScriptedModel {
        ScriptedModel { responses, pace: Duration::ZERO }
    }

    /// Stream one word every `pace`.
    pub fn with_pace(mut self, pace: Duration) -> ScriptedModel {
        self.pace = pace;
        self
    }
}

#[async_trait]
impl ModelProvider for ScriptedModel {
    async fn stream(&self, request: &ModelRequest, on_text: OnText<'_>) -> Result<ModelResponse, ProviderError> {
        let response = self.complete(request).await?;
        for piece in super::streaming::word_pieces(&response.text) {
            if !self.pace.is_zero() {
                tokio::time::sleep(self.pace).await;
            }
            on_text(piece);
        }
        Ok(response)
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        turns: &[Turn],
        tools: &[ToolOffer],
    ) -> Result<ModelTurn, ProviderError> {
        // The rules read the prompt and every result so far; a rule with calls applies once
        // per conversation (and not at all once no tools are offered).
        let mut seen = request.prompt.clone();
        let mut made: Vec<(String, Value)> = Vec::new();
        for turn in turns {
            match turn {
                Turn::Calls { calls, .. } => {
                    made.extend(calls.iter().map(|c| (c.name.clone(), c.arguments.clone().unwrap_or_default())))
                }
                Turn::Results(results) => {
                    for r in results {
                        seen.push('\n');
                        seen.push_str(&r.content);
                    }
                }
            }
        }
        let as_made = |r: &ScriptedModelReply| {
            r.tool_calls.iter().all(|c| {
                let name = switchyard_model::manifest::provider_name(&c.tool);
                made.iter().any(|(n, a)| *n == name && *a == c.arguments)
            })
        };
        let reply = self
            .responses
            .get(&request.schema_name)
            .and_then(|replies| {
                replies.iter().find(|r| {
                    r.when.as_ref().is_none_or(|w| seen.contains(w.as_str()))
                        && (r.tool_calls.is_empty() || (!tools.is_empty() && !as_made(r)))
                })
            })
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "the scripted model has no reply for schema `{}` and this conversation",
                    request.schema_name
                ))
            })?;
        let calls: Vec<ToolRequest> = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(n, c)| ToolRequest {
                id: format!("scripted-{}-{n}", made.len()),
                name: switchyard_model::manifest::provider_name(&c.tool),
                raw_arguments: c.arguments.to_string(),
                arguments: Ok(c.arguments.clone()),
            })
            .collect();
        let text = match (&reply.text, &reply.reply) {
            (Some(t), _) => t.clone(),
            (None, Some(v)) => v.to_string(),
            (None, None) => String::new(),
        };
        let estimate = |s: &str| (s.len() as u64).div_ceil(4);
        Ok(ModelTurn {
            response: ModelResponse {
                model: if request.model.is_empty() { "scripted".into() } else { request.model.clone() },
                input_tokens: if reply.input_tokens > 0 { reply.input_tokens } else { estimate(&seen) },
                output_tokens: if reply.output_tokens > 0 { reply.output_tokens } else { estimate(&text) + 1 },
                cache_hit: false,
                text,
            },
            calls,
        })
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let reply = self
            .responses
            .get(&request.schema_name)
            .and_then(|replies| {
                replies.iter().find(|r| {
                    r.tool_calls.is_empty() && r.when.as_ref().is_none_or(|w| request.prompt.contains(w.as_str()))
                })
            })
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "the scripted model has no reply for schema `{}` and this prompt",
                    request.schema_name
                ))
            })?;
        let text = match (&reply.text, &reply.reply) {
            (Some(t), _) => t.clone(),
            (None, Some(v)) => v.to_string(),
            (None, None) => String::new(),
        };
        let estimate = |s: &str| (s.len() as u64).div_ceil(4);
        Ok(ModelResponse {
            model: if request.model.is_empty() { "scripted".into() } else { request.model.clone() },
            input_tokens: if reply.input_tokens > 0 {
                reply.input_tokens
            } else {
                estimate(&request.system) + estimate(&request.prompt)
            },
            output_tokens: if reply.output_tokens > 0 { reply.output_tokens } else { estimate(&text) },
            cache_hit: false,
            text,
        })
    }
}

// ------------------------------------------------------------------------------------------
// Agents
// ------------------------------------------------------------------------------------------

/// A provider as built from the manifest: usable, or why not (reported at init by
/// [`LlmAgents::problems`] and again by every call).
#[derive(Clone)]
enum Built {
    Ready(Arc<dyn ModelProvider>, Box<Provider>),
    Unusable(String),
}

/// Runs `llm` agents with the providers built once from the manifest.
#[derive(Clone)]
pub struct LlmAgents {
    providers: BTreeMap<String, Built>,
    /// `SWITCHYARD_MODEL_PROVIDER`, when it names a usable provider.
    override_provider: Option<String>,
    /// `SWITCHYARD_MODEL_PROVIDER`, when it names no usable provider.
    bad_override: Option<String>,
    /// Providers some `llm` agent of the manifest uses.
    used: std::collections::BTreeSet<String>,
    /// The manifest's tool sources.
    tools: crate::tools::ToolBox,
}

impl std::fmt::Debug for LlmAgents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmAgents")
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Read an environment variable once, at start-up.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl LlmAgents {
    /// Build every declared provider (Bedrock clients are created on first use, from the
    /// environment's AWS configuration).
    pub fn new(manifest: &Manifest, http: &HttpClient) -> LlmAgents {
        let mut providers = BTreeMap::new();
        for p in &manifest.providers {
            let timeout = p.timeout.map(|d| d.as_std()).unwrap_or(Duration::from_secs(60));
            let built = match p.kind {
                ProviderKind::Scripted => Built::Ready(
                    Arc::new(
                        ScriptedModel::new(p.responses.clone())
                            .with_pace(p.pace.map(|d| d.as_std()).unwrap_or_default()),
                    ),
                    Box::new(p.clone()),
                ),
                ProviderKind::Openai => {
                    let base = p.base_url_env.as_deref().and_then(env).or_else(|| p.base_url.clone());
                    match base {
                        Some(base) => {
                            let key = p.api_key_env.as_deref().and_then(env);
                            Built::Ready(
                                Arc::new(
                                    OpenAiCompatible::new(http.clone(), &base, key, timeout)
                                        .with_structured_output(p.structured_output),
                                ),
                                Box::new(p.clone()),
                            )
                        }
                        None => Built::Unusable(format!(
                            "provider `{}` has no base URL: set {}",
                            p.id,
                            p.base_url_env.as_deref().unwrap_or("`base_url`")
                        )),
                    }
                }
                ProviderKind::Bedrock => Built::Ready(
                    Arc::new(super::bedrock::Bedrock::new(p.region.clone(), p.endpoint_url.clone(), timeout)),
                    Box::new(p.clone()),
                ),
            };
            providers.insert(p.id.clone(), built);
        }
        let requested = env(PROVIDER_OVERRIDE_ENV);
        let override_provider = requested.clone().filter(|id| matches!(providers.get(id), Some(Built::Ready(..))));
        let bad_override = requested.filter(|_| override_provider.is_none()).map(|id| {
            let why = match providers.get(&id) {
                Some(Built::Unusable(why)) => why.clone(),
                _ => format!("`{id}` is not declared in `providers`"),
            };
            format!("{PROVIDER_OVERRIDE_ENV}={id} is ignored ({why}); the scripted providers stay in use")
        });
        let used = manifest
            .agents
            .iter()
            .filter_map(|a| a.llm.as_ref())
            .map(|s| match (&override_provider, manifest.provider(&s.provider)) {
                (Some(id), Some(p)) if p.kind == ProviderKind::Scripted => id.clone(),
                _ => s.provider.clone(),
            })
            .collect();
        LlmAgents {
            providers,
            override_provider,
            bad_override,
            used,
            tools: crate::tools::ToolBox::new(manifest, http),
        }
    }

    /// Use this provider for every `llm` agent, whatever the manifest says (tests, or a real
    /// model for the offline examples).
    pub fn with_provider(mut self, id: &str, provider: Arc<dyn ModelProvider>, settings: Provider) -> LlmAgents {
        self.providers.insert(id.to_string(), Built::Ready(provider, Box::new(settings)));
        self
    }

    /// Use these tool sources (tests: environment variables read from a map).
    pub fn with_tools(mut self, tools: crate::tools::ToolBox) -> LlmAgents {
        self.tools = tools;
        self
    }

    /// The tool sources.
    pub fn tools(&self) -> &crate::tools::ToolBox {
        &self.tools
    }

    /// Providers an agent uses that cannot be used as configured, for the function's init to
    /// report (a declared provider no agent uses is not a problem).
    pub fn problems(&self) -> Vec<String> {
        self.providers
            .iter()
            .filter(|(id, _)| self.used.contains(*id))
            .filter_map(|(_, b)| match b {
                Built::Unusable(why) => Some(why.clone()),
                Built::Ready(..) => None,
            })
            .chain(self.bad_override.clone())
            .collect()
    }

    fn provider_for(&self, settings: &LlmSettings) -> Result<(&Arc<dyn ModelProvider>, &Provider), AgentError> {
        let declared = self.providers.get(&settings.provider);
        let chosen = match (&self.override_provider, declared) {
            (Some(id), Some(Built::Ready(_, p))) if p.kind == ProviderKind::Scripted => self.providers.get(id),
            _ => declared,
        };
        match chosen {
            Some(Built::Ready(client, p)) => Ok((client, &**p)),
            Some(Built::Unusable(why)) => Err(AgentError { message: why.clone(), recoverable: false }),
            None => Err(AgentError {
                message: format!("provider `{}` is not declared", settings.provider),
                recoverable: false,
            }),
        }
    }

    /// Run attempt `attempt` (from 1) of an `llm` agent.
    pub async fn run(
        &self,
        agent: &Agent,
        settings: &LlmSettings,
        dispatch: &AgentDispatch,
        attempt: u32,
    ) -> Result<AgentReply, AgentError> {
        self.run_with_tools(agent, settings, dispatch, attempt, None, None).await
    }

    /// Run attempt `attempt` of an `llm` agent with tools: the tool loop, its calls recorded
    /// and logged through `calls` (without it, read tools only). An agent without tools
    /// answers as [`Self::run`] / [`Self::run_streaming`].
    pub async fn run_with_tools(
        &self,
        agent: &Agent,
        settings: &LlmSettings,
        dispatch: &AgentDispatch,
        attempt: u32,
        tokens: Option<&TokenSink>,
        calls: Option<&dyn switchyard_engine::ports::ToolCalls>,
    ) -> Result<AgentReply, AgentError> {
        if settings.tools.is_empty() {
            return self.call(agent, settings, dispatch, attempt, tokens).await;
        }
        let started = tokio::time::Instant::now();
        let (client, provider) = self.provider_for(settings)?;
        let request = self.request(settings, provider, dispatch, attempt);
        let (specs, problems) = self.tools.specs(&settings.tools).await;
        for problem in &problems {
            tracing::warn!(agent = %agent.id, problem = %problem, "a tool source could not be read; its tools are left out");
        }
        let run = crate::tools::run::ToolLoop {
            provider: client.as_ref(),
            request: &request,
            toolbox: &self.tools,
            specs: &specs,
            calls,
            dispatch,
            attempt,
            max_tool_calls: settings.max_tool_calls.unwrap_or(switchyard_model::manifest::DEFAULT_MAX_TOOL_CALLS),
            deadline: started + Duration::from_millis(dispatch.routing.timeout_ms.max(1)),
            throttle: (provider.throttle_retries, provider.throttle_backoff.as_std()),
        };
        let outcome = match run.run().await {
            Ok(o) => o,
            Err(crate::tools::run::LoopError::Provider(e)) => {
                return Err(call_error(agent, settings, provider, attempt, &e))
            }
            Err(crate::tools::run::LoopError::AwaitingApproval) => {
                tracing::info!(agent = %agent.id, "a tool call waits for a person's decision; the attempt ends here");
                return Ok(AgentReply::AwaitingApproval);
            }
            Err(e @ (crate::tools::run::LoopError::Store(_) | crate::tools::run::LoopError::Unlogged(_))) => {
                tracing::warn!(agent = %agent.id, error = %e, "tool loop stopped");
                return Err(AgentError { message: e.to_string(), recoverable: true });
            }
        };
        tracing::info!(
            agent = %agent.id,
            model = %outcome.response.model,
            input_tokens = outcome.response.input_tokens,
            output_tokens = outcome.response.output_tokens,
            tool_calls = outcome.calls,
            "model call with tools"
        );
        let mut reply = reply_from(agent, settings, outcome.response);
        if let AgentReply::Answer(Value::Object(map)) = &mut reply {
            if let Some(Value::Array(caveats)) = map.get_mut("caveats") {
                caveats.extend(outcome.caveats.into_iter().map(Value::String));
            }
            map.insert("tool_calls".into(), json!(outcome.calls));
        }
        Ok(reply)
    }

    fn request(
        &self,
        settings: &LlmSettings,
        provider: &Provider,
        dispatch: &AgentDispatch,
        attempt: u32,
    ) -> ModelRequest {
        ModelRequest {
            model: settings.model.clone().or_else(|| provider.model.clone()).unwrap_or_default(),
            system: settings.system.clone(),
            prompt: render_prompt(settings.prompt.as_deref(), &prompt_fields(dispatch)),
            schema_name: settings.output_schema.name.clone(),
            schema: settings.output_schema.schema.clone(),
            max_tokens: answer_budget(settings, attempt),
            temperature: settings.temperature,
        }
    }

    /// Run attempt `attempt` of an `llm` agent, streaming the text of its `stream` field to
    /// `tokens` as the model writes it (an agent without `stream` answers as [`Self::run`]).
    pub async fn run_streaming(
        &self,
        agent: &Agent,
        settings: &LlmSettings,
        dispatch: &AgentDispatch,
        attempt: u32,
        tokens: &TokenSink,
    ) -> Result<AgentReply, AgentError> {
        self.run_with_tools(agent, settings, dispatch, attempt, Some(tokens), None).await
    }

    async fn call(
        &self,
        agent: &Agent,
        settings: &LlmSettings,
        dispatch: &AgentDispatch,
        attempt: u32,
        tokens: Option<&TokenSink>,
    ) -> Result<AgentReply, AgentError> {
        let (client, provider) = self.provider_for(settings)?;
        let request = self.request(settings, provider, dispatch, attempt);
        let streamed = match (tokens, &settings.stream) {
            (Some(sink), Some(field)) => Some((sink, field.as_str())),
            _ => None,
        };
        let mut wait = provider.throttle_backoff.as_std();
        let mut throttled = 0;
        let response = loop {
            let answer = match streamed {
                Some((sink, field)) => {
                    let field = std::sync::Mutex::new(super::streaming::FieldStream::new(field));
                    let on_text = |piece: &str| {
                        if let Ok(mut f) = field.lock() {
                            sink.send(&f.push(piece));
                        }
                    };
                    client.stream(&request, &on_text).await
                }
                None => client.complete(&request).await,
            };
            match answer {
                Ok(r) => break r,
                Err(ProviderError::Throttled { retry_after }) if throttled < provider.throttle_retries => {
                    throttled += 1;
                    tracing::info!(agent = %agent.id, throttled, "provider throttled the request; backing off");
                    tokio::time::sleep(retry_after.unwrap_or(wait)).await;
                    wait = wait.saturating_mul(2);
                }
                Err(e) => return Err(call_error(agent, settings, provider, attempt, &e)),
            }
        };
        tracing::info!(
            agent = %agent.id,
            model = %response.model,
            input_tokens = response.input_tokens,
            output_tokens = response.output_tokens,
            streamed = streamed.is_some(),
            "model call"
        );
        Ok(reply_from(agent, settings, response))
    }
}

/// The answer budget of attempt `attempt`: `max_tokens`, doubled on each later attempt up to
/// `max_tokens_limit` when the manifest sets one (a cut answer gets room on its retry).
fn answer_budget(settings: &LlmSettings, attempt: u32) -> u32 {
    let Some(limit) = settings.max_tokens_limit else { return settings.max_tokens };
    let doublings = attempt.saturating_sub(1).min(16);
    settings.max_tokens.saturating_mul(1 << doublings).min(limit.max(settings.max_tokens))
}

/// A failed model call as the agent's error: Switchyard's words for the caller, the
/// provider's own (its error body, the transport's causes) in the log, with the ids.
fn call_error(
    agent: &Agent,
    settings: &LlmSettings,
    provider: &Provider,
    attempt: u32,
    e: &ProviderError,
) -> AgentError {
    tracing::warn!(
        agent = %agent.id,
        provider = %provider.id,
        attempt,
        error = %e,
        detail = %e.detail(),
        "model call failed"
    );
    match e {
        ProviderError::Cut { max_tokens } => {
            let budget = answer_budget(settings, attempt + 1);
            if budget > *max_tokens {
                AgentError {
                    message: format!(
                        "{}: {e}; the next attempt may use up to {budget} (max_tokens_limit)",
                        provider.id
                    ),
                    recoverable: true,
                }
            } else {
                AgentError {
                    message: format!(
                        "{}: {e}; raise `max_tokens` of agent `{}` (or set `max_tokens_limit` so a retry gets more)",
                        provider.id, agent.id
                    ),
                    recoverable: false,
                }
            }
        }
        other => AgentError { message: format!("{}: {other}", provider.id), recoverable: other.is_retryable() },
    }
}

/// The fields a prompt template may name: the dispatch context, plus `intent` and
/// `entities` from the payload.
fn prompt_fields(dispatch: &AgentDispatch) -> Value {
    let mut fields = dispatch.payload.context.clone();
    if let Value::Object(map) = &mut fields {
        map.entry("intent").or_insert_with(|| Value::String(dispatch.payload.intent.clone()));
        if !dispatch.payload.entities.is_empty() {
            let entities: Vec<Value> =
                dispatch.payload.entities.iter().map(|e| json!({ "type": e.entity_type, "value": e.value })).collect();
            map.entry("entities").or_insert(Value::Array(entities));
        }
    }
    fields
}

/// Fill `{field}` placeholders from the dispatch context (strings as they are, other values
/// as JSON); without a template, every field as JSON.
pub fn render_prompt(template: Option<&str>, context: &Value) -> String {
    let Some(template) = template else {
        return serde_json::to_string_pretty(context).unwrap_or_default();
    };
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end) if end > 0 && after[..end].chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                match context.get(&after[..end]) {
                    Some(Value::String(s)) => out.push_str(s),
                    Some(Value::Null) | None => {}
                    Some(other) => out.push_str(&other.to_string()),
                }
                rest = &after[end + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The model's text as an answer: parsed, checked against the schema (a `confidence` field
/// must be a number in [0, 1]), with its usage. An answer without a confidence takes the
/// agent's `confidence`, or, when the manifest sets none, [`UNKNOWN_CONFIDENCE`] with a caveat
/// saying so: an answer never rates itself high by saying nothing.
fn reply_from(agent: &Agent, settings: &LlmSettings, response: ModelResponse) -> AgentReply {
    let Some(parsed) = schema::extract_json(&response.text) else {
        return AgentReply::Malformed(response.text);
    };
    let confidence_problem = match parsed.get("confidence") {
        None | Some(Value::Null) => None,
        Some(c) => match c.as_f64() {
            Some(n) if (0.0..=1.0).contains(&n) => None,
            _ => Some(format!("$.confidence is {c}, not a number between 0 and 1")),
        },
    };
    if let Some(problem) = schema::check(&settings.output_schema.schema, &parsed).err().or(confidence_problem) {
        return AgentReply::Malformed(format!(
            "{} (schema `{}`: {problem})",
            response.text, settings.output_schema.name
        ));
    }
    let mut caveats: Vec<String> = parsed
        .get("caveats")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let confidence = match (parsed.get("confidence").and_then(Value::as_f64), settings.confidence) {
        (Some(reported), _) => reported,
        (None, Some(default)) => default,
        (None, None) => {
            caveats.push(format!(
                "no confidence was reported; the answer is rated {UNKNOWN_CONFIDENCE} (set `confidence` of agent `{}` to rate it)",
                agent.id
            ));
            UNKNOWN_CONFIDENCE
        }
    };
    let evidence = parsed
        .get("evidence")
        .and_then(|e| serde_json::from_value::<Vec<Evidence>>(e.clone()).ok())
        .map(|e| serde_json::to_value(e).unwrap_or_else(|_| json!([])))
        .unwrap_or_else(|| json!([]));
    AgentReply::Answer(json!({
        "status": "success",
        "primary_output": parsed,
        "confidence": confidence,
        "evidence": evidence,
        "caveats": caveats,
        "model_used": response.model,
        "tokens_consumed": response.input_tokens + response.output_tokens,
        "input_tokens": response.input_tokens,
        "output_tokens": response.output_tokens,
        "cache_hit": response.cache_hit,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(schema: &str, prompt: &str) -> ModelRequest {
        ModelRequest {
            model: String::new(),
            system: "s".into(),
            prompt: prompt.into(),
            schema_name: schema.into(),
            schema: json!({ "type": "object" }),
            max_tokens: 100,
            temperature: None,
        }
    }

    #[tokio::test]
    async fn the_scripted_model_answers_by_schema_name_with_the_first_rule_whose_text_is_in_the_prompt() {
        let responses: BTreeMap<String, Vec<ScriptedModelReply>> = serde_json::from_value(json!({
            "evaluate_answer": [
                { "when": "§4.2", "reply": { "verdict": "accept" } },
                { "reply": { "verdict": "reject" } }
            ],
            "extract_quote": [ { "reply": { "unit_price": 4.2 } } ]
        }))
        .expect("responses");
        let model = ScriptedModel::new(responses);
        let accept = model.complete(&request("evaluate_answer", "answer cites §4.2")).await.expect("reply");
        assert_eq!(accept.text, r#"{"verdict":"accept"}"#);
        let reject = model.complete(&request("evaluate_answer", "no citation")).await.expect("reply");
        assert_eq!(reject.text, r#"{"verdict":"reject"}"#);
        assert!(reject.input_tokens > 0 && reject.output_tokens > 0);
        let missing = model.complete(&request("orchestrate_decision", "x")).await.expect_err("no reply");
        assert!(!missing.is_retryable());
    }

    #[tokio::test]
    async fn the_scripted_model_streams_its_reply_word_by_word_at_its_pace() {
        let responses: BTreeMap<String, Vec<ScriptedModelReply>> =
            serde_json::from_value(json!({ "answer_question": [ { "reply": { "answer": "Up to five days." } } ] }))
                .expect("responses");
        let model = ScriptedModel::new(responses).with_pace(Duration::from_millis(20));
        let started = tokio::time::Instant::now();
        let pieces = std::sync::Mutex::new(Vec::new());
        let on_text = |p: &str| pieces.lock().expect("pieces").push((p.to_string(), started.elapsed()));
        let response = model.stream(&request("answer_question", "q"), &on_text).await.expect("reply");
        let pieces = pieces.into_inner().expect("pieces");
        assert_eq!(pieces.iter().map(|(p, _)| p.as_str()).collect::<String>(), response.text);
        assert_eq!(pieces.len(), 4, "{pieces:?}");
        assert!(pieces[0].1 >= Duration::from_millis(20), "the first word waits one pace: {pieces:?}");
        assert!(pieces[3].1 >= Duration::from_millis(80), "each word waits one pace: {pieces:?}");
    }

    #[test]
    fn placeholders_are_filled_from_the_fields_and_unknown_ones_left_empty() {
        let fields = json!({ "question": "Why?", "order": { "sku": "HG-40" } });
        assert_eq!(
            render_prompt(Some("Q: {question} O: {order} X: {missing} {not a field}"), &fields),
            r#"Q: Why? O: {"sku":"HG-40"} X:  {not a field}"#
        );
        assert!(render_prompt(None, &fields).contains("\"question\": \"Why?\""));
    }
}
