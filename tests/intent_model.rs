//! The learned intent model (`shared/core/src/classify/intent_model.rs`): the shipped table is what
//! the labelled fixtures train, and what the model is worth on questions it was not trained on.
//!
//! Training questions: every labelled question set (`fixtures/*questions.jsonl`) and the first
//! turn of every dialogue half up to [`LAST_TRAINED_HALF`] (a first turn is a question asked
//! alone). Halves after it are blind: they judge the classifier and are trained on only once
//! scored (tests/follow_ups.rs, docs/conversations.md).
//!
//! `SWITCHYARD_WRITE_INTENT_MODEL=1 cargo test -p switchyard-tests --test intent_model`
//! rewrites the table after a fixture or the manifest changes.

use std::path::{Path, PathBuf};
use switchyard_core::classify::{Classifier, IntentModel, IntentModelTrainer};
use switchyard_model::manifest::Manifest;

/// The last dialogue half the model is trained on (`dialogues_blind<N>.yaml`).
const LAST_TRAINED_HALF: u32 = 39;

/// A labelled question and the fixture group it comes from.
struct Labelled {
    group: String,
    text: String,
    intent: String,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn training_questions() -> Vec<Labelled> {
    let mut out = Vec::new();
    let mut halves = vec!["dialogues_tuning.yaml".to_string(), "dialogues_blind.yaml".to_string()];
    halves.extend((2..=LAST_TRAINED_HALF).map(|n| format!("dialogues_blind{n}.yaml")));
    for half in halves {
        let text = std::fs::read_to_string(fixtures().join(&half)).unwrap_or_else(|e| panic!("{half}: {e}"));
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{half}: {e}"));
        for dialogue in doc["dialogues"].as_sequence().unwrap_or_else(|| panic!("{half}: no dialogues")) {
            let first = &dialogue["turns"][0];
            out.push(Labelled {
                group: half.clone(),
                text: first["text"].as_str().unwrap_or_else(|| panic!("{half}: a turn without text")).to_string(),
                intent: first["intent"].as_str().unwrap_or_else(|| panic!("{half}: a turn without intent")).to_string(),
            });
        }
    }
    let mut sets: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixtures")
        .map(|e| e.expect("fixture entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with("questions.jsonl")))
        .collect();
    sets.sort();
    for set in sets {
        let group = set.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        for line in std::fs::read_to_string(&set).expect("question set").lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{group}: {e}"));
            out.push(Labelled {
                group: group.clone(),
                text: v["query"].as_str().expect("query").to_string(),
                intent: v["intent"].as_str().expect("intent").to_string(),
            });
        }
    }
    out
}

fn classifier() -> Classifier {
    let manifest =
        Manifest::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../routing.yaml")).expect("routing.yaml loads");
    Classifier::new(&manifest)
}

fn train(c: &Classifier, questions: &[Labelled], held_out: Option<&str>) -> IntentModelTrainer {
    let mut trainer = IntentModelTrainer::new(c.intents());
    for q in questions.iter().filter(|q| Some(q.group.as_str()) != held_out) {
        trainer.add(&q.intent, &c.intent_model_terms(&q.text)).unwrap_or_else(|e| panic!("{}: {e}", q.group));
    }
    trainer
}

/// The table in the repository is the one the fixtures train; with
/// `SWITCHYARD_WRITE_INTENT_MODEL=1` the test writes it instead.
#[test]
fn the_shipped_intent_model_is_trained_on_the_labelled_fixtures() {
    let c = classifier();
    let table = train(&c, &training_questions(), None).to_table();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/core/src/classify/intent_model.tsv");
    if std::env::var_os("SWITCHYARD_WRITE_INTENT_MODEL").is_some() {
        std::fs::write(&path, &table).expect("write intent_model.tsv");
    }
    let shipped = std::fs::read_to_string(&path).expect("intent_model.tsv");
    assert!(
        shipped == table,
        "shared/core/src/classify/intent_model.tsv is stale: run SWITCHYARD_WRITE_INTENT_MODEL=1 cargo test -p switchyard-tests --test intent_model"
    );
    assert!(
        IntentModel::parse(&table).as_ref() == Ok(IntentModel::shipped()),
        "the compiled-in model is not the table (rebuild after writing it)"
    );
}

/// Leave one fixture group out: for each group (a question set or a dialogue half's first
/// turns), the classifier with a model trained on every other group, against the manifest's
/// vocabulary alone. The figure that says what the model is worth on questions it never saw.
#[test]
fn the_intent_model_cross_validated_over_the_fixture_groups() {
    let mut c = classifier();
    let questions = training_questions();
    let mut groups: Vec<&str> = questions.iter().map(|q| q.group.as_str()).collect();
    groups.dedup();
    let (mut with_model, mut alone, mut n) = (0, 0, 0);
    let (mut dlg_model, mut dlg_alone, mut dlg_n) = (0, 0, 0);
    for group in &groups {
        let test: Vec<&Labelled> = questions.iter().filter(|q| q.group == *group).collect();
        c.set_intent_model(train(&c, &questions, Some(group)).model());
        let right_with: usize = test.iter().filter(|q| c.classify(&q.text).intent == q.intent).count();
        c.set_intent_model(IntentModel::default());
        let right_alone: usize = test.iter().filter(|q| c.classify(&q.text).intent == q.intent).count();
        println!("{group:32} {right_with:>4} with the model, {right_alone:>4} alone, of {}", test.len());
        with_model += right_with;
        alone += right_alone;
        n += test.len();
        if group.starts_with("dialogues") {
            dlg_model += right_with;
            dlg_alone += right_alone;
            dlg_n += test.len();
        }
    }
    let pct = |a: usize, n: usize| 100.0 * a as f64 / n as f64;
    println!(
        "held out: {with_model} of {n} ({:.1} %) with the model, {alone} ({:.1} %) alone; dialogue first turns {dlg_model} of {dlg_n} ({:.1} %) against {dlg_alone} ({:.1} %)",
        pct(with_model, n),
        pct(alone, n),
        pct(dlg_model, dlg_n),
        pct(dlg_alone, dlg_n)
    );
    assert!(
        with_model >= alone + n / 200,
        "the model must be worth at least half a point held out: {with_model} vs {alone} of {n}"
    );
}
