//! Lambda's SQS event source, with the faults of a real deployment: like
//! [`switchyard_engine::pollers`], one poller per queue receives batches and invokes the function's
//! handler on each, deleting the records that succeeded — but an invocation may crash before it
//! deletes (the batch is redelivered after the visibility timeout), stall before deleting
//! (possibly past the visibility timeout), or have a message made visible again while it runs
//! (a second consumer receives it concurrently). Concurrency per queue is the seed's throttle.

use crate::chaos::{Chaos, CALM, FAULTED_DELIVERIES};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::handlers::handle_sqs;
use switchyard_engine::ports::{QueueId, ReceivedMessage};
use switchyard_engine::Deps;
use switchyard_engine::{pollers::function_for, pollers::sqs_event, pollers::Pollers};
use switchyard_model::topology::Topology;
use tokio::sync::Semaphore;
use tracing::{error, warn};

/// Start one poller per queue of the topology.
pub fn start(deps: Arc<Deps>, topology: &Topology, chaos: Arc<Chaos>) -> Pollers {
    let handles = topology
        .queues
        .iter()
        .map(|spec| {
            let batch = spec.batch_size.clamp(1, 10) as usize;
            let visibility = Duration::from_secs(spec.visibility_timeout_s);
            let concurrency = chaos.faults.concurrency.max(1);
            tokio::spawn(poll(deps.clone(), chaos.clone(), spec.id, batch, concurrency, visibility))
        })
        .collect();
    Pollers::from_handles(handles)
}

async fn poll(
    deps: Arc<Deps>,
    chaos: Arc<Chaos>,
    queue: QueueId,
    batch: usize,
    concurrency: usize,
    visibility: Duration,
) {
    let slots = Arc::new(Semaphore::new(concurrency));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let messages = match deps.queue.receive(queue, batch, Duration::from_secs(20)).await {
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
        let (deps, chaos) = (deps.clone(), chaos.clone());
        tokio::spawn(async move {
            let _permit = permit;
            invoke(deps, chaos, queue, messages, visibility).await;
        });
    }
}

async fn invoke(
    deps: Arc<Deps>,
    chaos: Arc<Chaos>,
    queue: QueueId,
    messages: Vec<ReceivedMessage>,
    visibility: Duration,
) {
    let calm = messages.iter().any(|m| m.receive_count > FAULTED_DELIVERIES);
    let faults = chaos.faults;
    let roll = |p: f64, what: &str| !calm && chaos.roll(p, what);
    if let Some(first) = messages.first() {
        if roll(faults.visibility_expiry, &format!("a {} message becomes visible while its handler runs", queue.name()))
        {
            let _ = deps.queue.change_visibility(queue, &first.receipt_handle, Duration::ZERO).await;
        }
    }
    let function = function_for(queue);
    let event = sqs_event(queue, &messages);
    let handler_deps = deps.clone();
    let outcome = tokio::spawn(CALM.scope(calm, async move { handle_sqs(&handler_deps, function, event).await })).await;
    let failed: BTreeSet<String> = match outcome {
        Ok(Ok(response)) => response.batch_item_failures.into_iter().map(|f| f.item_identifier).collect(),
        Ok(Err(e)) => {
            for m in &messages {
                error!(queue = %queue.name(), message_id = %m.message_id, reason = %e, "invocation refused the batch");
            }
            return;
        }
        Err(e) => {
            for m in &messages {
                error!(queue = %queue.name(), message_id = %m.message_id, reason = %e, "invocation crashed; the batch will be redelivered");
            }
            return;
        }
    };
    if roll(faults.crash_before_ack, &format!("{} invocation crashes before deleting its batch", queue.name())) {
        for m in &messages {
            warn!(queue = %queue.name(), message_id = %m.message_id, reason = "crashed before the ack", "the message will be redelivered");
        }
        return;
    }
    if roll(faults.slow_ack, &format!("{} invocation stalls before deleting its batch", queue.name())) {
        let stall = visibility.mul_f64(1.5 * chaos.fraction());
        tokio::time::sleep(stall).await;
    }
    for m in messages.iter().filter(|m| !failed.contains(&m.message_id)) {
        if let Err(e) = deps.queue.delete(queue, &m.receipt_handle).await {
            warn!(queue = %queue.name(), message_id = %m.message_id, reason = %e, "delete failed; the message will be redelivered");
        }
    }
}
