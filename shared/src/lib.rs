//! # Switchyard
//!
//! A serverless multi-agent orchestrator. A question arrives over HTTP; Switchyard classifies
//! its intent, reads in `routing.yaml` which agents answer it, on which tier, with which
//! timeouts, retries and fallbacks; runs them through queues; keeps every step in a table; and
//! merges the agents' handoffs into one cited, confidence-rated answer.
//!
//! This crate is the whole orchestrator as plain Rust. The Lambda functions in `functions/`
//! and the `switchyard` CLI are thin shells around it: they build adapters once and hand each
//! event to a function in [`engine`].
//!
//! # Layout
//!
//! - [`contracts`]: wire types, exactly the E2I design's fields.
//! - [`manifest`]: the `routing.yaml` schema, loading and validation.
//! - [`classify`]: embedded intent classifier and entity extractor.
//! - [`validation`]: intake validation of incoming queries (the E2I design's table).
//! - [`plan`]: route → plan → dispatches.
//! - [`scope`]: out-of-scope questions: the decision at intake and the reply that ends them.
//! - [`jobs`]: the pointer messages on the queues.
//! - [`ports`]: `Store`, `Queue`, `Clock`, `AgentRuntime`.
//! - [`adapters`]: in-memory (the embedded default), DynamoDB and SQS.
//! - [`agents`]: the agent kinds (`builtin`, `scripted`, `llm` with its model providers,
//!   `http`, `lambda`, `retriever`).
//! - [`retrieval`]: the embedded index, RRF, fallback order, rerank and reflection, as pure
//!   code.
//! - [`topology`]: the AWS resources a manifest needs (table, queues, env vars).
//! - [`engine`]: the steps — intake, route, run-agent, fan-in, synthesize, deadline — and the
//!   Lambda event handlers around them.
//! - [`jwt`]: verifying callers' JWTs in a function (the streaming events endpoint).
//! - [`telemetry`]: OpenTelemetry spans over OTLP and CloudWatch EMF metrics per agent call.
#![warn(missing_docs)]

pub mod adapters;
pub mod agents;
pub mod classify;
pub mod contracts;
pub mod engine;
pub mod jobs;
pub mod jwt;
pub mod limits;
pub mod manifest;
pub mod plan;
pub mod ports;
pub mod retrieval;
pub mod scope;
pub mod signals;
pub mod system;
pub mod telemetry;
pub mod topology;
pub mod validation;

#[doc(hidden)]
pub use async_trait::async_trait;
