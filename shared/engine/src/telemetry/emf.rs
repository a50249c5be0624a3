//! CloudWatch embedded metric format (EMF): one JSON line on stdout per agent call, which
//! CloudWatch Logs turns into metrics without any API call from the function.
//!
//! Namespace `Switchyard`, dimensions `[agent]` and `[tier, outcome]`, metrics `latency_ms`
//! (Milliseconds), `attempts` and `tokens` (Count); the line also carries the query and
//! dispatch ids as plain properties (searchable in Logs Insights, not dimensions: ids would
//! make one metric per query). Written on Lambda (`AWS_LAMBDA_FUNCTION_NAME` is set) or when
//! `SWITCHYARD_EMF=1`; `SWITCHYARD_EMF=0` turns it off.

use serde_json::json;
use std::io::Write;
use std::sync::OnceLock;

/// The metrics namespace.
pub const NAMESPACE: &str = "Switchyard";

/// One agent call: a recorded handoff.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentCall<'a> {
    /// The query.
    pub query_id: &'a str,
    /// The dispatch.
    pub dispatch_id: &'a str,
    /// The agent that answered.
    pub agent: &'a str,
    /// Its tier.
    pub tier: u8,
    /// The handoff status (`success`, `partial`, `failed`, `timeout`).
    pub outcome: &'a str,
    /// Wall time of the call.
    pub latency_ms: u64,
    /// Attempts made.
    pub attempts: u32,
    /// Tokens in + out (0 for agents that use no model).
    pub tokens: u64,
    /// When, in epoch milliseconds.
    pub timestamp_ms: i64,
}

/// The EMF line for a call (no trailing newline).
pub fn line(call: &AgentCall<'_>) -> String {
    json!({
        "_aws": {
            "Timestamp": call.timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["agent"], ["tier", "outcome"]],
                "Metrics": [
                    { "Name": "latency_ms", "Unit": "Milliseconds" },
                    { "Name": "attempts", "Unit": "Count" },
                    { "Name": "tokens", "Unit": "Count" },
                ],
            }],
        },
        "agent": call.agent,
        "tier": call.tier.to_string(),
        "outcome": call.outcome,
        "latency_ms": call.latency_ms,
        "attempts": call.attempts,
        "tokens": call.tokens,
        "query_id": call.query_id,
        "dispatch_id": call.dispatch_id,
    })
    .to_string()
}

/// Whether this process writes EMF lines.
pub fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| {
        decide(std::env::var("SWITCHYARD_EMF").ok().as_deref(), std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some())
    })
}

fn decide(setting: Option<&str>, on_lambda: bool) -> bool {
    match setting.map(str::trim) {
        Some("1") | Some("true") => true,
        Some("0") | Some("false") => false,
        _ => on_lambda,
    }
}

/// Write the call's EMF line to stdout when [`enabled`].
pub fn emit(call: &AgentCall<'_>) {
    if enabled() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", line(call));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_call_is_one_emf_line_with_its_metrics_and_dimensions() {
        let call = AgentCall {
            query_id: "q-1",
            dispatch_id: "d-1",
            agent: "gap_analyzer",
            tier: 2,
            outcome: "success",
            latency_ms: 42,
            attempts: 2,
            tokens: 310,
            timestamp_ms: 1_790_000_000_123,
        };
        let text = line(&call);
        assert!(!text.contains('\n'), "one line");
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let directive = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(v["_aws"]["Timestamp"], 1_790_000_000_123_i64);
        assert_eq!(directive["Namespace"], "Switchyard");
        // Every dimension and metric named in the directive is a top-level member (EMF's rule).
        for dims in directive["Dimensions"].as_array().expect("dimensions") {
            for d in dims.as_array().expect("set") {
                assert!(v[d.as_str().expect("name")].is_string(), "dimension {d} is a string member");
            }
        }
        for m in directive["Metrics"].as_array().expect("metrics") {
            assert!(v[m["Name"].as_str().expect("name")].is_number(), "metric {m} is a number member");
        }
        assert_eq!(
            (v["latency_ms"].as_u64(), v["attempts"].as_u64(), v["tokens"].as_u64()),
            (Some(42), Some(2), Some(310))
        );
        assert_eq!(
            (v["agent"].as_str(), v["tier"].as_str(), v["outcome"].as_str()),
            (Some("gap_analyzer"), Some("2"), Some("success"))
        );
    }

    #[test]
    fn emf_is_on_in_lambda_unless_turned_off_and_off_elsewhere_unless_turned_on() {
        assert!(decide(None, true));
        assert!(!decide(None, false));
        assert!(decide(Some("1"), false));
        assert!(!decide(Some("0"), true));
        assert!(!decide(Some("false"), true));
        assert!(decide(Some("junk"), true), "an unreadable setting keeps the default");
    }
}
