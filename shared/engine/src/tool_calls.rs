//! What a dispatch lends an agent that calls tools ([`ToolCalls`]): the caller's roles, the
//! conditional call records that make a write happen once, and the `tool_call` /
//! `tool_result` events in the query's log.

use super::deps::Deps;
use super::effects::Entry;
use crate::ports::{Detail, QueryRecord, StoreError, ToolCallOutcome, ToolCallRecord, ToolCalls, ToolClaim, ToolNote};
use async_trait::async_trait;

/// The [`ToolCalls`] of one dispatch's attempt, over the engine's store.
pub struct DispatchCalls<'a> {
    deps: &'a Deps,
    query: &'a QueryRecord,
    dispatch_id: &'a str,
    stage: usize,
}

impl std::fmt::Debug for DispatchCalls<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatchCalls").field("query_id", &self.query.query_id).finish_non_exhaustive()
    }
}

impl<'a> DispatchCalls<'a> {
    /// The calls of dispatch `dispatch_id` of `query`, logged in the query's current stage.
    pub fn new(deps: &'a Deps, query: &'a QueryRecord, dispatch_id: &'a str) -> DispatchCalls<'a> {
        let stage = query.plan.as_ref().map(|p| p.current_stage).unwrap_or(0);
        DispatchCalls { deps, query, dispatch_id, stage }
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

    async fn note(&self, attempt: u32, note: ToolNote) {
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
                (Entry::ToolCall, format!("{}-a{attempt}-{index:03}", self.dispatch_id), d.finish())
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
                (Entry::ToolResult, format!("{}-a{attempt}-{index:03}", self.dispatch_id), d.finish())
            }
        };
        let event = self.deps.event(self.query, entry, self.stage, &id, detail);
        if let Err(e) = self.deps.store.append_events(&[event]).await {
            tracing::warn!(query_id = %self.query.query_id, error = %e, "a tool event was not written");
        }
    }

    fn expires_at(&self) -> i64 {
        self.query.expires_at
    }
}
