//! Learning from traffic: the exported form of a routing training signal, the feedback a caller
//! may attach to a query, the export filter, optimization requests, and the re-fit of
//! `routing.yaml` from signals ([`refit`]). Everything here is pure (no store, no clock); the
//! rules are written down in `docs/routing.md#training-signal`.

pub mod collect;
pub mod refit;

use crate::contracts::RoutingTrainingSignal;
use crate::manifest::Manifest;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Longest feedback comment accepted, in characters.
pub const MAX_COMMENT_CHARS: usize = 2_000;
/// Largest feedback body accepted, in bytes.
pub const MAX_FEEDBACK_BYTES: usize = 8 * 1024;

/// One exported signal: the E2I design's fields, the reward, and what the export adds
/// (`correct_intent` from feedback, `recorded_at` for ordering and `--since`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalRecord {
    /// The E2I design's fields, flattened into the same JSON object.
    #[serde(flatten)]
    pub signal: RoutingTrainingSignal,
    /// `compute_reward` of the signal, 0 – 1.
    pub reward: f64,
    /// The intent the caller said was right, when feedback named one.
    #[serde(default)]
    pub correct_intent: Option<String>,
    /// When routing recorded the signal.
    pub recorded_at: DateTime<Utc>,
}

impl SignalRecord {
    /// The record of `signal` with its reward computed now.
    pub fn new(signal: RoutingTrainingSignal, correct_intent: Option<String>, recorded_at: DateTime<Utc>) -> Self {
        let reward = signal.compute_reward();
        SignalRecord { signal, reward, correct_intent, recorded_at }
    }
}

/// The order key of a finished signal: its recording time (RFC 3339, microseconds, UTC: fixed
/// width, so text order is time order) and its query id. Cursors of [`crate::ports::SignalPage`]
/// are these keys; DynamoDB's signal index sorts by them.
pub fn sort_key(recorded_at: &DateTime<Utc>, query_id: &str) -> String {
    format!("{}#{query_id}", recorded_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
}

/// The recording time in a [`sort_key`], when the key is well formed.
pub fn sort_key_time(key: &str) -> Option<DateTime<Utc>> {
    let (at, id) = key.split_once('#')?;
    if id.is_empty() || id.len() > 64 {
        return None;
    }
    DateTime::parse_from_rfc3339(at).ok().map(|t| t.with_timezone(&Utc))
}

/// A rejected input: the field and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON field (or `body`).
    pub field: &'static str,
    /// The rule, readable.
    pub rule: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}

impl std::error::Error for FieldError {}

fn bad(field: &'static str, rule: impl Into<String>) -> FieldError {
    FieldError { field, rule: rule.into() }
}

/// What a rejected rating was, without echoing long caller text.
fn describe(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Number(n) => n.to_string().chars().take(24).collect(),
        serde_json::Value::String(_) => "a string".into(),
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(_) => "a boolean".into(),
        serde_json::Value::Array(_) => "an array".into(),
        serde_json::Value::Object(_) => "an object".into(),
    }
}

/// Body of `POST /v1/queries/{id}/feedback` as received (unknown fields are refused).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedbackBody {
    rating: serde_json::Value,
    #[serde(default)]
    correct_intent: Option<String>,
    #[serde(default)]
    comment: Option<String>,
}

/// Validated feedback on one query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feedback {
    /// 1 – 5.
    pub rating: u8,
    /// One of the manifest's intents.
    pub correct_intent: Option<String>,
    /// At most [`MAX_COMMENT_CHARS`]; stored, never logged.
    pub comment: Option<String>,
}

impl Feedback {
    /// Parse and check a feedback body against `manifest`: `rating` an integer 1 – 5,
    /// `correct_intent` one of the manifest's intent ids, `comment` at most
    /// [`MAX_COMMENT_CHARS`] characters without control characters other than newline and tab.
    pub fn parse(body: &[u8], manifest: &Manifest) -> Result<Feedback, FieldError> {
        if body.len() > MAX_FEEDBACK_BYTES {
            return Err(bad("body", format!("at most {MAX_FEEDBACK_BYTES} bytes, got {}", body.len())));
        }
        let raw: FeedbackBody = serde_json::from_slice(body).map_err(|e| {
            let msg = e.to_string();
            if msg.contains("missing field `rating`") {
                bad("rating", "required: an integer from 1 to 5")
            } else if msg.contains("unknown field") {
                bad("body", "only rating, correct_intent and comment are accepted")
            } else {
                // serde's message can quote caller text: give only the position.
                bad(
                    "body",
                    format!(
                        "must be a JSON object with an integer rating and string correct_intent / comment (at line {} column {})",
                        e.line(),
                        e.column()
                    ),
                )
            }
        })?;
        let rating =
            raw.rating.as_u64().filter(|r| (1..=5).contains(r)).ok_or_else(|| {
                bad("rating", format!("must be an integer from 1 to 5, got {}", describe(&raw.rating)))
            })? as u8;
        if let Some(intent) = &raw.correct_intent {
            if manifest.intent(intent).is_none() {
                let known: Vec<&str> = manifest.intents.iter().map(|i| i.id.as_str()).collect();
                // The value itself is caller text: name the rule, not the value.
                return Err(bad(
                    "correct_intent",
                    format!("must be one of the manifest's intents: {}", known.join(", ")),
                ));
            }
        }
        if let Some(comment) = &raw.comment {
            let chars = comment.chars().count();
            if chars > MAX_COMMENT_CHARS {
                return Err(bad("comment", format!("at most {MAX_COMMENT_CHARS} characters, got {chars}")));
            }
            if comment.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
                return Err(bad("comment", "must not contain control characters other than newline and tab"));
            }
        }
        Ok(Feedback { rating, correct_intent: raw.correct_intent, comment: raw.comment })
    }

    /// Apply to a signal: the rating becomes `user_satisfaction`, and a `correct_intent` that
    /// differs from the routed one counts as a re-route (the routing was wrong).
    pub fn apply(&self, signal: &mut RoutingTrainingSignal) {
        signal.user_satisfaction = Some(f64::from(self.rating));
        if let Some(intent) = &self.correct_intent {
            if *intent != signal.intent {
                signal.was_rerouted = true;
            }
        }
    }
}

/// Which records an export keeps, and how many.
#[derive(Debug, Clone, Default)]
pub struct ExportFilter {
    /// Only records at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only records with at least this reward.
    pub min_reward: Option<f64>,
}

impl ExportFilter {
    /// Whether `record` passes.
    pub fn keeps(&self, record: &SignalRecord) -> bool {
        self.since.is_none_or(|s| record.recorded_at >= s) && self.min_reward.is_none_or(|m| record.reward >= m)
    }

    /// The kept records, newest first (ties by signal id, so the order is stable).
    pub fn apply(&self, records: impl IntoIterator<Item = SignalRecord>) -> Vec<SignalRecord> {
        let mut kept: Vec<SignalRecord> = records.into_iter().filter(|r| self.keeps(r)).collect();
        kept.sort_by(|a, b| {
            b.recorded_at.cmp(&a.recorded_at).then_with(|| a.signal.signal_id.cmp(&b.signal.signal_id))
        });
        kept
    }
}

/// Parse `--min-reward`: a number in [0, 1].
pub fn parse_min_reward(text: &str) -> Result<f64, FieldError> {
    let value: f64 = text.trim().parse().map_err(|_| bad("min-reward", "must be a number from 0 to 1"))?;
    if !(0.0..=1.0).contains(&value) {
        return Err(bad("min-reward", format!("must be from 0 to 1, got {value}")));
    }
    Ok(value)
}

/// Parse `--since`: an RFC 3339 time.
pub fn parse_since(text: &str) -> Result<DateTime<Utc>, FieldError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| bad("since", format!("must be an RFC 3339 time such as 2026-11-22T20:00:00Z ({e})")))
}

/// Read exported JSON lines; blank lines are skipped, a bad line is refused with its number.
pub fn read_jsonl(text: &str) -> Result<Vec<SignalRecord>, FieldError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: SignalRecord = serde_json::from_str(line)
            .map_err(|e| bad("signals", format!("line {} is not an exported signal: {e}", n + 1)))?;
        out.push(record);
    }
    Ok(out)
}

/// A pending request to optimize routing or an agent (E2I `request_optimization`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptimizationRequest {
    /// `router` or an agent id.
    pub target: String,
    /// Mean reward over the window.
    pub mean_reward: f64,
    /// The manifest's threshold it fell below.
    pub threshold: f64,
    /// Signals in the window.
    pub signals: usize,
    /// Always `pending` when raised.
    pub status: String,
}

/// Optimization requests for the newest `window` records: one for `router` when the mean
/// reward of all of them is below `threshold`, and one per agent whose mean over the records
/// that selected it is below `threshold`. Needs at least `min_signals` records per target.
pub fn optimization_requests(
    records: &[SignalRecord],
    window: usize,
    threshold: f64,
    min_signals: usize,
) -> Vec<OptimizationRequest> {
    let mut newest: Vec<&SignalRecord> = records.iter().collect();
    newest.sort_by(|a, b| b.recorded_at.cmp(&a.recorded_at));
    newest.truncate(window);
    let mut out = Vec::new();
    let mut push = |target: String, rewards: Vec<f64>| {
        if rewards.len() >= min_signals.max(1) {
            let mean = rewards.iter().sum::<f64>() / rewards.len() as f64;
            if mean < threshold {
                out.push(OptimizationRequest {
                    target,
                    mean_reward: mean,
                    threshold,
                    signals: rewards.len(),
                    status: "pending".into(),
                });
            }
        }
    };
    push("router".into(), newest.iter().map(|r| r.reward).collect());
    let mut agents: Vec<&str> =
        newest.iter().flat_map(|r| r.signal.agents_selected.iter().map(String::as_str)).collect();
    agents.sort_unstable();
    agents.dedup();
    for agent in agents {
        let rewards =
            newest.iter().filter(|r| r.signal.agents_selected.iter().any(|a| a == agent)).map(|r| r.reward).collect();
        push(agent.to_string(), rewards);
    }
    out
}

#[cfg(test)]
mod tests;
