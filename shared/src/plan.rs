//! Plans: which agents answer a query, in which stages, with which budgets.
//!
//! The router turns a parsed query and its intent's route into a [`Plan`]: one stage of
//! parallel dispatches (primary + supporting agents), or one stage per step of a pipeline. The
//! plan is stored in the query record and is the only place the workers read their dispatches
//! from, so a redelivered message always finds the same dispatch ids.

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
}

impl Stage {
    /// The slots that must be filled for the stage to be complete.
    pub fn slots(&self) -> impl Iterator<Item = &str> {
        self.dispatches.iter().filter(|d| d.role != DispatchRole::Fallback).map(|d| d.slot.as_str())
    }
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
