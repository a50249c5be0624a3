//! Routing training signals as they are kept and exported: the signal on a query's record,
//! the caller's feedback on it, and the exported record with its reward.

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
/// width, so text order is time order) and its query id. Cursors of [`super::SignalPage`]
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

/// The training signal kept on a query's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSignal {
    /// The signal as routing and synthesis left it (feedback is kept apart, so a second
    /// feedback replaces the first instead of adding to it).
    pub signal: RoutingTrainingSignal,
    /// When the router recorded it.
    pub recorded_at: DateTime<Utc>,
    /// When the synthesizer added the outcome; until then the signal is not exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_at: Option<DateTime<Utc>>,
    /// The caller's latest feedback (its comment is stored, never logged nor exported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
    /// When that feedback arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_at: Option<DateTime<Utc>>,
}

impl StoredSignal {
    /// Whether the outcome is in (the signal is complete enough to learn from).
    pub fn finished(&self) -> bool {
        self.outcome_at.is_some()
    }

    /// The exported form: the feedback applied, the reward computed.
    pub fn record(&self) -> SignalRecord {
        let mut signal = self.signal.clone();
        if let Some(feedback) = &self.feedback {
            feedback.apply(&mut signal);
        }
        SignalRecord::new(signal, self.feedback.as_ref().and_then(|f| f.correct_intent.clone()), self.recorded_at)
    }
}
