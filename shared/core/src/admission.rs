//! Intake validation of `POST /v1/queries` bodies (the E2I design's validation table, plus the limits
//! that keep hostile input out).
//!
//! A body carries either raw text (`query`) or a pre-parsed E2I `ParsedQuery`
//! (`parsed_query`). [`validate_request`] turns the bytes into a [`ValidatedRequest`] or a
//! [`ValidationError`] that lists every field that broke a rule, so the caller can fix them all
//! in one round trip. The E2I design's "soft" rules — unknown intent, confidence out of range, too
//! many entities — repair the query and say so in [`ValidatedRequest::warnings`].
//!
//! Nothing here panics, whatever the bytes.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use switchyard_model::contracts::ParsedQuery;
use switchyard_model::manifest::Manifest;

/// Largest accepted body, in bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Deepest accepted nesting of JSON arrays and objects, anywhere in the body.
pub const MAX_JSON_DEPTH: usize = 32;
/// Most turns of `conversation_history` a request may carry.
pub const MAX_HISTORY_ENTRIES: usize = 50;
/// Longest `session_id`, in characters.
pub const MAX_SESSION_ID_CHARS: usize = 128;
/// Longest name of an unknown intent quoted back in a warning.
const MAX_QUOTED_CHARS: usize = 64;

/// The body of `POST /v1/queries`, as sent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    /// The question as the user wrote it.
    #[serde(default)]
    pub query: Option<String>,
    /// A query already parsed by an NLP layer (E2I `ParsedQuery`).
    #[serde(default)]
    pub parsed_query: Option<Value>,
    /// The conversation the query belongs to.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Earlier turns, newest last.
    #[serde(default)]
    pub conversation_history: Option<Vec<Value>>,
    /// Caller preferences, passed through.
    #[serde(default)]
    pub preferences: Option<Value>,
    /// The time relative dates of the question ("tomorrow", "the 14th") are read at, RFC 3339
    /// (the request's arrival when absent): an evaluation or a replay is reproducible with it.
    #[serde(default)]
    pub now: Option<String>,
}

/// A request that passed intake validation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidatedRequest {
    /// The question, trimmed (`query`, or `parsed_query.raw_query`).
    pub text: String,
    /// The pre-parsed query, repaired per the E2I design (intent fallback, clamped confidences,
    /// truncated entities); `None` for raw text.
    pub parsed: Option<ParsedQuery>,
    /// The conversation the query belongs to.
    pub session_id: Option<String>,
    /// Earlier turns, newest last.
    pub conversation_history: Vec<Value>,
    /// Caller preferences.
    pub preferences: Option<Value>,
    /// The time the question's relative dates are read at, when the request set one.
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// What was repaired, for the caller to see.
    pub warnings: Vec<String>,
}

/// One broken rule: which field, and what it must be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// Path of the field, e.g. `parsed_query.query_id`; `body` for the body as a whole.
    pub field: String,
    /// The rule it broke, e.g. `must be a UUID`.
    pub rule: String,
}

impl FieldError {
    fn new(field: impl Into<String>, rule: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), rule: rule.into() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}

/// A request refused at intake (HTTP 400): every broken rule. Serialises as
/// `{"errors": [{"field": …, "rule": …}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("invalid request: {}", render(.errors))]
pub struct ValidationError {
    /// The broken rules, in the order of the body's fields.
    pub errors: Vec<FieldError>,
}

impl ValidationError {
    fn one(field: impl Into<String>, rule: impl Into<String>) -> ValidationError {
        ValidationError { errors: vec![FieldError::new(field, rule)] }
    }

    /// Whether some error concerns this field.
    pub fn has(&self, field: &str) -> bool {
        self.errors.iter().any(|e| e.field == field)
    }
}

fn render(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Validate a `POST /v1/queries` body against the manifest's query limits.
pub fn validate_request(body: &[u8], manifest: &Manifest) -> Result<ValidatedRequest, ValidationError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ValidationError::one(
            "body",
            format!("must be at most {MAX_BODY_BYTES} bytes (64 KiB); got {} bytes", body.len()),
        ));
    }
    let text = std::str::from_utf8(body).map_err(|_| ValidationError::one("body", "must be UTF-8 JSON"))?;
    if json_depth_exceeds(text, MAX_JSON_DEPTH) {
        return Err(ValidationError::one(
            "body",
            format!("must not nest arrays or objects deeper than {MAX_JSON_DEPTH} levels"),
        ));
    }
    let trimmed = text.trim_start();
    if !trimmed.is_empty() && !trimmed.starts_with('{') {
        // serde would also read a struct from an array; a body is an object.
        return Err(ValidationError::one("body", "must be a JSON object"));
    }
    let request = parse_json::<QueryRequest>(text)?;
    Intake { manifest, errors: Vec::new(), warnings: Vec::new() }.check(request)
}

/// A request's `now`: an RFC 3339 time with its offset (`2026-03-10T09:30:00+01:00`), as UTC.
/// The error is the rule it broke, quoting it (clipped).
pub fn parse_now(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text.trim()).map(|t| t.with_timezone(&chrono::Utc)).map_err(|e| {
        let quoted: String = text.chars().take(MAX_QUOTED_CHARS).collect();
        format!("must be an RFC 3339 time with an offset, such as 2026-03-10T09:30:00+01:00; `{quoted}` is not ({e})")
    })
}

/// Parses the body with the path of the field that failed.
fn parse_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ValidationError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| path_error("", e))?;
    de.end().map_err(|e| ValidationError::one("body", e.to_string()))?;
    Ok(value)
}

/// A serde error at `prefix` + the path where it happened.
fn path_error(prefix: &str, e: serde_path_to_error::Error<serde_json::Error>) -> ValidationError {
    let path = e.path().to_string();
    let field = match (prefix.is_empty(), path.as_str()) {
        (true, "." | "?") => "body".to_string(),
        (false, "." | "?") => prefix.to_string(),
        (true, _) => path,
        (false, _) => format!("{prefix}.{path}"),
    };
    ValidationError::one(field, e.into_inner().to_string())
}

/// Whether arrays and objects nest deeper than `limit` anywhere in `text` (strings skipped).
/// Runs before the parser, so a hostile body never reaches serde's recursion.
/// Whether `text` (JSON) nests arrays or objects deeper than `limit`, checked before parsing.
pub fn json_depth_exceeds(text: &str, limit: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for byte in text.bytes() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The checks of one request: errors and warnings found so far.
struct Intake<'m> {
    manifest: &'m Manifest,
    errors: Vec<FieldError>,
    warnings: Vec<String>,
}

impl Intake<'_> {
    fn error(&mut self, field: impl Into<String>, rule: impl Into<String>) {
        self.errors.push(FieldError::new(field, rule));
    }

    fn check(mut self, request: QueryRequest) -> Result<ValidatedRequest, ValidationError> {
        let QueryRequest { query, parsed_query, session_id, conversation_history, preferences, now } = request;
        let (text, parsed) = match (query, parsed_query) {
            (Some(_), Some(_)) => {
                self.error("query", "set exactly one of `query` and `parsed_query`, not both");
                (String::new(), None)
            }
            (None, None) => {
                self.error("query", "is required: set exactly one of `query` and `parsed_query`");
                (String::new(), None)
            }
            (Some(query), None) => (self.text("query", &query), None),
            (None, Some(value)) => match self.parsed_query(value) {
                Some(parsed) => (parsed.raw_query.trim().to_string(), Some(parsed)),
                None => (String::new(), None),
            },
        };
        if let Some(id) = &session_id {
            self.session_id(id);
        }
        let conversation_history = conversation_history.unwrap_or_default();
        if conversation_history.len() > MAX_HISTORY_ENTRIES {
            self.error(
                "conversation_history",
                format!("must have at most {MAX_HISTORY_ENTRIES} entries; got {}", conversation_history.len()),
            );
        }
        if preferences.as_ref().is_some_and(|p| !p.is_object()) {
            self.error("preferences", "must be a JSON object");
        }
        let now = now.and_then(|n| match parse_now(&n) {
            Ok(at) => Some(at),
            Err(rule) => {
                self.error("now", rule);
                None
            }
        });
        if !self.errors.is_empty() {
            return Err(ValidationError { errors: self.errors });
        }
        Ok(ValidatedRequest {
            text,
            parsed,
            session_id,
            conversation_history,
            preferences,
            now,
            warnings: self.warnings,
        })
    }

    /// The question's text: non-empty, within the manifest's limit, no control characters but
    /// line breaks and tabs. Returns it trimmed.
    fn text(&mut self, field: &str, text: &str) -> String {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            self.error(field, "must not be empty or only whitespace");
        }
        let max = self.manifest.query.max_query_chars;
        let chars = trimmed.chars().count();
        if chars > max {
            self.error(field, format!("must be at most {max} characters; got {chars}"));
        }
        if has_forbidden_control(trimmed, true) {
            self.error(field, "must not contain control characters other than newline, tab and carriage return");
        }
        trimmed.to_string()
    }

    fn session_id(&mut self, id: &str) {
        let chars = id.chars().count();
        if chars == 0 || chars > MAX_SESSION_ID_CHARS {
            self.error("session_id", format!("must be 1 to {MAX_SESSION_ID_CHARS} characters; got {chars}"));
        }
        if !id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')) {
            self.error("session_id", "must contain only letters, digits, `.`, `_`, `:` and `-`");
        }
    }

    /// A pre-parsed query, repaired per the E2I design's table; `None` when it cannot be read.
    fn parsed_query(&mut self, value: Value) -> Option<ParsedQuery> {
        if !value.is_object() {
            self.error("parsed_query", "must be a JSON object (E2I `ParsedQuery`)");
            return None;
        }
        let mut parsed: ParsedQuery = match serde_path_to_error::deserialize(value) {
            Ok(parsed) => parsed,
            Err(e) => {
                self.errors.extend(path_error("parsed_query", e).errors);
                return None;
            }
        };
        if !is_uuid(&parsed.query_id) {
            self.error("parsed_query.query_id", "must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
        }
        self.text("parsed_query.raw_query", &parsed.raw_query);
        self.intent(&mut parsed);
        if let Some(clamped) = clamp_unit(parsed.confidence) {
            self.warnings.push(format!("confidence {} is outside 0.0 – 1.0; clamped to {clamped}", parsed.confidence));
            parsed.confidence = clamped;
        }
        let max = self.manifest.query.max_entities;
        if parsed.entities.len() > max {
            let dropped = parsed.entities.len() - max;
            parsed.entities.truncate(max);
            self.warnings.push(format!("{dropped} entities dropped: at most {max} entities are accepted"));
        }
        let max_chars = self.manifest.query.max_entity_value_chars;
        for (i, entity) in parsed.entities.iter_mut().enumerate() {
            if !self.manifest.entities.contains_key(&entity.entity_type) {
                let declared: Vec<&str> = self.manifest.entities.keys().map(String::as_str).collect();
                self.errors.push(FieldError::new(
                    format!("parsed_query.entities[{i}].type"),
                    format!(
                        "`{}` is not an entity type of this manifest (declared: {})",
                        entity.entity_type,
                        if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
                    ),
                ));
            }
            let field = format!("parsed_query.entities[{i}].value");
            let chars = entity.value.chars().count();
            if entity.value.trim().is_empty() {
                self.errors.push(FieldError::new(&field, "must not be empty"));
            }
            if chars > max_chars {
                self.errors
                    .push(FieldError::new(&field, format!("must be at most {max_chars} characters; got {chars}")));
            }
            if has_forbidden_control(&entity.value, false) {
                self.errors.push(FieldError::new(&field, "must not contain control characters"));
            }
            if let Some(clamped) = clamp_unit(entity.confidence) {
                self.warnings.push(format!(
                    "entities[{i}].confidence {} is outside 0.0 – 1.0; clamped to {clamped}",
                    entity.confidence
                ));
                entity.confidence = clamped;
            }
        }
        Some(parsed)
    }

    /// An intent the manifest does not declare becomes the fallback intent (E2I: fallback
    /// to `explanation`), or an error when the manifest configures none.
    fn intent(&mut self, parsed: &mut ParsedQuery) {
        if self.manifest.intent(&parsed.intent).is_some() {
            return;
        }
        let shown = quote(&parsed.intent);
        match &self.manifest.query.fallback_intent {
            Some(fallback) => {
                self.warnings.push(format!("intent `{shown}` is not declared; using `{fallback}`"));
                parsed.intent = fallback.clone();
            }
            None => self.error(
                "parsed_query.intent",
                format!("intent `{shown}` is not declared in the manifest, and no fallback intent is configured"),
            ),
        }
    }
}

/// The hyphenated 8-4-4-4-12 form only: the form every query id is written in.
fn is_uuid(text: &str) -> bool {
    text.len() == 36 && uuid::Uuid::try_parse(text).is_ok()
}

/// `Some(clamped)` when `value` lies outside `[0, 1]` (NaN counts as 0).
fn clamp_unit(value: f64) -> Option<f64> {
    if value.is_nan() {
        return Some(0.0);
    }
    let clamped = value.clamp(0.0, 1.0);
    (clamped != value).then_some(clamped)
}

/// Control characters, except `\n`, `\t` and `\r` when `allow_breaks`.
fn has_forbidden_control(text: &str, allow_breaks: bool) -> bool {
    text.chars().any(|c| c.is_control() && !(allow_breaks && matches!(c, '\n' | '\t' | '\r')))
}

/// A caller's string made safe to quote back: control characters escaped, at most
/// [`MAX_QUOTED_CHARS`] characters.
fn quote(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_QUOTED_CHARS)
        .flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] })
        .collect();
    if text.chars().count() > MAX_QUOTED_CHARS {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_brackets_outside_strings_only() {
        assert!(!json_depth_exceeds(r#"{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}"#, 2));
        assert!(json_depth_exceeds("[[[1]]]", 2));
        assert!(!json_depth_exceeds(r#"["\"[[", [1]]"#, 2));
    }

    #[test]
    fn quoted_strings_are_short_and_escaped() {
        assert_eq!(quote("a\u{0}b"), "a\\u{0}b");
        assert_eq!(quote(&"x".repeat(100)).chars().count(), MAX_QUOTED_CHARS + 1);
    }
}
