//! The query's records as the store keeps them: the query, its handoffs, its event log, and
//! a page of exported signals.

use super::{Detail, Plan};
use crate::contracts::{AgentHandoff, OutputStatus, ParsedQuery};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Where a query is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryStatus {
    /// Recorded by intake; the route job is on its way.
    Accepted,
    /// Planned and dispatched by the router; handoffs are arriving.
    Routed,
    /// A synthesizer has claimed it (see [`QueryRecord::synth_claimed_at`]).
    Synthesizing,
    /// The output is written. Terminal.
    Done,
}

/// The query's main record (`Q#<id>` / `META`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryRecord {
    /// UUID v4.
    pub query_id: String,
    /// Caller (from the authorizer).
    pub user_id: String,
    /// Conversation.
    pub session_id: String,
    /// Caller's roles at submission.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Client-supplied idempotency key, if any.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Hash of the request body, to tell a retry from a different request with the same key.
    #[serde(default)]
    pub request_hash: String,
    /// [`crate::manifest::Manifest::fingerprint`] of the manifest the query started on.
    pub manifest_fingerprint: String,
    /// Life-cycle state.
    pub status: QueryStatus,
    /// Optimistic-concurrency version; every [`Store::update_query`] bumps it.
    pub version: u64,
    /// The parsed query (classified at intake, or supplied pre-parsed). Shared (`Arc`) like
    /// the plan: written once at intake, replaced whole by the step that re-classifies.
    pub parsed: std::sync::Arc<ParsedQuery>,
    /// Warnings from validation and classification.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The scope check of an embedded classification (none for a pre-parsed query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<super::ScopeCheck>,
    /// Set by the router. Shared (`Arc`): the copies of a record a step reads and writes share
    /// one plan until a step changes it, and a step that changes it writes a new one.
    #[serde(default)]
    pub plan: Option<std::sync::Arc<Plan>>,
    /// Fan-in set: slots of the current stage that have their final handoff. Owned by
    /// [`Store::record_handoff`]; [`Store::update_query`] leaves it alone.
    #[serde(default)]
    pub completed: BTreeSet<String>,
    /// When intake accepted it.
    pub accepted_at: DateTime<Utc>,
    /// When the deadline fires.
    #[serde(default)]
    pub deadline_at: Option<DateTime<Utc>>,
    /// When a synthesizer claimed it; a claim older than the lease may be taken over.
    #[serde(default)]
    pub synth_claimed_at: Option<DateTime<Utc>>,
    /// Final status once done.
    #[serde(default)]
    pub outcome: Option<OutputStatus>,
    /// The routing training signal: recorded with the plan, completed with the output, given
    /// feedback later ([`super::StoredSignal`]). Shared (`Arc`) like the plan: a read of the
    /// record does not copy it; a step that changes it copies it once (`Arc::make_mut`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<std::sync::Arc<super::StoredSignal>>,
    /// Tool calls that wait, or waited, for a person ([`super::Approval`]), in the order asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<super::Approval>,
    /// Epoch seconds after which the record is expired (DynamoDB TTL); an expired record that
    /// is still present is treated as absent.
    pub expires_at: i64,
}

/// A recorded handoff (`Q#<id>` / `H#<dispatch_id>`): exactly one per dispatch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffRecord {
    /// The query.
    pub query_id: String,
    /// Fan-in slot this handoff fills (the original dispatch id for a fallback); `None` for a
    /// handoff that hands over to a fallback and so fills nothing.
    pub slot: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// The agent this one stood in for.
    #[serde(default)]
    pub fallback_for: Option<String>,
    /// Caveats the engine added (below required confidence, over latency budget, truncated…).
    #[serde(default)]
    pub engine_caveats: Vec<String>,
    /// The handoff itself (E2I shape).
    pub handoff: AgentHandoff,
    /// Epoch seconds TTL.
    pub expires_at: i64,
}

/// What the event log records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Intake accepted the query.
    Accepted,
    /// The conversation context was assembled (what was kept and dropped, token counts).
    Context,
    /// Intent decided (stage, confidence).
    Route,
    /// Plan built.
    Plan,
    /// A dispatch was sent.
    Dispatch,
    /// An attempt failed and another is scheduled.
    Retry,
    /// Retries exhausted; a fallback answers instead.
    Fallback,
    /// A handoff was recorded.
    Handoff,
    /// A pipeline gate was checked.
    Gate,
    /// The deadline fired.
    Deadline,
    /// An orchestration step decided something (guardrail verdict, coherence, orchestrator
    /// decision or re-consultation, escalation, source evaluation, memory dispatch).
    Step,
    /// A critic judged the answer (verdict and critique).
    Critique,
    /// A batch of a streamed answer's text (`text`, `stream`, `seq`, `draft`, `attempt`).
    Token,
    /// An agent asked for a tool call (tool, argument digest, call index).
    ToolCall,
    /// A tool call ended (tool, status, latency, size; `replayed` when a recorded result was
    /// given back instead of calling again).
    ToolResult,
    /// A tool call waits for a person (tool, dispatch, call index, `expires_at`).
    ApprovalRequested,
    /// A person decided a waiting call, or it expired (`verdict`, who, dispatch, call index).
    ApprovalDecided,
    /// The synthesizer merged the handoffs.
    Synthesis,
    /// The output is written. Terminal.
    Final,
}

/// One entry of a query's event log (`Q#<id>` / `E#<key>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The query.
    pub query_id: String,
    /// Unique within the query and deterministic for the step that writes it, so a repeated
    /// write is idempotent.
    pub key: String,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// What happened.
    pub kind: EventKind,
    /// Details (ids, statuses, timings — never raw query text), kept as their JSON text
    /// ([`Detail`]). Shared (`Arc`): the store keeps the event the step built without copying
    /// its details.
    #[serde(default)]
    pub detail: std::sync::Arc<Detail>,
    /// Epoch seconds TTL.
    pub expires_at: i64,
}

/// Result of [`Store::record_handoff`].
#[derive(Debug, Clone, PartialEq)]
pub enum HandoffWrite {
    /// Stored. `completed` is the fan-in set after this write (when the handoff filled a slot).
    Recorded {
        /// The fan-in set after the write.
        completed: BTreeSet<String>,
    },
    /// A handoff for this dispatch already exists; nothing changed.
    Duplicate,
}

/// Which page of finished training signals to read ([`Store::list_signals`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SignalPageRequest {
    /// Newest recording time looked at (on DynamoDB, the first day bucket read).
    pub newest: DateTime<Utc>,
    /// Oldest recording time returned.
    pub oldest: DateTime<Utc>,
    /// Continue after this cursor (a page's `next`).
    pub after: Option<String>,
    /// Most records returned (1 – [`crate::limits::MAX_SIGNAL_PAGE`]).
    pub limit: usize,
}

/// One page of finished signals, newest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SignalPage {
    /// The records (feedback applied, reward computed).
    pub records: Vec<super::SignalRecord>,
    /// Where the next page starts; `None` when there is no more.
    pub next: Option<String>,
}
