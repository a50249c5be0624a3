//! Router: plan the query from the manifest, record the dispatches, send them, arm the deadline.
//!
//! The plan (with every dispatch id) is written once, conditionally on the query still being
//! `accepted`. A redelivered route job finds it `routed` and re-sends the current stage's
//! dispatches that have no handoff yet, with the same ids — so a crash between the store write
//! and the sends loses nothing, and the duplicates it may cause are absorbed by the workers.

use super::deps::{Deps, StepError};
use super::effects::{
    arm_deadline, dispatch_events, request_synthesis, retry_on_conflict, send_first_attempt, send_stage, written,
    Attempt, Entry,
};
use crate::ports::{Detail, QueryRecord, QueryStatus};
use switchyard_core::plan::modes::build_plan;
use switchyard_core::plan::Plan;
use tracing::{info, instrument};

/// Handle a route job.
#[instrument(skip(deps), fields(query_id = %query_id))]
pub async fn route(deps: &Deps, query_id: &str) -> Result<(), StepError> {
    retry_on_conflict("routing", || async move {
        let query = deps
            .store
            .get_query(query_id)
            .await?
            .ok_or_else(|| StepError::Permanent(format!("route job for unknown query {query_id}")))?;
        match query.status {
            QueryStatus::Accepted => {}
            QueryStatus::Routed => return resend_outstanding(deps, &query).await.map(Attempt::Done),
            QueryStatus::Synthesizing | QueryStatus::Done => return Ok(Attempt::Done(())),
        }
        let now = deps.clock.now();
        let manifest = deps.manifest_for(&query).await?;
        let out_of_scope = query.scope.as_ref().is_some_and(switchyard_core::scope::ScopeCheck::is_out_of_scope);
        // A required entity the question did not name: no agent runs; the synthesizer asks for
        // it (switchyard_core::slots). A query the cascaded classifier settles first is checked
        // on the intent it settles.
        let cascades = manifest.classifier.llm.is_some()
            && manifest.classifier.needs_cascade(query.parsed.confidence, query.parsed.ambiguity_flag);
        let missing = if out_of_scope || cascades {
            Vec::new()
        } else {
            switchyard_core::slots::missing(&manifest, &query.parsed.intent, &query.parsed.entities)
        };
        let plan = if out_of_scope || !missing.is_empty() {
            // No intent covers the question: a plan of no stages, answered by the synthesizer
            // with what this assistant can help with (switchyard_core::scope, docs/scope.md).
            Plan {
                intent: query.parsed.intent.clone(),
                pipeline: None,
                stages: vec![],
                current_stage: 0,
                deadline_ms: 0,
                flow: None,
            }
        } else {
            match build_plan(&manifest, &query, now) {
                Ok(plan) => plan,
                Err(e) => return Err(StepError::Permanent(format!("no plan: {e}"))),
            }
        };
        // The deadline fires `query.deadline_slack` after the plan's worst case: an answer
        // arriving just at its limit is still waited for.
        let slack = chrono::Duration::milliseconds(manifest.query.deadline_slack.as_millis() as i64);
        let deadline_at = query.accepted_at + chrono::Duration::milliseconds(plan.deadline_ms as i64) + slack;
        let mut detail = Detail::object().field("deadline_at", &deadline_at).field("intent", &plan.intent);
        if !missing.is_empty() {
            detail = detail.field("missing_entities", &missing);
        }
        let detail = detail
            .field("out_of_scope", &out_of_scope)
            .field("pipeline", &plan.pipeline)
            .field(
                "stages",
                &plan
                    .stages
                    .iter()
                    .map(|s| s.dispatches.iter().map(|d| &d.dispatch.target_agent).collect::<Vec<_>>())
                    .collect::<Vec<_>>(),
            )
            .finish();
        let mut events = vec![deps.event(&query, Entry::Plan, 0, "", detail)];
        events.extend(dispatch_events(deps, &query, &plan, 0));
        // The training signal rides on the write that records the plan.
        let signal = switchyard_core::signals::collect::at_routing(&manifest, &query, &plan, now);
        // The record read is not needed again: it becomes the routed one (no copy).
        let version = query.version;
        let mut routed = query;
        routed.status = QueryStatus::Routed;
        routed.deadline_at = Some(deadline_at);
        routed.signal = Some(std::sync::Arc::new(signal));
        routed.plan = Some(std::sync::Arc::new(plan));
        if !written(deps.store.update_query(&routed, version, &events).await)? {
            return Ok(Attempt::Conflict);
        }
        routed.version = version + 1;
        if out_of_scope {
            info!("query out of scope; answered without an agent");
            request_synthesis(deps, query_id).await?;
            return Ok(Attempt::Done(()));
        }
        if !missing.is_empty() {
            info!(missing = ?missing, "required entities missing; asking for them without an agent");
            request_synthesis(deps, query_id).await?;
            return Ok(Attempt::Done(()));
        }
        info!(intent = %routed.parsed.intent, "query routed");
        send_stage(deps, &routed, 0).await?;
        arm_deadline(deps, query_id, deadline_at).await?;
        if let Some(budget) = routed.plan.as_ref().and_then(|p| p.stages.first()).and_then(|s| s.budget_until) {
            arm_deadline(deps, query_id, budget).await?;
        }
        Ok(Attempt::Done(()))
    })
    .await
}

/// A redelivered route job: re-send the current stage's dispatches that have no handoff, and
/// the deadline (both idempotent downstream).
async fn resend_outstanding(deps: &Deps, query: &QueryRecord) -> Result<(), StepError> {
    let Some(plan) = &query.plan else { return Ok(()) };
    if plan.stages.is_empty() {
        // Out of scope or missing entities: the synth job may have been lost with the first
        // delivery.
        return request_synthesis(deps, &query.query_id).await;
    }
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
