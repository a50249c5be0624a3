//! Moving a query on when its current stage is complete: the next pipeline stage after its QC
//! gate, the next step of an orchestration mode, or the synthesis.
//!
//! Both the worker (the handoff that completes a stage) and the synthesizer (a stage whose time
//! budget ran out) call [`advance`]; it is safe to call any number of times, because each move
//! is one conditional write of the query record.

use super::deps::{Deps, StepError};
use super::effects::{
    arm_deadline, dispatch_events, request_synthesis, retry_on_conflict, send_first_attempt, send_stage, written,
    Attempt, Entry,
};
use crate::ports::{HandoffRecord, QueryStatus};
use serde_json::{json, Value};
use std::sync::Arc;
use switchyard_core::plan::handoffs::{check_gate, slot_handoff};
use switchyard_core::plan::modes::next_step;
use switchyard_core::plan::{Flow, Plan};
use switchyard_model::contracts::HandoffStatus;
use tracing::info;

/// Move the query on if its current stage is complete: start the next pipeline stage (when
/// the step answered and its gate passes), or ask for the synthesis. Safe to call any number
/// of times.
pub async fn advance(deps: &Deps, query_id: &str) -> Result<(), StepError> {
    retry_on_conflict("advancing", || async move {
        let Some(query) = deps.store.get_query(query_id).await? else { return Ok(Attempt::Done(())) };
        if query.status != QueryStatus::Routed {
            return Ok(Attempt::Done(()));
        }
        // Borrowed: most calls find the stage incomplete or ask for the synthesis.
        let Some(plan) = query.plan.as_ref() else { return Ok(Attempt::Done(())) };
        let Some(stage) = plan.stages.get(plan.current_stage) else { return Ok(Attempt::Done(())) };
        if !stage.is_complete(&query.completed) {
            return Ok(Attempt::Done(()));
        }
        let next = plan.current_stage + 1;
        if next >= plan.stages.len() {
            if plan.flow.is_some() {
                return extend(deps, query_id).await.map(Attempt::Done);
            }
            return request_synthesis(deps, query_id).await.map(Attempt::Done);
        }
        let handoffs = deps.store.list_handoffs(query_id).await?;
        let step: Vec<&HandoffRecord> = stage.slots().filter_map(|s| slot_handoff(&handoffs, s)).collect();
        let usable = step
            .iter()
            .all(|h| h.handoff.execution.status.is_usable() || h.handoff.execution.status == HandoffStatus::Blocked);
        let gate = match &stage.gate {
            Some(gate) => step.iter().map(|h| check_gate(gate, &h.handoff)).find_map(Result::err),
            None => None,
        };
        if !usable || gate.is_some() || step.iter().any(|h| h.handoff.execution.status == HandoffStatus::Blocked) {
            if let Some(report) = &gate {
                let event =
                    deps.event(&query, Entry::Gate, plan.current_stage, "", json!({ "passed": false, "qc": report }));
                deps.store.append_events(&[event]).await?;
            }
            return request_synthesis(deps, query_id).await.map(Attempt::Done);
        }
        let previous: Vec<Value> = step.iter().map(|h| h.handoff.result.primary_output.clone()).collect();
        let mut advanced_plan = Plan::clone(plan);
        advanced_plan.current_stage = next;
        for d in &mut advanced_plan.stages[next].dispatches {
            if let Value::Object(ctx) = &mut d.dispatch.payload.context {
                ctx.insert(
                    "previous".into(),
                    if previous.len() == 1 { previous[0].clone() } else { Value::Array(previous.clone()) },
                );
            }
            d.dispatch.metadata.dispatched_at = deps.clock.now();
        }
        let mut events = Vec::new();
        if let Some(g) = &stage.gate {
            events.push(deps.event(
                &query,
                Entry::Gate,
                plan.current_stage,
                "",
                json!({ "gate": g.name, "passed": true }),
            ));
        }
        events.extend(dispatch_events(deps, &query, &advanced_plan, next));
        let mut updated = query.clone();
        updated.plan = Some(Arc::new(advanced_plan));
        if !written(deps.store.update_query(&updated, query.version, &events).await)? {
            return Ok(Attempt::Conflict);
        }
        info!(stage = next, "pipeline stage started");
        send_stage(deps, &updated, next).await.map(Attempt::Done)
    })
    .await
}

/// The current stage of a flow is complete: append the next step (once) and send it, or ask
/// for the synthesis. Called by [`advance`].
pub async fn extend(deps: &Deps, query_id: &str) -> Result<(), StepError> {
    retry_on_conflict("extending the flow", || async move {
        let Some(query) = deps.store.get_query(query_id).await? else { return Ok(Attempt::Done(())) };
        if query.status != QueryStatus::Routed {
            return Ok(Attempt::Done(()));
        }
        let Some(plan) = query.plan.clone() else { return Ok(Attempt::Done(())) };
        let Some(current) = plan.stages.get(plan.current_stage) else { return Ok(Attempt::Done(())) };
        if !current.is_complete(&query.completed) || plan.current_stage + 1 < plan.stages.len() {
            return Ok(Attempt::Done(()));
        }
        let handoffs = deps.store.list_handoffs(query_id).await?;
        let now = deps.clock.now();
        let manifest = deps.manifest_for(&query).await?;
        let next = next_step(&manifest, &query, &handoffs, now)
            .map_err(|e| StepError::Permanent(format!("cannot plan the next step: {e}")))?;
        let changes = !next.stages.is_empty() || !next.background.is_empty() || next.parsed.is_some();
        if !changes {
            // Nothing more to run; the step's events are written with the synthesis request.
            if !next.events.is_empty() {
                let events: Vec<_> = next
                    .events
                    .iter()
                    .map(|(kind, name, detail)| {
                        deps.event(&query, Entry::Step { kind: *kind, name }, plan.current_stage, "", detail.clone())
                    })
                    .collect();
                deps.store.append_events(&events).await?;
            }
            return request_synthesis(deps, query_id).await.map(Attempt::Done);
        }
        let mut updated = query.clone();
        let mut new_plan = Plan::clone(&plan);
        let mut events: Vec<_> = next
            .events
            .iter()
            .map(|(kind, name, detail)| {
                deps.event(&query, Entry::Step { kind: *kind, name }, plan.current_stage, "", detail.clone())
            })
            .collect();
        if let Some(parsed) = next.parsed {
            if let Some(intent) = manifest.intent(&parsed.intent) {
                new_plan.pipeline = intent.route.pipeline.clone();
            }
            new_plan.intent = parsed.intent.clone();
            updated.parsed = Arc::new(parsed);
        }
        if let Some(c) = next.classification {
            new_plan.flow.get_or_insert_with(Flow::default).classification = Some(c);
        }
        let background = next.background.clone();
        let started = !next.stages.is_empty();
        if started {
            new_plan.stages.extend(next.stages);
            new_plan.current_stage += 1;
            events.extend(dispatch_events(deps, &query, &new_plan, new_plan.current_stage));
        }
        if let Some(stage) = new_plan.stages.get_mut(new_plan.current_stage) {
            for d in &background {
                events.push(deps.event(
                    &query,
                    Entry::BackgroundDispatch,
                    plan.current_stage,
                    &d.dispatch.dispatch_id,
                    json!({ "dispatch_id": d.dispatch.dispatch_id, "agent": d.dispatch.target_agent, "tier": d.dispatch.target_tier, "role": "background" }),
                ));
            }
            stage.dispatches.extend(background.iter().cloned());
        }
        updated.plan = Some(Arc::new(new_plan));
        if !written(deps.store.update_query(&updated, query.version, &events).await)? {
            return Ok(Attempt::Conflict);
        }
        for d in &background {
            send_first_attempt(deps, &d.dispatch).await?;
        }
        if !started {
            return request_synthesis(deps, query_id).await.map(Attempt::Done);
        }
        let plan = updated
            .plan
            .as_ref()
            .map(|p| (p.current_stage, p.stages.get(p.current_stage).and_then(|s| s.budget_until)));
        let (index, budget) = plan.unwrap_or((0, None));
        info!(stage = index, step = ?updated.plan.as_ref().and_then(|p| p.stages.get(index)).and_then(|s| s.step.clone()), "flow step started");
        send_stage(deps, &updated, index).await?;
        if let Some(until) = budget {
            arm_deadline(deps, query_id, until).await?;
        }
        Ok(Attempt::Done(()))
    })
    .await
}
