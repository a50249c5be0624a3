//! Composition: the engine's dependencies built once per process, at the edge.
//!
//! The engine ([`crate::engine`]) sees only ports. This module is the one place that picks the
//! adapters behind them:
//!
//! - [`aws`]: DynamoDB and SQS, configured from the environment the SAM template sets — the
//!   Lambda mains, `switchyard ask|serve --backend aws` and the endpoint tests;
//! - [`embedded`]: the in-memory store and queues, the zero-setup default (`switchyard ask`,
//!   `serve`, most tests, the simulation);
//! - [`pollers`]: what feeds queues to the function handlers in one process, the way Lambda's
//!   SQS event source mapping does.

pub mod aws;
pub mod embedded;
pub mod pollers;

pub use aws::{manifest_from_env, tier_from_env, AwsSystem, StartupError};
pub use embedded::Embedded;
pub use pollers::{function_for, invoke, sqs_event, start, PollerConfig, Pollers};
