//! Entity extraction and slot filling judged on first-time manifests nobody tuned on
//! (`fixtures/blind/entities/`, README.md there): five manifests with their own entity types,
//! their questions labelled with normalized values, and dialogues that fill required slots
//! over several turns. Each question is read at its own `now`; each dialogue is played
//! through the embedded system's HTTP handler with its `now` on every turn.
//!
//! Printed: per entity kind, recall (labelled values found with the right normalized value)
//! and precision (extracted values that are labelled); the share of questions whose every
//! labelled entity is found; the intent accuracy; and the share of dialogues completed (every
//! turn asks or dispatches as labelled, and the final dispatch carries the labelled intent and
//! entities). Only totals are printed, never a question: the sets judge, nobody tunes on them.
//! The floors are the figures of the one scoring run (docs/routing.md#entities).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use switchyard_core::classify::Classifier;
use switchyard_engine::handlers::handle_http;
use switchyard_model::contracts::{ConfidenceBand, OrchestratorOutput};
use switchyard_model::manifest::Manifest;
use switchyard_tests::*;

const SETS: [&str; 5] = ["car-rental", "dental-clinic", "gym-classes", "parcel-delivery", "restaurant-reservations"];

/// Floors: the figures of the latest scoring run, 2026-12-02 (debug build, `cargo test -p
/// switchyard-tests --test entity_blind -- --nocapture`), in percent. The sets were scored
/// twice: once with the extractors as first written, once after times in words, numbers past a
/// hundred and more durations were added from cases written without the sets (no question of
/// them is printed or was read).
///
/// Every labelled entity found on 290 of 300 questions; intents right on 271 of 300; 48 of 50
/// dialogues completed. Per kind (recall of labelled values / precision of extracted ones):
/// date 100.0 / 93.1, duration 76.5 / 100.0, email 100.0 / 100.0, gazetteer 98.1 / 100.0,
/// money 95.8 / 95.8, number 83.3 / 78.9, pattern 100.0 / 100.0, time 100.0 / 100.0. The first
/// run: 287 of 300, 47 of 50, number precision 71.4, time recall 83.3, the rest the same.
const ALL_ENTITIES_RIGHT_FLOOR: f64 = 96.6;
const INTENT_RIGHT_FLOOR: f64 = 90.3;
const DIALOGUES_COMPLETED_FLOOR: f64 = 96.0;
/// (kind, recall floor, precision floor).
const KIND_FLOORS: [(&str, f64, f64); 8] = [
    ("date", 100.0, 93.1),
    ("duration", 76.4, 100.0),
    ("email", 100.0, 100.0),
    ("gazetteer", 98.0, 100.0),
    ("money", 95.8, 95.8),
    ("number", 83.3, 78.9),
    ("pattern", 100.0, 100.0),
    ("time", 100.0, 100.0),
];

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/blind/entities").join(name)
}

fn manifest(name: &str) -> Manifest {
    Manifest::load(&dir(name).join("routing.yaml")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[derive(Deserialize)]
struct Label {
    #[serde(rename = "type")]
    entity_type: String,
    value: String,
}

#[derive(Deserialize)]
struct Question {
    query: String,
    intent: String,
    now: String,
    entities: Vec<Label>,
}

#[derive(Deserialize)]
struct Dialogues {
    dialogues: Vec<Dialogue>,
}

#[derive(Deserialize)]
struct Dialogue {
    id: String,
    now: String,
    turns: Vec<DialogueTurn>,
    intent: String,
    entities: Vec<Label>,
}

#[derive(Deserialize)]
struct DialogueTurn {
    text: String,
    expect: String,
}

fn at(now: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(now).unwrap_or_else(|e| panic!("{now}: {e}")).with_timezone(&Utc)
}

fn questions(name: &str) -> Vec<Question> {
    let text = std::fs::read_to_string(dir(name).join("questions.jsonl")).expect("questions.jsonl");
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("a question")).collect()
}

/// The kind an entity type is scored under: its built-in kind, `gazetteer` or `pattern`.
fn kind_of(manifest: &Manifest, entity_type: &str) -> String {
    match manifest.entities.get(entity_type) {
        Some(spec) => match spec.kind {
            Some(kind) => kind.as_str().to_string(),
            None if spec.gazetteer.is_some() => "gazetteer".into(),
            None => "pattern".into(),
        },
        None => "undeclared".into(),
    }
}

#[derive(Default)]
struct Tally {
    labelled: usize,
    found: usize,
    extracted: usize,
    right: usize,
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 {
        100.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

#[test]
fn entities_of_first_time_manifests_are_found_with_their_normalized_values() {
    let mut kinds: BTreeMap<String, Tally> = BTreeMap::new();
    let (mut all_right, mut with_labels, mut intents_right, mut total) = (0, 0, 0, 0);
    for name in SETS {
        let m = manifest(name);
        let c = Classifier::new(&m);
        for q in questions(name) {
            let got = c.classify_at(&q.query, at(&q.now));
            total += 1;
            intents_right += usize::from(got.intent == q.intent);
            let found: Vec<(&str, &str)> =
                got.entities.iter().map(|e| (e.entity_type.as_str(), e.value.as_str())).collect();
            let mut every = true;
            for label in &q.entities {
                let tally = kinds.entry(kind_of(&m, &label.entity_type)).or_default();
                tally.labelled += 1;
                if found.contains(&(label.entity_type.as_str(), label.value.as_str())) {
                    tally.found += 1;
                } else {
                    every = false;
                }
            }
            for e in &got.entities {
                let tally = kinds.entry(kind_of(&m, &e.entity_type)).or_default();
                tally.extracted += 1;
                if q.entities.iter().any(|l| l.entity_type == e.entity_type && l.value == e.value) {
                    tally.right += 1;
                }
            }
            if !q.entities.is_empty() {
                with_labels += 1;
            }
            all_right += usize::from(every);
        }
    }
    println!("entity extraction on the blind first-time manifests ({total} questions, {with_labels} with entities)");
    println!("{:<12} {:>9} {:>9} {:>10} {:>10}", "kind", "labelled", "recall %", "extracted", "precision %");
    for (kind, t) in &kinds {
        println!(
            "{kind:<12} {:>9} {:>9.1} {:>10} {:>10.1}",
            t.labelled,
            pct(t.found, t.labelled),
            t.extracted,
            pct(t.right, t.extracted)
        );
    }
    let all_right_pct = pct(all_right, total);
    println!("every labelled entity found: {all_right}/{total} = {all_right_pct:.1}%");
    println!("intent right: {intents_right}/{total} = {:.1}%", pct(intents_right, total));
    assert!(all_right_pct >= ALL_ENTITIES_RIGHT_FLOOR, "{all_right_pct:.1}% below {ALL_ENTITIES_RIGHT_FLOOR}%");
    let intent_pct = pct(intents_right, total);
    assert!(intent_pct >= INTENT_RIGHT_FLOOR, "intents {intent_pct:.1}% below {INTENT_RIGHT_FLOOR}%");
    assert_eq!(kinds.len(), KIND_FLOORS.len(), "kinds scored: {:?}", kinds.keys().collect::<Vec<_>>());
    for (kind, recall_floor, precision_floor) in KIND_FLOORS {
        let t = kinds.get(kind).unwrap_or_else(|| panic!("no {kind} entity scored"));
        let (recall, precision) = (pct(t.found, t.labelled), pct(t.right, t.extracted));
        assert!(recall >= recall_floor, "{kind}: recall {recall:.1}% below {recall_floor}%");
        assert!(precision >= precision_floor, "{kind}: precision {precision:.1}% below {precision_floor}%");
    }
}

async fn play_turn(h: &Harness, text: &str, now: &str, session: Option<&str>) -> OrchestratorOutput {
    let mut body = json!({ "query": text, "now": now });
    if let Some(id) = session {
        body["session_id"] = json!(id);
    }
    let response =
        handle_http(&h.system.deps, api_request("POST", "/v1/queries", "", Some(&body.to_string()), "u-1", "")).await;
    assert_eq!(response.status_code, 202, "intake answered {}", text_body(&response));
    let id = json_body(&response)["query_id"].as_str().expect("query id").to_string();
    let output = h.output(&id).await;
    for _ in 0..1_000 {
        let session = h.system.deps.store.get_session("u-1", &output.session_id).await.expect("store");
        if session.is_some_and(|s| s.has_recorded(&id)) {
            return output;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("turn {id} was never recorded");
}

#[tokio::test(start_paused = true)]
async fn slot_filling_dialogues_of_first_time_manifests_end_with_the_right_intent_and_entities() {
    let (mut completed, mut total) = (0, 0);
    for name in SETS {
        let text = std::fs::read_to_string(dir(name).join("dialogues.yaml")).expect("dialogues.yaml");
        let set: Dialogues = serde_yaml::from_str(&text).expect("dialogues");
        let h = Harness::start(manifest(name));
        for d in set.dialogues {
            total += 1;
            let mut session: Option<String> = None;
            let mut last: Option<OrchestratorOutput> = None;
            let mut steps_right = true;
            for t in &d.turns {
                let output = play_turn(&h, &t.text, &d.now, session.as_deref()).await;
                session = Some(output.session_id.clone());
                let asked = output.final_reason == Some(ConfidenceBand::MissingEntities);
                let dispatched = !output.agents_dispatched.is_empty();
                let right = match t.expect.as_str() {
                    "ask" => asked,
                    "dispatch" => dispatched,
                    other => panic!("{}: unknown expectation {other}", d.id),
                };
                steps_right &= right;
                last = Some(output);
            }
            let last = last.expect("a turn");
            let found: Vec<(&str, &str)> =
                last.entities.iter().map(|e| (e.entity_type.as_str(), e.value.as_str())).collect();
            let entities_right = d.entities.iter().all(|l| found.contains(&(l.entity_type.as_str(), l.value.as_str())));
            completed += usize::from(steps_right && last.intent == d.intent && entities_right);
        }
    }
    let rate = pct(completed, total);
    println!("slot-filling dialogues completed: {completed}/{total} = {rate:.1}%");
    assert!(rate >= DIALOGUES_COMPLETED_FLOOR, "{rate:.1}% below {DIALOGUES_COMPLETED_FLOOR}%");
}
