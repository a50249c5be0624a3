//! Wire contracts, exactly as the E2I orchestrator design names them (docs/contracts.md).
//!
//! Field names, enum spellings and nesting follow the seed so that agents written against it
//! interoperate unchanged. Where Switchyard needs more than the seed says, the addition is an
//! optional field that is left out of the JSON when empty, and its doc comment says
//! "extension".
//!
//! Intents are strings here, not an enum: every manifest declares its own intents (the shipped
//! `routing.yaml` declares the E2I design's twelve, listed in [`E2I_INTENTS`]), and nothing in
//! Rust may depend on a particular one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The twelve intents of the E2I design's `IntentType`, in the design's order. The shipped
/// `routing.yaml` declares exactly these; the engine itself reads intents only from the
/// manifest.
pub const E2I_INTENTS: [&str; 12] = [
    "causal_impact",
    "gap_analysis",
    "heterogeneous",
    "experiment_design",
    "prediction",
    "explanation",
    "health_check",
    "drift_check",
    "resource_optimize",
    "ml_training",
    "feature_analysis",
    "model_deploy",
];

/// How an entity was found: verbatim, by a typo-tolerant match, or inferred from context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EntitySource {
    /// The text contains the entity verbatim (case-insensitive).
    #[default]
    Exact,
    /// The text contains a near spelling of the entity.
    Fuzzy,
    /// Not written in the text; derived from a relative expression ("last quarter").
    Inferred,
    /// Not in this turn: carried over from an earlier turn of the conversation.
    Context,
}

fn one() -> f64 {
    1.0
}

/// An entity extracted from the user's query (E2I `ParsedEntity`).
///
/// The seed's dispatch examples carry only `type` and `value`; `confidence` then defaults to
/// 1.0 and `source` to `exact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedEntity {
    /// The entity type: one of the types the manifest declares under `entities:` (the seed's
    /// six in the shipped manifest).
    #[serde(rename = "type")]
    pub entity_type: String,
    /// The normalized value: a gazetteer's canonical spelling, a pattern's match, or a built-in
    /// kind's normal form (`2026-03-14`, `14:30`, `250.00 USD`, `P2W`, …).
    pub value: String,
    /// Extension: the words of the question the value was read from (empty when the entity
    /// was not read from the text, e.g. carried over from an earlier turn by a caller).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// 0.0 – 1.0.
    #[serde(default = "one")]
    pub confidence: f64,
    /// How it was found.
    #[serde(default)]
    pub source: EntitySource,
}

/// Output of the NLP layer, input to the orchestrator (E2I `ParsedQuery`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedQuery {
    /// UUID of the query.
    pub query_id: String,
    /// The user's words.
    pub raw_query: String,
    /// One of the manifest's intents.
    pub intent: String,
    /// At most the manifest's entity limit (20 in E2I).
    #[serde(default)]
    pub entities: Vec<ParsedEntity>,
    /// Classification confidence, 0.0 – 1.0.
    pub confidence: f64,
    /// True when the classifier was unsure (top two close, or low confidence).
    #[serde(default)]
    pub ambiguity_flag: bool,
    /// RAG-retrieved context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// When the query was parsed.
    pub timestamp: DateTime<Utc>,
}

/// Complete input to the orchestrator (E2I `OrchestratorInput`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrchestratorInput {
    /// The parsed query.
    pub parsed_query: ParsedQuery,
    /// Caller.
    pub user_id: String,
    /// Conversation.
    pub session_id: String,
    /// Earlier turns, newest last.
    #[serde(default)]
    pub conversation_history: Vec<Value>,
    /// Caller preferences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferences: Option<Value>,
}

/// Execution status of a dispatched agent (E2I handoff `execution.status`).
///
/// `AgentResult.status` in the seed lists four of these; Switchyard reports `blocked` there too
/// (a QC gate that stopped a pipeline), so one enum serves both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoffStatus {
    /// The agent answered.
    Success,
    /// The agent answered part of the question.
    Partial,
    /// The agent failed.
    Failed,
    /// The agent did not answer in time.
    Timeout,
    /// A gate stopped the work (Tier 0 QC gate).
    Blocked,
}

impl HandoffStatus {
    /// Whether the handoff carries a usable answer.
    pub fn is_usable(self) -> bool {
        matches!(self, HandoffStatus::Success | HandoffStatus::Partial)
    }
}

/// Result from a dispatched agent as reported in the output (E2I `AgentResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    /// Agent id from the manifest.
    pub agent_id: String,
    /// The agent's tier.
    pub agent_tier: u8,
    /// How it ended.
    pub status: HandoffStatus,
    /// The agent's primary output.
    pub result: Value,
    /// The agent's confidence.
    pub confidence: f64,
    /// Wall time from the dispatch to this result, across every attempt (queue waits and
    /// retry backoff included).
    pub latency_ms: u64,
    /// Extension: wall time of the attempt that produced this result alone.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub attempt_latency_ms: u64,
    /// Error text when the agent did not succeed.
    pub error: Option<String>,
    /// Extension: attempts made (1 = first try succeeded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// Extension: the dispatch this result answers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dispatch_id: String,
    /// Extension: the agent this one stood in for, when it is a fallback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_for: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Kind of source a citation points at (E2I `Citation.source_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CitationSourceType {
    /// A path in a causal graph.
    CausalPath,
    /// What an agent did.
    AgentActivity,
    /// A business metric.
    BusinessMetric,
    /// A machine-learning model.
    MlModel,
    /// Extension: a retrieved document or chunk (seeds 001, 003, 004).
    Document,
}

/// Source citation for the response (E2I `Citation`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// What kind of source.
    pub source_type: CitationSourceType,
    /// Its id.
    pub source_id: String,
    /// 0.0 – 1.0.
    pub relevance: f64,
    /// Extension: the evidence text behind the citation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Extension: the agent whose handoff supplied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// Terminal status of a query (E2I `OrchestratorOutput.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputStatus {
    /// Every agent answered.
    Success,
    /// Some agents answered; caveats name the others.
    Partial,
    /// No usable answer.
    Failed,
    /// Extension: a QC gate stopped a pipeline (E2I `QC_GATE_BLOCKED`).
    Blocked,
}

/// Error categories (E2I `OrchestratorError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// The request failed validation: 400 with details.
    InvalidInput,
    /// No route could be found: fall back to the manifest's fallback intent.
    RoutingFailed,
    /// An agent did not answer in time: retry with an extended timeout, then fall back.
    AgentTimeout,
    /// An agent failed: retry if recoverable, fall back otherwise.
    AgentError,
    /// Synthesis failed: return partial results with a caveat.
    SynthesisFailed,
    /// A Tier 0 QC gate failed: blocked status with the QC report.
    QcGateBlocked,
    /// A guardrail blocked the question or the answer: failed with the safe reply (RAG manager).
    GuardrailBlocked,
    /// The planner found the question incoherent: failed at once, no specialist ran (RAG manager).
    IncoherentQuery,
    /// The cascaded classifier chose an intent that needs a role the caller lacks.
    PermissionDenied,
    /// The question is outside the manifest's domain: failed at once, no agent ran.
    OutOfScope,
}

/// Confidence band of the final answer (the RAG manager design's `final_reason` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfidenceBand {
    /// ≥ 0.80.
    ConfidenceHigh,
    /// 0.70 – 0.80: answer with a caveat.
    ConfidenceMediumCaveated,
    /// 0.50 – 0.70: answer with a limitation.
    ConfidenceLowPartial,
    /// < 0.50: answer with strong clarification notes.
    ConfidenceTooLowClarify,
    /// Not a band: the question is outside the manifest's domain and no agent answered it
    /// (`failed`, with a reply listing what the assistant can help with).
    OutOfScope,
    /// Not a band: the intent needs entities the question did not name, so no agent ran; the
    /// reply asks for them (`missing_entities` lists them) and the session's next turn may
    /// supply them.
    MissingEntities,
}

/// The error that ended or marred a query (extension of the output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputError {
    /// E2I category.
    pub category: ErrorCategory,
    /// What happened, for the caller.
    pub message: String,
}

/// Complete output of the orchestrator (E2I `OrchestratorOutput`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrchestratorOutput {
    /// The query.
    pub query_id: String,
    /// How it ended.
    pub status: OutputStatus,
    /// Synthesized answer.
    pub response_text: String,
    /// 0.0 – 1.0.
    pub response_confidence: f64,
    /// Agent ids in dispatch order (fallbacks included).
    pub agents_dispatched: Vec<String>,
    /// One per dispatch.
    pub agent_results: Vec<AgentResult>,
    /// Sources behind the answer.
    pub citations: Vec<Citation>,
    /// Chart specifications from the agents.
    pub visualizations: Vec<Value>,
    /// What the caller might ask next.
    pub follow_up_suggestions: Vec<String>,
    /// Accepted → output written.
    pub total_latency_ms: u64,
    /// When the output was written.
    pub timestamp: DateTime<Utc>,
    /// Extension: the intent the query was routed on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub intent: String,
    /// Extension: RAG manager band (`final_reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_reason: Option<ConfidenceBand>,
    /// Extension: caveats, limitations and clarification notes, including what failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
    /// Extension: validation warnings (truncated entities, unknown intent, latency budget).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Extension: the error behind a failed or blocked status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<OutputError>,
    /// Extension: the QC report of a blocked pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qc_report: Option<Value>,
    /// Extension: what the route's orchestration modes did — which classifier decided and how
    /// sure it was, guardrail and coherence verdicts, deliberation rounds, critiques, source
    /// evaluation and contradictions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestration: Option<Value>,
    /// Extension: the RAG manager design's reflection on the answer, for the UI: `applicability_note`,
    /// `uncertainty_note` and the score behind them (original question 70 %, revised query
    /// 30 %). Metadata, never part of `response_text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflection: Option<Reflection>,
    /// The conversation this answer belongs to (Switchyard addition): send it back as
    /// `session_id` to ask a follow-up.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_id: String,
    /// The entities the question was taken to mean (E2I `ParsedEntity`; `source: context` for
    /// those carried over from earlier turns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entities: Vec<ParsedEntity>,
    /// Extension: the required entity types the question did not name (with `final_reason:
    /// missing_entities`), in the intent's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_entities: Vec<String>,
}

/// Limits on what an agent may spend (E2I dispatch `payload.constraints`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchConstraints {
    /// Latency budget; exceeding it is a warning.
    pub max_latency_ms: u64,
    /// Below this the answer carries a caveat.
    pub required_confidence: f64,
}

/// What the agent is asked (E2I dispatch `payload`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchPayload {
    /// The routed intent.
    pub intent: String,
    /// The query's entities.
    #[serde(default)]
    pub entities: Vec<ParsedEntity>,
    /// Agent-specific context (previous pipeline step output, the question, …).
    #[serde(default)]
    pub context: Value,
    /// Budget.
    pub constraints: DispatchConstraints,
}

/// How the dispatch is scheduled (E2I dispatch `routing`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchRouting {
    /// 1 = highest; lower tier, higher priority.
    pub priority: u8,
    /// Per-attempt timeout.
    pub timeout_ms: u64,
    /// Retries after the first attempt.
    pub retry_count: u32,
    /// Agent that answers when retries are exhausted.
    pub fallback_agent: Option<String>,
}

/// Dispatch bookkeeping (E2I dispatch `metadata`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchMetadata {
    /// When the router recorded the dispatch.
    pub dispatched_at: DateTime<Utc>,
    /// Travels with every message and log line of the query.
    pub correlation_id: String,
}

/// Work sent to a Tier 0–5 agent (E2I `AgentDispatch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentDispatch {
    /// Unique per dispatch.
    pub dispatch_id: String,
    /// The query.
    pub query_id: String,
    /// Agent id from the manifest.
    pub target_agent: String,
    /// 0 – 5.
    pub target_tier: u8,
    /// What to do.
    pub payload: DispatchPayload,
    /// How to schedule it.
    pub routing: DispatchRouting,
    /// Bookkeeping.
    pub metadata: DispatchMetadata,
}

/// `dispatch:` wrapper as the seed writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchEnvelope {
    /// The dispatch.
    pub dispatch: AgentDispatch,
}

/// When and how the agent ran (E2I handoff `execution`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffExecution {
    /// How it ended.
    pub status: HandoffStatus,
    /// Start of the attempt.
    pub started_at: DateTime<Utc>,
    /// End of the attempt.
    pub completed_at: DateTime<Utc>,
    /// completed − started.
    pub latency_ms: u64,
}

/// One piece of evidence: the seed's plain sentence, or a sourced item that becomes a citation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Evidence {
    /// A sentence, as in the seed's examples.
    Text(String),
    /// A sentence with its source.
    Sourced {
        /// Kind of source.
        source_type: CitationSourceType,
        /// Source id.
        source_id: String,
        /// What it says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// 0.0 – 1.0.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        relevance: Option<f64>,
    },
}

/// What the agent found (E2I handoff `result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HandoffResult {
    /// Agent-specific output.
    #[serde(default)]
    pub primary_output: Value,
    /// 0.0 – 1.0.
    #[serde(default)]
    pub confidence: f64,
    /// Why it should be believed.
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// What the reader should know.
    #[serde(default)]
    pub caveats: Vec<String>,
}

/// Side outputs (E2I handoff `artifacts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HandoffArtifacts {
    /// Chart specifications.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub visualizations: Vec<Value>,
    /// Tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<Value>,
    /// Models (Tier 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<Value>,
}

/// What went wrong (E2I handoff `errors`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HandoffErrors {
    /// e.g. `agent_timeout`, `agent_error`, `malformed_handoff`.
    pub error_type: Option<String>,
    /// For people.
    pub error_message: Option<String>,
    /// Whether a retry can help.
    #[serde(default)]
    pub recoverable: bool,
}

/// How the answer was produced (E2I handoff `metadata`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HandoffMetadata {
    /// Model id, or the agent kind for non-model agents.
    #[serde(default)]
    pub model_used: String,
    /// Tokens in + out.
    #[serde(default)]
    pub tokens_consumed: u64,
    /// Of which prompt tokens, when the agent reported them apart (model agents).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub input_tokens: u64,
    /// Of which completion tokens, when the agent reported them apart.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub output_tokens: u64,
    /// Whether a cache answered.
    #[serde(default)]
    pub cache_hit: bool,
}

/// An agent's answer to a dispatch (E2I `AgentHandoff`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentHandoff {
    /// From the dispatch.
    pub dispatch_id: String,
    /// Who answered.
    pub agent_id: String,
    /// Its tier.
    pub agent_tier: u8,
    /// When and how.
    pub execution: HandoffExecution,
    /// What it found.
    #[serde(default)]
    pub result: HandoffResult,
    /// Side outputs.
    #[serde(default)]
    pub artifacts: HandoffArtifacts,
    /// What went wrong.
    #[serde(default)]
    pub errors: HandoffErrors,
    /// How it was produced.
    #[serde(default)]
    pub metadata: HandoffMetadata,
}

/// `handoff:` wrapper as the seed writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffEnvelope {
    /// The handoff.
    pub handoff: AgentHandoff,
}

/// Training signal for routing optimisation (E2I `RoutingTrainingSignal`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutingTrainingSignal {
    /// Unique id.
    pub signal_id: String,
    /// Conversation.
    pub session_id: String,
    /// Stored only when the manifest allows; otherwise empty (logs carry ids, not text).
    pub query: String,
    /// Classified query type.
    pub query_pattern: String,
    /// Routed intent.
    pub intent: String,
    /// `type:value` of each entity.
    pub entities_extracted: Vec<String>,
    /// Agents dispatched.
    pub agents_selected: Vec<String>,
    /// Classifier confidence.
    pub routing_confidence: f64,
    /// Which stage decided and why.
    pub routing_rationale: String,
    /// Usable handoffs.
    pub agents_succeeded: u32,
    /// The rest.
    pub agents_failed: u32,
    /// Accepted → output.
    pub total_latency_ms: f64,
    /// 1 – 5, from feedback.
    pub user_satisfaction: Option<f64>,
    /// 0 – 1.
    pub answer_quality: Option<f64>,
    /// Whether a fallback or re-route was needed.
    pub was_rerouted: bool,
}

impl RoutingTrainingSignal {
    /// Reward for routing optimisation with the seed's weights: routing accuracy 0.35
    /// (succeeded / selected), efficiency 0.25 (1 at ≤ 2 s falling to 0 at 120 s), no
    /// re-routing 0.20, user satisfaction 0.20 (1–5 scaled to 0–1; when absent the other
    /// weights are rescaled to sum to one).
    pub fn compute_reward(&self) -> f64 {
        let selected = self.agents_selected.len().max(1) as f64;
        let accuracy = (f64::from(self.agents_succeeded) / selected).clamp(0.0, 1.0);
        let efficiency = (1.0 - (self.total_latency_ms - 2_000.0).max(0.0) / 118_000.0).clamp(0.0, 1.0);
        let no_reroute = if self.was_rerouted { 0.0 } else { 1.0 };
        let mut score = 0.35 * accuracy + 0.25 * efficiency + 0.20 * no_reroute;
        match self.user_satisfaction {
            Some(s) => score += 0.20 * ((s - 1.0) / 4.0).clamp(0.0, 1.0),
            None => score /= 0.80,
        }
        score.clamp(0.0, 1.0)
    }
}

/// What reflection adds to the output: the RAG manager design's score of the answer against the
/// question and the notes written from it (`switchyard_core::retrieval::reflect`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reflection {
    /// Weighted score (0 – 1).
    pub score: f64,
    /// Share of the original question's terms covered.
    pub original_score: f64,
    /// Share of the revised query's terms covered (the original's when there is none).
    pub revised_score: f64,
    /// Weight of the original question.
    pub original_weight: f64,
    /// Weight of the revised query.
    pub revised_weight: f64,
    /// Whether the answer addresses the question.
    pub applicability_note: String,
    /// What the answer rests on and what could make it wrong.
    pub uncertainty_note: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal() -> RoutingTrainingSignal {
        RoutingTrainingSignal {
            signal_id: "s".into(),
            session_id: "sess".into(),
            query: String::new(),
            query_pattern: "causal_impact".into(),
            intent: "causal_impact".into(),
            entities_extracted: vec![],
            agents_selected: vec!["causal_impact".into(), "explainer".into()],
            routing_confidence: 0.9,
            routing_rationale: "embedded".into(),
            agents_succeeded: 2,
            agents_failed: 0,
            total_latency_ms: 1_000.0,
            user_satisfaction: None,
            answer_quality: None,
            was_rerouted: false,
        }
    }

    #[test]
    fn a_fast_fully_successful_route_earns_the_full_reward() {
        assert!((signal().compute_reward() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_failed_agent_and_a_reroute_lower_the_reward_by_their_weights() {
        let mut s = signal();
        s.agents_succeeded = 1;
        s.was_rerouted = true;
        s.user_satisfaction = Some(5.0);
        // 0.35 * 0.5 + 0.25 + 0 + 0.20
        assert!((s.compute_reward() - 0.625).abs() < 1e-9);
    }
}
