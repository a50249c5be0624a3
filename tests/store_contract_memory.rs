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

/// The embedded store under a quota: past its records or bytes, the oldest finished queries go
/// first, and a running query is never evicted.
mod quota {
    use super::store_contract::{event, new_id, output, query};
    use std::sync::Arc;
    use switchyard_engine::memory::{MemoryStore, Quota};
    use switchyard_engine::ports::{EventKind, QueryRecord, QueryStatus, Store, StoreError, TokioClock};

    fn store(quota: Quota) -> MemoryStore {
        MemoryStore::new(Arc::new(TokioClock::new())).with_quota(quota)
    }

    /// Accepted `age_s` seconds ago, so the order of acceptance is the order of the calls.
    fn aged(age_s: i64) -> QueryRecord {
        let mut q = query(&new_id(), Some(&new_id()));
        q.accepted_at -= chrono::Duration::seconds(age_s);
        q
    }

    async fn finish(store: &MemoryStore, q: &QueryRecord) {
        let mut done = q.clone();
        done.status = QueryStatus::Done;
        let last = event(&q.query_id, "9999-final", chrono::Utc::now(), EventKind::Final);
        store.finish_query(Arc::new(output(&q.query_id)), &done, 0, &[last]).await.expect("finish");
    }

    async fn held(store: &MemoryStore, q: &QueryRecord) -> bool {
        store.get_query(&q.query_id).await.expect("read").is_some()
    }

    #[tokio::test]
    async fn past_its_record_quota_the_oldest_finished_queries_go_first_and_running_ones_stay() {
        let store = store(Quota { max_records: 4, max_bytes: usize::MAX });
        // The oldest query is still running; the next two are finished.
        let running = aged(100);
        let (old_done, newer_done) = (aged(90), aged(80));
        for q in [&running, &old_done, &newer_done] {
            store.create_query(q, &[]).await.expect("create");
        }
        finish(&store, &old_done).await;
        finish(&store, &newer_done).await;
        let fourth = aged(70);
        store.create_query(&fourth, &[]).await.expect("the fourth fits");
        assert_eq!(store.usage().0, 4);
        // A fifth evicts the oldest finished query, not the older running one.
        let fifth = aged(60);
        store.create_query(&fifth, &[]).await.expect("room is made");
        assert!(held(&store, &running).await, "a running query is never evicted");
        assert!(!held(&store, &old_done).await, "the oldest finished query went first");
        assert!(held(&store, &newer_done).await);
        assert_eq!(store.get_output(&old_done.query_id).await.expect("read"), None, "with its output");
        assert!(store.list_events(&old_done.query_id).await.expect("read").is_empty(), "and its events");
        let key = old_done.idempotency_key.as_deref().expect("key");
        assert_eq!(store.find_idempotency_key(&old_done.user_id, key).await.expect("read"), None, "and its key");
        // Then the last finished one; once only running queries are left, a new one is refused.
        store.create_query(&aged(50), &[]).await.expect("room is made");
        assert!(!held(&store, &newer_done).await);
        let refused = store.create_query(&aged(40), &[]).await;
        assert!(
            matches!(&refused, Err(StoreError::Unavailable { message, .. }) if message.contains("quota")),
            "{refused:?}"
        );
        assert!(held(&store, &running).await && held(&store, &fourth).await && held(&store, &fifth).await);
    }

    #[tokio::test]
    async fn past_its_byte_quota_finished_queries_are_evicted_and_running_ones_never() {
        // Room for a handful of these queries by size, none by count.
        let big = |age_s| {
            let mut q = aged(age_s);
            let parsed = Arc::make_mut(&mut q.parsed);
            parsed.context = Some(serde_json::json!({"preferences": {"note": "x".repeat(20_000)}}));
            q
        };
        let store = store(Quota { max_records: usize::MAX, max_bytes: 100_000 });
        let mut running = Vec::new();
        let mut finished = Vec::new();
        for i in 0..40 {
            let q = big(1000 - i);
            match store.create_query(&q, &[]).await {
                Ok(()) => {}
                Err(StoreError::Unavailable { .. }) => break,
                Err(e) => panic!("{e}"),
            }
            if i % 2 == 0 {
                finish(&store, &q).await;
                finished.push(q);
            } else {
                running.push(q);
            }
            assert!(store.usage().1 <= 100_000 + 25_000, "{} bytes held", store.usage().1);
        }
        for q in &running {
            assert!(held(&store, q).await, "running query {} was evicted", q.query_id);
        }
        assert!(!held(&store, &finished[0]).await, "the oldest finished query was evicted");
        // Only running queries left, nearly filling the quota: a new one is refused, not squeezed in.
        let refused = store.create_query(&big(1), &[]).await;
        assert!(matches!(refused, Err(StoreError::Unavailable { .. })), "{refused:?}");
    }
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
