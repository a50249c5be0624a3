//! Learning from traffic: the exported form of a routing training signal, the feedback a caller
//! may attach to a query, the export filter, optimization requests, and the re-fit of
//! `routing.yaml` from signals ([`refit`]). Everything here is pure (no store, no clock); the
//! rules are written down in `docs/routing.md#training-signal`.

pub mod collect;
pub mod refit;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
pub use switchyard_model::records::{
    sort_key, sort_key_time, Feedback, FieldError, SignalRecord, MAX_COMMENT_CHARS, MAX_FEEDBACK_BYTES,
};

fn bad(field: &'static str, rule: impl Into<String>) -> FieldError {
    FieldError { field, rule: rule.into() }
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
