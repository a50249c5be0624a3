//! The code's layout keeps its rules: the engine sees ports only, the functions carry no
//! template renderer, and the engine's modules import each other without a loop
//! (docs/architecture.md#layout).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The code of a file without its comments (doc comments name other modules freely).
fn code(path: &Path) -> String {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_engine_module_names_an_adapter_the_composition_or_the_template_renderer() {
    let engine = root().join("shared/src/engine");
    for file in rust_files(&engine) {
        let text = code(&file);
        for forbidden in ["adapters::", "system::", "sam::", "switchyard_infra", "aws_sdk_", "aws_config"] {
            assert!(!text.contains(forbidden), "{} names `{forbidden}`", file.display());
        }
    }
}

#[test]
fn nothing_the_functions_link_renders_cloudformation() {
    for dir in ["shared/src", "functions"] {
        for file in rust_files(&root().join(dir)) {
            let text = std::fs::read_to_string(&file).expect("read");
            assert!(!text.contains("AWS::Serverless::Function"), "{} renders CloudFormation", file.display());
        }
    }
    let template = std::fs::read_to_string(root().join("infra/template.yaml")).expect("template");
    assert!(template.contains("AWS::Serverless::Function"));
}

/// Which sibling engine modules each engine module imports (`super::x`, `crate::engine::x`).
fn engine_imports() -> BTreeMap<String, BTreeSet<String>> {
    let engine = root().join("shared/src/engine");
    // The modules are the files directly in engine/ (a module's own folder holds its tests).
    let modules: BTreeSet<String> = rust_files(&engine)
        .iter()
        .filter(|f| f.parent() == Some(engine.as_path()))
        .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().to_string()))
        .filter(|m| m != "mod")
        .collect();
    let mut graph = BTreeMap::new();
    for module in &modules {
        let text = code(&engine.join(format!("{module}.rs")));
        let mut uses = BTreeSet::new();
        for other in modules.iter().filter(|o| *o != module) {
            let named = [format!("super::{other}"), format!("crate::engine::{other}"), format!("super::{{{other}")];
            if named.iter().any(|n| text.contains(n.as_str())) {
                uses.insert(other.clone());
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

#[test]
fn the_engine_modules_import_each_other_without_a_loop() {
    let graph = engine_imports();
    assert!(graph.len() >= 8, "{graph:?}");
    // Depth-first search for a cycle.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(node) {
            return;
        }
        if let Some(at) = path.iter().position(|p| p == node) {
            panic!("import loop: {} -> {node}", path[at..].join(" -> "));
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, path, done);
        }
        path.pop();
        done.insert(node.to_string());
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done);
    }
    // The steps share lower modules, never each other.
    for step in ["intake", "router", "worker", "synth"] {
        for other in ["intake", "router", "worker", "synth"] {
            assert!(!graph[step].contains(other), "step {step} imports step {other}");
        }
    }
}
