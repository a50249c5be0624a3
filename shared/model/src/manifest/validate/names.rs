//! Small helpers of the checks: lists of names, ids, cycles, regex errors.

use super::MAX_AGENT_ID_CHARS;

pub(super) fn declared_list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// `^[a-z][a-z0-9_]{0,63}$`, checked without a regex.
pub(super) fn is_agent_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && id.len() <= MAX_AGENT_ID_CHARS
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// A cycle written from its smallest id, so the same loop found from each member is one loop.
pub(super) fn canonical(cycle: &[&str]) -> Vec<String> {
    let start = cycle.iter().enumerate().min_by_key(|(_, id)| **id).map_or(0, |(i, _)| i);
    cycle[start..].iter().chain(&cycle[..start]).map(|s| (*s).to_string()).collect()
}

/// The one-line reason of a regex error (its multi-line rendering points at the column).
pub(super) fn regex_reason(e: &regex_syntax::Error) -> String {
    let text = e.to_string();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map_or_else(|| text.lines().last().unwrap_or_default().trim().to_string(), str::to_string)
}
