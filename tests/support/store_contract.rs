//! The [`Store`] contract as checks that run against any adapter.
//!
//! Every check takes `&dyn Store`, makes its own ids (UUID v4), so checks can share a store
//! and run in parallel, and panics with a sentence saying what broke. To run them against an
//! adapter, include this file in a test target and call the checks (or [`all`]):
//!
//! ```ignore
//! #[path = "support/store_contract.rs"]
//! mod store_contract;
//!
//! #[tokio::test]
//! async fn the_memory_store_keeps_the_store_contract() {
//!     let store = switchyard_engine::memory::MemoryStore::new(/* … */);
//!     store_contract::all(&store).await;
//! }
//! ```
//!
//! Records are live for a day from the wall clock, expired ones expired a day ago; an adapter
//! on a virtual clock should start it near the wall clock.
#![allow(dead_code)]

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use std::collections::BTreeSet;
use std::sync::Arc;
use switchyard_engine::ports::{
    Event, EventKind, HandoffRecord, HandoffWrite, QueryRecord, QueryStatus, Store, StoreError,
};
use switchyard_model::contracts::{
    AgentHandoff, AgentResult, HandoffExecution, HandoffResult, HandoffStatus, OrchestratorOutput, OutputStatus,
    ParsedQuery,
};

// ------------------------------------------------------------------------------------------
// Fixtures
// ------------------------------------------------------------------------------------------

/// A fresh UUID v4.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Epoch seconds a day from now (live).
pub fn live() -> i64 {
    (Utc::now() + ChronoDuration::days(1)).timestamp()
}

/// Epoch seconds a day ago (expired, but not yet deleted by TTL).
pub fn expired() -> i64 {
    (Utc::now() - ChronoDuration::days(1)).timestamp()
}

/// A query record as intake writes it: accepted, version 0, no plan, empty fan-in set.
pub fn query(user_id: &str, idempotency_key: Option<&str>) -> QueryRecord {
    let query_id = new_id();
    let now = Utc::now();
    QueryRecord {
        query_id: query_id.clone(),
        user_id: user_id.to_string(),
        session_id: new_id(),
        roles: vec!["analyst".into()],
        idempotency_key: idempotency_key.map(str::to_string),
        request_hash: "sha256:abc".into(),
        manifest_fingerprint: "fp-1".into(),
        status: QueryStatus::Accepted,
        version: 0,
        parsed: std::sync::Arc::new(ParsedQuery {
            query_id,
            raw_query: "Why did Kisqali TRx drop in the Northeast last quarter?".into(),
            intent: "causal_analysis".into(),
            entities: vec![],
            confidence: 0.9,
            ambiguity_flag: false,
            context: None,
            timestamp: now,
        }),
        warnings: vec![],
        scope: None,
        plan: None,
        completed: BTreeSet::new(),
        accepted_at: now,
        deadline_at: Some(now + ChronoDuration::seconds(60)),
        synth_claimed_at: None,
        outcome: None,
        signal: None,
        approvals: Vec::new(),
        expires_at: live(),
    }
}

/// A successful handoff for `dispatch_id`, filling `slot`.
pub fn handoff(query_id: &str, dispatch_id: &str, slot: Option<&str>) -> HandoffRecord {
    let now = Utc::now();
    HandoffRecord {
        query_id: query_id.to_string(),
        slot: slot.map(str::to_string),
        attempts: 1,
        fallback_for: None,
        engine_caveats: vec![],
        handoff: AgentHandoff {
            dispatch_id: dispatch_id.to_string(),
            agent_id: "causal_impact".into(),
            agent_tier: 2,
            execution: HandoffExecution {
                status: HandoffStatus::Success,
                started_at: now,
                completed_at: now,
                latency_ms: 12,
            },
            result: HandoffResult {
                primary_output: serde_json::json!({"effect": -0.12}),
                confidence: 0.85,
                evidence: vec![],
                caveats: vec![],
            },
            artifacts: Default::default(),
            errors: Default::default(),
            metadata: Default::default(),
        },
        expires_at: live(),
    }
}

/// An event of `query_id` with `key`, at `at`.
pub fn event(query_id: &str, key: &str, at: DateTime<Utc>, kind: EventKind) -> Event {
    Event {
        query_id: query_id.to_string(),
        key: key.to_string(),
        at,
        kind,
        detail: std::sync::Arc::new(serde_json::json!({"key": key}).into()),
        expires_at: live(),
    }
}

/// A final output for `query_id`.
pub fn output(query_id: &str) -> OrchestratorOutput {
    OrchestratorOutput {
        query_id: query_id.to_string(),
        status: OutputStatus::Success,
        response_text: "Kisqali TRx fell 12% after the formulary change.".into(),
        response_confidence: 0.85,
        agents_dispatched: vec!["causal_impact".into()],
        agent_results: vec![AgentResult {
            agent_id: "causal_impact".into(),
            agent_tier: 2,
            status: HandoffStatus::Success,
            result: serde_json::json!({"effect": -0.12}),
            confidence: 0.85,
            latency_ms: 12,
            attempt_latency_ms: 12,
            error: None,
            attempts: 1,
            dispatch_id: "d-1".into(),
            fallback_for: None,
        }],
        citations: vec![],
        visualizations: vec![],
        follow_up_suggestions: vec![],
        total_latency_ms: 40,
        timestamp: Utc::now(),
        intent: "causal_analysis".into(),
        final_reason: None,
        caveats: vec![],
        warnings: vec![],
        error: None,
        qc_report: None,
        orchestration: None,
        reflection: None,
        session_id: "sess".into(),
        entities: vec![],
        missing_entities: vec![],
    }
}

fn event_keys(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.key.as_str()).collect()
}

#[track_caller]
fn assert_condition_failed<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::ConditionFailed(_)) => {}
        other => panic!("{what}: expected ConditionFailed, got {other:?}"),
    }
}

// ------------------------------------------------------------------------------------------
// Checks
// ------------------------------------------------------------------------------------------

/// Every check, one after the other.
pub async fn all(store: &dyn Store) {
    a_query_is_created_read_and_updated_under_optimistic_versions(store).await;
    creating_a_query_twice_fails_and_writes_no_event(store).await;
    an_idempotency_key_is_held_by_one_query_per_user(store).await;
    a_handoff_recorded_twice_is_a_duplicate_and_stored_once(store).await;
    concurrent_handoffs_lose_no_slot_and_exactly_one_sees_the_set_complete(store).await;
    finishing_a_query_twice_fails_the_second_time(store).await;
    expired_records_read_as_absent(store).await;
    an_oversized_record_is_refused_as_too_large(store).await;
    events_are_listed_in_time_order_and_appended_once_per_key(store).await;
    a_manifest_version_is_kept_once_under_its_fingerprint(store).await;
    a_callers_recent_queries_are_listed_newest_first_and_only_theirs(store).await;
    a_session_is_written_under_versions_per_caller_and_expires(store).await;
    finished_signals_are_listed_newest_first_a_page_at_a_time(store).await;
    a_write_call_is_claimed_once_and_its_outcome_recorded_once(store).await;
}

/// GIVEN a write tool call claimed by one delivery, THEN a second claim of the same call
/// (a redelivery, a duplicate) finds the record instead of claiming it, sees no outcome until
/// the first adds it, then sees that outcome; a second outcome is refused; another index of
/// the same dispatch is its own call; so are many concurrent claims of one call: one wins.
pub async fn a_write_call_is_claimed_once_and_its_outcome_recorded_once(store: &dyn Store) {
    use switchyard_engine::ports::{ToolCallOutcome, ToolCallRecord, ToolCallStatus, ToolClaim};
    let (query_id, dispatch_id) = (new_id(), new_id());
    let record = |index: u32| ToolCallRecord {
        query_id: query_id.clone(),
        dispatch_id: dispatch_id.clone(),
        index,
        tool: "orders.issue_refund".into(),
        arguments_digest: "ab12".into(),
        idempotency_key: ToolCallRecord::key_for(&dispatch_id, index),
        claimed_at: Utc::now(),
        outcome: None,
        expires_at: live(),
    };
    assert_eq!(store.claim_tool_call(&record(0)).await.expect("claim"), ToolClaim::Claimed, "the first claim wins");
    match store.claim_tool_call(&record(0)).await.expect("second claim") {
        ToolClaim::Recorded(found) => {
            assert_eq!((found.tool.as_str(), found.outcome.as_ref()), ("orders.issue_refund", None));
            assert_eq!(found.idempotency_key, format!("{dispatch_id}-call-0"));
        }
        ToolClaim::Claimed => panic!("a call was claimed twice"),
    }
    let outcome =
        ToolCallOutcome { status: ToolCallStatus::Ok, content: "refund R-9 issued".into(), completed_at: Utc::now() };
    store.finish_tool_call(&query_id, &dispatch_id, 0, &outcome).await.expect("finish");
    match store.claim_tool_call(&record(0)).await.expect("third claim") {
        ToolClaim::Recorded(found) => assert_eq!(found.outcome.as_ref(), Some(&outcome), "the outcome is replayed"),
        ToolClaim::Claimed => panic!("a finished call was claimed again"),
    }
    let again = ToolCallOutcome { content: "refund R-10 issued".into(), ..outcome.clone() };
    assert!(matches!(
        store.finish_tool_call(&query_id, &dispatch_id, 0, &again).await,
        Err(StoreError::ConditionFailed(_))
    ));
    assert!(
        matches!(store.finish_tool_call(&query_id, &dispatch_id, 7, &again).await, Err(StoreError::ConditionFailed(_))),
        "an outcome needs a claim"
    );
    let second = record(1);
    let claims = futures::future::join_all((0..8).map(|_| store.claim_tool_call(&second))).await;
    let won = claims.iter().filter(|c| matches!(c, Ok(ToolClaim::Claimed))).count();
    assert_eq!(won, 1, "exactly one of eight concurrent claims wins: {claims:?}");
}

/// GIVEN a session of one caller, THEN it is written under optimistic versions (a stale or
/// repeated first write fails), another caller's session with the same id is another record,
/// and an expired session reads as absent and may be started again at version 0.
pub async fn a_session_is_written_under_versions_per_caller_and_expires(store: &dyn Store) {
    use switchyard_engine::ports::SessionRecord;
    let id = format!("s-{}", new_id());
    let mut mine = SessionRecord::new("user#1", &id, chrono::Utc::now(), live());
    assert!(store.get_session("user#1", &id).await.expect("get").is_none());
    store.put_session(&mine, 0).await.expect("first write");
    assert!(matches!(store.put_session(&mine, 0).await, Err(StoreError::ConditionFailed(_))), "a second first write");
    let stored = store.get_session("user#1", &id).await.expect("get").expect("present");
    assert_eq!(stored.version, 1);
    mine.turn_count = 1;
    store.put_session(&mine, 1).await.expect("second write");
    assert!(matches!(store.put_session(&mine, 1).await, Err(StoreError::ConditionFailed(_))), "a stale version");
    assert_eq!(store.get_session("user#1", &id).await.expect("get").expect("present").turn_count, 1);
    // Another caller, same id (and a user id that would collide if `#` were not escaped).
    assert!(store.get_session("user", &id).await.expect("get").is_none());
    assert!(store.get_session("user#1#", &id).await.expect("get").is_none());
    let theirs = SessionRecord::new("user", &id, chrono::Utc::now(), live());
    store.put_session(&theirs, 0).await.expect("their own session");
    assert_eq!(store.get_session("user", &id).await.expect("get").expect("theirs").turn_count, 0);
    assert_eq!(store.get_session("user#1", &id).await.expect("get").expect("mine").turn_count, 1);
    // Expired.
    let gone_id = format!("s-{}", new_id());
    let gone = SessionRecord::new("u", &gone_id, chrono::Utc::now(), expired());
    store.put_session(&gone, 0).await.expect("write");
    assert!(store.get_session("u", &gone_id).await.expect("get").is_none());
    store.put_session(&SessionRecord::new("u", &gone_id, chrono::Utc::now(), live()), 0).await.expect("restart");
    assert_eq!(store.get_session("u", &gone_id).await.expect("get").expect("new").version, 1);
}

/// Manifests are stored once per fingerprint: a second put changes nothing; an unknown
/// fingerprint reads as absent.
pub async fn a_manifest_version_is_kept_once_under_its_fingerprint(store: &dyn Store) {
    let fingerprint = new_id();
    assert_eq!(store.get_manifest(&fingerprint).await.expect("get"), None);
    store.put_manifest(&fingerprint, r#"{"version":1}"#).await.expect("put");
    store.put_manifest(&fingerprint, r#"{"version":2}"#).await.expect("a second put succeeds");
    assert_eq!(store.get_manifest(&fingerprint).await.expect("get").as_deref(), Some(r#"{"version":1}"#));
}

/// GIVEN a created query, WHEN it is updated with the right and then a stale version, THEN
/// the first update bumps the version and logs its event, the second fails and logs nothing,
/// and updates never touch the fan-in set.
pub async fn a_query_is_created_read_and_updated_under_optimistic_versions(store: &dyn Store) {
    let q = query(&new_id(), None);
    let accepted = event(&q.query_id, "0001-accepted", q.accepted_at, EventKind::Accepted);
    store.create_query(&q, &[accepted]).await.expect("create");
    assert_eq!(store.get_query(&q.query_id).await.expect("read"), Some(q.clone()), "read back as written");

    let mut routed = q.clone();
    routed.status = QueryStatus::Routed;
    routed.warnings = vec!["entities truncated".into()];
    routed.version = 41; // ignored: the store sets expected + 1
    let route = event(&q.query_id, "0002-route", q.accepted_at + ChronoDuration::milliseconds(5), EventKind::Route);
    store.update_query(&routed, 0, &[route]).await.expect("update at version 0");
    let read = store.get_query(&q.query_id).await.expect("read").expect("present");
    assert_eq!((read.status, read.version), (QueryStatus::Routed, 1), "status replaced, version bumped to 1");
    assert_eq!(read.warnings, routed.warnings);

    let stale = event(&q.query_id, "0003-stale", q.accepted_at + ChronoDuration::milliseconds(9), EventKind::Plan);
    assert_condition_failed(store.update_query(&routed, 0, &[stale]).await, "update at a stale version");
    let keys: Vec<String> = store.list_events(&q.query_id).await.expect("events").into_iter().map(|e| e.key).collect();
    assert_eq!(keys, ["0001-accepted", "0002-route"], "the failed update wrote no event");

    // The fan-in set belongs to record_handoff: an update carrying an empty set keeps it.
    let h = handoff(&q.query_id, "d-1", Some("d-1"));
    store.record_handoff(Arc::new(h.clone()), &[]).await.expect("handoff");
    let mut later = read.clone();
    later.completed.clear();
    store.update_query(&later, 1, &[]).await.expect("update at version 1");
    let read = store.get_query(&q.query_id).await.expect("read").expect("present");
    assert_eq!(read.version, 2);
    assert_eq!(read.completed, BTreeSet::from(["d-1".to_string()]), "update_query left the fan-in set alone");

    assert_condition_failed(store.update_query(&query(&new_id(), None), 0, &[]).await, "update of a missing query");
}

/// GIVEN a query, WHEN it is created again, THEN the second create fails and writes nothing.
pub async fn creating_a_query_twice_fails_and_writes_no_event(store: &dyn Store) {
    let q = query(&new_id(), None);
    store
        .create_query(&q, &[event(&q.query_id, "0001-accepted", q.accepted_at, EventKind::Accepted)])
        .await
        .expect("create");
    let mut again = q.clone();
    again.session_id = "other".into();
    let second = event(&q.query_id, "0001-accepted-again", q.accepted_at, EventKind::Accepted);
    assert_condition_failed(store.create_query(&again, &[second]).await, "second create");
    assert_eq!(store.get_query(&q.query_id).await.expect("read").expect("present").session_id, q.session_id);
    assert_eq!(event_keys(&store.list_events(&q.query_id).await.expect("events")), ["0001-accepted"]);
}

/// GIVEN a query holding an idempotency key, WHEN another query of the same user claims it,
/// THEN that create fails and writes nothing; another user may use the same key.
pub async fn an_idempotency_key_is_held_by_one_query_per_user(store: &dyn Store) {
    let user = new_id();
    let key = format!("retry-{}", new_id());
    let first = query(&user, Some(&key));
    store.create_query(&first, &[]).await.expect("create with key");
    assert_eq!(store.find_idempotency_key(&user, &key).await.expect("find"), Some(first.query_id.clone()));

    let second = query(&user, Some(&key));
    assert_condition_failed(store.create_query(&second, &[]).await, "second query with a held key");
    assert_eq!(store.get_query(&second.query_id).await.expect("read"), None, "the losing query was not written");
    assert_eq!(store.find_idempotency_key(&user, &key).await.expect("find"), Some(first.query_id.clone()));

    let other_user = query(&new_id(), Some(&key));
    store.create_query(&other_user, &[]).await.expect("another user's key is separate");
    assert_eq!(store.find_idempotency_key(&user, "never-used").await.expect("find"), None);
}

/// GIVEN a recorded handoff, WHEN the same dispatch's handoff is recorded again, THEN it is a
/// duplicate: one handoff stored, no second event.
pub async fn a_handoff_recorded_twice_is_a_duplicate_and_stored_once(store: &dyn Store) {
    let q = query(&new_id(), None);
    store.create_query(&q, &[]).await.expect("create");
    let h = handoff(&q.query_id, "d-1", Some("d-1"));
    let first = store
        .record_handoff(Arc::new(h.clone()), &[event(&q.query_id, "0005-handoff-d-1", Utc::now(), EventKind::Handoff)])
        .await
        .expect("first handoff");
    assert_eq!(first, HandoffWrite::Recorded { completed: BTreeSet::from(["d-1".to_string()]) });

    let mut retry = h.clone();
    retry.attempts = 2;
    let second = store
        .record_handoff(
            Arc::new(retry.clone()),
            &[event(&q.query_id, "0006-handoff-d-1-again", Utc::now(), EventKind::Handoff)],
        )
        .await
        .expect("second handoff");
    assert_eq!(second, HandoffWrite::Duplicate);
    assert_eq!(
        store.list_handoffs(&q.query_id).await.expect("list"),
        vec![Arc::new(h.clone())],
        "one handoff, the first"
    );
    assert_eq!(store.get_handoff(&q.query_id, "d-1").await.expect("get").as_deref(), Some(&h));
    assert_eq!(event_keys(&store.list_events(&q.query_id).await.expect("events")), ["0005-handoff-d-1"]);

    // A handoff that fills no slot (handed over to a fallback) leaves the set as it is.
    let handover = handoff(&q.query_id, "d-2", None);
    let write = store.record_handoff(Arc::new(handover.clone()), &[]).await.expect("handover");
    assert_eq!(write, HandoffWrite::Recorded { completed: BTreeSet::from(["d-1".to_string()]) });
}

/// GIVEN a query with eight slots, WHEN their handoffs are recorded concurrently, THEN every
/// slot is in the fan-in set and exactly one writer saw the set complete (docs/architecture.md#rules, rule 3).
pub async fn concurrent_handoffs_lose_no_slot_and_exactly_one_sees_the_set_complete(store: &dyn Store) {
    let q = query(&new_id(), None);
    store.create_query(&q, &[]).await.expect("create");
    let slots: Vec<String> = (1..=8).map(|i| format!("d-{i}")).collect();
    let records: Vec<HandoffRecord> = slots.iter().map(|s| handoff(&q.query_id, s, Some(s))).collect();
    let writes =
        futures::future::join_all(records.iter().map(|r| store.record_handoff(Arc::new(r.clone()), &[]))).await;
    let all: BTreeSet<String> = slots.iter().cloned().collect();
    let mut complete = 0;
    for (slot, write) in slots.iter().zip(writes) {
        match write.expect("concurrent handoff") {
            HandoffWrite::Recorded { completed } => {
                assert!(completed.contains(slot), "{slot}'s own write includes its slot: {completed:?}");
                complete += usize::from(completed == all);
            }
            HandoffWrite::Duplicate => panic!("{slot} is not a duplicate"),
        }
    }
    assert_eq!(complete, 1, "exactly one writer completes the fan-in");
    let read = store.get_query(&q.query_id).await.expect("read").expect("present");
    assert_eq!(read.completed, all, "no slot lost");
    assert_eq!(store.list_handoffs(&q.query_id).await.expect("list").len(), 8);
}

/// GIVEN a finished query, WHEN it is finished again, THEN the second finish fails whether its
/// version is stale or current (the output exists), and the first output stays.
pub async fn finishing_a_query_twice_fails_the_second_time(store: &dyn Store) {
    let q = query(&new_id(), None);
    store.create_query(&q, &[]).await.expect("create");
    let mut done = q.clone();
    done.status = QueryStatus::Done;
    done.outcome = Some(OutputStatus::Success);
    let out = output(&q.query_id);
    let last = event(&q.query_id, "9999-final", Utc::now(), EventKind::Final);
    store.finish_query(Arc::new(out.clone()), &done, 0, &[last]).await.expect("first finish");
    assert_eq!(store.get_output(&q.query_id).await.expect("output").as_deref(), Some(&out));
    let read = store.get_query(&q.query_id).await.expect("read").expect("present");
    assert_eq!((read.status, read.version, read.outcome), (QueryStatus::Done, 1, Some(OutputStatus::Success)));

    let mut other = output(&q.query_id);
    other.response_text = "a second answer".into();
    assert_condition_failed(
        store.finish_query(Arc::new(other.clone()), &done, 0, &[]).await,
        "second finish at the old version",
    );
    assert_condition_failed(
        store.finish_query(Arc::new(other.clone()), &done, 1, &[]).await,
        "second finish at the current version",
    );
    assert_eq!(store.get_output(&q.query_id).await.expect("output").as_deref(), Some(&out), "the first output stays");
    assert_eq!(store.get_query(&q.query_id).await.expect("read").expect("present").version, 1);
    assert_eq!(event_keys(&store.list_events(&q.query_id).await.expect("events")), ["9999-final"]);
    assert_eq!(store.get_output(&new_id()).await.expect("output"), None);
}

/// GIVEN records whose `expires_at` has passed but which are still stored, THEN they read as
/// absent, and a query id whose record expired can be created again.
pub async fn expired_records_read_as_absent(store: &dyn Store) {
    let mut q = query(&new_id(), Some(&new_id()));
    q.expires_at = expired();
    let mut old = event(&q.query_id, "0001-accepted", q.accepted_at, EventKind::Accepted);
    old.expires_at = expired();
    store.create_query(&q, &[old]).await.expect("create an expired record");
    assert_eq!(store.get_query(&q.query_id).await.expect("read"), None, "expired query reads as None");
    let key = q.idempotency_key.clone().unwrap_or_default();
    assert_eq!(store.find_idempotency_key(&q.user_id, &key).await.expect("find"), None, "expired key reads as None");
    assert!(store.list_events(&q.query_id).await.expect("events").is_empty(), "expired events are not listed");

    let mut h = handoff(&q.query_id, "d-1", None);
    h.expires_at = expired();
    store.record_handoff(Arc::new(h.clone()), &[]).await.expect("handoff");
    assert_eq!(store.get_handoff(&q.query_id, "d-1").await.expect("get"), None);
    assert!(store.list_handoffs(&q.query_id).await.expect("list").is_empty());

    let mut fresh = q.clone();
    fresh.expires_at = live();
    store.create_query(&fresh, &[]).await.expect("an expired record counts as absent for create");
    assert_eq!(store.get_query(&q.query_id).await.expect("read"), Some(fresh));
}

/// GIVEN a query whose record would exceed 400 KB, THEN it is refused as too large and
/// nothing is written.
pub async fn an_oversized_record_is_refused_as_too_large(store: &dyn Store) {
    let mut q = query(&new_id(), None);
    std::sync::Arc::make_mut(&mut q.parsed).raw_query = "x".repeat(420 * 1024);
    match store.create_query(&q, &[]).await {
        Err(StoreError::TooLarge(message)) => assert!(!message.is_empty()),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(store.get_query(&q.query_id).await.expect("read"), None);

    let small = query(&new_id(), None);
    store.create_query(&small, &[]).await.expect("create");
    let mut h = handoff(&small.query_id, "d-1", Some("d-1"));
    h.handoff.result.primary_output = serde_json::json!({"blob": "y".repeat(420 * 1024)});
    assert!(
        matches!(store.record_handoff(Arc::new(h.clone()), &[]).await, Err(StoreError::TooLarge(_))),
        "oversized handoff"
    );
    assert!(store.get_query(&small.query_id).await.expect("read").expect("present").completed.is_empty());
}

/// GIVEN events appended out of order, some twice, THEN the log lists each key once, ordered
/// by `(at, key)`.
pub async fn events_are_listed_in_time_order_and_appended_once_per_key(store: &dyn Store) {
    let q = query(&new_id(), None);
    let t0 = q.accepted_at;
    store.create_query(&q, &[event(&q.query_id, "a-accepted", t0, EventKind::Accepted)]).await.expect("create");
    let ms = ChronoDuration::milliseconds;
    let retry = event(&q.query_id, "m-retry", t0 + ms(30), EventKind::Retry);
    store
        .append_events(&[
            retry.clone(),
            event(&q.query_id, "z-dispatch", t0 + ms(10), EventKind::Dispatch),
            event(&q.query_id, "b-dispatch", t0 + ms(10), EventKind::Dispatch),
        ])
        .await
        .expect("append");
    let mut later = retry.clone();
    later.at = t0 + ms(99);
    store.append_events(&[later, retry.clone()]).await.expect("append again");
    let events = store.list_events(&q.query_id).await.expect("events");
    assert_eq!(event_keys(&events), ["a-accepted", "b-dispatch", "z-dispatch", "m-retry"]);
    assert_eq!(events[3], retry, "a repeated key keeps the first event");
    assert!(store.list_events(&new_id()).await.expect("events").is_empty());
}

/// A caller's recent queries: only their own, live ones, newest first, at most `limit`.
pub async fn a_callers_recent_queries_are_listed_newest_first_and_only_theirs(store: &dyn Store) {
    // GIVEN three live queries of one user a second apart, an expired one, and another user's.
    let user = new_id();
    let mut ids = Vec::new();
    for i in 0..3 {
        let mut q = query(&user, None);
        q.accepted_at = Utc::now() - ChronoDuration::seconds(10 - i);
        store.create_query(&q, &[]).await.expect("create");
        ids.push(q.query_id);
    }
    let mut gone = query(&user, None);
    gone.expires_at = expired();
    store.create_query(&gone, &[]).await.expect("create expired");
    store.create_query(&query(&new_id(), None), &[]).await.expect("create another user's");

    // WHEN the user lists them (the per-user index may lag a moment on DynamoDB).
    let mut listed = Vec::new();
    for _ in 0..50 {
        listed = store.list_user_queries(&user, 10).await.expect("list");
        if listed.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // THEN they come newest first, without the expired or the other user's query.
    let listed_ids: Vec<&str> = listed.iter().map(|q| q.query_id.as_str()).collect();
    assert_eq!(listed_ids, [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()], "newest first, only live, only theirs");
    assert!(listed.iter().all(|q| q.user_id == user), "every listed query belongs to the caller");
    let two = store.list_user_queries(&user, 2).await.expect("list two");
    assert_eq!(two.len(), 2, "the limit caps the list");
    assert_eq!(two[0].query_id, ids[2]);
    assert!(store.list_user_queries(&new_id(), 10).await.expect("list nobody's").is_empty());
}

/// A query whose finished training signal was recorded at `recorded_at`.
pub fn query_with_signal(recorded_at: DateTime<Utc>, finished: bool) -> QueryRecord {
    let mut q = query(&new_id(), None);
    q.status = if finished { QueryStatus::Done } else { QueryStatus::Routed };
    let signal = switchyard_model::contracts::RoutingTrainingSignal {
        signal_id: q.query_id.clone(),
        session_id: q.session_id.clone(),
        query: q.parsed.raw_query.clone(),
        query_pattern: "causal_analysis".into(),
        intent: "causal_analysis".into(),
        entities_extracted: vec!["brand:Kisqali".into()],
        agents_selected: vec!["causal_impact".into()],
        routing_confidence: 0.9,
        routing_rationale: "embedded classifier: causal_analysis (0.90)".into(),
        agents_succeeded: 1,
        agents_failed: 0,
        total_latency_ms: 1_500.0,
        user_satisfaction: None,
        answer_quality: Some(0.8),
        was_rerouted: false,
    };
    q.signal = Some(std::sync::Arc::new(switchyard_core::signals::collect::StoredSignal {
        signal,
        recorded_at,
        outcome_at: finished.then_some(recorded_at),
        feedback: None,
        feedback_at: None,
    }));
    q
}

/// Every page of finished signals between `oldest` and `newest`, `limit` at a time.
pub async fn signal_pages(
    store: &dyn Store,
    oldest: DateTime<Utc>,
    newest: DateTime<Utc>,
    limit: usize,
) -> Vec<Vec<switchyard_core::signals::SignalRecord>> {
    let mut request = switchyard_engine::ports::SignalPageRequest { newest, oldest, after: None, limit };
    let mut pages = Vec::new();
    loop {
        let page = store.list_signals(&request).await.expect("list signals");
        pages.push(page.records);
        match page.next {
            Some(next) => request.after = Some(next),
            None => return pages,
        }
        assert!(pages.len() < 100, "paging does not end");
    }
}

/// Finished signals are listed newest first, a page at a time, across days, within the asked
/// time range; unfinished and expired ones are not listed; feedback written on the record shows
/// in the listing; a malformed cursor is refused.
pub async fn finished_signals_are_listed_newest_first_a_page_at_a_time(store: &dyn Store) {
    // GIVEN five finished signals 7 hours apart (three days' buckets) at a time no other check
    // uses, an unfinished one and an expired one among them.
    let days_back = 30 + (uuid::Uuid::new_v4().as_u128() % 300) as i64;
    let base = Utc::now() - ChronoDuration::days(days_back);
    let mut ids = Vec::new();
    for i in 0..5 {
        let q = query_with_signal(base + ChronoDuration::hours(7 * i), true);
        store.create_query(&q, &[]).await.expect("create");
        ids.push(q.query_id);
    }
    store.create_query(&query_with_signal(base + ChronoDuration::hours(3), false), &[]).await.expect("unfinished");
    let mut gone = query_with_signal(base + ChronoDuration::hours(4), true);
    gone.expires_at = expired();
    store.create_query(&gone, &[]).await.expect("expired");
    let (oldest, newest) = (base - ChronoDuration::hours(1), base + ChronoDuration::days(2));

    // WHEN they are read two at a time (the index may lag a moment on DynamoDB).
    let mut pages = Vec::new();
    for _ in 0..50 {
        pages = signal_pages(store, oldest, newest, 2).await;
        if pages.iter().map(Vec::len).sum::<usize>() >= 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // THEN every finished live signal comes once, newest first, at most two per page.
    let listed: Vec<&str> = pages.iter().flatten().map(|r| r.signal.signal_id.as_str()).collect();
    let want: Vec<&str> = ids.iter().rev().map(String::as_str).collect();
    assert_eq!(listed, want, "newest first, each once, neither the unfinished nor the expired one");
    assert!(pages.iter().all(|p| p.len() <= 2), "a page holds at most the limit: {:?}", pages.iter().map(Vec::len));
    assert!(pages.len() >= 3, "five signals two at a time take three pages");
    let record = &pages[0][0];
    assert!((0.0..=1.0).contains(&record.reward) && record.reward > 0.9, "reward {}", record.reward);
    assert_eq!(record.recorded_at, base + ChronoDuration::hours(28));

    // AND the range bounds the listing.
    let recent = signal_pages(store, base + ChronoDuration::hours(14), newest, 10).await;
    let recent: Vec<&str> = recent.iter().flatten().map(|r| r.signal.signal_id.as_str()).collect();
    assert_eq!(recent, want[..3].to_vec(), "only signals recorded at or after `oldest`");

    // AND feedback written on a record shows in the listing.
    let mut rated = store.get_query(&ids[4]).await.expect("read").expect("present");
    let version = rated.version;
    if let Some(s) = rated.signal.as_mut().map(std::sync::Arc::make_mut) {
        s.feedback =
            Some(switchyard_core::signals::Feedback { rating: 1, correct_intent: Some("other".into()), comment: None });
    }
    store.update_query(&rated, version, &[]).await.expect("feedback write");
    let mut top = None;
    for _ in 0..50 {
        let page = store
            .list_signals(&switchyard_engine::ports::SignalPageRequest { newest, oldest, after: None, limit: 1 })
            .await
            .expect("list");
        top = page.records.into_iter().next();
        if top.as_ref().is_some_and(|r| r.signal.user_satisfaction.is_some()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let top = top.expect("the newest signal");
    assert_eq!(top.signal.user_satisfaction, Some(1.0));
    assert_eq!(top.correct_intent.as_deref(), Some("other"));
    assert!(top.signal.was_rerouted, "a correction marks the routing wrong");

    // AND a malformed cursor is refused.
    let bad =
        switchyard_engine::ports::SignalPageRequest { newest, oldest, after: Some("not a cursor".into()), limit: 2 };
    assert!(matches!(store.list_signals(&bad).await, Err(StoreError::Corrupt(_))), "a malformed cursor is refused");
}
