//! Streamed answers in the event log: `token` events, written in batches while a model writes.
//!
//! An answer is streamed when its agent's `llm.stream` names the output field that holds the
//! answer's text (the worker's agents), or by the synthesis agent (the synthesizer). Its text
//! goes to the log in `token` events: the first piece at once (so the time to first token is
//! the model's), then each event the text that arrived within `tokens.flush_interval` of the
//! batch's first piece or `tokens.flush_chars` characters, so any function instance serving
//! the log sees it and the writes per answer stay bounded: at most
//! `1 + answer chars / flush_chars + answer seconds / flush_interval` puts.
//!
//! Every token event names its `stream` (`<dispatch id>-a<attempt>` for an agent's attempt,
//! `synthesis-v<claim version>` for the synthesis agent) and its `seq` within it. A retried
//! attempt or a critic's re-draft is a new stream; the `synthesis` event's `answer_stream`
//! names the one whose text is the output's `response_text`, so a reader concatenates the
//! `text` of that stream's events and drops the others (a broken or rejected draft).

use super::deps::Deps;
use super::effects::Entry;
use crate::ports::{AgentError, AgentReply, QueryRecord, RunContext, TokenSink, ToolCalls};
use serde_json::{json, Value};
use std::time::Duration;
use switchyard_model::manifest::{Agent, TokenSettings};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

/// Which answer a set of token events belongs to.
#[derive(Debug, Clone)]
pub struct StreamTag {
    /// The log entry the events are written as (in a stage, or at the end of the query).
    pub entry: Entry,
    /// Stage of the events.
    pub stage: usize,
    /// Unique id of this streamed answer within the query.
    pub stream: String,
    /// Fields every event of the stream carries (agent, dispatch, attempt).
    pub detail: Value,
}

impl StreamTag {
    /// The stream of one attempt of a dispatch.
    pub fn attempt(stage: usize, agent: &str, dispatch_id: &str, attempt: u32) -> StreamTag {
        StreamTag {
            entry: Entry::Token,
            stage,
            stream: stream_id(dispatch_id, attempt),
            detail: json!({ "agent": agent, "dispatch_id": dispatch_id, "attempt": attempt, "draft": stage }),
        }
    }

    /// The synthesis agent's stream under the synthesizer's claim `version`.
    pub fn synthesis(agent: &str, version: u64) -> StreamTag {
        StreamTag {
            entry: Entry::AnswerToken,
            stage: 0,
            stream: format!("synthesis-v{version}"),
            detail: json!({ "agent": agent, "synthesis": true }),
        }
    }
}

/// Stream id of one attempt of a dispatch.
pub fn stream_id(dispatch_id: &str, attempt: u32) -> String {
    format!("{dispatch_id}-a{attempt}")
}

/// What writing one stream cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamWrites {
    /// Token events written (one store write each).
    pub events: u32,
    /// Characters streamed.
    pub chars: usize,
    /// Writes that failed (logged; the answer itself is unaffected).
    pub failed: u32,
}

/// Write the pieces arriving on `pieces` as token events until the sender is dropped.
pub async fn write_tokens(
    deps: &Deps,
    query: &QueryRecord,
    tag: &StreamTag,
    settings: &TokenSettings,
    mut pieces: UnboundedReceiver<String>,
) -> StreamWrites {
    enum Next {
        Piece(String),
        Closed,
        Due,
    }
    let interval = settings.flush_interval.as_std().max(Duration::from_millis(1));
    let max_chars = settings.flush_chars.max(1);
    let mut pending = String::new();
    let mut pending_chars = 0usize;
    let mut due: Option<Instant> = None;
    let mut writes = StreamWrites::default();
    loop {
        let next = match due {
            None => pieces.recv().await.map_or(Next::Closed, Next::Piece),
            Some(at) => tokio::select! {
                piece = pieces.recv() => piece.map_or(Next::Closed, Next::Piece),
                _ = tokio::time::sleep_until(at) => Next::Due,
            },
        };
        match next {
            Next::Piece(piece) if writes.events + writes.failed == 0 && pending.is_empty() => {
                // The answer's first words go out at once: the time to first token is the
                // model's, not the flush interval's. Batching starts with the second piece.
                flush(deps, query, tag, piece, &mut writes).await;
            }
            Next::Piece(piece) => {
                if pending.is_empty() {
                    due = Some(Instant::now() + interval);
                }
                pending_chars += piece.chars().count();
                pending.push_str(&piece);
                while pending_chars >= max_chars {
                    let cut = pending.char_indices().nth(max_chars).map_or(pending.len(), |(i, _)| i);
                    let rest = pending.split_off(cut);
                    flush(deps, query, tag, std::mem::replace(&mut pending, rest), &mut writes).await;
                    pending_chars -= max_chars.min(pending_chars);
                    due = (!pending.is_empty()).then(|| Instant::now() + interval);
                }
            }
            Next::Due => {
                flush(deps, query, tag, std::mem::take(&mut pending), &mut writes).await;
                pending_chars = 0;
                due = None;
            }
            Next::Closed => {
                if !pending.is_empty() {
                    flush(deps, query, tag, pending, &mut writes).await;
                }
                return writes;
            }
        }
    }
}

async fn flush(deps: &Deps, query: &QueryRecord, tag: &StreamTag, text: String, writes: &mut StreamWrites) {
    let seq = writes.events + writes.failed;
    let mut detail = tag.detail.clone();
    if let Value::Object(map) = &mut detail {
        map.insert("stream".into(), json!(tag.stream));
        map.insert("seq".into(), json!(seq));
        map.insert("text".into(), json!(text));
    }
    let id = format!("{}-{seq:05}", tag.stream);
    let event = deps.event(query, tag.entry, tag.stage, &id, detail);
    match deps.store.append_events(&[event]).await {
        Ok(()) => {
            writes.events += 1;
            writes.chars += text.chars().count();
        }
        Err(e) => {
            writes.failed += 1;
            tracing::warn!(query_id = %query.query_id, stream = %tag.stream, seq, error = %e, "a token batch was not written");
        }
    }
}

/// Run `agent` under `timeout`, streaming its answer into the log when its settings name a
/// streamed field (`tag` names the stream; it is built only then); `Err(())` when it ran out
/// of time.
pub async fn run_agent(
    deps: &Deps,
    query: &QueryRecord,
    tag: impl FnOnce() -> StreamTag,
    agent: &Agent,
    dispatch: &switchyard_model::contracts::AgentDispatch,
    attempt: u32,
    timeout: Duration,
) -> Result<Result<AgentReply, AgentError>, ()> {
    let calls = agent
        .llm
        .as_ref()
        .filter(|l| !l.tools.is_empty())
        .map(|_| super::tool_calls::DispatchCalls::new(deps, query, dispatch, attempt, timeout));
    let tools = calls.as_ref().map(|c| c as &dyn ToolCalls);
    if agent.llm.as_ref().and_then(|l| l.stream.as_ref()).is_none() {
        let context = RunContext { tokens: None, tools };
        return tokio::time::timeout(timeout, deps.agents.run_with(agent, dispatch, attempt, context))
            .await
            .map_err(|_| ());
    }
    let tag = tag();
    let (sink, pieces) = TokenSink::channel();
    let run = async move {
        let sink = sink;
        let context = RunContext { tokens: Some(&sink), tools };
        tokio::time::timeout(timeout, deps.agents.run_with(agent, dispatch, attempt, context)).await
        // `sink` drops here, which ends the writer once it has flushed.
    };
    let manifest = deps.manifest_for(query).await.ok();
    let settings = manifest.map(|m| m.tokens.clone()).unwrap_or_default();
    let (ran, writes) = tokio::join!(run, write_tokens(deps, query, &tag, &settings, pieces));
    tracing::info!(
        query_id = %query.query_id,
        stream = %tag.stream,
        token_events = writes.events,
        chars = writes.chars,
        failed = writes.failed,
        "answer streamed"
    );
    ran.map_err(|_| ())
}

/// Which answer the output carries: the synthesis agent's or the deterministic synthesis's,
/// and the stream whose tokens spell it (when it was streamed).
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerSource {
    /// The stream whose token texts concatenate to `response_text`, if one does.
    pub stream: Option<String>,
    /// `orchestration.synthesis` for the output, when a synthesis agent is configured.
    pub report: Option<Value>,
}

/// Why the synthesis agent was not asked: only fallback templates answered.
const TEMPLATES_ONLY: &str = "only fallback templates answered; their text stands as written";

/// Let the manifest's synthesis agent write the answer of `output` (already built by the
/// deterministic synthesis, bands and caveats included), streaming it; keep the
/// deterministic text when it is not configured for this query, fails, times out, answers
/// with no text, or drops every citation. Then name the stream the final text came from.
pub async fn synthesize_answer(
    deps: &Deps,
    manifest: &switchyard_model::manifest::Manifest,
    query: &QueryRecord,
    handoffs: &[std::sync::Arc<crate::ports::HandoffRecord>],
    output: &mut switchyard_model::contracts::OrchestratorOutput,
    deadline_passed: bool,
) -> AnswerSource {
    let mut report = None;
    if let Some(s) = &manifest.synthesis {
        let applies = s.intents.is_empty() || s.intents.contains(&output.intent);
        let answered = matches!(
            output.status,
            switchyard_model::contracts::OutputStatus::Success | switchyard_model::contracts::OutputStatus::Partial
        ) && !matches!(
            output.final_reason,
            Some(
                switchyard_model::contracts::ConfidenceBand::OutOfScope
                    | switchyard_model::contracts::ConfidenceBand::MissingEntities
            )
        );
        if applies && answered {
            let why_not = if deadline_passed {
                Err("the query's deadline had passed".to_string())
            } else {
                run_synthesis_agent(deps, manifest, s, query, handoffs, output).await
            };
            report = Some(match why_not {
                Ok((stream, (input_tokens, output_tokens))) => {
                    return AnswerSource {
                        stream: Some(stream),
                        report: Some(json!({
                            "answered_by": "synthesis_agent",
                            "agent": s.agent,
                            "input_tokens": input_tokens,
                            "output_tokens": output_tokens,
                        })),
                    }
                }
                Err(reason) => {
                    tracing::info!(query_id = %query.query_id, reason = %reason, "the deterministic synthesis answers");
                    // Not run (the deadline had passed, or only templates answered) is no
                    // failure; an agent that was asked and did not answer is `synthesis_failed`.
                    if !deadline_passed && reason != TEMPLATES_ONLY {
                        output.error.get_or_insert(switchyard_model::contracts::OutputError {
                            category: switchyard_model::contracts::ErrorCategory::SynthesisFailed,
                            message: format!(
                                "the synthesis agent `{}` did not answer ({reason}); the deterministic synthesis answered",
                                s.agent
                            ),
                        });
                    }
                    json!({ "answered_by": "deterministic", "agent": s.agent, "fallback_reason": reason })
                }
            });
        }
    }
    AnswerSource { stream: streamed_handoff(manifest, handoffs, &output.response_text), report }
}

/// The stream of the latest streamed handoff whose field holds exactly `text`.
fn streamed_handoff(
    manifest: &switchyard_model::manifest::Manifest,
    handoffs: &[std::sync::Arc<crate::ports::HandoffRecord>],
    text: &str,
) -> Option<String> {
    handoffs
        .iter()
        .filter(|h| h.handoff.execution.status.is_usable())
        .filter(|h| {
            let field = manifest.agent(&h.handoff.agent_id).and_then(|a| a.llm.as_ref()).and_then(|l| l.stream.clone());
            field.is_some_and(|f| h.handoff.result.primary_output.get(&f).and_then(Value::as_str) == Some(text))
        })
        .max_by_key(|h| h.handoff.execution.completed_at)
        .map(|h| stream_id(&h.handoff.dispatch_id, h.attempts))
}

/// Run the synthesis agent; its stream id and the tokens it reported (prompt, completion) when
/// its answer replaced the output's text.
async fn run_synthesis_agent(
    deps: &Deps,
    manifest: &switchyard_model::manifest::Manifest,
    settings: &switchyard_model::manifest::SynthesisSettings,
    query: &QueryRecord,
    handoffs: &[std::sync::Arc<crate::ports::HandoffRecord>],
    output: &mut switchyard_model::contracts::OrchestratorOutput,
) -> Result<(String, (u64, u64)), String> {
    use switchyard_model::contracts::{
        AgentDispatch, DispatchConstraints, DispatchMetadata, DispatchPayload, DispatchRouting,
    };
    let agent = manifest.agent(&settings.agent).ok_or_else(|| format!("agent `{}` is not declared", settings.agent))?;
    let field = agent
        .llm
        .as_ref()
        .and_then(|l| l.stream.clone())
        .ok_or_else(|| format!("agent `{}` names no streamed field", agent.id))?;
    // A fallback template's text is the manifest's own words for "no agent could answer":
    // a model rewriting it can only make it worse.
    let is_template = |r: &&switchyard_model::contracts::AgentResult| {
        handoffs.iter().any(|h| {
            h.handoff.dispatch_id == r.dispatch_id && h.handoff.metadata.model_used == crate::ports::TEMPLATE_MODEL
        })
    };
    if !output.agent_results.iter().filter(|r| r.status.is_usable()).any(|r| !is_template(&r)) {
        return Err(TEMPLATES_ONLY.into());
    }
    let answers: Vec<Value> = output
        .agent_results
        .iter()
        .filter(|r| r.status.is_usable())
        .map(|r| {
            let evidence = handoffs
                .iter()
                .find(|h| h.handoff.dispatch_id == r.dispatch_id)
                .map(|h| serde_json::to_value(&h.handoff.result.evidence).unwrap_or(Value::Null))
                .unwrap_or(Value::Null);
            json!({ "agent": r.agent_id, "confidence": r.confidence, "answer": r.result, "evidence": evidence })
        })
        .collect();
    let citations: Vec<Value> =
        output.citations.iter().map(|c| json!({ "source_id": c.source_id, "text": c.text })).collect();
    let context = json!({
        "question": query.parsed.raw_query,
        "conversation": query.parsed.context,
        "handoffs": answers,
        "draft_answer": output.response_text,
        "citations": citations,
        "confidence": output.response_confidence,
        "caveats": output.caveats,
    });
    let timeout = settings.timeout.as_std();
    let dispatch = AgentDispatch {
        dispatch_id: format!("{}-synthesis-v{}", query.query_id, query.version),
        query_id: query.query_id.clone(),
        target_agent: agent.id.clone(),
        target_tier: agent.tier,
        payload: DispatchPayload {
            intent: output.intent.clone(),
            entities: query.parsed.entities.clone(),
            context,
            constraints: DispatchConstraints { max_latency_ms: timeout.as_millis() as u64, required_confidence: 0.0 },
        },
        routing: DispatchRouting {
            priority: 0,
            timeout_ms: timeout.as_millis() as u64,
            retry_count: 0,
            fallback_agent: None,
        },
        metadata: DispatchMetadata { dispatched_at: deps.clock.now(), correlation_id: query.query_id.clone() },
    };
    let tag = StreamTag::synthesis(&agent.id, query.version);
    let stream = tag.stream.clone();
    let reply = match run_agent(deps, query, || tag, agent, &dispatch, 1, timeout).await {
        Err(()) => return Err(format!("no answer within {} ms", timeout.as_millis())),
        Ok(Err(e)) => return Err(format!("the synthesis agent failed: {}", e.message)),
        Ok(Ok(reply)) => {
            reply.into_value().ok_or_else(|| "the synthesis agent's answer did not match its schema".to_string())?
        }
    };
    let text = reply
        .pointer(&format!("/primary_output/{field}"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| format!("the synthesis agent's `{field}` is empty"))?;
    if !output.citations.is_empty() && !output.citations.iter().any(|c| text.contains(&c.source_id)) {
        return Err(format!(
            "the synthesis agent's answer cites none of the {} sources (it must name their source ids)",
            output.citations.len()
        ));
    }
    output.response_text = text;
    let tokens = |key: &str| reply.get(key).and_then(Value::as_u64).unwrap_or(0);
    Ok((stream, (tokens("input_tokens"), tokens("output_tokens"))))
}
