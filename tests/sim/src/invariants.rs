//! What must hold after every run, whatever the faults. Each check returns its violations as
//! sentences that name the query by its submission number and intent (never its random id), so
//! a replayed seed prints the same words.

use crate::chaos::Observed;
use crate::reasons::Reasons;
use crate::tools::DeskLog;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::plan::handoffs::slot_handoff;
use switchyard_core::plan::DispatchRole;
use switchyard_engine::ports::{Event, EventKind, HandoffRecord, QueryRecord, QueryStatus, ToolCallRecord, Verdict};
use switchyard_model::contracts::{HandoffStatus, OrchestratorOutput};

/// Everything known about one accepted query at the end of a run.
#[derive(Debug)]
pub struct QueryFacts {
    /// Submission number.
    pub index: usize,
    /// Its intent.
    pub intent: String,
    /// Its record (`None`: lost).
    pub record: Option<QueryRecord>,
    /// Its output.
    pub output: Option<Arc<OrchestratorOutput>>,
    /// Its handoffs.
    pub handoffs: Vec<Arc<HandoffRecord>>,
    /// Its event log.
    pub events: Vec<Event>,
}

impl QueryFacts {
    fn name(&self) -> String {
        format!("query #{} ({})", self.index, self.intent)
    }

    fn agent_of(&self, dispatch_id: &str) -> String {
        self.record
            .as_ref()
            .and_then(|q| q.plan.as_ref())
            .and_then(|p| p.dispatch(dispatch_id))
            .map(|d| d.dispatch.target_agent.clone())
            .unwrap_or_else(|| "an unplanned dispatch".into())
    }
}

/// Check one accepted query. `slack` is the deadline slack plus the redelivery slack.
pub fn check_query(facts: &QueryFacts, observed: &Observed, slack: Duration, violations: &mut Vec<String>) {
    let name = facts.name();
    let Some(query) = &facts.record else {
        violations.push(format!("{name} was accepted but its record is gone"));
        return;
    };
    let id = &query.query_id;

    // Every accepted query is terminal, by its deadline plus slack.
    match (&facts.output, query.status) {
        (Some(output), QueryStatus::Done) => {
            if let Some(deadline) = query.deadline_at {
                let limit = deadline + chrono::Duration::from_std(slack).unwrap_or_else(|_| chrono::Duration::zero());
                if output.timestamp > limit {
                    violations.push(format!(
                        "{name} ended {} ms after its deadline, past the {} ms slack",
                        (output.timestamp - deadline).num_milliseconds(),
                        slack.as_millis()
                    ));
                }
            }
        }
        (output, status) => {
            violations.push(format!(
                "{name} is not terminal: status {status:?}, output {}",
                if output.is_some() { "present" } else { "missing" }
            ));
        }
    }

    // A person in the loop: no output while a tool call waits for its decision, or before
    // it was decided; a call rejected (or expired) never reaches its tool.
    if let Some(output) = &facts.output {
        for a in &query.approvals {
            match &a.decision {
                None => {
                    violations.push(format!("{name} has an output while its call of {} waits for a decision", a.tool))
                }
                Some(d) if d.decided_at > output.timestamp => {
                    violations.push(format!("{name}'s output was written before its call of {} was decided", a.tool))
                }
                Some(_) => {}
            }
        }
    }
    for a in query.approvals.iter().filter(|a| a.decision.as_ref().is_some_and(|d| d.verdict != Verdict::Approve)) {
        let made = facts.events.iter().filter(|e| e.kind == EventKind::ToolResult).any(|e| {
            e.detail["dispatch_id"].as_str() == Some(a.dispatch_id.as_str())
                && e.detail["tool"].as_str() == Some(a.tool.as_str())
                && e.detail["status"].as_str() == Some("ok")
        });
        if made {
            violations.push(format!("{name}: the call of {} was made although its approval was not given", a.tool));
        }
    }

    // Exactly one output.
    let written = observed.outputs.get(id).copied().unwrap_or(0);
    if written != 1 {
        violations.push(format!("{name} had its output written {written} times"));
    }

    // Every dispatch sent ends with exactly one handoff.
    let sent: Vec<&str> = observed.dispatches_sent.iter().filter(|(q, _)| q == id).map(|(_, d)| d.as_str()).collect();
    for dispatch in &sent {
        let recorded = observed.handoffs.get(&(id.clone(), dispatch.to_string())).copied().unwrap_or(0);
        let stored = facts.handoffs.iter().filter(|h| h.handoff.dispatch_id == *dispatch).count();
        if recorded != 1 || stored != 1 {
            violations.push(format!(
                "{name}: the dispatch to {} was sent but has {stored} stored handoffs ({recorded} writes)",
                facts.agent_of(dispatch)
            ));
        }
    }

    // The event log agrees with the records.
    let events_of = |kind: EventKind| facts.events.iter().filter(move |e| e.kind == kind);
    let handoff_events: BTreeSet<String> =
        events_of(EventKind::Handoff).filter_map(|e| e.detail["dispatch_id"].as_str().map(str::to_string)).collect();
    let handoff_records: BTreeSet<String> = facts.handoffs.iter().map(|h| h.handoff.dispatch_id.clone()).collect();
    if events_of(EventKind::Handoff).count() != facts.handoffs.len() || handoff_events != handoff_records {
        violations.push(format!(
            "{name}: {} handoff events for {} handoff records",
            events_of(EventKind::Handoff).count(),
            facts.handoffs.len()
        ));
    }
    let finals = events_of(EventKind::Final).count();
    if finals != usize::from(facts.output.is_some()) {
        violations.push(format!(
            "{name}: {finals} final events, output {}",
            if facts.output.is_some() { "present" } else { "missing" }
        ));
    }
    if let Some(plan) = &query.plan {
        let planned: BTreeSet<String> = plan
            .stages
            .iter()
            .take(plan.current_stage + 1)
            .flat_map(|s| s.dispatches.iter())
            .map(|d| d.dispatch.dispatch_id.clone())
            .collect();
        let dispatch_events: BTreeSet<String> = events_of(EventKind::Dispatch)
            .filter_map(|e| e.detail["dispatch_id"].as_str().map(str::to_string))
            .collect();
        if planned != dispatch_events {
            violations.push(format!(
                "{name}: {} dispatch events for {} planned dispatches",
                dispatch_events.len(),
                planned.len()
            ));
        }
        // Each stage's fan-in is completed by one handoff write: exactly one writer is told the
        // set became complete, also when a fan-in write was sent twice because its answer was
        // lost. (A slot filled twice — a dispatch and its fallback both answering — is the
        // documented exception: both may see it complete.)
        for (i, stage) in plan.stages.iter().enumerate().take(plan.current_stage + 1) {
            let slots: BTreeSet<&str> = stage.slots().collect();
            let filled_twice =
                slots.iter().any(|s| facts.handoffs.iter().filter(|h| h.slot.as_deref() == Some(*s)).count() > 1);
            let completions = observed
                .fan_in_answers
                .iter()
                .filter(|(q, slot, set)| q == id && slots.contains(slot.as_str()) && stage.is_complete(set))
                .count();
            if completions > 1 && !filled_twice {
                violations
                    .push(format!("{name}: stage {i}'s fan-in was reported complete to {completions} handoff writes"));
            }
        }
        for h in &facts.handoffs {
            if plan.dispatch(&h.handoff.dispatch_id).is_none() {
                violations.push(format!(
                    "{name}: a handoff from {} answers a dispatch that is not in the plan",
                    h.handoff.agent_id
                ));
            }
        }
        // The output accounts for every slot of the stages it ran: the fan-in completed, or
        // the deadline turned what was outstanding into timeouts, before the synthesis.
        if let Some(output) = &facts.output {
            for stage in plan.stages.iter().take(plan.current_stage + 1) {
                for d in stage.dispatches.iter().filter(|d| d.role != DispatchRole::Fallback) {
                    let filled = slot_handoff(&facts.handoffs, &d.slot);
                    let in_output = filled
                        .is_some_and(|h| output.agent_results.iter().any(|r| r.dispatch_id == h.handoff.dispatch_id));
                    if !in_output {
                        violations.push(format!(
                            "{name} was synthesized without an answer for {} (its slot was {} when the output was written)",
                            d.dispatch.target_agent,
                            if filled.is_some() { "filled later" } else { "never filled" }
                        ));
                    }
                }
            }
        }
    } else if facts.output.is_some() {
        violations.push(format!("{name} has an output but no plan"));
    }
}

/// Check the queues' leftovers: nothing outside the dead-letter queues, a logged reason for
/// every dead-lettered message, and every poison message dead-lettered.
pub fn check_messages(
    leftovers: &[(String, u64)],
    dead_letters: &[(String, String)],
    poison: &BTreeSet<String>,
    reasons: &Reasons,
    violations: &mut Vec<String>,
) {
    for (queue, n) in leftovers {
        violations.push(format!("{n} messages left on {queue}"));
    }
    let dead: BTreeSet<&str> = dead_letters.iter().map(|(_, id)| id.as_str()).collect();
    for (queue, id) in dead_letters {
        let kind = if poison.contains(id) { "a poison message" } else { "a healthy message" };
        if reasons.by_message.get(id).is_none_or(|r| r.is_empty()) {
            violations.push(format!("{kind} was dead-lettered on {queue} with no logged reason"));
        }
        if !reasons.dead_lettered.contains(id) {
            violations.push(format!("{kind} is on {queue} but its move there was not logged"));
        }
    }
    let missing = poison.iter().filter(|id| !dead.contains(id.as_str())).count();
    if missing > 0 {
        violations.push(format!("{missing} poison messages were not dead-lettered"));
    }
}

/// One accepted query of a session, as the session check needs it.
#[derive(Debug)]
pub struct TurnFacts {
    /// Submission number.
    pub index: usize,
    /// Its intent.
    pub intent: String,
    /// Its id.
    pub query_id: String,
    /// Whether its output was written.
    pub answered: bool,
}

/// Check one session after the run: every answered query is a turn exactly once, nothing else
/// is, and the turns are numbered 1, 2, … without gaps or repeats.
pub fn check_session(
    session: &str,
    record: Option<&switchyard_engine::ports::SessionRecord>,
    turns: &[TurnFacts],
    violations: &mut Vec<String>,
) {
    let answered: Vec<&TurnFacts> = turns.iter().filter(|t| t.answered).collect();
    let Some(record) = record else {
        if !answered.is_empty() {
            violations
                .push(format!("session {session} is missing though {} of its queries were answered", answered.len()));
        }
        return;
    };
    for t in &answered {
        let times = record.recorded.iter().filter(|id| **id == t.query_id).count();
        let raw = record.turns.iter().filter(|x| x.query_id == t.query_id).count();
        if times != 1 || raw > 1 {
            violations.push(format!(
                "query #{} ({}) is recorded {times} times in session {session} (raw turns: {raw})",
                t.index, t.intent
            ));
        }
    }
    for id in &record.recorded {
        if !answered.iter().any(|t| &t.query_id == id) {
            violations.push(format!("session {session} records a turn of a query that was never answered"));
        }
    }
    if record.turn_count != answered.len() as u64 {
        violations.push(format!(
            "session {session} counts {} turns for {} answered queries",
            record.turn_count,
            answered.len()
        ));
    }
    let seqs: Vec<u64> = record.turns.iter().map(|t| t.seq).collect();
    let expected: Vec<u64> = (record.turn_count + 1 - seqs.len() as u64..=record.turn_count).collect();
    if seqs != expected {
        violations.push(format!("session {session} numbers its turns {seqs:?}"));
    }
}

/// Check one query's tool calls against what the tool server saw: no write call made twice
/// for one logical call (one idempotency key), none made without a key or without a record
/// claimed first, none of a call whose approval was not given; and none lost: when the agent
/// answered, the event log has the result of each of its write calls — the recorded outcome,
/// or `unknown` for a record without one. (A dispatch given up on keeps the records of calls
/// its stopped runs made in the table.)
pub fn check_tools(facts: &QueryFacts, records: &[ToolCallRecord], desk: &DeskLog, violations: &mut Vec<String>) {
    let name = facts.name();
    let Some(plan) = facts.record.as_ref().and_then(|q| q.plan.as_ref()) else { return };
    let logged = |key: &str| {
        facts
            .events
            .iter()
            .any(|e| e.kind == EventKind::ToolResult && e.detail["idempotency_key"].as_str() == Some(key))
    };
    for (key, (tool, times)) in &desk.writes {
        let Some(dispatch) = plan
            .all_dispatches()
            .find(|d| key.strip_prefix(d.dispatch.dispatch_id.as_str()).is_some_and(|rest| rest.starts_with("-call-")))
        else {
            continue;
        };
        let dispatch_id = dispatch.dispatch.dispatch_id.as_str();
        let agent = &dispatch.dispatch.target_agent;
        let call = format!("{agent}'s {tool} call {}", key.rsplit('-').next().unwrap_or_default());
        if *times > 1 {
            violations.push(format!("{name}: {call} was made {times} times for one logical call"));
        }
        let answered = facts.handoffs.iter().any(|h| {
            h.handoff.dispatch_id == dispatch_id
                && matches!(h.handoff.execution.status, HandoffStatus::Success | HandoffStatus::Partial)
        });
        match records.iter().find(|r| r.idempotency_key == *key) {
            None => violations.push(format!("{name}: {call} was made without a record claimed first")),
            Some(r) if answered && !logged(key) => violations.push(format!(
                "{name}: {agent} answered, but the event log has no result for {call} (its outcome {})",
                if r.outcome.is_some() { "is recorded" } else { "is unknown" }
            )),
            Some(_) => {}
        }
        let refused = facts.record.iter().flat_map(|q| q.approvals.iter()).any(|a| {
            a.dispatch_id == dispatch_id
                && format!("{}.{tool}", crate::tools::SOURCE) == a.tool
                && a.decision.as_ref().is_some_and(|d| d.verdict != Verdict::Approve)
        });
        if refused {
            violations.push(format!("{name}: {call} was made although its approval was not given"));
        }
    }
}
