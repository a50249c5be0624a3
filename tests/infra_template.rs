//! The SAM template in `infra/` cannot drift from `routing.yaml`.
//!
//! The committed template must be byte for byte what `switchyard infra render` writes, and
//! `check` must catch each deliberately broken fixture in `tests/fixtures/infra/`, naming the
//! resource at fault.
//!
//! Set `SWITCHYARD_RENDER_TEMPLATE=1` to rewrite `infra/template.yaml` instead of failing (the
//! same as `switchyard infra render > infra/template.yaml`).

#[path = "../cli/src/infra_cmd.rs"]
mod infra_cmd;

use std::path::{Path, PathBuf};
use switchyard_infra as sam;
use switchyard_model::manifest::{Manifest, EMBEDDED_ROUTING_YAML};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/infra").join(name)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn routing_yaml() -> Manifest {
    Manifest::load(&root().join("routing.yaml")).expect("routing.yaml is valid")
}

#[test]
fn the_committed_template_is_exactly_what_render_writes_from_routing_yaml() {
    let manifest = routing_yaml();
    let rendered = infra_cmd::render(&manifest);
    let path = root().join(sam::TEMPLATE_PATH);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == rendered {
        return;
    }
    if std::env::var_os("SWITCHYARD_RENDER_TEMPLATE").is_some() {
        std::fs::write(&path, &rendered).expect("write infra/template.yaml");
        return;
    }
    let first_difference = committed
        .lines()
        .zip(rendered.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("line {}: committed `{a}`, rendered `{b}`", i + 1))
        .unwrap_or_else(|| "one is a prefix of the other".to_string());
    panic!(
        "infra/template.yaml is out of date with routing.yaml ({first_difference}).\nRun `{}` and commit the result.",
        sam::RENDER_COMMAND
    );
}

#[test]
fn rendering_the_same_manifest_twice_gives_the_same_text() {
    let manifest = routing_yaml();
    assert_eq!(sam::render(&manifest), sam::render(&manifest));
}

#[test]
fn check_finds_no_problem_in_the_committed_template() {
    let manifest = routing_yaml();
    let problems = sam::check(&read(&root().join(sam::TEMPLATE_PATH)), &manifest);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_check_command_accepts_the_committed_template_with_exit_code_zero() {
    let mut out = Vec::new();
    let code = infra_cmd::check(&root().join(sam::TEMPLATE_PATH), &routing_yaml(), &mut out);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, infra_cmd::EXIT_OK, "{out}");
    assert!(out.contains("agrees with manifest `e2i`"), "{out}");
}

#[test]
fn a_tier_2_worker_whose_timeout_is_shorter_than_the_tier_timeout_fails_check_by_name() {
    // GIVEN a template whose tier-2 worker times out after 60 s, while tier 2's attempts run
    // 120 s (270 s once extended for retries)
    let template = read(&fixture("tier2-timeout-too-short.yaml"));
    // WHEN it is checked against routing.yaml
    let problems = sam::check(&template, &routing_yaml());
    // THEN exactly that function is reported, with the timeout it needs
    assert_eq!(
        problems,
        ["AgentWorkerTier2Function: Timeout 60 s is shorter than tier 2 needs (300 s: its longest attempt plus a 30 s margin)"]
    );
}

#[test]
fn a_template_without_the_tier_3_queue_fails_check_by_name() {
    let template = read(&fixture("missing-tier3-queue.yaml"));
    let problems = sam::check(&template, &routing_yaml());
    assert_eq!(problems, ["Tier3Queue: the tier-3 queue is missing"]);
}

#[test]
fn the_check_command_prints_each_problem_and_exits_with_drift() {
    let mut out = Vec::new();
    let code = infra_cmd::check(&fixture("missing-tier3-queue.yaml"), &routing_yaml(), &mut out);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, infra_cmd::EXIT_DRIFT, "{out}");
    assert!(out.contains("missing-tier3-queue.yaml: Tier3Queue: the tier-3 queue is missing"), "{out}");
    assert!(out.contains(sam::RENDER_COMMAND), "{out}");
}

#[test]
fn the_check_command_reports_a_template_it_cannot_read() {
    let mut out = Vec::new();
    let code = infra_cmd::check(&fixture("no-such-template.yaml"), &routing_yaml(), &mut out);
    assert_eq!(code, infra_cmd::EXIT_UNREADABLE);
}

#[test]
fn a_tier_added_to_routing_yaml_without_rerendering_is_reported() {
    // GIVEN a template rendered before tier 1 was declared, and routing.yaml as it is now
    let tier_1 = "  - tier: 1\n    name: orchestration\n    timeout: 2s\n    max_retries: 0\n    fallback: none                  # E2I: N/A\n    reserved_concurrency: 20\n";
    assert!(EMBEDDED_ROUTING_YAML.contains(tier_1), "routing.yaml's tier 1 block changed; update this test");
    let before = Manifest::from_yaml(&EMBEDDED_ROUTING_YAML.replacen(tier_1, "", 1), "old routing.yaml")
        .expect("valid without tier 1");
    let old_template = sam::render(&before);
    let manifest = routing_yaml();
    // WHEN the old template is checked against it
    let problems = sam::check(&old_template, &manifest);
    // THEN the new tier's queue, dead-letter queue, worker and alarms are all reported missing
    for expected in [
        "Tier1Queue: the tier-1 queue is missing",
        "Tier1DeadLetterQueue: the tier-1 dead-letter queue is missing",
        "AgentWorkerTier1Function: the tier-1 agent-worker function is missing",
        "Tier1DeadLetterAlarm: the ApproximateNumberOfMessagesVisible alarm on Tier1DeadLetterQueue is missing",
    ] {
        assert!(problems.iter().any(|p| p == expected), "missing `{expected}` in {problems:#?}");
    }
    // AND every other function is told it lacks the new queue's URL
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("RouterFunction: environment variable SWITCHYARD_QUEUE_TIER_1 is missing")),
        "{problems:#?}"
    );
}

#[test]
fn a_tier_timeout_longer_than_a_lambda_can_run_is_refused() {
    // GIVEN a manifest whose tier-2 attempts may run 1000 s, past the 870 s an attempt can have
    // inside one 900 s Lambda invocation
    let text = read(&fixture("routing-timeout-1000s.yaml"));
    match Manifest::from_yaml(&text, "routing-timeout-1000s.yaml") {
        // THEN either manifest validation refuses it, naming the timeout …
        Err(e) => {
            assert!(e.problems.iter().any(|p| p.path.contains("timeout") || p.message.contains("timeout")), "{e}")
        }
        // … or, where validation lets it through, the template check refuses the manifest even
        // though the rendered template is otherwise self-consistent (the function timeout is
        // capped at 900 s, and the attempt would be cut short)
        Ok(manifest) => {
            let problems = sam::check(&sam::render(&manifest), &manifest);
            assert_eq!(
                problems,
                ["routing.yaml: tier 2 timeout 1000 s is longer than an attempt can run in one worker invocation (870 s: Lambda's 900 s less a 30 s margin); the AgentWorkerTier2Function timeout is capped at 900 s and its attempts would be cut short"]
            );
        }
    }
}

/// The shipped manifest with a sentence encoder named (`classifier.encoder`), as a team that
/// deploys the cascade writes it; its template is `tests/fixtures/infra/with-encoder.yaml`.
fn with_encoder() -> Manifest {
    let yaml = EMBEDDED_ROUTING_YAML.replacen(
        "\nclassifier:\n",
        "\nclassifier:\n  encoder: {model: models/all-MiniLM-L6-v2}\n",
        1,
    );
    assert_ne!(yaml, EMBEDDED_ROUTING_YAML, "routing.yaml has no `classifier:` block; update this test");
    Manifest::from_yaml(&yaml, "routing.yaml").expect("valid with an encoder")
}

#[test]
fn a_manifest_that_names_an_encoder_ships_it_as_a_layer_to_the_functions_that_classify() {
    // GIVEN the shipped manifest with an encoder, rendered
    let manifest = with_encoder();
    let rendered = infra_cmd::render(&manifest);
    // THEN the committed fixture (linted by scripts/cfn-lint.sh) is exactly that template
    let path = fixture("with-encoder.yaml");
    if std::env::var_os("SWITCHYARD_RENDER_TEMPLATE").is_some() {
        std::fs::write(&path, &rendered).expect("write the fixture");
    }
    assert!(read(&path) == rendered, "{} is out of date: rerun with SWITCHYARD_RENDER_TEMPLATE=1", path.display());
    // AND it checks clean, with one layer holding the encoder's folder (relative to infra/)
    assert!(sam::check(&rendered, &manifest).is_empty(), "{:#?}", sam::check(&rendered, &manifest));
    let doc: serde_yaml::Value = serde_yaml::from_str(&rendered).expect("YAML");
    let resources = &doc["Resources"];
    let layer = &resources[sam::ENCODER_LAYER_ID];
    assert_eq!(layer["Type"].as_str(), Some("AWS::Serverless::LayerVersion"));
    assert_eq!(layer["Properties"]["ContentUri"].as_str(), Some("../models/all-MiniLM-L6-v2"));
    // AND intake and the streamed chat completions, which classify, read it at /opt; no other
    // function gets the layer
    let functions: Vec<&str> = resources
        .as_mapping()
        .expect("resources")
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .filter_map(|(id, _)| id.as_str())
        .collect();
    assert!(functions.len() > 4, "{functions:?}");
    for id in functions {
        let props = &resources[id]["Properties"];
        let reads = ["IntakeFunction", "EventsStreamFunction"].contains(&id);
        let env = props["Environment"]["Variables"]["SWITCHYARD_ENCODER"].as_str();
        assert_eq!(env, reads.then_some(sam::LAYER_MOUNT), "{id}");
        assert_eq!(props.get("Layers").is_some(), reads, "{id}");
    }
    // AND the template without an encoder has no layer
    assert!(!infra_cmd::render(&routing_yaml()).contains(sam::ENCODER_LAYER_ID));
}

#[test]
fn an_encoder_added_without_rerendering_or_a_layer_removed_by_hand_is_reported() {
    // GIVEN a manifest that names an encoder and the template rendered before it did
    let manifest = with_encoder();
    let problems = sam::check(&infra_cmd::render(&routing_yaml()), &manifest);
    // THEN the missing layer and what intake needs of it are reported
    for expected in [
        "EncoderLayer: the layer of the cascade's sentence encoder is missing (routing.yaml names classifier.encoder)",
        "IntakeFunction: environment variable SWITCHYARD_ENCODER is missing (want `/opt`: routing.yaml names classifier.encoder)",
        "IntakeFunction: Layers must hold !Ref EncoderLayer (routing.yaml names classifier.encoder; the function reads it at start)",
    ] {
        assert!(problems.iter().any(|p| p == expected), "missing `{expected}` in {problems:#?}");
    }
    // AND the encoder's template checked against a manifest without one reports the stray
    // layer and variables
    let problems = sam::check(&infra_cmd::render(&manifest), &routing_yaml());
    assert!(
        problems.iter().any(|p| p.starts_with("EncoderLayer: routing.yaml names no classifier.encoder")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("IntakeFunction: environment variable SWITCHYARD_ENCODER is set")),
        "{problems:#?}"
    );
    // AND the layer's content may be the S3 location of a zip uploaded by hand, never nothing
    let rendered = infra_cmd::render(&manifest);
    let folder = "      ContentUri: ../models/all-MiniLM-L6-v2\n";
    assert!(rendered.contains(folder), "the layer's ContentUri line changed; update this test");
    let on_s3 = rendered.replace(folder, "      ContentUri: {Bucket: my-layers, Key: minilm.zip}\n");
    assert!(sam::check(&on_s3, &manifest).is_empty(), "{:#?}", sam::check(&on_s3, &manifest));
    let empty = rendered.replace(folder, "      ContentUri: ''\n");
    assert_eq!(
        sam::check(&empty, &manifest),
        ["EncoderLayer: ContentUri must name the encoder's folder (or the S3 location of its zip)"]
    );
}
