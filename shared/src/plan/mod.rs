//! Plans: which agents answer a query, in which stages, with which budgets.
//!
//! The router turns a parsed query and its intent's route into a [`Plan`]: one stage of
//! parallel dispatches (primary + supporting agents), or one stage per step of a pipeline. The
//! plan is stored in the query record and is the only place the workers read their dispatches
//! from, so a redelivered message always finds the same dispatch ids.
//!
//! Everything here is pure — no port, no I/O — so it is unit-tested on its own:
//! - [`modes`]: the orchestration modes (guardrails, coherence, deliberation, critic, parallel
//!   sources, cascade classification): the first plan of a route, the step that follows a
//!   completed stage, and the shape of the answer;
//! - [`evaluate`]: scoring the parallel sources' chunks (quality, duplicates, contradictions);
//! - [`handoffs`]: which handoff fills a slot, an agent's answer text, QC gates.

pub mod evaluate;
pub mod handoffs;
pub mod modes;

use crate::contracts::AgentDispatch;
use crate::manifest::Gate;
use serde::{Deserialize, Serialize};

/// Why an agent was dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatchRole {
    /// The route's primary agent.
    Primary,
    /// A supporting agent of the route.
    Supporting,
    /// A step of a pipeline.
    Step,
    /// Stands in for an agent whose retries were exhausted.
    Fallback,
    /// Runs beside the query and is never waited for (seed 004's memory step).
    Background,
}

/// One dispatch of a plan, with its fan-in slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedDispatch {
    /// Fan-in slot: its own dispatch id, or for a fallback the slot of the dispatch it
    /// stands in for.
    pub slot: String,
    /// Why it was dispatched.
    pub role: DispatchRole,
    /// For a fallback: the dispatch id it stands in for.
    #[serde(default)]
    pub fallback_for: Option<String>,
    /// The seed 000 dispatch.
    pub dispatch: AgentDispatch,
}

/// Dispatches that run in parallel; the stage ends when every slot has its final handoff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// Planned dispatches (fallbacks are appended as they are needed).
    pub dispatches: Vec<PlannedDispatch>,
    /// A QC gate checked on the stage's output before the next stage starts.
    #[serde(default)]
    pub gate: Option<Gate>,
    /// The orchestration step this stage carries out (`experts`, `critic`, …), for routes
    /// with modes (see `plan::modes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// When the stage's total budget ends: dispatches still out then count as timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_until: Option<DateTime<Utc>>,
}

impl Stage {
    /// A stage of these dispatches, without gate, step or budget.
    pub fn of(dispatches: Vec<PlannedDispatch>) -> Stage {
        Stage { dispatches, gate: None, step: None, budget_until: None }
    }

    /// The slots that must be filled for the stage to be complete.
    pub fn slots(&self) -> impl Iterator<Item = &str> {
        self.dispatches.iter().filter(|d| d.role.fills_slot()).map(|d| d.slot.as_str())
    }

    /// The fan-in condition: every slot of the stage has its final handoff in `completed`.
    ///
    /// The one place the condition is written, so the simulation harness can prove it notices
    /// when it is wrong: the test-only `planted-bug` feature makes it always true.
    pub fn is_complete(&self, completed: &std::collections::BTreeSet<String>) -> bool {
        if cfg!(feature = "planted-bug") {
            return true;
        }
        self.slots().all(|s| completed.contains(s))
    }
}

impl DispatchRole {
    /// Whether the stage waits for this dispatch's slot (not a fallback, not background).
    pub fn fills_slot(self) -> bool {
        !matches!(self, DispatchRole::Fallback | DispatchRole::Background)
    }
}

/// State of a route carried out by the modes engine (`plan::modes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Flow {
    /// Which classifier decided the intent, and how sure it was.
    #[serde(default)]
    pub classification: Option<ClassificationDecision>,
}

/// The outcome of intent classification, cascaded or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassificationDecision {
    /// `embedded`, `llm` or `pre-parsed`: the stage whose intent was used.
    pub decided_by: String,
    /// The intent used.
    pub intent: String,
    /// Its confidence.
    pub confidence: f64,
    /// What the embedded classifier said.
    pub embedded_intent: String,
    /// With this confidence.
    pub embedded_confidence: f64,
    /// What the LLM classifier said, when it was consulted.
    #[serde(default)]
    pub llm_intent: Option<String>,
    /// With this confidence.
    #[serde(default)]
    pub llm_confidence: Option<f64>,
    /// Set when the decided intent needs a role the caller lacks.
    #[serde(default)]
    pub forbidden_role: Option<String>,
    /// Set when a question of borderline scope was not confirmed by the cascaded classifier
    /// (no declared intent at `min_confidence` or more): it ends out of scope.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub out_of_scope: bool,
}

/// How the query is answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The routed intent.
    pub intent: String,
    /// The pipeline, when the route is one.
    #[serde(default)]
    pub pipeline: Option<String>,
    /// Stages in order; one for a parallel route.
    pub stages: Vec<Stage>,
    /// Index of the running stage.
    pub current_stage: usize,
    /// Overall budget from acceptance to deadline.
    pub deadline_ms: u64,
    /// Set when the route is carried out by the modes engine: stages are added one step at
    /// a time as the previous one completes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
}

impl Plan {
    /// Every dispatch of every stage.
    pub fn all_dispatches(&self) -> impl Iterator<Item = &PlannedDispatch> {
        self.stages.iter().flat_map(|s| s.dispatches.iter())
    }

    /// The dispatch with this id.
    pub fn dispatch(&self, dispatch_id: &str) -> Option<&PlannedDispatch> {
        self.all_dispatches().find(|d| d.dispatch.dispatch_id == dispatch_id)
    }
}

use crate::contracts::{DispatchConstraints, DispatchMetadata, DispatchPayload, DispatchRouting, ParsedQuery};
use crate::manifest::{Agent, Fallback, Manifest};
use crate::topology::extended_timeout_ms;
use chrono::{DateTime, Utc};

/// Why no plan could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The intent is not in the manifest (seed 000 `routing_failed`).
    #[error("intent `{0}` is not declared in the manifest")]
    UnknownIntent(String),
    /// The route names something the manifest lacks (a validated manifest cannot).
    #[error("route of `{intent}` names unknown {what} `{id}`")]
    Unknown {
        /// The intent.
        intent: String,
        /// `agent` or `pipeline`.
        what: &'static str,
        /// The missing id.
        id: String,
    },
}

/// Seed 000 priority: 1 for the agent on the critical path (the primary, or a pipeline's
/// steps), then lower tier before higher tier.
fn priority(role: DispatchRole, tier: u8) -> u8 {
    match role {
        DispatchRole::Primary | DispatchRole::Step => 1,
        DispatchRole::Supporting | DispatchRole::Fallback => 2 + tier,
        DispatchRole::Background => 9,
    }
}

/// Build the seed 000 dispatch of `agent` for `parsed`.
pub fn dispatch_for(
    manifest: &Manifest,
    agent: &Agent,
    role: DispatchRole,
    parsed: &ParsedQuery,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> AgentDispatch {
    let timeout_ms =
        manifest.agent_timeout(agent).map(|d| d.as_millis()).unwrap_or(crate::limits::MAX_ATTEMPT_TIMEOUT_MS);
    let fallback_agent = match (role, manifest.agent_fallback(agent)) {
        (DispatchRole::Fallback, _) => None,
        (_, Fallback::Agent(id)) => Some(id),
        _ => None,
    };
    AgentDispatch {
        dispatch_id: uuid::Uuid::new_v4().to_string(),
        query_id: parsed.query_id.clone(),
        target_agent: agent.id.clone(),
        target_tier: agent.tier,
        payload: DispatchPayload {
            intent: parsed.intent.clone(),
            entities: parsed.entities.clone(),
            context: modes::context_for(manifest, agent, parsed, &[]),
            constraints: DispatchConstraints {
                max_latency_ms: timeout_ms,
                required_confidence: agent.required_confidence,
            },
        },
        routing: DispatchRouting {
            priority: priority(role, agent.tier),
            timeout_ms,
            retry_count: manifest.agent_max_retries(agent),
            fallback_agent,
        },
        metadata: DispatchMetadata { dispatched_at: now, correlation_id: correlation_id.to_string() },
    }
}

/// Worst-case time an agent can take: every attempt timing out with extended timeouts, the
/// largest backoffs between them, then its fallback's worst case.
pub fn worst_case_ms(manifest: &Manifest, agent: &Agent, with_fallback: bool) -> u64 {
    let base = manifest.agent_timeout(agent).map(|d| d.as_millis()).unwrap_or(crate::limits::MAX_ATTEMPT_TIMEOUT_MS);
    let retries = manifest.agent_max_retries(agent);
    let tier = manifest.tier(agent.tier);
    let ext = tier.map(|t| t.timeout_extension).unwrap_or(1.0);
    let backoff_max = tier.map(|t| t.backoff.max.as_millis()).unwrap_or(0);
    let attempts: u64 = (0..=retries).map(|n| extended_timeout_ms(base, ext, n)).sum();
    let waits = u64::from(retries) * backoff_max;
    let fallback = match manifest.agent_fallback(agent) {
        Fallback::Agent(id) if with_fallback => {
            manifest.agent(&id).map(|f| worst_case_ms(manifest, f, false)).unwrap_or(0)
        }
        _ => 0,
    };
    attempts + waits + fallback
}

/// Plan the answer to `parsed`: one parallel stage (primary + supporting), or one stage per
/// pipeline step. Dispatch ids are fresh UUIDs; the plan is stored once, so they never change.
pub fn build(
    manifest: &Manifest,
    parsed: &ParsedQuery,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> Result<Plan, PlanError> {
    let intent = manifest.intent(&parsed.intent).ok_or_else(|| PlanError::UnknownIntent(parsed.intent.clone()))?;
    let agent = |id: &str| {
        manifest.agent(id).ok_or_else(|| PlanError::Unknown {
            intent: intent.id.clone(),
            what: "agent",
            id: id.to_string(),
        })
    };
    let planned = |agent: &Agent, role| {
        let dispatch = dispatch_for(manifest, agent, role, parsed, correlation_id, now);
        PlannedDispatch { slot: dispatch.dispatch_id.clone(), role, fallback_for: None, dispatch }
    };
    let mut stages = Vec::new();
    let mut deadline_ms = 0;
    if let Some(pipeline_id) = &intent.route.pipeline {
        let pipeline = manifest.pipeline(pipeline_id).ok_or_else(|| PlanError::Unknown {
            intent: intent.id.clone(),
            what: "pipeline",
            id: pipeline_id.clone(),
        })?;
        for step in &pipeline.steps {
            let a = agent(&step.agent)?;
            deadline_ms += worst_case_ms(manifest, a, true);
            stages.push(Stage { gate: step.gate.clone(), ..Stage::of(vec![planned(a, DispatchRole::Step)]) });
        }
    } else {
        let primary_id = intent.route.primary.as_deref().unwrap_or_default();
        let mut dispatches = vec![planned(agent(primary_id)?, DispatchRole::Primary)];
        for id in &intent.route.supporting {
            dispatches.push(planned(agent(id)?, DispatchRole::Supporting));
        }
        deadline_ms = dispatches
            .iter()
            .filter_map(|d| manifest.agent(&d.dispatch.target_agent))
            .map(|a| worst_case_ms(manifest, a, true))
            .max()
            .unwrap_or(0);
        stages.push(Stage::of(dispatches));
    }
    if let Some(deadline) = intent.route.deadline {
        deadline_ms = deadline.as_millis();
    }
    Ok(Plan {
        intent: intent.id.clone(),
        pipeline: intent.route.pipeline.clone(),
        stages,
        current_stage: 0,
        deadline_ms,
        flow: None,
    })
}
