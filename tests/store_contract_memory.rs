//! The embedded store keeps the same contract as the DynamoDB adapter: the checks in
//! `support/store_contract.rs` run here on the in-memory store and, in `aws_adapters.rs`,
//! against the local DynamoDB endpoint.

#[path = "support/store_contract.rs"]
mod store_contract;

use std::sync::Arc;
use switchyard_engine::memory::MemoryStore;
use switchyard_engine::ports::TokioClock;

#[tokio::test]
async fn the_memory_store_keeps_the_store_contract() {
    let store = MemoryStore::new(Arc::new(TokioClock::new()));
    store_contract::all(&store).await;
}

mod queue {
    use std::collections::BTreeMap;
    use std::time::Duration;
    use switchyard_engine::memory::{MemoryQueue, QueueSettings};
    use switchyard_engine::ports::{OutgoingMessage, Queue, QueueDepth, QueueId, QueueKind};

    const SYNTH: QueueId = QueueId { kind: QueueKind::Synth, dead_letter: false };

    fn queue() -> MemoryQueue {
        let settings = QueueSettings { visibility_timeout: Duration::from_secs(30), max_receive_count: 3 };
        MemoryQueue::with_settings(BTreeMap::from([(SYNTH, settings)]))
    }

    fn message(body: &str, delay_s: u64) -> OutgoingMessage {
        OutgoingMessage { body: body.into(), delay: Duration::from_secs(delay_s), attributes: BTreeMap::new() }
    }

    async fn bodies(q: &MemoryQueue) -> Vec<String> {
        let got = q.receive(SYNTH, 10, Duration::ZERO).await.expect("receive");
        got.into_iter().map(|m| m.body).collect()
    }

    /// Delayed messages (the deadline of every query) wait apart from the others: each becomes
    /// visible exactly when its delay passes, in the order of their times, and is counted as
    /// delayed until then.
    #[tokio::test(start_paused = true)]
    async fn delayed_messages_become_visible_when_their_delay_passes_in_the_order_of_their_times() {
        let q = queue();
        q.send(SYNTH, message("late", 20)).await.expect("send");
        q.send(SYNTH, message("early", 10)).await.expect("send");
        q.send(SYNTH, message("now", 0)).await.expect("send");
        assert_eq!(q.depth(SYNTH).await.expect("depth"), QueueDepth { visible: 1, in_flight: 0, delayed: 2 });
        assert_eq!(q.peek(SYNTH).len(), 3, "peek shows delayed messages too");
        assert_eq!(bodies(&q).await, ["now"]);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(bodies(&q).await.is_empty(), "nothing is due before 10 s");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(bodies(&q).await, ["early"]);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(q.depth(SYNTH).await.expect("depth"), QueueDepth { visible: 1, in_flight: 2, delayed: 0 });
        assert_eq!(bodies(&q).await, ["late"]);
    }

    /// A long-polling receive wakes up when a delayed message comes due, without another send.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_receive_gets_a_delayed_message_when_it_comes_due() {
        let q = queue();
        q.send(SYNTH, message("deadline", 5)).await.expect("send");
        let got = q.receive(SYNTH, 10, Duration::from_secs(20)).await.expect("receive");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].body, "deadline");
        assert_eq!(got[0].receive_count, 1);
    }
}
