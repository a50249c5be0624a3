//! The records every layer shares: what the store keeps (queries, handoffs, events, signals),
//! the plan a query carries, and the queues a message travels on. Plain data with the rules
//! that belong to the data; the ports (`switchyard_engine::ports`) store and move them.

mod approval;
mod detail;
mod plan;
mod query;
mod queue;
mod scope;
mod signal;
mod tool_call;

pub use approval::{Approval, ApprovalDecision, ApprovalState, PendingApproval, Verdict};
pub use detail::{Detail, DetailWriter};
pub use plan::{ClassificationDecision, DispatchRole, Flow, Plan, PlannedDispatch, Stage};
pub use query::{
    Event, EventKind, HandoffRecord, HandoffWrite, QueryRecord, QueryStatus, SignalPage, SignalPageRequest,
};
pub use queue::{QueueId, QueueKind};
pub use scope::{ScopeCheck, ScopeDecision};
pub use signal::{
    sort_key, sort_key_time, Feedback, FieldError, SignalRecord, StoredSignal, MAX_COMMENT_CHARS, MAX_FEEDBACK_BYTES,
};
pub use tool_call::{ToolCallOutcome, ToolCallRecord, ToolCallStatus, ToolClaim};
