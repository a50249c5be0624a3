//! Intake validation of `POST /v1/queries` bodies: the E2I design's validation table, the manifest's
//! query limits, and a hostile corpus that must be refused cleanly, never with a panic.

use serde_json::{json, Value};
use switchyard_core::admission::{validate_request, ValidatedRequest, ValidationError, MAX_BODY_BYTES};
use switchyard_model::manifest::Manifest;

/// A small manifest with the E2I design's query settings and two intents.
const MANIFEST: &str = r#"
version: 1
name: intake
query:
  fallback_intent: explanation
  max_query_chars: 100
  max_entities: 3
  max_entity_value_chars: 20
tiers:
  - {tier: 2, timeout: 120s, max_retries: 2, fallback: {agent: explainer}}
  - {tier: 5, timeout: 180s, max_retries: 1, fallback: none}
agents:
  - {id: causal_impact, tier: 2, kind: builtin, builtin: {response: x, confidence: 0.8}}
  - {id: explainer, tier: 5, kind: builtin, builtin: {response: y, confidence: 0.8}}
intents:
  - {id: causal_impact, route: {primary: causal_impact}, keywords: [effect]}
  - {id: explanation, route: {primary: explainer}, keywords: [explain]}
entities:
  brand: {description: the brand, gazetteer: [Kisqali]}
  region: {description: the region, gazetteer: [Northeast]}
  kpi: {description: the metric, patterns: ['kpi_\d']}
"#;

const QUERY_ID: &str = "5f0c6a52-8f0e-4a8e-9d3c-2b1f6f0e9a11";

fn manifest() -> Manifest {
    Manifest::from_yaml(MANIFEST, "intake.yaml").expect("the test manifest is valid")
}

fn manifest_without_fallback_intent() -> Manifest {
    let mut m = manifest();
    m.query.fallback_intent = None;
    m
}

fn parsed_query() -> Value {
    json!({
        "query_id": QUERY_ID,
        "raw_query": "What is the effect of HCP engagement on Kisqali conversion?",
        "intent": "causal_impact",
        "entities": [{"type": "brand", "value": "Kisqali", "confidence": 0.95, "source": "exact"}],
        "confidence": 0.9,
        "ambiguity_flag": false,
        "timestamp": "2025-12-08T10:00:00Z"
    })
}

fn with_parsed(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut pq = parsed_query();
    edit(&mut pq);
    json!({"parsed_query": pq}).to_string().into_bytes()
}

fn accept(body: &[u8]) -> ValidatedRequest {
    match validate_request(body, &manifest()) {
        Ok(v) => v,
        Err(e) => panic!("expected the body to be accepted, got {e}"),
    }
}

fn refuse(body: &[u8]) -> ValidationError {
    refuse_with(body, &manifest())
}

fn refuse_with(body: &[u8], manifest: &Manifest) -> ValidationError {
    match validate_request(body, manifest) {
        Ok(v) => panic!("expected the body to be refused, got {v:?}"),
        Err(e) => e,
    }
}

fn rule_of<'e>(err: &'e ValidationError, field: &str) -> &'e str {
    match err.errors.iter().find(|e| e.field == field) {
        Some(e) => &e.rule,
        None => panic!("no error for `{field}` in {err}"),
    }
}

fn text_body(text: &str) -> Vec<u8> {
    json!({"query": text}).to_string().into_bytes()
}

// ---- raw text ---------------------------------------------------------------------------------

#[test]
fn given_raw_text_when_validated_then_the_trimmed_text_is_accepted_without_warnings() {
    let v = accept(&text_body("  What drove conversion?  \n"));
    assert_eq!(v.text, "What drove conversion?");
    assert_eq!(v.parsed, None);
    assert!(v.warnings.is_empty());
}

#[test]
fn given_emoji_and_line_breaks_in_text_when_validated_then_they_are_accepted() {
    let v = accept(&text_body("Why did 📉 conversion drop?\n\tIn the 🇺🇸 Northeast\r\n"));
    assert!(v.text.contains("📉"));
}

#[test]
fn given_blank_text_when_validated_then_query_must_not_be_empty() {
    let err = refuse(&text_body(" \n\t "));
    assert!(rule_of(&err, "query").contains("must not be empty"));
}

#[test]
fn given_text_longer_than_the_manifest_limit_when_validated_then_the_limit_is_named() {
    let err = refuse(&text_body(&"é".repeat(101)));
    assert_eq!(rule_of(&err, "query"), "must be at most 100 characters; got 101");
}

#[test]
fn given_text_exactly_at_the_limit_in_multibyte_characters_when_validated_then_it_is_accepted() {
    accept(&text_body(&"é".repeat(100)));
}

#[test]
fn given_a_nul_byte_in_text_when_validated_then_control_characters_are_refused() {
    let err = refuse(&text_body("drop table\u{0} now"));
    assert!(rule_of(&err, "query").contains("control characters"));
}

#[test]
fn given_an_escape_sequence_in_text_when_validated_then_control_characters_are_refused() {
    let err = refuse(&text_body("hello \u{1b}[31mred"));
    assert!(rule_of(&err, "query").contains("control characters"));
}

#[test]
fn given_blank_text_with_a_control_character_when_validated_then_each_rule_is_its_own_error() {
    let err = refuse(&text_body("\u{7}"));
    let rules: Vec<&str> = err.errors.iter().filter(|e| e.field == "query").map(|e| e.rule.as_str()).collect();
    assert_eq!(rules.len(), 1, "a bell is not whitespace, so only the control rule applies: {rules:?}");
    let err = refuse(&text_body(&format!("{}\u{7}", "a".repeat(100))));
    assert_eq!(err.errors.iter().filter(|e| e.field == "query").count(), 2, "{err}");
}

// ---- query or parsed_query ------------------------------------------------------------------------

#[test]
fn given_neither_query_nor_parsed_query_when_validated_then_query_is_required() {
    let err = refuse(br#"{"session_id": "s-1"}"#);
    assert!(rule_of(&err, "query").contains("exactly one of `query` and `parsed_query`"));
}

#[test]
fn given_both_query_and_parsed_query_when_validated_then_exactly_one_is_required() {
    let body = json!({"query": "hi", "parsed_query": parsed_query()}).to_string();
    let err = refuse(body.as_bytes());
    assert!(rule_of(&err, "query").contains("not both"));
}

// ---- parsed_query (E2I validation table) -------------------------------------------------------

#[test]
fn given_a_valid_parsed_query_when_validated_then_it_is_kept_as_sent() {
    let v = accept(&with_parsed(|_| {}));
    let parsed = v.parsed.expect("parsed query kept");
    assert_eq!(parsed.query_id, QUERY_ID);
    assert_eq!(parsed.intent, "causal_impact");
    assert_eq!(v.text, "What is the effect of HCP engagement on Kisqali conversion?");
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
}

#[test]
fn given_a_query_id_that_is_not_a_uuid_when_validated_then_it_is_rejected_with_details() {
    let err = refuse(&with_parsed(|pq| pq["query_id"] = json!("q-123")));
    assert!(rule_of(&err, "parsed_query.query_id").starts_with("must be a UUID"));
    let body = serde_json::to_value(&err).expect("serialisable");
    assert_eq!(body["errors"][0]["field"], "parsed_query.query_id");
}

#[test]
fn given_an_undeclared_intent_when_validated_then_it_falls_back_to_explanation_with_a_warning() {
    let v = accept(&with_parsed(|pq| pq["intent"] = json!("time_travel")));
    assert_eq!(v.parsed.expect("parsed").intent, "explanation");
    assert_eq!(v.warnings, vec!["intent `time_travel` is not declared; using `explanation`".to_string()]);
}

#[test]
fn given_an_undeclared_intent_and_no_fallback_intent_when_validated_then_it_is_refused() {
    let err = refuse_with(&with_parsed(|pq| pq["intent"] = json!("time_travel")), &manifest_without_fallback_intent());
    assert!(rule_of(&err, "parsed_query.intent").contains("no fallback intent"));
}

#[test]
fn given_a_confidence_above_one_when_validated_then_it_is_clamped_with_a_warning() {
    let v = accept(&with_parsed(|pq| pq["confidence"] = json!(1.7)));
    assert_eq!(v.parsed.expect("parsed").confidence, 1.0);
    assert!(v.warnings[0].contains("clamped to 1"), "{:?}", v.warnings);
}

#[test]
fn given_a_negative_confidence_when_validated_then_it_is_clamped_to_zero() {
    let v = accept(&with_parsed(|pq| pq["confidence"] = json!(-0.2)));
    assert_eq!(v.parsed.expect("parsed").confidence, 0.0);
    assert_eq!(v.warnings.len(), 1);
}

#[test]
fn given_an_entity_confidence_out_of_range_when_validated_then_it_is_clamped_with_a_warning() {
    let v = accept(&with_parsed(|pq| pq["entities"][0]["confidence"] = json!(3)));
    assert_eq!(v.parsed.expect("parsed").entities[0].confidence, 1.0);
    assert!(v.warnings[0].starts_with("entities[0].confidence"), "{:?}", v.warnings);
}

#[test]
fn given_more_entities_than_the_limit_when_validated_then_they_are_truncated_with_a_warning() {
    let v = accept(&with_parsed(|pq| {
        pq["entities"] = json!((0..5).map(|i| json!({"type": "kpi", "value": format!("kpi_{i}")})).collect::<Vec<_>>());
    }));
    let entities = v.parsed.expect("parsed").entities;
    assert_eq!(entities.len(), 3);
    assert_eq!(entities[2].value, "kpi_2");
    assert_eq!(v.warnings, vec!["2 entities dropped: at most 3 entities are accepted".to_string()]);
}

#[test]
fn given_an_entity_value_longer_than_the_limit_when_validated_then_that_entity_is_named() {
    let err = refuse(&with_parsed(|pq| {
        pq["entities"] = json!([{"type": "brand", "value": "Kisqali"}, {"type": "brand", "value": "x".repeat(21)}]);
    }));
    assert_eq!(rule_of(&err, "parsed_query.entities[1].value"), "must be at most 20 characters; got 21");
}

#[test]
fn given_a_control_character_in_an_entity_value_when_validated_then_that_entity_is_named() {
    let err = refuse(&with_parsed(|pq| pq["entities"][0]["value"] = json!("Kis\nqali")));
    assert!(rule_of(&err, "parsed_query.entities[0].value").contains("control characters"));
}

#[test]
fn given_an_empty_raw_query_when_validated_then_raw_query_is_named() {
    let err = refuse(&with_parsed(|pq| pq["raw_query"] = json!("   ")));
    assert!(rule_of(&err, "parsed_query.raw_query").contains("must not be empty"));
}

#[test]
fn given_a_parsed_query_missing_a_field_when_validated_then_the_error_names_the_parsed_query() {
    let err = refuse(&with_parsed(|pq| {
        pq.as_object_mut().expect("object").remove("timestamp");
    }));
    assert!(rule_of(&err, "parsed_query").contains("missing field `timestamp`"), "{err}");
}

#[test]
fn given_an_unknown_entity_type_when_validated_then_the_path_reaches_the_entity() {
    let err = refuse(&with_parsed(|pq| pq["entities"][0]["type"] = json!("planet")));
    assert!(
        rule_of(&err, "parsed_query.entities[0].type").contains("`planet` is not an entity type of this manifest"),
        "{err}"
    );
}

#[test]
fn given_several_broken_fields_when_validated_then_every_one_is_reported() {
    let mut pq = parsed_query();
    pq["query_id"] = json!("nope");
    pq["raw_query"] = json!("");
    let body = json!({"parsed_query": pq, "session_id": "", "conversation_history": vec![json!({}); 51]});
    let err = refuse(body.to_string().as_bytes());
    for field in ["parsed_query.query_id", "parsed_query.raw_query", "session_id", "conversation_history"] {
        assert!(err.has(field), "missing {field} in {err}");
    }
}

// ---- session and history -------------------------------------------------------------------------

#[test]
fn given_a_well_formed_session_id_and_history_when_validated_then_both_are_kept() {
    let body = json!({"query": "hi", "session_id": "user-1:sess_2.a", "conversation_history": [{"role": "user"}], "preferences": {"tone": "brief"}});
    let v = accept(body.to_string().as_bytes());
    assert_eq!(v.session_id.as_deref(), Some("user-1:sess_2.a"));
    assert_eq!(v.conversation_history.len(), 1);
    assert_eq!(v.preferences, Some(json!({"tone": "brief"})));
}

#[test]
fn given_a_session_id_of_129_characters_when_validated_then_its_length_is_refused() {
    let err = refuse(json!({"query": "hi", "session_id": "s".repeat(129)}).to_string().as_bytes());
    assert_eq!(rule_of(&err, "session_id"), "must be 1 to 128 characters; got 129");
}

#[test]
fn given_an_empty_session_id_when_validated_then_it_is_refused() {
    let err = refuse(br#"{"query": "hi", "session_id": ""}"#);
    assert!(rule_of(&err, "session_id").starts_with("must be 1 to 128 characters"));
}

#[test]
fn given_51_history_entries_when_validated_then_the_limit_of_50_is_named() {
    let body = json!({"query": "hi", "conversation_history": vec![json!({"role": "user"}); 51]});
    let err = refuse(body.to_string().as_bytes());
    assert_eq!(rule_of(&err, "conversation_history"), "must have at most 50 entries; got 51");
}

#[test]
fn given_preferences_that_are_not_an_object_when_validated_then_preferences_must_be_an_object() {
    for preferences in [json!("brief"), json!([1, 2]), json!(3), json!(true)] {
        let err = refuse(json!({"query": "hi", "preferences": preferences}).to_string().as_bytes());
        assert_eq!(rule_of(&err, "preferences"), "must be a JSON object", "{preferences}");
    }
    // `null` is the field left out.
    assert_eq!(accept(br#"{"query": "hi", "preferences": null}"#).preferences, None);
}

// ---- hostile corpus ----------------------------------------------------------------------------------

#[test]
fn given_json_nested_33_levels_deep_when_validated_then_the_body_is_refused() {
    let body = format!(r#"{{"query": "hi", "preferences": {{"a": {}1{}}}}}"#, "[".repeat(31), "]".repeat(31));
    let err = refuse(body.as_bytes());
    assert!(rule_of(&err, "body").contains("deeper than 32 levels"));
}

#[test]
fn given_json_nested_32_levels_deep_when_validated_then_it_is_accepted() {
    let body = format!(r#"{{"query": "hi", "preferences": {{"a": {}1{}}}}}"#, "[".repeat(30), "]".repeat(30));
    accept(body.as_bytes());
}

#[test]
fn given_a_hundred_thousand_open_brackets_when_validated_then_the_body_is_refused_without_a_crash() {
    let body = "[".repeat(60_000);
    let err = refuse(body.as_bytes());
    assert!(err.has("body"));
}

#[test]
fn given_invalid_utf8_bytes_when_validated_then_the_body_must_be_utf8_json() {
    let err = refuse(b"{\"query\": \"caf\xe9 \xff\xfe\"}");
    assert_eq!(rule_of(&err, "body"), "must be UTF-8 JSON");
}

#[test]
fn given_a_one_megabyte_body_when_validated_then_the_size_limit_is_named() {
    let body = text_body(&"a".repeat(1024 * 1024));
    let err = refuse(&body);
    assert!(rule_of(&err, "body").starts_with(&format!("must be at most {MAX_BODY_BYTES} bytes")));
}

#[test]
fn given_a_body_that_is_not_json_when_validated_then_the_body_is_named() {
    for body in [&b""[..], b"What drove conversion?", b"null", b"[]", b"{\"query\": \"hi\"} trailing"] {
        let err = refuse(body);
        assert!(err.has("body"), "{:?} gave {err}", String::from_utf8_lossy(body));
    }
}

#[test]
fn given_wrong_types_when_validated_then_the_field_and_serde_message_are_reported() {
    let err = refuse(br#"{"query": 42}"#);
    assert!(rule_of(&err, "query").contains("invalid type: integer `42`, expected a string"), "{err}");
    let err = refuse(br#"{"query": "hi", "conversation_history": {"a": 1}}"#);
    assert!(rule_of(&err, "conversation_history").contains("invalid type"), "{err}");
    let err = refuse(&with_parsed(|pq| pq["confidence"] = json!("high")));
    assert!(rule_of(&err, "parsed_query.confidence").contains("invalid type"), "{err}");
}

#[test]
fn given_a_body_from_another_version_when_validated_then_the_unknown_field_is_named() {
    let err = refuse(br#"{"v2_query": {"text": "hi"}}"#);
    assert!(rule_of(&err, "v2_query").contains("unknown field `v2_query`"), "{err}");
}

#[test]
fn given_sql_and_script_injection_in_ids_when_validated_then_they_are_refused_as_data() {
    let err = refuse(&with_parsed(|pq| pq["query_id"] = json!("'; DROP TABLE queries; --")));
    assert!(err.has("parsed_query.query_id"));
    let err = refuse(br#"{"query": "hi", "session_id": "<script>alert(1)</script>"}"#);
    assert!(rule_of(&err, "session_id").contains("only letters, digits"));
    let v = accept(&with_parsed(|pq| pq["intent"] = json!("<script>alert('x')</script>")));
    assert_eq!(v.parsed.expect("parsed").intent, "explanation");
}

#[test]
fn given_a_huge_hostile_intent_name_when_it_is_quoted_in_a_warning_then_it_is_shortened_and_escaped() {
    let v = accept(&with_parsed(|pq| pq["intent"] = json!(format!("\u{1b}[2J{}", "x".repeat(500)))));
    let warning = &v.warnings[0];
    assert!(!warning.contains('\u{1b}'), "{warning}");
    assert!(warning.chars().count() < 150, "{warning}");
}

#[test]
fn given_escaped_nul_bytes_in_parsed_text_when_validated_then_the_raw_query_is_refused() {
    let err = refuse(&with_parsed(|pq| pq["raw_query"] = json!("effect of\u{0}HCP engagement")));
    assert!(rule_of(&err, "parsed_query.raw_query").contains("control characters"));
}

#[test]
fn given_a_corpus_of_odd_bodies_when_validated_then_none_panics() {
    let corpus: Vec<Vec<u8>> = vec![
        b"{".to_vec(),
        b"\"".to_vec(),
        b"{\"query\": \"\\ud800\"}".to_vec(),
        b"{\"query\": \"\\u0000\"}".to_vec(),
        b"{\"parsed_query\": null}".to_vec(),
        b"{\"parsed_query\": 1e999}".to_vec(),
        b"{\"parsed_query\": {\"confidence\": 1e308}}".to_vec(),
        b"{\"query\": \"hi\", \"query\": \"again\"}".to_vec(),
        b"\xef\xbb\xbf{\"query\": \"bom\"}".to_vec(),
        "{\"query\": \"\u{202e}evil\"}".as_bytes().to_vec(),
        vec![0u8; 1000],
        vec![b'{'; MAX_BODY_BYTES],
    ];
    for body in corpus {
        let _ = validate_request(&body, &manifest());
    }
}

#[test]
fn given_a_parsed_query_written_as_an_array_when_validated_then_it_must_be_an_object() {
    let body = json!({"parsed_query": [QUERY_ID, "hi", "causal_impact", [], 0.5, false, null, "2025-12-08T10:00:00Z"]});
    let err = refuse(body.to_string().as_bytes());
    assert!(rule_of(&err, "parsed_query").starts_with("must be a JSON object"), "{err}");
}
