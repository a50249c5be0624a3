//! What the steps do beyond their own record, written once for all of them: event-log entries
//! in order, dispatches sent, deadlines armed, the synthesis requested, and the re-read-and-retry
//! loop of a write that lost its version condition.
//!
//! Every step module ([`super::intake`], [`super::router`], [`super::worker`], [`super::synth`],
//! [`super::advance`]) builds on this one; none of them imports another step, except that the
//! worker and the synthesizer both move a query on through [`super::advance`].

use super::deps::{Deps, StepError};
use crate::ports::{Detail, Event, EventKind, QueryRecord, QueueId, StoreError};
use chrono::{DateTime, Utc};
use std::future::Future;
use std::time::Duration;
use switchyard_core::plan::Plan;
use switchyard_model::contracts::AgentDispatch;
use switchyard_model::jobs::Job;
use switchyard_model::limits::SQS_MAX_DELAY_S;

/// Stage number of events after the last stage (deadline, synthesis, final).
const END_STAGE: usize = 99;

/// How often a step re-reads the query record after losing its version condition to a
/// concurrent writer before it gives the message back to its queue.
const CONFLICT_RETRIES: usize = 8;

/// An entry of the event log. Each owns its kind, its name and its rank within a stage, so
/// that entries written in the same millisecond still list in the order they happen: the log
/// key is `<stage>-<rank>-<name>[-<id>]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Intake accepted the query.
    Accepted,
    /// The conversation context was assembled.
    Context,
    /// The intent was decided.
    Route,
    /// The plan was written.
    Plan,
    /// A dispatch of a stage was sent.
    Dispatch,
    /// An agent asked for a tool call.
    ToolCall,
    /// A tool call ended.
    ToolResult,
    /// A tool call waits for a person.
    ApprovalRequested,
    /// A waiting tool call was decided (or expired).
    ApprovalDecided,
    /// A batch of an agent's streamed answer.
    Token,
    /// An attempt failed and the next one is scheduled.
    Retry,
    /// Retries are exhausted; the fallback takes over.
    Fallback,
    /// The fallback's dispatch was sent.
    FallbackDispatch,
    /// A handoff was recorded (or a dispatch timed out at a deadline).
    Handoff,
    /// A pipeline step's QC gate was checked.
    Gate,
    /// A stage's own time budget ran out.
    Budget,
    /// A step of an orchestration mode decided something (`kind` and `name` say what).
    Step {
        /// The event kind the step reports as.
        kind: EventKind,
        /// The step's name in the log key.
        name: &'static str,
    },
    /// A background dispatch (never waited for) was sent.
    BackgroundDispatch,
    /// The query's deadline fired.
    Deadline,
    /// A batch of the synthesis agent's streamed answer (after every stage, before the
    /// output).
    AnswerToken,
    /// The output was built.
    Synthesis,
    /// The query ended.
    Final,
}

impl Entry {
    /// Rank within a stage: lower lists first.
    pub fn rank(self) -> u8 {
        match self {
            Entry::Accepted => 10,
            Entry::Context => 15,
            Entry::Route => 20,
            Entry::Plan => 30,
            Entry::Dispatch => 40,
            Entry::ToolCall => 42,
            Entry::ToolResult => 43,
            Entry::ApprovalRequested => 44,
            Entry::ApprovalDecided => 46,
            Entry::Token => 45,
            Entry::Retry => 50,
            Entry::Fallback => 55,
            Entry::FallbackDispatch => 56,
            Entry::Handoff => 60,
            Entry::Gate => 65,
            Entry::Budget => 68,
            Entry::Step { .. } | Entry::Deadline => 70,
            Entry::BackgroundDispatch => 75,
            Entry::AnswerToken => 78,
            Entry::Synthesis => 80,
            Entry::Final => 90,
        }
    }

    /// The event kind readers see.
    pub fn kind(self) -> EventKind {
        match self {
            Entry::Accepted => EventKind::Accepted,
            Entry::Context => EventKind::Context,
            Entry::Route => EventKind::Route,
            Entry::Plan => EventKind::Plan,
            Entry::Dispatch | Entry::FallbackDispatch | Entry::BackgroundDispatch => EventKind::Dispatch,
            Entry::ToolCall => EventKind::ToolCall,
            Entry::ToolResult => EventKind::ToolResult,
            Entry::ApprovalRequested => EventKind::ApprovalRequested,
            Entry::ApprovalDecided => EventKind::ApprovalDecided,
            Entry::Retry => EventKind::Retry,
            Entry::Fallback => EventKind::Fallback,
            Entry::Handoff => EventKind::Handoff,
            Entry::Gate => EventKind::Gate,
            Entry::Budget | Entry::Deadline => EventKind::Deadline,
            Entry::Step { kind, .. } => kind,
            Entry::Token | Entry::AnswerToken => EventKind::Token,
            Entry::Synthesis => EventKind::Synthesis,
            Entry::Final => EventKind::Final,
        }
    }

    /// The name in the log key.
    pub fn name(self) -> &'static str {
        match self {
            Entry::Accepted => "accepted",
            Entry::Context => "context",
            Entry::Route => "route",
            Entry::Plan => "plan",
            Entry::Dispatch | Entry::FallbackDispatch | Entry::BackgroundDispatch => "dispatch",
            Entry::ToolCall => "tool_call",
            Entry::ToolResult => "tool_result",
            Entry::ApprovalRequested => "approval_requested",
            Entry::ApprovalDecided => "approval_decided",
            Entry::Retry => "retry",
            Entry::Fallback => "fallback",
            Entry::Handoff => "handoff",
            Entry::Gate => "gate",
            Entry::Budget => "budget",
            Entry::Step { name, .. } => name,
            Entry::Deadline => "deadline",
            Entry::Token | Entry::AnswerToken => "token",
            Entry::Synthesis => "synthesis",
            Entry::Final => "final",
        }
    }

    /// Whether the entry lists after every stage (the end of the query).
    fn at_the_end(self) -> bool {
        matches!(self, Entry::Deadline | Entry::AnswerToken | Entry::Synthesis | Entry::Final)
    }

    /// The log key of this entry in `stage` for `id` (empty: none).
    pub fn key(self, stage: usize, id: &str) -> String {
        let stage = if self.at_the_end() { END_STAGE } else { stage };
        let (rank, name) = (self.rank(), self.name());
        // `{stage:02}-{rank:02}-{name}[-{id}]`, written without the formatting machinery
        // (one key per event, several events per step).
        let mut key = String::with_capacity(8 + name.len() + id.len());
        push_two_digits(&mut key, stage);
        key.push('-');
        push_two_digits(&mut key, usize::from(rank));
        key.push('-');
        key.push_str(name);
        if !id.is_empty() {
            key.push('-');
            key.push_str(id);
        }
        key
    }
}

/// `n` as `{n:02}` does: at least two digits, zero-padded.
fn push_two_digits(out: &mut String, n: usize) {
    if n < 100 {
        out.push(char::from(b'0' + (n / 10) as u8));
        out.push(char::from(b'0' + (n % 10) as u8));
    } else {
        out.push_str(&n.to_string());
    }
}

impl Deps {
    /// An event-log entry for `query`.
    pub(super) fn event(
        &self,
        query: &QueryRecord,
        entry: Entry,
        stage: usize,
        id: &str,
        detail: impl Into<Detail>,
    ) -> Event {
        Event {
            query_id: query.query_id.clone(),
            key: entry.key(stage, id),
            at: self.clock.now(),
            kind: entry.kind(),
            detail: std::sync::Arc::new(detail.into()),
            expires_at: query.expires_at,
        }
    }
}

/// What one try of a conditional write came to.
#[derive(Debug)]
pub(super) enum Attempt<T> {
    /// The step is done, with this result.
    Done(T),
    /// Another writer changed the record first: re-read and try again.
    Conflict,
}

/// Run `step` until it is done, re-running it when its write loses the version condition, at
/// most [`CONFLICT_RETRIES`] times; then the message goes back to its queue (`doing` names
/// what the step was doing, for the log).
///
/// `step` is a closure returning a fresh future each time (`|| async move { … }`, capturing
/// references only), so the futures stay `Send` for the Lambda runtime and the pollers.
pub(super) async fn retry_on_conflict<T, F, Fut>(doing: &str, mut step: F) -> Result<T, StepError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>, StepError>>,
{
    for _ in 0..CONFLICT_RETRIES {
        if let Attempt::Done(result) = step().await? {
            return Ok(result);
        }
    }
    Err(StepError::Retryable(format!("query record kept changing while {doing}")))
}

/// A conditional write's result: `true` when written, `false` when its condition failed.
pub(super) fn written(result: Result<(), StoreError>) -> Result<bool, StepError> {
    match result {
        Ok(()) => Ok(true),
        Err(StoreError::ConditionFailed(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Dispatch events for a stage about to be sent.
pub(super) fn dispatch_events(deps: &Deps, query: &QueryRecord, plan: &Plan, stage: usize) -> Vec<Event> {
    plan.stages
        .get(stage)
        .map(|s| {
            s.dispatches
                .iter()
                .map(|d| {
                    deps.event(
                        query,
                        Entry::Dispatch,
                        stage,
                        &d.dispatch.dispatch_id,
                        Detail::object()
                            .field("agent", &d.dispatch.target_agent)
                            .field("dispatch_id", &d.dispatch.dispatch_id)
                            .field("priority", &d.dispatch.routing.priority)
                            .field("role", &d.role)
                            .field("tier", &d.dispatch.target_tier)
                            .field("timeout_ms", &d.dispatch.routing.timeout_ms)
                            .finish(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Send every dispatch of a stage to its tier's queue (first attempt): one batch per tier.
pub(super) async fn send_stage(deps: &Deps, query: &QueryRecord, stage: usize) -> Result<(), StepError> {
    let Some(stage) = query.plan.as_ref().and_then(|p| p.stages.get(stage)) else { return Ok(()) };
    let mut by_tier: std::collections::BTreeMap<u8, Vec<Job>> = std::collections::BTreeMap::new();
    for d in &stage.dispatches {
        by_tier.entry(d.dispatch.target_tier).or_default().push(first_attempt(&d.dispatch));
    }
    for (tier, jobs) in by_tier {
        deps.send_batch(QueueId::tier(tier), jobs).await?;
    }
    Ok(())
}

/// Attempt 1 of a dispatch.
fn first_attempt(d: &AgentDispatch) -> Job {
    Job::Dispatch {
        query_id: d.query_id.clone(),
        dispatch_id: d.dispatch_id.clone(),
        attempt: 1,
        timeout_ms: d.routing.timeout_ms,
    }
}

/// Send attempt 1 of a dispatch.
pub(super) async fn send_first_attempt(deps: &Deps, d: &AgentDispatch) -> Result<(), StepError> {
    deps.send(QueueId::tier(d.target_tier), first_attempt(d), Duration::ZERO).await?;
    Ok(())
}

/// Send the deadline message: delayed until `fire_at`, or by SQS's 15-minute maximum and then
/// re-sent by the synthesizer until it is due.
pub(super) async fn arm_deadline(deps: &Deps, query_id: &str, fire_at: DateTime<Utc>) -> Result<(), StepError> {
    let remaining = (fire_at - deps.clock.now()).to_std().unwrap_or(Duration::ZERO);
    let delay = remaining.min(Duration::from_secs(SQS_MAX_DELAY_S));
    let job = Job::Deadline { query_id: query_id.to_string(), fire_at };
    deps.send(QueueId::synth(), job, delay).await?;
    Ok(())
}

/// Ask the synthesizer to answer the query.
pub(super) async fn request_synthesis(deps: &Deps, query_id: &str) -> Result<(), StepError> {
    deps.send(QueueId::synth(), Job::Synthesize { query_id: query_id.to_string() }, Duration::ZERO).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_list_in_the_order_a_stage_happens_and_the_end_after_every_stage() {
        let order = [
            Entry::Dispatch,
            Entry::ToolCall,
            Entry::ToolResult,
            Entry::ApprovalRequested,
            Entry::Token,
            Entry::ApprovalDecided,
            Entry::Retry,
            Entry::Fallback,
            Entry::FallbackDispatch,
            Entry::Handoff,
            Entry::Gate,
            Entry::Budget,
            Entry::Step { kind: EventKind::Step, name: "evaluation" },
            Entry::BackgroundDispatch,
        ];
        let keys: Vec<String> = order.iter().map(|e| e.key(3, "")).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert!(Entry::Deadline.key(3, "") > Entry::BackgroundDispatch.key(98, "x"));
        assert!(Entry::Synthesis.key(0, "") < Entry::Final.key(0, ""));
        assert!(Entry::Deadline.key(0, "") < Entry::AnswerToken.key(0, "x"));
        assert!(Entry::AnswerToken.key(0, "synthesis-v3-00009") < Entry::Synthesis.key(0, ""));
        assert_eq!(Entry::Handoff.key(2, "d-1"), "02-60-handoff-d-1");
        assert_eq!(Entry::Final.key(0, ""), "99-90-final");
    }

    #[test]
    fn keys_are_written_as_the_zero_padded_format_writes_them() {
        for stage in [0, 7, 10, 98, 100, 1234] {
            let rank = Entry::Handoff.rank();
            assert_eq!(Entry::Handoff.key(stage, "d-1"), format!("{stage:02}-{rank:02}-handoff-d-1"));
            assert_eq!(Entry::Gate.key(stage, ""), format!("{stage:02}-{:02}-gate", Entry::Gate.rank()));
        }
    }
}
