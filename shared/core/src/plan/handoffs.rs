//! Reading handoffs: which one fills a slot, the text an agent answered with, and whether a
//! pipeline step's output passes its QC gate. Pure functions, shared by the engine's steps and
//! the orchestration modes.

use serde_json::{json, Value};
use std::sync::Arc;
use switchyard_model::contracts::{AgentHandoff, HandoffStatus};
use switchyard_model::manifest::Gate;
use switchyard_model::records::HandoffRecord;

/// The handoff that fills a slot: the first to complete. A slot can be filled twice — a
/// dispatch whose duplicate delivery crashed after handing over to its fallback may still
/// answer, and both it and the fallback fill the slot — so the choice must not depend on the
/// order handoffs are listed in (by random dispatch id): the earliest answer wins, the original
/// dispatch on a tie.
pub fn slot_handoff<'a>(handoffs: &'a [Arc<HandoffRecord>], slot: &str) -> Option<&'a HandoffRecord> {
    handoffs
        .iter()
        .filter(|h| h.slot.as_deref() == Some(slot))
        .min_by_key(|h| (h.handoff.execution.completed_at, h.fallback_for.is_some()))
        .map(Arc::as_ref)
}

/// Value at a dotted path (`qc_report.passed`).
pub fn value_at<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

/// Check a QC gate on a step's output: `Ok(())` to continue, `Err(report)` to block.
pub fn check_gate(gate: &Gate, handoff: &AgentHandoff) -> Result<(), Value> {
    let output = &handoff.result.primary_output;
    let report = || {
        let report =
            gate.report.as_deref().and_then(|p| value_at(output, p)).cloned().unwrap_or_else(|| output.clone());
        json!({ "gate": gate.name, "field": gate.field, "report": report })
    };
    if handoff.execution.status == HandoffStatus::Blocked {
        return Err(report());
    }
    let Some(value) = value_at(output, &gate.field) else { return Err(report()) };
    let passes = match (&gate.min, &gate.equals) {
        (Some(min), _) => value.as_f64().is_some_and(|v| v >= *min),
        (None, Some(expected)) => value == expected,
        (None, None) => value.as_bool().unwrap_or(false),
    };
    if passes {
        Ok(())
    } else {
        Err(report())
    }
}

/// The text an agent answered with: `primary_output.response`, else `summary`, else the
/// output as JSON.
pub fn answer_text(h: &AgentHandoff) -> String {
    let out = &h.result.primary_output;
    for key in ["response", "summary", "text", "answer"] {
        if let Some(s) = out.get(key).and_then(Value::as_str) {
            return s.to_string();
        }
    }
    match out {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
