//! The E2I design's contracts on the wire: its dispatch and handoff examples (as JSON fixture files
//! under `fixtures/contracts/`) parse into Switchyard's types, survive a round trip, and keep
//! every field the seed wrote.

use serde_json::Value;
use switchyard_model::contracts::{
    DispatchEnvelope, EntitySource, ErrorCategory, Evidence, HandoffEnvelope, HandoffStatus, OrchestratorInput,
    E2I_INTENTS,
};
use switchyard_tests::{fixture_text, shipped_manifest};

fn value(rel: &str) -> Value {
    serde_json::from_str(&fixture_text(rel)).expect("fixture is JSON")
}

/// Every key and value of `original` is present, equal, in `written` (which may add defaults).
fn assert_keeps(original: &Value, written: &Value, path: &str) {
    match (original, written) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let w = b.get(k).unwrap_or_else(|| panic!("{path}.{k} was dropped"));
                assert_keeps(v, w, &format!("{path}.{k}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: length");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_keeps(x, y, &format!("{path}[{i}]"));
            }
        }
        (a, b) => assert_eq!(a, b, "{path}"),
    }
}

fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug>(rel: &str) -> T {
    let original = value(rel);
    let parsed: T = serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let written = serde_json::to_value(&parsed).expect("serializes");
    assert_keeps(&original, &written, rel);
    let again: T = serde_json::from_value(written).expect("re-parses");
    assert_eq!(again, parsed, "{rel}: round trip changed the value");
    parsed
}

#[test]
fn the_seed_causal_impact_dispatch_round_trips_with_its_routing_and_defaults() {
    let d = round_trip::<DispatchEnvelope>("contracts/dispatch-causal-impact.json").dispatch;
    assert_eq!((d.target_agent.as_str(), d.target_tier), ("causal_impact", 2));
    assert_eq!(d.routing.fallback_agent.as_deref(), Some("explainer"));
    assert_eq!((d.routing.priority, d.routing.timeout_ms, d.routing.retry_count), (1, 120_000, 2));
    assert_eq!(d.payload.constraints.required_confidence, 0.8);
    let brand = &d.payload.entities[0];
    assert_eq!((brand.entity_type.as_str(), brand.value.as_str()), ("brand", "Kisqali"));
    assert_eq!((brand.confidence, brand.source), (1.0, EntitySource::Exact), "the seed's dispatch entities omit them");
}

#[test]
fn the_seed_tier_0_dispatch_has_no_fallback() {
    let d = round_trip::<DispatchEnvelope>("contracts/dispatch-ml-training.json").dispatch;
    assert_eq!((d.target_agent.as_str(), d.target_tier, d.routing.fallback_agent), ("scope_definer", 0, None));
    assert_eq!(d.payload.context["target_variable"], "converted_30d");
}

#[test]
fn the_seed_handoffs_round_trip_with_evidence_caveats_and_artifacts() {
    let h = round_trip::<HandoffEnvelope>("contracts/handoff-causal-impact.json").handoff;
    assert_eq!((h.execution.status, h.execution.latency_ms), (HandoffStatus::Success, 105_000));
    assert_eq!(h.result.confidence, 0.87);
    assert_eq!(h.result.evidence[0], Evidence::Text("Placebo test: effect near zero (0.002)".into()));
    assert_eq!(h.result.caveats, ["Effect strongest in oncology segment"]);
    assert_eq!(h.artifacts.visualizations.len(), 2);
    assert_eq!(h.errors.error_type, None, "errors default when the seed omits them");
    let t = round_trip::<HandoffEnvelope>("contracts/handoff-model-trainer.json").handoff;
    assert_eq!((t.agent_tier, t.result.primary_output["metrics"]["auc"].as_f64()), (0, Some(0.84)));
    assert_eq!(t.artifacts.models[0]["stage"], "Staging");
}

#[test]
fn a_parsed_query_and_orchestrator_input_round_trip_with_every_entity_source() {
    let input = round_trip::<OrchestratorInput>("contracts/orchestrator-input.json");
    let sources: Vec<EntitySource> = input.parsed_query.entities.iter().map(|e| e.source).collect();
    assert_eq!(sources, [EntitySource::Exact, EntitySource::Fuzzy, EntitySource::Inferred]);
    assert_eq!(input.parsed_query.intent, "causal_impact");
}

#[test]
fn handoff_statuses_include_timeout_and_blocked_and_refuse_anything_else() {
    for (wire, status) in
        [("timeout", HandoffStatus::Timeout), ("blocked", HandoffStatus::Blocked), ("partial", HandoffStatus::Partial)]
    {
        assert_eq!(serde_json::from_value::<HandoffStatus>(Value::String(wire.into())).ok(), Some(status));
    }
    assert!(serde_json::from_value::<HandoffStatus>(Value::String("exploded".into())).is_err());
}

#[test]
fn error_categories_have_the_seed_000_wire_names() {
    let names: Vec<Value> = [
        ErrorCategory::InvalidInput,
        ErrorCategory::RoutingFailed,
        ErrorCategory::AgentTimeout,
        ErrorCategory::AgentError,
        ErrorCategory::SynthesisFailed,
        ErrorCategory::QcGateBlocked,
    ]
    .iter()
    .map(|c| serde_json::to_value(c).expect("serializes"))
    .collect();
    let expected =
        ["invalid_input", "routing_failed", "agent_timeout", "agent_error", "synthesis_failed", "qc_gate_blocked"];
    assert_eq!(names, expected.map(|n| Value::String(n.into())));
}

#[test]
fn the_shipped_manifest_declares_exactly_seed_000s_twelve_intents() {
    let manifest = shipped_manifest();
    let ids: Vec<&str> = manifest.intents.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, E2I_INTENTS);
    let types: Vec<&str> = manifest.entities.keys().map(String::as_str).collect();
    assert_eq!(types, ["brand", "hcp_id", "kpi", "patient_id", "region", "time_period"], "the seed's six entity types");
}
