//! Synthesizer: merge the handoffs into one cited, confidence-rated answer, exactly once; and
//! the deadline that ends every query.
//!
//! The synthesizer claims the query (`routed` → `synthesizing`, conditional on its version)
//! before doing any work, so a duplicate synth job does nothing; a claim older than the lease
//! is taken over, so a synthesizer that crashed mid-run is resumed. The output and the final
//! query record are written in one conditional write.
//!
//! The response confidence is the agents' confidence bounded by the router's
//! ([`routed_confidence`]). Confidence bands are the RAG manager design's, internal constants as that design requires: ≥ 0.80
//! `confidence_high`; 0.70–0.80 `confidence_medium_caveated`; 0.50–0.70
//! `confidence_low_partial`; < 0.50 `confidence_too_low_clarify`.

use super::advance::advance;
use super::deps::{Deps, StepError};
use super::effects::{arm_deadline, retry_on_conflict, written, Attempt, Entry};
use super::stream::synthesize_answer;
use crate::ports::{Detail, HandoffRecord, HandoffWrite, QueryRecord, QueryStatus};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::plan::handoffs::{answer_text, check_gate, slot_handoff};
use switchyard_core::plan::modes::{is_bookkeeping, is_stage_budget, shape};
use switchyard_core::plan::{DispatchRole, PlannedDispatch};
use switchyard_model::contracts::{
    AgentHandoff, AgentResult, Citation, ConfidenceBand, ErrorCategory, Evidence, HandoffErrors, HandoffExecution,
    HandoffStatus, OrchestratorOutput, OutputError, OutputStatus,
};
use switchyard_model::manifest::Manifest;
use tracing::{info, instrument};

/// Lower bound of `confidence_high`.
pub const BAND_HIGH: f64 = 0.80;
/// Lower bound of `confidence_medium_caveated`.
pub const BAND_MEDIUM: f64 = 0.70;
/// Lower bound of `confidence_low_partial`.
pub const BAND_LOW: f64 = 0.50;

/// The RAG manager design's band for a confidence.
pub fn band(confidence: f64) -> ConfidenceBand {
    if confidence >= BAND_HIGH {
        ConfidenceBand::ConfidenceHigh
    } else if confidence >= BAND_MEDIUM {
        ConfidenceBand::ConfidenceMediumCaveated
    } else if confidence >= BAND_LOW {
        ConfidenceBand::ConfidenceLowPartial
    } else {
        ConfidenceBand::ConfidenceTooLowClarify
    }
}

/// The answer's confidence given the agents' and the router's: as sure as the agents, and no
/// surer than the geometric mean of the two — `min(agents, sqrt(agents × routing))`. A router
/// at least as sure as the agents changes nothing; a router that did not understand the
/// question (routing confidence 0) leaves 0, so a fallback answer to a question nobody
/// understood is never `confidence_high`. The rule is documented in docs/scope.md#confidence-that-flows.
pub fn routed_confidence(agents: f64, routing: f64) -> f64 {
    let agents = agents.clamp(0.0, 1.0);
    let routing = routing.clamp(0.0, 1.0);
    agents.min((agents * routing).sqrt())
}

/// Handle a synth job (a stage completed).
#[instrument(skip(deps), fields(query_id = %query_id))]
pub async fn synthesize(deps: &Deps, query_id: &str) -> Result<(), StepError> {
    synthesize_inner(deps, query_id, false).await
}

async fn synthesize_inner(deps: &Deps, query_id: &str, deadline_passed: bool) -> Result<(), StepError> {
    retry_on_conflict("synthesizing", || async move {
        let query = deps
            .store
            .get_query(query_id)
            .await?
            .ok_or_else(|| StepError::Permanent(format!("synth job for unknown query {query_id}")))?;
        let now = deps.clock.now();
        match query.status {
            QueryStatus::Done => {
                super::conversation::ensure_turn(deps, &query).await?;
                return Ok(Attempt::Done(()));
            }
            QueryStatus::Accepted => {
                return Err(StepError::Retryable("synth job before the query was routed".into()));
            }
            QueryStatus::Synthesizing => {
                let fresh = query
                    .synth_claimed_at
                    .is_some_and(|at| (now - at).to_std().map(|age| age < deps.settings.synth_lease).unwrap_or(true));
                if fresh {
                    // Another synthesizer is at work and normally finishes within milliseconds:
                    // wait for it rather than send this duplicate back to sit out the queue's
                    // visibility timeout. Still claimed after the wait: retry later.
                    if wait_until_done(deps, query_id).await? {
                        return Ok(Attempt::Done(()));
                    }
                    return Err(StepError::Retryable("another synthesizer holds the claim".into()));
                }
                info!("taking over a stale synthesis claim");
            }
            QueryStatus::Routed => {
                if !deadline_passed && !ready(deps, &query).await? {
                    return Ok(Attempt::Done(())); // spurious: the stage is not complete
                }
            }
        }
        // The record read becomes the claimed one, then the done one: moved, never copied.
        let version = query.version;
        let mut claimed = query;
        claimed.status = QueryStatus::Synthesizing;
        claimed.synth_claimed_at = Some(now);
        if !written(deps.store.update_query(&claimed, version, &[]).await)? {
            return Ok(Attempt::Conflict);
        }
        claimed.version = version + 1;
        let handoffs = deps.store.list_handoffs(query_id).await?;
        let manifest = deps.manifest_for(&claimed).await?;
        let mut output = build_output(deps, &manifest, &claimed, &handoffs, deadline_passed);
        let answer = synthesize_answer(deps, &manifest, &claimed, &handoffs, &mut output, deadline_passed).await;
        if let Some(report) = answer.report {
            let block = output.orchestration.get_or_insert_with(|| json!({}));
            if let Value::Object(map) = block {
                map.insert("synthesis".into(), report);
            }
        }
        output.reflection = super::reflection::reflect(&manifest, &claimed, &handoffs, &output);
        fit_output(&mut output);
        // Final from here: shared with the store, which keeps it as it is.
        let output = Arc::new(output);
        let claimed_version = claimed.version;
        let mut done = claimed;
        done.status = QueryStatus::Done;
        done.outcome = Some(output.status);
        // The signal's outcome rides on the final write.
        if let Some(signal) = done.signal.as_mut().map(std::sync::Arc::make_mut) {
            switchyard_core::signals::collect::with_outcome(signal, done.plan.as_deref(), &output, &handoffs, now);
        }
        let events = [
            deps.event(
                &done,
                Entry::Synthesis,
                0,
                "",
                Detail::object()
                    .field("agents", &output.agents_dispatched.len())
                    .field("answer_stream", &answer.stream)
                    .field("citations", &output.citations.len())
                    .field("final_reason", &output.final_reason)
                    .field("reflection_score", &output.reflection.as_ref().map(|r| r.score))
                    .field("response_confidence", &output.response_confidence)
                    .field("status", &output.status)
                    .finish(),
            ),
            deps.event(
                &done,
                Entry::Final,
                0,
                "",
                Detail::object()
                    .field("status", &output.status)
                    .field("total_latency_ms", &output.total_latency_ms)
                    .finish(),
            ),
        ];
        // Not written: another synthesizer finished it.
        if written(deps.store.finish_query(Arc::clone(&output), &done, claimed_version, &events).await)? {
            info!(status = ?output.status, confidence = output.response_confidence, latency_ms = output.total_latency_ms, "query answered");
            super::conversation::record_turn(deps, &manifest, &done, &output).await?;
        }
        Ok(Attempt::Done(()))
    })
    .await
}

/// Poll the query for up to `EngineSettings::claim_wait`; true once it is done.
async fn wait_until_done(deps: &Deps, query_id: &str) -> Result<bool, StepError> {
    let until = tokio::time::Instant::now() + deps.settings.claim_wait;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if deps.store.get_query(query_id).await?.is_some_and(|q| q.status == QueryStatus::Done) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the query can be synthesized: the current stage is complete and either it is the
/// last or the pipeline cannot go on.
async fn ready(deps: &Deps, query: &QueryRecord) -> Result<bool, StepError> {
    let Some(plan) = &query.plan else { return Ok(false) };
    let Some(stage) = plan.stages.get(plan.current_stage) else { return Ok(true) };
    if !stage.is_complete(&query.completed) {
        return Ok(false);
    }
    if plan.current_stage + 1 >= plan.stages.len() {
        return Ok(true);
    }
    let handoffs = deps.store.list_handoffs(&query.query_id).await?;
    Ok(stage.slots().filter_map(|s| slot_handoff(&handoffs, s)).any(|h| {
        !h.handoff.execution.status.is_usable()
            || stage.gate.as_ref().is_some_and(|g| check_gate(g, &h.handoff).is_err())
    }))
}

/// Handle a deadline job: re-arm if early; otherwise every outstanding dispatch becomes
/// `timeout` and the query is synthesized with what it has.
#[instrument(skip(deps), fields(query_id = %query_id))]
pub async fn deadline(deps: &Deps, query_id: &str, fire_at: chrono::DateTime<chrono::Utc>) -> Result<(), StepError> {
    let query = deps.store.get_query(query_id).await?;
    if deps.clock.now() < fire_at {
        // Chain the next link only for a query still open: a finished (or expired) query needs
        // no deadline, and a duplicated link stops here instead of doubling at every link.
        if query.is_some_and(|q| q.status != QueryStatus::Done) {
            return arm_deadline(deps, query_id, fire_at).await;
        }
        return Ok(());
    }
    let Some(query) = query else {
        return Err(StepError::Permanent(format!("deadline for unknown query {query_id}")));
    };
    if query.status == QueryStatus::Done {
        // This deadline may be the one that finished the query and stopped before its turn was
        // recorded: finish that (nothing happens when the turn is there).
        return super::conversation::ensure_turn(deps, &query).await;
    }
    if query.status == QueryStatus::Accepted {
        return Ok(());
    }
    if query.status == QueryStatus::Routed {
        // A tool call waiting for a person pauses the deadline; its expiry comes here too.
        if let Some(done) = super::approval::at_deadline(deps, &query, fire_at).await {
            return done;
        }
    }
    let stage_budget = is_stage_budget(&query, fire_at);
    if stage_budget == Some(false) {
        return Ok(()); // the budget of a stage that already completed
    }
    if stage_budget.is_none() && !query.approvals.is_empty() && query.deadline_at.is_some_and(|d| fire_at < d) {
        return Ok(()); // the deadline moved on (paused for an approval); its own message is out
    }
    if query.status == QueryStatus::Routed {
        let handoffs = deps.store.list_handoffs(query_id).await?;
        let outstanding = outstanding(&query, &handoffs);
        if !outstanding.is_empty() {
            let key = match (stage_budget, &query.plan) {
                (Some(true), Some(plan)) => (Entry::Budget, plan.current_stage),
                _ => (Entry::Deadline, 0),
            };
            let event = deps.event(
                &query,
                key.0,
                key.1,
                "",
                json!({ "fire_at": fire_at, "timed_out": outstanding.iter().map(|d| &d.dispatch.target_agent).collect::<Vec<_>>() }),
            );
            deps.store.append_events(&[event]).await?;
        }
        for planned in outstanding {
            let record = timeout_record(deps, &query, planned);
            let event = deps.event(
                &query,
                Entry::Handoff,
                query.plan.as_ref().map(|p| p.current_stage).unwrap_or(0),
                &planned.dispatch.dispatch_id,
                json!({ "dispatch_id": planned.dispatch.dispatch_id, "agent": planned.dispatch.target_agent, "status": "timeout", "error_type": "agent_timeout", "fills_slot": true }),
            );
            match deps.store.record_handoff(Arc::new(record), &[event]).await? {
                HandoffWrite::Recorded { .. } | HandoffWrite::Duplicate => {}
            }
        }
        if stage_budget == Some(true) {
            info!("stage budget spent; moving on");
            return advance(deps, query_id).await;
        }
    }
    info!("deadline fired");
    synthesize_inner(deps, query_id, true).await
}

/// Dispatches of the current stage whose slot is not filled and that have no handoff: the
/// last dispatch of each open slot (a fallback, if one was sent).
fn outstanding<'a>(query: &'a QueryRecord, handoffs: &[Arc<HandoffRecord>]) -> Vec<&'a PlannedDispatch> {
    let Some(plan) = &query.plan else { return Vec::new() };
    let Some(stage) = plan.stages.get(plan.current_stage) else { return Vec::new() };
    stage
        .dispatches
        .iter()
        .filter(|d| !query.completed.contains(&d.slot))
        .filter(|d| !handoffs.iter().any(|h| h.handoff.dispatch_id == d.dispatch.dispatch_id))
        .collect()
}

fn timeout_record(deps: &Deps, query: &QueryRecord, planned: &PlannedDispatch) -> HandoffRecord {
    let now = deps.clock.now();
    let started = planned.dispatch.metadata.dispatched_at;
    HandoffRecord {
        query_id: query.query_id.clone(),
        slot: Some(planned.slot.clone()),
        attempts: 0,
        fallback_for: planned.fallback_for.clone(),
        engine_caveats: Vec::new(),
        handoff: AgentHandoff {
            dispatch_id: planned.dispatch.dispatch_id.clone(),
            agent_id: planned.dispatch.target_agent.clone(),
            agent_tier: planned.dispatch.target_tier,
            execution: HandoffExecution {
                status: HandoffStatus::Timeout,
                started_at: started,
                completed_at: now,
                latency_ms: (now - started).num_milliseconds().max(0) as u64,
            },
            result: Default::default(),
            artifacts: Default::default(),
            errors: HandoffErrors {
                error_type: Some("agent_timeout".into()),
                error_message: Some("no handoff before the query's deadline".into()),
                recoverable: false,
            },
            metadata: Default::default(),
        },
        expires_at: deps.expires_at(),
    }
}

/// Largest serialized output the engine writes whole (DynamoDB items stop at 400 KB; each
/// handoff is at most [`super::worker::MAX_HANDOFF_BYTES`], but several together are not).
pub const MAX_OUTPUT_BYTES: usize = 300 * 1024;

fn truncate_chars(text: &mut String, max_chars: usize) {
    if let Some((cut, _)) = text.char_indices().nth(max_chars) {
        text.truncate(cut);
        text.push('…');
    }
}

/// Shorten an output over [`MAX_OUTPUT_BYTES`] so it can be written: each agent result keeps
/// its first 2000 characters of text, the merged answer its first 100 000, citation texts
/// their first 500, and a caveat says so. Every agent's full answer stays in its handoff.
fn fit_output(output: &mut OrchestratorOutput) {
    let fits = |o: &OrchestratorOutput| switchyard_model::limits::json_fits(o, MAX_OUTPUT_BYTES);
    let Err(original) = fits(output) else { return };
    for r in &mut output.agent_results {
        let mut text = match r.result.get("response").and_then(Value::as_str) {
            Some(t) => t.to_string(),
            None => r.result.to_string(),
        };
        truncate_chars(&mut text, 2_000);
        r.result = json!({ "response": text, "truncated": true });
    }
    truncate_chars(&mut output.response_text, 100_000);
    for c in &mut output.citations {
        if let Some(text) = &mut c.text {
            truncate_chars(text, 500);
        }
    }
    if fits(output).is_err() {
        output.visualizations.clear();
        output.citations.truncate(20);
    }
    output.caveats.push(format!(
        "The answer was {original} bytes, over the {MAX_OUTPUT_BYTES}-byte record limit, and was shortened; each agent's full answer is kept in its handoff."
    ));
}

fn describe_failure(h: &HandoffRecord) -> String {
    let reason = h
        .handoff
        .errors
        .error_message
        .clone()
        .unwrap_or_else(|| format!("{:?}", h.handoff.execution.status).to_lowercase());
    format!("{} {}: {}", h.handoff.agent_id, status_word(h.handoff.execution.status), reason)
}

fn status_word(s: HandoffStatus) -> &'static str {
    match s {
        HandoffStatus::Success => "succeeded",
        HandoffStatus::Partial => "answered in part",
        HandoffStatus::Failed => "failed",
        HandoffStatus::Timeout => "timed out",
        HandoffStatus::Blocked => "was blocked",
    }
}

/// Merge the handoffs of a query into its output.
pub fn build_output(
    deps: &Deps,
    manifest: &Manifest,
    query: &QueryRecord,
    handoffs: &[Arc<HandoffRecord>],
    deadline_passed: bool,
) -> OrchestratorOutput {
    let now = deps.clock.now();
    let empty = switchyard_core::plan::Plan {
        intent: query.parsed.intent.clone(),
        pipeline: None,
        stages: vec![],
        current_stage: 0,
        deadline_ms: 0,
        flow: None,
    };
    let plan = query.plan.as_deref().unwrap_or(&empty);
    if query.scope.as_ref().is_some_and(switchyard_core::scope::ScopeCheck::is_out_of_scope) && plan.stages.is_empty() {
        return out_of_scope_output(manifest, query, now);
    }
    // No agent ran: the router found a required entity missing, or the cascade's classifier
    // decided an intent that lacks one (and the caller may ask for it).
    let classified_only = plan.stages.iter().all(switchyard_core::plan::modes::is_bookkeeping)
        && plan
            .flow
            .as_ref()
            .and_then(|f| f.classification.as_ref())
            .is_none_or(|c| c.forbidden_role.is_none() && !c.out_of_scope);
    if classified_only && query.plan.is_some() {
        let missing = switchyard_core::slots::missing(manifest, &query.parsed.intent, &query.parsed.entities);
        if !missing.is_empty() {
            return missing_entities_output(manifest, query, plan, missing, now);
        }
    }
    let ran: Vec<&PlannedDispatch> =
        plan.stages.iter().take(plan.current_stage + 1).flat_map(|s| s.dispatches.iter()).collect();
    let handoff_of = |d: &PlannedDispatch| handoffs.iter().find(|h| h.handoff.dispatch_id == d.dispatch.dispatch_id);

    let mut agent_results = Vec::new();
    let mut caveats: Vec<String> = Vec::new();
    let mut visualizations = Vec::new();
    for d in &ran {
        let Some(h) = handoff_of(d) else { continue };
        let hf = &h.handoff;
        agent_results.push(AgentResult {
            agent_id: hf.agent_id.clone(),
            agent_tier: hf.agent_tier,
            status: hf.execution.status,
            result: hf.result.primary_output.clone(),
            confidence: hf.result.confidence,
            // The agent's whole time: from its dispatch to this answer, every attempt, queue
            // wait and retry backoff included (never less than the last attempt alone).
            latency_ms: (hf.execution.completed_at - d.dispatch.metadata.dispatched_at)
                .num_milliseconds()
                .max(0)
                .unsigned_abs()
                .max(hf.execution.latency_ms),
            attempt_latency_ms: hf.execution.latency_ms,
            error: hf.errors.error_message.clone().filter(|_| !hf.execution.status.is_usable()),
            attempts: h.attempts,
            dispatch_id: hf.dispatch_id.clone(),
            fallback_for: h
                .fallback_for
                .as_ref()
                .and_then(|id| plan.dispatch(id))
                .map(|p| p.dispatch.target_agent.clone()),
        });
        visualizations.extend(hf.artifacts.visualizations.iter().cloned());
    }

    // One final handoff per slot of the stages that ran.
    let mut slots: Vec<(&PlannedDispatch, Option<&HandoffRecord>)> = Vec::new();
    for stage in plan.stages.iter().take(plan.current_stage + 1).filter(|s| !is_bookkeeping(s)) {
        for d in stage.dispatches.iter().filter(|d| d.role.fills_slot()) {
            slots.push((d, slot_handoff(handoffs, &d.slot)));
        }
    }
    let usable = |h: Option<&HandoffRecord>| h.is_some_and(|h| h.handoff.execution.status.is_usable());

    // Gate and pipeline state.
    let mut qc_report = None;
    if plan.pipeline.is_some() {
        if let Some(stage) = plan.stages.get(plan.current_stage) {
            if let Some(gate) = &stage.gate {
                for slot in stage.slots() {
                    if let Some(h) = slot_handoff(handoffs, slot) {
                        if let Err(report) = check_gate(gate, &h.handoff) {
                            qc_report = Some(report);
                        }
                    }
                }
            }
        }
    }
    let all_usable = slots.iter().all(|(_, h)| usable(*h));
    let any_usable = slots.iter().any(|(_, h)| usable(*h));
    let pipeline_finished = plan.current_stage + 1 >= plan.stages.len();
    let mut status = if qc_report.is_some() {
        OutputStatus::Blocked
    } else if plan.pipeline.is_some() {
        if all_usable && pipeline_finished {
            OutputStatus::Success
        } else {
            OutputStatus::Failed
        }
    } else if all_usable {
        OutputStatus::Success
    } else if any_usable {
        OutputStatus::Partial
    } else {
        OutputStatus::Failed
    };
    let partial_answers =
        slots.iter().any(|(_, h)| h.is_some_and(|h| h.handoff.execution.status == HandoffStatus::Partial));
    if status == OutputStatus::Success && partial_answers {
        status = OutputStatus::Partial;
    }

    // Confidence: the answering agents' confidence, weighted (primary 2, others 1), over all
    // slots — a slot that did not answer counts as zero. A pipeline's is its last step's.
    let weight = |d: &PlannedDispatch| if matches!(d.role, DispatchRole::Primary) { 2.0 } else { 1.0 };
    let response_confidence = if plan.pipeline.is_some() {
        if status == OutputStatus::Success {
            slots.last().and_then(|(_, h)| *h).map(|h| h.handoff.result.confidence).unwrap_or(0.0)
        } else {
            0.0
        }
    } else {
        let total: f64 = slots.iter().map(|(d, _)| weight(d)).sum();
        let got: f64 = slots
            .iter()
            .filter(|(_, h)| usable(*h))
            .map(|(d, h)| weight(d) * h.map_or(0.0, |h| h.handoff.result.confidence))
            .sum();
        if total > 0.0 {
            (got / total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let response_confidence = routed_confidence(response_confidence, query.parsed.confidence);
    let mut response_confidence = (response_confidence * 1_000.0).round() / 1_000.0;
    let shaped = shape(manifest, plan, handoffs, now);
    if let Some(s) = &shaped {
        status = s.status.unwrap_or(status);
        response_confidence = s.confidence.unwrap_or(response_confidence);
    }

    // Caveats: what failed, what stood in, what the agents and the engine flagged.
    for (d, h) in &slots {
        match h {
            None => caveats.push(format!("{} did not answer", d.dispatch.target_agent)),
            Some(h) if !h.handoff.execution.status.is_usable() => caveats.push(describe_failure(h)),
            Some(h) => {
                if let Some(original) =
                    h.fallback_for.as_ref().and_then(|id| handoffs.iter().find(|x| &x.handoff.dispatch_id == id))
                {
                    caveats.push(format!(
                        "{}; {} answered in its place",
                        describe_failure(original),
                        h.handoff.agent_id
                    ));
                }
            }
        }
    }
    if plan.pipeline.is_some() && !pipeline_finished {
        let skipped: Vec<&str> = plan
            .stages
            .iter()
            .skip(plan.current_stage + 1)
            .flat_map(|s| s.dispatches.iter())
            .map(|d| d.dispatch.target_agent.as_str())
            .collect();
        if !skipped.is_empty() {
            caveats.push(format!("pipeline stopped before {}", skipped.join(", ")));
        }
    }
    if deadline_passed && !all_usable {
        caveats.push("the query reached its deadline before every agent answered".into());
    }
    for (_, h) in &slots {
        if let Some(h) = h.filter(|h| h.handoff.execution.status.is_usable()) {
            caveats.extend(h.handoff.result.caveats.iter().map(|c| format!("{}: {c}", h.handoff.agent_id)));
            caveats.extend(h.engine_caveats.iter().cloned());
        }
    }

    // Citations from evidence, de-duplicated by source id (a merge's retrievers are not cited:
    // the answer cites the merged list it was given).
    let mut citations: Vec<Citation> = Vec::new();
    let uncited = switchyard_core::plan::modes::uncited_slots(plan);
    for (d, h) in &slots {
        if uncited.contains(&d.slot.as_str()) {
            continue;
        }
        let Some(h) = h.filter(|h| h.handoff.execution.status.is_usable()) else { continue };
        let agent = manifest.agent(&h.handoff.agent_id);
        let default_type =
            agent.map(|a| a.citation_source).unwrap_or(switchyard_model::contracts::CitationSourceType::AgentActivity);
        for (n, e) in h.handoff.result.evidence.iter().enumerate() {
            let c = match e {
                Evidence::Text(text) => Citation {
                    source_type: default_type,
                    source_id: format!("{}#{}", h.handoff.agent_id, n + 1),
                    relevance: h.handoff.result.confidence,
                    text: Some(text.clone()),
                    agent_id: Some(h.handoff.agent_id.clone()),
                },
                Evidence::Sourced { source_type, source_id, text, relevance } => Citation {
                    source_type: *source_type,
                    source_id: source_id.clone(),
                    relevance: relevance.unwrap_or(h.handoff.result.confidence),
                    text: text.clone(),
                    agent_id: Some(h.handoff.agent_id.clone()),
                },
            };
            if !citations.iter().any(|x| x.source_id == c.source_id) {
                citations.push(c);
            }
        }
    }

    // The answer text: primary first, then supporting answers; pipelines end on the last step.
    let answers: Vec<String> = if plan.pipeline.is_some() {
        slots
            .iter()
            .filter_map(|(_, h)| h.filter(|h| h.handoff.execution.status.is_usable()))
            .map(|h| answer_text(&h.handoff))
            .filter(|t| !t.is_empty())
            .collect()
    } else {
        slots
            .iter()
            .filter_map(|(_, h)| *h)
            .filter(|h| h.handoff.execution.status.is_usable())
            .map(|h| answer_text(&h.handoff))
            .filter(|t| !t.is_empty())
            .collect()
    };
    let band = band(response_confidence);
    let mut error = None;
    let mut response_text = match status {
        OutputStatus::Blocked => {
            error = Some(OutputError {
                category: ErrorCategory::QcGateBlocked,
                message: "a QC gate stopped the pipeline; see qc_report".into(),
            });
            format!(
                "The {} pipeline was stopped by its QC gate; nothing after it ran. {}",
                plan.pipeline.clone().unwrap_or_default(),
                answers.join(" ")
            )
            .trim()
            .to_string()
        }
        OutputStatus::Failed => {
            let timed_out =
                slots.iter().any(|(_, h)| h.is_none_or(|h| h.handoff.execution.status == HandoffStatus::Timeout));
            let category = if timed_out { ErrorCategory::AgentTimeout } else { ErrorCategory::AgentError };
            let reasons: Vec<String> = slots
                .iter()
                .filter_map(|(_, h)| *h)
                .filter(|h| !h.handoff.execution.status.is_usable())
                .map(describe_failure)
                .collect();
            error = Some(OutputError { category, message: reasons.join("; ") });
            format!(
                "Switchyard could not answer this question: {}.",
                if reasons.is_empty() { "no agent answered".to_string() } else { reasons.join("; ") }
            )
        }
        _ => answers.join("\n\n"),
    };
    let mut orchestration = None;
    let out_of_scope = shaped.as_ref().is_some_and(|s| s.out_of_scope);
    if let Some(s) = shaped {
        if let Some(text) = s.text {
            response_text = text;
        }
        if s.error.is_some() || matches!(status, OutputStatus::Success | OutputStatus::Partial) {
            error = s.error;
        }
        caveats.extend(s.caveats);
        orchestration = Some(s.orchestration);
    }
    if matches!(status, OutputStatus::Success | OutputStatus::Partial) {
        match band {
            ConfidenceBand::ConfidenceHigh => {}
            ConfidenceBand::ConfidenceMediumCaveated => caveats.push(format!(
                "Moderate confidence ({response_confidence:.2}): treat the figures as indicative and check them against the cited sources."
            )),
            ConfidenceBand::ConfidenceLowPartial => caveats.push(format!(
                "Limited confidence ({response_confidence:.2}): only part of the question could be answered reliably."
            )),
            ConfidenceBand::ConfidenceTooLowClarify => caveats.push(format!(
                "Confidence is too low ({response_confidence:.2}) to rely on this answer. {}",
                clarifying_request(manifest)
            )),
            ConfidenceBand::OutOfScope | ConfidenceBand::MissingEntities => {}
        }
    }

    // Follow-ups from the agents that answered.
    let mut follow_up_suggestions: Vec<String> = Vec::new();
    for (_, h) in &slots {
        if let Some(agent) =
            h.filter(|h| h.handoff.execution.status.is_usable()).and_then(|h| manifest.agent(&h.handoff.agent_id))
        {
            for f in &agent.follow_ups {
                if !follow_up_suggestions.contains(f) && follow_up_suggestions.len() < 5 {
                    follow_up_suggestions.push(f.clone());
                }
            }
        }
    }

    OrchestratorOutput {
        query_id: query.query_id.clone(),
        status,
        response_text,
        response_confidence,
        agents_dispatched: ran.iter().map(|d| d.dispatch.target_agent.clone()).collect(),
        agent_results,
        citations,
        visualizations,
        follow_up_suggestions,
        total_latency_ms: (now - query.accepted_at).num_milliseconds().max(0) as u64,
        timestamp: now,
        intent: query.parsed.intent.clone(),
        final_reason: if out_of_scope {
            Some(ConfidenceBand::OutOfScope)
        } else {
            Some(band).filter(|_| matches!(status, OutputStatus::Success | OutputStatus::Partial))
        },
        caveats,
        warnings: query.warnings.clone(),
        error,
        qc_report,
        orchestration,
        reflection: None,
        session_id: query.session_id.clone(),
        entities: query.parsed.entities.clone(),
        missing_entities: vec![],
    }
}

/// The output of a question outside the manifest's domain: `failed`, `final_reason:
/// out_of_scope`, confidence 0, and a reply listing what this assistant can help with.
fn out_of_scope_output(
    manifest: &Manifest,
    query: &QueryRecord,
    now: chrono::DateTime<chrono::Utc>,
) -> OrchestratorOutput {
    let score = query.scope.map(|s| s.score).unwrap_or(0.0);
    OrchestratorOutput {
        query_id: query.query_id.clone(),
        status: OutputStatus::Failed,
        response_text: switchyard_core::scope::reply(manifest),
        response_confidence: 0.0,
        agents_dispatched: vec![],
        agent_results: vec![],
        citations: vec![],
        visualizations: vec![],
        follow_up_suggestions: vec![],
        total_latency_ms: (now - query.accepted_at).num_milliseconds().max(0) as u64,
        timestamp: now,
        intent: query.parsed.intent.clone(),
        final_reason: Some(ConfidenceBand::OutOfScope),
        caveats: vec![],
        warnings: query.warnings.clone(),
        error: Some(OutputError {
            category: ErrorCategory::OutOfScope,
            message: format!("scope score {score:.2} is below the manifest's threshold"),
        }),
        qc_report: None,
        orchestration: None,
        reflection: None,
        session_id: query.session_id.clone(),
        entities: query.parsed.entities.clone(),
        missing_entities: vec![],
    }
}

/// The output of a request whose intent lacks required entities: no agent answered (only the
/// cascade's classifier, if it decided the intent); `partial`, `final_reason:
/// missing_entities`, confidence 0, and a reply asking for them by their descriptions
/// (switchyard_core::slots). The session's next turn may supply them.
fn missing_entities_output(
    manifest: &Manifest,
    query: &QueryRecord,
    plan: &switchyard_core::plan::Plan,
    missing: Vec<String>,
    now: chrono::DateTime<chrono::Utc>,
) -> OrchestratorOutput {
    OrchestratorOutput {
        query_id: query.query_id.clone(),
        status: OutputStatus::Partial,
        response_text: switchyard_core::slots::question(manifest, &missing),
        response_confidence: 0.0,
        agents_dispatched: plan
            .stages
            .iter()
            .flat_map(|s| s.dispatches.iter().map(|d| d.dispatch.target_agent.clone()))
            .collect(),
        agent_results: vec![],
        citations: vec![],
        visualizations: vec![],
        follow_up_suggestions: vec![],
        total_latency_ms: (now - query.accepted_at).num_milliseconds().max(0) as u64,
        timestamp: now,
        intent: query.parsed.intent.clone(),
        final_reason: Some(ConfidenceBand::MissingEntities),
        caveats: vec![],
        warnings: query.warnings.clone(),
        error: None,
        qc_report: None,
        orchestration: plan
            .flow
            .as_ref()
            .and_then(|f| f.classification.as_ref())
            .map(|c| serde_json::json!({ "classification": c })),
        reflection: None,
        session_id: query.session_id.clone(),
        entities: query.parsed.entities.clone(),
        missing_entities: missing,
    }
}

/// Entity types named in the request for a clearer question, at most.
const CLARIFYING_TYPES: usize = 4;

/// The request for a clearer question: by the descriptions of the manifest's entity types
/// ("Could you clarify the question: which brand, region, metric or period you mean?"), or
/// plainly when it declares none.
fn clarifying_request(manifest: &Manifest) -> String {
    let names: Vec<String> = manifest
        .entities
        .values()
        .map(|e| e.description.trim())
        .filter(|d| !d.is_empty())
        .take(CLARIFYING_TYPES)
        .map(|d| d.strip_prefix("the ").or_else(|| d.strip_prefix("your ")).unwrap_or(d).to_string())
        .collect();
    match names.as_slice() {
        [] => "Could you clarify the question?".to_string(),
        [one] => format!("Could you clarify the question: which {one} you mean?"),
        [rest @ .., last] => format!("Could you clarify the question: which {} or {last} you mean?", rest.join(", ")),
    }
}
