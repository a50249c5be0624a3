//! Scope and calibration of the embedded classifier, tuned sets and blind sets side by side.
//!
//! Written before any tuning (one commit, before the scope score existed):
//! - `out_of_scope_tuning.jsonl` (64 everyday, off-domain, adversarial and gibberish
//!   questions): the scope score, its threshold and the shipped negative examples were tuned on
//!   it, with the in-scope tuned sets below;
//! - `out_of_scope_blind.jsonl` (64 different questions of the same four kinds) and
//!   `blind3_questions.jsonl` (60 in-scope questions, 5 per intent): never looked at while
//!   tuning, evaluated once at the end.
//!
//! The in-scope "tuned" sets are the labelled questions, the holdout and the first blind set
//! (all three were used to tune the manifest before). Every figure is printed for both columns.
//!
//! Second round (the threshold 0.35 → 0.38, vocabulary for follow-up-style and meta questions,
//! more negative examples, the leave-one-out temperature sharpened by 0.85): two new blind
//! pairs were written first, each in its own commit before any change they could inform —
//! `blind4_questions.jsonl` + `out_of_scope_blind2.jsonl`, which the round then tuned on, and
//! `blind5_questions.jsonl` + `out_of_scope_blind3.jsonl` (six personas, written differently
//! from every earlier set), scored once at the end. The earlier blind sets joined the tuned
//! column; the blind column is the fifth pair alone.
//!
//! Third round (static word vectors distilled from all-MiniLM-L6-v2, more varied utterances
//! and negative examples, refusal of requests aimed at the router, threshold 0.38 → 0.36): every
//! weight was chosen on the tuned sets only; the fifth pair was held out as a check while
//! tuning but its figures were read after each step, so it has joined the tuned column. The
//! blind column was then the sixth pair (`blind6_questions.jsonl` + `out_of_scope_blind4.jsonl`),
//! written by an independent writer who saw only the intents' descriptions and the entity
//! values, committed before the round's change and scored once after it.
//!
//! Session 7's round (faster classification, follow-up rules, a few manifest words and
//! negative examples, refusal phrases) tuned on the sixth pair, which joined the tuned column.
//! The blind column is the seventh pair (`blind7_questions.jsonl` +
//! `out_of_scope_blind5.jsonl`), by the same kind of independent writer, committed before the
//! round and scored once after it.
//!
//! Session 8's round tuned on the seventh pair (scored), which joined the tuned column; the
//! blind column is the eighth pair (`blind8_questions.jsonl` + `out_of_scope_blind6.jsonl`),
//! written by another independent writer before the round and scored once after it.
//!
//! Session 9's round tuned on the eighth pair, then on the ninth (`blind9_questions.jsonl` +
//! `out_of_scope_blind7.jsonl`) and the tenth (`blind10_questions.jsonl` +
//! `out_of_scope_blind8.jsonl`), each scored once by the rule above before it was tuned on (the
//! tenth with manifest-declared refused topics, `classifier.scope.refuse`); all three joined
//! the tuned column. The blind column is the eleventh pair (`blind11_questions.jsonl` +
//! `out_of_scope_blind9.jsonl`), by another independent writer, committed before the round's
//! last change and scored once after it.

use std::path::Path;
use switchyard_core::classify::{Classifier, PriorTurn};
use switchyard_model::manifest::Manifest;
use switchyard_tests::scope_sets::{BLIND_IN, BLIND_OUT, TUNED_IN, TUNED_OUT};

// Issue 18's bars are 90 % of out-of-scope questions rejected, at most 2 % of in-scope ones,
// and answers at confidence >= 0.9 right 99 % of the time while covering 85 % of the
// questions. The tuned column meets all four, and so does the blind column (the eleventh pair,
// scored once after session 9's round), which asserts them as the bars.
/// Blind out-of-scope set rejected: 97.2 % measured (70 of 72; 94.4 % with the classifier and
/// manifest before the round's last change): the bar.
const OUT_OF_SCOPE_BLIND_FLOOR: f64 = 0.90;
/// Blind in-scope questions rejected: 1.4 % measured (2 of 144; 1.4 % before): the bar.
const IN_SCOPE_REJECTED_CEILING: f64 = 0.02;
/// Blind answers at >= 0.9 that are right: 100 % measured (123 of 123; 100 % before): the bar.
const SURE_PRECISION_FLOOR: f64 = 0.99;
/// Blind questions answered at >= 0.9: 85.4 % measured (123 of 144; 86.8 % before; 86.1 %
/// after session 9's follow-up round, which the pair did not inform): the bar.
const SURE_COVERAGE_FLOOR: f64 = 0.85;
/// The tuned column holds the bars.
const TUNED_BARS: (f64, f64, f64, f64) = (0.90, 0.02, 0.99, 0.85);
/// With the conversation (each question the second turn of one): blind in-scope questions
/// rejected, 1.4 % measured (as alone).
const IN_CONTEXT_IN_SCOPE_REJECTED_CEILING: f64 = 0.02;
/// With the conversation: blind off-domain questions rejected, 97.2 % measured (as alone; 83.3 %
/// on the tenth pair before the refused topics).
const IN_CONTEXT_OUT_OF_SCOPE_FLOOR: f64 = 0.90;

#[derive(serde::Deserialize)]
struct Line {
    query: String,
    #[serde(default)]
    intent: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

fn read(files: &[&str]) -> Vec<Line> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(root.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str::<Line>(l).unwrap_or_else(|e| panic!("{f}: {e}: {l}")))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn classifier() -> (Manifest, Classifier) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = Manifest::load(&root.join("../routing.yaml")).expect("routing.yaml loads");
    let classifier = Classifier::new(&manifest);
    (manifest, classifier)
}

/// Share of `set` the classifier calls out of scope, printing each that it does.
fn rejected(c: &Classifier, set: &[Line], label: &str, print_kept: bool) -> f64 {
    let mut n = 0;
    for l in set {
        let r = c.classify(&l.query);
        if !r.in_scope {
            n += 1;
        }
        if r.in_scope == print_kept {
            println!(
                "  {label} {} {:.3} {:<12} {}",
                if r.in_scope { "KEPT" } else { "REJECTED" },
                r.scope_score,
                l.kind.as_deref().or(l.intent.as_deref()).unwrap_or(""),
                l.query
            );
        }
    }
    n as f64 / set.len().max(1) as f64
}

#[test]
fn out_of_scope_questions_are_rejected_and_in_scope_ones_kept_on_tuned_and_blind_sets() {
    let (manifest, c) = classifier();
    let (tuned_out, blind_out) = (read(&TUNED_OUT), read(&BLIND_OUT));
    let (tuned_in, blind_in) = (read(&TUNED_IN), read(&BLIND_IN));
    assert!(tuned_out.len() >= 60 && blind_out.len() >= 60, "each out-of-scope set holds at least 60 questions");

    let tuned_out_rate = rejected(&c, &tuned_out, "tuned-out", true);
    let blind_out_rate = rejected(&c, &blind_out, "blind-out", true);
    let tuned_in_rate = rejected(&c, &tuned_in, "tuned-in", false);
    let blind_in_rate = rejected(&c, &blind_in, "blind-in", false);
    println!("scope threshold {:.2}            tuned      blind", manifest.classifier.scope.threshold);
    println!("out-of-scope rejected     {:>9.1}% {:>9.1}%", tuned_out_rate * 100.0, blind_out_rate * 100.0);
    println!("in-scope rejected         {:>9.1}% {:>9.1}%", tuned_in_rate * 100.0, blind_in_rate * 100.0);
    for kind in ["everyday", "off_domain", "adversarial", "gibberish"] {
        let of = |set: &[Line]| {
            let subset: Vec<&Line> = set.iter().filter(|l| l.kind.as_deref() == Some(kind)).collect();
            let n = subset.iter().filter(|l| !c.classify(&l.query).in_scope).count();
            format!("{n}/{}", subset.len())
        };
        println!("  {kind:<22} {:>9}  {:>9}", of(&tuned_out), of(&blind_out));
    }
    assert!(tuned_out_rate >= TUNED_BARS.0, "tuned out-of-scope rejection {tuned_out_rate:.3}");
    assert!(tuned_in_rate <= TUNED_BARS.1, "tuned in-scope rejection {tuned_in_rate:.3}");
    assert!(blind_out_rate >= OUT_OF_SCOPE_BLIND_FLOOR, "blind out-of-scope rejection {blind_out_rate:.3}");
    assert!(blind_in_rate <= IN_SCOPE_REJECTED_CEILING, "blind in-scope rejection {blind_in_rate:.3}");
}

/// Share of `set` the classifier calls out of scope when each question is the second turn of a
/// conversation whose first turn is `openers[n % len]` (resolved alone), printing each that it
/// rejects (`print_rejected`) or keeps.
fn rejected_in_context(c: &Classifier, set: &[Line], openers: &[&Line], label: &str, print_rejected: bool) -> f64 {
    let mut n = 0;
    for (i, l) in set.iter().enumerate() {
        let opener = openers[i % openers.len()];
        let first = c.classify(&opener.query);
        let history = [PriorTurn {
            question: opener.query.clone(),
            intent: first.intent.clone(),
            entities: first.entities.clone(),
        }];
        let r = c.classify_in_context(&l.query, &history);
        if !r.in_scope {
            n += 1;
        }
        if r.in_scope != print_rejected {
            println!(
                "  {label} {} {:.3} {:<12} {}",
                if r.in_scope { "KEPT" } else { "REJECTED" },
                r.scope_score,
                l.kind.as_deref().or(l.intent.as_deref()).unwrap_or(""),
                l.query
            );
        }
    }
    n as f64 / set.len().max(1) as f64
}

#[test]
fn with_the_conversation_follow_ups_stay_in_scope_and_off_domain_questions_are_still_rejected() {
    let (_, c) = classifier();
    let (tuned_out, blind_out) = (read(&TUNED_OUT), read(&BLIND_OUT));
    let (tuned_in, blind_in) = (read(&TUNED_IN), read(&BLIND_IN));
    // An in-scope question follows the question before it in its file (the files are grouped
    // by intent, so mostly a question on the same subject); an off-domain one follows an
    // in-scope question of the same column.
    let previous = |set: &[Line]| -> Vec<usize> { (0..set.len()).map(|i| (i + set.len() - 1) % set.len()).collect() };
    let tuned_prev: Vec<&Line> = previous(&tuned_in).into_iter().map(|i| &tuned_in[i]).collect();
    let blind_prev: Vec<&Line> = previous(&blind_in).into_iter().map(|i| &blind_in[i]).collect();
    let tuned_openers: Vec<&Line> = tuned_in.iter().collect();
    let blind_openers: Vec<&Line> = blind_in.iter().collect();

    let tuned_in_rate = rejected_in_context(&c, &tuned_in, &tuned_prev, "tuned-in", true);
    let blind_in_rate = rejected_in_context(&c, &blind_in, &blind_prev, "blind-in", true);
    let tuned_out_rate = rejected_in_context(&c, &tuned_out, &tuned_openers, "tuned-out", false);
    let blind_out_rate = rejected_in_context(&c, &blind_out, &blind_openers, "blind-out", false);
    println!("as the second turn of a conversation     tuned      blind");
    println!("in-scope rejected         {:>9.1}% {:>9.1}%", tuned_in_rate * 100.0, blind_in_rate * 100.0);
    println!("out-of-scope rejected     {:>9.1}% {:>9.1}%", tuned_out_rate * 100.0, blind_out_rate * 100.0);
    assert!(blind_in_rate <= IN_CONTEXT_IN_SCOPE_REJECTED_CEILING, "blind in-scope rejection {blind_in_rate:.3}");
    assert!(blind_out_rate >= IN_CONTEXT_OUT_OF_SCOPE_FLOOR, "blind out-of-scope rejection {blind_out_rate:.3}");
}

/// (answers with confidence >= 0.9, of them right, in-scope answers, right, ECE, table)
fn calibration(c: &Classifier, set: &[Line]) -> (usize, usize, usize, usize, f64, Vec<String>) {
    let answers: Vec<(f64, bool)> = set
        .iter()
        .map(|l| (c.classify(&l.query), l.intent.as_deref().expect("labelled")))
        .filter(|(r, _)| r.in_scope)
        .map(|(r, intent)| (r.confidence, r.intent == intent))
        .collect();
    let sure: Vec<&(f64, bool)> = answers.iter().filter(|a| a.0 >= 0.9).collect();
    let mut ece = 0.0;
    let mut table = Vec::new();
    for b in 0..10 {
        let (lo, hi) = (b as f64 / 10.0, (b + 1) as f64 / 10.0);
        let bin: Vec<&(f64, bool)> = answers.iter().filter(|a| a.0 >= lo && (a.0 < hi || b == 9)).collect();
        if bin.is_empty() {
            continue;
        }
        let accuracy = bin.iter().filter(|a| a.1).count() as f64 / bin.len() as f64;
        let mean = bin.iter().map(|a| a.0).sum::<f64>() / bin.len() as f64;
        ece += bin.len() as f64 / answers.len() as f64 * (accuracy - mean).abs();
        table.push(format!("{lo:.1}-{hi:.1} n={:<4} accuracy {:>5.1}% mean {mean:.3}", bin.len(), accuracy * 100.0));
    }
    (sure.len(), sure.iter().filter(|a| a.1).count(), answers.len(), answers.iter().filter(|a| a.1).count(), ece, table)
}

#[test]
fn confident_answers_are_right_on_tuned_and_blind_sets() {
    let (_, c) = classifier();
    let (tuned, blind) = (read(&TUNED_IN), read(&BLIND_IN));
    let t = calibration(&c, &tuned);
    let b = calibration(&c, &blind);
    println!("calibration                       tuned ({:>3})   blind ({:>3})", tuned.len(), blind.len());
    println!(
        "intent accuracy (in-scope)        {:>10.1}%   {:>10.1}%",
        100.0 * t.3 as f64 / t.2 as f64,
        100.0 * b.3 as f64 / b.2 as f64
    );
    println!(
        "confidence >= 0.9 covers          {:>10.1}%   {:>10.1}%",
        100.0 * t.0 as f64 / tuned.len() as f64,
        100.0 * b.0 as f64 / blind.len() as f64
    );
    println!(
        "  of them correct                 {:>10.1}%   {:>10.1}%",
        100.0 * t.1 as f64 / t.0 as f64,
        100.0 * b.1 as f64 / b.0 as f64
    );
    println!("ECE                               {:>11.3}   {:>11.3}", t.4, b.4);
    println!("reliability, blind sets:");
    for row in &b.5 {
        println!("  {row}");
    }
    for l in &blind {
        let r = c.classify(&l.query);
        let want = l.intent.as_deref().unwrap_or_default();
        if r.in_scope && r.intent != want {
            println!(
                "  BLIND MISS expected {want:<18} got {:<18} ({:.3}{})  {}",
                r.intent,
                r.confidence,
                if r.ambiguity_flag { ", ambiguous" } else { "" },
                l.query
            );
        }
    }
    let tuned_precision = t.1 as f64 / t.0.max(1) as f64;
    let tuned_coverage = t.0 as f64 / tuned.len() as f64;
    assert!(tuned_precision >= TUNED_BARS.2, "tuned precision at >= 0.9 is {tuned_precision:.3}");
    assert!(tuned_coverage >= TUNED_BARS.3, "tuned coverage at >= 0.9 is {tuned_coverage:.3}");
    let precision = b.1 as f64 / b.0.max(1) as f64;
    let coverage = b.0 as f64 / blind.len() as f64;
    assert!(precision >= SURE_PRECISION_FLOOR, "blind precision at >= 0.9 is {precision:.3}");
    assert!(coverage >= SURE_COVERAGE_FLOOR, "blind coverage at >= 0.9 is {coverage:.3}");
}

#[test]
fn hostile_and_degenerate_text_is_out_of_scope_without_panicking() {
    let (_, c) = classifier();
    let long = "zzz ".repeat(30_000);
    for text in ["", "   ", "\u{0}\u{1}\u{2}", "💥💥💥", "' OR 1=1 --", "%s%s%n", long.as_str()] {
        let r = c.classify(text);
        assert!(!r.in_scope, "{:?} is out of scope", text.chars().take(20).collect::<String>());
        assert!((0.0..=1.0).contains(&r.scope_score));
    }
    // Markup around domain words is judged by its words ("alert" is the health check's).
    let r = c.classify("<script>alert(1)</script>");
    assert!((0.0..=1.0).contains(&r.scope_score));
}
