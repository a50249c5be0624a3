//! Looking into and redriving the dead-letter queues (the operator's `switchyard dlq`).
//!
//! A message lands in a queue's dead-letter queue after the queue's `maxReceiveCount` failed
//! receives (its body could not be parsed, or its step kept failing). [`SqsQueue::peek_dead_letters`]
//! reads them without taking them (visibility timeout 0, so they stay visible to everyone);
//! [`SqsQueue::redrive`] moves them back to the source queue: send a copy (same body and
//! attributes), then delete the original, so a crash in between leaves a duplicate, never a loss.
//! Duplicates are harmless because every handler is idempotent: a redriven job whose step
//! already happened changes nothing.

use super::{sdk_error, SqsQueue};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use switchyard_engine::ports::{OutgoingMessage, Queue, QueueError, QueueId};
use switchyard_model::limits::SQS_MAX_BATCH as MAX_BATCH;

/// Receive rounds a peek makes beyond `limit / 10` before it stops finding new messages.
const EXTRA_PEEK_ROUNDS: usize = 3;
/// How long a message being redriven stays invisible to others.
const REDRIVE_VISIBILITY_S: i32 = 60;

/// One message in a dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// SQS message id.
    pub message_id: String,
    /// The body as sent (a job message, or whatever could not be parsed).
    pub body: String,
    /// When it was first sent (to the source queue).
    pub sent_at: Option<DateTime<Utc>>,
    /// Receives so far, source queue and dead-letter queue together.
    pub receive_count: u32,
    /// String message attributes (correlation id, trace context).
    pub attributes: BTreeMap<String, String>,
}

/// What a peek found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetters {
    /// `ApproximateNumberOfMessages` (+ in flight) of the dead-letter queue.
    pub count: u64,
    /// The messages read, oldest first (at most the limit asked for).
    pub messages: Vec<DeadLetter>,
}

impl SqsQueue {
    /// The dead-letter queues whose URLs this adapter has, in queue order.
    pub fn dead_letter_queues(&self) -> Vec<QueueId> {
        self.urls.keys().filter(|q| q.dead_letter).copied().collect()
    }

    /// Read up to `limit` messages of `dlq` without taking them.
    pub async fn peek_dead_letters(&self, dlq: QueueId, limit: usize) -> Result<DeadLetters, QueueError> {
        let url = self.queue_url(dlq)?.to_string();
        let depth = self.depth(dlq).await?;
        let mut seen = BTreeSet::new();
        let mut messages = Vec::new();
        for _ in 0..limit.div_ceil(MAX_BATCH) + EXTRA_PEEK_ROUNDS {
            if messages.len() >= limit {
                break;
            }
            super::bump(&self.counters.receives, 1);
            let out = self
                .client
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(MAX_BATCH as i32)
                .visibility_timeout(0)
                .wait_time_seconds(0)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await
                .map_err(|e| sdk_error("ReceiveMessage", e))?;
            let batch = out.messages.unwrap_or_default();
            let mut fresh = 0;
            for m in batch {
                let Some(id) = m.message_id.clone() else { continue };
                if !seen.insert(id.clone()) || messages.len() >= limit {
                    continue;
                }
                fresh += 1;
                let system = m.attributes.unwrap_or_default();
                let sent_at = system
                    .get(&MessageSystemAttributeName::SentTimestamp)
                    .and_then(|t| t.parse::<i64>().ok())
                    .and_then(DateTime::<Utc>::from_timestamp_millis);
                let receive_count = system
                    .get(&MessageSystemAttributeName::ApproximateReceiveCount)
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                let attributes = m
                    .message_attributes
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(k, v)| v.string_value.map(|s| (k, s)))
                    .collect();
                messages.push(DeadLetter {
                    message_id: id,
                    body: m.body.unwrap_or_default(),
                    sent_at,
                    receive_count,
                    attributes,
                });
            }
            bump_received(self, fresh);
            if fresh == 0 {
                break;
            }
        }
        messages.sort_by_key(|m| m.sent_at);
        Ok(DeadLetters { count: depth.visible + depth.in_flight, messages })
    }

    /// Move every message of `dlq` back to the queue it came from; returns how many moved.
    pub async fn redrive(&self, dlq: QueueId) -> Result<usize, QueueError> {
        let source = QueueId { kind: dlq.kind, dead_letter: false };
        let url = self.queue_url(dlq)?.to_string();
        self.queue_url(source)?;
        let mut moved = 0;
        let mut seen = BTreeSet::new();
        loop {
            super::bump(&self.counters.receives, 1);
            let out = self
                .client
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(MAX_BATCH as i32)
                .visibility_timeout(REDRIVE_VISIBILITY_S)
                .wait_time_seconds(1)
                .message_attribute_names("All")
                .send()
                .await
                .map_err(|e| sdk_error("ReceiveMessage", e))?;
            let batch = out.messages.unwrap_or_default();
            // A message seen twice came back during this redrive (it failed again): stop
            // rather than cycle.
            if batch.is_empty() || batch.iter().all(|m| m.message_id.as_ref().is_some_and(|id| seen.contains(id))) {
                return Ok(moved);
            }
            bump_received(self, batch.len());
            for m in batch {
                if let Some(id) = &m.message_id {
                    seen.insert(id.clone());
                }
                let attributes = m
                    .message_attributes
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(k, v)| v.string_value.map(|s| (k, s)))
                    .collect();
                let copy = OutgoingMessage { body: m.body.unwrap_or_default(), delay: Duration::ZERO, attributes };
                self.send(source, copy).await?;
                if let Some(receipt) = m.receipt_handle.as_deref() {
                    self.delete(dlq, receipt).await?;
                }
                moved += 1;
            }
        }
    }
}

fn bump_received(queue: &SqsQueue, n: usize) {
    super::bump(&queue.counters.messages_received, n as u64);
}
