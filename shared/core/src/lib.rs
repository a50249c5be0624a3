//! # switchyard-core
//!
//! Switchyard's decisions as pure code: which intent a question has, what a conversation
//! already said, which passages answer it, which agents run in which stages, and what the
//! router learns from traffic. No port, no clock, no AWS SDK: everything here is unit-tested
//! on its own, and the engine calls it.
//!
//! # Layout
//!
//! - [`classify`]: the embedded intent classifier, entity extractor and follow-up reader.
//! - [`router`]: the manifest's trained router: what it learns from, its artifact and whether
//!   that is current.
//! - [`context`]: conversations: the session record and the context pipeline (history view,
//!   rolling summary, salience notes, token budgets).
//! - [`retrieval`]: the embedded index, RRF, fallback order, rerank and reflection.
//! - [`plan`]: route → plan → dispatches, and the orchestration modes.
//! - [`signals`]: routing training signals: export, feedback, re-fit of `routing.yaml`.
//! - [`scope`]: out-of-scope questions: the decision at intake and the reply that ends them.
//! - [`slots`]: required entities: what is missing, the question asking for it, the turn that
//!   supplies it.
//! - [`admission`]: intake's checks on an incoming query (the E2I design's validation table).
#![warn(missing_docs)]

pub mod admission;
pub mod classify;
pub mod context;
pub mod plan;
pub mod retrieval;
pub mod router;
pub mod scope;
pub mod signals;
pub mod slots;

pub use classify::Classifier;
