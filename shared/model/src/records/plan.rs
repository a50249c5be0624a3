//! Plans: which agents answer a query, in which stages, with which budgets. The router builds
//! one (`switchyard_core::plan`), the query record keeps it, and every worker reads its
//! dispatches from it.

use crate::contracts::AgentDispatch;
use crate::manifest::Gate;
use chrono::{DateTime, Utc};
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
    /// Runs beside the query and is never waited for (the research-assistant design's memory step).
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
    /// The E2I dispatch.
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
