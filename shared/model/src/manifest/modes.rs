//! Orchestration modes a route may declare (seeds 001 – 004): guardrails and a coherence
//! planner around any route, a critic loop after its answer, and two answer shapes besides
//! "primary + supporting": `deliberate` (experts and an orchestrator that re-consults them)
//! and `sources` (parallel sources, an evaluator, a synthesizer and a memory step).
//!
//! Each mode is carried out by the engine as a sequence of plan stages (see
//! `plan::modes`); the agents keep their ordinary manifest entries, tiers and retry
//! policies. The field names the engine reads from these agents' answers are fixed and listed
//! on each settings type.

use super::Dur;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The answer shape of a route, besides the default primary + supporting agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteMode {
    /// negotiation: experts fan out, an orchestrator decides or re-consults, a crafter drafts.
    Deliberate,
    /// research-assistant: parallel sources, evaluator, synthesizer, memory.
    Sources,
}

/// The negotiation design's expert loop. The orchestrator answers `ready_to_act` (bool), `action`,
/// `reasoning`, `next_expert` and `question_for_expert`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliberateSettings {
    /// The experts; each sees only the fields its agent entry lists in `inputs`.
    pub experts: Vec<Expert>,
    /// The agent that decides (sees every field, all opinions and its prior decisions).
    pub orchestrator: String,
    /// The agent that drafts the final text from the decision.
    pub crafter: String,
    /// Orchestrator rounds before the safety valve escalates (negotiation: 10).
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    /// The action taken when the loop ends undecided.
    #[serde(default = "default_escalate_action")]
    pub escalate_action: String,
}

fn default_max_iterations() -> u32 {
    10
}

fn default_escalate_action() -> String {
    "escalate".into()
}

/// One expert of a deliberation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expert {
    /// The expert agent.
    pub agent: String,
    /// Not in the first fan-out; consulted only when the orchestrator names it.
    #[serde(default)]
    pub on_demand: bool,
}

/// The unified-chat design's critic loop. The critic answers `verdict` (`accept` / `reject`) and `critique`
/// (and optionally `summary`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriticSettings {
    /// The critic agent; it sees the question and the answer.
    pub agent: String,
    /// Re-syntheses after a rejection.
    #[serde(default = "default_critic_retries")]
    pub max_retries: u32,
}

fn default_critic_retries() -> u32 {
    2
}

/// The RAG manager design's guardrails and coherence check. Guardrails answer `allowed` (bool), `reason`
/// and `safe_reply`; the planner answers `coherence` (`coherent` / `incoherent`),
/// `coherence_reason` and optionally `revised_query`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct GuardrailSettings {
    /// Checks the question before anything else runs.
    pub input: Option<String>,
    /// Checks coherence after the input guardrail; incoherent questions end at once.
    pub planner: Option<String>,
    /// Checks the answer before it is returned.
    pub output: Option<String>,
    /// Reply when a guardrail blocks without a `safe_reply` of its own.
    pub safe_reply: Option<String>,
}

/// The research-assistant design's parallel sources. Sources answer `chunks`: `[{text, source, date, relevance}]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesSettings {
    /// Source agents, dispatched in parallel; each one's own `timeout` is its per-source
    /// timeout.
    pub agents: Vec<String>,
    /// Total budget of the retrieval: sources still out when it ends count as timed out.
    pub budget: Dur,
    /// The agent that writes the answer from the evaluated chunks.
    pub synthesizer: String,
    /// An agent that records the exchange; dispatched after the answer, never waited for.
    #[serde(default)]
    pub memory: Option<String>,
    /// Chunks scoring below this are dropped.
    #[serde(default = "default_quality_threshold")]
    pub quality_threshold: f64,
    /// Score weights.
    #[serde(default)]
    pub weights: ScoreWeights,
    /// Reputation (0 – 1) per chunk `source`; unknown sources get 0.5.
    #[serde(default)]
    pub reputation: BTreeMap<String, f64>,
    /// Word overlap (Jaccard) at which a chunk counts as a near-duplicate of an earlier one
    /// and has its score halved.
    #[serde(default = "default_duplicate_similarity")]
    pub duplicate_similarity: f64,
    /// Age, in years, at which a chunk's recency reaches 0.
    #[serde(default = "default_recency_horizon")]
    pub recency_horizon_years: f64,
}

fn default_quality_threshold() -> f64 {
    0.6
}

fn default_duplicate_similarity() -> f64 {
    0.8
}

fn default_recency_horizon() -> f64 {
    5.0
}

/// The research-assistant design's quality-score weights.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScoreWeights {
    /// Weight of the source's reputation.
    pub source: f64,
    /// Weight of the chunk's recency.
    pub recency: f64,
    /// Weight of the chunk's relevance.
    pub relevance: f64,
}

impl Default for ScoreWeights {
    fn default() -> Self {
        ScoreWeights { source: 0.3, recency: 0.2, relevance: 0.4 }
    }
}
