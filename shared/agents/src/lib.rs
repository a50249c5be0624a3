//! # switchyard-agents
//!
//! The agent runtime: every agent kind Switchyard runs, behind the engine's `AgentRuntime` port.
//!
//! - `builtin`: answers from the response template in `routing.yaml`, filled from the query's
//!   entities. Offline, instant and deterministic, so every intent of the shipped manifest
//!   answers with no model behind it.
//! - `scripted`: misbehaves exactly as its manifest settings say, keyed by attempt number
//!   (fail N times, hang, answer slowly, malformed output, panic, fail a QC gate). Failure
//!   handling is tested and demonstrated with it, through the same engine as real agents.
//!
//! - `llm` ([`llm`]): a model asked for structured output through a provider (Bedrock
//!   Converse, an OpenAI-compatible endpoint, or the scripted model keyed by output-schema
//!   name).
//! - `http` and `lambda` ([`remote`]): the dispatch sent to the user's endpoint or function.
//! - `retriever` ([`retriever`]): searches a document index built or loaded at init.
//!
//! [`ManifestAgents`] runs the in-process kinds; [`Agents`] is the full [`AgentRuntime`],
//! built once per process with every client the manifest needs.

#![warn(missing_docs)]

mod bedrock;
pub mod embeddings;
pub mod knowledge_base;
pub mod llm;
mod openai;
pub mod provider;
pub mod remote;
pub mod retriever;
pub mod schema;
pub mod streaming;
pub mod tools;

pub use bedrock::Bedrock;

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use switchyard_engine::ports::{AgentError, AgentReply, AgentRuntime, RunContext, TokenSink, TypedAnswer};
use switchyard_model::contracts::{AgentDispatch, Evidence, HandoffResult, HandoffStatus};
use switchyard_model::manifest::{Agent, AgentKind, BuiltinSettings, EvidenceSpec, Manifest, ScriptedSettings};

/// The embedded system for `manifest` with every agent kind: the zero-setup default of
/// `switchyard ask`, `serve` and most tests.
pub fn embedded(manifest: Arc<Manifest>, settings: switchyard_engine::EngineSettings) -> switchyard_engine::Embedded {
    let agents = Arc::new(Agents::new(&manifest));
    switchyard_engine::Embedded::with_agents(manifest, settings, agents)
}

/// Every agent kind, with the clients built once from the manifest: the runtime the
/// functions and the embedded system use.
#[derive(Debug, Clone)]
pub struct Agents {
    llm: llm::LlmAgents,
    http: remote::HttpAgents,
    lambda: Arc<remote::LambdaAgents>,
    retriever: Arc<retriever::RetrieverAgents>,
}

impl Agents {
    /// Build the runtime for `manifest` (one HTTP client, one client per provider; AWS
    /// clients are created on first use from the environment).
    pub fn new(manifest: &Manifest) -> Agents {
        let http = switchyard_engine::http_client::HttpClient::new();
        Agents {
            llm: llm::LlmAgents::new(manifest, &http),
            http: remote::HttpAgents::new(manifest, &http),
            lambda: Arc::new(remote::LambdaAgents::default()),
            retriever: Arc::new(retriever::RetrieverAgents::with_http(manifest, &http)),
        }
    }

    /// Replace the `llm` agents' providers (tests: a loopback or scripted provider).
    pub fn with_llm(mut self, llm: llm::LlmAgents) -> Agents {
        self.llm = llm;
        self
    }

    /// Replace the retrievers (tests: an embedding provider aimed at loopback).
    pub fn with_retrievers(mut self, retrievers: retriever::RetrieverAgents) -> Agents {
        self.retriever = Arc::new(retrievers);
        self
    }

    /// Replace the `lambda` agents' client.
    pub fn with_lambda(mut self, lambda: remote::LambdaAgents) -> Agents {
        self.lambda = Arc::new(lambda);
        self
    }

    /// Configuration problems to report at init (a provider with no base URL, a retriever
    /// whose index is missing or corrupt …).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = self.llm.problems();
        problems.extend(self.retriever.problems());
        problems
    }

    /// The retrievers' indexes.
    pub fn retrievers(&self) -> &retriever::RetrieverAgents {
        &self.retriever
    }
}

fn missing(agent: &Agent) -> AgentError {
    AgentError {
        message: format!("agent `{}` has no `{}` settings", agent.id, agent.kind.as_str()),
        recoverable: false,
    }
}

#[async_trait]
impl AgentRuntime for Agents {
    async fn run(&self, agent: &Agent, dispatch: &AgentDispatch, attempt: u32) -> Result<AgentReply, AgentError> {
        // The remote kinds' futures (HTTP and AWS SDK calls) are large; each is boxed on its
        // own so that this future, allocated and moved for every agent run, stays small for
        // the builtin and scripted agents that answer at once.
        match agent.kind {
            AgentKind::Builtin | AgentKind::Scripted => ManifestAgents.run(agent, dispatch, attempt).await,
            AgentKind::Llm => {
                let settings = agent.llm.as_ref().ok_or_else(|| missing(agent))?;
                Box::pin(self.llm.run(agent, settings, dispatch, attempt)).await
            }
            AgentKind::Http => {
                let settings = agent.http.as_ref().ok_or_else(|| missing(agent))?;
                Box::pin(self.http.run(agent, settings, dispatch)).await
            }
            AgentKind::Lambda => {
                let settings = agent.lambda.as_ref().ok_or_else(|| missing(agent))?;
                Box::pin(self.lambda.run(agent, settings, dispatch)).await
            }
            AgentKind::Retriever => {
                let settings = agent.retriever.as_ref().ok_or_else(|| missing(agent))?;
                Box::pin(self.retriever.run(agent, settings, dispatch)).await
            }
        }
    }

    async fn run_streaming(
        &self,
        agent: &Agent,
        dispatch: &AgentDispatch,
        attempt: u32,
        tokens: &TokenSink,
    ) -> Result<AgentReply, AgentError> {
        match agent.kind {
            AgentKind::Llm => {
                let settings = agent.llm.as_ref().ok_or_else(|| missing(agent))?;
                Box::pin(self.llm.run_streaming(agent, settings, dispatch, attempt, tokens)).await
            }
            _ => self.run(agent, dispatch, attempt).await,
        }
    }

    async fn run_with(
        &self,
        agent: &Agent,
        dispatch: &AgentDispatch,
        attempt: u32,
        context: RunContext<'_>,
    ) -> Result<AgentReply, AgentError> {
        match (agent.kind, &agent.llm) {
            (AgentKind::Llm, Some(settings)) if !settings.tools.is_empty() => {
                Box::pin(self.llm.run_with_tools(agent, settings, dispatch, attempt, context.tokens, context.tools))
                    .await
            }
            _ => match context.tokens {
                Some(tokens) => self.run_streaming(agent, dispatch, attempt, tokens).await,
                None => self.run(agent, dispatch, attempt).await,
            },
        }
    }
}

/// Runs `builtin` and `scripted` agents from their manifest settings (other kinds fail:
/// they need the clients of [`Agents`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ManifestAgents;

#[async_trait]
impl AgentRuntime for ManifestAgents {
    async fn run(&self, agent: &Agent, dispatch: &AgentDispatch, attempt: u32) -> Result<AgentReply, AgentError> {
        match agent.kind {
            AgentKind::Builtin => match &agent.builtin {
                Some(settings) => Ok(builtin_reply(agent, settings, dispatch)),
                None => Err(AgentError {
                    message: format!("agent `{}` has no `builtin` settings", agent.id),
                    recoverable: false,
                }),
            },
            AgentKind::Scripted => {
                let settings = agent.scripted.clone().unwrap_or_default();
                scripted_reply(agent, &settings, dispatch, attempt).await
            }
            other => Err(AgentError {
                message: format!(
                    "agent `{}` is `kind: {}`, which this runtime cannot run; use `agents::Agents`",
                    agent.id,
                    other.as_str()
                ),
                recoverable: false,
            }),
        }
    }
}

/// Fill `{placeholders}` from the dispatch: `{question}`, `{intent}`, `{entities}` and one per
/// entity type (the first entity of that type, else its `defaults` entry).
///
/// A placeholder with neither is never filled with a stand-in: an `[optional segment]` holding
/// it is left out whole ("Flights to {city}[ on {departure_date}]"); outside a segment the
/// placeholder is left out with the short connecting word before it ("on", "for", "in"), and
/// the spacing is tidied. Brackets around text without a placeholder are kept as written.
pub fn render(
    template: &str,
    dispatch: &AgentDispatch,
    defaults: &std::collections::BTreeMap<String, String>,
) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('[') {
        let inner_end = rest[open + 1..].find(']').map(|e| open + 1 + e);
        match inner_end {
            Some(close) if switchyard_model::manifest::placeholders(&rest[open + 1..close]).next().is_some() => {
                out.push_str(&fill(&rest[..open], dispatch, defaults));
                let inner = &rest[open + 1..close];
                let all_known = switchyard_model::manifest::placeholders(inner)
                    .all(|name| placeholder(name, dispatch, defaults).is_some());
                if all_known {
                    out.push_str(&fill(inner, dispatch, defaults));
                }
                rest = &rest[close + 1..];
            }
            _ => {
                out.push_str(&fill(&rest[..=open], dispatch, defaults));
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(&fill(rest, dispatch, defaults));
    let left_out =
        switchyard_model::manifest::placeholders(template).any(|name| placeholder(name, dispatch, defaults).is_none());
    if left_out {
        tidy(&out)
    } else {
        out
    }
}

/// `text` with its placeholders filled; a missing one is left out with the connecting word
/// before it.
fn fill(text: &str, dispatch: &AgentDispatch, defaults: &std::collections::BTreeMap<String, String>) -> String {
    /// Longest word taken for a connecting word before a missing value ("from", "with").
    const CONNECTING_WORD_CHARS: usize = 4;
    let mut out = String::with_capacity(text.len() + 32);
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end)
                if end > 0
                    && after[..end].chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') =>
            {
                match placeholder(&after[..end], dispatch, defaults) {
                    Some(value) => out.push_str(&value),
                    None => {
                        let kept = out.trim_end_matches(' ').len();
                        let word_start = out[..kept].rfind(|c: char| !c.is_alphabetic()).map_or(0, |i| i + 1);
                        let word = &out[word_start..kept];
                        if kept < out.len()
                            && !word.is_empty()
                            && word.chars().count() <= CONNECTING_WORD_CHARS
                            && word.chars().all(char::is_lowercase)
                        {
                            out.truncate(word_start);
                        }
                    }
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

/// Single spaces, none before punctuation or at the ends.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == ' ' && (out.is_empty() || out.ends_with(' ') || out.ends_with('\n')) {
            continue;
        }
        if matches!(c, ',' | '.' | ':' | ';' | '!' | '?') && out.ends_with(' ') {
            out.pop();
        }
        if c == ',' && out.ends_with(',') {
            continue;
        }
        out.push(c);
    }
    out.trim_end().to_string()
}

/// The value of a placeholder, `None` when the dispatch has none and `defaults` neither.
fn placeholder(
    name: &str,
    dispatch: &AgentDispatch,
    defaults: &std::collections::BTreeMap<String, String>,
) -> Option<String> {
    let payload = &dispatch.payload;
    match name {
        "question" => Some(payload.context.get("question").and_then(Value::as_str).unwrap_or("").to_string()),
        "intent" => Some(payload.intent.clone()),
        "entities" => {
            let values: Vec<&str> = payload.entities.iter().map(|e| e.value.as_str()).collect();
            if values.is_empty() {
                Some(defaults.get("entities").cloned().unwrap_or_else(|| "none named".to_string()))
            } else {
                Some(values.join(", "))
            }
        }
        other => payload
            .entities
            .iter()
            .find(|e| e.entity_type == other)
            .map(|e| e.value.replace('_', " "))
            .or_else(|| defaults.get(other).cloned()),
    }
}

fn evidence(
    agent: &Agent,
    specs: &[EvidenceSpec],
    dispatch: &AgentDispatch,
    defaults: &std::collections::BTreeMap<String, String>,
) -> Vec<Evidence> {
    specs
        .iter()
        .enumerate()
        .map(|(n, e)| Evidence::Sourced {
            source_type: e.source_type.unwrap_or(agent.citation_source),
            source_id: e.source_id.clone().unwrap_or_else(|| format!("{}#{}", agent.id, n + 1)),
            text: Some(render(&e.text, dispatch, defaults)),
            // As JSON would carry it: a number that is not finite has no JSON form.
            relevance: Some(e.relevance).filter(|r| r.is_finite()),
        })
        .collect()
}

/// The builtin agent's answer, typed: the engine reads it without building or parsing JSON.
fn builtin_reply(agent: &Agent, settings: &BuiltinSettings, dispatch: &AgentDispatch) -> AgentReply {
    let mut output: Map<String, Value> = settings.output.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    output.insert("response".into(), Value::String(render(&settings.response, dispatch, &settings.defaults)));
    AgentReply::Typed(Box::new(TypedAnswer {
        status: HandoffStatus::Success,
        result: HandoffResult {
            primary_output: Value::Object(output),
            confidence: settings.confidence,
            evidence: evidence(agent, &settings.evidence, dispatch, &settings.defaults),
            caveats: settings.caveats.clone(),
        },
        model_used: "builtin".into(),
    }))
}

async fn scripted_reply(
    agent: &Agent,
    s: &ScriptedSettings,
    dispatch: &AgentDispatch,
    attempt: u32,
) -> Result<AgentReply, AgentError> {
    if s.panic {
        // A crash of the worker's handler, as a real bug would cause one.
        panic!("scripted agent `{}` panicked on attempt {attempt}", agent.id);
    }
    if attempt <= s.hang_times {
        std::future::pending::<()>().await;
    }
    if let Some(delay) = s.delay {
        tokio::time::sleep(delay.as_std()).await;
    }
    if attempt <= s.fail_times {
        return Err(AgentError {
            message: s.error.clone().unwrap_or_else(|| format!("scripted failure on attempt {attempt}")),
            recoverable: s.recoverable.unwrap_or(true),
        });
    }
    if s.malformed {
        return Ok(AgentReply::Malformed(format!("Sure! Here is my answer for {} (not JSON", agent.id)));
    }
    let mut output: Map<String, Value> = s.output.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let defaults = std::collections::BTreeMap::new();
    let response = s.response.clone().unwrap_or_else(|| format!("{} answered on attempt {attempt}.", agent.id));
    output.insert("response".into(), Value::String(render(&response, dispatch, &defaults)));
    Ok(AgentReply::Answer(json!({
        "status": s.status.unwrap_or(HandoffStatus::Success),
        "primary_output": output,
        "confidence": s.confidence.unwrap_or(0.9),
        "evidence": [{"source_type": agent.citation_source, "source_id": format!("{}#attempt-{attempt}", agent.id), "text": "scripted evidence", "relevance": 1.0}],
        "caveats": [],
        "model_used": "scripted",
    })))
}
