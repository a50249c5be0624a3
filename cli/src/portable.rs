//! Portability warnings for manifests: plain (unquoted) scalars that YAML parsers read
//! differently.
//!
//! Switchyard reads `routing.yaml` with a YAML 1.2 parser, where only `true`/`false`, `null`/`~`
//! and ordinary numbers are special. Much other tooling (PyYAML, Ruby's Psych, older Go and Java
//! libraries) follows YAML 1.1, where more plain words and digit shapes mean something else, and
//! PyYAML's scanner also stops a plain scalar inside `[…]`/`{…}` at a `?`. A manifest that leans on
//! any of these loads here but breaks, or silently changes meaning, in the user's other tools.
//! Quoting the scalar makes every parser read the same string. See `docs/manifest-portability.md`.
//!
//! The scan reads the file with a second parser (yaml-rust2's event API), which reports each
//! scalar's style and position; `serde_yaml` does not expose the style.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// One plain scalar that other YAML parsers read differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The scalar as written.
    pub value: String,
    /// How other parsers read it, and what to do.
    pub rule: String,
}

/// Every portability warning in `text`; `Err` with the parser's message when the second parser
/// cannot read the file at all (itself a portability problem).
pub fn scan(text: &str) -> Result<Vec<Warning>, String> {
    let mut collector = Collector { chars: text.chars().collect(), flow: Vec::new(), warnings: Vec::new() };
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut collector, true).map_err(|e| e.to_string())?;
    Ok(collector.warnings)
}

struct Collector {
    chars: Vec<char>,
    /// One entry per open collection: whether it is written in flow style (`[…]` / `{…}`).
    flow: Vec<bool>,
    warnings: Vec<Warning>,
}

impl Collector {
    fn opens_flow(&self, mark: &Marker) -> bool {
        matches!(self.chars.get(mark.index()), Some('[' | '{'))
    }
}

impl MarkedEventReceiver for Collector {
    fn on_event(&mut self, event: Event, mark: Marker) {
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                let flow = self.opens_flow(&mark) || self.flow.last().copied().unwrap_or(false);
                self.flow.push(flow);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.flow.pop();
            }
            Event::Scalar(value, TScalarStyle::Plain, _, None) => {
                let in_flow = self.flow.last().copied().unwrap_or(false);
                if let Some(rule) = rule_for(&value, in_flow) {
                    self.warnings.push(Warning { line: mark.line(), column: mark.col() + 1, value, rule });
                }
            }
            _ => {}
        }
    }
}

/// Why a plain scalar is read differently elsewhere, if it is.
pub fn rule_for(value: &str, in_flow: bool) -> Option<String> {
    let quote = "; quote it if you mean the text";
    if in_flow && value.contains('?') {
        return Some(format!(
            "a `?` inside a plain scalar in a flow collection (`[…]`, `{{…}}`) is a syntax error in PyYAML{}",
            "; quote the scalar"
        ));
    }
    if matches!(value, "yes" | "Yes" | "YES" | "no" | "No" | "NO" | "on" | "On" | "ON" | "off" | "Off" | "OFF") {
        return Some(format!("YAML 1.1 parsers (PyYAML) read `{value}` as a boolean, YAML 1.2 as text{quote}"));
    }
    if matches!(value, "y" | "Y" | "n" | "N") {
        return Some(format!("some YAML 1.1 parsers read `{value}` as a boolean, YAML 1.2 as text{quote}"));
    }
    if value == "~" {
        return Some(format!("`~` is null in YAML 1.1 and the 1.2 core schema but text in the 1.2 JSON schema; write `null`, or quote it if you mean the text"));
    }
    if value == "=" {
        return Some(format!("PyYAML reads a plain `=` as YAML 1.1's value key and cannot construct it{quote}"));
    }
    if value == "<<" {
        return Some(format!("`<<` is YAML 1.1's merge key (PyYAML merges it), plain text in YAML 1.2{quote}"));
    }
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    if is_sexagesimal(digits) {
        return Some(format!(
            "YAML 1.1 parsers read `{value}` as a base-60 number (1:30 is 90), YAML 1.2 as text{quote}"
        ));
    }
    if digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return Some(format!(
            "YAML 1.1 parsers read `{value}` as an octal number, YAML 1.2 as a decimal one (or text){quote}"
        ));
    }
    if let Some(rest) = digits.strip_prefix("0o") {
        if !rest.is_empty() && rest.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return Some(format!("YAML 1.2 reads `{value}` as an octal number, YAML 1.1 as text{quote}"));
        }
    }
    if let Some(rest) = digits.strip_prefix("0b") {
        if !rest.is_empty() && rest.bytes().all(|b| matches!(b, b'0' | b'1' | b'_')) {
            return Some(format!("YAML 1.1 reads `{value}` as a binary number, YAML 1.2 as text{quote}"));
        }
    }
    if digits.contains('_')
        && digits.starts_with(|c: char| c.is_ascii_digit())
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_' || b == b'.')
    {
        return Some(format!(
            "YAML 1.1 parsers read `{value}` as a number (underscores ignored), YAML 1.2 as text{quote}"
        ));
    }
    if is_exponent_without_dot(digits) {
        return Some(format!(
            "YAML 1.2 reads `{value}` as a float, PyYAML as text (its floats need a `.`); write it with a `.` (e.g. 1.0e3) or quote it"
        ));
    }
    if is_date(value) {
        return Some(format!(
            "YAML 1.1 parsers (PyYAML) read `{value}` as a date or timestamp, YAML 1.2 as text{quote}"
        ));
    }
    None
}

/// `1:30`, `190:20:30`, `1:30.5`: digits, then `:` groups of one or two digits below 60.
fn is_sexagesimal(s: &str) -> bool {
    let (whole, fraction) = match s.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (s, None),
    };
    if fraction.is_some_and(|f| !f.bytes().all(|b| b.is_ascii_digit() || b == b'_')) {
        return false;
    }
    let mut groups = whole.split(':');
    let Some(first) = groups.next() else { return false };
    if first.is_empty() || !first.starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    if !first.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
        return false;
    }
    let rest: Vec<&str> = groups.collect();
    !rest.is_empty()
        && rest.iter().all(|g| {
            (1..=2).contains(&g.len())
                && g.bytes().all(|b| b.is_ascii_digit())
                && g.parse::<u32>().is_ok_and(|n| n < 60)
        })
}

/// `1e3`, `2E-5`: a float in YAML 1.2's core schema that PyYAML's resolver leaves as text.
fn is_exponent_without_dot(s: &str) -> bool {
    let Some((mantissa, exponent)) = s.split_once(['e', 'E']) else { return false };
    let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    !mantissa.is_empty()
        && mantissa.bytes().all(|b| b.is_ascii_digit())
        && !exponent.is_empty()
        && exponent.bytes().all(|b| b.is_ascii_digit())
}

/// `2026-11-22` (and timestamps that start with one): YAML 1.1's timestamp type.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if !(digits(0..4) && b.get(4) == Some(&b'-')) {
        return false;
    }
    // month: one or two digits, then `-`, then day: one or two digits.
    let rest = &s[5..];
    let mut parts = rest.splitn(3, |c: char| c == '-' || c == 'T' || c == 't' || c == ' ');
    let month = parts.next().unwrap_or_default();
    let day: String = parts.next().unwrap_or_default().chars().take_while(char::is_ascii_digit).collect();
    (1..=2).contains(&month.len()) && month.bytes().all(|c| c.is_ascii_digit()) && (1..=2).contains(&day.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flagged(text: &str) -> Vec<(usize, String)> {
        scan(text).expect("parses").into_iter().map(|w| (w.line, w.value)).collect()
    }

    #[test]
    fn a_question_mark_in_a_flow_sequence_is_flagged_and_quoting_clears_it() {
        assert_eq!(
            flagged("follow_ups: [Retrain without the weakest features?]\n"),
            vec![(1, "Retrain without the weakest features?".to_string())]
        );
        assert!(flagged("follow_ups: [\"Retrain without the weakest features?\"]\n").is_empty());
        assert!(flagged("follow_ups:\n  - Retrain without the weakest features?\n").is_empty(), "block style is fine");
        assert_eq!(flagged("reply: {q: Which terms matter?, k: 1}\n"), vec![(1, "Which terms matter?".to_string())]);
        assert_eq!(flagged("a: [[x, {k: [why?]}]]\n"), vec![(1, "why?".to_string())], "nested flow");
    }

    #[test]
    fn yaml_1_1_booleans_sexagesimals_octals_and_dates_are_flagged() {
        let text =
            "a: yes\nb: Off\nc: 1:30\nd: 012\ne: 2026-11-22\nf: ~\ng: 1_000\nh: 0o17\ni: 1e3\nj: n\nk: 0b101\nl: =\n";
        let lines: Vec<usize> = flagged(text).into_iter().map(|(l, _)| l).collect();
        assert_eq!(lines, (1..=12).collect::<Vec<_>>());
    }

    #[test]
    fn ordinary_scalars_and_quoted_ones_are_not_flagged() {
        let text = "a: true\nb: 120s\nc: 0.8\nd: 0\ne: 12\nf: \"yes\"\ng: '1:30'\nh: null\ni: text, with comma\nj: 10:70\nk: [a, b]\nl: 2026\nm: 1.5e3\n";
        assert_eq!(flagged(text), vec![], "10:70 is not base 60 (70 >= 60)");
    }

    #[test]
    fn keys_are_checked_too_and_positions_are_one_based() {
        let w = scan("top:\n  on: 1\n").expect("parses");
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].line, w[0].column, w[0].value.as_str()), (2, 3, "on"));
        assert!(w[0].rule.contains("boolean"), "{}", w[0].rule);
    }

    #[test]
    fn text_the_second_parser_cannot_read_is_an_error_not_a_panic() {
        assert!(scan("a: [unclosed\n").is_err());
        assert!(scan("a: b: c\n").is_err());
        assert!(scan("").expect("empty is fine").is_empty());
    }

    #[test]
    fn every_shipped_manifest_has_no_portability_warning() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = vec![root.join("routing.yaml")];
        for entry in std::fs::read_dir(root.join("examples")).expect("examples/") {
            let path = entry.expect("entry").path().join("routing.yaml");
            if path.exists() {
                files.push(path);
            }
        }
        assert!(files.len() >= 6, "{files:?}");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("readable");
            assert_eq!(scan(&text).expect("parses"), vec![], "{}", file.display());
        }
    }
}
