//! Recording a finished query as its session's next turn.
//!
//! The synthesizer calls [`record_turn`] once the output is written, and again whenever it meets
//! a query that is already done (a redelivered synth job), so a crash between the two writes
//! loses no turn. The write is conditional on the session's version (two turns finishing at
//! once: the loser re-reads and appends after the winner) and skipped when the session already
//! lists the query (a redelivery records nothing twice).

use super::deps::{Deps, StepError};
use crate::ports::{QueryRecord, StoreError};
use serde_json::{json, Value};
use std::time::Duration;
use switchyard_core::context::{self, SessionRecord, TurnInput};
use switchyard_model::contracts::{ConfidenceBand, OrchestratorOutput};
use switchyard_model::manifest::Manifest;
use tracing::{info, warn};

/// Attempts at the session write before the synth job is given back to its queue.
const SESSION_WRITE_ATTEMPTS: usize = 16;

/// Epoch seconds at which a session written now expires.
fn session_expires_at(deps: &Deps, manifest: &Manifest) -> i64 {
    let ttl = manifest.context.session_ttl.unwrap_or(manifest.query.record_ttl);
    deps.clock.now().timestamp() + (ttl.as_millis() / 1_000) as i64
}

/// What the finished query adds to its session.
fn turn_input(query: &QueryRecord, output: &OrchestratorOutput) -> TurnInput {
    let preferences = query.parsed.context.as_ref().and_then(|c| c.get("preferences")).cloned();
    TurnInput {
        query_id: query.query_id.clone(),
        question: query.parsed.raw_query.clone(),
        intent: if output.intent.is_empty() { query.parsed.intent.clone() } else { output.intent.clone() },
        entities: query.parsed.entities.clone(),
        answer: output.response_text.clone(),
        status: output.status,
        out_of_scope: output.final_reason == Some(ConfidenceBand::OutOfScope),
        missing_entities: output.missing_entities.clone(),
        unsure: output.final_reason == Some(ConfidenceBand::ConfidenceTooLowClarify),
        preferences,
    }
}

/// Record the query's turn in its session, once.
pub(super) async fn record_turn(
    deps: &Deps,
    manifest: &Manifest,
    query: &QueryRecord,
    output: &OrchestratorOutput,
) -> Result<(), StepError> {
    for _ in 0..SESSION_WRITE_ATTEMPTS {
        let stored = deps.store.get_session(&query.user_id, &query.session_id).await?;
        let mut session = match stored {
            Some(s) if s.has_recorded(&query.query_id) => return Ok(()),
            Some(s) => s,
            None => SessionRecord::new(&query.user_id, &query.session_id, deps.clock.now(), 0),
        };
        let expected = session.version;
        let expires_at = session_expires_at(deps, manifest);
        let now = deps.clock.now();
        let compacted =
            context::append_turn(&manifest.context, &mut session, turn_input(query, output), now, expires_at);
        if let Some(through) = compacted.last().map(|t| t.seq) {
            let (lines, method) = summarize(deps, manifest, query, &session, &compacted).await;
            context::merge_summary(&manifest.context, &mut session, lines, through, &method);
        }
        match deps.store.put_session(&session, expected).await {
            Ok(()) => {
                info!(query_id = %query.query_id, session_id = %query.session_id, turn = session.turn_count, compacted = compacted.len(), "turn recorded");
                return Ok(());
            }
            Err(StoreError::ConditionFailed(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StepError::Retryable(format!("session {} kept changing while recording a turn", query.session_id)))
}

/// The record of a query that is done: make sure its turn is in the session (a synthesizer
/// that wrote the output and stopped before the session write is finished here).
pub(super) async fn ensure_turn(deps: &Deps, query: &QueryRecord) -> Result<(), StepError> {
    if deps.store.get_session(&query.user_id, &query.session_id).await?.is_some_and(|s| s.has_recorded(&query.query_id))
    {
        return Ok(());
    }
    let Some(output) = deps.store.get_output(&query.query_id).await? else { return Ok(()) };
    let manifest = deps.manifest_for(query).await?;
    record_turn(deps, &manifest, query, &output).await
}

/// Summary lines for `turns`: written by `context.summary.agent` when one is set and answers
/// with text, else extractive. Returns the lines and the method.
async fn summarize(
    deps: &Deps,
    manifest: &Manifest,
    query: &QueryRecord,
    session: &SessionRecord,
    turns: &[context::Turn],
) -> (Vec<String>, String) {
    let extractive = context::extractive_lines(turns);
    let Some(agent) = manifest.context.summary.agent.as_deref().and_then(|id| manifest.agent(id)) else {
        return (extractive, "extractive".into());
    };
    let now = deps.clock.now();
    let mut dispatch = switchyard_core::plan::dispatch_for(
        manifest,
        agent,
        switchyard_core::plan::DispatchRole::Primary,
        &query.parsed,
        &query.query_id,
        now,
    );
    let existing = session.summary.as_ref().map(|s| s.lines.join("\n")).unwrap_or_default();
    dispatch.payload.context = json!({
        "task": "summarize",
        "question": "Summarize these conversation turns in a few short lines, keeping names, figures and open questions.",
        "turns": extractive.join("\n"),
        "summary": existing,
    });
    let timeout = Duration::from_millis(dispatch.routing.timeout_ms.max(1));
    let reply = tokio::time::timeout(timeout, deps.agents.run(agent, &dispatch, 1)).await;
    let text = match reply {
        Ok(Ok(reply)) => reply.into_value().and_then(|v| answer_text(&v)),
        Ok(Err(e)) => {
            warn!(query_id = %query.query_id, agent = %agent.id, recoverable = e.recoverable, "summarizer failed; the summary is extractive");
            None
        }
        Err(_) => {
            warn!(query_id = %query.query_id, agent = %agent.id, "summarizer timed out; the summary is extractive");
            None
        }
    };
    match text {
        Some(text) => {
            let lines: Vec<String> =
                text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
            if lines.is_empty() {
                (extractive, "extractive".into())
            } else {
                (lines, format!("agent:{}", agent.id))
            }
        }
        None => (extractive, "extractive".into()),
    }
}

/// The text of a summarizer's answer: its `primary_output` (top level or in `result`) read as
/// the synthesizer reads any answer (a string, or its `response` / `summary` / `text` /
/// `answer` field), or a top-level `summary` string.
fn answer_text(v: &Value) -> Option<String> {
    let text_of = |out: &Value| -> Option<String> {
        for key in ["response", "summary", "text", "answer"] {
            if let Some(s) = out.get(key).and_then(Value::as_str) {
                return Some(s.to_string());
            }
        }
        out.as_str().map(str::to_string)
    };
    [&v["primary_output"], &v["result"]["primary_output"]]
        .into_iter()
        .find_map(text_of)
        .or_else(|| v["summary"].as_str().map(str::to_string))
        .filter(|s| !s.trim().is_empty())
}
