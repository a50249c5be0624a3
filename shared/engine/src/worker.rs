//! Agent worker: one attempt of one dispatch, and what follows from it.
//!
//! An attempt runs under its timeout. Then, following the E2I design's recovery table:
//! - an answer is validated into a handoff (dispatch id, status, confidence range; latency over
//!   budget and confidence below `required_confidence` become caveats) and recorded;
//! - a recoverable error, a malformed answer or a timeout with retries left schedules the next
//!   attempt on the tier's queue after an exponential, jittered backoff — a timeout with an
//!   extended timeout;
//! - with retries exhausted the dispatch hands over to its fallback agent (recorded as a
//!   `failed`/`timeout` handoff that fills no slot, the fallback dispatch added to the plan and
//!   sent once), answers with the tier's template (a `partial` handoff), or — with no fallback,
//!   as on Tier 0 — fails.
//!
//! Recording a handoff is conditional (one per dispatch) and adds its slot to the query's
//! fan-in set in the same atomic write. The writer that completes the set advances the query:
//! the next pipeline stage after its QC gate, or the synthesis.

use super::advance::advance;
use super::deps::{Deps, StepError};
use super::effects::{retry_on_conflict, send_first_attempt, written, Attempt, Entry};
use super::stream::{run_agent, StreamTag};
use crate::ports::{
    AgentReply, Detail, EventKind, HandoffRecord, HandoffWrite, QueryRecord, QueryStatus, QueueId, StoreError,
    TypedAnswer,
};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::plan::{DispatchRole, PlannedDispatch};
use switchyard_model::contracts::{
    AgentHandoff, HandoffArtifacts, HandoffErrors, HandoffExecution, HandoffMetadata, HandoffResult, HandoffStatus,
};
use switchyard_model::jobs::Job;
use switchyard_model::limits::{MAX_ATTEMPT_TIMEOUT_MS, MAX_RECEIVE_COUNT};
use switchyard_model::manifest::{Agent, Fallback, Manifest};
use tracing::{info, instrument, warn};

/// Largest serialized handoff the engine records whole; a larger one has its outputs replaced
/// by a note and a caveat (DynamoDB items stop at 400 KB).
pub const MAX_HANDOFF_BYTES: usize = 300 * 1024;

/// One dispatch job, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchJob {
    /// The query.
    pub query_id: String,
    /// The dispatch.
    pub dispatch_id: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// This attempt's timeout.
    pub timeout_ms: u64,
    /// How often the queue has delivered this message (SQS `ApproximateReceiveCount`).
    pub receive_count: u32,
}

/// How an attempt went wrong.
#[derive(Debug, Clone, PartialEq)]
struct Failure {
    error_type: &'static str,
    message: String,
    recoverable: bool,
    timed_out: bool,
    latency_ms: u64,
    started_at: DateTime<Utc>,
    completed_at: DateTime<Utc>,
}

/// Handle a dispatch job on the worker of `tier` (`None`: any tier, for embedded use).
#[instrument(skip(deps, job), fields(query_id = %job.query_id, dispatch_id = %job.dispatch_id, attempt = job.attempt))]
pub async fn run_dispatch(deps: &Deps, tier: Option<u8>, job: &DispatchJob) -> Result<(), StepError> {
    let result = attempt(deps, tier, job).await;
    if let Err(e) = &result {
        if job.receive_count >= MAX_RECEIVE_COUNT {
            // Last delivery: record the dispatch as failed so the query does not wait for its
            // deadline; the message still goes to the dead-letter queue with this reason.
            warn!(error = %e, receives = job.receive_count, "giving up on the dispatch after its last delivery");
            let _ = give_up_after_deliveries(deps, job, &e.to_string()).await;
        }
    }
    result
}

/// The job's query record, shared and without its fan-in set: a worker never reads the set
/// (the store's answer to its handoff write says whether the stage is complete).
async fn load(deps: &Deps, job: &DispatchJob) -> Result<Arc<QueryRecord>, StepError> {
    deps.store
        .get_query_without_fan_in(&job.query_id)
        .await?
        .ok_or_else(|| StepError::Permanent(format!("dispatch for unknown query {}", job.query_id)))
}

/// The job's dispatch in the query's plan (borrowed from the record, not copied), checked
/// against the worker's tier.
fn planned_dispatch<'a>(
    query: &'a QueryRecord,
    tier: Option<u8>,
    job: &DispatchJob,
) -> Result<&'a PlannedDispatch, StepError> {
    let planned = query.plan.as_ref().and_then(|p| p.dispatch(&job.dispatch_id)).ok_or_else(|| {
        StepError::Permanent(format!("dispatch {} is not in the plan of query {}", job.dispatch_id, job.query_id))
    })?;
    if let Some(tier) = tier {
        if planned.dispatch.target_tier != tier {
            return Err(StepError::Permanent(format!(
                "dispatch for tier {} delivered to the tier {tier} worker",
                planned.dispatch.target_tier
            )));
        }
    }
    Ok(planned)
}

async fn attempt(deps: &Deps, tier: Option<u8>, job: &DispatchJob) -> Result<(), StepError> {
    let query = load(deps, job).await?;
    let planned = planned_dispatch(&query, tier, job)?;
    if deps.store.get_handoff(&job.query_id, &job.dispatch_id).await?.is_some() {
        // Already answered (a duplicate or a late redelivery): make sure the fan-in moved on.
        return advance(deps, &job.query_id).await;
    }
    // A background dispatch (the research-assistant design's memory step) still runs after the answer is out.
    if query.status == QueryStatus::Done && planned.role != DispatchRole::Background {
        return close_after_the_end(deps, &query, planned).await;
    }
    let manifest = deps.manifest_for(&query).await?;
    let Some(agent) = manifest.agent(&planned.dispatch.target_agent) else {
        let now = deps.clock.now();
        let failure = Failure {
            error_type: "agent_error",
            message: format!("agent `{}` is not in the manifest", planned.dispatch.target_agent),
            recoverable: false,
            timed_out: false,
            latency_ms: 0,
            started_at: now,
            completed_at: now,
        };
        return give_up(deps, &manifest, &query, planned, None, job.attempt, failure).await;
    };
    let handed_over = query
        .plan
        .as_ref()
        .is_some_and(|p| p.all_dispatches().any(|d| d.fallback_for.as_deref() == Some(job.dispatch_id.as_str())));
    if handed_over {
        // Given up on and handed to its fallback by a delivery that stopped before recording
        // the failed handoff: the agent is not run again (one that calls tools would act after
        // it was given up on); the failed handoff is recorded now.
        let now = deps.clock.now();
        let failure = Failure {
            error_type: "agent_error",
            message: "the dispatch was handed to its fallback".into(),
            recoverable: false,
            timed_out: false,
            latency_ms: 0,
            started_at: now,
            completed_at: now,
        };
        return give_up(deps, &manifest, &query, planned, Some(agent), job.attempt, failure).await;
    }
    let started_at = deps.clock.now();
    let started = tokio::time::Instant::now();
    let stage = query.plan.as_ref().map(|p| p.current_stage).unwrap_or(0);
    let tag = || StreamTag::attempt(stage, &agent.id, &planned.dispatch.dispatch_id, job.attempt);
    let timeout = Duration::from_millis(job.timeout_ms.max(1));
    let ran = run_agent(deps, &query, tag, agent, &planned.dispatch, job.attempt, timeout).await;
    let completed_at = deps.clock.now();
    let latency_ms = started.elapsed().as_millis() as u64;
    let failure = |error_type, message: String, recoverable, timed_out| Failure {
        error_type,
        message,
        recoverable,
        timed_out,
        latency_ms,
        started_at,
        completed_at,
    };
    if matches!(ran, Ok(Ok(AgentReply::AwaitingApproval))) {
        // The waiting call is stored on the query; the decision sends this attempt again.
        info!(agent = %agent.id, "the attempt waits for a person's decision");
        return Ok(());
    }
    let outcome = match ran {
        Err(_) => Err(failure("agent_timeout", format!("no answer within {} ms", job.timeout_ms), true, true)),
        Ok(Err(e)) => Err(failure("agent_error", e.message, e.recoverable, false)),
        Ok(Ok(reply)) => {
            let handoff = match reply {
                AgentReply::Typed(answer) => {
                    handoff_from_typed(*answer, agent, planned, started_at, completed_at, latency_ms)
                }
                AgentReply::Answer(value) => {
                    handoff_from_answer(value, agent, planned, started_at, completed_at, latency_ms)
                }
                AgentReply::Malformed(raw) => Err(malformed_message(&raw)),
                AgentReply::AwaitingApproval => Err("the agent waits for a person's decision".to_string()),
            };
            match handoff {
                Ok(h) if matches!(h.execution.status, HandoffStatus::Failed | HandoffStatus::Timeout) => {
                    let recoverable = h.errors.recoverable;
                    let message =
                        h.errors.error_message.clone().unwrap_or_else(|| "the agent reported a failure".into());
                    Err(failure("agent_error", message, recoverable, h.execution.status == HandoffStatus::Timeout))
                }
                Ok(h) => Ok(h),
                Err(reason) => Err(failure("malformed_handoff", reason, true, false)),
            }
        }
    };
    match outcome {
        Ok(handoff) => {
            let record = record_for(deps, &query, planned, agent, handoff, job.attempt);
            finalize(deps, &query, planned, record).await
        }
        Err(f) if f.recoverable && job.attempt <= planned.dispatch.routing.retry_count => {
            schedule_retry(deps, &manifest, &query, planned, agent, job, f).await
        }
        Err(f) => give_up(deps, &manifest, &query, planned, Some(agent), job.attempt, f).await,
    }
}

fn malformed_message(raw: &str) -> String {
    let mut shown: String = raw.chars().take(500).collect();
    if shown.len() < raw.len() {
        shown.push('…');
    }
    format!("the agent's answer is not a valid handoff: {shown}")
}

/// Validate an agent's JSON answer into an E2I handoff: a full handoff (its dispatch id
/// must match) or a `result`-shaped object.
fn handoff_from_answer(
    value: Value,
    agent: &Agent,
    planned: &PlannedDispatch,
    started_at: DateTime<Utc>,
    completed_at: DateTime<Utc>,
    latency_ms: u64,
) -> Result<AgentHandoff, String> {
    let value = match value {
        Value::Object(mut map) if map.contains_key("handoff") => map.remove("handoff").unwrap_or(Value::Null),
        other => other,
    };
    if value.get("dispatch_id").is_some() {
        let mut h: AgentHandoff = serde_json::from_value(value).map_err(|e| format!("not a handoff: {e}"))?;
        if h.dispatch_id != planned.dispatch.dispatch_id {
            return Err(format!("handoff answers dispatch {}, not {}", h.dispatch_id, planned.dispatch.dispatch_id));
        }
        check_confidence(h.result.confidence)?;
        h.agent_id = agent.id.clone();
        h.agent_tier = agent.tier;
        return Ok(h);
    }
    let Value::Object(mut obj) = value else { return Err("the answer is not a JSON object".to_string()) };
    let status: HandoffStatus = match obj.get("status") {
        Some(s) => HandoffStatus::deserialize(s).map_err(|_| format!("status {s} is not a handoff status"))?,
        None => HandoffStatus::Success,
    };
    // The result's fields are moved out of the answer (the other fields are read below).
    let mut take = |key: &str, absent: Value| obj.remove(key).unwrap_or(absent);
    let fields: serde_json::Map<String, Value> = [
        ("primary_output", take("primary_output", Value::Null)),
        ("confidence", take("confidence", json!(0.0))),
        ("evidence", take("evidence", json!([]))),
        ("caveats", take("caveats", json!([]))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let result: HandoffResult =
        serde_json::from_value(Value::Object(fields)).map_err(|e| format!("result fields: {e}"))?;
    check_confidence(result.confidence)?;
    Ok(AgentHandoff {
        dispatch_id: planned.dispatch.dispatch_id.clone(),
        agent_id: agent.id.clone(),
        agent_tier: agent.tier,
        execution: HandoffExecution { status, started_at, completed_at, latency_ms },
        result,
        artifacts: HandoffArtifacts {
            visualizations: obj.get("visualizations").and_then(Value::as_array).cloned().unwrap_or_default(),
            ..HandoffArtifacts::default()
        },
        errors: HandoffErrors {
            error_type: obj.get("error_type").and_then(Value::as_str).map(str::to_string),
            error_message: obj.get("error").and_then(Value::as_str).map(str::to_string),
            recoverable: obj.get("recoverable").and_then(Value::as_bool).unwrap_or(true),
        },
        metadata: HandoffMetadata {
            model_used: obj.get("model_used").and_then(Value::as_str).unwrap_or_default().to_string(),
            tokens_consumed: obj.get("tokens_consumed").and_then(Value::as_u64).unwrap_or(0),
            input_tokens: obj.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: obj.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
            cache_hit: obj.get("cache_hit").and_then(Value::as_bool).unwrap_or(false),
        },
    })
}

/// The same validation for an answer that came typed ([`AgentReply::Typed`]): the fields a
/// JSON answer may leave out take the same defaults.
fn handoff_from_typed(
    answer: TypedAnswer,
    agent: &Agent,
    planned: &PlannedDispatch,
    started_at: DateTime<Utc>,
    completed_at: DateTime<Utc>,
    latency_ms: u64,
) -> Result<AgentHandoff, String> {
    check_confidence(answer.result.confidence)?;
    Ok(AgentHandoff {
        dispatch_id: planned.dispatch.dispatch_id.clone(),
        agent_id: agent.id.clone(),
        agent_tier: agent.tier,
        execution: HandoffExecution { status: answer.status, started_at, completed_at, latency_ms },
        result: answer.result,
        artifacts: HandoffArtifacts::default(),
        errors: HandoffErrors { error_type: None, error_message: None, recoverable: true },
        metadata: HandoffMetadata { model_used: answer.model_used, ..HandoffMetadata::default() },
    })
}

fn check_confidence(c: f64) -> Result<(), String> {
    if c.is_finite() && (0.0..=1.0).contains(&c) {
        Ok(())
    } else {
        Err(format!("confidence {c} is outside [0, 1]"))
    }
}

/// Wrap a validated handoff with the engine's post-handoff checks (E2I): latency over
/// budget and confidence below the threshold become caveats.
fn record_for(
    deps: &Deps,
    query: &QueryRecord,
    planned: &PlannedDispatch,
    agent: &Agent,
    handoff: AgentHandoff,
    attempts: u32,
) -> HandoffRecord {
    let mut caveats = Vec::new();
    let c = &planned.dispatch.payload.constraints;
    if handoff.execution.latency_ms > c.max_latency_ms {
        caveats.push(format!(
            "{} took {} ms, over its {} ms latency budget",
            agent.id, handoff.execution.latency_ms, c.max_latency_ms
        ));
    }
    if handoff.execution.status.is_usable() && handoff.result.confidence < c.required_confidence {
        caveats.push(format!(
            "{} answered with confidence {:.2}, below the {:.2} it requires",
            agent.id, handoff.result.confidence, c.required_confidence
        ));
    }
    let mut record = HandoffRecord {
        query_id: query.query_id.clone(),
        slot: Some(planned.slot.clone()),
        attempts,
        fallback_for: planned.fallback_for.clone(),
        engine_caveats: caveats,
        handoff,
        expires_at: deps.expires_at(),
    };
    shrink_if_too_large(&mut record);
    record
}

/// A handoff too large for one item keeps its status, confidence and caveats; its outputs are
/// replaced by a note, and a caveat says so. Nothing is dropped silently.
fn shrink_if_too_large(record: &mut HandoffRecord) {
    let Err(size) = switchyard_model::limits::json_fits(record, MAX_HANDOFF_BYTES) else { return };
    let h = &mut record.handoff;
    let text: String =
        h.result.primary_output.get("response").and_then(Value::as_str).unwrap_or("").chars().take(4_000).collect();
    h.result.primary_output = json!({ "response": text, "truncated": true, "original_bytes": size });
    h.result.evidence.truncate(20);
    h.artifacts = HandoffArtifacts::default();
    record.engine_caveats.push(format!(
        "{}'s answer was {size} bytes, over the {MAX_HANDOFF_BYTES}-byte record limit; only its first 4000 characters of text are kept",
        h.agent_id
    ));
}

async fn schedule_retry(
    deps: &Deps,
    manifest: &Manifest,
    query: &QueryRecord,
    planned: &PlannedDispatch,
    agent: &Agent,
    job: &DispatchJob,
    f: Failure,
) -> Result<(), StepError> {
    let tier = manifest.tier(agent.tier);
    let backoff = tier.map(|t| t.backoff).unwrap_or_default();
    let raw = backoff.base.as_millis().saturating_mul(1u64 << (job.attempt - 1).min(20)).min(backoff.max.as_millis());
    let delay_ms = if backoff.jitter { raw / 2 + (deps.random_fraction() * (raw / 2) as f64) as u64 } else { raw };
    let next_timeout = if f.timed_out {
        let ext = tier.map(|t| t.timeout_extension).unwrap_or(1.0);
        ((job.timeout_ms as f64 * ext).round() as u64).min(MAX_ATTEMPT_TIMEOUT_MS)
    } else {
        job.timeout_ms
    };
    let stage = query.plan.as_ref().map(|p| p.current_stage).unwrap_or(0);
    let event = deps.event(
        query,
        Entry::Retry,
        stage,
        &format!("{}-{}", job.dispatch_id, job.attempt),
        json!({
            "dispatch_id": job.dispatch_id,
            "agent": agent.id,
            "attempt": job.attempt,
            "error_type": f.error_type,
            "error": f.message,
            "next_attempt": job.attempt + 1,
            "delay_ms": delay_ms,
            "timeout_ms": next_timeout,
        }),
    );
    deps.store.append_events(&[event]).await?;
    info!(agent = %agent.id, error_type = f.error_type, delay_ms, next_timeout, "attempt failed; retrying");
    let next = Job::Dispatch {
        query_id: job.query_id.clone(),
        dispatch_id: job.dispatch_id.clone(),
        attempt: job.attempt + 1,
        timeout_ms: next_timeout,
    };
    deps.send(QueueId::tier(planned.dispatch.target_tier), next, Duration::from_millis(delay_ms)).await?;
    Ok(())
}

fn failed_handoff(planned: &PlannedDispatch, agent_tier: u8, f: &Failure) -> AgentHandoff {
    AgentHandoff {
        dispatch_id: planned.dispatch.dispatch_id.clone(),
        agent_id: planned.dispatch.target_agent.clone(),
        agent_tier,
        execution: HandoffExecution {
            status: if f.timed_out { HandoffStatus::Timeout } else { HandoffStatus::Failed },
            started_at: f.started_at,
            completed_at: f.completed_at,
            latency_ms: f.latency_ms,
        },
        result: HandoffResult::default(),
        artifacts: HandoffArtifacts::default(),
        errors: HandoffErrors {
            error_type: Some(f.error_type.to_string()),
            error_message: Some(f.message.clone()),
            recoverable: f.recoverable,
        },
        metadata: HandoffMetadata::default(),
    }
}

/// Retries exhausted (or the failure is not recoverable): fall back, or fail the dispatch.
async fn give_up(
    deps: &Deps,
    manifest: &Manifest,
    query: &QueryRecord,
    planned: &PlannedDispatch,
    agent: Option<&Agent>,
    attempts: u32,
    f: Failure,
) -> Result<(), StepError> {
    let tier = planned.dispatch.target_tier;
    let fallback = match (&planned.dispatch.routing.fallback_agent, agent) {
        (Some(id), _) if planned.role != DispatchRole::Fallback => Fallback::Agent(id.clone()),
        (_, Some(a)) => match manifest.agent_fallback(a) {
            Fallback::Template(t) => Fallback::Template(t),
            _ => Fallback::None,
        },
        _ => Fallback::None,
    };
    let mut handoff = failed_handoff(planned, tier, &f);
    let mut record = HandoffRecord {
        query_id: query.query_id.clone(),
        slot: Some(planned.slot.clone()),
        attempts,
        fallback_for: planned.fallback_for.clone(),
        engine_caveats: Vec::new(),
        handoff: handoff.clone(),
        expires_at: deps.expires_at(),
    };
    match fallback {
        Fallback::Agent(fallback_id) => {
            hand_over(deps, manifest, &query.query_id, planned, &fallback_id, &f).await?;
            record.slot = None;
            finalize(deps, query, planned, record).await
        }
        Fallback::Template(text) => {
            handoff.execution.status = HandoffStatus::Partial;
            handoff.result = HandoffResult {
                primary_output: json!({ "response": text, "template": true }),
                confidence: 0.5,
                evidence: Vec::new(),
                caveats: Vec::new(),
            };
            handoff.metadata.model_used = crate::ports::TEMPLATE_MODEL.into();
            record.engine_caveats.push(format!(
                "{} did not answer ({}); a template response stands in",
                planned.dispatch.target_agent, f.message
            ));
            record.handoff = handoff;
            finalize(deps, query, planned, record).await
        }
        Fallback::None => finalize(deps, query, planned, record).await,
    }
}

/// Add the fallback dispatch to the plan (once) and send it.
async fn hand_over(
    deps: &Deps,
    manifest: &Manifest,
    query_id: &str,
    planned: &PlannedDispatch,
    fallback_id: &str,
    f: &Failure,
) -> Result<(), StepError> {
    retry_on_conflict("adding a fallback", || async move {
        let Some(query) = deps.store.get_query(query_id).await? else {
            return Err(StepError::Permanent(format!("query {query_id} vanished")));
        };
        if query.status != QueryStatus::Routed {
            return Ok(Attempt::Done(()));
        }
        let Some(mut plan) = query.plan.as_deref().cloned() else { return Ok(Attempt::Done(())) };
        if plan.all_dispatches().any(|d| d.fallback_for.as_deref() == Some(planned.dispatch.dispatch_id.as_str())) {
            return Ok(Attempt::Done(())); // already handed over (a duplicate delivery): sent once
        }
        let Some(fallback_agent) = manifest.agent(fallback_id) else {
            return Err(StepError::Permanent(format!("fallback agent `{fallback_id}` is not in the manifest")));
        };
        let now = deps.clock.now();
        let mut dispatch = switchyard_core::plan::dispatch_for(
            manifest,
            fallback_agent,
            DispatchRole::Fallback,
            &query.parsed,
            query_id,
            now,
        );
        dispatch.payload.context = planned.dispatch.payload.context.clone();
        let fallback = PlannedDispatch {
            slot: planned.slot.clone(),
            role: DispatchRole::Fallback,
            fallback_for: Some(planned.dispatch.dispatch_id.clone()),
            dispatch,
        };
        let stage_index = plan.current_stage;
        let events = vec![
            deps.event(
                &query,
                Entry::Fallback,
                stage_index,
                &planned.dispatch.dispatch_id,
                json!({
                    "dispatch_id": planned.dispatch.dispatch_id,
                    "agent": planned.dispatch.target_agent,
                    "error_type": f.error_type,
                    "error": f.message,
                    "fallback_agent": fallback_id,
                    "fallback_dispatch_id": fallback.dispatch.dispatch_id,
                }),
            ),
            deps.event(
                &query,
                Entry::FallbackDispatch,
                stage_index,
                &fallback.dispatch.dispatch_id,
                json!({
                    "dispatch_id": fallback.dispatch.dispatch_id,
                    "agent": fallback_id,
                    "tier": fallback.dispatch.target_tier,
                    "role": "fallback",
                    "fallback_for": planned.dispatch.dispatch_id,
                }),
            ),
        ];
        let dispatch = fallback.dispatch.clone();
        if let Some(stage) = plan.stages.get_mut(stage_index) {
            stage.dispatches.push(fallback);
        }
        let mut updated = query.clone();
        updated.plan = Some(std::sync::Arc::new(plan));
        let restarted = close_approvals(&mut updated, &planned.dispatch.dispatch_id, now);
        if !written(deps.store.update_query(&updated, query.version, &events).await)? {
            return Ok(Attempt::Conflict);
        }
        if let Some(deadline) = restarted {
            super::effects::arm_deadline(deps, query_id, deadline).await?;
        }
        info!(agent = %planned.dispatch.target_agent, fallback = fallback_id, "retries exhausted; fallback dispatched");
        send_first_attempt(deps, &dispatch).await.map(Attempt::Done)
    })
    .await
}

/// Close the calls of `dispatch_id` that still wait for a person (a duplicate delivery asked
/// while this one gave up): they expire, as the dispatch will make no more calls. Returns the
/// restarted deadline when no call of the query waits any more.
fn close_approvals(query: &mut QueryRecord, dispatch_id: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut left = None;
    for a in query.approvals.iter_mut().filter(|a| a.dispatch_id == dispatch_id && a.is_pending()) {
        left = Some(a.deadline_left_ms);
        a.decision = Some(crate::ports::ApprovalDecision {
            verdict: crate::ports::Verdict::Expired,
            note: "the dispatch was handed to its fallback".into(),
            arguments: None,
            decided_by: "fallback".into(),
            decided_at: now,
        });
    }
    let left = left?;
    if query.approvals.iter().any(|a| a.is_pending()) || query.deadline_at.is_none() {
        return None;
    }
    let restarted = now + chrono::Duration::milliseconds(i64::try_from(left).unwrap_or(i64::MAX));
    query.deadline_at = Some(restarted);
    Some(restarted)
}

/// Record the handoff (once) and move the query on if it completed the stage.
async fn finalize(
    deps: &Deps,
    query: &QueryRecord,
    planned: &PlannedDispatch,
    record: HandoffRecord,
) -> Result<(), StepError> {
    // Shared with the store, which keeps it as written.
    let record = std::sync::Arc::new(record);
    let stage = query.plan.as_ref().map(|p| p.current_stage).unwrap_or(0);
    let h = &record.handoff;
    let event = deps.event(
        query,
        Entry::Handoff,
        stage,
        &h.dispatch_id,
        Detail::object()
            .field("agent", &h.agent_id)
            .field("attempts", &record.attempts)
            .field("confidence", &h.result.confidence)
            .field("dispatch_id", &h.dispatch_id)
            .field("error_type", &h.errors.error_type)
            .field("fallback_for", &planned.fallback_for)
            .field("fills_slot", &record.slot.is_some())
            .field("latency_ms", &h.execution.latency_ms)
            .field("status", &h.execution.status)
            .field("tier", &h.agent_tier)
            .finish(),
    );
    let mut events = vec![event];
    // An agent that reports how it retrieved (`primary_output.retrieval`: attempts, merge)
    // gets that into the event log beside its handoff.
    if let Some(r) = h.result.primary_output.get("retrieval").filter(|_| h.execution.status.is_usable()) {
        events.push(
            deps.event(
                query,
                Entry::Step { kind: EventKind::Step, name: "retrieval" },
                stage,
                &h.dispatch_id,
                Detail::object()
                    .field("agent", &h.agent_id)
                    .field("dispatch_id", &h.dispatch_id)
                    .field("retrieval", r)
                    .field("step", "retrieval")
                    .finish(),
            ),
        );
    }
    match deps.store.record_handoff(std::sync::Arc::clone(&record), &events).await {
        Ok(HandoffWrite::Recorded { completed }) => {
            info!(agent = %h.agent_id, status = ?h.execution.status, "handoff recorded");
            // The metric line's outcome is built only when metrics are written.
            if crate::telemetry::emf::enabled() {
                let outcome = serde_json::to_value(h.execution.status).ok();
                crate::telemetry::emf::emit(&crate::telemetry::emf::AgentCall {
                    query_id: &query.query_id,
                    dispatch_id: &h.dispatch_id,
                    agent: &h.agent_id,
                    tier: h.agent_tier,
                    outcome: outcome.as_ref().and_then(Value::as_str).unwrap_or("unknown"),
                    latency_ms: h.execution.latency_ms,
                    attempts: record.attempts,
                    tokens: h.metadata.tokens_consumed,
                    timestamp_ms: deps.clock.now().timestamp_millis(),
                });
            }
            let complete = record.slot.is_some()
                && query
                    .plan
                    .as_ref()
                    .and_then(|p| p.stages.get(p.current_stage))
                    .is_some_and(|s| s.is_complete(&completed));
            if complete {
                advance(deps, &query.query_id).await?;
            }
            Ok(())
        }
        Ok(HandoffWrite::Duplicate) => advance(deps, &query.query_id).await,
        Err(StoreError::ConditionFailed(m)) => {
            info!(reason = %m, "handoff not recorded: the query is gone");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// A dispatch job for a query that has ended, whose dispatch has no handoff (its handoff write
/// failed and the query finished before the job came back): close the dispatch with a `timeout`
/// handoff that fills no slot, as the deadline closes outstanding dispatches, so every dispatch
/// sent ends with exactly one handoff. The agent does not run; the output is not changed.
async fn close_after_the_end(deps: &Deps, query: &QueryRecord, planned: &PlannedDispatch) -> Result<(), StepError> {
    let now = deps.clock.now();
    let f = Failure {
        error_type: "agent_timeout",
        message: "the query ended before this dispatch recorded its handoff".into(),
        recoverable: false,
        timed_out: true,
        latency_ms: 0,
        started_at: now,
        completed_at: now,
    };
    let record = HandoffRecord {
        query_id: query.query_id.clone(),
        slot: None,
        attempts: 0,
        fallback_for: planned.fallback_for.clone(),
        engine_caveats: Vec::new(),
        handoff: failed_handoff(planned, planned.dispatch.target_tier, &f),
        expires_at: deps.expires_at(),
    };
    finalize(deps, query, planned, record).await
}

/// The last delivery of a dispatch job failed: record the dispatch as failed (it fills its
/// slot, no fallback — the worker itself is what keeps failing).
async fn give_up_after_deliveries(deps: &Deps, job: &DispatchJob, reason: &str) -> Result<(), StepError> {
    let query = load(deps, job).await?;
    let planned = planned_dispatch(&query, None, job)?;
    if query.status == QueryStatus::Done && planned.role != DispatchRole::Background {
        return Ok(());
    }
    let now = deps.clock.now();
    let f = Failure {
        error_type: "agent_error",
        message: format!("the worker failed on all {} deliveries: {reason}", job.receive_count),
        recoverable: false,
        timed_out: false,
        latency_ms: 0,
        started_at: now,
        completed_at: now,
    };
    let record = HandoffRecord {
        query_id: query.query_id.clone(),
        slot: Some(planned.slot.clone()),
        attempts: job.attempt,
        fallback_for: planned.fallback_for.clone(),
        engine_caveats: Vec::new(),
        handoff: failed_handoff(planned, planned.dispatch.target_tier, &f),
        expires_at: deps.expires_at(),
    };
    finalize(deps, &query, planned, record).await
}
