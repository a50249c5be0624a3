//! The answer's shape: how the modes change the output the synthesizer builds.

use super::reading::*;
use super::*;
use crate::plan::{DispatchRole, Plan, Stage};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use switchyard_model::contracts::{ErrorCategory, HandoffStatus, OutputError, OutputStatus};
use switchyard_model::manifest::Manifest;
use switchyard_model::records::HandoffRecord;

/// How the modes change the output the synthesizer builds.
#[derive(Debug, Clone, Default)]
pub struct Shaped {
    /// Overrides the status.
    pub status: Option<OutputStatus>,
    /// Overrides the confidence.
    pub confidence: Option<f64>,
    /// Overrides the answer text.
    pub text: Option<String>,
    /// Sets the error.
    pub error: Option<OutputError>,
    /// Adds caveats.
    pub caveats: Vec<String>,
    /// The output's `orchestration` block.
    pub orchestration: Value,
    /// The question ended out of scope (`final_reason: out_of_scope`).
    pub out_of_scope: bool,
}

pub(crate) const DEFAULT_SAFE_REPLY: &str = "I can't help with that request.";

/// Shape the output of a plan with a [`Flow`]; `None` for an ordinary plan.
pub fn shape(manifest: &Manifest, plan: &Plan, handoffs: &[Arc<HandoffRecord>], now: DateTime<Utc>) -> Option<Shaped> {
    let flow = plan.flow.as_ref()?;
    let mut orch = Map::new();
    let mut shaped = Shaped::default();
    if let Some(c) = &flow.classification {
        orch.insert("classification".into(), json!(c));
        if c.out_of_scope {
            shaped.status = Some(OutputStatus::Failed);
            shaped.confidence = Some(0.0);
            shaped.text = Some(crate::scope::reply(manifest));
            shaped.out_of_scope = true;
            shaped.error = Some(OutputError {
                category: ErrorCategory::OutOfScope,
                message: "the cascaded classifier did not confirm an intent for a question of borderline scope".into(),
            });
            shaped.orchestration = Value::Object(orch);
            return Some(shaped);
        }
        if let Some(role) = &c.forbidden_role {
            shaped.status = Some(OutputStatus::Failed);
            shaped.confidence = Some(0.0);
            shaped.text = Some(format!(
                "This question was classified as `{}`, which needs the `{role}` role; it was not answered.",
                c.intent
            ));
            shaped.error = Some(OutputError {
                category: ErrorCategory::PermissionDenied,
                message: format!("intent `{}` requires role `{role}`", c.intent),
            });
            shaped.orchestration = Value::Object(orch);
            return Some(shaped);
        }
    }
    let steps: Vec<Value> = plan
        .stages
        .iter()
        .map(|s| json!({ "step": s.step, "agents": s.dispatches.iter().map(|d| &d.dispatch.target_agent).collect::<Vec<_>>() }))
        .collect();
    orch.insert("steps".into(), Value::Array(steps));
    let Some(intent) = manifest.intent(&plan.intent) else {
        shaped.orchestration = Value::Object(orch);
        return Some(shaped);
    };
    let route = &intent.route;
    let safe = |own: Option<String>| {
        own.or_else(|| route.guardrails.as_ref().and_then(|g| g.safe_reply.clone()))
            .unwrap_or_else(|| DEFAULT_SAFE_REPLY.into())
    };
    let mut blocked: Option<(String, String, ErrorCategory)> = None;
    if let Some(s) = plan.stages.iter().find(|s| is_step(s, step::GUARD_IN)) {
        let (allowed, reason, reply) = guard_verdict(s, handoffs);
        orch.insert("guardrail_input".into(), json!({ "allowed": allowed, "reason": reason }));
        if !allowed {
            blocked = Some((safe(reply), reason, ErrorCategory::GuardrailBlocked));
        }
    }
    if let Some(s) = plan.stages.iter().find(|s| is_step(s, step::PLANNER)) {
        let (coherent, reason, revised) = coherence(s, handoffs);
        orch.insert("coherence".into(), json!({ "coherence": if coherent { "coherent" } else { "incoherent" }, "reason": reason, "revised_query": revised }));
        if !coherent && blocked.is_none() {
            let text = format!(
                "Sorry — I couldn't make sense of that question{}. Could you rephrase it?",
                if reason.is_empty() { String::new() } else { format!(" ({reason})") }
            );
            blocked = Some((text, reason, ErrorCategory::IncoherentQuery));
        }
    }
    if let Some(d) = &route.deliberate {
        let decided = decisions(plan, handoffs);
        let crafted = plan
            .stages
            .iter()
            .find(|s| is_step(s, step::CRAFTER))
            .map(|s| s.dispatches.first().map(|d| d.dispatch.payload.context.get("decision").cloned()));
        let decision = crafted.flatten().flatten().unwrap_or(Value::Null);
        let consultations: Vec<Value> = plan
            .stages
            .iter()
            .filter(|s| is_step(s, step::CONSULT))
            .flat_map(|s| s.dispatches.iter().map(|d| json!({ "expert": d.dispatch.target_agent, "question": d.dispatch.payload.context.get("additional_question") })))
            .collect();
        orch.insert(
            "deliberation".into(),
            json!({
                "iterations": decided.len(),
                "max_iterations": d.max_iterations,
                "consultations": consultations,
                "escalated": decision.get("escalated").and_then(Value::as_bool).unwrap_or(false),
                "action": decision.get("action"),
                "decision": decision,
            }),
        );
    }
    let mut sources_status = None;
    if let Some((e, answered, failed)) = evaluation(manifest, intent, plan, handoffs, now) {
        let status = if answered.is_empty() {
            OutputStatus::Failed
        } else if failed.is_empty() {
            OutputStatus::Success
        } else {
            OutputStatus::Partial
        };
        for c in &e.contradictions {
            shaped.caveats.push(format!(
                "Sources disagree on {}: {} says {}, {} says {}.",
                c.subject, c.a.source, c.a.value, c.b.source, c.b.value
            ));
        }
        if !failed.is_empty() && !answered.is_empty() {
            shaped.caveats.push(format!(
                "Answered from {} of {} sources; {} did not answer.",
                answered.len(),
                answered.len() + failed.len(),
                failed.join(", ")
            ));
        }
        orch.insert(
            "sources".into(),
            json!({
                "retrieval_status": status,
                "sources_used": answered,
                "sources_failed": failed,
                "original_chunk_count": e.original_chunk_count,
                "filtered_chunk_count": e.filtered_chunk_count,
                "average_quality_score": e.average_quality_score,
                "contradictions": e.contradictions,
            }),
        );
        let memory =
            plan.all_dispatches().find(|d| d.role == DispatchRole::Background).map(|d| d.dispatch.target_agent.clone());
        orch.insert("memory".into(), json!({ "dispatched": memory.is_some(), "agent": memory }));
        sources_status = Some(status);
    }
    let all = verdicts(plan, handoffs);
    if !all.is_empty() {
        let rounds: Vec<Value> =
            all.iter().map(|(v, c, s)| json!({ "verdict": v.as_str(), "critique": c, "summary": s })).collect();
        let last = all.last().map(|(v, _, _)| *v);
        let accepted = last == Some(Verdict::Accept);
        let summary = all.iter().rev().find_map(|(_, c, s)| s.clone().or_else(|| (!c.is_empty()).then(|| c.clone())));
        if last == Some(Verdict::Failed) {
            shaped.caveats.push(format!(
                "The critic did not answer after {} revision(s); the answer was not reviewed",
                all.len() - 1
            ));
        } else if !accepted {
            shaped.caveats.push(format!(
                "The critic still had reservations after {} revision(s): {}",
                all.len() - 1,
                all.last().map(|v| v.1.clone()).unwrap_or_default()
            ));
        }
        orch.insert(
            "critique".into(),
            json!({ "rounds": rounds, "revisions": all.len() - 1, "accepted": accepted, "failed": last == Some(Verdict::Failed), "summary": summary }),
        );
    }
    if let Some(s) = plan.stages.iter().find(|s| is_step(s, step::GUARD_OUT)) {
        let (allowed, reason, reply) = guard_verdict(s, handoffs);
        orch.insert("guardrail_output".into(), json!({ "allowed": allowed, "reason": reason }));
        if !allowed && blocked.is_none() {
            blocked = Some((safe(reply), reason, ErrorCategory::GuardrailBlocked));
        }
    }
    shaped.orchestration = Value::Object(orch);
    if let Some((text, reason, category)) = blocked {
        shaped.status = Some(OutputStatus::Failed);
        shaped.confidence = Some(0.0);
        shaped.text = Some(text);
        shaped.error =
            Some(OutputError { category, message: if reason.is_empty() { "blocked".into() } else { reason } });
        return Some(shaped);
    }
    if !route.has_modes() {
        return Some(shaped);
    }
    let (text, answered) = answer_of(plan, handoffs);
    if answered.is_empty() {
        shaped.status = Some(OutputStatus::Failed);
        shaped.confidence = Some(0.0);
        if sources_status == Some(OutputStatus::Failed) {
            shaped.text = Some("Switchyard could not answer this question: none of the sources answered.".into());
            shaped.error =
                Some(OutputError { category: ErrorCategory::AgentTimeout, message: "no source answered".into() });
        }
        return Some(shaped);
    }
    let confidence = answered.iter().map(|h| h.handoff.result.confidence).sum::<f64>() / answered.len() as f64;
    let partial = answered.iter().any(|h| h.handoff.execution.status == HandoffStatus::Partial);
    shaped.status = Some(match sources_status {
        Some(s) => s,
        None if partial => OutputStatus::Partial,
        None => OutputStatus::Success,
    });
    shaped.confidence = Some((confidence * 1_000.0).round() / 1_000.0);
    shaped.text = Some(text);
    Some(shaped)
}

/// Whether a stage is bookkeeping rather than part of the answer (the cascade's classifier).
pub fn is_bookkeeping(stage: &Stage) -> bool {
    is_step(stage, step::CLASSIFY)
}
