//! The whole pipeline against the local SQS + DynamoDB endpoint, in real time: queries enter
//! through the intake handler, the router, workers and synthesizer are fed by pollers that
//! behave like Lambda's SQS event sources, and afterwards the records and queues are checked.
//! Fails (never skips) when the endpoint is missing: run through `scripts/test.sh`.

#[path = "support/approvals.rs"]
mod approvals;
#[path = "support/mcp_server.rs"]
mod mcp_server;

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use switchyard_aws::AwsSystem;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::ports::{EventKind, Queue};
use switchyard_engine::{pollers::start, pollers::PollerConfig};
use switchyard_engine::{Deps, EngineSettings};
use switchyard_model::contracts::{HandoffStatus, OutputStatus};
use switchyard_testkit::faults::{FaultyQueue, QueueFaults};
use switchyard_tests::endpoint;
use switchyard_tests::{api_request, json_body, manifest_fixture, text_body};

struct Setup {
    system: AwsSystem,
}

async fn setup() -> Setup {
    let manifest = Arc::new(manifest_fixture("manifests/e2e.yaml"));
    let config = endpoint::config().await;
    let urls = endpoint::resources(&manifest, &config).await;
    let system = AwsSystem::with_resources(manifest, EngineSettings::default(), &config, &urls.table, urls.queues);
    Setup { system }
}

fn pollers(deps: Arc<Deps>, system: &AwsSystem) -> switchyard_engine::pollers::Pollers {
    start(deps, &system.topology, PollerConfig { wait: Duration::from_secs(1), default_concurrency: 8 })
}

async fn submit(deps: &Deps, question: &str) -> String {
    let body = json!({ "query": question }).to_string();
    let response = handle_http(deps, api_request("POST", "/v1/queries", "", Some(&body), "e2e-user", "")).await;
    assert_eq!(response.status_code, 202, "{}", text_body(&response));
    json_body(&response)["query_id"].as_str().expect("query id").to_string()
}

async fn wait_output(deps: &Deps, id: &str) -> switchyard_model::contracts::OrchestratorOutput {
    for _ in 0..300 {
        if let Some(o) = deps.store.get_output(id).await.expect("store") {
            return Arc::unwrap_or_clone(o);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("query {id} did not finish within 30 s");
}

/// Wait until every queue (dead-letter queues included) is empty; fail with what is left.
async fn wait_drained(system: &AwsSystem, within: Duration) {
    let until = tokio::time::Instant::now() + within;
    loop {
        let mut left = Vec::new();
        for spec in &system.topology.queues {
            for id in [spec.id, spec.id.dlq()] {
                let d = system.queue.depth(id).await.expect("depth");
                if d.total() > 0 {
                    left.push(format!("{}: {d:?}", id.name()));
                }
            }
        }
        if left.is_empty() {
            return;
        }
        assert!(tokio::time::Instant::now() < until, "messages left on the queues: {left:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_completes_through_every_function_and_leaves_consistent_records_and_empty_queues() {
    let s = setup().await;
    let _p = pollers(s.system.deps.clone(), &s.system);
    let deps = &s.system.deps;
    let id = submit(deps, "delta quartet of agents").await;
    let output = wait_output(deps, &id).await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    assert_eq!(output.agents_dispatched, ["a1", "a2", "a3", "a4"]);
    // Records: one handoff per dispatch, one output, a complete event log.
    let query = deps.store.get_query(&id).await.expect("store").expect("query");
    let dispatches: Vec<String> =
        query.plan.expect("plan").all_dispatches().map(|d| d.dispatch.dispatch_id.clone()).collect();
    let handoffs = deps.store.list_handoffs(&id).await.expect("store");
    assert_eq!(handoffs.len(), dispatches.len());
    for d in &dispatches {
        assert_eq!(handoffs.iter().filter(|h| &h.handoff.dispatch_id == d).count(), 1, "one handoff for {d}");
    }
    let events = deps.store.list_events(&id).await.expect("store");
    for kind in [EventKind::Accepted, EventKind::Route, EventKind::Plan, EventKind::Synthesis, EventKind::Final] {
        assert_eq!(events.iter().filter(|e| e.kind == kind).count(), 1, "{kind:?}");
    }
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::Dispatch).count(), 4);
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::Handoff).count(), 4);
    // Queues: every message deleted once the deadline message has fired as a no-op; DLQs empty.
    wait_drained(&s.system, Duration::from_secs(15)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_turn_conversation_is_kept_in_dynamodb_with_ttl_and_resolves_the_follow_up() {
    let s = setup().await;
    let _p = pollers(s.system.deps.clone(), &s.system);
    let deps = &s.system.deps;
    let session = format!("conv-{}", uuid::Uuid::new_v4());
    let ask = |question: &'static str| {
        let body = json!({ "query": question, "session_id": session }).to_string();
        async move {
            let response = handle_http(deps, api_request("POST", "/v1/queries", "", Some(&body), "e2e-user", "")).await;
            assert_eq!(response.status_code, 202, "{}", text_body(&response));
            json_body(&response)["query_id"].as_str().expect("query id").to_string()
        }
    };
    let first = ask("delta quartet of agents").await;
    let first_out = wait_output(deps, &first).await;
    assert_eq!(first_out.session_id, session);
    let recorded = |id: String| {
        let session = session.clone();
        async move {
            for _ in 0..100 {
                let s = deps.store.get_session("e2e-user", &session).await.expect("store");
                if s.as_ref().is_some_and(|s| s.has_recorded(&id)) {
                    return s.expect("session");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("turn {id} was not recorded within 10 s");
        }
    };
    recorded(first.clone()).await;
    // The follow-up names only a period: it is resolved with the first turn.
    let second = ask("and in Q1?").await;
    let second_out = wait_output(deps, &second).await;
    assert_eq!(second_out.intent, first_out.intent, "{second_out:#?}");
    let events = deps.store.list_events(&second).await.expect("store");
    let context = events.iter().find(|e| e.kind == EventKind::Context).expect("a context event");
    assert_eq!(context.detail["turn"], json!(2));
    let stored = recorded(second.clone()).await;
    assert_eq!(stored.turn_count, 2);
    assert_eq!(stored.turns.iter().map(|t| t.query_id.clone()).collect::<Vec<_>>(), vec![first, second]);
    let now = chrono::Utc::now().timestamp();
    assert!(stored.expires_at > now + 3_600, "the session carries a TTL in the future: {}", stored.expires_at);
    // Another caller with the same id sees none of it.
    assert!(deps.store.get_session("e2e-other", &session).await.expect("store").is_none());
    wait_drained(&s.system, Duration::from_secs(15)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_agent_is_retried_then_its_fallback_answers_on_the_real_queues() {
    let s = setup().await;
    let _p = pollers(s.system.deps.clone(), &s.system);
    let deps = &s.system.deps;
    let id = submit(deps, "echo failing agent").await;
    let output = wait_output(deps, &id).await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    let broken = output.agent_results.iter().find(|r| r.agent_id == "broken").expect("broken");
    assert_eq!((broken.status, broken.attempts), (HandoffStatus::Failed, 2));
    let rescuer = output.agent_results.iter().find(|r| r.agent_id == "rescuer").expect("rescuer");
    assert_eq!(rescuer.fallback_for.as_deref(), Some("broken"));
    wait_drained(&s.system, Duration::from_secs(15)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_agent_is_ended_by_the_deadline_as_partial_on_the_real_queues() {
    let s = setup().await;
    let _p = pollers(s.system.deps.clone(), &s.system);
    let deps = &s.system.deps;
    let id = submit(deps, "foxtrot hanging agent").await;
    let output = wait_output(deps, &id).await;
    assert_eq!(output.status, OutputStatus::Partial, "{output:#?}");
    assert!(
        output.total_latency_ms >= 3_000 && output.total_latency_ms < 3_000 + 2_500,
        "deadline 3 s: {}",
        output.total_latency_ms
    );
    let hanging = output.agent_results.iter().find(|r| r.agent_id == "hanging").expect("hanging");
    assert_eq!(hanging.status, HandoffStatus::Timeout);
    for dlq in s.system.topology.queues.iter().map(|q| q.id.dlq()) {
        assert_eq!(s.system.queue.depth(dlq).await.expect("depth").total(), 0, "{}", dlq.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_sent_twice_to_the_real_queues_still_gives_one_output() {
    let s = setup().await;
    let doubled = Arc::new(FaultyQueue::new(
        s.system.queue.clone(),
        QueueFaults { duplicate: 1.0, max_extra_delay: Duration::ZERO },
        3,
    ));
    let deps = Arc::new(Deps::new(
        s.system.deps.manifest.clone(),
        s.system.store.clone(),
        doubled,
        s.system.deps.clock.clone(),
        s.system.deps.agents.clone(),
        EngineSettings::default(),
    ));
    let _p = pollers(deps.clone(), &s.system);
    let id = submit(&deps, "bravo pair of agents").await;
    let output = wait_output(&deps, &id).await;
    assert_eq!(output.status, OutputStatus::Success);
    wait_drained(&s.system, Duration::from_secs(20)).await;
    let handoffs = deps.store.list_handoffs(&id).await.expect("store");
    assert_eq!(handoffs.len(), 2, "one handoff per dispatch");
    let finals =
        deps.store.list_events(&id).await.expect("store").into_iter().filter(|e| e.kind == EventKind::Final).count();
    assert_eq!(finals, 1);
    assert_eq!(
        deps.store.get_output(&id).await.expect("store").as_deref(),
        Some(&output),
        "the output was written once and never replaced"
    );
}

/// Requests per completed query for k = 1..4 agents, counted by the adapters themselves
/// (printed; targets: at most k + 3 SQS sends and 2k + 4 DynamoDB writes for the query, plus
/// the one conditional write that records it as its session's turn — docs/conversations.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_per_query_stay_within_k_plus_3_sends_and_2k_plus_5_writes_with_the_session_turn() {
    let s = setup().await;
    let _p = pollers(s.system.deps.clone(), &s.system);
    let deps = &s.system.deps;
    // One query first, not counted: storing the process's manifest version is done once per
    // process (a cold start's cost), not once per query.
    let warm_up = submit(deps, "alpha single agent").await;
    wait_output(deps, &warm_up).await;
    println!("k  sqs_sends  sqs_receives  sqs_deletes  ddb_reads  ddb_writes  ddb_transact_writes");
    for (k, question) in [
        (1u64, "alpha single agent"),
        (2, "bravo pair of agents"),
        (3, "charlie trio of agents"),
        (4, "delta quartet of agents"),
    ] {
        wait_drained(&s.system, Duration::from_secs(15)).await;
        let (q0, s0) = (s.system.queue.counts(), s.system.store.counts());
        let id = submit(deps, question).await;
        let output = wait_output(deps, &id).await;
        assert_eq!(output.agents_dispatched.len() as u64, k);
        wait_drained(&s.system, Duration::from_secs(15)).await;
        let (q1, s1) = (s.system.queue.counts(), s.system.store.counts());
        let sends = q1.sends - q0.sends;
        let writes = (s1.writes - s0.writes) + (s1.transact_writes - s0.transact_writes);
        println!(
            "{k}  {sends:>9}  {:>12}  {:>11}  {:>9}  {:>10}  {:>19}",
            q1.receives - q0.receives,
            q1.deletes - q0.deletes,
            s1.reads - s0.reads,
            s1.writes - s0.writes,
            s1.transact_writes - s0.transact_writes
        );
        assert!(sends <= k + 3, "k={k}: {sends} SQS sends");
        assert!(writes <= 2 * k + 4 + 1, "k={k}: {writes} DynamoDB writes (2k + 4, + 1 session turn)");
    }
}

/// POST `path` with `body` as `user` with `roles`: (status, body).
async fn post_as(deps: &Deps, path: &str, body: &str, user: &str, roles: &str) -> (i64, serde_json::Value) {
    let r = handle_http(deps, api_request("POST", path, "", Some(body), user, roles)).await;
    (r.status_code, json_body(&r))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_write_waits_in_dynamodb_resumes_by_sqs_and_is_called_once_with_every_message_sent_twice() {
    // GIVEN a refund under approval on the real table and queues, every message sent twice
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let manifest = Arc::new(approvals::manifest(&mcp, "1h", "5s"));
    let config = endpoint::config().await;
    let urls = endpoint::resources(&manifest, &config).await;
    let system =
        AwsSystem::with_resources(manifest.clone(), EngineSettings::default(), &config, &urls.table, urls.queues);
    let doubled = Arc::new(FaultyQueue::new(
        system.queue.clone(),
        QueueFaults { duplicate: 1.0, max_extra_delay: Duration::ZERO },
        5,
    ));
    let deps = Arc::new(Deps::new(
        manifest.clone(),
        system.store.clone(),
        doubled,
        system.deps.clock.clone(),
        approvals::agents(&manifest),
        EngineSettings::default(),
    ));
    let _p = pollers(deps.clone(), &system);
    // WHEN the question needs the refund
    let (status, accepted) =
        post_as(&deps, "/v1/queries", &json!({"query": "refund order A-1"}).to_string(), "u1", "").await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["query_id"].as_str().expect("id").to_string();
    // THEN the query waits in the table with the pending call, and the tool is not called
    let mut waiting = serde_json::Value::Null;
    for _ in 0..300 {
        let r = handle_http(&deps, api_request("GET", &format!("/v1/queries/{id}"), "", None, "u1", "")).await;
        waiting = json_body(&r);
        if waiting["status"] == "awaiting_approval" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(waiting["status"], "awaiting_approval", "{waiting}");
    assert_eq!(waiting["pending_approval"]["tool"], "orders.issue_refund");
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 0);
    let stored = deps.store.get_query(&id).await.expect("store").expect("query");
    assert_eq!(stored.approvals.len(), 1, "the waiting call is on the record in DynamoDB");
    // WHEN the approver approves (the resumption goes through the tier's SQS queue, twice)
    let approval = format!("/v1/queries/{id}/approval");
    let (status, body) = post_as(&deps, &approval, r#"{"decision": "approve"}"#, "u1", "approver").await;
    assert_eq!(status, 200, "{body}");
    // THEN the answer carries the tool's result, and the tool was called once
    let output = wait_output(&deps, &id).await;
    assert_eq!(output.response_text, "Outcome: refund of 25 for order A-1 issued", "{output:?}");
    // (the duplicate resumption has run; the approval's expiry message stays delayed until
    // its hour is up, then finds the query done)
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 1);
    let (again, _) = post_as(&deps, &approval, r#"{"decision": "approve"}"#, "u1", "approver").await;
    assert_eq!(again, 409);
    let kinds: Vec<EventKind> = deps.store.list_events(&id).await.expect("store").iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&EventKind::ApprovalRequested) && kinds.contains(&EventKind::ApprovalDecided), "{kinds:?}");
}
