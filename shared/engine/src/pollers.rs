//! Pollers that feed queues to the function handlers the way Lambda's SQS event source mapping
//! does: long-polling receives in batches, one handler invocation per batch, deletion of the
//! records that succeeded, the failed ones left to reappear after their visibility timeout (and
//! to dead-letter after the queue's max receives). A handler that panics fails its whole batch,
//! as a crashed Lambda invocation does.
//!
//! `switchyard ask` and `serve` run the whole system in one process this way, on the in-memory
//! queues ([`super::Embedded`]) or on SQS ([`super::AwsSystem`]).

use crate::handlers::{handle_records, Function, RecordRef};
use crate::ports::{QueueId, QueueKind, ReceivedMessage, ATTR_TRACEPARENT};
use crate::Deps;
use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use futures::FutureExt as _;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use switchyard_model::topology::Topology;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tracing::{error, warn};

/// How the pollers behave.
#[derive(Debug, Clone, Copy)]
pub struct PollerConfig {
    /// Long-poll wait of each receive.
    pub wait: Duration,
    /// Concurrent invocations per queue when the manifest sets no reserved concurrency.
    pub default_concurrency: usize,
}

impl Default for PollerConfig {
    fn default() -> Self {
        PollerConfig { wait: Duration::from_secs(20), default_concurrency: 16 }
    }
}

/// Running pollers; dropping them stops them.
#[derive(Debug)]
pub struct Pollers {
    handles: Vec<JoinHandle<()>>,
}

impl Pollers {
    /// Own already spawned poller tasks (other poller loops, such as the simulation's).
    pub fn from_handles(handles: Vec<JoinHandle<()>>) -> Pollers {
        Pollers { handles }
    }
}

impl Drop for Pollers {
    fn drop(&mut self) {
        for h in &self.handles {
            h.abort();
        }
    }
}

/// The function that consumes a queue.
pub fn function_for(queue: QueueId) -> Function {
    match queue.kind {
        QueueKind::Route => Function::Router,
        QueueKind::Tier(t) => Function::Worker { tier: Some(t) },
        QueueKind::Synth => Function::Synthesizer,
    }
}

/// An SQS event as Lambda would build it from received messages.
pub fn sqs_event(queue: QueueId, messages: &[ReceivedMessage]) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = messages
        .iter()
        .map(|m| {
            let mut record = SqsMessage::default();
            record.message_id = Some(m.message_id.clone());
            record.receipt_handle = Some(m.receipt_handle.clone());
            record.body = Some(m.body.clone());
            record.event_source = Some("aws:sqs".into());
            record.event_source_arn = Some(format!("arn:aws:sqs:local:000000000000:{}", queue.name()));
            record.attributes.insert("ApproximateReceiveCount".into(), m.receive_count.to_string());
            for (k, v) in &m.attributes {
                let mut attribute = SqsMessageAttribute::default();
                attribute.string_value = Some(v.clone());
                attribute.data_type = Some("String".into());
                record.message_attributes.insert(k.clone(), attribute);
            }
            record
        })
        .collect();
    event
}

/// Start one poller per queue of the topology.
pub fn start(deps: Arc<Deps>, topology: &Topology, config: PollerConfig) -> Pollers {
    let handles = topology
        .queues
        .iter()
        .map(|spec| {
            let concurrency =
                spec.reserved_concurrency.map(|c| c as usize).unwrap_or(config.default_concurrency).max(1);
            let batch = spec.batch_size.clamp(1, 10) as usize;
            tokio::spawn(poll(deps.clone(), spec.id, batch, concurrency, config.wait))
        })
        .collect();
    Pollers { handles }
}

async fn poll(deps: Arc<Deps>, queue: QueueId, batch: usize, concurrency: usize, wait: Duration) {
    let slots = Arc::new(Semaphore::new(concurrency));
    let function = function_for(queue);
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let messages = match deps.queue.receive(queue, batch, wait).await {
            Ok(m) => m,
            Err(e) => {
                warn!(queue = %queue.name(), error = %e, "receive failed; backing off");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if messages.is_empty() {
            continue;
        }
        let deps = deps.clone();
        tokio::spawn(async move {
            let _permit = permit;
            invoke(deps, queue, function, messages).await;
        });
    }
}

/// A received message as the handler reads it (the fields Lambda's SQS record would carry).
fn record_of(m: &ReceivedMessage) -> RecordRef<'_> {
    RecordRef {
        message_id: &m.message_id,
        body: Some(&m.body),
        receive_count: m.receive_count,
        traceparent: m.attributes.get(ATTR_TRACEPARENT).map(String::as_str),
    }
}

/// One "Lambda invocation": run the handler on a batch and delete what succeeded. The handler
/// reads the received messages in place ([`RecordRef`]); [`sqs_event`] builds the event Lambda
/// would send, for callers that want it.
pub async fn invoke(deps: Arc<Deps>, queue: QueueId, function: Function, messages: Vec<ReceivedMessage>) {
    let records: Vec<RecordRef<'_>> = messages.iter().map(record_of).collect();
    // A panic is caught here, on the invocation's own task (no second task per batch): the
    // batch fails whole, as a crashed Lambda invocation does.
    let outcome = AssertUnwindSafe(handle_records(&deps, function, &records)).catch_unwind().await;
    let results = match outcome {
        Ok(Ok(results)) => results,
        Ok(Err(e)) => {
            error!(queue = %queue.name(), error = %e, "invocation refused the batch");
            return;
        }
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a panic");
            error!(queue = %queue.name(), error = %reason, "invocation crashed; the batch will be redelivered");
            return;
        }
    };
    // The batch item failures, by message id as Lambda reports them. Failures are few
    // (usually none): a list, not a set.
    let failed: Vec<&str> = records.iter().zip(&results).filter(|(_, ok)| !**ok).map(|(r, _)| r.message_id).collect();
    for m in messages.iter().filter(|m| !failed.contains(&m.message_id.as_str())) {
        if let Err(e) = deps.queue.delete(queue, &m.receipt_handle).await {
            warn!(queue = %queue.name(), message_id = %m.message_id, error = %e, "delete failed; the message will be redelivered");
        }
    }
}
