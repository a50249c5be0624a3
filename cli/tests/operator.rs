//! `switchyard dlq list`, `dlq redrive`, `query show` and `query approve|reject` against the
//! local SQS + DynamoDB endpoint (moto, started by scripts/test.sh), run as the operator runs
//! them: the binary, with the environment `switchyard setup --backend aws` prints. Fails (never
//! skips) without the endpoint.

#[path = "../../tests/support/approvals.rs"]
mod approvals;
#[path = "../../tests/support/mcp_server.rs"]
mod mcp_server;

use aws_sdk_sqs::types::QueueAttributeName;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use switchyard_aws::sdk::ResourceUrls;
use switchyard_aws::AwsSystem;
use switchyard_engine::intake::{submit, Caller};
use switchyard_engine::ports::{QueueId, Store};
use switchyard_engine::EngineSettings;
use switchyard_engine::{pollers::start, pollers::PollerConfig};
use switchyard_model::jobs::JobMessage;
use switchyard_model::manifest::Manifest;
use switchyard_tests::endpoint;

struct Setup {
    urls: ResourceUrls,
    sqs: aws_sdk_sqs::Client,
    config: aws_config::SdkConfig,
}

async fn setup() -> Setup {
    let config = endpoint::config().await;
    let manifest = Manifest::embedded().expect("embedded manifest");
    let sqs = aws_sdk_sqs::Client::new(&config);
    let urls = endpoint::resources(&manifest, &config).await;
    Setup { urls, sqs, config }
}

/// Run `switchyard ARGS` with the resources' environment; (exit code, stdout, stderr).
fn switchyard(urls: &ResourceUrls, args: &[&str]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_switchyard")).args(args).envs(&urls.env).output().expect("switchyard runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Send `body` to `queue` and receive it (visibility 0) until SQS's redrive policy moves it to
/// the dead-letter queue, as it does for a message whose handler fails every time.
async fn poison(s: &Setup, queue: QueueId, body: &str) {
    let url = &s.urls.queues[&queue];
    s.sqs.send_message().queue_url(url).message_body(body).send().await.expect("send");
    for _ in 0..50 {
        let out = s
            .sqs
            .receive_message()
            .queue_url(url)
            .visibility_timeout(0)
            .max_number_of_messages(10)
            .send()
            .await
            .expect("receive");
        if out.messages.unwrap_or_default().is_empty() {
            return;
        }
    }
    panic!("the message never left {}", queue.name());
}

async fn visible(s: &Setup, queue: QueueId) -> u64 {
    let out = s
        .sqs
        .get_queue_attributes()
        .queue_url(&s.urls.queues[&queue])
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .expect("attributes");
    out.attributes
        .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessages).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_list_shows_poisoned_messages_and_redrive_moves_them_back_once() {
    let s = setup().await;
    let tier2 = QueueId::tier(2);
    // GIVEN a malformed body and a job for a query that is not in the table, dead-lettered
    let ghost = uuid::Uuid::new_v4().to_string();
    let job = JobMessage::new(switchyard_model::jobs::Job::Route { query_id: ghost.clone() }).to_body();
    poison(&s, tier2, "{\"v\":1,\"job\":\"nonsense\"").await;
    poison(&s, tier2, &job).await;
    assert_eq!(visible(&s, tier2.dlq()).await, 2);

    // WHEN the operator lists the dead-letter queues
    let (code, out, err) = switchyard(&s.urls, &["dlq", "list"]);
    // THEN each queue has its count and oldest, each message its query id and last error
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("tier-2-dlq   2 messages  oldest 20"), "{out}");
    assert!(out.contains("route-dlq    0 messages  oldest -"), "{out}");
    assert!(out.contains("query -") && out.contains("last error: malformed message:"), "{out}");
    assert!(out.contains(&format!("query {ghost}")), "{out}");
    assert!(out.contains("the query is not in the table"), "{out}");
    // listing takes nothing
    assert_eq!(visible(&s, tier2.dlq()).await, 2);

    // WHEN one queue is redriven
    let (code, out, err) = switchyard(&s.urls, &["dlq", "redrive", "--queue", "tier-2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "tier-2-dlq: 2 messages moved back to tier-2");
    // THEN the messages are back on the source queue, bodies intact, and the DLQ is empty
    assert_eq!(visible(&s, tier2.dlq()).await, 0);
    assert_eq!(visible(&s, tier2).await, 2);
    let back = s
        .sqs
        .receive_message()
        .queue_url(&s.urls.queues[&tier2])
        .max_number_of_messages(10)
        .visibility_timeout(0)
        .send()
        .await
        .expect("receive");
    let mut bodies: Vec<String> = back.messages.unwrap_or_default().into_iter().filter_map(|m| m.body).collect();
    bodies.sort();
    let mut want = vec![job.clone(), "{\"v\":1,\"job\":\"nonsense\"".to_string()];
    want.sort();
    assert_eq!(bodies, want);
    // AND a second redrive moves nothing
    let (code, out, _) = switchyard(&s.urls, &["dlq", "redrive"]);
    assert_eq!(code, 0);
    assert!(out.contains("tier-2-dlq: 0 messages moved back to tier-2"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_commands_refuse_an_unknown_queue_and_a_missing_environment() {
    let s = setup().await;
    let (code, _, err) = switchyard(&s.urls, &["dlq", "redrive", "--queue", "tier-9"]);
    assert_eq!(code, 2);
    assert!(err.contains("--queue `tier-9`: no such queue; choose one of route, tier-0"), "{err}");
    let empty = ResourceUrls { env: Default::default(), ..s.urls.clone() };
    let (code, _, err) = switchyard(&empty, &["dlq", "list"]);
    assert_eq!(code, 2);
    assert!(err.contains("SWITCHYARD_TABLE") && err.contains("memory backend has nothing to inspect"), "{err}");
    let (code, _, err) = switchyard(&s.urls, &["dlq", "list", "--limit", "0"]);
    assert_eq!(code, 2, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_show_prints_the_record_timeline_handoffs_and_output() {
    let s = setup().await;
    let manifest = Arc::new(Manifest::embedded().expect("manifest"));
    let system =
        AwsSystem::with_resources(manifest, EngineSettings::default(), &s.config, &s.urls.table, s.urls.queues.clone());
    let _pollers = start(
        system.deps.clone(),
        &system.topology,
        PollerConfig { wait: Duration::from_secs(1), default_concurrency: 4 },
    );
    let caller = Caller { user_id: "ops-user".into(), roles: vec![] };
    let body = serde_json::json!({ "query": "Which regions are underperforming against benchmark on market share?" });
    let accepted = submit(&system.deps, &caller, body.to_string().as_bytes(), None).await.expect("accepted");
    let id = accepted.query_id;
    let mut done = false;
    for _ in 0..300 {
        if system.store.get_output(&id).await.expect("store").is_some() {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(done, "query {id} did not finish in 30 s");

    let (code, out, err) = switchyard(&s.urls, &["query", "show", &id]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(&format!("query {id}\n  user ops-user")), "{out}");
    for kind in ["accepted", "route", "plan", "dispatch", "handoff", "synthesis", "final"] {
        assert!(out.lines().any(|l| l.contains(" ms  ") && l.contains(kind)), "no {kind} in the timeline:\n{out}");
    }
    let handoffs = out.split("\nhandoffs\n").nth(1).expect("a handoffs section");
    assert!(handoffs.contains("  gap_analyzer tier 2  Success  attempts 1  "), "{out}");
    assert!(handoffs.contains("  resource_optimizer tier 4  Success  attempts 1  "), "{out}");
    assert!(out.contains("\noutput\n  Success"), "{out}");

    let missing = uuid::Uuid::new_v4().to_string();
    let (code, out, _) = switchyard(&s.urls, &["query", "show", &missing]);
    assert_eq!(
        (code, out.trim().to_string()),
        (1, format!("query {missing}: not in the table (never written, or expired)"))
    );
    let (code, _, err) = switchyard(&s.urls, &["query", "show", "../../etc/passwd"]);
    assert_eq!(code, 2);
    assert!(err.contains("query id `../../etc/passwd`: must be a UUID"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_approve_calls_the_tool_once_reject_never_and_a_bad_id_or_a_second_decision_is_refused() {
    // GIVEN two queries on the local endpoint whose refunds wait for a person
    let (mcp, seen) = mcp_server::start(mcp_server::Faults::default()).await;
    let manifest = approvals::manifest(&mcp, "1h", "5s");
    let file = std::env::temp_dir().join(format!("switchyard-approvals-{}.yaml", std::process::id()));
    std::fs::write(&file, manifest_text(&mcp)).expect("manifest file");
    let config = endpoint::config().await;
    let urls = endpoint::resources(&manifest, &config).await;
    let manifest = Arc::new(manifest);
    let system = AwsSystem::with_resources(
        manifest.clone(),
        EngineSettings::default(),
        &config,
        &urls.table,
        urls.queues.clone(),
    );
    let deps = Arc::new(switchyard_engine::Deps::new(
        manifest.clone(),
        system.store.clone(),
        system.queue.clone(),
        system.deps.clock.clone(),
        approvals::agents(&manifest),
        EngineSettings::default(),
    ));
    let _pollers =
        start(deps.clone(), &system.topology, PollerConfig { wait: Duration::from_secs(1), default_concurrency: 4 });
    let id = waiting_query(&deps, &system).await;
    let approved = waiting_query(&deps, &system).await;
    let manifest_arg = file.display().to_string();
    // WHEN the operator rejects it from the command line
    let (code, out, err) =
        switchyard(&urls, &["query", "reject", &id, "--note", "not today", "--manifest", &manifest_arg]);
    // THEN it is decided, the query resumes and the model is told why; the tool is never called
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(&format!("query {id}: reject orders.issue_refund at ")), "{out}");
    let answer = answer_of(&system, &id).await;
    assert_eq!(answer.as_deref(), Some("Outcome: rejected by a person: not today"));
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 0);
    // and a second decision is refused with the reason, and `query show` lists the decision
    let (code, out, _) = switchyard(&urls, &["query", "approve", &id, "--manifest", &manifest_arg]);
    assert_eq!((code, out.trim().to_string()), (1, format!("query {id}: the tool call was already decided (reject)")));
    let (code, out, _) = switchyard(&urls, &["query", "show", &id, "--manifest", &manifest_arg]);
    assert_eq!(code, 0);
    assert!(out.contains("  approval orders.issue_refund {") && out.contains("reject by operator:"), "{out}");
    // WHEN the operator approves the other query
    let (code, out, err) = switchyard(&urls, &["query", "approve", &approved, "--manifest", &manifest_arg]);
    // THEN the refund is made once and its result reaches the answer
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(&format!("query {approved}: approve orders.issue_refund at ")), "{out}");
    let answer = answer_of(&system, &approved).await;
    assert!(answer.as_deref().is_some_and(|a| a.starts_with("Outcome: ") && !a.contains("rejected")), "{answer:?}");
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 1);
    // AND an unknown id, an id that is not a UUID and a decided query are refused
    let missing = uuid::Uuid::new_v4().to_string();
    let (code, out, _) = switchyard(&urls, &["query", "approve", &missing, "--manifest", &manifest_arg]);
    assert_eq!((code, out.trim().to_string()), (1, format!("query {missing}: no such query")));
    let (code, _, err) = switchyard(&urls, &["query", "reject", "not-an-id", "--manifest", &manifest_arg]);
    assert_eq!(code, 2);
    assert!(err.contains("query id `not-an-id`: must be a UUID"), "{err}");
    let (code, out, _) = switchyard(&urls, &["query", "reject", &approved, "--manifest", &manifest_arg]);
    assert_eq!(
        (code, out.trim().to_string()),
        (1, format!("query {approved}: the tool call was already decided (approve)"))
    );
    assert_eq!(seen.lock().expect("seen").count("issue_refund"), 1);
    let _ = std::fs::remove_file(&file);
}

/// The approvals manifest's YAML, for the command line's `--manifest`.
fn manifest_text(mcp: &str) -> String {
    approvals::manifest_yaml(mcp, "1h", "5s")
}

/// Submit the refund question as `u1` and wait until its call waits for a person; its id.
async fn waiting_query(deps: &switchyard_engine::Deps, system: &AwsSystem) -> String {
    let caller = Caller { user_id: "u1".into(), roles: vec![] };
    let body = serde_json::json!({ "query": "refund order A-1" });
    let id = submit(deps, &caller, body.to_string().as_bytes(), None).await.expect("accepted").query_id;
    for _ in 0..300 {
        let q = system.store.get_query(&id).await.expect("store").expect("query");
        if q.approvals.iter().any(|a| a.decision.is_none()) {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("query {id} never waited for approval");
}

/// The query's answer text, once it is written (30 s at most).
async fn answer_of(system: &AwsSystem, id: &str) -> Option<String> {
    for _ in 0..300 {
        if let Some(o) = system.store.get_output(id).await.expect("store") {
            return Some(o.response_text.clone());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
