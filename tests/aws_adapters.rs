//! The DynamoDB store and the SQS queues against a real local endpoint (moto server).
//!
//! Run through the script, which starts moto on a free loopback port and sets the
//! environment:
//!
//! ```text
//! scripts/test-aws.sh
//! # or by hand:
//! source scripts/moto.sh && moto_start && trap moto_stop EXIT
//! cargo test -p switchyard-tests --test aws_adapters
//! ```
//!
//! Without `AWS_ENDPOINT_URL`, or with nothing answering there, every test fails and says so:
//! these tests never skip. Each test makes its own table and queues under a fresh prefix, so
//! they run in parallel; moto is reset once per run, before the first test creates anything.

#[path = "support/store_contract.rs"]
mod store_contract;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_aws::dynamodb::DynamoStore;
use switchyard_aws::sdk::{ensure_resources, ResourceUrls};
use switchyard_aws::sqs::SqsQueue;
use switchyard_engine::ports::{
    OutgoingMessage, Queue, QueueError, QueueId, Store, ATTR_CORRELATION_ID, ATTR_TRACEPARENT,
};
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::Topology;

use switchyard_tests::endpoint::{clients, prefix};

/// The shipped manifest's topology; `fast_route` makes the route queue quick to redeliver
/// (visibility 1 s, dead-lettered after 2 receives).
fn topology(fast_route: bool) -> Topology {
    let manifest = Manifest::embedded().expect("the shipped manifest is valid");
    let mut topology = Topology::for_manifest(&manifest);
    if fast_route {
        for spec in topology.queues.iter_mut().filter(|q| q.id == QueueId::route()) {
            spec.visibility_timeout_s = 1;
            spec.max_receive_count = 2;
        }
    }
    topology
}

/// A fresh table and set of queues.
async fn resources(fast_route: bool) -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client, Topology, ResourceUrls) {
    let (ddb, sqs) = clients().await;
    let p = prefix();
    let topology = topology(fast_route);
    let urls = ensure_resources(&ddb, &sqs, &topology, &format!("{p}-table"), &format!("{p}-"))
        .await
        .expect("resources are set up");
    (ddb, sqs, topology, urls)
}

async fn store() -> DynamoStore {
    let (ddb, _, _, urls) = resources(false).await;
    DynamoStore::new(ddb, urls.table)
}

async fn queue(fast_route: bool) -> SqsQueue {
    let (_, sqs, _, urls) = resources(fast_route).await;
    SqsQueue::new(sqs, urls.queues)
}

fn message(body: &str, delay: Duration) -> OutgoingMessage {
    OutgoingMessage {
        body: body.to_string(),
        delay,
        attributes: BTreeMap::from([
            (ATTR_CORRELATION_ID.to_string(), "corr-1".to_string()),
            (ATTR_TRACEPARENT.to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string()),
        ]),
    }
}

// ------------------------------------------------------------------------------------------
// Setup
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn setup_creates_every_queue_with_its_dead_letter_queue_and_is_idempotent() {
    let (ddb, sqs) = clients().await;
    let p = prefix();
    let topology = topology(false);
    let table = format!("{p}-table");
    let first = ensure_resources(&ddb, &sqs, &topology, &table, &format!("{p}-")).await.expect("first setup");
    let second = ensure_resources(&ddb, &sqs, &topology, &table, &format!("{p}-")).await.expect("second setup");
    assert_eq!(first, second, "a second run finds the same resources");
    assert_eq!(first.queues.len(), 2 * topology.queues.len(), "every queue and its DLQ");
    assert_eq!(first.env.get("SWITCHYARD_TABLE"), Some(&table));
    let tier2 = first.env.get("SWITCHYARD_QUEUE_TIER_2").expect("tier 2 env");
    assert!(tier2.ends_with(&format!("{p}-tier-2")), "{tier2}");
    assert!(first.env.get("SWITCHYARD_QUEUE_TIER_2_DLQ").expect("tier 2 DLQ env").ends_with("tier-2-dlq"));
    assert!(first.export_lines().iter().any(|l| l.starts_with("export SWITCHYARD_QUEUE_SYNTH=")));

    // The table: keys, index, TTL.
    let described = ddb.describe_table().table_name(&table).send().await.expect("describe").table.expect("table");
    let mut index_names: Vec<_> = described.global_secondary_indexes().iter().filter_map(|i| i.index_name()).collect();
    index_names.sort_unstable();
    assert_eq!(index_names, ["by_signal_day", "by_user"]);
    let ttl = ddb.describe_time_to_live().table_name(&table).send().await.expect("ttl");
    let ttl = ttl.time_to_live_description.expect("ttl description");
    assert_eq!(ttl.attribute_name(), Some("expires_at"));

    // A tier queue: visibility from the spec, redrive to its DLQ.
    let spec = topology.queue(QueueId::tier(2)).expect("tier 2 spec");
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(tier2)
        .attribute_names(A::All)
        .send()
        .await
        .expect("attributes")
        .attributes
        .expect("some attributes");
    assert_eq!(attributes.get(&A::VisibilityTimeout), Some(&spec.visibility_timeout_s.to_string()));
    let redrive: serde_json::Value =
        serde_json::from_str(attributes.get(&A::RedrivePolicy).expect("redrive policy")).expect("json");
    assert_eq!(redrive["maxReceiveCount"].to_string().trim_matches('"'), spec.max_receive_count.to_string());
    assert_eq!(
        redrive["deadLetterTargetArn"].as_str(),
        first.dead_letter_arns.get(&QueueId::tier(2)).map(String::as_str)
    );

    // The functions' view: the adapter built from the printed environment.
    let queue = SqsQueue::from_lookup(sqs.clone(), &topology, |name| first.env.get(name).cloned()).expect("from env");
    assert_eq!(queue.url(QueueId::tier(2).dlq()), first.queues.get(&QueueId::tier(2).dlq()).map(String::as_str));
    let missing = SqsQueue::from_lookup(sqs, &topology, |_| None).expect_err("no URLs");
    assert_eq!(missing.env, "SWITCHYARD_QUEUE_ROUTE");
}

// ------------------------------------------------------------------------------------------
// The store contract on DynamoDB
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn dynamodb_queries_are_created_read_and_updated_under_optimistic_versions() {
    store_contract::a_query_is_created_read_and_updated_under_optimistic_versions(&store().await).await;
}

#[tokio::test]
async fn dynamodb_lists_finished_signals_from_the_signal_index_a_page_at_a_time() {
    let store = store().await;
    store_contract::finished_signals_are_listed_newest_first_a_page_at_a_time(&store).await;
    // Read through the index (one query per day bucket and page), never a scan.
    println!("signal paging: {:?}", store.counts());
}

#[tokio::test]
async fn dynamodb_claims_a_write_tool_call_once_and_records_its_outcome_once() {
    store_contract::a_write_call_is_claimed_once_and_its_outcome_recorded_once(&store().await).await;
}

#[tokio::test]
async fn dynamodb_refuses_a_second_create_of_the_same_query() {
    store_contract::creating_a_query_twice_fails_and_writes_no_event(&store().await).await;
}

#[tokio::test]
async fn dynamodb_holds_an_idempotency_key_for_one_query() {
    store_contract::an_idempotency_key_is_held_by_one_query_per_user(&store().await).await;
}

#[tokio::test]
async fn dynamodb_records_a_handoff_once() {
    store_contract::a_handoff_recorded_twice_is_a_duplicate_and_stored_once(&store().await).await;
}

#[tokio::test]
async fn dynamodb_fan_in_loses_no_slot_under_concurrent_handoffs() {
    let store = store().await;
    store_contract::concurrent_handoffs_lose_no_slot_and_exactly_one_sees_the_set_complete(&store).await;
    // 1 create, and per handoff one put and one fan-in update: no read first, no
    // transaction, nothing sent again when handoffs race. The contract reads the query and
    // the handoffs once each.
    let counts = store.counts();
    println!("8 concurrent handoffs: {counts:?}");
    assert_eq!((counts.writes, counts.transact_writes, counts.reads), (17, 0, 2), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_fan_in_from_two_tasks_keeps_both_slots() {
    use switchyard_engine::ports::HandoffWrite;
    let store = Arc::new(store().await);
    for _ in 0..5 {
        let q = store_contract::query(&store_contract::new_id(), None);
        store.create_query(&q, &[]).await.expect("create");
        let spawn = |slot: &'static str| {
            let store = Arc::clone(&store);
            let record = store_contract::handoff(&q.query_id, slot, Some(slot));
            tokio::spawn(async move { store.record_handoff(Arc::new(record.clone()), &[]).await })
        };
        let (a, b) = (spawn("d-a"), spawn("d-b"));
        let a = a.await.expect("task a").expect("handoff a");
        let b = b.await.expect("task b").expect("handoff b");
        let both = std::collections::BTreeSet::from(["d-a".to_string(), "d-b".to_string()]);
        let complete =
            [&a, &b].iter().filter(|w| matches!(w, HandoffWrite::Recorded { completed } if *completed == both)).count();
        assert_eq!(complete, 1, "exactly one task completes the fan-in: {a:?} / {b:?}");
        assert_eq!(store.get_query(&q.query_id).await.expect("read").expect("present").completed, both);
    }
}

/// GIVEN two slots, where a's handoff arrived first and b's completed the set, WHEN a's fan-in
/// update is sent again (its first answer lost, as the SDK retries), THEN the retry reports the
/// set as a's first write left it — not complete — and changes nothing: one writer completed it.
#[tokio::test]
async fn dynamodb_fan_in_retried_after_a_lost_answer_does_not_complete_the_set_twice() {
    use std::collections::BTreeSet;
    use switchyard_engine::ports::HandoffWrite;
    let store = store().await;
    let q = store_contract::query(&store_contract::new_id(), None);
    store.create_query(&q, &[]).await.expect("create");
    let a = store_contract::handoff(&q.query_id, "d-a", Some("d-a"));
    let b = store_contract::handoff(&q.query_id, "d-b", Some("d-b"));
    let first = store.record_handoff(Arc::new(a.clone()), &[]).await.expect("a");
    let second = store.record_handoff(Arc::new(b.clone()), &[]).await.expect("b");
    let both = BTreeSet::from(["d-a".to_string(), "d-b".to_string()]);
    assert_eq!(first, HandoffWrite::Recorded { completed: BTreeSet::from(["d-a".to_string()]) });
    assert_eq!(second, HandoffWrite::Recorded { completed: both.clone() });
    let retried = store.arrive(&q.query_id, "d-a", "d-a", a.expires_at).await.expect("retry");
    assert_eq!(retried, BTreeSet::from(["d-a".to_string()]), "the retry does not see the set it did not complete");
    assert_eq!(store.get_query(&q.query_id).await.expect("read").expect("present").completed, both);
}

#[tokio::test]
async fn dynamodb_refuses_a_second_finish() {
    store_contract::finishing_a_query_twice_fails_the_second_time(&store().await).await;
}

#[tokio::test]
async fn dynamodb_lists_a_callers_recent_queries_from_the_by_user_index() {
    store_contract::a_callers_recent_queries_are_listed_newest_first_and_only_theirs(&store().await).await;
}

#[tokio::test]
async fn dynamodb_reads_expired_records_as_absent() {
    store_contract::expired_records_read_as_absent(&store().await).await;
}

#[tokio::test]
async fn dynamodb_refuses_oversized_items() {
    let store = store().await;
    let before = store.counts();
    store_contract::an_oversized_record_is_refused_as_too_large(&store).await;
    let after = store.counts();
    // Two creates' worth of requests only would be wrong: the oversized writes sent nothing.
    assert_eq!(after.writes - before.writes, 1, "only the small query was sent");
    assert_eq!(after.transact_writes, before.transact_writes);
}

#[tokio::test]
async fn dynamodb_keeps_sessions_per_caller_under_versions_with_ttl() {
    store_contract::a_session_is_written_under_versions_per_caller_and_expires(&store().await).await;
}

#[tokio::test]
async fn dynamodb_keeps_one_manifest_version_per_fingerprint() {
    store_contract::a_manifest_version_is_kept_once_under_its_fingerprint(&store().await).await;
}

#[tokio::test]
async fn dynamodb_lists_events_in_order() {
    store_contract::events_are_listed_in_time_order_and_appended_once_per_key(&store().await).await;
}

#[tokio::test]
async fn dynamodb_counts_its_requests_and_units_per_operation() {
    let store = store().await;
    let q = store_contract::query(&store_contract::new_id(), None);
    let mut last = store.counts();
    // (reads, writes, transactions, write units, read units) since the last step.
    let mut step = |name: &str, store: &DynamoStore| {
        let now = store.counts();
        let delta = (
            now.reads - last.reads,
            now.writes - last.writes,
            now.transact_writes - last.transact_writes,
            now.write_units - last.write_units,
            now.read_units - last.read_units,
        );
        println!("{name:>16}: reads, writes, transactions, WRU, RRU = {delta:?}");
        last = now;
        delta
    };
    let e = |key: &str| {
        store_contract::event(&q.query_id, key, chrono::Utc::now(), switchyard_engine::ports::EventKind::Route)
    };
    store.create_query(&q, &[e("1")]).await.expect("create");
    assert_eq!(step("create_query", &store), (0, 1, 0, 2, 0), "one put of under 1 KB, one index write");
    store.get_query(&q.query_id).await.expect("get");
    assert_eq!(step("get_query", &store), (1, 0, 0, 0, 1));
    store.update_query(&q, 0, &[e("2")]).await.expect("update");
    assert_eq!(step("update_query", &store), (0, 1, 0, 1, 0));
    let h = store_contract::handoff(&q.query_id, "d-1", Some("d-1"));
    store.record_handoff(Arc::new(h.clone()), &[e("3")]).await.expect("handoff");
    assert_eq!(step("record_handoff", &store), (0, 2, 0, 2, 0), "the handoff put and the fan-in update");
    store.record_handoff(Arc::new(h.clone()), &[e("3")]).await.expect("duplicate");
    assert_eq!(step("duplicate handoff", &store), (0, 2, 0, 2, 0), "both refused by their conditions, still billed");
    store.list_handoffs(&q.query_id).await.expect("list");
    assert_eq!(step("list_handoffs", &store), (1, 0, 0, 0, 1));
    store.append_events(&[e("4")]).await.expect("append");
    assert_eq!(step("append_events(1)", &store), (0, 1, 0, 1, 0));
    store.finish_query(Arc::new(store_contract::output(&q.query_id)), &q, 1, &[e("5")]).await.expect("finish");
    let (reads, writes, transactions, wru, _) = step("finish_query", &store);
    assert_eq!((reads, writes, transactions), (0, 1, 0), "one update carries the output and the final status");
    assert!((1..=2).contains(&wru), "{wru} WRU");
    store.list_events(&q.query_id).await.expect("events");
    assert_eq!(step("list_events", &store).0, 1, "one query over the partition");
    let keyed = store_contract::query(&store_contract::new_id(), Some("k"));
    store.create_query(&keyed, &[]).await.expect("create with a key");
    assert_eq!(step("create with key", &store), (0, 0, 1, 5, 0), "two items at twice the units, one index write");
}

// ------------------------------------------------------------------------------------------
// SQS
// ------------------------------------------------------------------------------------------

#[tokio::test]
async fn sqs_delivers_a_message_with_its_attributes_and_deletes_it() {
    let queue = queue(false).await;
    let id = queue
        .send(QueueId::synth(), message(r#"{"v":1,"type":"synthesize","query_id":"q"}"#, Duration::ZERO))
        .await
        .expect("send");
    let received = queue.receive(QueueId::synth(), 10, Duration::from_secs(2)).await.expect("receive");
    assert_eq!(received.len(), 1);
    let m = &received[0];
    assert_eq!((m.message_id.as_str(), m.receive_count), (id.as_str(), 1));
    assert_eq!(m.body, r#"{"v":1,"type":"synthesize","query_id":"q"}"#);
    assert_eq!(m.attributes, message("", Duration::ZERO).attributes, "correlation id and traceparent arrive");
    queue.delete(QueueId::synth(), &m.receipt_handle).await.expect("delete");
    assert_eq!(queue.depth(QueueId::synth()).await.expect("depth").total(), 0);
    assert!(queue.receive(QueueId::synth(), 10, Duration::ZERO).await.expect("receive").is_empty());
    let counts = queue.counts();
    assert_eq!((counts.sends, counts.receives, counts.deletes), (1, 2, 1));
}

/// GIVEN twelve messages for one queue, WHEN they are sent as a batch, THEN two
/// `SendMessageBatch` requests carry them (ten at most each) and every one arrives once.
#[tokio::test]
async fn sqs_sends_a_batch_in_requests_of_ten_and_delivers_every_message() {
    let queue = queue(false).await;
    let messages: Vec<_> = (0..12).map(|i| message(&format!("batch-{i}"), Duration::ZERO)).collect();
    let ids = queue.send_batch(QueueId::tier(2), messages).await.expect("send_batch");
    assert_eq!(ids.len(), 12);
    assert_eq!(ids.iter().collect::<std::collections::BTreeSet<_>>().len(), 12, "distinct ids");
    let counts = queue.counts();
    assert_eq!((counts.sends, counts.messages_sent), (2, 12));
    let mut bodies = std::collections::BTreeSet::new();
    for _ in 0..10 {
        for m in queue.receive(QueueId::tier(2), 10, Duration::from_secs(1)).await.expect("receive") {
            assert_eq!(m.attributes, message("", Duration::ZERO).attributes, "attributes arrive with each");
            bodies.insert(m.body.clone());
            queue.delete(QueueId::tier(2), &m.receipt_handle).await.expect("delete");
        }
        if bodies.len() == 12 {
            break;
        }
    }
    assert_eq!(bodies, (0..12).map(|i| format!("batch-{i}")).collect());
    let oversized = vec![message("small", Duration::ZERO), message(&"x".repeat(300 * 1024), Duration::ZERO)];
    assert!(matches!(
        queue.send_batch(QueueId::tier(2), oversized).await,
        Err(switchyard_engine::ports::QueueError::TooLarge(_))
    ));
}

#[tokio::test]
async fn sqs_keeps_a_delayed_message_invisible_until_its_delay_passes() {
    let queue = queue(false).await;
    queue.send(QueueId::tier(2), message("later", Duration::from_millis(1_500))).await.expect("send");
    assert!(
        queue.receive(QueueId::tier(2), 1, Duration::ZERO).await.expect("receive").is_empty(),
        "not before its delay"
    );
    assert_eq!(queue.depth(QueueId::tier(2)).await.expect("depth").delayed, 1);
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let received = queue.receive(QueueId::tier(2), 1, Duration::from_secs(3)).await.expect("receive");
    assert_eq!(received.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(), ["later"], "delivered after 2 s");
}

#[tokio::test]
async fn sqs_redelivers_after_the_visibility_timeout_and_then_dead_letters() {
    let queue = queue(true).await; // route: visibility 1 s, 2 receives
    let route = QueueId::route();
    let id = queue.send(route, message("poison", Duration::ZERO)).await.expect("send");
    let first = queue.receive(route, 1, Duration::from_secs(2)).await.expect("first receive");
    assert_eq!(first.iter().map(|m| (m.message_id.clone(), m.receive_count)).collect::<Vec<_>>(), [(id.clone(), 1)]);
    assert_eq!(queue.depth(route).await.expect("depth").in_flight, 1);

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let second = queue.receive(route, 1, Duration::from_secs(2)).await.expect("second receive");
    assert_eq!(second.iter().map(|m| (m.message_id.clone(), m.receive_count)).collect::<Vec<_>>(), [(id.clone(), 2)]);

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let third = queue.receive(route, 1, Duration::from_secs(1)).await.expect("third receive");
    assert!(third.is_empty(), "past max receives the message is not delivered again: {third:?}");
    let dead = queue.receive(route.dlq(), 1, Duration::from_secs(2)).await.expect("dlq receive");
    assert_eq!(
        dead.iter().map(|m| (m.message_id.as_str(), m.body.as_str())).collect::<Vec<_>>(),
        [(id.as_str(), "poison")]
    );
}

#[tokio::test]
async fn sqs_reports_depth_and_makes_a_message_visible_again_on_request() {
    let queue = queue(false).await;
    let synth = QueueId::synth();
    queue.send(synth, message("one", Duration::ZERO)).await.expect("send");
    queue.send(synth, message("two", Duration::ZERO)).await.expect("send");
    queue.send(synth, message("three", Duration::from_secs(60))).await.expect("send");
    let got = queue.receive(synth, 1, Duration::from_secs(2)).await.expect("receive");
    assert_eq!(got.len(), 1);
    let depth = queue.depth(synth).await.expect("depth");
    assert_eq!((depth.visible, depth.in_flight, depth.delayed), (1, 1, 1));
    queue.change_visibility(synth, &got[0].receipt_handle, Duration::ZERO).await.expect("visible now");
    assert_eq!(queue.depth(synth).await.expect("depth").visible, 2);
}

#[tokio::test]
async fn sqs_refuses_an_oversized_message_before_sending_and_a_bad_receipt() {
    let queue = queue(false).await;
    let big = message(&"x".repeat(256 * 1024), Duration::ZERO);
    match queue.send(QueueId::route(), big).await {
        Err(QueueError::TooLarge(size)) => assert!(size > 256 * 1024),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(queue.counts().sends, 0, "nothing was sent");
    match queue.delete(QueueId::route(), "not-a-receipt-handle").await {
        Err(QueueError::InvalidReceipt) => {}
        other => panic!("expected InvalidReceipt, got {other:?}"),
    }
}

// ------------------------------------------------------------------------------------------
// Named fault test 14 on the real services: payloads at the item and message limits
// ------------------------------------------------------------------------------------------

/// Agents that answer with `bytes` of text each.
struct Verbose {
    bytes: usize,
}

#[async_trait::async_trait]
impl switchyard_engine::ports::AgentRuntime for Verbose {
    async fn run(
        &self,
        agent: &switchyard_model::manifest::Agent,
        _dispatch: &switchyard_model::contracts::AgentDispatch,
        _attempt: u32,
    ) -> Result<switchyard_engine::ports::AgentReply, switchyard_engine::ports::AgentError> {
        Ok(switchyard_engine::ports::AgentReply::Answer(serde_json::json!({
            "primary_output": { "response": format!("{}: {}", agent.id, "x".repeat(self.bytes)) },
            "confidence": 0.9,
        })))
    }
}

#[tokio::test]
async fn answers_at_the_dynamodb_item_limit_and_messages_at_the_sqs_limit_are_handled_as_documented() {
    let manifest = Arc::new(Manifest::load(&switchyard_tests::fixture("manifests/faults.yaml")).expect("manifest"));
    let topology = Topology::for_manifest(&manifest);
    let (ddb, sqs) = clients().await;
    let p = prefix();
    let urls =
        ensure_resources(&ddb, &sqs, &topology, &format!("{p}-table"), &format!("{p}-")).await.expect("resources");
    let store = Arc::new(DynamoStore::new(ddb, urls.table.clone()));
    let queue = Arc::new(SqsQueue::new(sqs, urls.queues.clone()));
    let clock = Arc::new(switchyard_engine::ports::TokioClock::new());
    // Two answers of 250 KB: each handoff fits an item; together they overflow the output's.
    let deps = Arc::new(switchyard_engine::Deps::new(
        manifest,
        store.clone(),
        queue.clone(),
        clock,
        Arc::new(Verbose { bytes: 250 * 1024 }),
        Default::default(),
    ));
    let _pollers = switchyard_engine::pollers::start(
        deps.clone(),
        &topology,
        switchyard_engine::pollers::PollerConfig { wait: Duration::from_secs(1), default_concurrency: 4 },
    );
    let body = serde_json::json!({ "query": "bravo pair question" }).to_string();
    let r = switchyard_engine::handlers::handle_http(
        &deps,
        switchyard_tests::api_request("POST", "/v1/queries", "", Some(&body), "analyst-1", ""),
    )
    .await;
    assert_eq!(r.status_code, 202, "{}", switchyard_tests::text_body(&r));
    let id = switchyard_tests::json_body(&r)["query_id"].as_str().expect("id").to_string();
    let mut output = None;
    for _ in 0..120 {
        if let Some(o) = store.get_output(&id).await.expect("store") {
            output = Some(o);
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let output = output.expect("the query finished on DynamoDB and SQS within a minute");
    assert_eq!(output.status, switchyard_model::contracts::OutputStatus::Success);
    assert!(output.caveats.iter().any(|c| c.contains("shortened")), "{:?}", output.caveats);
    let handoffs = store.list_handoffs(&id).await.expect("handoffs");
    assert_eq!(handoffs.len(), 2, "both 250 KB handoffs are stored whole");
    assert!(handoffs.iter().all(|h| switchyard_core::plan::handoffs::answer_text(&h.handoff).len() > 250 * 1024));

    // SQS: a message over 1 MiB is refused before sending; one at the job limit is a batch
    // item failure, never a crash.
    let big = message(&"x".repeat(switchyard_model::limits::SQS_MAX_MESSAGE_BYTES + 1), Duration::ZERO);
    assert!(matches!(queue.send(QueueId::route(), big).await, Err(QueueError::TooLarge(_))));
    let over_job_limit = "x".repeat(switchyard_model::jobs::MAX_JOB_BYTES + 1);
    let response = switchyard_engine::handlers::handle_sqs(
        &deps,
        switchyard_engine::handlers::Function::Router,
        switchyard_tests::sqs_event(&[&over_job_limit]),
    )
    .await
    .expect("handled");
    assert_eq!(response.batch_item_failures.len(), 1);
}
