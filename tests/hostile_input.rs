//! Hostile input for the three parsers that face the outside: the HTTP body parser
//! (`validate_request`), the SQS record parser (`JobMessage::parse`, and `handle_sqs` around it)
//! and the manifest loader (`Manifest::from_yaml` / `load`).
//!
//! Property tests throw arbitrary and mutated input at each — none may panic, and every refusal
//! must be a typed error that names what is wrong. The committed corpus under
//! `fixtures/hostile/` (oversized, deeply nested, invalid UTF-8, wrong types, injection strings
//! in ids, bodies from other versions) is checked against `fixtures/hostile/expected.json`: the
//! error each input must produce.

use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use switchyard_core::admission::validate_request;
use switchyard_engine::handlers::{handle_sqs, Function};
use switchyard_engine::Embedded;
use switchyard_model::jobs::{Job, JobError, JobMessage};
use switchyard_model::manifest::{validate, Manifest, EMBEDDED_ROUTING_YAML};
use switchyard_tests::*;

fn manifest() -> &'static Manifest {
    static M: OnceLock<Manifest> = OnceLock::new();
    M.get_or_init(shipped_manifest)
}

/// What the HTTP parser says about a body: `ok`, or each broken rule as `field: rule`.
fn http_outcome(body: &[u8]) -> String {
    match validate_request(body, manifest()) {
        Ok(_) => "ok".into(),
        Err(e) => {
            assert!(!e.errors.is_empty(), "a refusal names at least one field");
            for f in &e.errors {
                assert!(!f.field.is_empty() && !f.rule.is_empty(), "{f:?}");
            }
            e.errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        }
    }
}

/// What the SQS parser says about a body.
fn sqs_outcome(body: &str) -> String {
    match JobMessage::parse(body) {
        Ok(job) => format!("ok: {}", JobMessage::new(job).to_body()),
        Err(e) => {
            let text = e.to_string();
            assert!(!text.is_empty());
            text
        }
    }
}

/// What the manifest loader says about a text.
fn manifest_outcome(text: &str) -> String {
    match Manifest::from_yaml(text, "hostile.yaml") {
        Ok(m) => {
            assert!(validate(&m).is_empty(), "a loaded manifest is valid");
            "ok".into()
        }
        Err(e) => {
            assert!(!e.problems.is_empty(), "a refusal lists its problems");
            assert_eq!(e.file, "hostile.yaml");
            e.to_string()
        }
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime"))
}

fn system() -> &'static Embedded {
    static S: OnceLock<Embedded> = OnceLock::new();
    S.get_or_init(|| switchyard_agents::embedded(Arc::new(manifest().clone()), Default::default()))
}

/// Every function's handler on a batch of these bodies: never a panic, never a refused batch,
/// and no record that cannot be a job reported as a success.
fn handle_everywhere(bodies: &[&str]) {
    let event = sqs_event(bodies);
    for function in
        [Function::Router, Function::Worker { tier: None }, Function::Worker { tier: Some(2) }, Function::Synthesizer]
    {
        let response =
            runtime().block_on(handle_sqs(&system().deps, function, event.clone())).expect("the batch is handled");
        let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        for (i, body) in bodies.iter().enumerate() {
            if JobMessage::parse(body).is_err() {
                let id = format!("MessageID_{}", i + 1);
                assert!(failed.contains(&id.as_str()), "{body:?} is a batch item failure for {function:?}");
            }
        }
    }
}

// ---- properties ------------------------------------------------------------------------------

/// Arbitrary JSON, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null)),
        ".{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(".{0,12}", inner, 0..8).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A request-shaped object: the real field names with arbitrary values, sometimes a stray key.
fn request_like() -> impl Strategy<Value = Value> {
    let field = prop_oneof![
        Just("query".to_string()),
        Just("parsed_query".to_string()),
        Just("session_id".to_string()),
        Just("conversation_history".to_string()),
        Just("preferences".to_string()),
        "[a-z_]{1,12}",
    ];
    prop::collection::btree_map(field, json_value(), 0..5).prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// A job-shaped object: real keys and job types with arbitrary values.
fn job_like() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("v"),
        Just("type"),
        Just("query_id"),
        Just("dispatch_id"),
        Just("attempt"),
        Just("timeout_ms"),
        Just("fire_at"),
    ];
    let value = prop_oneof![
        json_value(),
        Just(Value::from(1)),
        prop_oneof![Just("route"), Just("dispatch"), Just("synthesize"), Just("deadline")].prop_map(Value::from),
        Just(Value::from("6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f")),
        Just(Value::from("2026-01-01T00:00:00Z")),
    ];
    prop::collection::btree_map(key.prop_map(str::to_string), value, 0..7)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// The shipped manifest with one line deleted, duplicated, cut or garbled.
fn mutated_manifest() -> impl Strategy<Value = String> {
    let lines = EMBEDDED_ROUTING_YAML.lines().count().max(1);
    (0..lines, 0u8..4, ".{0,8}", any::<prop::sample::Index>()).prop_map(|(line, how, noise, at)| {
        let mut out: Vec<String> = EMBEDDED_ROUTING_YAML.lines().map(str::to_string).collect();
        match how {
            0 => {
                out.remove(line);
            }
            1 => {
                let copy = out[line].clone();
                out.insert(line, copy);
            }
            2 => {
                let l = &out[line];
                let cut = l.char_indices().map(|(i, _)| i).nth(at.index(l.chars().count().max(1))).unwrap_or(l.len());
                out[line] = l[..cut].to_string();
            }
            _ => {
                let l = &out[line];
                let cut = l.char_indices().map(|(i, _)| i).nth(at.index(l.chars().count().max(1))).unwrap_or(l.len());
                out[line] = format!("{}{noise}{}", &l[..cut], &l[cut..]);
            }
        }
        out.join("\n")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_as_an_http_body_are_accepted_or_refused_with_named_fields(body in prop::collection::vec(any::<u8>(), 0..512)) {
        http_outcome(&body);
    }

    #[test]
    fn any_request_shaped_json_is_accepted_or_refused_with_named_fields(request in request_like()) {
        let body = serde_json::to_vec(&request).expect("json");
        http_outcome(&body);
    }

    #[test]
    fn any_string_as_an_sqs_body_is_a_typed_parse_error_or_a_job(body in ".{0,300}") {
        sqs_outcome(&body);
        handle_everywhere(&[&body]);
    }

    #[test]
    fn job_shaped_sqs_bodies_parse_only_when_every_field_is_right(job in job_like()) {
        let body = job.to_string();
        match JobMessage::parse(&body) {
            Ok(parsed) => {
                prop_assert_eq!(job["v"].as_u64(), Some(1));
                prop_assert!(uuid::Uuid::parse_str(parsed.query_id()).is_ok());
            }
            Err(JobError::Version(v)) => prop_assert_ne!(v, 1),
            Err(_) => {}
        }
        handle_everywhere(&[&body, "{}"]);
    }

    #[test]
    fn any_text_as_a_manifest_loads_or_is_refused_with_its_problems(text in ".{0,400}") {
        manifest_outcome(&text);
    }

    #[test]
    fn a_mutated_shipped_manifest_loads_valid_or_is_refused_with_its_problems(text in mutated_manifest()) {
        manifest_outcome(&text);
    }
}

// ---- the committed corpus --------------------------------------------------------------------

#[test]
fn every_input_of_the_hostile_corpus_gets_its_expected_error() {
    let expected: BTreeMap<String, String> =
        serde_json::from_str(&fixture_text("hostile/expected.json")).expect("expected.json");
    let mut files = Vec::new();
    for dir in ["http", "sqs", "manifest"] {
        for entry in std::fs::read_dir(fixture(&format!("hostile/{dir}"))).expect("corpus dir") {
            let name = entry.expect("entry").file_name().to_string_lossy().to_string();
            files.push(format!("{dir}/{name}"));
        }
    }
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let bytes = std::fs::read(fixture(&format!("hostile/{file}"))).expect("read");
        let actual = if file.starts_with("http/") {
            http_outcome(&bytes)
        } else if file.starts_with("sqs/") {
            let body = String::from_utf8(bytes).expect("SQS bodies are text");
            handle_everywhere(&[&body]);
            sqs_outcome(&body)
        } else {
            match Manifest::load(&fixture(&format!("hostile/{file}"))) {
                Ok(_) => "ok".into(),
                Err(e) => e.to_string(),
            }
        };
        match expected.get(file) {
            Some(want) if actual.contains(want.as_str()) && !actual.starts_with("ok") => {}
            Some(want) => wrong.push(format!("{file}: expected `{want}`, got `{actual}`")),
            None => wrong.push(format!("{file}: no expectation in expected.json; it gives `{actual}`")),
        }
    }
    for file in expected.keys() {
        if !files.contains(file) {
            wrong.push(format!("{file}: in expected.json but not in the corpus"));
        }
    }
    assert!(wrong.is_empty(), "{} corpus mismatches:\n{}", wrong.len(), wrong.join("\n"));
    assert!(files.len() >= 30, "the corpus has {} inputs", files.len());
}

#[test]
fn a_job_for_another_version_or_with_hostile_ids_is_refused_before_any_store_read() {
    // The parser refuses these outright, so no id reaches a key expression.
    let q = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";
    for body in [
        format!(r#"{{"v":1,"type":"route","query_id":"Q#{q}"}}"#),
        format!(r#"{{"v":1,"type":"dispatch","query_id":"{q}","dispatch_id":"{q}#H","attempt":1,"timeout_ms":1}}"#),
    ] {
        assert!(matches!(JobMessage::parse(&body), Err(JobError::BadId { .. })), "{body}");
    }
    assert_eq!(
        JobMessage::parse(&JobMessage::new(Job::Route { query_id: q.into() }).to_body()),
        Ok(Job::Route { query_id: q.into() })
    );
}
