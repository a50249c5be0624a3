//! Fault injection around the ports, for the simulation harness and the fault tests.
//!
//! [`FaultyQueue`] wraps any [`Queue`] and, driven by one seeded RNG so a run replays exactly,
//! delivers messages twice and delays them by random amounts (which reorders them) — what SQS
//! standard queues are allowed to do.

use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_engine::ports::{OutgoingMessage, Queue, QueueDepth, QueueError, QueueId, ReceivedMessage};

/// What a [`FaultyQueue`] does to the messages sent through it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueFaults {
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Each copy is delayed by up to this much more than asked (reordering).
    pub max_extra_delay: Duration,
}

impl Default for QueueFaults {
    fn default() -> Self {
        QueueFaults { duplicate: 0.0, max_extra_delay: Duration::ZERO }
    }
}

/// A queue that duplicates and reorders.
pub struct FaultyQueue {
    inner: Arc<dyn Queue>,
    faults: QueueFaults,
    rng: Mutex<StdRng>,
}

impl std::fmt::Debug for FaultyQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyQueue").field("faults", &self.faults).finish_non_exhaustive()
    }
}

impl FaultyQueue {
    /// Wrap `inner`; `seed` makes the faults reproducible.
    pub fn new(inner: Arc<dyn Queue>, faults: QueueFaults, seed: u64) -> FaultyQueue {
        FaultyQueue { inner, faults, rng: Mutex::new(StdRng::seed_from_u64(seed)) }
    }

    fn roll(&self) -> (bool, Duration, Duration) {
        let Ok(mut rng) = self.rng.lock() else { return (false, Duration::ZERO, Duration::ZERO) };
        let twice = rng.random::<f64>() < self.faults.duplicate;
        let max = self.faults.max_extra_delay.as_millis() as u64;
        let extra =
            |rng: &mut StdRng| if max == 0 { Duration::ZERO } else { Duration::from_millis(rng.random_range(0..=max)) };
        let a = extra(&mut rng);
        let b = extra(&mut rng);
        (twice, a, b)
    }
}

#[async_trait]
impl Queue for FaultyQueue {
    async fn send(&self, queue: QueueId, message: OutgoingMessage) -> Result<String, QueueError> {
        let (twice, extra, extra_copy) = self.roll();
        if twice {
            let mut copy = message.clone();
            copy.delay += extra_copy;
            self.inner.send(queue, copy).await?;
        }
        let mut first = message;
        first.delay += extra;
        self.inner.send(queue, first).await
    }

    async fn receive(&self, queue: QueueId, max: usize, wait: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.inner.receive(queue, max, wait).await
    }

    async fn delete(&self, queue: QueueId, receipt_handle: &str) -> Result<(), QueueError> {
        self.inner.delete(queue, receipt_handle).await
    }

    async fn change_visibility(
        &self,
        queue: QueueId,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), QueueError> {
        self.inner.change_visibility(queue, receipt_handle, timeout).await
    }

    async fn depth(&self, queue: QueueId) -> Result<QueueDepth, QueueError> {
        self.inner.depth(queue).await
    }
}
