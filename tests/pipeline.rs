//! The pipeline end to end on the embedded default, through the function handlers: intake's
//! HTTP handler, the router / worker / synthesizer SQS handlers fed by the local pollers.
//! Every test runs in virtual time (`start_paused`), so timeouts, backoffs and deadlines take
//! no wall time and are exact.

use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use switchyard_agents::ManifestAgents;
use switchyard_engine::handlers::{handle_http, handle_sqs, Function};
use switchyard_engine::memory::{MemoryQueue, MemoryStore};
use switchyard_engine::ports::{EventKind, TokioClock};
use switchyard_engine::Deps;
use switchyard_engine::Embedded;
use switchyard_model::contracts::{ConfidenceBand, ErrorCategory, HandoffStatus, OrchestratorOutput, OutputStatus};
use switchyard_model::jobs::{Job, JobMessage};
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::Topology;
use switchyard_testkit::faults::{FaultyQueue, QueueFaults};
use switchyard_tests::*;

fn scripted() -> Manifest {
    manifest_fixture("manifests/scripted.yaml")
}

fn result<'a>(output: &'a OrchestratorOutput, agent: &str) -> &'a switchyard_model::contracts::AgentResult {
    output
        .agent_results
        .iter()
        .find(|r| r.agent_id == agent)
        .unwrap_or_else(|| panic!("no result for {agent}: {output:#?}"))
}

async fn events_of(h: &Harness, query_id: &str) -> Vec<switchyard_engine::ports::Event> {
    h.system.deps.store.list_events(query_id).await.expect("events")
}

// ---- the shipped manifest ------------------------------------------------------------------

/// The E2I design's routing table: intent → (primary, tier, supporting) and a question of that intent.
const SEED_000_ROUTES: [(&str, &str, &[&str], &str); 12] = [
    (
        "causal_impact",
        "causal_impact",
        &["explainer"],
        "What was the impact of the new speaker program on Kisqali prescriptions?",
    ),
    (
        "gap_analysis",
        "gap_analyzer",
        &["resource_optimizer"],
        "Where are our biggest untapped opportunities in the Midwest?",
    ),
    (
        "heterogeneous",
        "heterogeneous_optimizer",
        &["prediction_synthesizer"],
        "Which HCP segments respond best to digital outreach?",
    ),
    ("experiment_design", "experiment_designer", &["causal_impact"], "Design an A/B test for the new email cadence"),
    (
        "prediction",
        "prediction_synthesizer",
        &["explainer", "model_deployer"],
        "Forecast Fabhalta TRx for next quarter",
    ),
    ("explanation", "explainer", &[], "Can you explain what this confidence interval means?"),
    (
        "health_check",
        "health_score",
        &["drift_monitor", "observability_connector"],
        "Is the platform healthy? Are all agents up and running?",
    ),
    (
        "drift_check",
        "drift_monitor",
        &["health_score", "data_preparer"],
        "Has the propensity model drifted since last month?",
    ),
    (
        "resource_optimize",
        "resource_optimizer",
        &["gap_analyzer"],
        "How should we reallocate the field budget across regions?",
    ),
    (
        "ml_training",
        "scope_definer",
        &["data_preparer", "model_selector", "model_trainer"],
        "Train a new conversion model for Fabhalta",
    ),
    (
        "feature_analysis",
        "feature_analyzer",
        &["explainer"],
        "Which features matter most in the churn model? Show SHAP values",
    ),
    ("model_deploy", "model_deployer", &["model_trainer"], "Deploy the retrained propensity model to production"),
];

#[tokio::test(start_paused = true)]
async fn every_intent_of_the_shipped_manifest_answers_through_its_seed_000_route() {
    let manifest = shipped_manifest();
    let h = Harness::start(manifest.clone());
    for (intent, primary, supporting, question) in SEED_000_ROUTES {
        let response = h.post(question, "analyst-1", "ml_engineer").await;
        assert_eq!(response.status_code, 202, "{question}: {}", text_body(&response));
        let id = json_body(&response)["query_id"].as_str().expect("id").to_string();
        let output = h.output(&id).await;
        assert_eq!(output.intent, intent, "{question}");
        assert_eq!(output.status, OutputStatus::Success, "{intent}: {output:#?}");
        let mut expected = vec![primary];
        expected.extend_from_slice(supporting);
        assert_eq!(output.agents_dispatched, expected, "{intent}");
        for r in &output.agent_results {
            let tier = manifest.agent(&r.agent_id).expect("agent").tier;
            assert_eq!(r.agent_tier, tier, "{intent}: {} ran on the wrong tier", r.agent_id);
            assert_eq!(r.status, HandoffStatus::Success);
        }
        assert!(!output.response_text.is_empty() && !output.citations.is_empty(), "{intent}: answer and citations");
        assert_eq!(output.final_reason, Some(ConfidenceBand::ConfidenceHigh), "{intent}");
    }
    assert_eq!(
        h.leftover_messages().await.iter().filter(|(q, _)| q != "synth").count(),
        0,
        "only pending deadlines may remain"
    );
}

#[tokio::test(start_paused = true)]
async fn a_dispatch_carries_the_seed_000_fields_priority_timeout_retries_fallback_and_correlation_id() {
    let h = Harness::start(shipped_manifest());
    let output = h.ask("What was the impact of the new speaker program on Kisqali prescriptions?").await;
    let query = h.system.deps.store.get_query(&output.query_id).await.expect("store").expect("query");
    let plan = query.plan.expect("plan");
    let primary = &plan.stages[0].dispatches[0].dispatch;
    assert_eq!((primary.target_agent.as_str(), primary.target_tier), ("causal_impact", 2));
    assert_eq!(primary.routing.priority, 1);
    assert_eq!(primary.routing.timeout_ms, 120_000);
    assert_eq!(primary.routing.retry_count, 2);
    assert_eq!(primary.routing.fallback_agent.as_deref(), Some("explainer"));
    assert_eq!(primary.payload.constraints.required_confidence, 0.8);
    assert_eq!(primary.metadata.correlation_id, output.query_id);
    assert!(uuid::Uuid::parse_str(&primary.dispatch_id).is_ok());
}

// ---- failure handling ----------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_flaky_agent_is_retried_with_growing_backoff_until_it_answers() {
    let h = Harness::start(scripted());
    let output = h.ask("bravo flaky question").await;
    assert_eq!(output.status, OutputStatus::Success);
    assert_eq!(result(&output, "flaky").attempts, 3);
    let retries: Vec<Value> = events_of(&h, &output.query_id)
        .await
        .into_iter()
        .filter(|e| e.kind == EventKind::Retry)
        .map(|e| Value::clone(&e.detail))
        .collect();
    assert_eq!(retries.len(), 2);
    let delays: Vec<u64> = retries.iter().map(|r| r["delay_ms"].as_u64().expect("delay")).collect();
    assert!((50..=100).contains(&delays[0]) && (100..=200).contains(&delays[1]), "exponential with jitter: {delays:?}");
}

#[tokio::test(start_paused = true)]
async fn exhausted_retries_hand_over_to_the_fallback_agent_once() {
    let h = Harness::start(scripted());
    let output = h.ask("charlie broken question").await;
    let broken = result(&output, "broken");
    assert_eq!((broken.status, broken.attempts), (HandoffStatus::Failed, 3));
    assert_eq!(broken.error.as_deref(), Some("upstream model unavailable"));
    let rescuer = result(&output, "rescuer");
    assert_eq!((rescuer.status, rescuer.fallback_for.as_deref()), (HandoffStatus::Success, Some("broken")));
    assert_eq!(output.status, OutputStatus::Success);
    assert!(
        output.caveats.iter().any(|c| c.contains("broken failed") && c.contains("rescuer answered in its place")),
        "{:?}",
        output.caveats
    );
    let fallbacks = events_of(&h, &output.query_id).await.into_iter().filter(|e| e.kind == EventKind::Fallback).count();
    assert_eq!(fallbacks, 1);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_retried_with_an_extended_timeout_and_then_falls_back() {
    let h = Harness::start(scripted());
    let output = h.ask("delta sleepy question").await;
    let sleepy = result(&output, "sleepy");
    assert_eq!((sleepy.status, sleepy.attempts), (HandoffStatus::Timeout, 2));
    let retry =
        events_of(&h, &output.query_id).await.into_iter().find(|e| e.kind == EventKind::Retry).expect("retry event");
    assert_eq!(retry.detail["error_type"], "agent_timeout");
    assert_eq!(retry.detail["timeout_ms"], 2_000, "1 s tier timeout extended ×2");
    assert_eq!(result(&output, "rescuer").status, HandoffStatus::Success);
    assert_eq!(output.status, OutputStatus::Success);
}

#[tokio::test(start_paused = true)]
async fn a_tier_0_failure_fails_the_query_and_no_fallback_is_dispatched() {
    let h = Harness::start(scripted());
    let output = h.ask("kilo tier zero question").await;
    assert_eq!(output.status, OutputStatus::Failed);
    assert_eq!(output.agents_dispatched, ["scoper", "trainer_broken"]);
    assert_eq!(result(&output, "trainer_broken").attempts, 2, "tier 0 allows one retry");
    assert_eq!(output.error.as_ref().map(|e| e.category), Some(ErrorCategory::AgentError));
    assert!(output.response_text.contains("GPU quota exceeded"), "{}", output.response_text);
}

#[tokio::test(start_paused = true)]
async fn when_some_agents_fail_the_answer_is_partial_with_caveats_naming_them() {
    let h = Harness::start(scripted());
    let output = h.ask("echo mixed question").await;
    assert_eq!(output.status, OutputStatus::Partial);
    assert_eq!(result(&output, "steady").status, HandoffStatus::Success);
    let hopeless = result(&output, "hopeless");
    assert_eq!(
        (hopeless.status, hopeless.attempts),
        (HandoffStatus::Partial, 1),
        "not recoverable: no retry, template answer"
    );
    assert!(
        output.caveats.iter().any(|c| c.contains("hopeless did not answer (cannot explain)")),
        "{:?}",
        output.caveats
    );
    assert!(output.response_text.contains("No explanation is available right now."));
}

#[tokio::test(start_paused = true)]
async fn a_malformed_answer_is_a_failed_attempt_with_the_raw_text_in_its_error() {
    let h = Harness::start(scripted());
    let output = h.ask("golf garbled question").await;
    let events = events_of(&h, &output.query_id).await;
    let retry = events.iter().find(|e| e.kind == EventKind::Retry).expect("retried");
    assert_eq!(retry.detail["error_type"], "malformed_handoff");
    assert!(retry.detail["error"].as_str().expect("error").contains("Sure! Here is my answer"));
    assert_eq!(output.status, OutputStatus::Partial, "template stands in: {output:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_pipeline_runs_its_steps_in_order_passing_each_output_to_the_next() {
    let h = Harness::start(scripted());
    let output = h.ask("india training question").await;
    assert_eq!(output.status, OutputStatus::Success);
    assert_eq!(output.agents_dispatched, ["scoper", "preparer_ok", "trainer"]);
    let query = h.system.deps.store.get_query(&output.query_id).await.expect("store").expect("query");
    let trainer = &query.plan.expect("plan").stages[2].dispatches[0].dispatch;
    assert_eq!(trainer.payload.context["previous"]["qc_report"]["passed"], true);
    let gate =
        events_of(&h, &output.query_id).await.into_iter().find(|e| e.kind == EventKind::Gate).expect("gate event");
    assert_eq!(gate.detail["passed"], true);
}

#[tokio::test(start_paused = true)]
async fn a_failed_qc_gate_blocks_the_pipeline_and_returns_the_qc_report() {
    let h = Harness::start(scripted());
    let output = h.ask("juliet quality question").await;
    assert_eq!(output.status, OutputStatus::Blocked);
    assert_eq!(output.agents_dispatched, ["scoper", "preparer_bad"], "the trainer never runs");
    assert_eq!(output.error.as_ref().map(|e| e.category), Some(ErrorCategory::QcGateBlocked));
    let report = output.qc_report.expect("qc report");
    assert_eq!(report["gate"], "data_qc");
    assert_eq!(report["report"]["expectations_met"], 0.61);
    assert_eq!(report["report"]["failed_expectations"], json!(["no_nulls_in_target"]));
}

#[tokio::test(start_paused = true)]
async fn a_hanging_agent_is_ended_by_the_deadline_as_partial_and_its_late_answer_changes_nothing() {
    let h = Harness::start(scripted());
    let response = h.post("hotel hanging question", "analyst-1", "").await;
    let id = json_body(&response)["query_id"].as_str().expect("id").to_string();
    let output = h.output(&id).await;
    assert_eq!(output.status, OutputStatus::Partial);
    assert!(
        output.total_latency_ms >= 5_000 && output.total_latency_ms <= 6_000,
        "deadline 5 s + 1 s: {}",
        output.total_latency_ms
    );
    assert_eq!(result(&output, "hanging").status, HandoffStatus::Timeout);
    assert_eq!(result(&output, "steady").status, HandoffStatus::Success);
    assert!(output.caveats.iter().any(|c| c.contains("deadline")), "{:?}", output.caveats);
    // The hanging agent's worker times out at 60 s and retries; nothing it does changes the answer.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let after = h.system.deps.store.get_output(&id).await.expect("store").expect("output");
    assert_eq!(*after, output);
    let handoffs = h.system.deps.store.list_handoffs(&id).await.expect("store");
    assert_eq!(handoffs.iter().filter(|r| r.handoff.agent_id == "hanging").count(), 1);
}

#[tokio::test(start_paused = true)]
async fn confidence_bands_follow_seed_001_at_085_075_060_and_040() {
    let h = Harness::start(scripted());
    for (question, band, caveat) in [
        ("lima band question", ConfidenceBand::ConfidenceHigh, None),
        ("mike band question", ConfidenceBand::ConfidenceMediumCaveated, Some("Moderate confidence (0.75)")),
        ("november band question", ConfidenceBand::ConfidenceLowPartial, Some("Limited confidence (0.60)")),
        ("oscar band question", ConfidenceBand::ConfidenceTooLowClarify, Some("Could you clarify")),
    ] {
        let output = h.ask(question).await;
        assert_eq!(output.final_reason, Some(band), "{question}");
        match caveat {
            None => assert!(!output.caveats.iter().any(|c| c.contains("confidence (")), "{:?}", output.caveats),
            Some(text) => assert!(output.caveats.iter().any(|c| c.contains(text)), "{question}: {:?}", output.caveats),
        }
    }
}

// ---- at-least-once delivery ----------------------------------------------------------------

fn observed_system(manifest: Manifest, faults: QueueFaults, seed: u64) -> (Embedded, Arc<ObservedStore>) {
    let manifest = Arc::new(manifest);
    let clock = Arc::new(TokioClock::new());
    let topology = Topology::for_manifest(&manifest);
    let store = Arc::new(MemoryStore::new(clock.clone()));
    let observed = Arc::new(observed_store(store.clone()));
    let queue = Arc::new(MemoryQueue::new(&topology));
    let faulty = Arc::new(FaultyQueue::new(queue.clone(), faults, seed));
    let deps = Deps::new(manifest, observed.clone(), faulty, clock, Arc::new(ManifestAgents), Default::default())
        .with_seed(seed);
    (Embedded { deps: Arc::new(deps), store, queue, topology }, observed)
}

#[tokio::test(start_paused = true)]
async fn every_message_delivered_twice_still_gives_one_output_one_synthesis_and_one_handoff_per_dispatch() {
    let faults = QueueFaults { duplicate: 1.0, max_extra_delay: Duration::ZERO };
    let (system, observed) = observed_system(scripted(), faults, 7);
    let h = Harness::from_system(system);
    for question in
        ["alpha steady question", "echo mixed question", "charlie broken question", "india training question"]
    {
        let before = (
            observed.hooks().synth_claims.load(Ordering::SeqCst),
            observed.hooks().outputs_written.load(Ordering::SeqCst),
        );
        let output = h.ask(question).await;
        tokio::time::sleep(Duration::from_secs(5)).await; // let every duplicate arrive
        let after = (
            observed.hooks().synth_claims.load(Ordering::SeqCst),
            observed.hooks().outputs_written.load(Ordering::SeqCst),
        );
        assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1), "{question}: one synthesis, one output");
        let handoffs = h.system.deps.store.list_handoffs(&output.query_id).await.expect("store");
        let query = h.system.deps.store.get_query(&output.query_id).await.expect("store").expect("query");
        let dispatched = query.plan.expect("plan").all_dispatches().count();
        assert_eq!(handoffs.len(), dispatched, "{question}: one handoff per dispatch");
        assert_eq!(h.system.deps.store.get_output(&output.query_id).await.expect("store").as_deref(), Some(&output));
    }
}

#[tokio::test(start_paused = true)]
async fn reordered_and_delayed_messages_still_complete_every_query_exactly_once() {
    let faults = QueueFaults { duplicate: 0.3, max_extra_delay: Duration::from_secs(3) };
    let (system, observed) = observed_system(scripted(), faults, 11);
    let h = Harness::from_system(system);
    let questions = [
        "alpha steady question",
        "echo mixed question",
        "bravo flaky question",
        "india training question",
        "charlie broken question",
    ];
    let mut ids = Vec::new();
    for q in questions {
        let r = h.post(q, "analyst-1", "").await;
        ids.push(json_body(&r)["query_id"].as_str().expect("id").to_string());
    }
    for id in &ids {
        let output = h.output(id).await;
        assert!(matches!(output.status, OutputStatus::Success | OutputStatus::Partial), "{output:#?}");
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(observed.hooks().outputs_written.load(Ordering::SeqCst), ids.len() as u64);
    assert_eq!(observed.hooks().synth_claims.load(Ordering::SeqCst), ids.len() as u64);
}

// ---- the SQS handlers one record at a time -------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_malformed_record_is_the_only_batch_item_failure() {
    let system = switchyard_agents::embedded(Arc::new(scripted()), Default::default());
    let deps = &system.deps;
    // Record a real query without pollers, so the route jobs are handled only here.
    let r = handle_http(
        deps,
        api_request("POST", "/v1/queries", "", Some(r#"{"query":"alpha steady question"}"#), "u1", ""),
    )
    .await;
    let id = json_body(&r)["query_id"].as_str().expect("id").to_string();
    let good = JobMessage::new(Job::Route { query_id: id.clone() }).to_body();
    let unknown = JobMessage::new(Job::Route { query_id: uuid::Uuid::new_v4().to_string() }).to_body();
    let wrong_queue = JobMessage::new(Job::Synthesize { query_id: id.clone() }).to_body();
    let event = sqs_event(&[&good, "{not json", &unknown, r#"{"v":9,"type":"route"}"#, &wrong_queue, &good]);
    let response = handle_sqs(deps, Function::Router, event).await.expect("batch handled");
    let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, ["MessageID_2", "MessageID_3", "MessageID_4", "MessageID_5"]);
    let query = deps.store.get_query(&id).await.expect("store").expect("query");
    assert_eq!(
        query.status,
        switchyard_engine::ports::QueryStatus::Routed,
        "the good record was processed (twice, idempotently)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_record_without_a_message_id_is_refused_rather_than_reported_under_an_empty_id() {
    let system = switchyard_agents::embedded(Arc::new(scripted()), Default::default());
    let mut event = sqs_event(&["{}"]);
    event.records[0].message_id = None;
    assert!(handle_sqs(&system.deps, Function::Synthesizer, event).await.is_err());
}

// ---- the HTTP API --------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn malformed_and_hostile_bodies_are_400s_that_name_the_field() {
    let system = switchyard_agents::embedded(Arc::new(scripted()), Default::default());
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let cases: [(&str, &str); 8] = [
        ("{not json", "body"),
        ("{}", "query"),
        (r#"{"query": ""}"#, "query"),
        (r#"{"query": 42}"#, "query"),
        (r#"{"query": "hi", "v2_query": "x"}"#, "v2_query"),
        (r#"{"query": "bell\u0007"}"#, "query"),
        (
            r#"{"parsed_query": {"query_id": "'; DROP TABLE queries; --", "raw_query": "x", "intent": "steady_q", "confidence": 0.9, "timestamp": "2025-12-08T10:00:00Z"}}"#,
            "parsed_query.query_id",
        ),
        (&deep, "body"),
    ];
    for (body, field) in cases {
        let response = handle_http(&system.deps, api_request("POST", "/v1/queries", "", Some(body), "u1", "")).await;
        assert_eq!(response.status_code, 400, "{body}");
        let details = json_body(&response)["error"]["details"].clone();
        let fields: Vec<String> = details
            .as_array()
            .expect("details")
            .iter()
            .map(|d| d["field"].as_str().unwrap_or("").to_string())
            .collect();
        assert!(fields.iter().any(|f| f.starts_with(field)), "{body}: expected {field} in {fields:?}");
    }
    let oversized = format!(r#"{{"query": "{}"}}"#, "a".repeat(70_000));
    let response = handle_http(&system.deps, api_request("POST", "/v1/queries", "", Some(&oversized), "u1", "")).await;
    assert_eq!(response.status_code, 400);
    assert_eq!(system.store.query_ids().len(), 0, "nothing was recorded");
}

#[tokio::test(start_paused = true)]
async fn intents_with_a_required_role_are_refused_without_it_and_callers_see_only_their_own_queries() {
    let h = Harness::start(scripted());
    let refused = h.post("papa guarded question", "u1", "").await;
    assert_eq!(refused.status_code, 403);
    assert_eq!(json_body(&refused)["error"]["code"], "forbidden");
    let accepted = h.post("papa guarded question", "u1", "admin").await;
    assert_eq!(accepted.status_code, 202);
    let id = json_body(&accepted)["query_id"].as_str().expect("id").to_string();
    h.output(&id).await;
    let mine = handle_http(&h.system.deps, api_request("GET", &format!("/v1/queries/{id}"), "", None, "u1", "")).await;
    assert_eq!(mine.status_code, 200);
    assert_eq!(json_body(&mine)["status"], "success");
    for (path, user) in [
        (format!("/v1/queries/{id}"), "u2"),
        (format!("/v1/queries/{id}/events"), "u2"),
        ("/v1/queries/not-a-uuid".to_string(), "u1"),
    ] {
        let r = handle_http(&h.system.deps, api_request("GET", &path, "", None, user, "")).await;
        assert_eq!(r.status_code, 404, "{path} as {user}");
    }
    let mut anonymous = api_request("GET", &format!("/v1/queries/{id}"), "", None, "u1", "");
    anonymous.request_context.authorizer = None;
    assert_eq!(handle_http(&h.system.deps, anonymous).await.status_code, 401);
}

#[tokio::test(start_paused = true)]
async fn wait_returns_the_output_and_the_event_log_replays_every_step_in_order() {
    let h = Harness::start(scripted());
    let body = json!({ "query": "charlie broken question" }).to_string();
    let r = handle_http(&h.system.deps, api_request("POST", "/v1/queries", "wait=10", Some(&body), "u1", "")).await;
    assert_eq!(r.status_code, 200, "{}", text_body(&r));
    let output: OrchestratorOutput = serde_json::from_value(json_body(&r)).expect("output");
    let too_long =
        handle_http(&h.system.deps, api_request("POST", "/v1/queries", "wait=60", Some(&body), "u1", "")).await;
    assert_eq!(
        (too_long.status_code, json_body(&too_long)["error"]["details"][0]["field"].clone()),
        (400, json!("wait"))
    );

    let r = handle_http(
        &h.system.deps,
        api_request("GET", &format!("/v1/queries/{}/events", output.query_id), "", None, "u1", ""),
    )
    .await;
    let kinds: Vec<String> = json_body(&r)["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or("").to_string())
        .collect();
    let first = |k: &str| kinds.iter().position(|x| x == k).unwrap_or_else(|| panic!("no {k} in {kinds:?}"));
    assert!(first("accepted") < first("route") && first("route") < first("plan") && first("plan") < first("dispatch"));
    assert!(
        first("retry") < first("fallback")
            && first("fallback") < first("synthesis")
            && first("synthesis") < first("final")
    );
    assert_eq!(kinds.last().map(String::as_str), Some("final"));

    let mut sse = api_request("GET", &format!("/v1/queries/{}/events", output.query_id), "", None, "u1", "");
    sse.headers.insert("accept", "text/event-stream".parse().expect("header"));
    let r = handle_http(&h.system.deps, sse).await;
    let text = text_body(&r);
    assert!(text.starts_with("id: ") && text.contains("\nevent: final\ndata: {"), "{text}");
}

// ---- init: each function builds only what it uses -----------------------------------------

/// Only intake classifies: the router, the workers and the synthesizer handle their jobs
/// without ever building the classifier, and intake builds it on its first question.
#[tokio::test(start_paused = true)]
async fn only_intake_builds_the_classifier_and_only_when_it_first_classifies() {
    let system = switchyard_agents::embedded(Arc::new(scripted()), Default::default());
    let deps = &system.deps;
    assert!(!deps.classifier_built(), "building the dependencies must not build the classifier");
    let route = JobMessage::new(Job::Route { query_id: uuid::Uuid::new_v4().to_string() }).to_body();
    let synth = JobMessage::new(Job::Synthesize { query_id: uuid::Uuid::new_v4().to_string() }).to_body();
    let _ = handle_sqs(deps, Function::Router, sqs_event(&[&route])).await;
    let _ = handle_sqs(deps, Function::Synthesizer, sqs_event(&[&synth])).await;
    assert!(!deps.classifier_built(), "the router and the synthesizer never classify");
    let r = handle_http(
        deps,
        api_request("POST", "/v1/queries", "", Some(r#"{"query":"alpha steady question"}"#), "u1", ""),
    )
    .await;
    assert!(json_body(&r)["query_id"].is_string(), "intake recorded the query");
    assert!(deps.classifier_built(), "intake built the classifier for its first question");
}
