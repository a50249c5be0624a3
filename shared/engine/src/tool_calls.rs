//! What a dispatch lends an agent that calls tools ([`ToolCalls`]): the caller's roles, the
//! conditional call records that make a write happen once, the calls that wait for a person
//! (stored on the query), and the `tool_call` / `tool_result` events in the query's log.

use super::deps::Deps;
use super::effects::{arm_deadline, Entry};
use crate::ports::{
    Approval, ApprovalAsk, ApprovalState, Detail, QueryRecord, QueryStatus, StoreError, ToolCallOutcome,
    ToolCallRecord, ToolCalls, ToolClaim, ToolNote,
};
use async_trait::async_trait;
use std::time::Duration;
use switchyard_model::contracts::AgentDispatch;

/// Times a call under approval re-reads the query after a concurrent write moved its version.
const ASK_ATTEMPTS: usize = 8;

/// Times a tool event is appended before the error is handed back (the store's transient
/// failures are brief; the tool loop decides what a lost event means).
const NOTE_ATTEMPTS: u32 = 3;

/// The [`ToolCalls`] of one dispatch's attempt, over the engine's store.
pub struct DispatchCalls<'a> {
    deps: &'a Deps,
    query: &'a QueryRecord,
    dispatch_id: &'a str,
    tier: u8,
    attempt: u32,
    timeout: Duration,
    stage: usize,
    /// How many of this dispatch's waiting calls were decided before this run: a resumed run
    /// writes its events under their own ids.
    resumption: usize,
}

impl std::fmt::Debug for DispatchCalls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatchCalls").field("query_id", &self.query.query_id).finish_non_exhaustive()
    }
}

impl<'a> DispatchCalls<'a> {
    /// The calls of attempt `attempt` (timeout `timeout`) of `dispatch` of `query`, logged in
    /// the query's current stage.
    pub fn new(
        deps: &'a Deps,
        query: &'a QueryRecord,
        dispatch: &'a AgentDispatch,
        attempt: u32,
        timeout: Duration,
    ) -> DispatchCalls<'a> {
        let stage = query.plan.as_ref().map(|p| p.current_stage).unwrap_or(0);
        let resumption =
            query.approvals.iter().filter(|a| a.dispatch_id == dispatch.dispatch_id && !a.is_pending()).count();
        DispatchCalls {
            deps,
            query,
            dispatch_id: &dispatch.dispatch_id,
            tier: dispatch.target_tier,
            attempt,
            timeout,
            stage,
            resumption,
        }
    }

    /// An event id of this run: `<dispatch>-a<attempt>[-r<resumption>]-<index>`.
    fn event_id(&self, attempt: u32, index: u32) -> String {
        match self.resumption {
            0 => format!("{}-a{attempt}-{index:03}", self.dispatch_id),
            r => format!("{}-a{attempt}-r{r}-{index:03}", self.dispatch_id),
        }
    }
}

#[async_trait]
impl ToolCalls for DispatchCalls<'_> {
    fn caller_roles(&self) -> &[String] {
        &self.query.roles
    }

    async fn claim(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError> {
        self.deps.store.claim_tool_call(record).await
    }

    async fn finish(&self, dispatch_id: &str, index: u32, outcome: &ToolCallOutcome) -> Result<(), StoreError> {
        self.deps.store.finish_tool_call(&self.query.query_id, dispatch_id, index, outcome).await
    }

    async fn note(&self, attempt: u32, note: ToolNote) -> Result<(), StoreError> {
        // Detail fields are written in key order.
        let (entry, id, detail) = match &note {
            ToolNote::Call { index, tool, digest, arguments } => {
                let mut d = Detail::object();
                if let Some(arguments) = arguments {
                    d = d.field("arguments", arguments);
                }
                let d = d
                    .field("arguments_digest", digest)
                    .field("attempt", &attempt)
                    .field("dispatch_id", self.dispatch_id)
                    .field("index", index)
                    .field("tool", tool);
                (Entry::ToolCall, self.event_id(attempt, *index), d.finish())
            }
            ToolNote::Result { index, tool, status, latency_ms, size, truncated, replayed, idempotency_key } => {
                let mut d = Detail::object().field("attempt", &attempt).field("dispatch_id", self.dispatch_id);
                if let Some(key) = idempotency_key {
                    d = d.field("idempotency_key", key);
                }
                let d = d
                    .field("index", index)
                    .field("latency_ms", latency_ms)
                    .field("replayed", replayed)
                    .field("size", size)
                    .field("status", &status.as_str())
                    .field("tool", tool)
                    .field("truncated", truncated);
                (Entry::ToolResult, self.event_id(attempt, *index), d.finish())
            }
        };
        let event = self.deps.event(self.query, entry, self.stage, &id, detail);
        // Appending an event is idempotent (keyed by its id), so an ambiguous failure is tried
        // again like any other.
        let mut tries = 0;
        loop {
            tries += 1;
            match self.deps.store.append_events(std::slice::from_ref(&event)).await {
                Ok(()) => return Ok(()),
                Err(e) if tries < NOTE_ATTEMPTS && e.is_retryable() => continue,
                Err(e) => {
                    tracing::warn!(query_id = %self.query.query_id, error = %e, "a tool event was not written");
                    return Err(e);
                }
            }
        }
    }

    fn expires_at(&self) -> i64 {
        self.query.expires_at
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.deps.clock.now()
    }

    async fn approval(&self, ask: &ApprovalAsk) -> Result<Option<ApprovalState>, StoreError> {
        for _ in 0..ASK_ATTEMPTS {
            let Some(query) = self.deps.store.get_query_without_fan_in(&self.query.query_id).await? else {
                return Err(StoreError::ConditionFailed(format!("query {} is gone", self.query.query_id)));
            };
            // Only a dispatch of the plan can be resumed by its tier's queue.
            let Some(plan) = query.plan.as_ref().filter(|p| p.dispatch(self.dispatch_id).is_some()) else {
                return Ok(None);
            };
            // A duplicate delivery running while another gave up: no person is asked.
            if plan.all_dispatches().any(|d| d.fallback_for.as_deref() == Some(self.dispatch_id)) {
                return Ok(Some(ApprovalState::Rejected("not asked: the dispatch was handed to its fallback".into())));
            }
            if let Some(asked) =
                query.approvals.iter().find(|a| a.dispatch_id == self.dispatch_id && a.index == ask.index)
            {
                return Ok(Some(ApprovalState::of(asked)));
            }
            if query.status != QueryStatus::Routed {
                return Ok(Some(ApprovalState::Rejected("not asked: the query is already being answered".into())));
            }
            let now = self.deps.clock.now();
            let expires_at = now + chrono::Duration::milliseconds(ask.timeout.as_millis().min(i64::MAX as u128) as i64);
            let deadline_left_ms =
                query.deadline_at.map(|d| (d - now).num_milliseconds().max(0) as u64).unwrap_or_default();
            let approval = Approval {
                dispatch_id: self.dispatch_id.to_string(),
                index: ask.index,
                tool: ask.tool.clone(),
                arguments: ask.arguments.clone(),
                role: ask.role.clone(),
                requested_at: now,
                expires_at,
                deadline_left_ms,
                attempt: self.attempt,
                timeout_ms: self.timeout.as_millis() as u64,
                tier: self.tier,
                decision: None,
            };
            let event = self.deps.event(
                &query,
                Entry::ApprovalRequested,
                self.stage,
                &format!("{}-{:03}", self.dispatch_id, ask.index),
                Detail::object()
                    .field("dispatch_id", self.dispatch_id)
                    .field("expires_at", &expires_at)
                    .field("index", &ask.index)
                    .field("role", &ask.role)
                    .field("tool", &ask.tool)
                    .finish(),
            );
            let mut updated = QueryRecord::clone(&query);
            updated.approvals.push(approval);
            match self.deps.store.update_query(&updated, query.version, &[event]).await {
                Ok(()) => {
                    tracing::info!(query_id = %query.query_id, tool = %ask.tool, %expires_at, "a tool call waits for a person");
                    // The expiry: this message finds the call undecided and rejects it. Lost, the
                    // query's own deadline message re-arms it (the deadline is paused meanwhile).
                    if let Err(e) = arm_deadline(self.deps, &query.query_id, expires_at).await {
                        tracing::warn!(query_id = %query.query_id, error = %e, "the approval's expiry was not armed; the paused deadline arms it");
                    }
                    return Ok(Some(ApprovalState::Pending));
                }
                Err(StoreError::ConditionFailed(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::ConditionFailed("the query record kept changing while a tool call asked for approval".into()))
    }
}
