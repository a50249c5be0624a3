//! Deciding the next step: what follows a completed stage, for every mode.

use super::reading::*;
use super::*;
use crate::plan::{self, ClassificationDecision, DispatchRole, Plan, PlanError, PlannedDispatch, Stage};
use crate::retrieval::merge::{self, Merged};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::sync::Arc;
use switchyard_model::contracts::ParsedQuery;
use switchyard_model::manifest::{Intent, Manifest, MergeSettings};
use switchyard_model::records::{EventKind, HandoffRecord, QueryRecord};

/// What follows a completed stage.
#[derive(Debug, Default)]
pub struct Next {
    /// Stages to append; the first becomes the current stage. None: the query is synthesized.
    pub stages: Vec<Stage>,
    /// Dispatches sent beside the query and never waited for.
    pub background: Vec<PlannedDispatch>,
    /// The re-classified query, after a cascade.
    pub parsed: Option<ParsedQuery>,
    /// The classification decision, after a cascade.
    pub classification: Option<ClassificationDecision>,
    /// Events: kind, name and detail.
    pub events: Vec<(EventKind, &'static str, Value)>,
}

/// Decide what follows the current (completed) stage of a plan with a [`Flow`].
pub fn next_step(
    manifest: &Manifest,
    query: &QueryRecord,
    handoffs: &[Arc<HandoffRecord>],
    now: DateTime<Utc>,
) -> Result<Next, PlanError> {
    let Some(plan) = &query.plan else { return Ok(Next::default()) };
    let Some(current) = plan.stages.get(plan.current_stage) else { return Ok(Next::default()) };
    let parsed = &query.parsed;
    let cid = query.query_id.as_str();
    let Some(intent) = manifest.intent(&plan.intent) else { return Err(PlanError::UnknownIntent(plan.intent.clone())) };
    let route = &intent.route;
    let mut next = Next::default();
    match current.step.as_deref() {
        Some(step::CLASSIFY) => return reclassify(manifest, query, current, handoffs, now),
        Some(step::GUARD_IN) => {
            let (allowed, reason, _) = guard_verdict(current, handoffs);
            next.events.push((
                EventKind::Step,
                "guard_in",
                json!({ "step": "guard_in", "allowed": allowed, "reason": reason }),
            ));
            if allowed {
                next.stages = match route.guardrails.as_ref().and_then(|g| g.planner.as_ref()) {
                    Some(id) => {
                        let a = agent(manifest, &intent.id, id)?;
                        vec![stage(
                            step::PLANNER,
                            vec![planned(
                                manifest,
                                a,
                                DispatchRole::Primary,
                                parsed,
                                context_for(manifest, a, parsed, &[]),
                                cid,
                                now,
                            )],
                        )]
                    }
                    None => body_start(manifest, intent, parsed, &[], cid, now)?,
                };
            }
        }
        Some(step::PLANNER) => {
            let (coherent, reason, revised) = coherence(current, handoffs);
            next.events.push((
                EventKind::Step,
                "planner",
                json!({ "step": "planner", "coherent": coherent, "reason": reason }),
            ));
            if coherent {
                let extra: Vec<(&str, Value)> =
                    revised.map(|r| vec![("revised_query", Value::String(r))]).unwrap_or_default();
                next.stages = body_start(manifest, intent, parsed, &extra, cid, now)?;
            }
        }
        Some(step::EXPERTS) | Some(step::CONSULT) => {
            let d = route.deliberate.as_ref().ok_or_else(|| PlanError::UnknownIntent(intent.id.clone()))?;
            let orchestrator = agent(manifest, &intent.id, &d.orchestrator)?;
            let iteration = plan.stages.iter().filter(|s| is_step(s, step::ORCHESTRATOR)).count() + 1;
            let extra = [
                ("opinions", Value::Array(opinions(plan, handoffs))),
                ("prior_decisions", Value::Array(decisions(plan, handoffs))),
                ("iteration", json!(iteration)),
                ("max_iterations", json!(d.max_iterations)),
            ];
            let ctx = context_for(manifest, orchestrator, parsed, &extra);
            next.stages = vec![stage(
                step::ORCHESTRATOR,
                vec![planned(manifest, orchestrator, DispatchRole::Primary, parsed, ctx, cid, now)],
            )];
        }
        Some(step::ORCHESTRATOR) => {
            let d = route.deliberate.as_ref().ok_or_else(|| PlanError::UnknownIntent(intent.id.clone()))?;
            let rounds = plan.stages.iter().filter(|s| is_step(s, step::ORCHESTRATOR)).count();
            let decision = single(current, handoffs).cloned();
            let ready = decision.as_ref().and_then(|v| v.get("ready_to_act")).and_then(Value::as_bool).unwrap_or(false);
            let wanted =
                decision.as_ref().and_then(|v| v.get("next_expert")).and_then(Value::as_str).map(str::to_string);
            let question = decision
                .as_ref()
                .and_then(|v| v.get("question_for_expert"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let expert = wanted.as_deref().filter(|w| d.experts.iter().any(|e| e.agent == *w));
            let final_decision = if ready {
                decision.clone()
            } else if let (Some(expert), true, Some(_)) =
                (expert, (rounds as u32) < d.max_iterations, decision.as_ref())
            {
                let a = agent(manifest, &intent.id, expert)?;
                let ctx = context_for(manifest, a, parsed, &[("additional_question", Value::String(question.clone()))]);
                next.events.push((
                    EventKind::Step,
                    "reconsult",
                    json!({ "step": "orchestrator", "iteration": rounds, "ready_to_act": false, "next_expert": expert, "question_for_expert": question }),
                ));
                next.stages = vec![stage(
                    step::CONSULT,
                    vec![planned(manifest, a, DispatchRole::Supporting, parsed, ctx, cid, now)],
                )];
                None
            } else {
                let why = if decision.is_none() {
                    "the orchestrator did not answer".to_string()
                } else if (rounds as u32) >= d.max_iterations {
                    format!("no decision after {rounds} rounds (max_iterations {})", d.max_iterations)
                } else {
                    format!("the orchestrator asked for an unknown expert `{}`", wanted.unwrap_or_default())
                };
                next.events.push((
                    EventKind::Step,
                    "escalate",
                    json!({ "step": "orchestrator", "iteration": rounds, "escalated": true, "reason": why }),
                ));
                Some(json!({ "ready_to_act": true, "action": d.escalate_action, "reasoning": why, "escalated": true }))
            };
            if let Some(decision) = final_decision {
                if ready {
                    next.events.push((EventKind::Step, "decide", json!({ "step": "orchestrator", "iteration": rounds, "ready_to_act": true, "action": decision.get("action") })));
                }
                let crafter = agent(manifest, &intent.id, &d.crafter)?;
                let ctx = context_for(
                    manifest,
                    crafter,
                    parsed,
                    &[("decision", decision), ("opinions", Value::Array(opinions(plan, handoffs)))],
                );
                next.stages = vec![stage(
                    step::CRAFTER,
                    vec![planned(manifest, crafter, DispatchRole::Primary, parsed, ctx, cid, now)],
                )];
            }
        }
        Some(step::SOURCES) => {
            let s = route.sources.as_ref().ok_or_else(|| PlanError::UnknownIntent(intent.id.clone()))?;
            if let Some((e, answered, failed)) = evaluation(manifest, intent, plan, handoffs, now) {
                next.events.push((
                    EventKind::Step,
                    "evaluation",
                    json!({
                        "step": "evaluation",
                        "sources_answered": answered,
                        "sources_failed": failed,
                        "original_chunk_count": e.original_chunk_count,
                        "filtered_chunk_count": e.filtered_chunk_count,
                        "average_quality_score": e.average_quality_score,
                        "contradictions": e.contradictions,
                    }),
                ));
                if !answered.is_empty() {
                    let synthesizer = agent(manifest, &intent.id, &s.synthesizer)?;
                    let kept: Vec<Value> = e.kept().map(|c| json!(c)).collect();
                    let ctx = context_for(
                        manifest,
                        synthesizer,
                        parsed,
                        &[("chunks", Value::Array(kept)), ("contradictions", json!(e.contradictions))],
                    );
                    next.stages = vec![stage(
                        step::SYNTHESIZE,
                        vec![planned(manifest, synthesizer, DispatchRole::Primary, parsed, ctx, cid, now)],
                    )];
                }
            }
        }
        Some(step::RETRIEVE) => {
            let m = route.merge.as_ref().ok_or_else(|| PlanError::UnknownIntent(intent.id.clone()))?;
            let (all, report, answered, failed) = fused(m, plan, handoffs);
            let (top, _) = final_list(m, manifest, parsed, plan, handoffs);
            next.events.push((
                EventKind::Step,
                "merge",
                json!({
                    "step": "merge",
                    "retrievers_answered": answered,
                    "retrievers_failed": failed,
                    "strategy": report.strategy,
                    "k": report.k,
                    "lists": report.lists,
                    "listed": report.listed,
                    "deduped": report.deduped,
                    "fused": all.iter().take(20).map(|c| json!({ "chunk_id": c.chunk.chunk_id, "rrf": c.rrf, "found_by": c.found_by })).collect::<Vec<_>>(),
                    "reranker": m.reranker,
                }),
            ));
            if !answered.is_empty() {
                next.stages = match &m.reranker {
                    Some(id) => {
                        let a = agent(manifest, &intent.id, id)?;
                        let mut extra = revised_extra(plan, handoffs);
                        let shown: Vec<Merged> = all.into_iter().take(merge::MAX_LIST / 2).collect();
                        extra.push(("candidates", merge::for_answer(&shown, true)));
                        let ctx = context_for(manifest, a, parsed, &extra);
                        vec![stage(
                            step::RERANK,
                            vec![planned(manifest, a, DispatchRole::Primary, parsed, ctx, cid, now)],
                        )]
                    }
                    None => merged_answer(manifest, intent, parsed, plan, handoffs, &top, cid, now)?,
                };
            }
        }
        Some(step::RERANK) => {
            let m = route.merge.as_ref().ok_or_else(|| PlanError::UnknownIntent(intent.id.clone()))?;
            let (top, scores) = final_list(m, manifest, parsed, plan, handoffs);
            next.events.push((
                EventKind::Step,
                "rerank",
                json!({
                    "step": "rerank",
                    "reranker": m.reranker,
                    "reranker_answered": single(current, handoffs).is_some(),
                    "scored": scores.len(),
                    "recency_boost": m.recency_boost,
                    "recent_year_window": window(m, manifest, parsed),
                    "top": top.iter().map(|c| json!({ "chunk_id": c.chunk.chunk_id, "score": c.score, "rerank": c.rerank, "recency": c.recency, "rrf": c.rrf })).collect::<Vec<_>>(),
                }),
            ));
            next.stages = merged_answer(manifest, intent, parsed, plan, handoffs, &top, cid, now)?;
        }
        Some(step::CRITIC) => {
            let c = route.critic.as_ref().ok_or_else(|| PlanError::UnknownIntent(intent.id.clone()))?;
            let all = verdicts(plan, handoffs);
            let revisions = plan.stages.iter().filter(|s| is_step(s, step::REVISE)).count() as u32;
            let (verdict, critique, summary) = all.last().cloned().unwrap_or((Verdict::Failed, String::new(), None));
            next.events.push((
                EventKind::Critique,
                "critique",
                json!({ "round": all.len(), "verdict": verdict.as_str(), "critique": critique, "summary": summary }),
            ));
            // Only a rejection is revised: a critic that failed leaves the answer unreviewed.
            if verdict == Verdict::Reject && revisions < c.max_retries {
                let mut revision = revise(manifest, plan, handoffs, &critique, now)?;
                if let Some(m) = route.merge.as_ref().filter(|m| m.lazy) {
                    hydrate(m, manifest, parsed, plan, handoffs, &mut revision, &mut next);
                }
                next.stages = vec![revision];
            } else {
                next.stages = after_critic(manifest, intent, parsed, plan, handoffs, cid, now)?;
            }
        }
        Some(step::GUARD_OUT) => {
            let (allowed, reason, _) = guard_verdict(current, handoffs);
            next.events.push((
                EventKind::Step,
                "guard_out",
                json!({ "step": "guard_out", "allowed": allowed, "reason": reason }),
            ));
        }
        // answer, pipeline, crafter, synthesize, revise, or a plain stage after a cascade
        _ => {
            let (text, answered) = answer_of(plan, handoffs);
            if !answered.is_empty() {
                next.stages = match &route.critic {
                    Some(c) => {
                        let critic = agent(manifest, &intent.id, &c.agent)?;
                        let ctx = context_for(manifest, critic, parsed, &[("answer", Value::String(text))]);
                        vec![stage(
                            step::CRITIC,
                            vec![planned(manifest, critic, DispatchRole::Primary, parsed, ctx, cid, now)],
                        )]
                    }
                    None => after_critic(manifest, intent, parsed, plan, handoffs, cid, now)?,
                };
            }
        }
    }
    if next.stages.is_empty() {
        next.background = memory(manifest, intent, parsed, plan, handoffs, cid, now)?;
    }
    Ok(next)
}

/// Lazy hydration: when a revision's candidates are still summary-only references, replace
/// them with the full chunks (recomputed from the retrievers' handoffs) and log it.
pub(crate) fn hydrate(
    m: &MergeSettings,
    manifest: &Manifest,
    parsed: &ParsedQuery,
    plan: &Plan,
    handoffs: &[Arc<HandoffRecord>],
    revision: &mut Stage,
    next: &mut Next,
) {
    let (top, _) = final_list(m, manifest, parsed, plan, handoffs);
    for d in &mut revision.dispatches {
        let Value::Object(ctx) = &mut d.dispatch.payload.context else { continue };
        if ctx.get("hydrated") != Some(&Value::Bool(false)) {
            continue;
        }
        ctx.insert("candidates".into(), merge::for_answer(&top, true));
        ctx.insert("hydrated".into(), Value::Bool(true));
        let chars: usize = top.iter().map(|c| c.chunk.text.chars().count()).sum();
        next.events.push((
            EventKind::Step,
            "hydrate",
            json!({
                "step": "hydrate",
                "reason": "the critic asked for more evidence",
                "chunks": top.iter().map(|c| &c.chunk.chunk_id).collect::<Vec<_>>(),
                "summary_chars": top.iter().map(|c| merge::summary(&c.chunk.text).chars().count()).sum::<usize>(),
                "full_chars": chars,
            }),
        ));
    }
}

/// Re-run the agent that answered, with the critique.
pub(crate) fn revise(
    manifest: &Manifest,
    plan: &Plan,
    handoffs: &[Arc<HandoffRecord>],
    critique: &str,
    now: DateTime<Utc>,
) -> Result<Stage, PlanError> {
    let (previous, answered) = answer_of(plan, handoffs);
    let i = answer_stage(plan).unwrap_or(0);
    let Some((original, _)) = slot_outputs(&plan.stages[i], handoffs).into_iter().next() else {
        return Err(PlanError::UnknownIntent(plan.intent.clone()));
    };
    let agent_id =
        answered.first().map(|h| h.handoff.agent_id.clone()).unwrap_or_else(|| original.dispatch.target_agent.clone());
    let a = agent(manifest, &plan.intent, &agent_id)?;
    let mut d = plan::dispatch_for(
        manifest,
        a,
        DispatchRole::Primary,
        &parsed_stub(plan, original),
        &original.dispatch.metadata.correlation_id,
        now,
    );
    let mut ctx = original.dispatch.payload.context.clone();
    if let Value::Object(map) = &mut ctx {
        map.insert("critique".into(), Value::String(critique.to_string()));
        map.insert("previous_answer".into(), Value::String(previous));
    }
    d.payload = original.dispatch.payload.clone();
    d.payload.context = ctx;
    Ok(stage(
        step::REVISE,
        vec![PlannedDispatch {
            slot: d.dispatch_id.clone(),
            role: DispatchRole::Primary,
            fallback_for: None,
            dispatch: d,
        }],
    ))
}

/// A parsed query rebuilt from a dispatch (only what `dispatch_for` reads).
pub(crate) fn parsed_stub(plan: &Plan, d: &PlannedDispatch) -> ParsedQuery {
    ParsedQuery {
        query_id: d.dispatch.query_id.clone(),
        raw_query: d.dispatch.payload.context.get("question").and_then(Value::as_str).unwrap_or_default().to_string(),
        intent: plan.intent.clone(),
        entities: d.dispatch.payload.entities.clone(),
        confidence: 1.0,
        ambiguity_flag: false,
        context: None,
        timestamp: d.dispatch.metadata.dispatched_at,
    }
}

/// After the critic (or with none): the output guardrail, or nothing.
pub(crate) fn after_critic(
    manifest: &Manifest,
    intent: &Intent,
    parsed: &ParsedQuery,
    plan: &Plan,
    handoffs: &[Arc<HandoffRecord>],
    cid: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Stage>, PlanError> {
    match intent.route.guardrails.as_ref().and_then(|g| g.output.as_ref()) {
        Some(id) => {
            let a = agent(manifest, &intent.id, id)?;
            let (text, _) = answer_of(plan, handoffs);
            let ctx = context_for(manifest, a, parsed, &[("answer", Value::String(text))]);
            Ok(vec![stage(step::GUARD_OUT, vec![planned(manifest, a, DispatchRole::Primary, parsed, ctx, cid, now)])])
        }
        None => Ok(Vec::new()),
    }
}

/// The memory dispatch, once, when the query has an answer.
pub(crate) fn memory(
    manifest: &Manifest,
    intent: &Intent,
    parsed: &ParsedQuery,
    plan: &Plan,
    handoffs: &[Arc<HandoffRecord>],
    cid: &str,
    now: DateTime<Utc>,
) -> Result<Vec<PlannedDispatch>, PlanError> {
    let Some(id) = intent.route.sources.as_ref().and_then(|s| s.memory.as_ref()) else { return Ok(Vec::new()) };
    if plan.all_dispatches().any(|d| d.role == DispatchRole::Background) {
        return Ok(Vec::new());
    }
    let (text, answered) = answer_of(plan, handoffs);
    if answered.is_empty()
        || !answer_stage(plan)
            .is_some_and(|i| is_step(&plan.stages[i], step::SYNTHESIZE) || is_step(&plan.stages[i], step::REVISE))
    {
        return Ok(Vec::new());
    }
    let a = agent(manifest, &intent.id, id)?;
    let ctx = context_for(manifest, a, parsed, &[("answer", Value::String(text))]);
    Ok(vec![planned(manifest, a, DispatchRole::Background, parsed, ctx, cid, now)])
}

/// After the cascade's `classify` stage: decide the intent, check the caller's role and the
/// intent's required entities, and plan the decided intent's route.
pub(crate) fn reclassify(
    manifest: &Manifest,
    query: &QueryRecord,
    current: &Stage,
    handoffs: &[Arc<HandoffRecord>],
    now: DateTime<Utc>,
) -> Result<Next, PlanError> {
    let parsed = &query.parsed;
    let out = single(current, handoffs);
    let llm_intent = out.and_then(|o| o.get("intent")).and_then(Value::as_str).map(str::to_string);
    let llm_confidence = out.and_then(|o| o.get("confidence")).and_then(Value::as_f64).map(|c| c.clamp(0.0, 1.0));
    let llm_wins = match (&llm_intent, llm_confidence) {
        (Some(i), Some(c)) => manifest.intent(i).is_some() && c >= parsed.confidence,
        _ => false,
    };
    let (decided_by, intent_id, confidence) = match (llm_wins, &llm_intent, llm_confidence) {
        (true, Some(i), Some(c)) => ("llm", i.clone(), c),
        _ => ("embedded", parsed.intent.clone(), parsed.confidence),
    };
    let intent = manifest.intent(&intent_id).ok_or_else(|| PlanError::UnknownIntent(intent_id.clone()))?;
    // A borderline question is in scope only if the cascade names a declared intent with
    // confidence; otherwise it ends out of scope, and no role applies (crate::scope).
    let out_of_scope = query.scope.is_some_and(|s| s.decision == crate::scope::ScopeDecision::Borderline)
        && !(llm_wins && llm_confidence.is_some_and(|c| c >= manifest.classifier.min_confidence));
    let forbidden_role =
        intent.required_role.clone().filter(|r| !out_of_scope && !query.roles.iter().any(|have| have == r));
    let decision = ClassificationDecision {
        decided_by: decided_by.into(),
        intent: intent_id.clone(),
        confidence,
        embedded_intent: parsed.intent.clone(),
        embedded_confidence: parsed.confidence,
        llm_intent: llm_intent.clone(),
        llm_confidence,
        forbidden_role: forbidden_role.clone(),
        out_of_scope,
    };
    let mut reparsed = ParsedQuery::clone(parsed);
    reparsed.intent = intent_id.clone();
    reparsed.confidence = confidence;
    reparsed.ambiguity_flag = decided_by == "embedded" && parsed.ambiguity_flag;
    // The decided intent's required entities are checked as the router checks the embedded
    // classifier's: one missing runs no agent, and the synthesizer asks for it (crate::slots).
    let missing = if forbidden_role.is_none() && !out_of_scope {
        crate::slots::missing(manifest, &intent_id, &reparsed.entities)
    } else {
        Vec::new()
    };
    let mut next = Next {
        events: vec![(
            EventKind::Route,
            "route",
            json!({ "stage": decided_by, "intent": intent_id, "confidence": confidence, "cascade": decision, "missing_entities": missing }),
        )],
        ..Next::default()
    };
    if forbidden_role.is_none() && !out_of_scope && missing.is_empty() {
        next.stages = first_stages(manifest, intent, &reparsed, &query.query_id, now)?;
    }
    next.parsed = Some(reparsed);
    next.classification = Some(decision);
    Ok(next)
}

/// Whether a deadline message is a stage's budget rather than the query's deadline; if it is
/// the current stage's, the caller times out what is still out and advances.
pub fn is_stage_budget(query: &QueryRecord, fire_at: DateTime<Utc>) -> Option<bool> {
    if query.deadline_at == Some(fire_at) {
        return None;
    }
    let plan = query.plan.as_ref()?;
    plan.flow.as_ref()?;
    Some(plan.stages.get(plan.current_stage).and_then(|s| s.budget_until) == Some(fire_at))
}
