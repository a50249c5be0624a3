//! Manifest validation: every shipped manifest loads, and every broken fixture under
//! `fixtures/manifests/broken/` is refused with the path, the rule and (for parse errors) the
//! line its first comment lines announce:
//!
//! ```yaml
//! # expect-path: agents[1].tier
//! # expect: tier 7 is not declared in `tiers`
//! # expect-line: 12          (only for errors the YAML parser reports)
//! ```

use std::path::{Path, PathBuf};
use switchyard_model::manifest::{Manifest, ManifestError};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn broken_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/manifests/broken")
}

/// What a broken fixture announces about itself.
struct Expectation {
    path: String,
    words: Vec<String>,
    line: Option<usize>,
}

fn expectation_of(text: &str, file: &str) -> Expectation {
    let mut path = None;
    let mut words = Vec::new();
    let mut line = None;
    for header in text.lines().take_while(|l| l.starts_with('#')) {
        if let Some(p) = header.strip_prefix("# expect-path: ") {
            path = Some(p.trim().to_string());
        } else if let Some(w) = header.strip_prefix("# expect: ") {
            words.push(w.trim().to_string());
        } else if let Some(l) = header.strip_prefix("# expect-line: ") {
            line = Some(l.trim().parse().expect("expect-line is a number"));
        }
    }
    Expectation { path: path.unwrap_or_else(|| panic!("{file} has no `# expect-path:` line")), words, line }
}

fn broken_fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(broken_dir())
        .expect("fixtures/manifests/broken exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn load_err(text: &str, file: &str) -> ManifestError {
    match Manifest::from_yaml(text, file) {
        Ok(_) => panic!("{file} loaded, but it is broken on purpose"),
        Err(e) => e,
    }
}

#[test]
fn there_are_at_least_twelve_broken_manifests() {
    assert!(broken_fixtures().len() >= 12, "only {} fixtures", broken_fixtures().len());
}

#[test]
fn every_broken_manifest_is_refused_with_its_one_problem_named_by_path_and_rule() {
    let mut failures = Vec::new();
    for fixture in broken_fixtures() {
        let file = fixture.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
        let text = std::fs::read_to_string(&fixture).expect("fixture readable");
        let expect = expectation_of(&text, &file);
        let err = load_err(&text, &file);
        let rendered = err.to_string();

        if err.problems.len() != 1 {
            failures.push(format!("{file}: expected exactly one problem, got: {rendered}"));
            continue;
        }
        let problem = &err.problems[0];
        if problem.path != expect.path {
            failures.push(format!("{file}: expected path `{}`, got: {rendered}", expect.path));
        }
        for words in &expect.words {
            if !problem.message.contains(words.as_str()) {
                failures.push(format!("{file}: expected the message to say `{words}`, got: {rendered}"));
            }
        }
        if let Some(line) = expect.line {
            if problem.line != Some(line) {
                failures.push(format!("{file}: expected line {line}, got: {rendered}"));
            }
            if !rendered.contains(&format!("(line {line})")) {
                failures.push(format!("{file}: the error text does not show line {line}: {rendered}"));
            }
        }
        if !rendered.starts_with(&file) || !rendered.contains(&expect.path) {
            failures.push(format!("{file}: the error text must name the file and the path: {rendered}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn a_manifest_with_several_mistakes_reports_all_of_them_at_once() {
    let text = r#"
version: 1
name: ""
tiers:
  - {tier: 2, timeout: 0s, max_retries: 12, fallback: {agent: nobody}}
agents:
  - {id: Causal-Impact, tier: 2, kind: builtin, builtin: {response: x, confidence: 1.5}}
intents:
  - id: causal_impact
    route: {primary: missing_agent, supporting: [missing_agent, missing_agent]}
    keywords: [effect]
"#;
    let err = load_err(text, "several.yaml");
    let paths: Vec<&str> = err.problems.iter().map(|p| p.path.as_str()).collect();
    for expected in [
        "name",
        "tiers[0].timeout",
        "tiers[0].max_retries",
        "tiers[0].fallback",
        "agents[0].id",
        "agents[0].builtin.confidence",
        "intents[0].route.primary",
        "intents[0].route.supporting[1]",
    ] {
        assert!(paths.contains(&expected), "missing {expected} in {paths:?}");
    }
    assert!(err.to_string().contains("problems:"), "{err}");
}

#[test]
fn a_fallback_loop_through_tier_fallbacks_is_reported_once_with_its_chain() {
    let text = r#"
version: 1
name: loop
tiers:
  - {tier: 2, timeout: 120s, max_retries: 2, fallback: {agent: explainer}}
  - {tier: 5, timeout: 180s, max_retries: 1, fallback: {agent: causal_impact}}
agents:
  - {id: causal_impact, tier: 2, kind: builtin, builtin: {response: x, confidence: 0.8}}
  - {id: explainer, tier: 5, kind: builtin, builtin: {response: y, confidence: 0.8}}
intents:
  - {id: causal_impact, route: {primary: causal_impact}, keywords: [effect]}
"#;
    let err = load_err(text, "loop.yaml");
    assert_eq!(err.problems.len(), 1, "{err}");
    assert_eq!(err.problems[0].path, "tiers[0].fallback");
    assert!(err.problems[0].message.contains("causal_impact -> explainer -> causal_impact"), "{err}");
}

#[test]
fn a_tier_whose_fallback_agent_lives_on_it_is_not_a_loop() {
    let text = r#"
version: 1
name: monitoring
tiers:
  - {tier: 3, timeout: 60s, max_retries: 2, fallback: {agent: health_score}}
agents:
  - {id: health_score, tier: 3, kind: builtin, builtin: {response: ok, confidence: 0.9}}
  - {id: drift_monitor, tier: 3, kind: builtin, builtin: {response: ok, confidence: 0.9}}
intents:
  - {id: health_check, route: {primary: health_score, supporting: [drift_monitor]}, keywords: [health]}
"#;
    assert!(Manifest::from_yaml(text, "monitoring.yaml").is_ok());
}

#[test]
fn the_shipped_routing_yaml_validates() {
    let path = workspace_root().join("routing.yaml");
    if let Err(e) = Manifest::load(&path) {
        panic!("the shipped manifest is invalid:\n{e}");
    }
}

#[test]
fn every_example_routing_yaml_validates() {
    let examples = workspace_root().join("examples");
    let Ok(entries) = std::fs::read_dir(&examples) else { return };
    let mut failures = Vec::new();
    for entry in entries {
        let manifest = entry.expect("readable entry").path().join("routing.yaml");
        if manifest.is_file() {
            if let Err(e) = Manifest::load(&manifest) {
                failures.push(e.to_string());
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
