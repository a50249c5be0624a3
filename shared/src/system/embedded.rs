//! The zero-setup default: the whole system in one process, on the in-memory adapters.

use super::pollers::{start, PollerConfig, Pollers};
use crate::adapters::faults::{FaultyQueue, QueueFaults};
use crate::adapters::memory::{MemoryQueue, MemoryStore};
use crate::agents::Agents;
use crate::engine::{Deps, EngineSettings};
use crate::manifest::Manifest;
use crate::ports::{AgentRuntime, Clock, Queue, TokioClock};
use crate::topology::Topology;
use std::sync::Arc;

/// The whole system in one process on the in-memory adapters: the zero-setup default.
#[derive(Debug)]
pub struct Embedded {
    /// Dependencies handed to every step.
    pub deps: Arc<Deps>,
    /// The store, for inspection.
    pub store: Arc<MemoryStore>,
    /// The queues, for inspection.
    pub queue: Arc<MemoryQueue>,
    /// The manifest's queues.
    pub topology: Topology,
}

impl Embedded {
    /// Build the embedded system for `manifest` with every agent kind ([`Agents`]).
    pub fn new(manifest: Arc<Manifest>, settings: EngineSettings) -> Embedded {
        let agents = Arc::new(Agents::new(&manifest));
        Embedded::with_agents(manifest, settings, agents)
    }

    /// Build it with another agent runtime.
    pub fn with_agents(manifest: Arc<Manifest>, settings: EngineSettings, agents: Arc<dyn AgentRuntime>) -> Embedded {
        Embedded::build(manifest, settings, agents, None)
    }

    /// Build it with the queues wrapped in a [`FaultyQueue`]
    /// (duplicates, reordering) and every random choice seeded.
    pub fn with_faults(manifest: Arc<Manifest>, faults: QueueFaults, seed: u64) -> Embedded {
        let agents = Arc::new(Agents::new(&manifest));
        Embedded::build(manifest, EngineSettings::default(), agents, Some((faults, seed)))
    }

    fn build(
        manifest: Arc<Manifest>,
        settings: EngineSettings,
        agents: Arc<dyn AgentRuntime>,
        faults: Option<(QueueFaults, u64)>,
    ) -> Embedded {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let topology = Topology::for_manifest(&manifest);
        let store = Arc::new(MemoryStore::new(clock.clone()));
        let queue = Arc::new(MemoryQueue::new(&topology));
        let (port, seed): (Arc<dyn Queue>, Option<u64>) = match faults {
            Some((f, seed)) => (Arc::new(FaultyQueue::new(queue.clone(), f, seed)), Some(seed)),
            None => (queue.clone(), None),
        };
        let mut deps = Deps::new(manifest, store.clone(), port, clock, agents, settings);
        if let Some(seed) = seed {
            deps = deps.with_seed(seed);
        }
        Embedded { deps: Arc::new(deps), store, queue, topology }
    }

    /// Start the pollers (the "Lambda functions").
    pub fn start(&self, config: PollerConfig) -> Pollers {
        start(self.deps.clone(), &self.topology, config)
    }
}
