//! The record of one tool call that changes the world (`effects: write`): written with a
//! condition before the call is made, its outcome added after. It is what makes a write
//! happen once although SQS delivers a dispatch at least once and a Lambda may stop anywhere.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// The tool answered.
    Ok,
    /// The tool answered with an error, or could not be reached.
    Error,
    /// No answer within the tool's timeout.
    Timeout,
    /// The call was refused before it was made (unknown tool, bad arguments, missing role).
    Refused,
    /// A record of the call exists without an outcome: the worker stopped between making the
    /// call and recording it. Whether the tool acted is not known; the call is not repeated.
    Unknown,
}

impl ToolCallStatus {
    /// The name in events and records.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallStatus::Ok => "ok",
            ToolCallStatus::Error => "error",
            ToolCallStatus::Timeout => "timeout",
            ToolCallStatus::Refused => "refused",
            ToolCallStatus::Unknown => "unknown",
        }
    }
}

/// What a call came to, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallOutcome {
    /// How it ended.
    pub status: ToolCallStatus,
    /// The result as handed to the model (already cut to the source's limit).
    pub content: String,
    /// When it ended.
    pub completed_at: DateTime<Utc>,
}

/// One write call of one dispatch (`Q#<query>` / `C#<dispatch>#<index>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The query.
    pub query_id: String,
    /// The dispatch that made the call (stable across its attempts and redeliveries).
    pub dispatch_id: String,
    /// The call's position among the dispatch's write calls, from 0.
    pub index: u32,
    /// The tool's manifest name (`orders.issue_refund`).
    pub tool: String,
    /// SHA-256 of the arguments' canonical JSON, hex (the arguments themselves are not kept).
    pub arguments_digest: String,
    /// The key sent with the call (`Idempotency-Key` header, MCP `_meta`), so the tool can
    /// recognise a repeat on its side too.
    pub idempotency_key: String,
    /// When the call was claimed.
    pub claimed_at: DateTime<Utc>,
    /// Filled after the call.
    #[serde(default)]
    pub outcome: Option<ToolCallOutcome>,
    /// Epoch seconds TTL (the query's).
    pub expires_at: i64,
}

impl ToolCallRecord {
    /// The idempotency key of call `index` of `dispatch_id`: the same for every delivery.
    pub fn key_for(dispatch_id: &str, index: u32) -> String {
        format!("{dispatch_id}-call-{index}")
    }

    /// Whether a later run may make this recorded call itself, as if it were not claimed.
    /// Never: a record is written before its call is made, so one without an outcome may
    /// have been made (its outcome is unknown) and one with an outcome is replayed.
    ///
    /// The one place the rule is written, so the simulation harness can prove it notices
    /// when it is wrong: the test-only `planted-double-call` feature lets a record without
    /// an outcome be called again.
    pub fn free_to_call(&self) -> bool {
        cfg!(feature = "planted-double-call") && self.outcome.is_none()
    }
}

/// What claiming a call found.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolClaim {
    /// This worker holds the call: make it, then record its outcome.
    Claimed,
    /// A record exists (another delivery claimed it first): replay its outcome, or report
    /// `unknown` when it has none.
    Recorded(Box<ToolCallRecord>),
}
