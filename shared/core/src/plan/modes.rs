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

use crate::plan::{self, ClassificationDecision, DispatchRole, Flow, Plan, PlanError, PlannedDispatch, Stage};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};
use switchyard_model::contracts::ParsedQuery;
use switchyard_model::manifest::{Agent, Intent, Manifest, RouteMode};
use switchyard_model::records::QueryRecord;

mod answer;
mod next;
mod reading;

pub use answer::{is_bookkeeping, shape, Shaped};
pub use next::{is_stage_budget, next_step, Next};
pub use reading::uncited_slots;

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
