//! Accuracy of the embedded classifier on questions written apart from the manifest.
//!
//! `fixtures/labelled_questions.jsonl` holds paraphrases an analyst or ML engineer would type,
//! none of them copied from `routing.yaml`. The test prints the accuracy and every miss, so a
//! change to the utterances, keywords or algorithm shows what it fixed and what it broke.

use std::collections::BTreeMap;
use std::path::Path;
use switchyard_core::classify::Classifier;
use switchyard_model::manifest::Manifest;

/// Regression floor on the first blind set (a little under what it reaches).
const BLIND_FLOOR: f64 = 0.95;
/// Regression floor on the second blind set.
const BLIND2_FLOOR: f64 = 0.91;

#[derive(serde::Deserialize)]
struct Labelled {
    query: String,
    intent: String,
}

#[test]
fn the_shipped_manifest_classifies_unseen_questions_with_at_least_90_percent_accuracy() {
    // GIVEN the shipped routing.yaml and the labelled questions
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = Manifest::load(&root.join("../routing.yaml")).expect("routing.yaml loads");
    let text = std::fs::read_to_string(root.join("fixtures/labelled_questions.jsonl")).expect("fixture exists");
    let questions: Vec<Labelled> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("fixture line is {query, intent}"))
        .collect();
    let classifier = Classifier::new(&manifest);
    for q in &questions {
        assert!(manifest.intent(&q.intent).is_some(), "fixture names an unknown intent: {}", q.intent);
    }

    // WHEN each is classified
    let mut misses: BTreeMap<&str, Vec<(&str, String, f64)>> = BTreeMap::new();
    let mut per_intent: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut confidences: Vec<(f64, bool, bool)> = Vec::new();
    for q in &questions {
        let c = classifier.classify(&q.query);
        confidences.push((c.confidence, c.ambiguity_flag, c.intent == q.intent));
        let entry = per_intent.entry(q.intent.as_str()).or_default();
        entry.1 += 1;
        if c.intent == q.intent {
            entry.0 += 1;
        } else {
            misses.entry(q.intent.as_str()).or_default().push((q.query.as_str(), c.intent, c.confidence));
        }
    }

    // THEN at least 90% land on their intent
    let right: usize = per_intent.values().map(|v| v.0).sum();
    let accuracy = right as f64 / questions.len() as f64;
    println!(
        "classifier accuracy: {right}/{} = {:.1}% (leave-one-out on the manifest's utterances: {:.1}%, temperature {:.3})",
        questions.len(),
        accuracy * 100.0,
        classifier.self_check() * 100.0,
        classifier.temperature()
    );
    println!(
        "  mean confidence {:.2}; flagged ambiguous {}/{}; accuracy when not flagged {}/{}",
        confidences.iter().map(|c| c.0).sum::<f64>() / confidences.len() as f64,
        confidences.iter().filter(|c| c.1).count(),
        confidences.len(),
        confidences.iter().filter(|c| !c.1 && c.2).count(),
        confidences.iter().filter(|c| !c.1).count(),
    );
    for (intent, (ok, n)) in &per_intent {
        println!("  {intent:<18} {ok:>2}/{n}");
    }
    for (expected, list) in &misses {
        for (query, got, confidence) in list {
            println!("  MISS expected {expected:<18} got {got:<18} ({confidence:.2})  {query}");
        }
    }
    assert!(questions.len() >= 120, "the fixture holds at least 120 questions");
    assert!(accuracy >= 0.90, "accuracy {accuracy:.3} is below 0.90");
}

#[test]
fn a_holdout_set_written_after_the_manifest_was_tuned_reports_its_accuracy() {
    // The 48 questions of holdout_questions.jsonl were written after routing.yaml's utterances
    // were, and the manifest was not edited to fix their misses: they estimate accuracy on
    // questions nobody tuned for. The bar is lower than the main fixture's on purpose.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = Manifest::load(&root.join("../routing.yaml")).expect("routing.yaml loads");
    let text = std::fs::read_to_string(root.join("fixtures/holdout_questions.jsonl")).expect("fixture exists");
    let classifier = Classifier::new(&manifest);
    let mut right = 0;
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let q: Labelled = serde_json::from_str(line).expect("fixture line is {query, intent}");
        let c = classifier.classify(&q.query);
        n += 1;
        if c.intent == q.intent {
            right += 1;
        } else {
            println!(
                "  HOLDOUT MISS expected {:<18} got {:<18} ({:.2})  {}",
                q.intent, c.intent, c.confidence, q.query
            );
        }
    }
    let accuracy = f64::from(right) / f64::from(n);
    println!("holdout accuracy: {right}/{n} = {:.1}%", accuracy * 100.0);
    assert!(accuracy >= 0.75, "holdout accuracy {accuracy:.3} is below 0.75");
}

/// Accuracy, per-intent misses and confusion pairs of the shipped classifier on a fixture.
fn evaluate(fixture: &str) -> f64 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = Manifest::load(&root.join("../routing.yaml")).expect("routing.yaml loads");
    let text = std::fs::read_to_string(root.join("fixtures").join(fixture)).expect("fixture exists");
    let classifier = Classifier::new(&manifest);
    let mut right = 0usize;
    let mut n = 0usize;
    let mut flagged = (0usize, 0usize); // (flagged, flagged among the misses)
    let mut wrong = 0usize;
    let mut pairs: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut per_intent: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut lines = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let q: Labelled = serde_json::from_str(line).expect("fixture line is {query, intent}");
        assert!(manifest.intent(&q.intent).is_some(), "{fixture} names an unknown intent: {}", q.intent);
        let c = classifier.classify(&q.query);
        n += 1;
        let entry = per_intent.entry(q.intent.clone()).or_default();
        entry.1 += 1;
        flagged.0 += usize::from(c.ambiguity_flag);
        if c.intent == q.intent {
            right += 1;
            entry.0 += 1;
        } else {
            wrong += 1;
            flagged.1 += usize::from(c.ambiguity_flag);
            *pairs.entry((q.intent.clone(), c.intent.clone())).or_default() += 1;
            lines.push(format!(
                "  {fixture} MISS expected {:<18} got {:<18} ({:.2}{})  {}",
                q.intent,
                c.intent,
                c.confidence,
                if c.ambiguity_flag { ", ambiguous" } else { "" },
                q.query
            ));
        }
    }
    let accuracy = right as f64 / n.max(1) as f64;
    println!(
        "{fixture}: {right}/{n} = {:.1}%; flagged ambiguous {}/{n}, of the {wrong} misses {} flagged",
        accuracy * 100.0,
        flagged.0,
        flagged.1
    );
    let per: Vec<String> = per_intent.iter().map(|(i, (ok, n))| format!("{i} {ok}/{n}")).collect();
    println!("  per intent: {}", per.join(", "));
    let mut pairs: Vec<_> = pairs.into_iter().collect();
    pairs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let pairs: Vec<String> = pairs.iter().map(|((e, g), c)| format!("{e}->{g} x{c}")).collect();
    println!("  confusions (expected->got): {}", pairs.join(", "));
    for l in lines {
        println!("{l}");
    }
    accuracy
}

#[test]
fn the_first_blind_set_written_before_tuning_reports_its_accuracy() {
    // blind_questions.jsonl: 240 questions (20 per intent) written from the E2I design's intent
    // meanings only, committed before the classifier or manifest was tuned (90.0% then). It
    // then served as the development set: the manifest's vocabulary was widened by error class
    // partly from its misses, so its figure is optimistic; the second blind set is the estimate.
    let accuracy = evaluate("blind_questions.jsonl");
    assert!(accuracy >= BLIND_FLOOR, "blind accuracy {accuracy:.3} is below {BLIND_FLOOR}");
}

#[test]
fn the_second_blind_set_never_tuned_on_reports_its_accuracy() {
    // blind2_questions.jsonl: 120 questions (10 per intent) written like the first blind set,
    // committed with it before any tuning and not evaluated until the tuning was finished
    // (93.3%; the untuned classifier scores 92.5% on it). It is the estimate to trust for
    // questions nobody has seen.
    let accuracy = evaluate("blind2_questions.jsonl");
    assert!(accuracy >= BLIND2_FLOOR, "second blind accuracy {accuracy:.3} is below {BLIND2_FLOOR}");
}

#[test]
fn prints_the_classification_time_on_the_labelled_questions() {
    // Timings are printed, never asserted: they depend on the machine and the build profile.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = Manifest::load(&root.join("../routing.yaml")).expect("routing.yaml loads");
    let text = std::fs::read_to_string(root.join("fixtures/labelled_questions.jsonl")).expect("fixture exists");
    let queries: Vec<String> =
        text.lines().filter_map(|l| serde_json::from_str::<Labelled>(l).ok()).map(|l| l.query).collect();
    let started = std::time::Instant::now();
    let classifier = Classifier::new(&manifest);
    let built = started.elapsed();
    let report = switchyard_core::classify::bench(&classifier, &queries, 20);
    println!(
        "classify: built in {:.1} ms; median {:.1} µs, p99 {:.1} µs over {} queries x 20 rounds",
        built.as_secs_f64() * 1e3,
        report.median_us,
        report.p99_us,
        report.n
    );
}
