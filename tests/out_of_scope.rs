//! Out-of-scope questions end early and politely, through the whole embedded engine; the
//! answer's confidence takes the router's into account.
//!
//! The figures on the fixture sets are printed tuned and blind side by side (see
//! `scope_accuracy.rs` for how each set was written and used).

use serde_json::json;
use std::time::Duration;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::synth::routed_confidence;
use switchyard_model::contracts::{ConfidenceBand, ErrorCategory, OrchestratorOutput, OutputStatus};
use switchyard_tests::*;

const WEATHER: &str = "What's the weather in Paris tomorrow?";

async fn ask_as(h: &Harness, question: &str, roles: &str) -> OrchestratorOutput {
    let response = h.post(question, "analyst-1", roles).await;
    assert_eq!(response.status_code, 202, "{question}: {}", text_body(&response));
    let id = json_body(&response)["query_id"].as_str().expect("query id").to_string();
    h.output(&id).await
}

fn assert_out_of_scope(output: &OrchestratorOutput, manifest: &switchyard_model::manifest::Manifest) {
    assert_eq!(output.status, OutputStatus::Failed, "{output:#?}");
    assert_eq!(output.final_reason, Some(ConfidenceBand::OutOfScope));
    assert_eq!(output.error.as_ref().map(|e| e.category), Some(ErrorCategory::OutOfScope));
    assert!(output.agents_dispatched.is_empty() && output.agent_results.is_empty(), "no agent ran");
    assert_eq!(output.response_confidence, 0.0);
    for intent in &manifest.intents {
        assert!(output.response_text.contains(intent.description.trim()), "{}", output.response_text);
    }
}

#[tokio::test(start_paused = true)]
async fn the_weather_in_paris_ends_out_of_scope_with_what_the_assistant_can_do_whatever_the_roles() {
    // GIVEN the shipped manifest
    let manifest = shipped_manifest();
    let h = Harness::start(manifest.clone());
    for roles in ["", "analyst", "ml_engineer admin"] {
        // WHEN a caller with these roles asks about the weather
        let output = ask_as(&h, WEATHER, roles).await;
        // THEN it ends out of scope, listing what the assistant can help with
        assert_out_of_scope(&output, &manifest);
        let json = serde_json::to_value(&output).expect("serializes");
        assert_eq!(json["final_reason"], "out_of_scope");
        assert_eq!(json["status"], "failed");
    }
}

#[tokio::test(start_paused = true)]
async fn a_joke_is_not_forbidden_for_lack_of_a_role_it_is_out_of_scope() {
    let manifest = shipped_manifest();
    let h = Harness::start(manifest.clone());
    // No role check for a question no intent covers: 202, not 403.
    let output = ask_as(&h, "Tell me a joke about accountants", "").await;
    assert_out_of_scope(&output, &manifest);
    // An in-scope question still needs its intent's role.
    let refused = h.post("Retrain the churn model on the latest data", "analyst-1", "").await;
    assert_eq!(refused.status_code, 403, "{}", text_body(&refused));
}

#[tokio::test(start_paused = true)]
async fn the_route_event_records_the_scope_check_and_the_plan_has_no_dispatch() {
    let h = Harness::start(shipped_manifest());
    let response = h.post("asdfghjkl qwerty", "analyst-1", "").await;
    let id = json_body(&response)["query_id"].as_str().expect("id").to_string();
    h.output(&id).await;
    let query = h.system.deps.store.get_query(&id).await.expect("store").expect("query");
    let scope = query.scope.expect("scope recorded");
    assert!(scope.is_out_of_scope() && scope.score == 0.0, "{scope:?}");
    assert!(query.plan.expect("plan").stages.is_empty());
    let events = h.system.deps.store.list_events(&id).await.expect("events");
    assert!(!events.iter().any(|e| e.kind == switchyard_engine::ports::EventKind::Dispatch), "no dispatch event");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(h.leftover_messages().await.iter().all(|(q, _)| q == "synth"), "nothing waits on a tier queue");
}

#[tokio::test(start_paused = true)]
async fn a_pre_parsed_query_carries_the_callers_classification_and_no_scope_check() {
    let h = Harness::start(shipped_manifest());
    let body = json!({"parsed_query": {
        "query_id": uuid::Uuid::new_v4().to_string(), "raw_query": WEATHER, "intent": "explanation",
        "confidence": 0.2, "timestamp": "2025-12-08T10:00:00Z"}})
    .to_string();
    let response =
        handle_http(&h.system.deps, api_request("POST", "/v1/queries", "", Some(&body), "analyst-1", "")).await;
    assert_eq!(response.status_code, 202, "{}", text_body(&response));
    let id = json_body(&response)["query_id"].as_str().expect("id").to_string();
    let output = h.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    // The explainer answers at 0.8, but a router 0.2 sure bounds it: sqrt(0.8 * 0.2) = 0.4.
    assert_eq!(output.response_confidence, 0.4);
    assert_eq!(output.final_reason, Some(ConfidenceBand::ConfidenceTooLowClarify));
}

#[test]
fn the_response_confidence_is_no_surer_than_the_router_allows() {
    assert_eq!(routed_confidence(0.8, 1.0), 0.8);
    assert_eq!(routed_confidence(0.8, 0.8), 0.8);
    assert_eq!(routed_confidence(0.8, 0.0), 0.0);
    assert!((routed_confidence(0.9, 0.4) - 0.6).abs() < 1e-12);
    // A fallback answer to a question the router did not understand is never high.
    assert!(routed_confidence(1.0, 0.5) < switchyard_engine::synth::BAND_HIGH);
    // Out-of-range inputs are clamped, never NaN.
    assert_eq!(routed_confidence(2.0, -1.0), 0.0);
}

/// Share of `files`' questions whose query ends `out_of_scope`, through the engine.
async fn out_of_scope_share(h: &Harness, files: &[&str]) -> (usize, usize) {
    let mut n = 0;
    let mut out = 0;
    for f in files {
        for line in fixture_text(&format!("{f}")).lines().filter(|l| !l.trim().is_empty()) {
            let q: serde_json::Value = serde_json::from_str(line).expect("fixture line");
            let output = ask_as(h, q["query"].as_str().expect("query"), "ml_engineer").await;
            n += 1;
            out += usize::from(output.final_reason == Some(ConfidenceBand::OutOfScope));
        }
    }
    (out, n)
}

#[tokio::test(start_paused = true)]
async fn through_the_engine_the_blind_out_of_scope_set_ends_out_of_scope_and_the_in_scope_sets_do_not() {
    let h = Harness::start(shipped_manifest());
    // The sets of scope_accuracy.rs (`scope_sets`): tuned on (the earlier blind sets too), and blind.
    let tuned_out = out_of_scope_share(&h, &scope_sets::TUNED_OUT).await;
    let blind_out = out_of_scope_share(&h, &scope_sets::BLIND_OUT).await;
    let tuned_in = out_of_scope_share(&h, &scope_sets::TUNED_IN).await;
    let blind_in = out_of_scope_share(&h, &scope_sets::BLIND_IN).await;
    let pct = |(a, b): (usize, usize)| 100.0 * a as f64 / b as f64;
    println!("ended out_of_scope              tuned            blind");
    println!(
        "out-of-scope sets    {:>4}/{:<4} {:>5.1}%  {:>4}/{:<4} {:>5.1}%",
        tuned_out.0,
        tuned_out.1,
        pct(tuned_out),
        blind_out.0,
        blind_out.1,
        pct(blind_out)
    );
    println!(
        "in-scope sets        {:>4}/{:<4} {:>5.1}%  {:>4}/{:<4} {:>5.1}%",
        tuned_in.0,
        tuned_in.1,
        pct(tuned_in),
        blind_in.0,
        blind_in.1,
        pct(blind_in)
    );
    // The tuned sets hold issue 18's bars (90 % and 2 %), and so does the eleventh pair, blind
    // (written by an independent writer, scored once before the classifier was tuned further; docs/scope.md):
    // 97.2 % rejected, 70 of 72, and 1.4 % of in-scope questions, 2 of 144, ended out of scope.
    assert!(pct(tuned_out) >= 90.0, "tuned out-of-scope sets: {tuned_out:?}");
    assert!(pct(tuned_in) <= 2.0, "tuned in-scope sets ended out of scope: {tuned_in:?}");
    assert!(pct(blind_out) >= 90.0, "blind out-of-scope set: {blind_out:?}");
    assert!(pct(blind_in) <= 2.0, "blind in-scope questions ended out of scope: {blind_in:?}");
}
