//! Follow-up resolution: multi-turn dialogues classified with and without the conversation.
//!
//! `fixtures/dialogues_tuning.yaml` and `fixtures/dialogues_blind.yaml` (44 dialogues over the
//! shipped routing.yaml: brand, region, period and KPI swaps, explicit intent switches,
//! three-turn chains) were written in one commit before the follow-up rules were tuned; the
//! rules were tuned on the first, and the second, scored once (92.6 % of its follow-ups with
//! the intended intent), was then tuned on too. `fixtures/dialogues_blind2.yaml` (16 more) was
//! written after that scoring and before that second round, and scored once at the end (then
//! tuned on in a third round); `fixtures/dialogues_blind3.yaml` (24) was written before the
//! third round and scored once after it. `fixtures/dialogues_blind4.yaml` (30) was written by an
//! independent writer (who saw only the intents' descriptions and the entity values) before
//! issue 18's third classifier round (word vectors) and scored once after it, then tuned on in
//! session 7; `fixtures/dialogues_blind5.yaml` (30), by the same kind of writer, was committed
//! before session 7's round and scored once after it, then tuned on in session 8;
//! `fixtures/dialogues_blind6.yaml` (30), by another such writer, was committed before
//! session 8's round and scored once after it, then tuned on in session 9, as were
//! `fixtures/dialogues_blind7.yaml` and `fixtures/dialogues_blind8.yaml` (30 each, each scored
//! once before), and `fixtures/dialogues_blind9.yaml` (30, scored once after the scope round);
//! `fixtures/dialogues_blind10.yaml` (30), committed before session 9's first follow-up round
//! and scored once after it, then tuned on; `fixtures/dialogues_blind11.yaml` (30), by another
//! such writer, was committed before the second follow-up round and scored once after it, then
//! tuned on in session 10; `fixtures/dialogues_blind12.yaml` to `dialogues_blind19.yaml` (30
//! each, independent writers) were committed two at a time before each of session 10's four
//! rounds and scored once after it (halves 18 and 19 were then the untuned pair).
//! Session 11 replaced the hand-set carry priors with a learned continuation model
//! (shared/core/src/classify/continuation.rs) trained on halves 0-19; `dialogues_blind20.yaml` to
//! `dialogues_blind23.yaml` (four new independent writers) were committed before it and scored
//! once after it, then tuned on (the model is now trained on 0-23); `dialogues_blind24.yaml` to
//! `dialogues_blind27.yaml` were committed before that second round and scored once after it,
//! then trained and tuned on; `dialogues_blind28.yaml` to `dialogues_blind31.yaml` were
//! committed (unread) during the third round and scored once after it: they are the halves
//! nothing was tuned or trained on.
//! Each dialogue is
//! played as intake plays a session: every turn is classified with the turns before it, as
//! they were resolved (intent and entities, carried ones included), so an early mistake
//! costs the later turns too. The first turn of a dialogue has no history; only the later
//! turns (the follow-ups) are scored. Run with `--nocapture` to see the figures.

use std::collections::BTreeMap;
use std::path::Path;
use switchyard_core::classify::{Classification, Classifier, ContinuationModel, ContinuationTrainer, PriorTurn};
use switchyard_model::manifest::Manifest;

/// The halves in the order they were written: name, fixture, and regression floors of the
/// follow-up intent accuracy and of the follow-ups whose expected entities are all resolved, a
/// little under what each reaches.
///
/// Issue 11 asks for 95 % of follow-ups with the intended intent. The tuning half (100 %), the
/// first blind half (scored once at 92.6 %, 96.3 % since tuned on) and the second (scored once
/// at 89.5 %, 100 % since tuned on in session 4) reach it; the third, written before that round
/// and scored once after it, does not (86.2 %, 25 of 29); the fourth, scored once at 80.6 % (29
/// of 36; entities 87.9 %), reaches 100 % since session 7 tuned on it; the fifth, scored once
/// after that round at 94.4 % (34 of 36; 83.3 % with the classifier before the round; entities
/// 97.1 %), 100 % since session 8 tuned on it; the sixth, scored once after session 8's round
/// at 86.1 % (31 of 36; as before the round), 100 % since session 9 tuned on it; the seventh,
/// scored once in session 9 before its tuning at 97.3 % (36 of 37), 100 % since; the eighth,
/// scored once in session 9 at 91.9 % (34 of 37; entities 94.3 %, 33 of 35), 100 % since
/// (entities 97.1 %); the ninth, scored once after session 9's round at 86.5 % (32 of 37;
/// entities 88.2 %, 30 of 34), 100 % since session 9's follow-up round tuned on it; the tenth,
/// scored once after that round at 83.3 % (30 of 36; 83.3 % before it too; entities 85.7 %),
/// 100 % since the next round tuned on it; the eleventh, scored once after that round, 94.4 %
/// (34 of 36, one turn under the bar; 94.4 % before it too; entities 94.1 %, 32 of 34), 100 %
/// since session 10 tuned on it. Session 10 had eight more halves written (12-19, two per
/// round, each pair committed before the round it judges) and ran four rounds, each tuned on
/// the halves already scored and followed by the scoring, once, of the next pair: 12 and 13
/// scored 83.3 % and 97.2 %, 14 and 15 83.3 % and 91.7 %, 16 and 17 97.2 % and 77.8 %, 18 and
/// 19 (the blind pair now) 88.9 % and 83.3 %; every one the same with the classifier before
/// its round. Pooled, 253 of 288 (87.8 %). Session 11 (learned continuation model, two
/// rounds): halves 20-23 scored once at 88.9, 94.4, 94.4, 97.2 % (135 of 144 through `chat`;
/// the rules before, 134), then trained and tuned on; halves 24-27 scored once after the second
/// round at 83.3, 97.2, 94.4, 97.2 % through `chat` (134 of 144; the rules of session 10, 133;
/// this harness plays half 24 one turn lower, 29 of 36), then trained and tuned on; halves 28-31
/// scored once after the third round at 97.2, 83.3, 97.2, 91.7 % (133 of 144; session 10's
/// classifier 131; the same rules with an empty model 131). Session 12 (the learned intent
/// model, tests/intent_model.rs): halves 32-35, committed unread before it, scored once after
/// it at 91.7, 83.3, 100, 97.2 % (134 of 144; session 11's classifier 131) through `chat`
/// counting a turn refused as out of scope as a miss, which this harness does too (the earlier
/// `chat` figures counted the intent alone, one turn higher on halves 21 and 24), then tuned
/// on; halves 36-39 scored once after the second round at 86.1, 80.6, 97.2, 94.4 % (129 of
/// 144), then tuned on; halves 40-43 scored once after the third at 97.2, 91.7, 94.4, 97.2 %
/// (137 of 144, 95.1 %; this harness the same).
const HALVES: [(&str, &str, f64, f64); 44] = [
    ("tuning", "dialogues_tuning.yaml", 0.96, 0.95),
    ("blind", "dialogues_blind.yaml", 0.96, 0.95),
    ("blind 2", "dialogues_blind2.yaml", 0.96, 0.95),
    ("blind 3", "dialogues_blind3.yaml", 0.86, 0.95),
    ("blind 4", "dialogues_blind4.yaml", 0.97, 0.97),
    ("blind 5", "dialogues_blind5.yaml", 0.97, 0.97),
    ("blind 6", "dialogues_blind6.yaml", 0.94, 0.97),
    ("blind 7", "dialogues_blind7.yaml", 0.97, 0.97),
    ("blind 8", "dialogues_blind8.yaml", 0.97, 0.95),
    ("blind 9", "dialogues_blind9.yaml", 0.97, 0.97),
    ("blind 10", "dialogues_blind10.yaml", 0.97, 0.95),
    ("blind 11", "dialogues_blind11.yaml", 0.97, 0.97),
    ("blind 12", "dialogues_blind12.yaml", 0.97, 0.97),
    ("blind 13", "dialogues_blind13.yaml", 0.97, 0.97),
    ("blind 14", "dialogues_blind14.yaml", 0.94, 0.94),
    ("blind 15", "dialogues_blind15.yaml", 0.94, 0.97),
    ("blind 16", "dialogues_blind16.yaml", 0.97, 0.97),
    ("blind 17", "dialogues_blind17.yaml", 0.94, 0.97),
    ("blind 18", "dialogues_blind18.yaml", 0.88, 0.97),
    ("blind 19", "dialogues_blind19.yaml", 0.83, 0.94),
    ("blind 20", "dialogues_blind20.yaml", 0.91, 0.94),
    ("blind 21", "dialogues_blind21.yaml", 0.91, 0.94),
    ("blind 22", "dialogues_blind22.yaml", 0.97, 0.94),
    ("blind 23", "dialogues_blind23.yaml", 0.97, 0.91),
    ("blind 24", "dialogues_blind24.yaml", 0.88, 0.97),
    ("blind 25", "dialogues_blind25.yaml", 0.97, 0.87),
    ("blind 26", "dialogues_blind26.yaml", 0.94, 0.97),
    ("blind 27", "dialogues_blind27.yaml", 0.94, 0.94),
    ("blind 28", "dialogues_blind28.yaml", 0.97, 0.97),
    ("blind 29", "dialogues_blind29.yaml", 0.83, 0.97),
    ("blind 30", "dialogues_blind30.yaml", 0.94, 0.97),
    ("blind 31", "dialogues_blind31.yaml", 0.91, 0.97),
    ("blind 32", "dialogues_blind32.yaml", 0.94, 0.91),
    ("blind 33", "dialogues_blind33.yaml", 0.94, 0.91),
    ("blind 34", "dialogues_blind34.yaml", 0.97, 0.97),
    ("blind 35", "dialogues_blind35.yaml", 0.97, 0.91),
    ("blind 36", "dialogues_blind36.yaml", 0.88, 0.97),
    ("blind 37", "dialogues_blind37.yaml", 0.91, 0.91),
    ("blind 38", "dialogues_blind38.yaml", 0.97, 0.97),
    ("blind 39", "dialogues_blind39.yaml", 0.97, 0.97),
    ("blind 40", "dialogues_blind40.yaml", 0.97, 0.94),
    ("blind 41", "dialogues_blind41.yaml", 0.91, 0.91),
    ("blind 42", "dialogues_blind42.yaml", 0.94, 0.94),
    ("blind 43", "dialogues_blind43.yaml", 0.97, 0.94),
];

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    dialogues: Vec<Dialogue>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Dialogue {
    id: String,
    kind: String,
    turns: Vec<Turn>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    text: String,
    intent: String,
    #[serde(default)]
    entities: BTreeMap<String, String>,
}

fn classifier() -> (Manifest, Classifier) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = Manifest::load(&root.join("../routing.yaml")).expect("routing.yaml loads");
    let classifier = Classifier::new(&manifest);
    (manifest, classifier)
}

fn load(name: &str) -> Vec<Dialogue> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_yaml::from_str::<Fixture>(&text).unwrap_or_else(|e| panic!("{name}: {e}")).dialogues
}

/// Whether every expected entity is resolved: exactly one entity of the type, with that value.
fn entities_match(c: &Classification, expected: &BTreeMap<String, String>) -> bool {
    expected.iter().all(|(kind, value)| {
        let found: Vec<&str> = c.entities.iter().filter(|e| e.entity_type == *kind).map(|e| e.value.as_str()).collect();
        found.len() == 1 && (value == "*" || found[0] == value)
    })
}

/// Figures of one half of the fixture.
#[derive(Default)]
struct Score {
    follow_ups: usize,
    intent_with: usize,
    intent_without: usize,
    in_scope_with: usize,
    in_scope_without: usize,
    with_entities: usize,
    entities_with: usize,
    /// (kind, right with context, of)
    per_kind: BTreeMap<String, (usize, usize)>,
    /// Per cue (continuation or not): (turns whose intended intent is the previous turn's, of).
    keeps: BTreeMap<bool, (usize, usize)>,
    /// (confidence with context, right) of every follow-up.
    confidences: Vec<(f64, bool)>,
    misses: Vec<String>,
}

fn score(c: &Classifier, dialogues: &[Dialogue]) -> Score {
    let mut s = Score::default();
    for d in dialogues {
        let mut history: Vec<PriorTurn> = Vec::new();
        for (n, turn) in d.turns.iter().enumerate() {
            let with = c.classify_in_context(&turn.text, &history);
            if n > 0 {
                let without = c.classify(&turn.text);
                s.follow_ups += 1;
                let right = with.intent == turn.intent && with.in_scope;
                s.intent_with += usize::from(right);
                s.intent_without += usize::from(without.intent == turn.intent && without.in_scope);
                s.in_scope_with += usize::from(with.in_scope);
                s.in_scope_without += usize::from(without.in_scope);
                let kind = s.per_kind.entry(d.kind.clone()).or_default();
                kind.0 += usize::from(right);
                kind.1 += 1;
                let continuation = with.follow_up.as_ref().is_some_and(|f| f.continuation);
                let keep = s.keeps.entry(continuation).or_default();
                keep.0 += usize::from(turn.intent == d.turns[n - 1].intent);
                keep.1 += 1;
                s.confidences.push((with.confidence, right));
                let entities_right = entities_match(&with, &turn.entities);
                if !turn.entities.is_empty() {
                    s.with_entities += 1;
                    s.entities_with += usize::from(entities_right);
                }
                if !right || !entities_right {
                    let found: Vec<String> = with
                        .entities
                        .iter()
                        .map(|e| format!("{}={}({:?})", e.entity_type, e.value, e.source))
                        .collect();
                    s.misses.push(format!(
                        "{} turn {}: {:?} → {} {:.2} in_scope={} (want {}; alone {} {:.2}) [{}]",
                        d.id,
                        n + 1,
                        turn.text,
                        with.intent,
                        with.confidence,
                        with.in_scope,
                        turn.intent,
                        without.intent,
                        without.confidence,
                        found.join(", ")
                    ));
                }
            }
            history.push(PriorTurn { question: turn.text.clone(), intent: with.intent, entities: with.entities });
        }
    }
    s
}

fn pct(a: usize, b: usize) -> f64 {
    100.0 * a as f64 / b.max(1) as f64
}

/// The halves the shipped manifest's continuation model (`routing.dialogues.jsonl`, in its router artifact) is trained
/// on: the first this many of [`HALVES`]. The later ones judge it.
const TRAINED_ON: usize = 40;
/// The first half by an independent writer (the cross-validation's held-out halves start here).
const FIRST_INDEPENDENT: usize = 4;

/// Per half, per follow-up: its features and whether its intended intent is the previous
/// turn's intended intent.
fn labelled_follow_ups(
    c: &Classifier,
    halves: &[Vec<Dialogue>],
) -> Vec<Vec<(switchyard_core::classify::ContinuationFeatures, bool)>> {
    halves
        .iter()
        .map(|dialogues| {
            dialogues
                .iter()
                .flat_map(|d| d.turns.windows(2))
                .map(|pair| {
                    let features = c.continuation_features(&pair[1].text, &pair[0].intent);
                    (features, pair[1].intent == pair[0].intent)
                })
                .collect()
        })
        .collect()
}

fn train(
    labelled: &[Vec<(switchyard_core::classify::ContinuationFeatures, bool)>],
    leave_out: Option<usize>,
) -> ContinuationTrainer {
    let mut trainer = ContinuationTrainer::default();
    for (n, half) in labelled.iter().enumerate() {
        if Some(n) != leave_out {
            for (features, keeps) in half {
                trainer.add(features, *keeps);
            }
        }
    }
    trainer
}

/// The conversations of `dialogues`, as the trainer reads them.
fn conversations(dialogues: &[Dialogue]) -> Vec<Vec<(String, String)>> {
    dialogues.iter().map(|d| d.turns.iter().map(|t| (t.text.clone(), t.intent.clone())).collect()).collect()
}

/// The shipped manifest's own continuation model, in its router artifact, is trained from
/// `routing.dialogues.jsonl` (named by `classifier.dialogues`), which holds the training halves.
/// With `SWITCHYARD_WRITE_CONTINUATION_MODEL=1` the test writes that file instead (after
/// changing a training half); `switchyard train` then trains the artifact.
#[test]
fn the_shipped_manifests_continuation_model_is_trained_on_the_training_halves() {
    let (manifest, c) = classifier();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let halves: Vec<Vec<Dialogue>> = HALVES[..TRAINED_ON].iter().map(|h| load(h.1)).collect();
    let halves: Vec<Vec<(String, String)>> = halves.iter().flat_map(|h| conversations(h)).collect();
    let jsonl: String = halves
        .iter()
        .map(|turns| {
            // Text before intent, as people read a turn.
            let string = |s: &str| serde_json::Value::from(s).to_string();
            let turns: Vec<String> = turns
                .iter()
                .map(|(text, intent)| format!("{{\"text\":{},\"intent\":{}}}", string(text), string(intent)))
                .collect();
            format!("{{\"turns\":[{}]}}\n", turns.join(","))
        })
        .collect();
    assert_eq!(manifest.classifier.dialogues, ["routing.dialogues.jsonl"], "routing.yaml names its dialogues");
    let path = root.join("routing.dialogues.jsonl");
    if std::env::var_os("SWITCHYARD_WRITE_CONTINUATION_MODEL").is_some() {
        std::fs::write(&path, &jsonl).expect("write routing.dialogues.jsonl");
    }
    assert!(
        std::fs::read_to_string(&path).ok().as_deref() == Some(jsonl.as_str()),
        "routing.dialogues.jsonl is not the training halves: run SWITCHYARD_WRITE_CONTINUATION_MODEL=1 cargo test -p switchyard-tests --test follow_ups, then switchyard train"
    );
    let mut own = ContinuationTrainer::default();
    c.train_continuation(&halves, &mut own);
    let loaded = switchyard_core::router::load(&manifest).expect("routing.router is current (switchyard train)");
    assert!(
        loaded.continuation.as_deref() == Some(&own.model()),
        "routing.router's continuation model is not what routing.dialogues.jsonl gives: run switchyard train"
    );
}

/// Leave one half out: for each half by an independent writer, a model trained on every other
/// training half, scored on the left-out one as `score` plays it; beside it, the rules alone
/// (an empty model). The figure that says how the model does on wording it never saw.
#[test]
fn the_continuation_model_cross_validated_over_the_independent_halves() {
    let (_, mut c) = classifier();
    let halves: Vec<Vec<Dialogue>> = HALVES[..TRAINED_ON].iter().map(|h| load(h.1)).collect();
    let labelled = labelled_follow_ups(&c, &halves);
    let (mut learned, mut rules, mut of) = (0, 0, 0);
    let mut cells = Vec::new();
    for held_out in FIRST_INDEPENDENT..TRAINED_ON {
        c.set_continuation_model(train(&labelled, Some(held_out)).model());
        let with_model = score(&c, &halves[held_out]);
        c.set_continuation_model(ContinuationModel::default());
        let with_rules = score(&c, &halves[held_out]);
        if std::env::var_os("SHOW_MISSES").is_some() {
            for m in &with_model.misses {
                println!("  learned miss {m}");
            }
        }
        learned += with_model.intent_with;
        rules += with_rules.intent_with;
        of += with_model.follow_ups;
        cells.push(format!(
            "{} {:.1}/{:.1}",
            HALVES[held_out].0,
            pct(with_model.intent_with, with_model.follow_ups),
            pct(with_rules.intent_with, with_rules.follow_ups)
        ));
    }
    println!("leave-one-half-out, learned/rules: {}", cells.join(", "));
    // The halves written after the shipped model's training: scored with it and with the rules.
    let shipped = classifier().1;
    for (name, file, ..) in &HALVES[TRAINED_ON..] {
        let dialogues = load(file);
        let with_model = score(&shipped, &dialogues);
        let with_rules = score(&c, &dialogues);
        println!(
            "{name} (not trained on): learned {}/{} = {:.1} %, rules {}/{} = {:.1} %",
            with_model.intent_with,
            with_model.follow_ups,
            pct(with_model.intent_with, with_model.follow_ups),
            with_rules.intent_with,
            with_rules.follow_ups,
            pct(with_rules.intent_with, with_rules.follow_ups)
        );
    }
    println!(
        "pooled: learned {learned}/{of} = {:.1} %, rules {rules}/{of} = {:.1} %",
        pct(learned, of),
        pct(rules, of)
    );
    // A regression floor a little under what it reaches (96.8 % over halves 4-27 in session 11).
    assert!(pct(learned, of) >= 95.5, "leave-one-half-out {:.1} % < 95.5 %", pct(learned, of));
}

#[test]
fn the_dialogue_fixture_is_well_formed_and_large_enough() {
    let (manifest, _) = classifier();
    let halves: Vec<Vec<Dialogue>> = HALVES.iter().map(|h| load(h.1)).collect();
    let (tuning, blind) = (&halves[0], &halves[1]);
    assert!(tuning.len() + blind.len() >= 40, "at least 40 dialogues");
    let mut ids = std::collections::HashSet::new();
    for d in halves.iter().flatten() {
        assert!(ids.insert(d.id.clone()), "dialogue id {} is used twice", d.id);
        assert!(d.turns.len() >= 2, "{}: a dialogue has a follow-up", d.id);
        for t in &d.turns {
            assert!(manifest.intent(&t.intent).is_some(), "{}: unknown intent {}", d.id, t.intent);
            for kind in t.entities.keys() {
                assert!(manifest.entities.contains_key(kind), "{}: unknown entity type {kind}", d.id);
            }
        }
    }
    for kind in ["brand_swap", "region_swap", "period_swap", "switch", "chain"] {
        for (half, set) in [("tuning", tuning), ("blind", blind)] {
            assert!(set.iter().any(|d| d.kind == kind), "the {half} half has a {kind} dialogue");
        }
    }
    assert!(blind.iter().chain(tuning).filter(|d| d.turns.len() >= 3).count() >= 8, "three-turn chains");
}

#[test]
fn follow_ups_get_their_intended_intent_with_the_conversation_on_tuning_and_blind_dialogues() {
    let (_, c) = classifier();
    let scores: Vec<Score> = HALVES.iter().map(|h| score(&c, &load(h.1))).collect();
    let header: Vec<String> =
        HALVES.iter().zip(&scores).map(|(h, s)| format!("{} ({:>2})", h.0, s.follow_ups)).collect();
    println!("follow-up turns                  {}", header.iter().map(|h| format!("{h:<15}")).collect::<String>());
    let halves: Vec<&Score> = scores.iter().collect();
    let (tuning, blind) = (&scores[0], &scores[1]);
    let rows: [(&str, fn(&Score) -> (usize, usize)); 5] = [
        ("intent right, with context", |s| (s.intent_with, s.follow_ups)),
        ("intent right, without context", |s| (s.intent_without, s.follow_ups)),
        ("in scope, with context", |s| (s.in_scope_with, s.follow_ups)),
        ("in scope, without context", |s| (s.in_scope_without, s.follow_ups)),
        ("entities right, with context", |s| (s.entities_with, s.with_entities)),
    ];
    for (label, figure) in rows {
        let cells: Vec<String> = halves
            .iter()
            .map(|s| {
                let (n, of) = figure(s);
                format!("{:>5.1}% ({n:>2}/{of:>2})", pct(n, of))
            })
            .collect();
        println!("{label:<32} {}", cells.join("  "));
    }
    for kind in tuning.per_kind.keys() {
        let cells: Vec<String> = halves
            .iter()
            .map(|s| {
                let (n, of) = s.per_kind.get(kind).copied().unwrap_or_default();
                format!("{n:>2}/{of:<2}          ")
            })
            .collect();
        println!("  {kind:<30} {}", cells.join("  "));
    }
    // The carry priors of classify/followup.rs are these rates on the tuning half and the
    // first blind half (tuned on after it was scored), with Laplace smoothing.
    for continuation in [true, false] {
        let (keep, of) = [tuning, blind]
            .iter()
            .filter_map(|s| s.keeps.get(&continuation))
            .fold((0, 0), |a, k| (a.0 + k.0, a.1 + k.1));
        println!(
            "  tuning and blind 1: {} follow-ups keep the intent {keep}/{of} → prior {:.2}",
            if continuation { "continuation" } else { "other" },
            (keep + 1) as f64 / (of + 2) as f64
        );
    }
    for ((half, ..), s) in HALVES.iter().zip(&scores) {
        for (lo, hi) in [(0.0, 0.6), (0.6, 0.9), (0.9, 1.01)] {
            let bin: Vec<&(f64, bool)> = s.confidences.iter().filter(|c| c.0 >= lo && c.0 < hi).collect();
            let mean = bin.iter().map(|c| c.0).sum::<f64>() / bin.len().max(1) as f64;
            let right = bin.iter().filter(|c| c.1).count();
            println!(
                "  {half} confidence {lo:.1}-{:.1}: n={:<2} right {right:<2} mean confidence {mean:.2}",
                hi.min(1.0),
                bin.len()
            );
        }
    }
    for m in scores.iter().flat_map(|s| &s.misses) {
        println!("  miss {m}");
    }
    for ((half, _, floor, entity_floor), s) in HALVES.iter().zip(&scores) {
        let intent = s.intent_with as f64 / s.follow_ups as f64;
        let entities = s.entities_with as f64 / s.with_entities as f64;
        assert!(intent >= *floor, "{half}: follow-up intent accuracy {intent:.3} < {floor}");
        assert!(entities >= *entity_floor, "{half}: follow-up entity accuracy {entities:.3} < {entity_floor}");
        assert!(s.intent_with > s.intent_without, "{half}: the conversation helps");
    }
    // All halves together: 1,509 of 1,546 follow-ups by the manifest's vocabulary and the
    // learned intent table; 1,520 with the trained router (two halves lost one turn each, the
    // rest gained). The pooled figure is the bar; a half's floor moves by one turn at most.
    let (right, of) = scores.iter().fold((0, 0), |a, s| (a.0 + s.intent_with, a.1 + s.follow_ups));
    println!("all halves: {right} of {of} follow-ups right with the conversation");
    assert!(right as f64 / of as f64 >= POOLED_FLOOR, "pooled follow-up intent accuracy {right} of {of}");
}

/// Least share of all halves' follow-ups given their intended intent with the conversation.
const POOLED_FLOOR: f64 = 0.983;
