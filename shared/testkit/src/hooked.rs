//! A [`Store`] that forwards every call to another store and lets a [`StoreHooks`] look at each
//! call before and after it: the one delegating wrapper behind the test observers, the
//! benchmark's finish signal and the simulation's fault-injecting store.
//!
//! A hook can refuse a call before it reaches the inner store (an injected outage), act on the
//! inner store first (a concurrent writer), observe what was applied, or turn an applied write
//! into an error (an ambiguous answer). Whatever it does, the inner store's contract is kept:
//! a call the hook refuses was not applied.

use async_trait::async_trait;
use std::sync::Arc;
use switchyard_engine::ports::{
    Event, HandoffRecord, HandoffWrite, QueryRecord, SessionRecord, SignalPage, SignalPageRequest, Store, StoreError,
    ToolCallOutcome, ToolCallRecord, ToolClaim,
};
use switchyard_model::contracts::OrchestratorOutput;

/// One store call, with what a hook may want to see of its arguments.
#[derive(Debug, Clone, Copy)]
pub enum StoreOp<'a> {
    /// [`Store::create_query`].
    CreateQuery(&'a QueryRecord),
    /// [`Store::get_query`] or [`Store::get_query_without_fan_in`].
    GetQuery(&'a str),
    /// [`Store::list_user_queries`].
    ListUserQueries(&'a str),
    /// [`Store::find_idempotency_key`].
    FindIdempotencyKey,
    /// [`Store::update_query`].
    UpdateQuery(&'a QueryRecord),
    /// [`Store::record_handoff`].
    RecordHandoff(&'a HandoffRecord),
    /// [`Store::get_handoff`].
    GetHandoff(&'a str),
    /// [`Store::list_handoffs`].
    ListHandoffs(&'a str),
    /// [`Store::finish_query`].
    FinishQuery(&'a OrchestratorOutput, &'a QueryRecord),
    /// [`Store::get_output`].
    GetOutput(&'a str),
    /// [`Store::append_events`].
    AppendEvents(&'a [Event]),
    /// [`Store::list_events`].
    ListEvents(&'a str),
    /// [`Store::put_manifest`].
    PutManifest,
    /// [`Store::get_manifest`].
    GetManifest,
    /// [`Store::get_session`] (the session id).
    GetSession(&'a str),
    /// [`Store::put_session`].
    PutSession(&'a SessionRecord),
    /// [`Store::list_signals`].
    ListSignals,
    /// [`Store::claim_tool_call`].
    ClaimToolCall(&'a ToolCallRecord),
    /// [`Store::finish_tool_call`] (the query id).
    FinishToolCall(&'a str),
}

impl StoreOp<'_> {
    /// The method's name (`update_query`), for traces.
    pub fn name(&self) -> &'static str {
        match self {
            StoreOp::CreateQuery(_) => "create_query",
            StoreOp::GetQuery(_) => "get_query",
            StoreOp::ListUserQueries(_) => "list_user_queries",
            StoreOp::FindIdempotencyKey => "find_idempotency_key",
            StoreOp::UpdateQuery(_) => "update_query",
            StoreOp::RecordHandoff(_) => "record_handoff",
            StoreOp::GetHandoff(_) => "get_handoff",
            StoreOp::ListHandoffs(_) => "list_handoffs",
            StoreOp::FinishQuery(..) => "finish_query",
            StoreOp::GetOutput(_) => "get_output",
            StoreOp::AppendEvents(_) => "append_events",
            StoreOp::ListEvents(_) => "list_events",
            StoreOp::PutManifest => "put_manifest",
            StoreOp::GetManifest => "get_manifest",
            StoreOp::GetSession(_) => "get_session",
            StoreOp::PutSession(_) => "put_session",
            StoreOp::ListSignals => "list_signals",
            StoreOp::ClaimToolCall(_) => "claim_tool_call",
            StoreOp::FinishToolCall(_) => "finish_tool_call",
        }
    }

    /// Whether the call writes.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            StoreOp::CreateQuery(_)
                | StoreOp::UpdateQuery(_)
                | StoreOp::RecordHandoff(_)
                | StoreOp::FinishQuery(..)
                | StoreOp::AppendEvents(_)
                | StoreOp::PutManifest
                | StoreOp::PutSession(_)
                | StoreOp::ClaimToolCall(_)
                | StoreOp::FinishToolCall(_)
        )
    }
}

/// What the inner store did with a call that succeeded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Applied<'a> {
    /// A read answered.
    Read,
    /// A write was applied.
    Written,
    /// A handoff write: recorded or a duplicate.
    Handoff(&'a HandoffWrite),
}

/// What a [`HookedStore`] calls around each call. Every method has a default that does
/// nothing, so a hook names only what it cares about.
#[async_trait]
pub trait StoreHooks: Send + Sync {
    /// Before the call reaches `inner`: an error here is the call's answer, and the call is
    /// not made.
    async fn before(&self, _inner: &dyn Store, _op: StoreOp<'_>) -> Result<(), StoreError> {
        Ok(())
    }

    /// After `inner` answered: `Ok` with what it applied, or its error. An error returned here
    /// replaces a successful answer (the call stays applied).
    fn after(&self, _op: StoreOp<'_>, _outcome: Result<Applied<'_>, &StoreError>) -> Result<(), StoreError> {
        Ok(())
    }
}

/// A store that forwards to `inner` with `hooks` around every call.
pub struct HookedStore<H> {
    inner: Arc<dyn Store>,
    hooks: H,
}

impl<H> std::fmt::Debug for HookedStore<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookedStore").finish_non_exhaustive()
    }
}

impl<H: StoreHooks> HookedStore<H> {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn Store>, hooks: H) -> HookedStore<H> {
        HookedStore { inner, hooks }
    }

    /// The hooks, to read what they observed.
    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn settle<T, F>(&self, op: StoreOp<'_>, result: Result<T, StoreError>, applied: F) -> Result<T, StoreError>
    where
        F: for<'v> FnOnce(&'v T) -> Applied<'v>,
    {
        match &result {
            Ok(value) => self.hooks.after(op, Ok(applied(value)))?,
            Err(e) => self.hooks.after(op, Err(e))?,
        }
        result
    }
}

#[async_trait]
impl<H: StoreHooks> Store for HookedStore<H> {
    async fn create_query(&self, query: &QueryRecord, events: &[Event]) -> Result<(), StoreError> {
        let op = StoreOp::CreateQuery(query);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.create_query(query, events).await;
        self.settle(op, r, |_| Applied::Written)
    }

    async fn get_query(&self, query_id: &str) -> Result<Option<QueryRecord>, StoreError> {
        let op = StoreOp::GetQuery(query_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.get_query(query_id).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn get_query_without_fan_in(&self, query_id: &str) -> Result<Option<Arc<QueryRecord>>, StoreError> {
        // The hooks see it as the read it is.
        let op = StoreOp::GetQuery(query_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.get_query_without_fan_in(query_id).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn list_user_queries(&self, user_id: &str, limit: usize) -> Result<Vec<QueryRecord>, StoreError> {
        let op = StoreOp::ListUserQueries(user_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.list_user_queries(user_id, limit).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn find_idempotency_key(&self, user_id: &str, key: &str) -> Result<Option<String>, StoreError> {
        let op = StoreOp::FindIdempotencyKey;
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.find_idempotency_key(user_id, key).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn update_query(
        &self,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        let op = StoreOp::UpdateQuery(query);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.update_query(query, expected_version, events).await;
        self.settle(op, r, |_| Applied::Written)
    }

    async fn record_handoff(&self, record: Arc<HandoffRecord>, events: &[Event]) -> Result<HandoffWrite, StoreError> {
        let op = StoreOp::RecordHandoff(&record);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.record_handoff(Arc::clone(&record), events).await;
        self.settle(op, r, |w| Applied::Handoff(w))
    }

    async fn get_handoff(&self, query_id: &str, dispatch_id: &str) -> Result<Option<Arc<HandoffRecord>>, StoreError> {
        let op = StoreOp::GetHandoff(query_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.get_handoff(query_id, dispatch_id).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn list_handoffs(&self, query_id: &str) -> Result<Vec<Arc<HandoffRecord>>, StoreError> {
        let op = StoreOp::ListHandoffs(query_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.list_handoffs(query_id).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn finish_query(
        &self,
        output: Arc<OrchestratorOutput>,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        let op = StoreOp::FinishQuery(&output, query);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.finish_query(Arc::clone(&output), query, expected_version, events).await;
        self.settle(op, r, |_| Applied::Written)
    }

    async fn get_output(&self, query_id: &str) -> Result<Option<Arc<OrchestratorOutput>>, StoreError> {
        let op = StoreOp::GetOutput(query_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.get_output(query_id).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError> {
        let op = StoreOp::AppendEvents(events);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.append_events(events).await;
        self.settle(op, r, |_| Applied::Written)
    }

    async fn list_events(&self, query_id: &str) -> Result<Vec<Event>, StoreError> {
        let op = StoreOp::ListEvents(query_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.list_events(query_id).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn put_manifest(&self, fingerprint: &str, body: &str) -> Result<(), StoreError> {
        let op = StoreOp::PutManifest;
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.put_manifest(fingerprint, body).await;
        self.settle(op, r, |_| Applied::Written)
    }

    async fn get_manifest(&self, fingerprint: &str) -> Result<Option<String>, StoreError> {
        let op = StoreOp::GetManifest;
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.get_manifest(fingerprint).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn get_session(&self, user_id: &str, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let op = StoreOp::GetSession(session_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.get_session(user_id, session_id).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn put_session(&self, session: &SessionRecord, expected_version: u64) -> Result<(), StoreError> {
        let op = StoreOp::PutSession(session);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.put_session(session, expected_version).await;
        self.settle(op, r, |_| Applied::Written)
    }

    async fn list_signals(&self, request: &SignalPageRequest) -> Result<SignalPage, StoreError> {
        let op = StoreOp::ListSignals;
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.list_signals(request).await;
        self.settle(op, r, |_| Applied::Read)
    }

    async fn claim_tool_call(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError> {
        let op = StoreOp::ClaimToolCall(record);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.claim_tool_call(record).await;
        self.settle(op, r, |_| Applied::Written)
    }

    async fn finish_tool_call(
        &self,
        query_id: &str,
        dispatch_id: &str,
        index: u32,
        outcome: &ToolCallOutcome,
    ) -> Result<(), StoreError> {
        let op = StoreOp::FinishToolCall(query_id);
        self.hooks.before(self.inner.as_ref(), op).await?;
        let r = self.inner.finish_tool_call(query_id, dispatch_id, index, outcome).await;
        self.settle(op, r, |_| Applied::Written)
    }
}
