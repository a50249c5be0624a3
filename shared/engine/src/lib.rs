//! # switchyard-engine
//!
//! The steps of a query's life, the Lambda event handlers around them, and the ports they talk
//! through. This crate names no AWS SDK and no agent kind: the DynamoDB and SQS adapters live in
//! `switchyard-aws`, the agent runtime in `switchyard-agents`, and both are handed in.
//!
//! ```text
//! intake ──► route queue ──► router ──► tier-N queue ──► worker ──► synth queue ──► synthesizer
//!                              └──── deadline (delayed, chained) ─────────────────►┘
//! ```
//!
//! Each step takes its dependencies ([`Deps`]) first and the event second, reads the truth from
//! the [`crate::ports::Store`], writes with a condition so a duplicate delivery changes nothing, and sends
//! pointer messages ([`switchyard_model::jobs`]). The same functions run in Lambda, under the local pollers
//! of `switchyard serve` / `ask`, and in the simulation harness.
//!
//! - [`intake`]: validate, classify, check the caller's role, record, enqueue the route job.
//! - [`router`]: plan from the manifest, record the dispatches, send them, arm the deadline.
//! - [`worker`]: run one attempt under the tier timeout; retry with backoff; fall back; record
//!   the handoff; fan in; advance pipelines through their QC gates.
//! - [`synth`]: claim, merge the handoffs into the output with its confidence band
//!   (docs/routing.md#confidence-bands), write it once; the deadline that ends every query.
//! - [`stream`]: a streamed answer's text written to the log as batched `token` events.
//! - [`advance`]: move a query on when a stage completes — the next pipeline stage, the next
//!   step of an orchestration mode (what that step is, is decided by the pure
//!   [`switchyard_core::plan::modes`]), or the synthesis.
//! - [`conversation`]: record a finished query as its session's next turn, once.
//! - [`learning`]: feedback on a finished query, pages and exports of the training signals the
//!   router and synthesizer record, and the optimization requests they raise.
//! - [`listing`]: the caller's recent queries and the manifest's routing table, for people.
//! - [`handlers`]: API Gateway HTTP API and SQS events in, responses and batch failures out.
//! - [`live`]: the routes answered with a streamed response (the live events endpoint, streamed
//!   chat completions), for `switchyard serve` and the `events-stream` function; [`follow`]
//!   follows a query's log for them.
//! - [`approval`]: the decision on a tool call that waits for a person, its expiry, and the
//!   resumption of the dispatch that asked ([`tool_calls`] stores the waiting call).
//! - [`chat`]: the OpenAI-compatible chat completions API: messages as the session, one query
//!   per turn, the answer as `chat.completion` or `chat.completion.chunk` events.
//!
//! The modules form a tree, so no step depends on another in a loop:
//!
//! ```text
//! handlers ─► intake, router, worker, synth, learning, chat ─► intake
//! live ─► handlers, intake, follow, chat ─► follow
//!             worker, synth ─► advance, stream
//!             synth ─► conversation
//!             intake, router, worker, synth, advance ─► effects ─► deps
//! ```
//!
//! [`effects`] holds what every step does beyond its own record (event-log entries with their
//! ranks, sends, deadlines, the retry on a version conflict); `deps` holds [`Deps`] and
//! [`StepError`]. The engine knows the ports only: the adapters behind them are chosen at the
//! edge ([`Embedded`] here, `switchyard_aws::AwsSystem` on AWS).
//!
//! Around the steps:
//!
//! - [`ports`]: `Store`, `Queue`, `Clock`, `AgentRuntime`, and their errors.
//! - [`memory`]: the in-memory store and queues (the embedded default); [`fanin`]: the fan-in
//!   as an ordered log of arrivals, shared by every store.
//! - [`embedded`]: the whole system in one process; [`pollers`]: what feeds queues to the
//!   handlers in one process, the way Lambda's SQS event source mapping does.
//! - [`telemetry`]: tracing set-up, trace context, OTLP spans and EMF metrics.
//! - [`http_client`]: the one pooled HTTP client (agents, OTLP export).
//! - [`jwt`]: verifying callers' JWTs (the streaming events endpoint).

#![warn(missing_docs)]

pub mod advance;
pub mod approval;
pub mod chat;
pub mod conversation;
mod deps;
pub mod effects;
pub mod follow;
pub mod handlers;
pub mod intake;
pub mod learning;
pub mod listing;
pub mod live;
pub mod reflection;
pub mod router;
pub mod stream;
pub mod synth;
pub mod tool_calls;
pub mod worker;

pub mod embedded;
pub mod fanin;
pub mod http_client;
pub mod jwt;
pub mod memory;
pub mod pollers;
pub mod ports;
pub mod telemetry;

pub use embedded::Embedded;

pub use deps::{Deps, EngineSettings, StepError};
pub use telemetry::trace::{parent_span_id, trace_id, traceparent};
