//! A person in the loop: the decision on a tool call that waits for approval
//! (`POST /v1/queries/{id}/approval`, `switchyard query approve|reject`), its expiry, and the
//! resumption of the dispatch that asked.
//!
//! The agent's attempt ended when it asked ([`super::tool_calls`] stored the waiting call on
//! the query and paused the deadline). A decision is one conditional write of the query record
//! (the call decided, the deadline restarted with the time it had left, an `approval_decided`
//! event); then the same attempt of the dispatch is sent to its tier's queue. The resumed run
//! reaches the same call and finds the decision: approved, the call is made — claimed like a
//! write, so a resumption delivered twice makes it once; rejected or expired, the model is told
//! so. A second decision and a decision after expiry are conflicts; a decision needs the
//! approval's role.
//!
//! Nothing waits in a process. The expiry is a deadline message at the call's `expires_at`;
//! the same message, finding the call decided but the dispatch without its handoff, sends the
//! resumption again (a decision written just before a crash is not lost).

use super::deps::{Deps, StepError};
use super::effects::{arm_deadline, Entry};
use super::intake::{self, Caller, IntakeError};
use crate::ports::{Approval, ApprovalDecision, Detail, QueryRecord, QueueId, StoreError, Verdict};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use switchyard_core::admission::{FieldError, ValidationError};
use switchyard_model::jobs::Job;
use tracing::{info, instrument, warn};

/// Largest decision body accepted.
pub const MAX_DECISION_BYTES: usize = 64 * 1024;

/// Longest note a person may give, in characters (it reaches the model as the call's result).
pub const MAX_NOTE_CHARS: usize = 2_000;

/// Times a decision re-reads the query after a concurrent write moved its version.
const DECISION_ATTEMPTS: usize = 8;

/// Who decides.
#[derive(Debug, Clone, Copy)]
pub enum Decider<'a> {
    /// An API caller: the query must be theirs, and they must hold the approval's role.
    Caller(&'a Caller),
    /// An operator with the deployment's own credentials (the CLI), named for the record.
    Operator(&'a str),
}

/// A decision as sent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: String,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// A checked decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Approve or reject.
    pub verdict: Verdict,
    /// The person's note.
    pub note: String,
    /// Edited arguments to approve instead of the model's.
    pub arguments: Option<Value>,
}

fn invalid(field: &str, rule: impl Into<String>) -> IntakeError {
    IntakeError::Invalid(ValidationError { errors: vec![FieldError { field: field.into(), rule: rule.into() }] })
}

impl Decision {
    /// Read a decision body: `{"decision": "approve" | "reject", "note": "…", "arguments": {…}}`.
    pub fn parse(body: &[u8]) -> Result<Decision, IntakeError> {
        if body.len() > MAX_DECISION_BYTES {
            return Err(IntakeError::TooLarge { size: Some(body.len()), limit: MAX_DECISION_BYTES });
        }
        let parsed: DecisionBody = serde_json::from_slice(body).map_err(|e| {
            let message = e.to_string();
            match message.split('`').nth(1).filter(|_| message.starts_with("unknown field")) {
                Some(field) => invalid(field, "is not a field of a decision (decision, note, arguments)"),
                None if message.starts_with("missing field") => invalid("decision", "is required: approve or reject"),
                None => invalid("body", format!("a JSON object: {message}")),
            }
        })?;
        let verdict = match parsed.decision.as_str() {
            "approve" => Verdict::Approve,
            "reject" => Verdict::Reject,
            _ => return Err(invalid("decision", "must be `approve` or `reject`")),
        };
        let note = parsed.note.unwrap_or_default();
        if note.chars().count() > MAX_NOTE_CHARS {
            return Err(invalid("note", format!("at most {MAX_NOTE_CHARS} characters")));
        }
        if let Some(arguments) = &parsed.arguments {
            if !arguments.is_object() {
                return Err(invalid("arguments", "a JSON object: the tool's arguments"));
            }
            if verdict == Verdict::Reject {
                return Err(invalid("arguments", "only with `approve` (the arguments to approve instead)"));
            }
        }
        Ok(Decision { verdict, note, arguments: parsed.arguments })
    }
}

/// What a decision answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decided {
    /// The query.
    pub query_id: String,
    /// The tool whose call was decided.
    pub tool: String,
    /// `approve` or `reject`.
    pub decision: Verdict,
    /// When.
    pub decided_at: DateTime<Utc>,
    /// The query goes on: the dispatch is resumed through its tier's queue.
    pub status: &'static str,
}

/// Decide the query's waiting tool call (the first one, when several dispatches wait).
#[instrument(skip(deps, decider, decision), fields(query_id = %query_id))]
pub async fn decide(
    deps: &Deps,
    decider: Decider<'_>,
    query_id: &str,
    decision: &Decision,
) -> Result<Decided, IntakeError> {
    for _ in 0..DECISION_ATTEMPTS {
        let query = match decider {
            Decider::Caller(caller) => intake::owned_query(deps, caller, query_id).await?,
            Decider::Operator(_) => deps.store.get_query(query_id).await?.ok_or(IntakeError::NotFound)?,
        };
        let Some(at) = query.approvals.iter().position(Approval::is_pending) else {
            return Err(IntakeError::Conflict(match query.approvals.last().and_then(|a| a.decision.as_ref()) {
                Some(d) if d.verdict == Verdict::Expired => {
                    "the tool call's approval expired; it counts as rejected".to_string()
                }
                Some(d) => format!("the tool call was already decided ({})", d.verdict.as_str()),
                None => "no tool call of this query waits for a decision".to_string(),
            }));
        };
        let waiting = &query.approvals[at];
        let decided_by = match decider {
            Decider::Caller(caller) => {
                if !caller.roles.iter().any(|r| *r == waiting.role) {
                    return Err(IntakeError::RoleRequired {
                        what: "deciding this tool call",
                        roles: vec![waiting.role.clone()],
                    });
                }
                caller.user_id.clone()
            }
            Decider::Operator(name) => name.to_string(),
        };
        let now = deps.clock.now();
        if now >= waiting.expires_at {
            return Err(IntakeError::Conflict(format!(
                "the tool call's approval expired at {}; it counts as rejected",
                waiting.expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )));
        }
        let verdict = decision.verdict;
        let decided = ApprovalDecision {
            verdict,
            note: decision.note.clone(),
            arguments: decision.arguments.clone(),
            decided_by,
            decided_at: now,
        };
        match record(deps, &query, at, decided).await? {
            Some(approval) => {
                info!(tool = %approval.tool, verdict = verdict.as_str(), "tool call decided");
                resume(deps, query_id, &approval).await.map_err(|e| IntakeError::Unavailable(e.to_string()))?;
                return Ok(Decided {
                    query_id: query_id.to_string(),
                    tool: approval.tool,
                    decision: verdict,
                    decided_at: now,
                    status: "resumed",
                });
            }
            None => continue,
        }
    }
    Err(IntakeError::Unavailable("the query record kept changing while the decision was written".into()))
}

/// Write `decision` on approval `at` of `query` with the restarted deadline and the event;
/// `None` when a concurrent write moved the version first.
async fn record(
    deps: &Deps,
    query: &QueryRecord,
    at: usize,
    decision: ApprovalDecision,
) -> Result<Option<Approval>, StoreError> {
    let mut updated = query.clone();
    let now = deps.clock.now();
    let Some(approval) = updated.approvals.get_mut(at) else { return Ok(None) };
    let left = chrono::Duration::milliseconds(i64::try_from(approval.deadline_left_ms).unwrap_or(i64::MAX));
    let stage = updated.plan.as_ref().map(|p| p.current_stage).unwrap_or(0);
    let event = deps.event(
        query,
        Entry::ApprovalDecided,
        stage,
        &format!("{}-{:03}", approval.dispatch_id, approval.index),
        Detail::object()
            .field("decided_by", &decision.decided_by)
            .field("dispatch_id", &approval.dispatch_id)
            .field("edited", &decision.arguments.is_some())
            .field("index", &approval.index)
            .field("tool", &approval.tool)
            .field("verdict", &decision.verdict.as_str())
            .finish(),
    );
    approval.decision = Some(decision);
    let decided = approval.clone();
    // The deadline restarts with the time it had left when the call was asked for (another
    // waiting call keeps it paused: the deadline message skips a query with one).
    if updated.deadline_at.is_some() {
        updated.deadline_at = Some(now + left);
    }
    match deps.store.update_query(&updated, query.version, &[event]).await {
        Ok(()) => Ok(Some(decided)),
        Err(StoreError::ConditionFailed(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Send the decided call's attempt to its tier's queue and re-arm the query's deadline.
async fn resume(deps: &Deps, query_id: &str, approval: &Approval) -> Result<(), StepError> {
    if let Some(query) = deps.store.get_query_without_fan_in(query_id).await? {
        if let Some(deadline) = query.deadline_at.filter(|_| !query.approvals.iter().any(Approval::is_pending)) {
            arm_deadline(deps, query_id, deadline).await?;
        }
    }
    let job = Job::Dispatch {
        query_id: query_id.to_string(),
        dispatch_id: approval.dispatch_id.clone(),
        attempt: approval.attempt,
        timeout_ms: approval.timeout_ms,
    };
    deps.send(QueueId::tier(approval.tier), job, Duration::ZERO).await?;
    Ok(())
}

/// What a deadline message does to a query with tool calls under approval: `None` when the
/// approvals leave it to the ordinary deadline, `Some(result)` when this message was theirs.
///
/// - a call still waits: the deadline is paused; due calls expire (decided as rejected, the
///   dispatch resumed), and a call not yet due gets its expiry message armed again;
/// - the message is a decided call's expiry and its dispatch has no handoff: the resumption
///   is sent again, and the deadline re-armed.
pub async fn at_deadline(deps: &Deps, query: &QueryRecord, fire_at: DateTime<Utc>) -> Option<Result<(), StepError>> {
    if query.approvals.is_empty() {
        return None;
    }
    let now = deps.clock.now();
    if let Some(first) = query.approvals.iter().filter(|a| a.is_pending()).map(|a| a.expires_at).min() {
        return Some(expire_due(deps, query, now, first).await);
    }
    let decided = query.approvals.iter().find(|a| a.expires_at == fire_at)?;
    Some(
        async {
            if deps.store.get_handoff(&query.query_id, &decided.dispatch_id).await?.is_none() {
                warn!(query_id = %query.query_id, dispatch_id = %decided.dispatch_id, "a decided tool call's dispatch has no handoff at the approval's expiry; resuming it again");
                resume(deps, &query.query_id, decided).await?;
            }
            Ok(())
        }
        .await,
    )
}

async fn expire_due(
    deps: &Deps,
    query: &QueryRecord,
    now: DateTime<Utc>,
    first: DateTime<Utc>,
) -> Result<(), StepError> {
    if now < first {
        // Not due: the deadline stays paused, and the first expiry has its message.
        return arm_deadline(deps, &query.query_id, first).await;
    }
    let mut current = query.clone();
    for _ in 0..DECISION_ATTEMPTS {
        let Some(at) = current.approvals.iter().position(|a| a.is_pending() && a.expires_at <= now) else {
            // None due any more; a later one keeps the deadline paused.
            if let Some(next) = current.approvals.iter().filter(|a| a.is_pending()).map(|a| a.expires_at).min() {
                arm_deadline(deps, &current.query_id, next).await?;
            }
            return Ok(());
        };
        let decision = ApprovalDecision {
            verdict: Verdict::Expired,
            note: String::new(),
            arguments: None,
            decided_by: "deadline".into(),
            decided_at: now,
        };
        if let Some(approval) = record(deps, &current, at, decision).await? {
            info!(query_id = %current.query_id, tool = %approval.tool, "a tool call's approval expired; it counts as rejected");
            resume(deps, &current.query_id, &approval).await?;
        }
        current = match deps.store.get_query(&current.query_id).await? {
            Some(q) => q,
            None => return Ok(()),
        };
    }
    Err(StepError::Retryable("the query record kept changing while approvals expired".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(body: &str) -> (String, String) {
        match Decision::parse(body.as_bytes()) {
            Err(IntakeError::Invalid(v)) => (v.errors[0].field.clone(), v.errors[0].rule.clone()),
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn a_decision_names_the_field_and_the_rule_it_breaks() {
        let ok = Decision::parse(br#"{"decision": "approve", "note": "fine", "arguments": {"amount": 20}}"#);
        assert_eq!(
            ok.ok(),
            Some(Decision {
                verdict: Verdict::Approve,
                note: "fine".into(),
                arguments: Some(serde_json::json!({"amount": 20}))
            })
        );
        assert_eq!(rule(r#"{"decision": "maybe"}"#).0, "decision");
        assert_eq!(rule(r#"{"note": "x"}"#).0, "decision");
        assert_eq!(rule(r#"{"decision": "approve", "by": "me"}"#).0, "by");
        assert_eq!(rule(r#"{"decision": "approve", "arguments": [1]}"#).0, "arguments");
        assert_eq!(rule(r#"{"decision": "reject", "arguments": {}}"#).0, "arguments");
        assert_eq!(rule(&format!(r#"{{"decision": "reject", "note": "{}"}}"#, "x".repeat(2_001))).0, "note");
        assert_eq!(rule("not json").0, "body");
    }
}
