//! The in-memory queues: SQS semantics (visibility timeout, receive count, redrive to a
//! dead-letter queue, delays) on one lock per queue.

use super::*;
use crate::ports::{OutgoingMessage, Queue, QueueDepth, QueueError, QueueId, ReceivedMessage};
use async_trait::async_trait;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use switchyard_model::limits::SQS_MAX_MESSAGE_BYTES;
use switchyard_model::topology::Topology;
use tokio::sync::Notify;
use tokio::time::Instant;

// ------------------------------------------------------------------------------------------

/// Settings of one in-memory queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    /// How long a received message stays invisible.
    pub visibility_timeout: Duration,
    /// Receives before the message moves to the dead-letter queue.
    pub max_receive_count: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct StoredMessage {
    message_id: String,
    body: String,
    attributes: BTreeMap<String, String>,
    visible_at: Instant,
    receive_count: u32,
    receipt: Option<String>,
    delayed: bool,
}

#[derive(Debug, Default)]
pub(crate) struct QueueState {
    /// Messages that were sent without a delay or whose delay is over, in sending order
    /// (visible, or in flight after a receive).
    messages: VecDeque<StoredMessage>,
    /// Messages sent with a delay that has not passed, by (visible_at, send number): a receive
    /// looks only at the first of them instead of scanning every deadline message waiting for
    /// its time.
    delayed: BTreeMap<(Instant, u64), StoredMessage>,
}

impl QueueState {
    /// Move the delayed messages whose time has come behind the others.
    fn release_due(&mut self, now: Instant) {
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            self.messages.push_back(entry.remove());
        }
    }

    /// When the next delayed message becomes visible.
    fn next_due(&self) -> Option<Instant> {
        self.delayed.keys().next().map(|(at, _)| *at)
    }
}

/// The embedded queues: one per [`QueueId`] of the topology, each with its dead-letter queue.
pub struct MemoryQueue {
    settings: BTreeMap<QueueId, QueueSettings>,
    state: Mutex<BTreeMap<QueueId, QueueState>>,
    /// One per queue: a send wakes only the receivers of its own queue.
    notify: BTreeMap<QueueId, Notify>,
    /// For receives on a queue that does not exist (they fail on their first look).
    no_queue: Notify,
    next_id: AtomicU64,
    sends: AtomicU64,
    receives: AtomicU64,
    deletes: AtomicU64,
}

impl std::fmt::Debug for MemoryQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryQueue").field("queues", &self.settings.keys().collect::<Vec<_>>()).finish()
    }
}

/// A message id: `m-` and the send number, at least 8 digits (`m-00000042`). Written without
/// the formatting machinery: one per message sent.
pub(crate) fn message_id(number: u64) -> String {
    let mut id = String::with_capacity(12);
    id.push_str("m-");
    switchyard_model::jobs::push_decimal(&mut id, number, 8);
    id
}

/// A receipt handle: the message id and its receive count (`m-00000042#1`).
pub(crate) fn receipt_handle(message_id: &str, receive_count: u32) -> String {
    let mut receipt = String::with_capacity(message_id.len() + 4);
    receipt.push_str(message_id);
    receipt.push('#');
    switchyard_model::jobs::push_decimal(&mut receipt, u64::from(receive_count), 1);
    receipt
}

pub(crate) fn queue_poisoned() -> QueueError {
    QueueError::Unavailable { message: "queue lock poisoned by a panic".into(), source: None }
}

impl MemoryQueue {
    /// Queues for every queue of the topology, with its visibility timeouts and receive limits.
    pub fn new(topology: &Topology) -> MemoryQueue {
        let settings = topology
            .queues
            .iter()
            .map(|q| {
                (
                    q.id,
                    QueueSettings {
                        visibility_timeout: Duration::from_secs(q.visibility_timeout_s),
                        max_receive_count: q.max_receive_count,
                    },
                )
            })
            .collect();
        MemoryQueue::with_settings(settings)
    }

    /// Queues with explicit settings (dead-letter queues are added for each).
    pub fn with_settings(settings: BTreeMap<QueueId, QueueSettings>) -> MemoryQueue {
        let mut state = BTreeMap::new();
        let mut notify = BTreeMap::new();
        for id in settings.keys() {
            for id in [*id, id.dlq()] {
                state.insert(id, QueueState::default());
                notify.insert(id, Notify::new());
            }
        }
        MemoryQueue {
            settings,
            state: Mutex::new(state),
            notify,
            no_queue: Notify::new(),
            next_id: AtomicU64::new(1),
            sends: AtomicU64::new(0),
            receives: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
        }
    }

    /// Requests served so far.
    pub fn counts(&self) -> RequestCounts {
        RequestCounts {
            sends: self.sends.load(Ordering::Relaxed),
            receives: self.receives.load(Ordering::Relaxed),
            deletes: self.deletes.load(Ordering::Relaxed),
            ..RequestCounts::default()
        }
    }

    /// Every queue, dead-letter queues included.
    pub fn queue_ids(&self) -> Vec<QueueId> {
        self.state.lock().map(|s| s.keys().copied().collect()).unwrap_or_default()
    }

    /// Bodies of the messages in a queue, in any state (for inspection and tests).
    pub fn peek(&self, queue: QueueId) -> Vec<String> {
        self.state
            .lock()
            .map(|s| {
                s.get(&queue)
                    .map(|q| q.messages.iter().chain(q.delayed.values()).map(|m| m.body.clone()).collect())
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }

    /// Move every message of a dead-letter queue back to its source queue (SQS redrive).
    pub fn redrive(&self, source: QueueId) -> usize {
        let Ok(mut s) = self.state.lock() else { return 0 };
        let moved: Vec<StoredMessage> =
            s.get_mut(&source.dlq()).map(|q| q.messages.drain(..).collect()).unwrap_or_default();
        let n = moved.len();
        let now = Instant::now();
        if let Some(q) = s.get_mut(&source) {
            for mut m in moved {
                m.receive_count = 0;
                m.receipt = None;
                m.visible_at = now;
                m.delayed = false;
                q.messages.push_back(m);
            }
        }
        drop(s);
        self.notify_of(source).notify_waiters();
        n
    }

    fn notify_of(&self, queue: QueueId) -> &Notify {
        self.notify.get(&queue).unwrap_or(&self.no_queue)
    }

    fn settings_of(&self, queue: QueueId) -> QueueSettings {
        let base = QueueId { kind: queue.kind, dead_letter: false };
        self.settings.get(&base).copied().unwrap_or(QueueSettings {
            visibility_timeout: Duration::from_secs(30),
            max_receive_count: switchyard_model::limits::MAX_RECEIVE_COUNT,
        })
    }

    /// Take visible messages; dead-letter those over their receive limit. Returns the messages
    /// and the earliest instant another message becomes visible.
    fn take(&self, queue: QueueId, max: usize) -> Result<(Vec<ReceivedMessage>, Option<Instant>), QueueError> {
        let settings = self.settings_of(queue);
        let now = Instant::now();
        let mut s = self.state.lock().map_err(|_| queue_poisoned())?;
        let mut out = Vec::new();
        let mut dead = Vec::new();
        let q = s
            .get_mut(&queue)
            .ok_or_else(|| QueueError::Unavailable { message: format!("no queue {}", queue.name()), source: None })?;
        q.release_due(now);
        let mut next: Option<Instant> = q.next_due();
        let mut i = 0;
        while i < q.messages.len() {
            let m = &mut q.messages[i];
            if m.visible_at > now {
                next = Some(next.map_or(m.visible_at, |n| n.min(m.visible_at)));
                i += 1;
                continue;
            }
            if out.len() >= max {
                break;
            }
            if !queue.dead_letter && m.receive_count >= settings.max_receive_count {
                if let Some(m) = q.messages.remove(i) {
                    dead.push(m);
                }
                continue;
            }
            m.receive_count += 1;
            m.delayed = false;
            let receipt = receipt_handle(&m.message_id, m.receive_count);
            m.receipt = Some(receipt.clone());
            m.visible_at = now + settings.visibility_timeout;
            out.push(ReceivedMessage {
                message_id: m.message_id.clone(),
                receipt_handle: receipt,
                body: m.body.clone(),
                receive_count: m.receive_count,
                attributes: m.attributes.clone(),
            });
            i += 1;
        }
        if !dead.is_empty() {
            if let Some(dlq) = s.get_mut(&queue.dlq()) {
                for mut m in dead {
                    tracing::warn!(queue = %queue.name(), message_id = %m.message_id, receives = m.receive_count, "message moved to the dead-letter queue after its receive limit");
                    m.receipt = None;
                    m.visible_at = now;
                    dlq.messages.push_back(m);
                }
            }
        }
        Ok((out, next))
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn send(&self, queue: QueueId, message: OutgoingMessage) -> Result<String, QueueError> {
        let size = message.size();
        if size > SQS_MAX_MESSAGE_BYTES {
            return Err(QueueError::TooLarge(size));
        }
        let number = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = message_id(number);
        {
            let mut s = self.state.lock().map_err(|_| queue_poisoned())?;
            let q = s.get_mut(&queue).ok_or_else(|| QueueError::Unavailable {
                message: format!("no queue {}", queue.name()),
                source: None,
            })?;
            let stored = StoredMessage {
                message_id: id.clone(),
                body: message.body,
                attributes: message.attributes,
                visible_at: Instant::now() + message.delay,
                receive_count: 0,
                receipt: None,
                delayed: !message.delay.is_zero(),
            };
            if stored.delayed {
                q.delayed.insert((stored.visible_at, number), stored);
            } else {
                q.messages.push_back(stored);
            }
        }
        self.sends.fetch_add(1, Ordering::Relaxed);
        self.notify_of(queue).notify_waiters();
        Ok(id)
    }

    async fn receive(&self, queue: QueueId, max: usize, wait: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        let max = max.clamp(1, 10);
        let deadline = Instant::now() + wait;
        loop {
            let notified = self.notify_of(queue).notified();
            let (messages, next) = self.take(queue, max)?;
            if !messages.is_empty() {
                self.receives.fetch_add(1, Ordering::Relaxed);
                return Ok(messages);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let until = next.map_or(deadline, |n| n.min(deadline));
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }

    async fn delete(&self, queue: QueueId, receipt_handle: &str) -> Result<(), QueueError> {
        let mut s = self.state.lock().map_err(|_| queue_poisoned())?;
        let q = s.get_mut(&queue).ok_or(QueueError::InvalidReceipt)?;
        let before = q.messages.len();
        q.messages.retain(|m| m.receipt.as_deref() != Some(receipt_handle));
        if q.messages.len() == before {
            return Err(QueueError::InvalidReceipt);
        }
        self.deletes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn change_visibility(
        &self,
        queue: QueueId,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), QueueError> {
        {
            let mut s = self.state.lock().map_err(|_| queue_poisoned())?;
            let q = s.get_mut(&queue).ok_or(QueueError::InvalidReceipt)?;
            let m = q
                .messages
                .iter_mut()
                .find(|m| m.receipt.as_deref() == Some(receipt_handle))
                .ok_or(QueueError::InvalidReceipt)?;
            m.visible_at = Instant::now() + timeout;
        }
        self.notify_of(queue).notify_waiters();
        Ok(())
    }

    async fn depth(&self, queue: QueueId) -> Result<QueueDepth, QueueError> {
        let s = self.state.lock().map_err(|_| queue_poisoned())?;
        let now = Instant::now();
        let mut depth = QueueDepth::default();
        for m in s.get(&queue).map(|q| q.messages.iter().chain(q.delayed.values())).into_iter().flatten() {
            if m.visible_at <= now {
                depth.visible += 1;
            } else if m.delayed {
                depth.delayed += 1;
            } else {
                depth.in_flight += 1;
            }
        }
        Ok(depth)
    }
}
