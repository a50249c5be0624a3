//! The signal of one query as the pipeline builds it: collected when the router plans the
//! query, completed with the outcome when the synthesizer writes the answer, and given the
//! caller's feedback later. It lives on the query's record ([`switchyard_model::records::QueryRecord`]), so
//! each stage writes it inside the write that stage already makes (no extra request).

use crate::plan::Plan;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use switchyard_model::contracts::{HandoffStatus, OrchestratorOutput, RoutingTrainingSignal};
use switchyard_model::manifest::Manifest;
pub use switchyard_model::records::StoredSignal;
use switchyard_model::records::{HandoffRecord, QueryRecord};

/// How the intent was decided, in words (ids and numbers only, never the question).
fn rationale(query: &QueryRecord) -> String {
    let parsed = &query.parsed;
    let mut text = match &query.scope {
        None => format!("pre-parsed by the caller as {} ({:.2})", parsed.intent, parsed.confidence),
        Some(scope) if scope.is_out_of_scope() => {
            format!("embedded classifier: out of scope (scope score {:.2} below {:.2})", scope.score, scope.threshold)
        }
        Some(_) => format!("embedded classifier: {} ({:.2})", parsed.intent, parsed.confidence),
    };
    if parsed.ambiguity_flag {
        text.push_str(", ambiguous");
    }
    text
}

/// The agents a plan dispatches as planned (fallbacks are not selected; they stand in), each
/// once, in plan order.
fn selected(plan: &Plan) -> Vec<String> {
    let mut agents: Vec<String> = Vec::new();
    for d in plan.all_dispatches().filter(|d| d.fallback_for.is_none()) {
        if !agents.contains(&d.dispatch.target_agent) {
            agents.push(d.dispatch.target_agent.clone());
        }
    }
    agents
}

/// The signal the router records with its plan (E2I `collect_routing_signal`). The signal id is
/// the query id: one signal per query, found again by the feedback route.
pub fn at_routing(manifest: &Manifest, query: &QueryRecord, plan: &Plan, now: DateTime<Utc>) -> StoredSignal {
    let parsed = &query.parsed;
    let signal = RoutingTrainingSignal {
        signal_id: query.query_id.clone(),
        session_id: query.session_id.clone(),
        query: if manifest.signals.query_text { parsed.raw_query.clone() } else { String::new() },
        query_pattern: plan.pipeline.clone().unwrap_or_else(|| plan.intent.clone()),
        intent: plan.intent.clone(),
        entities_extracted: parsed.entities.iter().map(|e| format!("{}:{}", e.entity_type, e.value)).collect(),
        agents_selected: selected(plan),
        routing_confidence: parsed.confidence,
        routing_rationale: rationale(query),
        agents_succeeded: 0,
        agents_failed: 0,
        total_latency_ms: 0.0,
        user_satisfaction: None,
        answer_quality: None,
        was_rerouted: false,
    };
    StoredSignal { signal, recorded_at: now, outcome_at: None, feedback: None, feedback_at: None }
}

/// Add the outcome (E2I `update_with_outcome`): the agents the final plan selected (a
/// deliberating route adds stages as it goes), how many of them answered, the latency, the
/// answer's quality (the reflection score when the route reflects, else the response
/// confidence) and whether a fallback had to stand in.
pub fn with_outcome(
    stored: &mut StoredSignal,
    plan: Option<&Plan>,
    output: &OrchestratorOutput,
    handoffs: &[Arc<HandoffRecord>],
    now: DateTime<Utc>,
) {
    let s = &mut stored.signal;
    if let Some(plan) = plan {
        s.agents_selected = selected(plan);
    }
    let succeeded = handoffs
        .iter()
        .filter(|h| {
            h.slot.is_some() && matches!(h.handoff.execution.status, HandoffStatus::Success | HandoffStatus::Partial)
        })
        .count();
    s.agents_succeeded = u32::try_from(succeeded).unwrap_or(u32::MAX);
    s.agents_failed = u32::try_from(s.agents_selected.len().saturating_sub(succeeded)).unwrap_or(u32::MAX);
    s.total_latency_ms = output.total_latency_ms as f64;
    s.answer_quality = Some(output.reflection.as_ref().map_or(output.response_confidence, |r| r.score).clamp(0.0, 1.0));
    s.was_rerouted = handoffs.iter().any(|h| h.fallback_for.is_some());
    stored.outcome_at = Some(now);
}
