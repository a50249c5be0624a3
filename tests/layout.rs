//! The code's layout keeps its rules (docs/architecture.md#layout): the engine sees ports only
//! and its crate depends on no AWS SDK, the functions carry no template renderer, no module of
//! any library crate or of the CLI imports another in a loop, no library file grows past 900
//! lines, and the layout list in docs/architecture.md names the crates and modules that exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// The library crates, by folder under `shared/`, bottom layer first.
const LIBRARY: [&str; 8] = ["model", "intents", "encoder", "core", "engine", "agents", "aws", "testkit"];

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

/// The code of a file without its comments (doc comments name other modules freely) and
/// without its unit tests (a test may reach anywhere).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read");
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// A crate's modules, one per file: `src/plan/modes.rs` is `plan::modes`, `src/plan.rs` and
/// `src/plan/mod.rs` are `plan`, the crate root is ``. Files of unit tests are left out.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).expect("under src").with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().to_string()).collect();
        if parts.last().is_some_and(|p| p == "tests") {
            continue;
        }
        if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
            parts.pop();
        }
        out.insert(parts.join("::"), file);
    }
    out
}

/// Which modules of the same crate each module imports: `crate::a::b`, `super::x` and
/// `self::x` paths, resolved to the longest module that exists. A module's own ancestors and
/// descendants are not counted (a parent declares its children; a child may use its parent's
/// items).
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    let mut graph = BTreeMap::new();
    for (module, file) in &mods {
        let text = code(file);
        let parent: Vec<&str> = if module.is_empty() {
            Vec::new()
        } else {
            let mut p: Vec<&str> = module.split("::").collect();
            let is_dir_module = file.file_stem().is_some_and(|s| s == "mod");
            if !is_dir_module {
                p.pop();
            }
            p
        };
        let mut uses = BTreeSet::new();
        for (prefix, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
            for (at, _) in text.match_indices(prefix) {
                if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let rest = &text[at + prefix.len()..];
                let path: Vec<&str> = rest
                    .split("::")
                    .map(|s| s.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or(""))
                    .take_while(|s| !s.is_empty())
                    .collect();
                let mut full: Vec<&str> = base.clone();
                full.extend(path);
                // The longest prefix that names a module.
                let target = (0..=full.len()).rev().map(|n| full[..n].join("::")).find(|m| mods.contains_key(m));
                if let Some(target) = target {
                    let related = target == *module
                        || target.is_empty()
                        || module.starts_with(&format!("{target}::"))
                        || target.starts_with(&format!("{module}::"))
                        || module.is_empty();
                    if !related {
                        uses.insert(target);
                    }
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// The first import loop in `graph`, if any.
fn find_loop(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if done.contains(node) {
            return None;
        }
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The same graph with every module folded into its top-level module.
fn top_level(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, uses) in graph {
        let entry = out.entry(top(module)).or_default();
        entry.extend(uses.iter().map(|u| top(u)).filter(|u| *u != top(module)));
    }
    out
}

fn crate_sources() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> =
        LIBRARY.iter().map(|c| (format!("shared/{c}"), root().join("shared").join(c).join("src"))).collect();
    out.push(("cli".into(), root().join("cli/src")));
    out.push(("infra".into(), root().join("infra/src")));
    out
}

#[test]
fn no_module_of_a_library_crate_or_the_cli_imports_another_in_a_loop() {
    let mut loops = Vec::new();
    for (name, src) in crate_sources() {
        let graph = import_graph(&src);
        assert!(graph.len() >= 2, "{name}: {graph:?}");
        if let Some(cycle) = find_loop(&graph) {
            loops.push(format!("{name}: import loop {}", cycle.join(" -> ")));
        } else if let Some(cycle) = find_loop(&top_level(&graph)) {
            loops.push(format!("{name}: import loop between top-level modules {}", cycle.join(" -> ")));
        }
    }
    assert!(loops.is_empty(), "{}", loops.join("\n"));
}

#[test]
fn the_loop_check_sees_a_loop_when_there_is_one() {
    let dir = std::env::temp_dir().join(format!("switchyard-layout-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).expect("dir");
    std::fs::write(dir.join("lib.rs"), "pub mod a;\npub mod b;\n").expect("write");
    std::fs::write(dir.join("a.rs"), "pub mod inner;\n").expect("write");
    std::fs::write(dir.join("a/inner.rs"), "use crate::b::Thing;\n").expect("write");
    std::fs::write(dir.join("b.rs"), "use super::a::inner::Other;\n").expect("write");
    let graph = import_graph(&dir);
    assert_eq!(find_loop(&graph), Some(vec!["a::inner".to_string(), "b".into(), "a::inner".into()]));
    std::fs::write(dir.join("b.rs"), "// crate::a::inner in a comment only\npub struct Thing;\n").expect("write");
    assert_eq!(find_loop(&import_graph(&dir)), None);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_engine_crate_names_no_adapter_no_agent_kind_and_no_aws_sdk() {
    let manifest = std::fs::read_to_string(root().join("shared/engine/Cargo.toml")).expect("Cargo.toml");
    let deps = manifest.split("[dependencies]").nth(1).expect("dependencies");
    for forbidden in
        ["switchyard-aws", "switchyard-agents", "switchyard-testkit", "aws-sdk-", "aws-config", "switchyard-infra"]
    {
        assert!(!deps.contains(forbidden), "switchyard-engine depends on {forbidden}");
    }
    for file in rust_files(&root().join("shared/engine/src")) {
        let text = code(&file);
        for forbidden in ["switchyard_aws", "switchyard_agents", "switchyard_infra", "aws_sdk_", "aws_config"] {
            assert!(!text.contains(forbidden), "{} names `{forbidden}`", file.display());
        }
    }
}

#[test]
fn each_library_crate_depends_only_on_the_layers_below_it() {
    for (at, name) in LIBRARY.iter().enumerate() {
        let manifest =
            std::fs::read_to_string(root().join("shared").join(name).join("Cargo.toml")).expect("Cargo.toml");
        for above in &LIBRARY[at..] {
            assert!(
                !manifest.contains(&format!("switchyard-{above}.workspace")),
                "switchyard-{name} depends on switchyard-{above}, which is not below it"
            );
        }
    }
    // The pure layers name no SDK, no runtime and no I/O client.
    for name in ["model", "intents", "encoder", "core"] {
        let manifest =
            std::fs::read_to_string(root().join("shared").join(name).join("Cargo.toml")).expect("Cargo.toml");
        for forbidden in ["aws-", "tokio", "hyper", "lambda"] {
            assert!(!manifest.contains(forbidden), "switchyard-{name} depends on {forbidden}");
        }
    }
}

#[test]
fn nothing_the_functions_link_renders_cloudformation() {
    for dir in ["shared", "functions"] {
        for file in rust_files(&root().join(dir)) {
            let text = std::fs::read_to_string(&file).expect("read");
            assert!(!text.contains("AWS::Serverless::Function"), "{} renders CloudFormation", file.display());
        }
    }
    let template = std::fs::read_to_string(root().join("infra/template.yaml")).expect("template");
    assert!(template.contains("AWS::Serverless::Function"));
}

#[test]
fn the_engine_steps_share_lower_modules_never_each_other() {
    let graph = import_graph(&root().join("shared/engine/src"));
    for step in ["intake", "router", "worker", "synth"] {
        for other in ["intake", "router", "worker", "synth"] {
            assert!(!graph[step].contains(other), "step {step} imports step {other}");
        }
    }
}

#[test]
fn no_library_file_is_over_900_lines() {
    let mut long = Vec::new();
    for name in LIBRARY {
        for file in rust_files(&root().join("shared").join(name).join("src")) {
            let lines = std::fs::read_to_string(&file).expect("read").lines().count();
            if lines > 900 {
                long.push(format!("{} has {lines} lines", file.display()));
            }
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
}

#[test]
fn no_two_modules_of_a_crate_share_a_name() {
    let mut clashes = Vec::new();
    for (name, src) in crate_sources() {
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for module in modules(&src).keys().filter(|m| !m.is_empty()) {
            let leaf = module.rsplit("::").next().unwrap_or(module).to_string();
            if let Some(other) = seen.insert(leaf.clone(), module.clone()) {
                clashes.push(format!("{name}: two modules named `{leaf}`: {other} and {module}"));
            }
        }
    }
    assert!(clashes.is_empty(), "{}", clashes.join("\n"));
}

#[test]
fn submodules_are_attached_one_way() {
    // `foo.rs` beside `foo/`, never `foo/mod.rs`, and no `#[path]`.
    for (name, src) in crate_sources() {
        for file in rust_files(&src) {
            assert!(file.file_name().is_some_and(|n| n != "mod.rs"), "{name}: {} is a mod.rs", file.display());
            assert!(!code(&file).contains("#[path"), "{name}: {} attaches a module by #[path]", file.display());
        }
    }
}

#[test]
fn the_layout_list_in_the_docs_names_every_crate_and_module_that_exists() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("architecture.md");
    let layout = doc.split("## Layout").nth(1).expect("a Layout section").split("\n## ").next().unwrap_or("");
    let mut listed = BTreeSet::new();
    for (name, src) in crate_sources() {
        for module in modules(&src).keys().filter(|m| !m.is_empty() && !m.contains("::")) {
            let entry = format!("`{name}/src/{module}`");
            assert!(layout.contains(&entry), "docs/architecture.md#layout does not list {entry}");
            listed.insert(entry);
        }
    }
    // Nothing listed that does not exist.
    for entry in layout.split('`').skip(1).step_by(2) {
        if let Some((krate, module)) = entry.split_once("/src/") {
            assert!(
                listed.contains(&format!("`{entry}`")),
                "docs/architecture.md#layout lists {krate}/src/{module}, which does not exist"
            );
        }
    }
}
