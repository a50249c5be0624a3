//! Reading what happened: the stage's handoffs turned into verdicts, opinions, answers and
//! merged candidates.

use super::super::evaluate::{self, Evaluation};
use super::super::handoffs::{answer_text, slot_handoff};
use super::*;
use crate::plan::{DispatchRole, Plan, PlanError, PlannedDispatch, Stage};
use crate::retrieval::merge::{self, MergeReport, Merged};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use switchyard_model::contracts::ParsedQuery;
use switchyard_model::manifest::{Intent, Manifest, MergeSettings};
use switchyard_model::records::HandoffRecord;

/// `(dispatch, final handoff)` for each slot of a stage.
pub(crate) fn slot_outputs<'a>(
    stage: &'a Stage,
    handoffs: &'a [Arc<HandoffRecord>],
) -> Vec<(&'a PlannedDispatch, Option<&'a HandoffRecord>)> {
    stage.dispatches.iter().filter(|d| d.role.fills_slot()).map(|d| (d, slot_handoff(handoffs, &d.slot))).collect()
}

/// The usable output of a handoff.
pub(crate) fn usable(h: Option<&HandoffRecord>) -> Option<&Value> {
    h.filter(|h| h.handoff.execution.status.is_usable()).map(|h| &h.handoff.result.primary_output)
}

/// The single output of a one-dispatch stage.
pub(crate) fn single<'a>(stage: &'a Stage, handoffs: &'a [Arc<HandoffRecord>]) -> Option<&'a Value> {
    slot_outputs(stage, handoffs).first().and_then(|(_, h)| usable(*h))
}

pub(crate) fn is_step(stage: &Stage, name: &str) -> bool {
    stage.step.as_deref() == Some(name)
}

/// A guardrail's verdict: `(allowed, reason, safe_reply)`; a guardrail that did not answer
/// blocks (fail closed).
pub(crate) fn guard_verdict(stage: &Stage, handoffs: &[Arc<HandoffRecord>]) -> (bool, String, Option<String>) {
    match single(stage, handoffs) {
        Some(out) => (
            out.get("allowed").and_then(Value::as_bool).unwrap_or(false),
            out.get("reason").and_then(Value::as_str).unwrap_or_default().to_string(),
            out.get("safe_reply").and_then(Value::as_str).map(str::to_string),
        ),
        None => (false, "the guardrail did not answer".into(), None),
    }
}

/// The planner's verdict: `(coherent, reason, revised_query)`; a planner that did not answer
/// lets the query through.
pub(crate) fn coherence(stage: &Stage, handoffs: &[Arc<HandoffRecord>]) -> (bool, String, Option<String>) {
    match single(stage, handoffs) {
        Some(out) => (
            out.get("coherence").and_then(Value::as_str) != Some("incoherent"),
            out.get("coherence_reason").and_then(Value::as_str).unwrap_or_default().to_string(),
            out.get("revised_query").and_then(Value::as_str).map(str::to_string),
        ),
        None => (true, "the planner did not answer".into(), None),
    }
}

/// Every expert opinion so far: `{expert, question, opinion, status}`.
pub(crate) fn opinions(plan: &Plan, handoffs: &[Arc<HandoffRecord>]) -> Vec<Value> {
    let mut out = Vec::new();
    for s in plan.stages.iter().filter(|s| is_step(s, step::EXPERTS) || is_step(s, step::CONSULT)) {
        for (d, h) in slot_outputs(s, handoffs) {
            out.push(json!({
                "expert": d.dispatch.target_agent,
                "question": d.dispatch.payload.context.get("additional_question"),
                "opinion": usable(h),
                "status": h.map(|h| h.handoff.execution.status),
                "error": h.and_then(|h| h.handoff.errors.error_message.clone()).filter(|_| usable(h).is_none()),
            }));
        }
    }
    out
}

/// Every orchestrator decision so far (failed rounds as `null`).
pub(crate) fn decisions(plan: &Plan, handoffs: &[Arc<HandoffRecord>]) -> Vec<Value> {
    plan.stages
        .iter()
        .filter(|s| is_step(s, step::ORCHESTRATOR))
        .map(|s| single(s, handoffs).cloned().unwrap_or(Value::Null))
        .collect()
}

/// Index of the stage whose handoffs are the answer: the last answer step (or, for a plain
/// route planned after a cascade, the last stage without a step).
pub(crate) fn answer_stage(plan: &Plan) -> Option<usize> {
    plan.stages.iter().rposition(|s| s.step.as_deref().is_none_or(|n| ANSWER_STEPS.contains(&n)))
}

/// The answer's text and the handoffs that gave it.
pub(crate) fn answer_of<'a>(plan: &'a Plan, handoffs: &'a [Arc<HandoffRecord>]) -> (String, Vec<&'a HandoffRecord>) {
    let Some(i) = answer_stage(plan) else { return (String::new(), Vec::new()) };
    let answered: Vec<&HandoffRecord> = slot_outputs(&plan.stages[i], handoffs)
        .into_iter()
        .filter_map(|(_, h)| h.filter(|h| h.handoff.execution.status.is_usable()))
        .collect();
    let text =
        answered.iter().map(|h| answer_text(&h.handoff)).filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n\n");
    (text, answered)
}

/// What a critic said of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The answer stands.
    Accept,
    /// The answer should be revised.
    Reject,
    /// The critic gave no usable answer (failed, timed out, malformed): the answer stands
    /// unreviewed, and the output says so.
    Failed,
}

impl Verdict {
    /// The word the events and the output use.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Accept => "accept",
            Verdict::Reject => "reject",
            Verdict::Failed => "failed",
        }
    }
}

/// Critic verdicts so far: `(verdict, critique, summary)`.
pub(crate) fn verdicts(plan: &Plan, handoffs: &[Arc<HandoffRecord>]) -> Vec<(Verdict, String, Option<String>)> {
    plan.stages
        .iter()
        .filter(|s| is_step(s, step::CRITIC))
        .map(|s| match single(s, handoffs) {
            // A fallback template stood in for the critic, or it said neither `verdict` nor
            // `accepted`: no review happened.
            Some(out) if out.get("template") == Some(&Value::Bool(true)) => {
                (Verdict::Failed, "the critic did not answer; a fallback template stood in".into(), None)
            }
            Some(out) => {
                let verdict = match (out.get("verdict").and_then(Value::as_str), out.get("accepted")) {
                    (Some(v), _) if v.eq_ignore_ascii_case("accept") || v.eq_ignore_ascii_case("approved") => {
                        Verdict::Accept
                    }
                    (Some(_), _) | (None, Some(Value::Bool(false))) => Verdict::Reject,
                    (None, Some(Value::Bool(true))) => Verdict::Accept,
                    (None, _) => Verdict::Failed,
                };
                (
                    verdict,
                    out.get("critique").and_then(Value::as_str).unwrap_or_default().to_string(),
                    out.get("summary").and_then(Value::as_str).map(str::to_string),
                )
            }
            None => (Verdict::Failed, "the critic did not answer; the answer stands unreviewed".into(), None),
        })
        .collect()
}

/// The evaluation of the sources stage.
pub(crate) fn evaluation(
    manifest: &Manifest,
    intent: &Intent,
    plan: &Plan,
    handoffs: &[Arc<HandoffRecord>],
    now: DateTime<Utc>,
) -> Option<(Evaluation, Vec<String>, Vec<String>)> {
    let settings = intent.route.sources.as_ref()?;
    let stage = plan.stages.iter().find(|s| is_step(s, step::SOURCES))?;
    let mut chunks = Vec::new();
    let (mut answered, mut failed) = (Vec::new(), Vec::new());
    for (d, h) in slot_outputs(stage, handoffs) {
        match usable(h) {
            Some(out) => {
                answered.push(d.dispatch.target_agent.clone());
                chunks.extend(evaluate::chunks_of(&d.dispatch.target_agent, out));
            }
            None => failed.push(d.dispatch.target_agent.clone()),
        }
    }
    let _ = manifest;
    Some((evaluate::evaluate(settings, chunks, now), answered, failed))
}

/// The planner's revised query, as the context field later steps carry.
pub(crate) fn revised_extra(plan: &Plan, handoffs: &[Arc<HandoffRecord>]) -> Vec<(&'static str, Value)> {
    plan.stages
        .iter()
        .find(|s| is_step(s, step::PLANNER))
        .and_then(|s| coherence(s, handoffs).2)
        .filter(|r| !r.trim().is_empty())
        .map(|r| vec![("revised_query", Value::String(r))])
        .unwrap_or_default()
}

/// A merge route's lists: what each retriever of the `retrieve` stage answered, fused with
/// RRF. Returns the fused list, the report, and the retrievers that answered and failed.
pub(crate) fn fused(
    m: &MergeSettings,
    plan: &Plan,
    handoffs: &[Arc<HandoffRecord>],
) -> (Vec<Merged>, MergeReport, Vec<String>, Vec<String>) {
    let mut lists = Vec::new();
    let mut failed = Vec::new();
    if let Some(stage) = plan.stages.iter().find(|s| is_step(s, step::RETRIEVE)) {
        for (d, h) in slot_outputs(stage, handoffs) {
            match usable(h) {
                Some(out) => {
                    let (list, skipped) = merge::ranked_list(out);
                    lists.push((d.dispatch.target_agent.clone(), list, skipped));
                }
                None => failed.push(d.dispatch.target_agent.clone()),
            }
        }
    }
    let answered = lists.iter().map(|(r, _, _)| r.clone()).collect();
    let (merged, report) = merge::fuse_lists(&lists, m.k);
    (merged, report, answered, failed)
}

/// The recency window: the request's `recent_year_window` preference, else the merge's.
pub(crate) fn window(m: &MergeSettings, manifest: &Manifest, parsed: &ParsedQuery) -> u32 {
    let case = case(manifest, parsed);
    let pref =
        case.get("preferences").and_then(|p| p.get("recent_year_window")).or_else(|| case.get("recent_year_window"));
    pref.and_then(Value::as_u64).filter(|n| *n <= 50).map(|n| n as u32).unwrap_or(m.recent_year_window)
}

/// The list the answering agent gets: the fused list reranked (with the reranker's scores
/// when the `rerank` stage ran and answered) and cut to `top_k`.
pub(crate) fn final_list(
    m: &MergeSettings,
    manifest: &Manifest,
    parsed: &ParsedQuery,
    plan: &Plan,
    handoffs: &[Arc<HandoffRecord>],
) -> (Vec<Merged>, HashMap<String, f64>) {
    let (all, _, _, _) = fused(m, plan, handoffs);
    let scores = plan
        .stages
        .iter()
        .find(|s| is_step(s, step::RERANK))
        .and_then(|s| single(s, handoffs))
        .map(merge::reranker_scores)
        .unwrap_or_default();
    (merge::rerank(all, &scores, m.recency_boost, window(m, manifest, parsed), m.top_k), scores)
}

/// The answer stage of a merge route: the primary with the merged `candidates`.
pub(crate) fn merged_answer(
    manifest: &Manifest,
    intent: &Intent,
    parsed: &ParsedQuery,
    plan: &Plan,
    handoffs: &[Arc<HandoffRecord>],
    top: &[Merged],
    cid: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Stage>, PlanError> {
    let lazy = intent.route.merge.as_ref().is_some_and(|m| m.lazy);
    let primary = intent.route.primary.as_deref().unwrap_or_default();
    let a = agent(manifest, &intent.id, primary)?;
    let mut extra = revised_extra(plan, handoffs);
    extra.push(("candidates", merge::for_answer(top, !lazy)));
    extra.push(("hydrated", Value::Bool(!lazy)));
    let ctx = context_for(manifest, a, parsed, &extra);
    Ok(vec![stage(step::ANSWER, vec![planned(manifest, a, DispatchRole::Primary, parsed, ctx, cid, now)])])
}

/// Slots whose evidence is not cited: a merge route's retrievers and reranker (the answer
/// cites the merged list it was given).
pub fn uncited_slots(plan: &Plan) -> Vec<&str> {
    plan.stages
        .iter()
        .filter(|s| is_step(s, step::RETRIEVE) || is_step(s, step::RERANK))
        .flat_map(|s| s.dispatches.iter().map(|d| d.slot.as_str()))
        .collect()
}
