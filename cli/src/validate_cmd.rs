//! `switchyard validate PATH`: load a manifest and say what it declares, or list every problem
//! in it with file, line, YAML path and message.

use std::io::{self, Write};
use std::path::Path;
use switchyard_model::manifest::{Fallback, Manifest, ManifestError, TierTimeout};

/// Exit code of a valid manifest.
pub const EXIT_VALID: u8 = 0;
/// Exit code of a manifest with problems.
pub const EXIT_INVALID: u8 = 1;
/// Exit code when the report itself could not be written.
pub const EXIT_OUTPUT_FAILED: u8 = 2;

/// Validate the manifest at `path`, write a summary or the problems to `out`, and return the
/// process exit code: 0 valid, 1 problems, 2 the report could not be written.
pub fn run(path: &Path, out: &mut impl Write) -> u8 {
    // The text once, for line numbers and the portability scan (the loader reads its own).
    let text = std::fs::read_to_string(path).ok();
    let lines = text.as_deref().unwrap_or_default();
    let written = match Manifest::load(path) {
        Ok(manifest) => summary(path, &manifest, out)
            .and_then(|()| schemas(path, lines, &manifest, out))
            .and_then(|()| keywords(path, &manifest, out))
            .and_then(|()| router(&manifest, out)),
        Err(err) => problems(lines, &err, out).map(|()| EXIT_INVALID),
    };
    let written = written.and_then(|code| portability(path, text.as_deref(), out).map(|()| code));
    written.unwrap_or(EXIT_OUTPUT_FAILED)
}

/// Warnings (not problems: the exit code stays) for plain scalars other YAML parsers read
/// differently; see [`crate::portable`].
fn portability(path: &Path, text: Option<&str>, out: &mut impl Write) -> io::Result<()> {
    let Some(text) = text else { return Ok(()) };
    let file = path.display();
    match crate::portable::scan(text) {
        Ok(warnings) => {
            for w in warnings {
                writeln!(out, "{file}:{}:{}: warning: `{}`: {}", w.line, w.column, w.value, w.rule)?;
            }
        }
        Err(reason) => writeln!(out, "{file}: warning: a second YAML parser cannot read this file: {reason}")?,
    }
    Ok(())
}

fn summary(path: &Path, m: &Manifest, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{}: manifest `{}` (version {}) is valid", path.display(), m.name, m.version)?;
    writeln!(out, "tiers:")?;
    for tier in &m.tiers {
        let timeout = match tier.timeout {
            TierTimeout::Variable => "variable".to_string(),
            TierTimeout::Fixed(d) => d.to_string(),
        };
        writeln!(
            out,
            "  {} {:<18} timeout {:<9} retries {}  fallback {}",
            tier.tier,
            tier.name,
            timeout,
            tier.max_retries,
            fallback(&tier.fallback)
        )?;
    }
    writeln!(out, "agents: {}", m.agents.len())?;
    for tier in &m.tiers {
        let ids: Vec<&str> = m.agents.iter().filter(|a| a.tier == tier.tier).map(|a| a.id.as_str()).collect();
        if !ids.is_empty() {
            writeln!(out, "  tier {}: {}", tier.tier, ids.join(", "))?;
        }
    }
    if !m.tools.is_empty() {
        writeln!(out, "tools: {}", m.tools.len())?;
        for t in &m.tools {
            let kind = if t.mcp.is_some() { "mcp" } else { "http" };
            let writes: Vec<&str> =
                t.effects.iter().filter(|(_, e)| e.as_str() == "write").map(|(n, _)| n.as_str()).collect();
            let writes = if writes.is_empty() { String::new() } else { format!(", writes: {}", writes.join(", ")) };
            writeln!(out, "  {} ({kind}{writes})", t.id)?;
        }
    }
    writeln!(out, "intents: {}", m.intents.len())?;
    for intent in &m.intents {
        let answered_by = match (&intent.route.primary, &intent.route.pipeline) {
            (Some(primary), _) => primary.clone(),
            (None, Some(pipeline)) => format!("pipeline {pipeline}"),
            (None, None) => "-".to_string(),
        };
        let supporting = if intent.route.supporting.is_empty() {
            String::new()
        } else {
            format!(" + {}", intent.route.supporting.join(", "))
        };
        let role = intent.required_role.as_ref().map(|r| format!("  (role {r})")).unwrap_or_default();
        writeln!(out, "  {:<18} -> {answered_by}{supporting}{role}", intent.id)?;
    }
    writeln!(out, "pipelines: {}", m.pipelines.len())?;
    for pipeline in &m.pipelines {
        let steps: Vec<String> = pipeline
            .steps
            .iter()
            .map(|s| match &s.gate {
                Some(gate) => format!("{} [gate {}]", s.agent, gate.name),
                None => s.agent.clone(),
            })
            .collect();
        writeln!(out, "  {}: {}", pipeline.id, steps.join(" -> "))?;
    }
    Ok(())
}

/// Warnings (the exit code stays) for `llm` output schemas a server decoding by the schema
/// cannot honour; see [`switchyard_agents::schema::grammar_warnings`].
fn schemas(path: &Path, text: &str, m: &Manifest, out: &mut impl Write) -> io::Result<()> {
    for (i, agent) in m.agents.iter().enumerate() {
        let Some(llm) = &agent.llm else { continue };
        let field = format!("agents[{i}].llm.output_schema.schema");
        let at = locate(text, &field).map(|l| format!(":{l}")).unwrap_or_default();
        for warning in switchyard_agents::schema::grammar_warnings(&llm.output_schema.schema) {
            writeln!(out, "{}{at}: warning: {field} (agent `{}`): {warning}", path.display(), agent.id)?;
        }
    }
    Ok(())
}

/// Warnings (the exit code stays) for the keywords of a manifest's only intent that name no
/// subject ("what is", "how"): with one intent, the router tells it from the background of
/// off-domain questions alone, and such a keyword teaches it that the shape of any question is
/// evidence for the intent. With several intents a question word may tell them apart ("why"
/// for an explanation), so it is left alone there.
fn keywords(path: &Path, m: &Manifest, out: &mut impl Write) -> io::Result<()> {
    if m.intents.len() != 1 {
        return Ok(());
    }
    for (i, intent) in m.intents.iter().enumerate() {
        for (j, keyword) in intent.keywords.iter().enumerate() {
            if switchyard_core::classify::names_no_subject(keyword) {
                writeln!(
                    out,
                    "{}: warning: intents[{i}].keywords[{j}] `{keyword}` (intent `{}`): every word of it is a question, request or stop word, so it matches nearly any question and lets off-domain questions in; name what the intent is about",
                    path.display(),
                    intent.id
                )?;
            }
        }
    }
    Ok(())
}

/// The state of the manifest's router artifact; an example file the trainer cannot read is a
/// problem (exit 1), a missing or stale artifact a warning naming the command.
fn router(m: &Manifest, out: &mut impl Write) -> io::Result<u8> {
    use switchyard_core::router;
    if let Err(e) = router::training(m) {
        writeln!(out, "router: problem: {e}")?;
        return Ok(EXIT_INVALID);
    }
    if let Some(folder) = m.encoder_folder() {
        if let Err(e) = switchyard_core::classify::cascade::identity(&folder) {
            writeln!(out, "router: problem: classifier.encoder.model: {e}")?;
            return Ok(EXIT_INVALID);
        }
    }
    let path = router::artifact_path(m).map(|p| p.display().to_string()).unwrap_or_default();
    match router::state(m) {
        router::ArtifactState::Current if router::prepared_manifest_current(m) == Some(false) => writeln!(
            out,
            "router: {path} is current; note: the manifest file changed since it was trained, so functions parse the YAML at start (run `{}` for the faster start)",
            router::train_command(m)
        )?,
        router::ArtifactState::Current => writeln!(out, "router: {path} is current")?,
        state => writeln!(out, "router: warning: {path} is {}: run `{}`", state.describe(), router::train_command(m))?,
    }
    Ok(EXIT_VALID)
}

fn fallback(f: &Fallback) -> String {
    match f {
        Fallback::None => "none".to_string(),
        Fallback::Agent(id) => format!("agent {id}"),
        Fallback::Template(_) => "template".to_string(),
    }
}

fn problems(text: &str, err: &ManifestError, out: &mut impl Write) -> io::Result<()> {
    let count = err.problems.len();
    writeln!(out, "{}: {count} problem{}", err.file, if count == 1 { "" } else { "s" })?;
    for problem in &err.problems {
        let line = problem.line.or_else(|| locate(text, &problem.path));
        let at = line.map(|l| format!(":{l}")).unwrap_or_default();
        let field = if problem.path.is_empty() { String::new() } else { format!(" {}:", problem.path) };
        writeln!(out, "{}{at}:{field} {}", err.file, problem.message)?;
    }
    Ok(())
}

/// One step of a YAML path: a mapping key or a sequence index.
#[derive(Debug, PartialEq)]
enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(key) = pieces.next().filter(|k| !k.is_empty()) {
            out.push(Step::Key(key));
        }
        for index in pieces {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                out.push(Step::Index(i));
            }
        }
    }
    out
}

/// A meaningful line of the file: its number, indentation and text.
struct Line<'t> {
    number: usize,
    indent: usize,
    text: &'t str,
}

impl Line<'_> {
    /// Column of the first mapping key on the line, after any `- ` item markers, and the rest.
    fn key_column(&self) -> (usize, &str) {
        let mut column = self.indent;
        let mut rest = self.text;
        while let Some(after) = rest.strip_prefix("- ") {
            let trimmed = after.trim_start();
            column += 2 + (after.len() - trimmed.len());
            rest = trimmed;
        }
        (column, rest)
    }
}

/// The line where a validation problem's YAML path is written, found by following indentation
/// (block mappings and sequences; a flow collection `{…}` / `[…]` stops the search at its line).
/// Best effort: `None` when the layout is not understood.
fn locate(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<Line<'_>> = text
        .lines()
        .enumerate()
        .filter_map(|(i, raw)| {
            let text = raw.trim_start();
            (!text.is_empty() && !text.starts_with('#') && text != "---").then(|| Line {
                number: i + 1,
                indent: raw.len() - text.len(),
                text,
            })
        })
        .collect();
    let mut range = 0..lines.len();
    let mut found = None;
    let steps = steps(path);
    for (n, step) in steps.iter().enumerate() {
        let last = n + 1 == steps.len();
        match step {
            Step::Key(key) => {
                let child_column = lines.get(range.start)?.key_column().0;
                let (i, rest) = range.clone().find_map(|i| {
                    let (column, rest) = lines[i].key_column();
                    let value = rest.strip_prefix(key)?.strip_prefix(':')?;
                    (column == child_column && (value.is_empty() || value.starts_with(' '))).then_some((i, value))
                })?;
                found = Some(lines[i].number);
                let inline = rest.split(" #").next().unwrap_or_default().trim();
                if !last && !inline.is_empty() {
                    return found;
                }
                let column = child_column;
                let end = (i + 1..range.end)
                    .find(|&j| {
                        lines[j].indent < column || (lines[j].indent == column && !lines[j].text.starts_with('-'))
                    })
                    .unwrap_or(range.end);
                range = i + 1..end;
            }
            Step::Index(index) => {
                let dash = range.clone().filter(|&j| lines[j].text.starts_with('-')).map(|j| lines[j].indent).min();
                let Some(dash) = dash else { return found };
                let items: Vec<usize> =
                    range.clone().filter(|&j| lines[j].indent == dash && lines[j].text.starts_with('-')).collect();
                let start = *items.get(*index)?;
                found = Some(lines[start].number);
                let end = (start + 1..range.end).find(|&j| lines[j].indent <= dash).unwrap_or(range.end);
                range = start..end;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "\
version: 1
name: tiny
tiers:
  - {tier: 2, name: analytics, timeout: 120s, max_retries: 2, fallback: {agent: explainer}}
  - tier: 5
    name: explain
    timeout: 180s
    max_retries: 1
    fallback: none
agents:
  - id: causal_impact
    tier: 2
    kind: builtin
    builtin: {response: x, confidence: 0.8}
  - id: explainer
    tier: 5
    kind: builtin
    builtin: {response: y, confidence: 0.8}
intents:
  - id: causal_impact
    route: {primary: causal_impact, supporting: [explainer]}
    keywords: [effect]
";

    /// A manifest file in the temp directory, removed when dropped.
    struct TempManifest(std::path::PathBuf);

    impl TempManifest {
        fn new(name: &str, text: &str) -> TempManifest {
            let path = std::env::temp_dir().join(format!("switchyard-validate-{}-{name}.yaml", std::process::id()));
            std::fs::write(&path, text).expect("temp file written");
            TempManifest(path)
        }
    }

    impl Drop for TempManifest {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn run_on(name: &str, text: &str) -> (u8, String) {
        let file = TempManifest::new(name, text);
        let mut out = Vec::new();
        let code = run(&file.0, &mut out);
        (code, String::from_utf8(out).expect("utf-8 report"))
    }

    #[test]
    fn a_valid_manifest_exits_0_and_summarises_tiers_agents_and_routes() {
        let (code, out) = run_on("valid", VALID);
        assert_eq!(code, EXIT_VALID, "{out}");
        assert!(out.contains("manifest `tiny` (version 1) is valid"), "{out}");
        assert!(
            out.contains("2 analytics") && out.contains("timeout 2m") && out.contains("fallback agent explainer"),
            "{out}"
        );
        assert!(out.contains("agents: 2"), "{out}");
        assert!(out.contains("causal_impact      -> causal_impact + explainer"), "{out}");
    }

    #[test]
    fn a_manifest_with_problems_exits_1_and_lists_each_with_file_line_and_path() {
        let broken = VALID
            .replace("    tier: 5\n    kind", "    tier: 7\n    kind")
            .replace("supporting: [explainer]", "supporting: [nobody]");
        let (code, out) = run_on("broken", &broken);
        assert_eq!(code, EXIT_INVALID, "{out}");
        assert!(out.contains("2 problems"), "{out}");
        assert!(out.contains("-broken.yaml:16: agents[1].tier: tier 7 is not declared"), "{out}");
        assert!(out.contains("-broken.yaml:21: intents[0].route.supporting[0]: agent `nobody`"), "{out}");
    }

    #[test]
    fn an_encoder_folder_without_a_model_is_a_problem_naming_the_key() {
        let with = VALID.replacen("\nintents:", "\nclassifier:\n  encoder: {model: no-such-encoder}\nintents:", 1);
        assert_ne!(with, VALID, "the manifest has an intents section to put the encoder before");
        let (code, out) = run_on("encoder", &with);
        assert_eq!(code, EXIT_INVALID, "{out}");
        assert!(
            out.contains("router: problem: classifier.encoder.model: ") && out.contains("no-such-encoder"),
            "{out}"
        );
    }

    #[test]
    fn a_parse_error_is_reported_with_the_parser_line() {
        let (code, out) = run_on("typo", &VALID.replace("max_retries: 1", "max_retry: 1"));
        assert_eq!(code, EXIT_INVALID);
        assert!(out.contains("-typo.yaml:8: tiers[1].max_retry: "), "{out}");
        assert!(out.contains("unknown field `max_retry`"), "{out}");
    }

    #[test]
    fn the_shipped_manifest_is_summarised_with_its_twelve_intents_and_pipeline() {
        // Without its example file beside it, the router cannot be trained: a problem.
        let (code, out) = run_on("shipped", switchyard_model::manifest::EMBEDDED_ROUTING_YAML);
        assert_eq!(code, EXIT_INVALID, "{out}");
        assert!(out.contains("router: problem: classifier.examples: "), "{out}");
        assert!(out.contains("routing.examples.jsonl: "), "{out}");
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut out = Vec::new();
        let code = run(&root.join("routing.yaml"), &mut out);
        let out = String::from_utf8(out).expect("utf-8 report");
        assert_eq!(code, EXIT_VALID, "{out}");
        assert!(out.contains("router: ") && out.contains("routing.router is current"), "{out}");
        assert!(out.contains("intents: 12"), "{out}");
        assert!(
            out.contains(
                "ml_training: scope_definer -> data_preparer [gate data_qc] -> model_selector -> model_trainer"
            ),
            "{out}"
        );
    }

    #[test]
    fn a_keyword_of_the_only_intent_that_names_no_subject_is_warned_about() {
        let vague = VALID.replace("keywords: [effect]", "keywords: [effect, what is, How did you, why did it drop]");
        let (code, out) = run_on("vague", &vague);
        assert_eq!(code, EXIT_VALID, "{out}");
        assert!(
            out.contains("warning: intents[0].keywords[1] `what is` (intent `causal_impact`): every word"),
            "{out}"
        );
        assert!(out.contains("warning: intents[0].keywords[2] `How did you`"), "{out}");
        assert!(!out.contains("keywords[0]") && !out.contains("keywords[3]"), "{out}");
        let (_, clean) = run_on("subject", VALID);
        assert!(!clean.contains("].keywords["), "{clean}");
    }

    #[test]
    fn a_valid_manifest_with_unportable_scalars_still_exits_0_and_warns_with_line_and_rule() {
        let unportable = VALID.replace("keywords: [effect]", "keywords: [effect, why did it drop?, on]");
        let (code, out) = run_on("unportable", &unportable);
        assert_eq!(code, EXIT_VALID, "{out}");
        assert!(out.contains("-unportable.yaml:22:"), "{out}");
        assert!(out.contains("warning: `why did it drop?`: a `?` inside a plain scalar"), "{out}");
        assert!(out.contains("warning: `on`: YAML 1.1 parsers (PyYAML) read `on` as a boolean"), "{out}");
        let (_, tiny) = run_on("tiny", VALID);
        assert!(tiny.contains("warning: `y`: some YAML 1.1 parsers read `y` as a boolean"), "{tiny}");
        let (_, clean) = run_on("clean", &VALID.replace("response: y,", "response: why,"));
        assert!(!clean.contains("warning: `"), "{clean}");
        assert!(
            clean.contains("router: warning: ")
                && clean.contains(".router is missing: run `switchyard train --manifest "),
            "{clean}"
        );
    }

    #[test]
    fn a_missing_file_exits_1_and_says_it_cannot_be_read() {
        let mut out = Vec::new();
        let code = run(Path::new("/nonexistent/routing.yaml"), &mut out);
        assert_eq!(code, EXIT_INVALID);
        assert!(String::from_utf8_lossy(&out).contains("cannot read the file"));
    }

    #[test]
    fn paths_are_located_in_block_and_compact_layouts() {
        let text = "a:\n- x: 1\n  y:\n    - 3\n    - 4\nb: {c: 1}\n";
        assert_eq!(locate(text, "a[0].y[1]"), Some(5));
        assert_eq!(locate(text, "a[0].y"), Some(3));
        assert_eq!(locate(text, "b.c"), Some(6));
        assert_eq!(locate(text, "a[3]"), None);
        assert_eq!(locate(VALID, "tiers[1].fallback"), Some(9));
        assert_eq!(locate(VALID, "agents[1]"), Some(15));
    }

    #[test]
    fn paths_are_located_in_the_shipped_manifest() {
        let text = switchyard_model::manifest::EMBEDDED_ROUTING_YAML;
        let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).map(|i| i + 1);
        assert_eq!(locate(text, "intents[9].route.pipeline"), line_of("route: {pipeline: ml_training"));
        assert_eq!(locate(text, "agents[3].timeout"), line_of("timeout: 840s"));
        assert_eq!(locate(text, "entities.hcp_id.patterns[1]"), line_of("NPI[-_ ]"));
        assert_eq!(locate(text, "pipelines[0].steps[1].gate.field"), line_of("gate: {name: data_qc"));
    }
}
