//! Orchestration modes: the source designs' loops carried out as plan stages added one at a time.
//!
//! A route with a mode (`deliberate`, `sources`), a `critic` or `guardrails` — or any query
//! when a cascaded classifier is configured — gets a plan with a [`Flow`]. Its stages are not
//! all known up front: when a stage completes (the fan-in of the worker), the engine's `advance::extend`
//! reads the stage's handoffs and appends the next stage — new dispatches with their own
//! ids — in one conditional write of the query record, then sends them. A duplicate or
//! concurrent completion loses the version condition and re-reads, so each step is taken
//! once; the handoffs and the stages in the plan are the whole state, nothing else is kept.
//!
//! The steps, in order (each optional part only when the route declares it):
//!
//! ```text
//! classify ─► guard_in ─► planner ─► body ─► critic ⇄ revise ─► guard_out ─► synthesis
//!                                                                   (memory, in the background)
//! body: answer                                   (primary + supporting)
//!     | retrieve ─► [rerank] ─► answer             (merge: rrf)
//!     | pipeline stages                          (QC gates as before)
//!     | experts ─► orchestrator ⇄ consult ─► crafter           (mode: deliberate)
//!     | sources ─► [evaluation] ─► synthesize                  (mode: sources)
//! ```
//!
//! - `classify` (cascade): when the embedded classifier is unsure (below `cascade_below` /
//!   `min_confidence`, or ambiguous) and `classifier.llm` names an agent, that agent runs
//!   first, seeing the question and the declared intents. Its intent is used when it is
//!   declared and at least as confident as the embedded one. **Roles:** intake classifies
//!   synchronously and answers 403 for an intent the caller may not ask; a re-classified
//!   intent is checked here against the roles recorded with the query, and an intent the
//!   caller lacks the role for ends the query `failed` (`permission_denied`) before any of
//!   its agents runs. The `route` event and the output's `orchestration.classification` say
//!   which stage decided and at what confidence.
//! - `guard_in` / `guard_out` (RAG manager): the guardrail agent answers `allowed`, `reason`,
//!   `safe_reply`; a block (or a guardrail that fails) ends the query `failed` with the safe
//!   reply. `planner` answers `coherence`; `incoherent` ends the query at once with a polite
//!   failure — no specialist is dispatched.
//! - `experts` → `orchestrator` → `consult` (negotiation): experts see only the fields their
//!   agent entry lists in `inputs` (plus `additional_question` when re-consulted); the
//!   orchestrator sees every field, `opinions`, `prior_decisions` and `iteration`; it answers
//!   `ready_to_act`, `action`, `next_expert`, `question_for_expert`. After `max_iterations`
//!   rounds without a decision the loop escalates (`escalate_action`). The crafter gets
//!   `decision` and `opinions`.
//! - `critic` → `revise` (unified-chat): the critic gets `answer` and answers `verdict`
//!   (`accept`/`reject`) and `critique`; a rejection re-runs the agent that answered with
//!   `critique` and `previous_answer`, up to `max_retries`; every verdict is a `critique`
//!   event and the output carries the critique summary.
//! - `sources` → `synthesize` (research-assistant): sources run in parallel, each under its own
//!   timeout, the stage under the total `budget` (a deadline message that times out what is
//!   still out and moves on); [`super::evaluate`] scores the chunks and records contradictions
//!   (a `step` event); the synthesizer gets the kept `chunks` and the `contradictions`;
//!   success / partial / failed by how many sources answered; the memory agent is dispatched
//!   in the background with the answer and never waited for.
//! - `retrieve` → `rerank` → `answer` (RAG manager, `merge: rrf`): the route's retrievers run
//!   in parallel; at their fan-in [`crate::retrieval::merge`] fuses their ranked lists with RRF
//!   (each `chunk_id` once; a `merge` event); the reranker, when declared, scores the merged
//!   candidates (a `rerank` event); the primary gets the best `top_k` as `candidates` — as
//!   summary-only references when `lazy`, hydrated to full chunks when the critic rejects the
//!   answer (a `hydrate` event). Only the answer stage's evidence is cited.

use super::evaluate::{self, Evaluation};
use super::handoffs::{answer_text, slot_handoff};
use crate::plan::{self, ClassificationDecision, DispatchRole, Flow, Plan, PlanError, PlannedDispatch, Stage};
use crate::retrieval::merge::{self, MergeReport, Merged};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use switchyard_model::contracts::{ErrorCategory, HandoffStatus, OutputError, OutputStatus, ParsedQuery};
use switchyard_model::manifest::{Agent, Intent, Manifest, MergeSettings, RouteMode};
use switchyard_model::records::{EventKind, HandoffRecord, QueryRecord};

/// Step names recorded in [`Stage::step`].
pub mod step {
    /// The cascaded (LLM) classifier.
    pub const CLASSIFY: &str = "classify";
    /// The input guardrail.
    pub const GUARD_IN: &str = "guard_in";
    /// The coherence planner.
    pub const PLANNER: &str = "planner";
    /// Primary + supporting agents.
    pub const ANSWER: &str = "answer";
    /// A pipeline step.
    pub const PIPELINE: &str = "pipeline";
    /// The first expert fan-out.
    pub const EXPERTS: &str = "experts";
    /// One orchestrator round.
    pub const ORCHESTRATOR: &str = "orchestrator";
    /// An expert re-consulted with a question.
    pub const CONSULT: &str = "consult";
    /// The response crafter.
    pub const CRAFTER: &str = "crafter";
    /// The parallel sources.
    pub const SOURCES: &str = "sources";
    /// The synthesizer of the sources.
    pub const SYNTHESIZE: &str = "synthesize";
    /// The critic.
    pub const CRITIC: &str = "critic";
    /// A re-synthesis after a rejection.
    pub const REVISE: &str = "revise";
    /// The output guardrail.
    pub const GUARD_OUT: &str = "guard_out";
    /// The retrievers of a route's `merge`, in parallel.
    pub const RETRIEVE: &str = "retrieve";
    /// The reranker of a route's `merge`.
    pub const RERANK: &str = "rerank";
}

/// Steps whose handoffs are the answer.
const ANSWER_STEPS: [&str; 5] = [step::ANSWER, step::PIPELINE, step::CRAFTER, step::SYNTHESIZE, step::REVISE];

/// The query's fields: the route's `context` defaults, the caller's pre-parsed `context` and
/// `question` (entities travel in the dispatch's own `payload.entities`).
fn case(manifest: &Manifest, parsed: &ParsedQuery) -> Map<String, Value> {
    let mut case = Map::new();
    if let Some(intent) = manifest.intent(&parsed.intent) {
        for (k, v) in &intent.route.context {
            case.insert(k.clone(), v.clone());
        }
    }
    if let Some(Value::Object(ctx)) = &parsed.context {
        for (k, v) in ctx {
            case.insert(k.clone(), v.clone());
        }
    }
    case.insert("question".into(), Value::String(parsed.raw_query.clone()));
    case
}

/// The context a dispatch of `agent` carries: the query's fields it may see (all, or those
/// in its `inputs`), then `extra` fields the step adds.
pub fn context_for(manifest: &Manifest, agent: &Agent, parsed: &ParsedQuery, extra: &[(&str, Value)]) -> Value {
    let mut case = case(manifest, parsed);
    conversation_fields(manifest, agent, &mut case);
    let mut ctx: Map<String, Value> = match &agent.inputs {
        Some(fields) => case.into_iter().filter(|(k, _)| fields.iter().any(|f| f == k)).collect(),
        None => case,
    };
    for (k, v) in extra {
        ctx.insert((*k).to_string(), v.clone());
    }
    Value::Object(ctx)
}

/// The conversation as `agent` sees it: intake's snapshot (`conversation`) is replaced by
/// what fits the agent's token budget (the classifier's for the cascaded classifier), as the
/// prompt fields `history`, `summary` and `notes` (and `conversation_context`, all three
/// together, for the classifier), plus a `conversation` object with the same selection and its
/// counts for agents that read the payload rather than a prompt.
fn conversation_fields(manifest: &Manifest, agent: &Agent, case: &mut Map<String, Value>) {
    let Some(raw) = case.remove("conversation") else { return };
    let Ok(snapshot) = serde_json::from_value::<crate::context::Snapshot>(raw) else { return };
    let budgets = &manifest.context.budgets;
    let is_classifier = manifest.classifier.llm.as_deref() == Some(agent.id.as_str());
    let budget = if is_classifier { budgets.classifier } else { budgets.for_agent(&agent.id) };
    let selection = crate::context::select(&snapshot, budget);
    if is_classifier {
        case.insert("conversation_context".into(), Value::String(joined(&selection)));
    }
    case.insert(
        "conversation".into(),
        serde_json::json!({
            "session_id": snapshot.session_id,
            "turn": snapshot.turn,
            "history": selection.history,
            "summary": selection.summary,
            "notes": selection.notes,
            "tokens": selection.report.tokens,
            "budget": budget,
        }),
    );
    case.insert("history".into(), Value::String(selection.history));
    case.insert("summary".into(), Value::String(selection.summary));
    case.insert("notes".into(), Value::String(selection.notes));
}

/// History, summary and notes of a selection as one text.
fn joined(selection: &crate::context::Selection) -> String {
    let mut all = selection.history.clone();
    for part in [&selection.summary, &selection.notes] {
        if !part.is_empty() {
            if !all.is_empty() {
                all.push('\n');
            }
            all.push_str(part);
        }
    }
    all
}

/// The cascaded classifier's `conversation_context` (the E2I design's
/// IntentClassificationSignature input): the conversation under the classifier's budget.
fn classifier_context(manifest: &Manifest, parsed: &ParsedQuery) -> String {
    let snapshot = parsed
        .context
        .as_ref()
        .and_then(|c| c.get("conversation"))
        .and_then(|raw| serde_json::from_value::<crate::context::Snapshot>(raw.clone()).ok());
    snapshot.map(|s| joined(&crate::context::select(&s, manifest.context.budgets.classifier))).unwrap_or_default()
}

fn agent<'m>(manifest: &'m Manifest, intent: &str, id: &str) -> Result<&'m Agent, PlanError> {
    manifest.agent(id).ok_or_else(|| PlanError::Unknown {
        intent: intent.to_string(),
        what: "agent",
        id: id.to_string(),
    })
}

/// A dispatch of `agent` with `context`.
fn planned(
    manifest: &Manifest,
    agent: &Agent,
    role: DispatchRole,
    parsed: &ParsedQuery,
    context: Value,
    cid: &str,
    now: DateTime<Utc>,
) -> PlannedDispatch {
    let mut dispatch = plan::dispatch_for(manifest, agent, role, parsed, cid, now);
    dispatch.payload.context = context;
    PlannedDispatch { slot: dispatch.dispatch_id.clone(), role, fallback_for: None, dispatch }
}

fn stage(step_name: &str, dispatches: Vec<PlannedDispatch>) -> Stage {
    Stage { step: Some(step_name.to_string()), ..Stage::of(dispatches) }
}

fn worst(manifest: &Manifest, id: &str) -> u64 {
    manifest.agent(id).map(|a| plan::worst_case_ms(manifest, a, true)).unwrap_or(0)
}

/// Worst-case duration of an intent's route, all steps and loops included.
pub fn estimate_ms(manifest: &Manifest, intent: &Intent) -> u64 {
    let route = &intent.route;
    if let Some(d) = route.deadline {
        return d.as_millis();
    }
    let mut total = 0;
    if let Some(g) = &route.guardrails {
        for id in [&g.input, &g.planner, &g.output].into_iter().flatten() {
            total += worst(manifest, id);
        }
    }
    let body = match (route.mode, &route.deliberate, &route.sources) {
        (Some(RouteMode::Deliberate), Some(d), _) => {
            let experts = d.experts.iter().map(|e| worst(manifest, &e.agent)).max().unwrap_or(0);
            experts
                + u64::from(d.max_iterations) * (worst(manifest, &d.orchestrator) + experts)
                + worst(manifest, &d.crafter)
        }
        (Some(RouteMode::Sources), _, Some(s)) => s.budget.as_millis() + worst(manifest, &s.synthesizer),
        _ => {
            let ids = route.primary.iter().chain(route.supporting.iter());
            let mut parallel = ids.map(|id| worst(manifest, id)).max().unwrap_or(0);
            if let Some(m) = &route.merge {
                parallel += m.retrievers.iter().map(|id| worst(manifest, id)).max().unwrap_or(0)
                    + m.reranker.as_deref().map(|id| worst(manifest, id)).unwrap_or(0);
            }
            let pipeline = route
                .pipeline
                .as_deref()
                .and_then(|p| manifest.pipeline(p))
                .map(|p| p.steps.iter().map(|s| worst(manifest, &s.agent)).sum())
                .unwrap_or(0);
            parallel.max(pipeline)
        }
    };
    total += body;
    if let Some(c) = &route.critic {
        let answerer = route
            .primary
            .as_deref()
            .or(route.deliberate.as_ref().map(|d| d.crafter.as_str()))
            .or(route.sources.as_ref().map(|s| s.synthesizer.as_str()));
        let revise = answerer.map(|id| worst(manifest, id)).unwrap_or(0);
        total += worst(manifest, &c.agent) + u64::from(c.max_retries) * (revise + worst(manifest, &c.agent));
    }
    total
}

/// Plan a query (the router's entry point): the cascade's `classify` stage when the embedded
/// classifier is unsure and an LLM classifier is configured; the first step of a route with
/// modes; otherwise the ordinary plan of [`plan::build`].
pub fn build_plan(manifest: &Manifest, query: &QueryRecord, now: DateTime<Utc>) -> Result<Plan, PlanError> {
    let parsed = &query.parsed;
    let intent = manifest.intent(&parsed.intent).ok_or_else(|| PlanError::UnknownIntent(parsed.intent.clone()))?;
    let cid = query.query_id.as_str();
    let cascade_to = manifest.classifier.llm.as_deref();
    if let Some(classifier_id) =
        cascade_to.filter(|_| manifest.classifier.needs_cascade(parsed.confidence, parsed.ambiguity_flag))
    {
        let classifier = agent(manifest, &intent.id, classifier_id)?;
        let intents: Vec<Value> =
            manifest.intents.iter().map(|i| json!({ "id": i.id, "description": i.description })).collect();
        let context = json!({
            "query": parsed.raw_query,
            "question": parsed.raw_query,
            "conversation_context": classifier_context(manifest, parsed),
            "intents": intents,
        });
        let d = planned(manifest, classifier, DispatchRole::Primary, parsed, context, cid, now);
        let slowest = manifest.intents.iter().map(|i| estimate_ms(manifest, i)).max().unwrap_or(0);
        return Ok(Plan {
            intent: intent.id.clone(),
            pipeline: None,
            stages: vec![stage(step::CLASSIFY, vec![d])],
            current_stage: 0,
            deadline_ms: plan::worst_case_ms(manifest, classifier, true) + slowest,
            flow: Some(Flow { classification: None }),
        });
    }
    let decision = cascade_to.map(|_| ClassificationDecision {
        decided_by: "embedded".into(),
        intent: parsed.intent.clone(),
        confidence: parsed.confidence,
        embedded_intent: parsed.intent.clone(),
        embedded_confidence: parsed.confidence,
        llm_intent: None,
        llm_confidence: None,
        forbidden_role: None,
        out_of_scope: false,
    });
    if !intent.route.has_modes() && decision.is_none() {
        return plan::build(manifest, parsed, cid, now);
    }
    let stages = first_stages(manifest, intent, parsed, cid, now)?;
    Ok(Plan {
        intent: intent.id.clone(),
        pipeline: intent.route.pipeline.clone(),
        stages,
        current_stage: 0,
        deadline_ms: estimate_ms(manifest, intent),
        flow: Some(Flow { classification: decision }),
    })
}

/// The first stages of an intent's route.
fn first_stages(
    manifest: &Manifest,
    intent: &Intent,
    parsed: &ParsedQuery,
    cid: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Stage>, PlanError> {
    let route = &intent.route;
    if !route.has_modes() {
        return Ok(plan::build(manifest, parsed, cid, now)?.stages);
    }
    let guards = route.guardrails.clone().unwrap_or_default();
    for (name, id) in [(step::GUARD_IN, &guards.input), (step::PLANNER, &guards.planner)] {
        if let Some(id) = id {
            let a = agent(manifest, &intent.id, id)?;
            let ctx = context_for(manifest, a, parsed, &[]);
            return Ok(vec![stage(name, vec![planned(manifest, a, DispatchRole::Primary, parsed, ctx, cid, now)])]);
        }
    }
    body_start(manifest, intent, parsed, &[], cid, now)
}

/// The first stage(s) of the route's body.
fn body_start(
    manifest: &Manifest,
    intent: &Intent,
    parsed: &ParsedQuery,
    extra: &[(&str, Value)],
    cid: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Stage>, PlanError> {
    let route = &intent.route;
    match (route.mode, &route.deliberate, &route.sources) {
        (Some(RouteMode::Deliberate), Some(d), _) => {
            let mut dispatches = Vec::new();
            for e in d.experts.iter().filter(|e| !e.on_demand) {
                let a = agent(manifest, &intent.id, &e.agent)?;
                dispatches.push(planned(
                    manifest,
                    a,
                    DispatchRole::Supporting,
                    parsed,
                    context_for(manifest, a, parsed, &[]),
                    cid,
                    now,
                ));
            }
            Ok(vec![stage(step::EXPERTS, dispatches)])
        }
        (Some(RouteMode::Sources), _, Some(s)) => {
            let mut dispatches = Vec::new();
            for id in &s.agents {
                let a = agent(manifest, &intent.id, id)?;
                dispatches.push(planned(
                    manifest,
                    a,
                    DispatchRole::Supporting,
                    parsed,
                    context_for(manifest, a, parsed, extra),
                    cid,
                    now,
                ));
            }
            let until = now + chrono::Duration::milliseconds(s.budget.as_millis() as i64);
            Ok(vec![Stage { budget_until: Some(until), ..stage(step::SOURCES, dispatches) }])
        }
        _ if route.merge.is_some() => {
            let m = route.merge.as_ref().map(|m| m.retrievers.as_slice()).unwrap_or_default();
            let mut dispatches = Vec::new();
            for id in m {
                let a = agent(manifest, &intent.id, id)?;
                let ctx = context_for(manifest, a, parsed, extra);
                dispatches.push(planned(manifest, a, DispatchRole::Supporting, parsed, ctx, cid, now));
            }
            Ok(vec![stage(step::RETRIEVE, dispatches)])
        }
        _ => {
            let mut stages = plan::build(manifest, parsed, cid, now)?.stages;
            let name = if route.pipeline.is_some() { step::PIPELINE } else { step::ANSWER };
            for s in &mut stages {
                s.step = Some(name.to_string());
                for d in &mut s.dispatches {
                    if let (Value::Object(ctx), Some(a)) =
                        (&mut d.dispatch.payload.context, manifest.agent(&d.dispatch.target_agent))
                    {
                        if let Value::Object(fresh) = context_for(manifest, a, parsed, extra) {
                            ctx.extend(fresh);
                        }
                    }
                }
            }
            Ok(stages)
        }
    }
}

// ------------------------------------------------------------------------------------------
// Reading what happened
// ------------------------------------------------------------------------------------------

/// `(dispatch, final handoff)` for each slot of a stage.
fn slot_outputs<'a>(
    stage: &'a Stage,
    handoffs: &'a [Arc<HandoffRecord>],
) -> Vec<(&'a PlannedDispatch, Option<&'a HandoffRecord>)> {
    stage.dispatches.iter().filter(|d| d.role.fills_slot()).map(|d| (d, slot_handoff(handoffs, &d.slot))).collect()
}

/// The usable output of a handoff.
fn usable(h: Option<&HandoffRecord>) -> Option<&Value> {
    h.filter(|h| h.handoff.execution.status.is_usable()).map(|h| &h.handoff.result.primary_output)
}

/// The single output of a one-dispatch stage.
fn single<'a>(stage: &'a Stage, handoffs: &'a [Arc<HandoffRecord>]) -> Option<&'a Value> {
    slot_outputs(stage, handoffs).first().and_then(|(_, h)| usable(*h))
}

fn is_step(stage: &Stage, name: &str) -> bool {
    stage.step.as_deref() == Some(name)
}

/// A guardrail's verdict: `(allowed, reason, safe_reply)`; a guardrail that did not answer
/// blocks (fail closed).
fn guard_verdict(stage: &Stage, handoffs: &[Arc<HandoffRecord>]) -> (bool, String, Option<String>) {
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
fn coherence(stage: &Stage, handoffs: &[Arc<HandoffRecord>]) -> (bool, String, Option<String>) {
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
fn opinions(plan: &Plan, handoffs: &[Arc<HandoffRecord>]) -> Vec<Value> {
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
fn decisions(plan: &Plan, handoffs: &[Arc<HandoffRecord>]) -> Vec<Value> {
    plan.stages
        .iter()
        .filter(|s| is_step(s, step::ORCHESTRATOR))
        .map(|s| single(s, handoffs).cloned().unwrap_or(Value::Null))
        .collect()
}

/// Index of the stage whose handoffs are the answer: the last answer step (or, for a plain
/// route planned after a cascade, the last stage without a step).
fn answer_stage(plan: &Plan) -> Option<usize> {
    plan.stages.iter().rposition(|s| s.step.as_deref().is_none_or(|n| ANSWER_STEPS.contains(&n)))
}

/// The answer's text and the handoffs that gave it.
fn answer_of<'a>(plan: &'a Plan, handoffs: &'a [Arc<HandoffRecord>]) -> (String, Vec<&'a HandoffRecord>) {
    let Some(i) = answer_stage(plan) else { return (String::new(), Vec::new()) };
    let answered: Vec<&HandoffRecord> = slot_outputs(&plan.stages[i], handoffs)
        .into_iter()
        .filter_map(|(_, h)| h.filter(|h| h.handoff.execution.status.is_usable()))
        .collect();
    let text =
        answered.iter().map(|h| answer_text(&h.handoff)).filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n\n");
    (text, answered)
}

/// Critic verdicts so far: `(accepted, critique, summary)`; a critic that did not answer
/// accepts.
fn verdicts(plan: &Plan, handoffs: &[Arc<HandoffRecord>]) -> Vec<(bool, String, Option<String>)> {
    plan.stages
        .iter()
        .filter(|s| is_step(s, step::CRITIC))
        .map(|s| match single(s, handoffs) {
            Some(out) => {
                let accepted = match out.get("verdict").and_then(Value::as_str) {
                    Some(v) => v.eq_ignore_ascii_case("accept") || v.eq_ignore_ascii_case("approved"),
                    None => out.get("accepted").and_then(Value::as_bool).unwrap_or(true),
                };
                (
                    accepted,
                    out.get("critique").and_then(Value::as_str).unwrap_or_default().to_string(),
                    out.get("summary").and_then(Value::as_str).map(str::to_string),
                )
            }
            None => (true, "the critic did not answer; the answer stands unreviewed".into(), None),
        })
        .collect()
}

/// The evaluation of the sources stage.
fn evaluation(
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
fn revised_extra(plan: &Plan, handoffs: &[Arc<HandoffRecord>]) -> Vec<(&'static str, Value)> {
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
fn fused(
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
fn window(m: &MergeSettings, manifest: &Manifest, parsed: &ParsedQuery) -> u32 {
    let case = case(manifest, parsed);
    let pref =
        case.get("preferences").and_then(|p| p.get("recent_year_window")).or_else(|| case.get("recent_year_window"));
    pref.and_then(Value::as_u64).filter(|n| *n <= 50).map(|n| n as u32).unwrap_or(m.recent_year_window)
}

/// The list the answering agent gets: the fused list reranked (with the reranker's scores
/// when the `rerank` stage ran and answered) and cut to `top_k`.
fn final_list(
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
fn merged_answer(
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

// ------------------------------------------------------------------------------------------
// Deciding the next step
// ------------------------------------------------------------------------------------------

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
            let (accepted, critique, summary) = all.last().cloned().unwrap_or((true, String::new(), None));
            next.events.push((
                EventKind::Critique,
                "critique",
                json!({ "round": all.len(), "verdict": if accepted { "accept" } else { "reject" }, "critique": critique, "summary": summary }),
            ));
            if !accepted && revisions < c.max_retries {
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
fn hydrate(
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
fn revise(
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
fn parsed_stub(plan: &Plan, d: &PlannedDispatch) -> ParsedQuery {
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
fn after_critic(
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
fn memory(
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

/// After the cascade's `classify` stage: decide the intent, check the caller's role, and plan
/// the decided intent's route.
fn reclassify(
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
    let mut next = Next {
        events: vec![(
            EventKind::Route,
            "route",
            json!({ "stage": decided_by, "intent": intent_id, "confidence": confidence, "cascade": decision }),
        )],
        ..Next::default()
    };
    if forbidden_role.is_none() && !out_of_scope {
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

// ------------------------------------------------------------------------------------------
// Output
// ------------------------------------------------------------------------------------------

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

const DEFAULT_SAFE_REPLY: &str = "I can't help with that request.";

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
        let rounds: Vec<Value> = all
            .iter()
            .map(|(a, c, s)| json!({ "verdict": if *a { "accept" } else { "reject" }, "critique": c, "summary": s }))
            .collect();
        let accepted = all.last().is_some_and(|(a, _, _)| *a);
        let summary = all.iter().rev().find_map(|(_, c, s)| s.clone().or_else(|| (!c.is_empty()).then(|| c.clone())));
        if !accepted {
            shaped.caveats.push(format!(
                "The critic still had reservations after {} revision(s): {}",
                all.len() - 1,
                all.last().map(|v| v.1.clone()).unwrap_or_default()
            ));
        }
        orch.insert(
            "critique".into(),
            json!({ "rounds": rounds, "revisions": all.len() - 1, "accepted": accepted, "summary": summary }),
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
