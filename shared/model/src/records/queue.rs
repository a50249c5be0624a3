//! Which queue a message travels on.

use serde::{Deserialize, Serialize};

/// Which queue: the route queue, a tier's queue or the synth queue, or the dead-letter queue
/// behind one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct QueueId {
    /// The logical queue.
    pub kind: QueueKind,
    /// The dead-letter queue behind it.
    pub dead_letter: bool,
}

/// The logical queues of the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// intake → router.
    Route,
    /// router/worker → agent-worker of a tier.
    Tier(u8),
    /// worker/router → synthesizer (fan-in complete, deadlines).
    Synth,
}

impl QueueId {
    /// The route queue.
    pub const fn route() -> QueueId {
        QueueId { kind: QueueKind::Route, dead_letter: false }
    }
    /// A tier's queue.
    pub const fn tier(tier: u8) -> QueueId {
        QueueId { kind: QueueKind::Tier(tier), dead_letter: false }
    }
    /// The synth queue.
    pub const fn synth() -> QueueId {
        QueueId { kind: QueueKind::Synth, dead_letter: false }
    }
    /// The dead-letter queue behind this one.
    pub const fn dlq(self) -> QueueId {
        QueueId { kind: self.kind, dead_letter: true }
    }
    /// A short name: `route`, `tier-2`, `synth`, with `-dlq` for dead-letter queues.
    pub fn name(&self) -> String {
        let base = match self.kind {
            QueueKind::Route => "route".to_string(),
            QueueKind::Tier(t) => format!("tier-{t}"),
            QueueKind::Synth => "synth".to_string(),
        };
        if self.dead_letter {
            format!("{base}-dlq")
        } else {
            base
        }
    }
}
