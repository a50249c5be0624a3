//! Ports: the small traits the engine talks through.
//!
//! [`Store`] is the source of truth (DynamoDB on AWS, [`crate::memory`] embedded),
//! [`Queue`] carries pointer messages between the steps (SQS, or in-memory queues with the same
//! semantics), [`Clock`] tells the time (virtual in tests and simulations) and
//! [`AgentRuntime`] runs an agent.
//!
//! The store is domain-shaped rather than a generic key-value API: each method is one atomic,
//! conditional write (a single DynamoDB request, a transaction where two items change together),
//! and each takes the event-log entries that the write causes, so the log and the records never
//! disagree and a duplicate delivery that loses its condition writes no event either.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
pub use switchyard_core::context::SessionRecord;
use switchyard_model::contracts::{AgentDispatch, HandoffResult, HandoffStatus, OrchestratorOutput};
use switchyard_model::manifest::Agent;
pub use switchyard_model::records::{Approval, ApprovalDecision, ApprovalState, PendingApproval, Verdict};
pub use switchyard_model::records::{
    Detail, DetailWriter, Event, EventKind, HandoffRecord, HandoffWrite, QueryRecord, QueryStatus, QueueId, QueueKind,
    SignalPage, SignalPageRequest, ToolCallOutcome, ToolCallRecord, ToolCallStatus, ToolClaim,
};

/// `metadata.model_used` of a handoff a tier's fallback template wrote.
pub const TEMPLATE_MODEL: &str = "template";

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A condition did not hold (record exists, version moved on, status changed). Not an
    /// outage: the caller re-reads and decides.
    #[error("condition failed: {0}")]
    ConditionFailed(String),
    /// The item would exceed the store's size limit.
    #[error("item too large: {0}")]
    TooLarge(String),
    /// The store could not be reached or refused the request; a retry may help.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A record could not be decoded (corrupt or written by an incompatible version).
    #[error("corrupt record: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether retrying the same call can help.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }
}

impl QueueError {
    /// Whether the same send or delete can succeed later (only when the queue is unavailable).
    pub fn is_retryable(&self) -> bool {
        matches!(self, QueueError::Unavailable { .. })
    }
}

/// The source of truth for queries, handoffs, outputs and the event log.
#[async_trait]
pub trait Store: Send + Sync {
    /// Create the query record (condition: no record with this id) with its first events.
    /// `ConditionFailed` when it exists. With an idempotency key, also claims the key for
    /// `(user_id, key)`; `ConditionFailed` when another query holds it.
    async fn create_query(&self, query: &QueryRecord, events: &[Event]) -> Result<(), StoreError>;

    /// Read the query record (strongly consistent). Expired records read as `None`.
    async fn get_query(&self, query_id: &str) -> Result<Option<QueryRecord>, StoreError>;

    /// The query record as [`Store::get_query`] reads it, shared (`Arc`) and without its fan-in
    /// set (`completed` is empty): for a step that reads the record and never its fan-in set
    /// (the agent worker), so a store that keeps its records shared lends one instead of
    /// copying it. The default reads [`Store::get_query`] and empties the set.
    async fn get_query_without_fan_in(&self, query_id: &str) -> Result<Option<Arc<QueryRecord>>, StoreError> {
        Ok(self.get_query(query_id).await?.map(|mut query| {
            query.completed.clear();
            Arc::new(query)
        }))
    }

    /// The caller's most recent live queries, newest first (by `accepted_at`), at most `limit`.
    /// Read from a per-user index, which on DynamoDB is eventually consistent: a query created
    /// a moment ago may be missing for that moment.
    async fn list_user_queries(&self, user_id: &str, limit: usize) -> Result<Vec<QueryRecord>, StoreError>;

    /// The query that holds `(user_id, key)`, if any.
    async fn find_idempotency_key(&self, user_id: &str, key: &str) -> Result<Option<String>, StoreError>;

    /// Replace every field of the query record except `completed`, on condition that the stored
    /// `version` equals `expected_version`; the stored version becomes `expected_version + 1`
    /// (whatever `query.version` says). Appends `events` atomically.
    async fn update_query(
        &self,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError>;

    /// Store a handoff (condition: none exists for its dispatch) and, when it fills a slot,
    /// add the slot to the query's fan-in set — atomically, with `events`. `Duplicate` when a
    /// handoff for the dispatch exists (nothing written). A handoff is written once and never
    /// changed, so it is handed over and read back shared (`Arc`): a store that keeps records
    /// in memory keeps this one instead of copying it, and lends it to every reader.
    async fn record_handoff(&self, record: Arc<HandoffRecord>, events: &[Event]) -> Result<HandoffWrite, StoreError>;

    /// One handoff.
    async fn get_handoff(&self, query_id: &str, dispatch_id: &str) -> Result<Option<Arc<HandoffRecord>>, StoreError>;

    /// All handoffs of a query.
    async fn list_handoffs(&self, query_id: &str) -> Result<Vec<Arc<HandoffRecord>>, StoreError>;

    /// Write the output (condition: none exists) and the final query record (condition:
    /// version), atomically, with `events`. `ConditionFailed` when either condition fails.
    /// The output is written once, so it is shared like a handoff.
    async fn finish_query(
        &self,
        output: Arc<OrchestratorOutput>,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError>;

    /// The output, once written.
    async fn get_output(&self, query_id: &str) -> Result<Option<Arc<OrchestratorOutput>>, StoreError>;

    /// Append events whose write is not tied to a record change (retries). Idempotent by key.
    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError>;

    /// The event log, ordered by `(at, key)`.
    async fn list_events(&self, query_id: &str) -> Result<Vec<Event>, StoreError>;

    /// Keep a manifest under its [`switchyard_model::manifest::Manifest::fingerprint`] (`body` is its
    /// canonical JSON), so queries started on it can finish on it after a new manifest is
    /// deployed. Idempotent: a manifest already stored under the fingerprint is left as it is.
    /// Not subject to the records' TTL (a manifest is small and outlives its queries).
    async fn put_manifest(&self, fingerprint: &str, body: &str) -> Result<(), StoreError>;

    /// The manifest stored under a fingerprint (its canonical JSON).
    async fn get_manifest(&self, fingerprint: &str) -> Result<Option<String>, StoreError>;

    /// The caller's session (strongly consistent). Sessions are keyed by `(user_id,
    /// session_id)`: another caller's session with the same id is another record. Expired
    /// sessions read as `None`.
    async fn get_session(&self, user_id: &str, session_id: &str) -> Result<Option<SessionRecord>, StoreError>;

    /// Write the session on condition that the stored version equals `expected_version` (0:
    /// no live session); the stored version becomes `expected_version + 1` (whatever
    /// `session.version` says). `ConditionFailed` when another turn wrote first.
    async fn put_session(&self, session: &SessionRecord, expected_version: u64) -> Result<(), StoreError>;

    /// Finished training signals (their query is done) recorded between `oldest` and `newest`,
    /// newest first (ties by query id, descending), at most `limit`. Read from an index on
    /// DynamoDB (eventually consistent: a query finished a moment ago may be missing for that
    /// moment), never a scan. A malformed cursor is `Corrupt`.
    async fn list_signals(&self, request: &SignalPageRequest) -> Result<SignalPage, StoreError>;

    /// Claim write call `record.index` of `record.dispatch_id` before it is made (condition:
    /// no record of that call). `Recorded` with the stored record when another delivery
    /// claimed it first. A store that keeps no call records refuses (the agent then makes no
    /// write call at all rather than risk making one twice).
    async fn claim_tool_call(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError> {
        let _ = record;
        Err(StoreError::Unavailable { message: "this store keeps no tool-call records".into(), source: None })
    }

    /// Add the outcome to a claimed call (condition: the record exists and has none).
    async fn finish_tool_call(
        &self,
        query_id: &str,
        dispatch_id: &str,
        index: u32,
        outcome: &ToolCallOutcome,
    ) -> Result<(), StoreError> {
        let _ = (query_id, dispatch_id, index, outcome);
        Err(StoreError::Unavailable { message: "this store keeps no tool-call records".into(), source: None })
    }
}

// ------------------------------------------------------------------------------------------
// Queues
// ------------------------------------------------------------------------------------------

/// Message attribute carrying the query's correlation id.
pub const ATTR_CORRELATION_ID: &str = "correlation_id";
/// Message attribute carrying the trace context (W3C `traceparent`).
pub const ATTR_TRACEPARENT: &str = "traceparent";

/// A message to send.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingMessage {
    /// JSON body (a [`switchyard_model::jobs::JobMessage`]).
    pub body: String,
    /// Invisible until this much time has passed (SQS: whole seconds, at most 900 s).
    pub delay: Duration,
    /// String attributes (correlation id, trace context).
    pub attributes: BTreeMap<String, String>,
}

impl OutgoingMessage {
    /// Size SQS counts for a message: the body, and each attribute's name, type and value.
    /// Both queue adapters refuse a message over [`switchyard_model::limits::SQS_MAX_MESSAGE_BYTES`].
    pub fn size(&self) -> usize {
        self.body.len() + self.attributes.iter().map(|(k, v)| k.len() + "String".len() + v.len()).sum::<usize>()
    }
}

/// A received message.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedMessage {
    /// Queue-assigned id.
    pub message_id: String,
    /// Handle for delete / visibility changes.
    pub receipt_handle: String,
    /// Body as sent.
    pub body: String,
    /// How many times it has been received, this time included.
    pub receive_count: u32,
    /// String attributes as sent.
    pub attributes: BTreeMap<String, String>,
}

/// Depth of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueDepth {
    /// Ready to receive.
    pub visible: u64,
    /// Received and not yet deleted.
    pub in_flight: u64,
    /// Waiting out a delay.
    pub delayed: u64,
}

impl QueueDepth {
    /// Messages of any state.
    pub fn total(&self) -> u64 {
        self.visible + self.in_flight + self.delayed
    }
}

/// Why a queue call failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The message is larger than the queue accepts.
    #[error("message too large: {0} bytes")]
    TooLarge(usize),
    /// The receipt handle is unknown or stale.
    #[error("invalid receipt handle")]
    InvalidReceipt,
    /// The queue could not be reached; a retry may help.
    #[error("queue unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

/// At-least-once queues with delays, visibility timeouts, receive counts and dead-letter queues.
#[async_trait]
pub trait Queue: Send + Sync {
    /// Send a message; returns its id.
    async fn send(&self, queue: QueueId, message: OutgoingMessage) -> Result<String, QueueError>;

    /// Send several messages to one queue; their ids, in order. SQS sends up to ten in one
    /// request (`SendMessageBatch`); the default sends them one by one. On an error some of
    /// the messages may have been sent (the caller re-sends; receivers are idempotent).
    async fn send_batch(&self, queue: QueueId, messages: Vec<OutgoingMessage>) -> Result<Vec<String>, QueueError> {
        let mut ids = Vec::with_capacity(messages.len());
        for message in messages {
            ids.push(self.send(queue, message).await?);
        }
        Ok(ids)
    }

    /// Receive up to `max` (1–10) messages, waiting up to `wait` for the first. Received
    /// messages are invisible for the queue's visibility timeout; a message received more
    /// than the queue's max receives moves to its dead-letter queue instead.
    async fn receive(&self, queue: QueueId, max: usize, wait: Duration) -> Result<Vec<ReceivedMessage>, QueueError>;

    /// Delete (acknowledge) a received message.
    async fn delete(&self, queue: QueueId, receipt_handle: &str) -> Result<(), QueueError>;

    /// Make a received message visible again after `timeout` (0 = now).
    async fn change_visibility(
        &self,
        queue: QueueId,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), QueueError>;

    /// How many messages are where.
    async fn depth(&self, queue: QueueId) -> Result<QueueDepth, QueueError>;
}

// ------------------------------------------------------------------------------------------
// Clock
// ------------------------------------------------------------------------------------------

/// Wall-clock time for records and events. Durations and sleeps use `tokio::time`, which tests
/// pause and advance; [`TokioClock`] keeps both on the same (possibly virtual) time line.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// Wall-clock time derived from `tokio::time::Instant`: real in production, virtual when a test
/// pauses tokio's clock.
#[derive(Debug, Clone)]
pub struct TokioClock {
    base_wall: DateTime<Utc>,
    base_instant: tokio::time::Instant,
}

impl TokioClock {
    /// A clock that reads the system time now and follows tokio's clock from here.
    pub fn new() -> TokioClock {
        TokioClock::starting_at(Utc::now())
    }

    /// A clock that starts at `wall` (for reproducible simulations).
    pub fn starting_at(wall: DateTime<Utc>) -> TokioClock {
        TokioClock { base_wall: wall, base_instant: tokio::time::Instant::now() }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    /// The start plus tokio's elapsed time, to the nanosecond.
    fn now(&self) -> DateTime<Utc> {
        self.wall_at(tokio::time::Instant::now().saturating_duration_since(self.base_instant))
    }
}

impl TokioClock {
    /// The wall time `elapsed` after the start (the start itself past chrono's range).
    fn wall_at(&self, elapsed: Duration) -> DateTime<Utc> {
        chrono::Duration::from_std(elapsed)
            .ok()
            .and_then(|d| self.base_wall.checked_add_signed(d))
            .unwrap_or(self.base_wall)
    }
}

// ------------------------------------------------------------------------------------------
// Agents
// ------------------------------------------------------------------------------------------

/// What an agent said, before the engine validates it into a handoff.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentReply {
    /// A JSON answer: either a full seed-000 handoff, or a `result`-shaped object
    /// (`primary_output`, `confidence`, `evidence`, `caveats`, optional `status`).
    Answer(Value),
    /// Text that should have been JSON (the engine turns it into a failed handoff with the raw
    /// text in its error).
    Malformed(String),
    /// A `result`-shaped answer built as typed values (the builtin agents'): validated like
    /// the same fields in an [`AgentReply::Answer`], without a round trip through JSON.
    Typed(Box<TypedAnswer>),
    /// No answer yet: a tool call waits for a person's decision (stored on the query). The
    /// attempt ends without a handoff; the decision resumes the dispatch.
    AwaitingApproval,
}

/// The fields of a `result`-shaped answer, typed ([`AgentReply::Typed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TypedAnswer {
    /// The handoff status the agent reports.
    pub status: HandoffStatus,
    /// Output, confidence, evidence, caveats.
    pub result: HandoffResult,
    /// `metadata.model_used`.
    pub model_used: String,
}

impl TypedAnswer {
    /// The same answer as the JSON object an [`AgentReply::Answer`] would carry.
    pub fn to_value(&self) -> Value {
        let mut answer = serde_json::to_value(&self.result).unwrap_or_default();
        if let Value::Object(map) = &mut answer {
            map.insert("status".into(), serde_json::to_value(self.status).unwrap_or_default());
            map.insert("model_used".into(), Value::String(self.model_used.clone()));
        }
        answer
    }
}

impl AgentReply {
    /// The answer as JSON (`None` for a malformed one): what readers that look into the
    /// answer's fields (`primary_output.response`, …) read, whichever form it came in.
    pub fn into_value(self) -> Option<Value> {
        match self {
            AgentReply::Answer(v) => Some(v),
            AgentReply::Typed(a) => Some(a.to_value()),
            AgentReply::Malformed(_) | AgentReply::AwaitingApproval => None,
        }
    }
}

/// Why an agent did not answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AgentError {
    /// What went wrong.
    pub message: String,
    /// Whether another attempt may succeed.
    pub recoverable: bool,
}

/// Where a streaming agent sends its answer's text as it arrives: pieces in order, whose
/// concatenation is the answer's text. Dropping the sink ends the stream.
#[derive(Debug, Clone)]
pub struct TokenSink {
    tx: tokio::sync::mpsc::UnboundedSender<String>,
}

impl TokenSink {
    /// A sink and the receiver its pieces arrive on.
    pub fn channel() -> (TokenSink, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (TokenSink { tx }, rx)
    }

    /// Send one piece (empty pieces are dropped; a receiver that is gone is ignored: the
    /// answer still completes).
    pub fn send(&self, piece: &str) {
        if !piece.is_empty() {
            let _ = self.tx.send(piece.to_string());
        }
    }
}

/// One step of a tool call, for the query's event log.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolNote {
    /// The model asked for a call.
    Call {
        /// Position of the call in the attempt, from 0.
        index: u32,
        /// The tool's manifest name.
        tool: String,
        /// SHA-256 of the arguments' canonical JSON.
        digest: String,
        /// The arguments with sensitive fields masked (`None`: not shown).
        arguments: Option<Value>,
    },
    /// The call ended.
    Result {
        /// Position of the call in the attempt.
        index: u32,
        /// The tool's manifest name.
        tool: String,
        /// How it ended.
        status: ToolCallStatus,
        /// Time spent in the call.
        latency_ms: u64,
        /// Bytes of the result handed to the model.
        size: usize,
        /// Whether the result was cut to the source's limit.
        truncated: bool,
        /// Whether a recorded result was given back instead of calling again.
        replayed: bool,
        /// The idempotency key sent (write calls).
        idempotency_key: Option<String>,
    },
}

/// What an agent that calls tools is lent by the dispatch it runs for: the caller's roles,
/// the call records that make a write happen once, and the event log.
#[async_trait]
pub trait ToolCalls: Send + Sync {
    /// The roles of the caller whose query this is.
    fn caller_roles(&self) -> &[String];

    /// Claim a write call before it is made ([`Store::claim_tool_call`]).
    async fn claim(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError>;

    /// Record a write call's outcome ([`Store::finish_tool_call`]).
    async fn finish(&self, dispatch_id: &str, index: u32, outcome: &ToolCallOutcome) -> Result<(), StoreError>;

    /// Append a `tool_call` or `tool_result` event. An error means the event is not in the
    /// log: the tool loop goes on without a lost `tool_call`, and ends the attempt without a
    /// lost `tool_result` of a write call (a later attempt replays the recorded outcome and
    /// logs it), so an answer never rests on a write the log does not show.
    async fn note(&self, attempt: u32, note: ToolNote) -> Result<(), StoreError>;

    /// The TTL of records written for this query.
    fn expires_at(&self) -> i64;

    /// The engine's time, which call records are stamped with (virtual in the simulation).
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
    }

    /// The state of the dispatch's call `ask.index` among those that need approval: asked for
    /// now (stored on the query, the deadline paused, an `approval_requested` event) when it
    /// was not asked yet, then [`ApprovalState::Pending`] until a person decides. `None`: no
    /// approval can be asked for here (the call is not made).
    async fn approval(&self, ask: &ApprovalAsk) -> Result<Option<ApprovalState>, StoreError> {
        let _ = ask;
        Ok(None)
    }
}

/// A tool call that needs a person's approval, as the tool loop asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAsk {
    /// Position among the dispatch's calls that need approval, from 0.
    pub index: u32,
    /// The tool's manifest name.
    pub tool: String,
    /// The model's arguments.
    pub arguments: Value,
    /// The role a person needs to decide.
    pub role: String,
    /// How long the call waits before it counts as rejected.
    pub timeout: std::time::Duration,
}

/// What the engine lends one run of an agent beyond the dispatch.
#[derive(Clone, Copy)]
pub struct RunContext<'a> {
    /// Where a streamed answer's text goes.
    pub tokens: Option<&'a TokenSink>,
    /// Tool calls' records and events (agents with `llm.tools`).
    pub tools: Option<&'a dyn ToolCalls>,
}

impl std::fmt::Debug for RunContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("tokens", &self.tokens.is_some())
            .field("tools", &self.tools.is_some())
            .finish()
    }
}

/// Runs agents. The engine applies the timeout, retries and fallbacks around it.
#[async_trait]
pub trait AgentRuntime: Send + Sync {
    /// Run `agent` on `dispatch`; `attempt` starts at 1.
    async fn run(&self, agent: &Agent, dispatch: &AgentDispatch, attempt: u32) -> Result<AgentReply, AgentError>;

    /// Run `agent`, sending its answer's text to `tokens` as it arrives (agents whose
    /// settings name a streamed field). A runtime that cannot stream answers as [`Self::run`]
    /// and sends nothing.
    async fn run_streaming(
        &self,
        agent: &Agent,
        dispatch: &AgentDispatch,
        attempt: u32,
        tokens: &TokenSink,
    ) -> Result<AgentReply, AgentError> {
        let _ = tokens;
        self.run(agent, dispatch, attempt).await
    }

    /// Run `agent` with what the engine lends it ([`RunContext`]): an agent with tools calls
    /// them through `context.tools`. A runtime without tools answers as
    /// [`Self::run_streaming`] or [`Self::run`].
    async fn run_with(
        &self,
        agent: &Agent,
        dispatch: &AgentDispatch,
        attempt: u32,
        context: RunContext<'_>,
    ) -> Result<AgentReply, AgentError> {
        match context.tokens {
            Some(tokens) => self.run_streaming(agent, dispatch, attempt, tokens).await,
            None => self.run(agent, dispatch, attempt).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tokio_clock_reads_its_start_plus_the_elapsed_time_to_the_nanosecond() {
        // GIVEN clocks started just before a second boundary, before the epoch and at it
        for (secs, nanos) in [(1_700_000_000, 999_999_999), (-86_401, 500_000_000), (0, 0)] {
            let Some(start) = DateTime::from_timestamp(secs, nanos) else { panic!("a valid start") };
            let clock = TokioClock::starting_at(start);
            // WHEN the elapsed time carries into the seconds and the days
            for elapsed in [
                Duration::ZERO,
                Duration::from_nanos(1),
                Duration::from_millis(1_500),
                Duration::new(86_400, 999_999_999),
            ] {
                // THEN the clock reads exactly what adding a chrono duration gives
                let expected = start + chrono::Duration::from_std(elapsed).unwrap_or_default();
                assert_eq!(clock.wall_at(elapsed), expected);
            }
        }
    }
}
