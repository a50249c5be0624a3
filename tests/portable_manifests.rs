//! Every shipped manifest reads the same in a second YAML parser: PyYAML, a YAML 1.1 parser
//! and the one most users' tooling (Ansible, pre-commit, CI scripts) uses.
//!
//! PyYAML rather than a second Rust crate because it is the parser that rejected the shipped
//! manifest and the one the acceptance check names; a YAML 1.1 parser also disagrees with
//! Switchyard's YAML 1.2 reader on exactly the scalars `switchyard validate` warns about, so an
//! equal reading here means no file leans on them. The comparison is on the JSON value each
//! parser yields: a date, a base-60 number or a 1.1 boolean would differ or fail to serialise.

#[path = "python.rs"]
mod python;

use std::path::{Path, PathBuf};

const PYYAML_TO_JSON: &str =
    "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1], encoding='utf-8'))))";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `routing.yaml`, every `examples/*/routing.yaml`, and the test and bench manifests.
fn shipped_manifests() -> Vec<PathBuf> {
    let mut files = vec![root().join("routing.yaml")];
    for dir in ["examples"] {
        for entry in std::fs::read_dir(root().join(dir)).expect("examples/ exists") {
            let path = entry.expect("dir entry").path().join("routing.yaml");
            if path.exists() {
                files.push(path);
            }
        }
    }
    for dir in ["tests/fixtures/manifests", "bench/manifests"] {
        for entry in std::fs::read_dir(root().join(dir)).expect("manifest dir exists") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_shipped_manifest_loads_in_pyyaml_exactly_as_in_the_rust_loader() {
    let files = shipped_manifests();
    assert!(files.len() >= 10, "expected routing.yaml, 5 examples and the fixtures: {files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        let rust: serde_json::Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let python = python::run(PYYAML_TO_JSON, &[&file])
            .unwrap_or_else(|e| panic!("PyYAML cannot load {}:\n{e}", file.display()));
        let python: serde_json::Value = serde_json::from_str(&python).expect("PyYAML's reading as JSON");
        assert_eq!(rust, python, "{} reads differently in PyYAML", file.display());
        switchyard_model::manifest::Manifest::load(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
}

#[test]
fn the_comparison_catches_a_manifest_that_pyyaml_rejects_or_reads_differently() {
    // The same check on the manifest as it was shipped before it was made portable: PyYAML
    // stops at the `?` in a flow sequence, and a 1.1 boolean reads as `true`.
    let dir = std::env::temp_dir().join(format!("switchyard-portable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let rejected = dir.join("rejected.yaml");
    std::fs::write(&rejected, "follow_ups: [Retrain without the weakest features?]\n").expect("write");
    let error = python::run(PYYAML_TO_JSON, &[&rejected]).expect_err("PyYAML rejects it");
    assert!(error.contains("expected ',' or ']', but got '?'"), "{error}");
    let differs = dir.join("differs.yaml");
    std::fs::write(&differs, "region: no\nat: 1:30\n").expect("write");
    let python: serde_json::Value =
        serde_json::from_str(&python::run(PYYAML_TO_JSON, &[&differs]).expect("loads")).expect("json");
    let rust: serde_json::Value = serde_yaml::from_str("region: no\nat: 1:30\n").expect("loads");
    assert_eq!(python, serde_json::json!({ "region": false, "at": 90 }));
    assert_eq!(rust, serde_json::json!({ "region": "no", "at": "1:30" }));
    let _ = std::fs::remove_dir_all(&dir);
}
