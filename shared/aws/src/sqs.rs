//! The [`Queue`] on SQS standard queues.
//!
//! Each [`QueueId`] maps to a queue URL. [`SqsQueue::from_env`] reads them from the environment
//! variables the [`Topology`] names: `SWITCHYARD_QUEUE_ROUTE`, `SWITCHYARD_QUEUE_TIER_<n>`,
//! `SWITCHYARD_QUEUE_SYNTH`, and for each dead-letter queue the same name with `_DLQ` appended
//! (`SWITCHYARD_QUEUE_TIER_2_DLQ`). URLs come from the environment rather than `GetQueueUrl`
//! so that building the adapter sends no request and a function's start-up cannot fail on the
//! network; [`crate::sdk::ensure_resources`] prints every one of these variables.
//!
//! What the port asks and how SQS gives it:
//!
//! | port | SQS |
//! |---|---|
//! | `send_batch` | `SendMessageBatch`: up to 10 messages and 256 KiB per request; an entry that fails fails the call |
//! | `send` delay | `DelaySeconds` = the delay rounded up to whole seconds, at most 900 (the engine chains longer delays) |
//! | attributes | string message attributes (`correlation_id`, `traceparent`, …) |
//! | size | body plus attributes over 256 KiB is refused with [`QueueError::TooLarge`] before sending |
//! | `receive` | `MaxNumberOfMessages` 1–10, `WaitTimeSeconds` 0–20 (long polling), all message attributes, `ApproximateReceiveCount` |
//! | receives before dead-lettering | the queue's `RedrivePolicy` (`maxReceiveCount`), set up by `ensure_resources` |
//! | `depth` | `ApproximateNumberOfMessages`, `…NotVisible`, `…Delayed` |
//!
//! Every request sent is counted in [`SqsQueue::counts`].

use async_trait::async_trait;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry,
};
use aws_sdk_sqs::Client;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::ports::{OutgoingMessage, Queue, QueueDepth, QueueError, QueueId, ReceivedMessage};
use switchyard_model::limits::{SQS_MAX_BATCH, SQS_MAX_DELAY_S, SQS_MAX_MESSAGE_BYTES, SQS_MAX_WAIT_S};
use switchyard_model::topology::Topology;

mod dead_letters;
pub use dead_letters::{DeadLetter, DeadLetters};

/// Suffix of the environment variable holding a dead-letter queue's URL.
pub const DLQ_ENV_SUFFIX: &str = "_DLQ";

/// Requests an [`SqsQueue`] has sent since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// `SendMessage` and `SendMessageBatch` requests.
    pub sends: u64,
    /// Messages those requests sent.
    pub messages_sent: u64,
    /// `ReceiveMessage` requests (empty receives count too).
    pub receives: u64,
    /// Messages those receives returned.
    pub messages_received: u64,
    /// `DeleteMessage` requests.
    pub deletes: u64,
    /// `ChangeMessageVisibility` requests.
    pub visibility_changes: u64,
    /// `GetQueueAttributes` requests (depth).
    pub depth_reads: u64,
}

#[derive(Debug, Default)]
struct Counters {
    sends: AtomicU64,
    messages_sent: AtomicU64,
    receives: AtomicU64,
    messages_received: AtomicU64,
    deletes: AtomicU64,
    visibility_changes: AtomicU64,
    depth_reads: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// A queue URL missing from the environment.
#[derive(Debug, thiserror::Error)]
#[error("queue {queue}: environment variable {env} is not set (see `switchyard setup --backend aws`)")]
pub struct MissingQueueUrl {
    /// The queue's short name (`tier-2`).
    pub queue: String,
    /// The variable that should hold its URL.
    pub env: String,
}

/// The [`Queue`] on SQS (see the [module docs](self)).
///
/// Cheap to clone: clones share the client and the request counters.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    urls: Arc<BTreeMap<QueueId, String>>,
    counters: Arc<Counters>,
}

impl SqsQueue {
    /// Queues at the given URLs (dead-letter queues under their [`QueueId::dlq`] ids).
    pub fn new(client: Client, urls: BTreeMap<QueueId, String>) -> SqsQueue {
        SqsQueue { client, urls: Arc::new(urls), counters: Arc::new(Counters::default()) }
    }

    /// Queues whose URLs are in the environment: each queue's [`switchyard_model::topology::QueueSpec::url_env`]
    /// (required) and that name with [`DLQ_ENV_SUFFIX`] for its dead-letter queue (optional:
    /// only tools that inspect dead letters need it).
    pub fn from_env(client: Client, topology: &Topology) -> Result<SqsQueue, MissingQueueUrl> {
        Self::from_lookup(client, topology, |name| std::env::var(name).ok())
    }

    /// [`SqsQueue::from_env`] with the environment supplied as a function (for tests).
    pub fn from_lookup(
        client: Client,
        topology: &Topology,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<SqsQueue, MissingQueueUrl> {
        let mut urls = BTreeMap::new();
        for spec in &topology.queues {
            let url = lookup(&spec.url_env)
                .filter(|u| !u.is_empty())
                .ok_or_else(|| MissingQueueUrl { queue: spec.name.clone(), env: spec.url_env.clone() })?;
            urls.insert(spec.id, url);
            if let Some(dlq) = lookup(&format!("{}{DLQ_ENV_SUFFIX}", spec.url_env)).filter(|u| !u.is_empty()) {
                urls.insert(spec.id.dlq(), dlq);
            }
        }
        Ok(SqsQueue::new(client, urls))
    }

    /// The URL of a queue, if known.
    pub fn url(&self, queue: QueueId) -> Option<&str> {
        self.urls.get(&queue).map(String::as_str)
    }

    /// Requests sent so far.
    pub fn counts(&self) -> QueueCounts {
        let c = &self.counters;
        QueueCounts {
            sends: c.sends.load(Ordering::Relaxed),
            messages_sent: c.messages_sent.load(Ordering::Relaxed),
            receives: c.receives.load(Ordering::Relaxed),
            messages_received: c.messages_received.load(Ordering::Relaxed),
            deletes: c.deletes.load(Ordering::Relaxed),
            visibility_changes: c.visibility_changes.load(Ordering::Relaxed),
            depth_reads: c.depth_reads.load(Ordering::Relaxed),
        }
    }

    fn queue_url(&self, queue: QueueId) -> Result<&str, QueueError> {
        self.url(queue).ok_or_else(|| QueueError::Unavailable {
            message: format!("no URL configured for queue {}", queue.name()),
            source: None,
        })
    }
}

/// A string message attribute.
fn string_attribute(name: &str, value: String) -> Result<MessageAttributeValue, QueueError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| QueueError::Unavailable { message: format!("attribute {name}: {e}"), source: Some(Box::new(e)) })
}

/// Whole seconds for `DelaySeconds`: rounded up, at most 900.
pub fn delay_seconds(delay: Duration) -> i32 {
    let whole = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
    whole.min(SQS_MAX_DELAY_S) as i32
}

/// Whole seconds for `WaitTimeSeconds`: rounded up, at most 20.
fn wait_seconds(wait: Duration) -> i32 {
    let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    whole.min(SQS_MAX_WAIT_S) as i32
}

/// Turns an SDK error into a [`QueueError`]: a bad or stale receipt handle is
/// `InvalidReceipt`; anything else is `Unavailable` with the SDK error as its source.
fn sdk_error<E, R>(operation: &str, err: SdkError<E, R>) -> QueueError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let message = match &err {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or("Unknown");
            if ["ReceiptHandleIsInvalid", "InvalidIdFormat", "MessageNotInflight"].iter().any(|c| code.contains(c)) {
                return QueueError::InvalidReceipt;
            }
            format!("{operation}: {code}: {}", service.err().message().unwrap_or_default())
        }
        SdkError::TimeoutError(_) => format!("{operation}: timed out"),
        SdkError::DispatchFailure(_) => format!("{operation}: could not reach SQS"),
        SdkError::ResponseError(_) => format!("{operation}: unreadable response"),
        SdkError::ConstructionFailure(_) => format!("{operation}: request could not be built"),
        _ => format!("{operation}: failed"),
    };
    QueueError::Unavailable { message, source: Some(Box::new(err)) }
}

fn secs_i32(d: Duration) -> i32 {
    d.as_secs().min(i32::MAX as u64) as i32
}

#[async_trait]
impl Queue for SqsQueue {
    async fn send(&self, queue: QueueId, message: OutgoingMessage) -> Result<String, QueueError> {
        let size = message.size();
        if size > SQS_MAX_MESSAGE_BYTES {
            return Err(QueueError::TooLarge(size));
        }
        let url = self.queue_url(queue)?;
        let mut request = self
            .client
            .send_message()
            .queue_url(url)
            .message_body(message.body)
            .delay_seconds(delay_seconds(message.delay));
        for (name, value) in message.attributes {
            let value = string_attribute(&name, value)?;
            request = request.message_attributes(name, value);
        }
        bump(&self.counters.sends, 1);
        bump(&self.counters.messages_sent, 1);
        let out = request.send().await.map_err(|e| sdk_error("SendMessage", e))?;
        out.message_id.ok_or_else(|| QueueError::Unavailable {
            message: "SendMessage: no message id in the answer".into(),
            source: None,
        })
    }

    async fn send_batch(&self, queue: QueueId, messages: Vec<OutgoingMessage>) -> Result<Vec<String>, QueueError> {
        let url = self.queue_url(queue)?.to_string();
        let mut ids = Vec::with_capacity(messages.len());
        let mut chunk: Vec<OutgoingMessage> = Vec::new();
        let mut chunk_bytes = 0;
        let mut chunks = Vec::new();
        for message in messages {
            let size = message.size();
            if size > SQS_MAX_MESSAGE_BYTES {
                return Err(QueueError::TooLarge(size));
            }
            if chunk.len() == SQS_MAX_BATCH || chunk_bytes + size > SQS_MAX_MESSAGE_BYTES {
                chunks.push(std::mem::take(&mut chunk));
                chunk_bytes = 0;
            }
            chunk_bytes += size;
            chunk.push(message);
        }
        if !chunk.is_empty() {
            chunks.push(chunk);
        }
        for chunk in chunks {
            if chunk.len() == 1 {
                for message in chunk {
                    ids.push(self.send(queue, message).await?);
                }
                continue;
            }
            let count = chunk.len() as u64;
            let mut entries = Vec::with_capacity(chunk.len());
            for (i, message) in chunk.into_iter().enumerate() {
                let mut entry = SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(message.body)
                    .delay_seconds(delay_seconds(message.delay));
                for (name, value) in message.attributes {
                    entry = entry.message_attributes(name.clone(), string_attribute(&name, value)?);
                }
                entries.push(entry.build().map_err(|e| QueueError::Unavailable {
                    message: format!("SendMessageBatch entry {i}: {e}"),
                    source: Some(Box::new(e)),
                })?);
            }
            bump(&self.counters.sends, 1);
            bump(&self.counters.messages_sent, count);
            let out = self
                .client
                .send_message_batch()
                .queue_url(&url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| sdk_error("SendMessageBatch", e))?;
            if let Some(failed) = out.failed.first() {
                return Err(QueueError::Unavailable {
                    message: format!(
                        "SendMessageBatch: entry {} failed: {} {}",
                        failed.id,
                        failed.code,
                        failed.message.as_deref().unwrap_or_default()
                    ),
                    source: None,
                });
            }
            let mut sent: Vec<(usize, String)> =
                out.successful.into_iter().map(|s| (s.id.parse().unwrap_or(usize::MAX), s.message_id)).collect();
            sent.sort();
            ids.extend(sent.into_iter().map(|(_, id)| id));
        }
        Ok(ids)
    }

    async fn receive(&self, queue: QueueId, max: usize, wait: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        let url = self.queue_url(queue)?;
        bump(&self.counters.receives, 1);
        let out = self
            .client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(max.clamp(1, SQS_MAX_BATCH) as i32)
            .wait_time_seconds(wait_seconds(wait))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| sdk_error("ReceiveMessage", e))?;
        let mut received = Vec::new();
        for message in out.messages.unwrap_or_default() {
            let missing = |what: &str| QueueError::Unavailable {
                message: format!("ReceiveMessage: a message without {what}"),
                source: None,
            };
            let message_id = message.message_id.clone().ok_or_else(|| missing("a message id"))?;
            let receipt_handle = message.receipt_handle.clone().ok_or_else(|| missing("a receipt handle"))?;
            let receive_count = message
                .attributes
                .as_ref()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            let attributes = message
                .message_attributes
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(name, value)| value.string_value.map(|v| (name, v)))
                .collect();
            received.push(ReceivedMessage {
                message_id,
                receipt_handle,
                body: message.body.unwrap_or_default(),
                receive_count,
                attributes,
            });
        }
        bump(&self.counters.messages_received, received.len() as u64);
        Ok(received)
    }

    async fn delete(&self, queue: QueueId, receipt_handle: &str) -> Result<(), QueueError> {
        let url = self.queue_url(queue)?;
        bump(&self.counters.deletes, 1);
        self.client
            .delete_message()
            .queue_url(url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| sdk_error("DeleteMessage", e))?;
        Ok(())
    }

    async fn change_visibility(
        &self,
        queue: QueueId,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), QueueError> {
        let url = self.queue_url(queue)?;
        bump(&self.counters.visibility_changes, 1);
        self.client
            .change_message_visibility()
            .queue_url(url)
            .receipt_handle(receipt_handle)
            .visibility_timeout(secs_i32(timeout).min(12 * 60 * 60))
            .send()
            .await
            .map_err(|e| sdk_error("ChangeMessageVisibility", e))?;
        Ok(())
    }

    async fn depth(&self, queue: QueueId) -> Result<QueueDepth, QueueError> {
        let url = self.queue_url(queue)?;
        bump(&self.counters.depth_reads, 1);
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| sdk_error("GetQueueAttributes", e))?;
        let attributes = out.attributes.unwrap_or_default();
        let count = |name: QueueAttributeName| attributes.get(&name).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(QueueDepth {
            visible: count(QueueAttributeName::ApproximateNumberOfMessages),
            in_flight: count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            delayed: count(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_round_up_to_whole_seconds_and_stop_at_fifteen_minutes() {
        assert_eq!(delay_seconds(Duration::ZERO), 0);
        assert_eq!(delay_seconds(Duration::from_millis(1)), 1);
        assert_eq!(delay_seconds(Duration::from_millis(1_500)), 2);
        assert_eq!(delay_seconds(Duration::from_secs(900)), 900);
        assert_eq!(delay_seconds(Duration::from_secs(3_600)), 900);
        assert_eq!(wait_seconds(Duration::from_secs(60)), 20);
    }

    #[test]
    fn a_message_counts_its_attributes_toward_the_size_limit() {
        let message = OutgoingMessage {
            body: "x".repeat(10),
            delay: Duration::ZERO,
            attributes: [("traceparent".to_string(), "00-ab".to_string())].into_iter().collect(),
        };
        assert_eq!(message.size(), 10 + 11 + 6 + 5);
    }
}
