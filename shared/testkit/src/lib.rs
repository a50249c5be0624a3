//! # switchyard-testkit
//!
//! What the tests, the simulation harness and the benchmarks wrap around a real system: a
//! queue that duplicates and reorders messages, a store whose writes can be watched or delayed,
//! and an embedded system built on them.
//!
//! # Layout
//!
//! - [`faults`]: [`FaultyQueue`], duplicates and reordering with every choice seeded.
//! - [`hooked`]: [`HookedStore`], a store that reports (or delays) every write it applies.
#![warn(missing_docs)]

pub mod faults;
pub mod hooked;

pub use faults::{FaultyQueue, QueueFaults};
pub use hooked::{Applied, HookedStore, StoreHooks, StoreOp};

use std::sync::Arc;
use switchyard_engine::{Embedded, EngineSettings};
use switchyard_model::Manifest;

/// The embedded system for `manifest` with every agent kind, its queues wrapped in a
/// [`FaultyQueue`] (duplicates, reordering) and every random choice seeded.
pub fn embedded_with_faults(manifest: Arc<Manifest>, faults: QueueFaults, seed: u64) -> Embedded {
    let agents = Arc::new(switchyard_agents::Agents::new(&manifest));
    Embedded::with_queue(manifest, EngineSettings::default(), agents, |queue| {
        (Arc::new(FaultyQueue::new(queue, faults, seed)), Some(seed))
    })
}
