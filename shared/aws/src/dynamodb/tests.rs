use super::*;
use aws_sdk_dynamodb::primitives::Blob;
use chrono::DateTime;
use chrono::TimeZone;
use switchyard_engine::ports::EventKind;
use switchyard_engine::ports::QueryStatus;
use switchyard_model::contracts::{
    AgentHandoff, AgentResult, Citation, CitationSourceType, EntitySource, HandoffExecution, HandoffResult,
    HandoffStatus, OutputStatus, ParsedEntity, ParsedQuery,
};

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + seconds, 123_456_000).single().expect("valid time")
}

fn query() -> QueryRecord {
    QueryRecord {
        query_id: "9b2f0c1e-0000-4000-8000-000000000001".into(),
        user_id: "user#1".into(),
        session_id: "s-1".into(),
        roles: vec!["analyst".into()],
        idempotency_key: Some("key-1".into()),
        request_hash: "abc".into(),
        manifest_fingerprint: "fp".into(),
        status: QueryStatus::Routed,
        version: 3,
        parsed: std::sync::Arc::new(ParsedQuery {
            query_id: "9b2f0c1e-0000-4000-8000-000000000001".into(),
            raw_query: "Why did Kisqali TRx drop in the Northeast?".into(),
            intent: "causal_analysis".into(),
            entities: vec![ParsedEntity {
                entity_type: "brand".into(),
                text: String::new(),
                value: "Kisqali".into(),
                confidence: 0.9,
                source: EntitySource::Exact,
            }],
            confidence: 0.8,
            ambiguity_flag: false,
            context: None,
            timestamp: at(0),
        }),
        warnings: vec!["w".into()],
        scope: None,
        plan: None,
        completed: ["d-1".to_string(), "d-2".to_string()].into_iter().collect(),
        accepted_at: at(1),
        deadline_at: Some(at(60)),
        synth_claimed_at: None,
        outcome: None,
        signal: None,
        approvals: Vec::new(),
        expires_at: 1_790_086_400,
    }
}

fn handoff(slot: Option<&str>) -> HandoffRecord {
    HandoffRecord {
        query_id: "q-1".into(),
        slot: slot.map(str::to_string),
        attempts: 2,
        fallback_for: None,
        engine_caveats: vec!["slow".into()],
        handoff: AgentHandoff {
            dispatch_id: "d-1".into(),
            agent_id: "causal_impact".into(),
            agent_tier: 2,
            execution: HandoffExecution {
                status: HandoffStatus::Success,
                started_at: at(2),
                completed_at: at(3),
                latency_ms: 1_000,
            },
            result: HandoffResult {
                primary_output: serde_json::json!({"effect": -0.12}),
                confidence: 0.83,
                evidence: vec![],
                caveats: vec![],
            },
            artifacts: Default::default(),
            errors: Default::default(),
            metadata: Default::default(),
        },
        expires_at: 1_790_086_400,
    }
}

fn event(key: &str, seconds: i64) -> Event {
    Event {
        query_id: "q-1".into(),
        key: key.into(),
        at: at(seconds),
        kind: EventKind::Dispatch,
        detail: std::sync::Arc::new(serde_json::json!({"dispatch_id": "d-1"}).into()),
        expires_at: 1_790_086_400,
    }
}

fn output() -> OrchestratorOutput {
    OrchestratorOutput {
        query_id: "q-1".into(),
        status: OutputStatus::Partial,
        response_text: "TRx fell 12%.".into(),
        response_confidence: 0.7,
        agents_dispatched: vec!["causal_impact".into()],
        agent_results: vec![AgentResult {
            agent_id: "causal_impact".into(),
            agent_tier: 2,
            status: HandoffStatus::Success,
            result: serde_json::json!({"effect": -0.12}),
            confidence: 0.83,
            latency_ms: 1_000,
            attempt_latency_ms: 1_000,
            error: None,
            attempts: 1,
            dispatch_id: "d-1".into(),
            fallback_for: None,
        }],
        citations: vec![Citation {
            source_type: CitationSourceType::AgentActivity,
            source_id: "d-1".into(),
            relevance: 0.9,
            text: None,
            agent_id: None,
        }],
        visualizations: vec![],
        follow_up_suggestions: vec!["And in the West?".into()],
        total_latency_ms: 4_000,
        timestamp: at(4),
        intent: "causal_analysis".into(),
        final_reason: None,
        caveats: vec![],
        warnings: vec![],
        error: None,
        qc_report: None,
        orchestration: Some(serde_json::json!({"critique": {"accepted": true}})),
        reflection: None,
        session_id: "s-1".into(),
        entities: vec![],
        missing_entities: vec![],
    }
}

fn fan_in_item(arrivals: &[(&str, &str)]) -> Item {
    let mut item = Item::new();
    item.insert(PK.into(), s("Q#q-1"));
    item.insert(SK.into(), s(SK_FANIN));
    let list = arrivals
        .iter()
        .map(|(d, slot)| {
            let mut m = HashMap::new();
            m.insert("d".to_string(), s(*d));
            m.insert("s".to_string(), s(*slot));
            AttributeValue::M(m)
        })
        .collect();
    item.insert(ARRIVALS.into(), AttributeValue::L(list));
    item
}

#[test]
fn a_query_record_survives_the_round_trip_through_its_items() {
    let q = query();
    let item = query_item(&q, &[event("00-10-accepted", 0)]).expect("encodes");
    assert_eq!(get_s(&item, PK), Some("Q#9b2f0c1e-0000-4000-8000-000000000001"));
    assert_eq!(get_s(&item, SK), Some("META"));
    assert_eq!(get_s(&item, STATUS), Some("routed"));
    assert_eq!(get_n(&item, VERSION), Some("3"));
    assert_eq!(get_n(&item, EXPIRES_AT), Some("1790086400"));
    assert_eq!(get_s(&item, GSI1PK), Some("U#user#1"));
    assert_eq!(get_s(&item, GSI1SK), Some("2026-09-21T14:13:21.123456Z"));
    assert!(matches!(item.get(DOC), Some(AttributeValue::B(_))), "the record is stored compressed");
    assert!(item.contains_key("ev_3"), "the events of the write that made version 3");
    let fan_in = fan_in_item(&[("d-2", "d-2"), ("d-1", "d-1")]);
    assert_eq!(query_from_items(&item, Some(&fan_in)).expect("decodes"), q);
    let mut without = q.clone();
    without.completed.clear();
    assert_eq!(query_from_items(&item, None).expect("decodes"), without, "no fan-in item: an empty set");
    let mut logged = event("00-10-accepted", 0);
    logged.query_id = q.query_id.clone();
    assert_eq!(events_of(&item).expect("events"), vec![logged], "the query id comes from the item");
}

#[test]
fn a_compressed_record_is_a_fraction_of_its_json() {
    let q = query();
    let json = serde_json::to_vec(&q).expect("json").len();
    let item = query_item(&q, &[]).expect("encodes");
    let Some(AttributeValue::B(doc)) = item.get(DOC) else { panic!("doc is binary") };
    assert!(doc.as_ref().len() < json, "{} compressed vs {json} bytes of JSON", doc.as_ref().len());
}

#[test]
fn a_document_deflated_before_the_dictionary_is_still_read() {
    let q = query();
    let mut item = query_item(&q, &[]).expect("encodes");
    let mut doc = to_doc("query", &q).expect("json");
    doc.as_object_mut().expect("object").remove(COMPLETED);
    let plain = miniz_oxide::deflate::compress_to_vec(&serde_json::to_vec(&doc).expect("json"), 6);
    item.insert(DOC.into(), AttributeValue::B(Blob::new(plain)));
    let mut without = q.clone();
    without.completed.clear();
    assert_eq!(query_from_items(&item, None).expect("decodes"), without);
}

#[test]
fn typed_attributes_win_over_the_doc_on_read() {
    let q = query();
    let mut item = query_item(&q, &[]).expect("encodes");
    item.insert(STATUS.into(), s("done"));
    item.insert(VERSION.into(), n(9));
    let read = query_from_items(&item, Some(&fan_in_item(&[("x", "d-9")]))).expect("decodes");
    assert_eq!(read.status, QueryStatus::Done);
    assert_eq!(read.version, 9);
    assert_eq!(read.completed, ["d-9".to_string()].into_iter().collect());
}

#[test]
fn a_plain_json_doc_is_read_as_well() {
    let e = event("k", 0);
    let item = event_item(&e).expect("encodes");
    assert!(matches!(item.get(DOC), Some(AttributeValue::S(_))));
    assert_eq!(event_from_item(&item).expect("decodes"), e);
    let mut h = handoff_item(&handoff(Some("d-1")), &[]).expect("encodes");
    let plain = serde_json::to_string(&handoff(Some("d-1"))).expect("json");
    h.insert(DOC.into(), s(plain));
    assert_eq!(handoff_from_item(&h).expect("decodes"), handoff(Some("d-1")));
}

#[test]
fn update_fields_carry_the_next_version_and_never_the_fan_in_set() {
    let fields = query_fields(&query(), 4).expect("encodes");
    assert_eq!(get_n(&fields, VERSION), Some("4"));
    assert!(!fields.contains_key(COMPLETED) && !fields.contains_key(PK) && !fields.contains_key(OUT));
    let doc: serde_json::Value = unpack("query", &fields, DOC).expect("decodes").expect("doc");
    assert_eq!(doc["version"], 4);
    assert!(doc.get("completed").is_none(), "the set lives only in the fan-in item");
    assert_eq!(events_attribute(4), "ev_4");
}

#[test]
fn handoff_and_event_records_survive_the_round_trip_with_their_events() {
    for record in [handoff(Some("d-1")), handoff(None)] {
        let item = handoff_item(&record, &[event("00-60-handoff-d-1", 3)]).expect("encodes");
        assert_eq!(get_s(&item, SK), Some("H#d-1"));
        assert_eq!(get_s(&item, SLOT), record.slot.as_deref());
        assert_eq!(get_s(&item, STATUS), Some("success"));
        assert_eq!(handoff_from_item(&item).expect("decodes"), record);
        assert_eq!(events_of(&item).expect("events"), vec![event("00-60-handoff-d-1", 3)]);
    }
    let e = event("0003-dispatch-d-1", 5);
    let item = event_item(&e).expect("encodes");
    assert_eq!(get_s(&item, SK), Some("E#0003-dispatch-d-1"));
    assert_eq!(events_of(&item).expect("events"), vec![e]);
}

#[test]
fn an_output_survives_the_round_trip_through_its_attribute() {
    let o = output();
    let mut item = meta_key("q-1");
    item.insert(OUT.into(), packed("output", &o).expect("encodes"));
    assert_eq!(unpack::<OrchestratorOutput>("output", &item, OUT).expect("decodes"), Some(o));
    assert_eq!(unpack::<OrchestratorOutput>("output", &meta_key("q-1"), OUT).expect("absent"), None);
}

#[test]
fn a_fan_in_item_reads_back_as_its_arrivals_in_order() {
    let item = fan_in_item(&[("d-2", "s-2"), ("d-1", "s-1")]);
    let arrivals = arrivals_of(&item).expect("decodes");
    assert_eq!(arrivals.iter().map(|a| a.dispatch_id.as_str()).collect::<Vec<_>>(), ["d-2", "d-1"]);
    assert_eq!(fanin::completed_through(&arrivals, "d-2"), Some(["s-2".to_string()].into_iter().collect()));
    let mut broken = item.clone();
    broken.insert(ARRIVALS.into(), AttributeValue::L(vec![s("not a map")]));
    assert!(matches!(arrivals_of(&broken), Err(StoreError::Corrupt(_))));
}

#[test]
fn idempotency_keys_cannot_collide_across_users() {
    assert_eq!(idempotency_pk("u1", "k"), "IDEM#u1#k");
    assert_ne!(idempotency_pk("a#b", "c"), idempotency_pk("a", "b#c"));
    assert_ne!(idempotency_pk("a%23b", "c"), idempotency_pk("a#b", "c"));
    let item = idempotency_item("u1", "k", "q-1", 7);
    assert_eq!((get_s(&item, SK), get_s(&item, QUERY_ID)), (Some("IDEM"), Some("q-1")));
}

#[test]
fn an_item_without_a_readable_doc_is_corrupt() {
    let mut item = event_item(&event("k", 0)).expect("encodes");
    item.insert(DOC.into(), s("{not json"));
    assert!(matches!(event_from_item(&item), Err(StoreError::Corrupt(_))));
    item.insert(DOC.into(), AttributeValue::B(Blob::new(b"not deflate".to_vec())));
    assert!(matches!(event_from_item(&item), Err(StoreError::Corrupt(_))));
    item.remove(DOC);
    assert!(matches!(event_from_item(&item), Err(StoreError::Corrupt(_))));
    let mut item = query_item(&query(), &[]).expect("encodes");
    item.insert(STATUS.into(), s("lost"));
    assert!(matches!(query_from_items(&item, None), Err(StoreError::Corrupt(_))));
}

#[test]
fn expiry_is_read_from_the_ttl_attribute() {
    let item = event_item(&event("k", 0)).expect("encodes");
    assert!(!is_expired(&item, 1_790_086_399));
    assert!(is_expired(&item, 1_790_086_401));
}

#[test]
fn oversized_records_are_refused_before_compression() {
    let mut q = query();
    std::sync::Arc::make_mut(&mut q.parsed).raw_query = "x".repeat(DYNAMODB_MAX_ITEM_BYTES);
    match query_item(&q, &[]) {
        Err(StoreError::TooLarge(message)) => assert!(message.contains("query is"), "{message}"),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let small = event_item(&event("k", 0)).expect("encodes");
    let exact: usize = small.iter().map(|(k, v)| k.len() + value_size(v)).sum();
    assert!(item_size(&small) >= exact);
    assert!(item_size(&small) >= billed_size(&small));
    assert!(check_size("event", &small).is_ok());
}

#[test]
fn units_are_billed_per_started_kilobyte_and_at_least_one() {
    assert_eq!(units(0, WRITE_UNIT_BYTES), 1);
    assert_eq!(units(1024, WRITE_UNIT_BYTES), 1);
    assert_eq!(units(1025, WRITE_UNIT_BYTES), 2);
    assert_eq!(units(4097, READ_UNIT_BYTES), 2);
}

#[test]
fn cancellation_reasons_name_the_condition_that_failed() {
    let reason = |code: &str| Reason { code: code.into(), message: String::new() };
    let e = TxError::Cancelled(vec![reason("None"), reason("ConditionalCheckFailed"), reason("None")]);
    match e.into_store_error(&["query exists", "idempotency key held"]) {
        StoreError::ConditionFailed(label) => assert_eq!(label, "idempotency key held"),
        other => panic!("expected ConditionFailed, got {other:?}"),
    }
    assert!(conflict_only(&[reason("None"), reason("TransactionConflict")]));
    assert!(!conflict_only(&[reason("ConditionalCheckFailed"), reason("TransactionConflict")]));
    let conflict = TxError::Cancelled(vec![reason("TransactionConflict")]).into_store_error(&[]);
    assert!(conflict.is_retryable());
    let size = TxError::Cancelled(vec![Reason {
        code: "ValidationError".into(),
        message: "Item size to update has exceeded the maximum allowed size".into(),
    }]);
    assert!(matches!(size.into_store_error(&[]), StoreError::TooLarge(_)));
}
