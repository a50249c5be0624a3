//! # switchyard-model
//!
//! The bottom layer of Switchyard: the data every other crate speaks. Nothing here does I/O
//! beyond reading a manifest file, and nothing imports another Switchyard crate.
//!
//! # Layout
//!
//! - [`contracts`]: the wire types (query in, dispatches, handoffs, the answer out).
//! - [`manifest`]: `routing.yaml`'s schema, loading and validation.
//! - [`records`]: what the store keeps (queries, handoffs, events, signals), the plan a query
//!   carries, and the queues a message travels on.
//! - [`jobs`]: the pointer messages on the queues.
//! - [`limits`]: the service limits every layer checks against (one place each).
//! - [`topology`]: the AWS resources a manifest needs (table, queues, environment).
#![warn(missing_docs)]

pub mod contracts;
pub mod jobs;
pub mod limits;
pub mod manifest;
pub mod records;
pub mod topology;

pub use manifest::{Manifest, ManifestError};
pub use records::{Event, EventKind, HandoffRecord, Plan, QueryRecord, QueryStatus, QueueId};
pub use topology::Topology;
