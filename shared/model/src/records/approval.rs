//! A tool call that waits for a person (`approval:` in a tool source): kept on the query's
//! record while it waits, with the decision once made. Nothing waits in a process: the agent's
//! attempt ends when it asks, and the decision resumes the dispatch through its tier's queue.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a waiting call was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A person approved it: the call is made (once).
    Approve,
    /// A person rejected it: the model is told so, with the person's note.
    Reject,
    /// Nobody decided within the approval's timeout: treated as rejected.
    Expired,
}

impl Verdict {
    /// The name in events and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::Reject => "reject",
            Verdict::Expired => "expired",
        }
    }
}

/// The decision on a waiting call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// Approve, reject, or expired.
    pub verdict: Verdict,
    /// The person's note (empty when none was given).
    #[serde(default)]
    pub note: String,
    /// The arguments the call is made with when a person approved edited ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Who decided (the caller's id; the operator's for the CLI; `deadline` for an expiry).
    pub decided_by: String,
    /// When.
    pub decided_at: DateTime<Utc>,
}

/// One tool call that waits (or waited) for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    /// The dispatch whose agent asked for the call.
    pub dispatch_id: String,
    /// The call's position among the dispatch's calls that need approval, from 0.
    pub index: u32,
    /// The tool's manifest name (`orders.issue_refund`).
    pub tool: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// The role a person needs to decide.
    pub role: String,
    /// When the agent asked.
    pub requested_at: DateTime<Utc>,
    /// When the call counts as rejected if nobody decided.
    pub expires_at: DateTime<Utc>,
    /// The query deadline's time left when the agent asked; the deadline is paused while the
    /// call waits and restarts with this much when it is decided.
    pub deadline_left_ms: u64,
    /// The attempt of the dispatch that asked (the resumption runs the same attempt).
    pub attempt: u32,
    /// That attempt's timeout.
    pub timeout_ms: u64,
    /// The tier whose queue resumes the dispatch.
    pub tier: u8,
    /// The decision, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalDecision>,
}

impl Approval {
    /// Whether the call still waits for a decision.
    pub fn is_pending(&self) -> bool {
        self.decision.is_none()
    }

    /// What `GET /v1/queries/{id}` shows of a waiting call.
    pub fn pending_view(&self) -> PendingApproval {
        PendingApproval {
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            requested_at: self.requested_at,
            expires_at: self.expires_at,
        }
    }
}

/// The waiting call as a caller sees it (`pending_approval`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The tool's manifest name.
    pub tool: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// When the agent asked.
    pub requested_at: DateTime<Utc>,
    /// When the call counts as rejected if nobody decided.
    pub expires_at: DateTime<Utc>,
}

/// What a waiting call came to, as the agent's tool loop reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovalState {
    /// Nobody has decided yet (the query waits; the attempt ends).
    Pending,
    /// Approved: make the call with these arguments.
    Approved(Value),
    /// Rejected or expired: the tool result to give the model.
    Rejected(String),
}

impl ApprovalState {
    /// The state of `approval`.
    pub fn of(approval: &Approval) -> ApprovalState {
        match &approval.decision {
            None => ApprovalState::Pending,
            Some(d) => match d.verdict {
                Verdict::Approve => {
                    ApprovalState::Approved(d.arguments.clone().unwrap_or_else(|| approval.arguments.clone()))
                }
                Verdict::Reject if d.note.trim().is_empty() => {
                    ApprovalState::Rejected("rejected by a person (no note given)".into())
                }
                Verdict::Reject => ApprovalState::Rejected(format!("rejected by a person: {}", d.note.trim())),
                Verdict::Expired => ApprovalState::Rejected(format!(
                    "rejected: nobody decided by {}, when the approval expired",
                    approval.expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> Approval {
        let at =
            DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z").map(|t| t.with_timezone(&Utc)).unwrap_or_default();
        Approval {
            dispatch_id: "d".into(),
            index: 0,
            tool: "orders.issue_refund".into(),
            arguments: serde_json::json!({"amount": 25}),
            role: "approver".into(),
            requested_at: at,
            expires_at: at + chrono::Duration::hours(1),
            deadline_left_ms: 5_000,
            attempt: 1,
            timeout_ms: 5_000,
            tier: 2,
            decision: None,
        }
    }

    fn decided(verdict: Verdict, note: &str, arguments: Option<Value>) -> Approval {
        let mut a = waiting();
        a.decision = Some(ApprovalDecision {
            verdict,
            note: note.into(),
            arguments,
            decided_by: "u".into(),
            decided_at: a.requested_at,
        });
        a
    }

    #[test]
    fn each_decision_tells_the_loop_what_to_do() {
        assert_eq!(ApprovalState::of(&waiting()), ApprovalState::Pending);
        let edited = serde_json::json!({"amount": 20});
        assert_eq!(
            ApprovalState::of(&decided(Verdict::Approve, "", None)),
            ApprovalState::Approved(serde_json::json!({"amount": 25}))
        );
        assert_eq!(
            ApprovalState::of(&decided(Verdict::Approve, "", Some(edited.clone()))),
            ApprovalState::Approved(edited)
        );
        assert_eq!(
            ApprovalState::of(&decided(Verdict::Reject, " too much ", None)),
            ApprovalState::Rejected("rejected by a person: too much".into())
        );
        assert_eq!(
            ApprovalState::of(&decided(Verdict::Expired, "", None)),
            ApprovalState::Rejected(
                "rejected: nobody decided by 2026-12-01T11:00:00Z, when the approval expired".into()
            )
        );
    }
}
