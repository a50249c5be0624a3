//! Router: plan the query from the manifest, record the dispatches, send them, arm the deadline.
//!
//! The plan (with every dispatch id) is written once, conditionally on the query still being
//! `accepted`. A redelivered route job finds it `routed` and re-sends the current stage's
//! dispatches that have no handoff yet, with the same ids — so a crash between the store write
//! and the sends loses nothing, and the duplicates it may cause are absorbed by the workers.

use super::{event_key, Deps, StepError};
use crate::jobs::Job;
use crate::limits::SQS_MAX_DELAY_S;
use crate::plan::Plan;
use crate::ports::{EventKind, QueryRecord, QueryStatus, QueueId, StoreError};
use serde_json::json;
use std::time::Duration;
use tracing::{info, instrument};

/// Handle a route job.
#[instrument(skip(deps), fields(query_id = %query_id))]
pub async fn route(deps: &Deps, query_id: &str) -> Result<(), StepError> {
    for _ in 0..5 {
        let query = deps
            .store
            .get_query(query_id)
            .await?
            .ok_or_else(|| StepError::Permanent(format!("route job for unknown query {query_id}")))?;
        match query.status {
            QueryStatus::Accepted => {}
            QueryStatus::Routed => return resend_outstanding(deps, &query).await,
            QueryStatus::Synthesizing | QueryStatus::Done => return Ok(()),
        }
        let now = deps.clock.now();
        let manifest = deps.manifest_for(&query).await?;
        let plan = match super::modes::build_plan(&manifest, &query, now) {
            Ok(plan) => plan,
            Err(e) => return Err(StepError::Permanent(format!("no plan: {e}"))),
        };
        let deadline_at = query.accepted_at + chrono::Duration::milliseconds(plan.deadline_ms as i64);
        let mut routed = query.clone();
        routed.status = QueryStatus::Routed;
        routed.deadline_at = Some(deadline_at);
        let mut events = vec![deps.event(
            &query,
            event_key(0, 30, "plan", ""),
            EventKind::Plan,
            json!({
                "intent": plan.intent,
                "pipeline": plan.pipeline,
                "stages": plan.stages.iter().map(|s| s.dispatches.iter().map(|d| &d.dispatch.target_agent).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "deadline_at": deadline_at,
            }),
        )];
        events.extend(dispatch_events(deps, &query, &plan, 0));
        routed.plan = Some(plan);
        match deps.store.update_query(&routed, query.version, &events).await {
            Ok(()) => {}
            Err(StoreError::ConditionFailed(_)) => continue,
            Err(e) => return Err(e.into()),
        }
        routed.version = query.version + 1;
        info!(intent = %routed.parsed.intent, "query routed");
        send_stage(deps, &routed, 0).await?;
        arm_deadline(deps, query_id, deadline_at).await?;
        if let Some(budget) = routed.plan.as_ref().and_then(|p| p.stages.first()).and_then(|s| s.budget_until) {
            arm_deadline(deps, query_id, budget).await?;
        }
        return Ok(());
    }
    Err(StepError::Retryable("query record kept changing while routing".into()))
}

/// Dispatch events for a stage about to be sent.
pub(super) fn dispatch_events(deps: &Deps, query: &QueryRecord, plan: &Plan, stage: usize) -> Vec<crate::ports::Event> {
    plan.stages
        .get(stage)
        .map(|s| {
            s.dispatches
                .iter()
                .map(|d| {
                    deps.event(
                        query,
                        event_key(stage, 40, "dispatch", &d.dispatch.dispatch_id),
                        EventKind::Dispatch,
                        json!({
                            "dispatch_id": d.dispatch.dispatch_id,
                            "agent": d.dispatch.target_agent,
                            "tier": d.dispatch.target_tier,
                            "role": d.role,
                            "priority": d.dispatch.routing.priority,
                            "timeout_ms": d.dispatch.routing.timeout_ms,
                        }),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Send every dispatch of a stage to its tier's queue (first attempt): one batch per tier.
pub(super) async fn send_stage(deps: &Deps, query: &QueryRecord, stage: usize) -> Result<(), StepError> {
    let Some(stage) = query.plan.as_ref().and_then(|p| p.stages.get(stage)) else { return Ok(()) };
    let mut by_tier: std::collections::BTreeMap<u8, Vec<Job>> = std::collections::BTreeMap::new();
    for d in &stage.dispatches {
        by_tier.entry(d.dispatch.target_tier).or_default().push(first_attempt(&d.dispatch));
    }
    for (tier, jobs) in by_tier {
        deps.send_batch(QueueId::tier(tier), jobs).await?;
    }
    Ok(())
}

/// Attempt 1 of a dispatch.
fn first_attempt(d: &crate::contracts::AgentDispatch) -> Job {
    Job::Dispatch {
        query_id: d.query_id.clone(),
        dispatch_id: d.dispatch_id.clone(),
        attempt: 1,
        timeout_ms: d.routing.timeout_ms,
    }
}

/// Send attempt 1 of a dispatch.
pub(super) async fn send_first_attempt(deps: &Deps, d: &crate::contracts::AgentDispatch) -> Result<(), StepError> {
    deps.send(QueueId::tier(d.target_tier), first_attempt(d), Duration::ZERO).await?;
    Ok(())
}

/// Send the deadline message: delayed until `fire_at`, or by SQS's 15-minute maximum and then
/// re-sent by the synthesizer until it is due.
pub(super) async fn arm_deadline(
    deps: &Deps,
    query_id: &str,
    fire_at: chrono::DateTime<chrono::Utc>,
) -> Result<(), StepError> {
    let remaining = (fire_at - deps.clock.now()).to_std().unwrap_or(Duration::ZERO);
    let delay = remaining.min(Duration::from_secs(SQS_MAX_DELAY_S));
    let job = Job::Deadline { query_id: query_id.to_string(), fire_at };
    deps.send(QueueId::synth(), job, delay).await?;
    Ok(())
}

/// A redelivered route job: re-send the current stage's dispatches that have no handoff, and
/// the deadline (both idempotent downstream).
async fn resend_outstanding(deps: &Deps, query: &QueryRecord) -> Result<(), StepError> {
    let Some(plan) = &query.plan else { return Ok(()) };
    let Some(stage) = plan.stages.get(plan.current_stage) else { return Ok(()) };
    let mut resent = 0;
    for d in &stage.dispatches {
        if deps.store.get_handoff(&query.query_id, &d.dispatch.dispatch_id).await?.is_none() {
            send_first_attempt(deps, &d.dispatch).await?;
            resent += 1;
        }
    }
    if let Some(fire_at) = query.deadline_at {
        arm_deadline(deps, &query.query_id, fire_at).await?;
    }
    info!(resent, "route job redelivered; outstanding dispatches re-sent");
    Ok(())
}
