//! Re-fit of `routing.yaml` from exported signals: propose utterances for intents where
//! signals show corrected routing, prove on held-out signals and on the manifest's own
//! utterances that routing does not get worse, and write the change as a line edit so comments
//! and layout of everything else stay as they were.

use super::{FieldError, SignalRecord};
use crate::classify::Classifier;
use serde::Serialize;
use switchyard_model::manifest::Manifest;

/// Queries longer than this are not proposed as utterances.
pub const MAX_UTTERANCE_CHARS: usize = 300;

/// Knobs of a re-fit.
#[derive(Debug, Clone)]
pub struct RefitOptions {
    /// One signal in this many goes to the check set (by a hash of its id).
    pub check_every: u64,
    /// A signal without a correction counts as confirming its routed intent only when the
    /// caller rated it at least this (1 – 5).
    pub confirm_rating: f64,
}

impl Default for RefitOptions {
    fn default() -> Self {
        RefitOptions { check_every: 3, confirm_rating: 4.0 }
    }
}

/// A labelled question taken from a signal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    /// Signal it came from.
    pub signal_id: String,
    /// The question.
    pub query: String,
    /// The intent it should route to.
    pub intent: String,
}

/// What a re-fit measured and proposes.
#[derive(Debug, Clone, Serialize)]
pub struct RefitReport {
    /// Signals read.
    pub signals: usize,
    /// Signals without question text (the manifest did not allow storing it).
    pub without_text: usize,
    /// Signals with text but no label (no correction and no good rating).
    pub unlabelled: usize,
    /// Labelled examples used to fit.
    pub fit: usize,
    /// Labelled examples held out to check.
    pub check: usize,
    /// Accuracy on the check set before and after (`None` when the check set is empty).
    pub check_before: Option<f64>,
    /// See `check_before`.
    pub check_after: Option<f64>,
    /// Accuracy on the manifest's own utterances before and after.
    pub own_before: f64,
    /// See `own_before`.
    pub own_after: f64,
    /// Utterances added, as (intent, utterance).
    pub added: Vec<(String, String)>,
    /// Candidates dropped because they lowered accuracy on the manifest's own utterances.
    pub dropped: Vec<(String, String)>,
}

/// The result of a re-fit.
#[derive(Debug, Clone)]
pub enum RefitOutcome {
    /// A new manifest that routes at least as well on both measures.
    Proposed {
        /// The new `routing.yaml` text.
        yaml: String,
        /// Figures.
        report: RefitReport,
        /// Readable diff of the change.
        diff: String,
    },
    /// Nothing to change: every labelled fit signal already routes right, or every candidate
    /// was dropped.
    Unchanged {
        /// Figures.
        report: RefitReport,
    },
    /// The change lowers accuracy on the check set or on the manifest's own utterances.
    Refused {
        /// Figures.
        report: RefitReport,
        /// Why.
        reason: String,
    },
}

/// Whether a signal id belongs to the check set (FNV-1a of the id, so the split is stable
/// across runs and machines).
pub fn is_check(signal_id: &str, check_every: u64) -> bool {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in signal_id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    check_every > 0 && h % check_every.max(1) == 0
}

/// Labelled examples of `records`, and the counts of those without text or label.
pub fn label(records: &[SignalRecord], options: &RefitOptions) -> (Vec<Example>, usize, usize) {
    let (mut without_text, mut unlabelled) = (0, 0);
    let mut out = Vec::new();
    for r in records {
        let query = r.signal.query.trim();
        if query.is_empty() {
            without_text += 1;
            continue;
        }
        let intent = match (&r.correct_intent, r.signal.user_satisfaction) {
            (Some(i), _) => i.clone(),
            (None, Some(s)) if s >= options.confirm_rating => r.signal.intent.clone(),
            _ => {
                unlabelled += 1;
                continue;
            }
        };
        out.push(Example { signal_id: r.signal.signal_id.clone(), query: query.to_string(), intent });
    }
    (out, without_text, unlabelled)
}

fn accuracy(classifier: &Classifier, examples: &[(String, String)]) -> Option<f64> {
    if examples.is_empty() {
        return None;
    }
    let right = examples.iter().filter(|(q, i)| classifier.classify(q).intent == *i).count();
    Some(right as f64 / examples.len() as f64)
}

fn own_utterances(m: &Manifest) -> Vec<(String, String)> {
    m.intents.iter().flat_map(|i| i.utterances.iter().map(|u| (u.clone(), i.id.clone()))).collect()
}

/// Propose a new manifest from `records`. `text` is the current `routing.yaml`, `file` names
/// it in errors. Fails when the manifest is invalid, a signal names an intent the manifest
/// lacks, or an intent's utterances cannot be edited line by line (flow style).
pub fn refit(
    text: &str,
    file: &str,
    records: &[SignalRecord],
    options: &RefitOptions,
) -> Result<RefitOutcome, FieldError> {
    let manifest =
        Manifest::from_yaml(text, file).map_err(|e| FieldError { field: "manifest", rule: e.to_string() })?;
    let (examples, without_text, unlabelled) = label(records, options);
    for e in &examples {
        if manifest.intent(&e.intent).is_none() {
            return Err(FieldError {
                field: "signals",
                rule: format!(
                    "signal {} names intent `{}`, which the manifest does not declare",
                    e.signal_id, e.intent
                ),
            });
        }
    }
    let (check, fit): (Vec<&Example>, Vec<&Example>) =
        examples.iter().partition(|e| is_check(&e.signal_id, options.check_every));
    let check_pairs: Vec<(String, String)> = check.iter().map(|e| (e.query.clone(), e.intent.clone())).collect();
    let own = own_utterances(&manifest);
    let before = Classifier::lexical(&manifest);
    let own_before = accuracy(&before, &own).unwrap_or(0.0);
    let check_before = accuracy(&before, &check_pairs);

    // Candidates: fit examples the current manifest routes wrong, once per (intent, query),
    // unless the intent already lists the question.
    let mut candidates: Vec<(String, String)> = Vec::new();
    for e in &fit {
        if e.query.chars().count() > MAX_UTTERANCE_CHARS {
            continue;
        }
        let known =
            manifest.intent(&e.intent).is_some_and(|i| i.utterances.iter().any(|u| u.eq_ignore_ascii_case(&e.query)));
        let pair = (e.intent.clone(), e.query.clone());
        if !known && before.classify(&e.query).intent != e.intent && !candidates.contains(&pair) {
            candidates.push(pair);
        }
    }

    // Greedy: keep a candidate only when accuracy on the manifest's own utterances does not drop.
    let mut current = manifest.clone();
    let (mut added, mut dropped) = (Vec::new(), Vec::new());
    for (intent, query) in candidates {
        let mut trial = current.clone();
        if let Some(i) = trial.intents.iter_mut().find(|i| i.id == intent) {
            i.utterances.push(query.clone());
        }
        let own_trial = accuracy(&Classifier::lexical(&trial), &own).unwrap_or(0.0);
        if own_trial + 1e-12 >= own_before {
            current = trial;
            added.push((intent, query));
        } else {
            dropped.push((intent, query));
        }
    }
    let after = Classifier::lexical(&current);
    let mut report = RefitReport {
        signals: records.len(),
        without_text,
        unlabelled,
        fit: fit.len(),
        check: check.len(),
        check_before,
        check_after: accuracy(&after, &check_pairs),
        own_before,
        own_after: accuracy(&after, &own).unwrap_or(0.0),
        added: Vec::new(),
        dropped,
    };
    if added.is_empty() {
        return Ok(RefitOutcome::Unchanged { report });
    }
    report.added = added.clone();
    if let (Some(b), Some(a)) = (report.check_before, report.check_after) {
        if a + 1e-12 < b {
            let reason = format!("accuracy on the check set would drop from {b:.3} to {a:.3}");
            return Ok(RefitOutcome::Refused { report, reason });
        }
    }
    if report.own_after + 1e-12 < report.own_before {
        let reason = format!(
            "accuracy on the manifest's utterances would drop from {:.3} to {:.3}",
            report.own_before, report.own_after
        );
        return Ok(RefitOutcome::Refused { report, reason });
    }
    let (yaml, diff) = insert_utterances(text, &added)?;
    // The edit must parse to exactly the manifest we measured: nothing else changed.
    let reparsed =
        Manifest::from_yaml(&yaml, file).map_err(|e| FieldError { field: "manifest", rule: e.to_string() })?;
    if reparsed != current {
        return Err(FieldError {
            field: "manifest",
            rule: "the line edit did not produce the measured manifest".into(),
        });
    }
    Ok(RefitOutcome::Proposed { yaml, report, diff })
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_intent_line(line: &str, id: &str) -> bool {
    let t = line.trim_start();
    let Some(rest) = t.strip_prefix("- id:") else { return false };
    let v = rest.trim();
    let v = v.split(" #").next().unwrap_or(v).trim();
    v == id || v == format!("\"{id}\"") || v == format!("'{id}'")
}

/// Add each (intent, utterance) as a new last line of that intent's block-style `utterances:`
/// list (creating the list when the intent has none), as a double-quoted scalar. Returns the
/// new text and a readable diff. Every other line is kept byte for byte.
pub fn insert_utterances(text: &str, additions: &[(String, String)]) -> Result<(String, String), FieldError> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut diff = String::new();
    let intents_at = lines
        .iter()
        .position(|l| l.trim_end() == "intents:")
        .ok_or_else(|| FieldError { field: "manifest", rule: "no top-level `intents:` block".into() })?;
    for (intent, utterance) in additions {
        let start = (intents_at + 1..lines.len()).find(|&n| is_intent_line(&lines[n], intent)).ok_or_else(|| {
            FieldError { field: "manifest", rule: format!("intent `{intent}` not found as `- id: {intent}`") }
        })?;
        let dash = indent_of(&lines[start]);
        let field_indent = dash + 2;
        let end = (start + 1..lines.len())
            .find(|&n| {
                let l = &lines[n];
                !l.trim().is_empty() && !l.trim_start().starts_with('#') && indent_of(l) <= dash
            })
            .unwrap_or(lines.len());
        let quoted =
            serde_json::to_string(utterance).map_err(|e| FieldError { field: "signals", rule: e.to_string() })?;
        let key = (start..end).find(|&n| {
            let l = &lines[n];
            let body = if n == start { &l[field_indent.min(l.len())..] } else { l.trim_start() };
            (n == start || indent_of(l) == field_indent) && body.starts_with("utterances:")
        });
        let (at, new_line) = match key {
            Some(k) => {
                let after_key = lines[k].trim_start().trim_start_matches("- ").trim_start_matches("utterances:").trim();
                if !after_key.is_empty() && !after_key.starts_with('#') {
                    return Err(FieldError {
                        field: "manifest",
                        rule: format!("intent `{intent}`: utterances in flow style cannot be edited line by line"),
                    });
                }
                let mut last = k;
                let mut item_indent = None;
                for n in k + 1..end {
                    let l = &lines[n];
                    if l.trim().is_empty() || l.trim_start().starts_with('#') {
                        continue;
                    }
                    if indent_of(l) <= field_indent && !l.trim_start().starts_with("- ") {
                        break;
                    }
                    if indent_of(l) < field_indent {
                        break;
                    }
                    if l.trim_start().starts_with("- ") && item_indent.is_none() {
                        item_indent = Some(indent_of(l));
                    }
                    if Some(indent_of(l)) == item_indent || indent_of(l) > item_indent.unwrap_or(usize::MAX) {
                        last = n;
                    } else {
                        break;
                    }
                }
                let pad = " ".repeat(item_indent.unwrap_or(field_indent + 2));
                (last + 1, format!("{pad}- {quoted}"))
            }
            None => {
                let mut at = end;
                while at > start + 1 && lines[at - 1].trim().is_empty() {
                    at -= 1;
                }
                let pad = " ".repeat(field_indent);
                lines.insert(at, format!("{pad}utterances:"));
                diff.push_str(&format!("@@ line {} (intent {intent})\n+{pad}utterances:\n", at + 1));
                (at + 1, format!("{pad}  - {quoted}"))
            }
        };
        diff.push_str(&format!("@@ line {} (intent {intent})\n+{new_line}\n", at + 1));
        lines.insert(at, new_line);
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    Ok((out, diff))
}

/// Keys whose values are paths relative to the manifest's folder: `classifier.examples`,
/// `classifier.dialogues`, `classifier.encoder.model`, a retriever's `corpus` and `index`.
const PATH_KEYS: [&str; 5] = ["examples", "dialogues", "model", "corpus", "index"];

/// The relative paths `text` (a manifest read from `from_dir`) names, each with what it becomes
/// for a copy written to `to_dir`: the same file, named from there (absolute when there is no
/// relative way, e.g. another drive).
fn moved_paths(manifest: &Manifest, from_dir: &std::path::Path, to_dir: &std::path::Path) -> Vec<(String, String)> {
    let mut names: Vec<&str> = Vec::new();
    names.extend(manifest.classifier.examples.iter().map(String::as_str));
    names.extend(manifest.classifier.dialogues.iter().map(String::as_str));
    if let Some(encoder) = &manifest.classifier.encoder {
        names.push(&encoder.model);
    }
    for agent in &manifest.agents {
        if let Some(r) = &agent.retriever {
            names.extend(r.corpus.as_deref());
            names.extend(r.index.as_deref());
        }
    }
    let absolute = |dir: &std::path::Path| {
        if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir().map(|cwd| cwd.join(dir)).unwrap_or_else(|_| dir.to_path_buf())
        }
    };
    let (from_dir, to_dir) = (absolute(from_dir), absolute(to_dir));
    let mut out: Vec<(String, String)> = Vec::new();
    for name in names {
        if std::path::Path::new(name).is_absolute() || out.iter().any(|(n, _)| n == name) {
            continue;
        }
        let target = from_dir.join(name);
        let moved = relative_path(&target, &to_dir).unwrap_or(target);
        let moved = moved.display().to_string();
        if moved != name {
            out.push((name.to_string(), moved));
        }
    }
    out
}

/// The components of `p` without `.`, and with `..` folded into the folder before it.
fn normal(p: &std::path::Path) -> Vec<std::path::Component<'_>> {
    use std::path::Component;
    let mut parts: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(parts.last(), Some(Component::Normal(_))) => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts
}

/// `target` named from `base` (both absolute), with `..` where needed; `None` when they share
/// no root.
fn relative_path(target: &std::path::Path, base: &std::path::Path) -> Option<std::path::PathBuf> {
    let (t, b) = (normal(target), normal(base));
    if t.first() != b.first() {
        return None;
    }
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = std::path::PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c.as_os_str());
    }
    Some(out)
}

/// `text`, a manifest read from `from_dir`, as it must read when written to `to_dir`: every
/// relative path it names (`classifier.examples`, `classifier.dialogues`,
/// `classifier.encoder.model`, a retriever's `corpus` and `index`) rewritten to name the same
/// file from there. A line edit, as [`insert_utterances`]: only the values change.
pub fn relocate(text: &str, from_dir: &std::path::Path, to_dir: &std::path::Path) -> Result<String, FieldError> {
    let manifest: Manifest =
        serde_yaml::from_str(text).map_err(|e| FieldError { field: "manifest", rule: e.to_string() })?;
    let moved = moved_paths(&manifest, from_dir, to_dir);
    if moved.is_empty() {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len() + 64);
    // Within a block list under a path key ("examples:" then "- file"), its items are paths.
    let mut in_path_list: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let key = PATH_KEYS.iter().find(|k| body.strip_prefix(**k).is_some_and(|rest| rest.starts_with(':')));
        let item = body.starts_with("- ");
        if !item || in_path_list.is_some_and(|i| indent < i) {
            in_path_list = None;
        }
        let edited = if let Some(key) = key {
            let value_at = line.len() - body.len() + key.len() + 1;
            let (head, rest) = line.split_at(value_at);
            if rest.trim().is_empty() || rest.trim_start().starts_with('#') {
                in_path_list = Some(indent);
                line.to_string()
            } else {
                format!("{head}{}", replace_values(rest, &moved))
            }
        } else if item && in_path_list.is_some() {
            let (head, rest) = line.split_at(indent + 2);
            format!("{head}{}", replace_values(rest, &moved))
        } else {
            line.to_string()
        };
        out.push_str(&edited);
    }
    Ok(out)
}

/// `rest` (a value, a flow list of values, maybe a comment) with each value of `moved` replaced
/// where it stands alone, as a plain or quoted scalar.
fn replace_values(rest: &str, moved: &[(String, String)]) -> String {
    let (value, comment) = match rest.find(" #") {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let mut value = value.to_string();
    for (old, new) in moved {
        let mut from = 0;
        while let Some(found) = value[from..].find(old.as_str()).map(|i| i + from) {
            let end = found + old.len();
            let before = value[..found].chars().next_back();
            let after = value[end..].chars().next();
            let bounded_before = before.is_none_or(|c| matches!(c, ' ' | '[' | ',' | '"' | '\''));
            let bounded_after = after.is_none_or(|c| matches!(c, ' ' | ']' | ',' | '"' | '\'' | '\n' | '\r'));
            if bounded_before && bounded_after {
                let replacement = match before {
                    Some('"') => new.replace('\\', "\\\\").replace('"', "\\\""),
                    Some('\'') => new.replace('\'', "''"),
                    _ => serde_json::to_string(new).unwrap_or_else(|_| new.clone()),
                };
                value.replace_range(found..end, &replacement);
                from = found + replacement.len();
            } else {
                from = end;
            }
        }
    }
    value + comment
}
