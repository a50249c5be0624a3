//! The shipped manifest's trained router (`routing.router`) and the labelled examples it learns
//! from (`routing.examples.jsonl`, named by `classifier.examples` in `routing.yaml`).
//!
//! The example file is every labelled question set (`fixtures/*questions.jsonl`) and the first
//! turn of every dialogue half up to [`LAST_TRAINED_HALF`] (a first turn is a question asked
//! alone). Halves after it are blind: they judge the classifier and are trained on only once
//! scored (tests/follow_ups.rs, docs/conversations.md).
//!
//! `SWITCHYARD_WRITE_ROUTER_EXAMPLES=1 cargo test -p switchyard-tests --test router_examples`
//! rewrites the example file after a fixture changes; `switchyard train` then retrains.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use switchyard_core::classify::Classifier;
use switchyard_core::router;
use switchyard_model::manifest::Manifest;

/// The last dialogue half the router is trained on (`dialogues_blind<N>.yaml`).
const LAST_TRAINED_HALF: u32 = 39;

/// A labelled question and the fixture group it comes from.
struct Labelled {
    group: String,
    text: String,
    intent: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
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

fn manifest() -> Manifest {
    Manifest::load(&root().join("routing.yaml")).expect("routing.yaml loads")
}

/// The example file as the fixtures give it: one line per question, fixture order.
fn example_file(questions: &[Labelled]) -> String {
    questions.iter().map(|q| serde_json::json!({ "query": q.text, "intent": q.intent }).to_string() + "\n").collect()
}

/// The example file in the repository is what the fixtures give; with
/// `SWITCHYARD_WRITE_ROUTER_EXAMPLES=1` the test writes it instead.
#[test]
fn the_shipped_example_file_is_the_labelled_fixtures() {
    let want = example_file(&training_questions());
    let path = root().join("routing.examples.jsonl");
    if std::env::var_os("SWITCHYARD_WRITE_ROUTER_EXAMPLES").is_some() {
        std::fs::write(&path, &want).expect("write routing.examples.jsonl");
    }
    let shipped = std::fs::read_to_string(&path).expect("routing.examples.jsonl");
    assert!(
        shipped == want,
        "routing.examples.jsonl is stale: run SWITCHYARD_WRITE_ROUTER_EXAMPLES=1 cargo test -p switchyard-tests --test router_examples, then switchyard train"
    );
    assert!(manifest().classifier.examples.iter().any(|f| f == "routing.examples.jsonl"));
}

/// `routing.router` is what `switchyard train` makes of routing.yaml and its example file, and
/// the one compiled into the binaries is that file.
#[test]
fn the_shipped_router_is_current_and_compiled_in() {
    let m = manifest();
    assert_eq!(router::state(&m), router::ArtifactState::Current, "run `switchyard train`");
    let file = std::fs::read(root().join("routing.router")).expect("routing.router");
    assert!(router::EMBEDDED == file.as_slice(), "the compiled-in router is not routing.router: rebuild");
    let embedded = Manifest::embedded().expect("embedded manifest");
    assert!(router::load(&embedded).is_ok(), "the embedded manifest loads the compiled-in router");
}

/// Leave one fixture group out: for each group (a question set or a dialogue half's first
/// turns), the classifier with a router trained on every other group, against the manifest's
/// vocabulary alone. The figure that says what the examples are worth on questions the router
/// never saw.
#[test]
fn the_router_cross_validated_over_the_fixture_groups() {
    let m = manifest();
    let questions = training_questions();
    let lexical = Classifier::lexical(&m);
    let mut groups: Vec<&str> = questions.iter().map(|q| q.group.as_str()).collect();
    groups.dedup();
    let base = router::training(&m).expect("training set");
    let from_file = base.set.examples.len() - questions.len();
    let (mut with_router, mut alone, mut n) = (0, 0, 0);
    for group in &groups {
        let mut set = base.set.clone();
        set.examples.truncate(from_file);
        set.examples.extend(
            questions
                .iter()
                .filter(|q| q.group != *group)
                .map(|q| (q.text.clone(), set.intents.iter().position(|i| *i == q.intent).expect("intent"))),
        );
        let trained = router::train_set(&set).expect("trains");
        let c = Classifier::with_router(&m, Some(Arc::new(trained)));
        let test: Vec<&Labelled> = questions.iter().filter(|q| q.group == *group).collect();
        let right_with = test.iter().filter(|q| c.classify(&q.text).intent == q.intent).count();
        let right_alone = test.iter().filter(|q| lexical.classify(&q.text).intent == q.intent).count();
        println!("{group:32} {right_with:>4} with the router, {right_alone:>4} alone, of {}", test.len());
        with_router += right_with;
        alone += right_alone;
        n += test.len();
    }
    let pct = |a: usize| 100.0 * a as f64 / n as f64;
    println!(
        "held out: {with_router} of {n} ({:.1} %) with the router, {alone} ({:.1} %) by the vocabulary alone",
        pct(with_router),
        pct(alone)
    );
    assert!(
        with_router >= alone + n / 200,
        "the router must be worth half a point held out: {with_router} vs {alone} of {n}"
    );
}

/// Every shipped example's router sits beside its manifest and is current.
#[test]
fn every_shipped_example_has_a_current_router() {
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("examples")).expect("examples") {
        let path = entry.expect("entry").path().join("routing.yaml");
        if !path.exists() {
            continue;
        }
        let m = Manifest::load(&path).expect("the example loads");
        assert_eq!(
            router::state(&m),
            router::ArtifactState::Current,
            "{}: run `{}`",
            path.display(),
            router::train_command(&m)
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} examples");
}

/// A copy of a manifest in a scratch folder (with its example and dialogue files), removed on
/// drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, yaml: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("switchyard-router-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        std::fs::write(dir.join("routing.yaml"), yaml).expect("manifest");
        for file in ["routing.examples.jsonl", "routing.dialogues.jsonl"] {
            std::fs::copy(root().join(file), dir.join(file)).expect(file);
        }
        Scratch(dir)
    }
    fn manifest(&self) -> Manifest {
        Manifest::load(&self.0.join("routing.yaml")).expect("loads")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Missing, current, stale, corrupt: what `state` says, whether a deployed function may start,
/// and that the embedded default and `serve` still get a router (trained in-process).
#[test]
fn an_artifact_is_missing_current_stale_or_unreadable_and_a_deployed_function_starts_only_on_a_current_one() {
    let yaml = std::fs::read_to_string(root().join("routing.yaml")).expect("routing.yaml");
    let scratch = Scratch::new("states", &yaml);
    let m = scratch.manifest();
    assert_eq!(router::state(&m), router::ArtifactState::Missing);
    let problem = router::startup_problem(&m).expect("no artifact: a deployed function refuses to start");
    assert!(problem.contains("is missing") && problem.contains("switchyard train --manifest "), "{problem}");
    assert!(router::load_or_train(&m).is_some(), "in-process training serves the embedded default and serve");

    let (_, bytes) = router::train(&m).expect("trains");
    let path = router::artifact_path(&m).expect("beside the manifest");
    router::write_artifact(&path, &bytes).expect("writes");
    assert_eq!(router::state(&m), router::ArtifactState::Current);
    assert!(router::startup_problem(&m).is_none());

    // A new utterance makes it stale; a change elsewhere (a timeout) does not.
    let edited = Scratch::new(
        "stale",
        &yaml.replacen("    utterances:\n", "    utterances:\n      - a brand new way to ask\n", 1),
    );
    router::write_artifact(&router::artifact_path(&edited.manifest()).expect("path"), &bytes).expect("writes");
    assert!(matches!(router::state(&edited.manifest()), router::ArtifactState::Stale(_)));
    assert!(router::startup_problem(&edited.manifest()).is_some_and(|p| p.contains("stale")));
    let retimed = Scratch::new("retimed", &yaml.replacen("max_retries: ", "max_retries:  ", 1));
    router::write_artifact(&router::artifact_path(&retimed.manifest()).expect("path"), &bytes).expect("writes");
    assert_eq!(router::state(&retimed.manifest()), router::ArtifactState::Current);

    // Damage is named, never read as a router.
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("cuts");
    assert!(matches!(router::state(&m), router::ArtifactState::Unreadable(_)));
    assert!(router::startup_problem(&m).is_some_and(|p| p.contains("unreadable")));
    // A changed example file is caught where the file is at hand (validate, train).
    router::write_artifact(&path, &bytes).expect("writes");
    std::fs::write(
        scratch.0.join("routing.examples.jsonl"),
        "{\"query\": \"forecast TRx\", \"intent\": \"prediction\"}\n",
    )
    .expect("rewrites");
    assert!(matches!(router::state(&m), router::ArtifactState::Stale(why) if why.contains("classifier.examples")));
}

/// The manifest's own continuation model: trained from the dialogue files into the artifact,
/// loaded with the router; a changed dialogue file makes the artifact stale, an artifact without
/// the model does not serve a manifest that names conversations, and a bad line is named with
/// its file, line and rule.
#[test]
fn dialogue_files_train_the_manifests_continuation_model_into_its_artifact() {
    let yaml = std::fs::read_to_string(root().join("routing.yaml")).expect("routing.yaml");
    let scratch = Scratch::new("dialogues", &yaml);
    let m = scratch.manifest();
    let file = scratch.0.join("routing.dialogues.jsonl");
    std::fs::write(
        &file,
        concat!(
            "{\"turns\": [{\"text\": \"forecast TRx for Kisqali\", \"intent\": \"prediction\"}, {\"text\": \"and for Leqvio?\", \"intent\": \"prediction\"}]}\n",
            "{\"turns\": [{\"text\": \"forecast TRx\", \"intent\": \"prediction\"}, {\"text\": \"and for Leqvio?\", \"intent\": \"prediction\"}, {\"text\": \"now design a test\", \"intent\": \"experiment_design\"}]}\n",
        ),
    )
    .expect("writes");
    let t = router::training(&m).expect("reads the dialogues");
    assert_eq!(t.conversations.len(), 2);
    assert_eq!(t.conversations[1][2], ("now design a test".to_string(), "experiment_design".to_string()));
    let (trained, bytes) = router::train_from(&m, &t).expect("trains");
    let model = trained.continuation.expect("a manifest with dialogues gets its own model");
    assert!(!model.is_empty() && model.len() > 0, "trained on the two follow-ups");
    let path = router::artifact_path(&m).expect("beside the manifest");
    router::write_artifact(&path, &bytes).expect("writes");
    assert_eq!(router::state(&m), router::ArtifactState::Current);
    let loaded = router::load(&m).expect("loads");
    assert_eq!(loaded.continuation.as_deref(), Some(&*model));

    // Another conversation: stale where the file is at hand.
    std::fs::write(
        &file,
        "{\"turns\": [{\"text\": \"a\", \"intent\": \"prediction\"}, {\"text\": \"b\", \"intent\": \"prediction\"}]}\n",
    )
    .expect("rewrites");
    assert!(matches!(router::state(&m), router::ArtifactState::Stale(why) if why.contains("classifier.dialogues")));

    // A router without the model (trained with no dialogues) does not serve this manifest.
    let mut no_dialogues = router::training(&m).expect("reads");
    no_dialogues.conversations.clear();
    let (_, no_model) = router::train_from(&m, &no_dialogues).expect("trains");
    router::write_artifact(&path, &no_model).expect("writes");
    assert!(
        matches!(router::load(&m), Err(router::ArtifactState::Stale(why)) if why.contains("no continuation model")),
        "{:?}",
        router::load(&m).err()
    );

    for (line, rule) in [
        ("{\"turns\": [{\"text\": \"only one turn\", \"intent\": \"prediction\"}]}", "at least two turns"),
        ("{\"turns\": [{\"text\": \"a\", \"intent\": \"prediction\"}, {\"text\": \"b\", \"intent\": \"nope\"}]}", "turn 2: `intent` \"nope\" is not an intent"),
        ("{\"turns\": [{\"text\": \"\", \"intent\": \"prediction\"}, {\"text\": \"b\", \"intent\": \"prediction\"}]}", "turn 1: `text` must be a non-empty string"),
        ("{\"turns\": [{\"text\": \"a\"}, {\"text\": \"b\", \"intent\": \"prediction\"}]}", "turn 1: `intent` must be a string"),
        ("[1, 2]", "`turns` must be an array"),
        ("not json", "not a JSON object"),
    ] {
        std::fs::write(&file, format!("\n{line}\n")).expect("writes");
        let err = router::training(&m).expect_err(line).to_string();
        assert!(
            err.starts_with("classifier.dialogues: ") && err.contains("routing.dialogues.jsonl:2: ") && err.contains(rule),
            "{line}: {err}"
        );
    }
    std::fs::remove_file(&file).expect("removes");
    let err = router::training(&m).expect_err("missing file").to_string();
    assert!(err.starts_with("classifier.dialogues: ") && err.contains("routing.dialogues.jsonl"), "{err}");
}

/// A bad line of an example file is refused with its file, line and rule.
#[test]
fn a_bad_example_line_is_named_with_file_line_and_rule() {
    let yaml = std::fs::read_to_string(root().join("routing.yaml")).expect("routing.yaml");
    let scratch = Scratch::new("bad-lines", &yaml);
    let file = scratch.0.join("routing.examples.jsonl");
    for (line, rule) in [
        ("{\"query\": \"forecast TRx\", \"intent\": \"no_such_intent\"}", "is not an intent of the manifest"),
        ("not json", "not a JSON object"),
        ("{\"intent\": \"prediction\"}", "`query` (or `text`) must be a non-empty string"),
        ("[1, 2]", "not a JSON object"),
    ] {
        std::fs::write(&file, format!("{{\"query\": \"forecast TRx\", \"intent\": \"prediction\"}}\n{line}\n"))
            .expect("writes");
        let err = router::training(&scratch.manifest()).expect_err(line).to_string();
        assert!(err.contains("routing.examples.jsonl:2: ") && err.contains(rule), "{line}: {err}");
    }
    // An export of the signals loop: only the caller's corrections are labels.
    std::fs::write(
        &file,
        "{\"query\": \"q one\", \"intent\": \"prediction\", \"correct_intent\": null}\n{\"query\": \"q two\", \"intent\": \"prediction\", \"correct_intent\": \"gap_analysis\"}\n",
    )
    .expect("writes");
    let t = router::training(&scratch.manifest()).expect("reads an export");
    let from_file: Vec<&(String, usize)> = t.set.examples.iter().filter(|(q, _)| q.starts_with("q ")).collect();
    assert_eq!(from_file.len(), 1);
    assert_eq!(t.set.intents[from_file[0].1], "gap_analysis");
    std::fs::remove_file(&file).expect("removes");
    let err = router::training(&scratch.manifest()).expect_err("missing file").to_string();
    assert!(err.starts_with("classifier.examples: ") && err.contains("routing.examples.jsonl"), "{err}");
}

/// A function reads its manifest from the artifact's JSON form while the file is unchanged
/// since `train`, and from the YAML once it changed (a timeout edited: the router stays
/// current, the JSON does not); either way it is exactly what `Manifest::load` gives. A JSON
/// form that does not deserialize falls back to the YAML, and a start reads only the head.
#[test]
fn a_function_reads_its_manifest_from_the_artifact_while_the_file_is_unchanged() {
    use switchyard_intents::artifact;
    let yaml = std::fs::read_to_string(root().join("routing.yaml")).expect("routing.yaml");
    let scratch = Scratch::new("prepared", &yaml);
    let path = scratch.0.join("routing.yaml");
    let m = scratch.manifest();
    let (_, bytes) = router::train(&m).expect("trains");
    let artifact_path = router::artifact_path(&m).expect("beside the manifest");
    router::write_artifact(&artifact_path, &bytes).expect("writes");
    let head = artifact::read_head(&mut std::io::Cursor::new(&bytes[..]), |_| true).expect("head");
    let section = head.sections.iter().find(|s| s.name == router::MANIFEST_SECTION).expect("the manifest section");
    assert_eq!(section.bytes[..8], router::text_hash(yaml.as_bytes()).to_le_bytes());
    let from_json: Manifest = serde_json::from_slice(&section.bytes[8..]).expect("the JSON form deserializes");
    assert_eq!(from_json.intents, m.intents);
    assert_eq!(router::load_manifest(&path).expect("loads"), m);
    assert!(router::startup_problem(&m).is_none());

    // The file changes where the router does not look: the YAML is read, the router still serves.
    let edited = yaml.replacen("max_retries: 2", "max_retries: 3", 1);
    assert_ne!(edited, yaml);
    std::fs::write(&path, &edited).expect("edits");
    let loaded = router::load_manifest(&path).expect("loads");
    assert_eq!(loaded, Manifest::load(&path).expect("loads"));
    assert_ne!(loaded, m, "the edit is read");
    assert!(router::startup_problem(&loaded).is_none(), "the router is current for the edited file");

    // A JSON form that does not deserialize (with the right hash) is passed over for the YAML.
    let (header, trained, _) = artifact::decode(&bytes).expect("decodes");
    let mut broken = router::text_hash(edited.as_bytes()).to_le_bytes().to_vec();
    broken.extend_from_slice(b"{\"version\": \"not a number\"}");
    let sections = vec![artifact::Section { name: router::MANIFEST_SECTION.into(), bytes: broken }];
    let continuation = head.sections.iter().find(|s| s.name == router::CONTINUATION_SECTION).cloned();
    let sections: Vec<artifact::Section> = sections.into_iter().chain(continuation).collect();
    router::write_artifact(&artifact_path, &artifact::encode(&trained, &header, &sections)).expect("writes");
    assert_eq!(router::load_manifest(&path).expect("falls back to the YAML"), loaded);

    // A start reads the head and checks the length: a file cut after its head is damaged.
    let whole = std::fs::read(&artifact_path).expect("reads");
    let head = artifact::read_head(&mut std::io::Cursor::new(&whole[..]), |_| false).expect("head");
    std::fs::write(&artifact_path, &whole[..head.len as usize + 10]).expect("cuts");
    let problem = router::startup_problem(&loaded).expect("a cut artifact stops the start");
    assert!(problem.contains("unreadable") && problem.contains("where its head says"), "{problem}");
}
