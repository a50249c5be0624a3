//! The zero-setup default: the whole system in one process, on the in-memory adapters.

use crate::deps::{Deps, EngineSettings};
use crate::memory::{MemoryQueue, MemoryStore};
use crate::pollers::{start, PollerConfig, Pollers};
use crate::ports::{AgentRuntime, Clock, Queue, TokioClock};
use std::sync::Arc;
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::Topology;

/// The whole system in one process on the in-memory adapters: the zero-setup default.
///
/// The agent runtime is handed in (`switchyard_agents::embedded` builds the one with every
/// agent kind), so the engine names no agent.
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
    /// Build it with this agent runtime.
    pub fn with_agents(manifest: Arc<Manifest>, settings: EngineSettings, agents: Arc<dyn AgentRuntime>) -> Embedded {
        Embedded::with_queue(manifest, settings, agents, |queue| (queue, None))
    }

    /// Build it with the in-memory queues seen through `wrap` (a fault-injecting queue, say),
    /// which may also give the seed of every random choice.
    pub fn with_queue(
        manifest: Arc<Manifest>,
        settings: EngineSettings,
        agents: Arc<dyn AgentRuntime>,
        wrap: impl FnOnce(Arc<MemoryQueue>) -> (Arc<dyn Queue>, Option<u64>),
    ) -> Embedded {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let topology = Topology::for_manifest(&manifest);
        let store = Arc::new(MemoryStore::new(clock.clone()).with_quota(settings.memory_quota));
        let queue = Arc::new(MemoryQueue::new(&topology));
        let (port, seed) = wrap(queue.clone());
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
