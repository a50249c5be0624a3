//! Re-fit of `routing.yaml` from corrected signals, measured on a blind set.
//!
//! `fixtures/signals/corrections.jsonl` holds questions with the intent a caller would correct
//! them to; `fixtures/signals/paraphrases.jsonl` holds new paraphrases of the same questions,
//! written before any re-fit ran and never given to it. The test turns each correction into an
//! exported signal routed as the shipped manifest routes it, re-fits, and checks that the
//! paraphrases of the misrouted questions route better while the manifest's own utterances do
//! not get worse, and that the written manifest validates.
//!
//! The re-fit edits the manifest's vocabulary, so its effect is measured on the classifier of
//! the manifest alone: the learned intent model (`shared/core/src/classify/intent_model.rs`, trained
//! on the repository's labelled questions) already routes all but one of these corrections right
//! and would hide what the re-fit adds. With the model on, the re-fit must not make the
//! paraphrases worse.

use chrono::{TimeZone, Utc};
use std::path::Path;
use switchyard_core::classify::Classifier;
use switchyard_core::signals::refit::{refit, RefitOptions, RefitOutcome};
use switchyard_core::signals::SignalRecord;
use switchyard_model::contracts::RoutingTrainingSignal;
use switchyard_model::manifest::Manifest;

#[derive(serde::Deserialize)]
struct Correction {
    query: String,
    correct_intent: String,
}

#[derive(serde::Deserialize)]
struct Labelled {
    query: String,
    intent: String,
}

fn lines<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    let text = std::fs::read_to_string(path).expect("fixture exists");
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("fixture line")).collect()
}

fn signal(n: usize, query: &str, routed: &str) -> RoutingTrainingSignal {
    RoutingTrainingSignal {
        signal_id: format!("fixture-{n}"),
        session_id: "s".into(),
        query: query.into(),
        query_pattern: routed.into(),
        intent: routed.into(),
        entities_extracted: vec![],
        agents_selected: vec![routed.into()],
        routing_confidence: 0.5,
        routing_rationale: "embedded".into(),
        agents_succeeded: 1,
        agents_failed: 0,
        total_latency_ms: 1_000.0,
        user_satisfaction: Some(2.0),
        answer_quality: None,
        was_rerouted: true,
    }
}

#[test]
fn a_refit_from_corrections_routes_new_paraphrases_better_without_hurting_the_manifest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("../routing.yaml")).expect("routing.yaml");
    let mut manifest = Manifest::from_yaml(&text, "routing.yaml").expect("valid");
    // Its example files resolve beside the shipped manifest.
    manifest.base_dir = Some(root.join(".."));
    let corrections: Vec<Correction> = lines(&root.join("fixtures/signals/corrections.jsonl"));
    let paraphrases: Vec<Labelled> = lines(&root.join("fixtures/signals/paraphrases.jsonl"));
    assert_eq!(corrections.len(), paraphrases.len(), "one paraphrase per corrected question");
    let with_model_before = Classifier::new(&manifest);
    let before = Classifier::lexical(&manifest);
    let at = Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).single().expect("time");
    let mut records = Vec::new();
    let mut blind = Vec::new();
    for (n, (c, p)) in corrections.iter().zip(&paraphrases).enumerate() {
        assert_eq!(c.correct_intent, p.intent, "line {n}: the paraphrase has the correction's intent");
        let routed = before.classify(&c.query).intent;
        if routed != c.correct_intent {
            blind.push(p);
        }
        let fix = (routed != c.correct_intent).then(|| c.correct_intent.clone());
        records.push(SignalRecord::new(signal(n, &c.query, &routed), fix, at));
    }
    println!("misrouted corrections: {} of {}", blind.len(), corrections.len());
    assert!(!blind.is_empty(), "premise: the shipped manifest misroutes some of the fixture's questions");
    let right = |c: &Classifier| blind.iter().filter(|p| c.classify(&p.query).intent == p.intent).count();
    let outcome = refit(&text, "routing.yaml", &records, &RefitOptions::default()).expect("re-fit runs");
    let RefitOutcome::Proposed { yaml, report, diff } = outcome else {
        panic!("expected a proposal, got {outcome:?}");
    };
    println!("{diff}");
    println!("report: {report:?}");
    let mut new = Manifest::from_yaml(&yaml, "refit.yaml").expect("the re-fitted manifest validates");
    new.base_dir = manifest.base_dir.clone();
    let with_model_after = Classifier::new(&new);
    let after = Classifier::lexical(&new);
    let (b, a) = (right(&before), right(&after));
    println!("paraphrases of misrouted questions routed right: {b} -> {a} of {}", blind.len());
    assert!(a > b, "the re-fit routes the blind paraphrases better ({b} -> {a})");
    let (mb, ma) = (right(&with_model_before), right(&with_model_after));
    println!("with the trained router: {mb} -> {ma} of {}", blind.len());
    assert!(ma >= mb, "with the trained router the re-fit must not route the paraphrases worse ({mb} -> {ma})");
    assert!(report.own_after >= report.own_before);
    assert!(report.check_after >= report.check_before);
    // Untouched lines are kept byte for byte.
    let old: std::collections::HashSet<&str> = text.lines().collect();
    let kept = yaml.lines().filter(|l| old.contains(l)).count();
    assert_eq!(kept, text.lines().count(), "every original line survives");
    assert_eq!(yaml.lines().count(), text.lines().count() + report.added.len());
}

/// A folder under the system's temporary one, empty, for this test alone.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-refit-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

#[test]
fn a_manifest_written_to_another_folder_names_the_same_files_from_there() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (manifest, files) in [
        ("routing.yaml", vec!["routing.examples.jsonl", "routing.dialogues.jsonl"]),
        ("examples/rag-manager/routing.yaml", vec!["corpus"]),
    ] {
        let from = root.join(manifest);
        let text = std::fs::read_to_string(&from).expect("manifest");
        let out_dir = scratch(&manifest.replace('/', "-"));
        let moved = switchyard_core::signals::refit::relocate(&text, from.parent().expect("folder"), &out_dir)
            .expect("relocates");
        let out = out_dir.join("proposed.yaml");
        std::fs::write(&out, &moved).expect("write");
        let m = Manifest::load(&out).unwrap_or_else(|e| panic!("{manifest} written elsewhere: {e}"));
        let named: Vec<String> = m
            .classifier
            .examples
            .iter()
            .chain(&m.classifier.dialogues)
            .cloned()
            .chain(m.agents.iter().filter_map(|a| a.retriever.as_ref()).filter_map(|r| r.corpus.clone()))
            .collect();
        assert!(!named.is_empty(), "{manifest}: the premise is a manifest that names files");
        for name in &named {
            assert!(m.resolve(name).exists(), "{manifest}: {name} does not resolve from {}", out_dir.display());
        }
        for file in files {
            assert!(named.iter().any(|n| n.ends_with(file) && n != file), "{manifest}: {file} rewritten: {named:?}");
        }
        // Only the paths changed: every other line is as it was.
        let changed = text.lines().zip(moved.lines()).filter(|(a, b)| a != b).count();
        assert_eq!(text.lines().count(), moved.lines().count());
        assert!(changed >= 1 && changed <= 4, "{manifest}: {changed} lines changed");
        // Written back to its own folder, nothing changes.
        let same = switchyard_core::signals::refit::relocate(
            &text,
            from.parent().expect("folder"),
            from.parent().expect("folder"),
        )
        .expect("relocates");
        assert_eq!(same, text);
        let _ = std::fs::remove_dir_all(&out_dir);
    }
}
