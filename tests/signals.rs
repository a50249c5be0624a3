//! Training signals through the whole embedded pipeline: recorded at routing, completed at
//! synthesis, rated with `POST /v1/queries/{id}/feedback`, read with `GET /v1/signals` by the
//! manifest's export roles; hostile feedback and listing requests refused with the field and the
//! rule; optimization requests raised from the stored signals.

use serde_json::{json, Value};
use switchyard_engine::handlers::handle_http;
use switchyard_engine::learning;
use switchyard_model::manifest::Manifest;
use switchyard_tests::{api_request, json_body, manifest_fixture, text_body, Harness, SIGNAL_FIELDS};

const TRAINER: &str = "signal_trainer";

fn manifest() -> Manifest {
    let mut m = manifest_fixture("manifests/scripted.yaml");
    m.signals.export_roles = vec![TRAINER.into()];
    m
}

async fn submit(h: &Harness, question: &str, user: &str) -> String {
    let r = h.post(question, user, "").await;
    assert_eq!(r.status_code, 202, "{}", text_body(&r));
    json_body(&r)["query_id"].as_str().expect("query id").to_string()
}

async fn ask(h: &Harness, question: &str, user: &str) -> String {
    let id = submit(h, question, user).await;
    h.output(&id).await;
    id
}

async fn feedback(h: &Harness, id: &str, user: &str, body: &str) -> (i64, Value) {
    let path = format!("/v1/queries/{id}/feedback");
    let r = handle_http(&h.system.deps, api_request("POST", &path, "", Some(body), user, "")).await;
    (r.status_code, json_body(&r))
}

async fn signals(h: &Harness, query: &str, roles: &str) -> (i64, Value) {
    let r = handle_http(&h.system.deps, api_request("GET", "/v1/signals", query, None, "someone", roles)).await;
    (r.status_code, json_body(&r))
}

fn message(body: &Value) -> String {
    body["error"]["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(start_paused = true)]
async fn a_finished_query_has_a_signal_with_the_seeds_fields_and_its_outcome() {
    // GIVEN a query answered by its primary agent, and one whose agent fails so its fallback
    // answers.
    let h = Harness::start(manifest());
    let steady = ask(&h, "alpha steady question", "u1").await;
    let broken = ask(&h, "charlie broken question", "u1").await;

    // WHEN an export role reads the signals.
    let (status, body) = signals(&h, "", TRAINER).await;

    // THEN each query has one signal with the seed's fields, newest first.
    assert_eq!(status, 200, "{body}");
    let list = body["signals"].as_array().expect("signals");
    assert_eq!(list.len(), 2, "{body}");
    assert_eq!(body["next"], Value::Null);
    assert_eq!(list[0]["signal_id"], json!(broken));
    assert_eq!(list[1]["signal_id"], json!(steady));
    for field in SIGNAL_FIELDS {
        assert!(list[1].get(field).is_some(), "field {field} missing: {}", list[1]);
    }
    let s = &list[1];
    assert_eq!(s["query"], "alpha steady question");
    assert_eq!(s["intent"], "steady_q");
    assert_eq!(s["agents_selected"], json!(["steady"]));
    assert_eq!((s["agents_succeeded"].as_u64(), s["agents_failed"].as_u64()), (Some(1), Some(0)));
    assert_eq!(s["was_rerouted"], false);
    assert_eq!(s["user_satisfaction"], Value::Null);
    let reward = s["reward"].as_f64().expect("reward");
    assert!((0.9..=1.0).contains(&reward), "a fast, fully answered route earns nearly the whole reward: {reward}");
    // The fallback stood in: the routing needed a re-route, and the reward shows it.
    let f = &list[0];
    assert_eq!(f["agents_selected"], json!(["broken"]));
    assert_eq!(f["was_rerouted"], true, "{f}");
    assert!(f["reward"].as_f64().expect("reward") < reward);
}

#[tokio::test(start_paused = true)]
async fn feedback_is_recorded_for_the_owner_and_a_second_one_replaces_the_first() {
    let h = Harness::start(manifest());
    let id = ask(&h, "alpha steady question", "u1").await;

    // WHEN the owner rates it, then changes their mind and names another intent.
    let (first, body) = feedback(&h, &id, "u1", r#"{"rating": 5}"#).await;
    assert_eq!(first, 201, "{body}");
    assert_eq!(body["replaced"], false);
    let (second, body) =
        feedback(&h, &id, "u1", r#"{"rating": 2, "correct_intent": "flaky_q", "comment": "wrong team"}"#).await;

    // THEN the second says it replaced the first, and the signal carries only the second.
    assert_eq!(second, 200, "{body}");
    assert_eq!(body["replaced"], true);
    assert_eq!(body["correct_intent"], "flaky_q");
    let (_, page) = signals(&h, "", TRAINER).await;
    let s = &page["signals"][0];
    assert_eq!(s["user_satisfaction"], 2.0);
    assert_eq!(s["correct_intent"], "flaky_q");
    assert_eq!(s["was_rerouted"], true, "a correction marks the routing wrong");
    assert_eq!(s["reward"], body["reward"]);
    assert!(s.get("comment").is_none(), "comments are never exported: {s}");
    // 0.35 accuracy + 0.25 efficiency + 0 re-route + 0.20 * (2 - 1) / 4, for a fast answer.
    let reward = s["reward"].as_f64().expect("reward");
    assert!((reward - 0.65).abs() < 0.01, "reward {reward}");
}

#[tokio::test(start_paused = true)]
async fn hostile_feedback_is_refused_with_the_field_and_the_rule() {
    let h = Harness::start(manifest());
    let id = ask(&h, "alpha steady question", "u1").await;
    let long = "x".repeat(2_001);
    let cases: Vec<(String, i64, &str)> = vec![
        (r#"{"rating": 0}"#.into(), 400, "rating: must be an integer from 1 to 5, got 0"),
        (r#"{"rating": 6}"#.into(), 400, "rating: must be an integer from 1 to 5, got 6"),
        (r#"{"rating": 3.5}"#.into(), 400, "rating: must be an integer from 1 to 5"),
        (r#"{"rating": "5"}"#.into(), 400, "rating: must be an integer from 1 to 5, got a string"),
        (r#"{}"#.into(), 400, "rating: required"),
        (r#"{"rating": 4, "correct_intent": "<script>drop_q</script>"}"#.into(), 400, "correct_intent: must be one of"),
        (json!({ "rating": 4, "comment": long }).to_string(), 400, "comment: at most 2000 characters, got 2001"),
        (json!({ "rating": 4, "comment": "a\u{0007}b" }).to_string(), 400, "comment: must not contain control"),
        (r#"{"rating": 4, "admin": true}"#.into(), 400, "body: only rating, correct_intent and comment"),
        ("not json".into(), 400, "body: must be a JSON object"),
        (json!({ "rating": 4, "comment": "y".repeat(9_000) }).to_string(), 413, "limit is 8192"),
    ];
    for (body, status, rule) in &cases {
        let (got, answer) = feedback(&h, &id, "u1", body).await;
        assert_eq!(got, *status, "{}: {answer}", &body[..body.len().min(60)]);
        assert!(message(&answer).contains(rule), "{:?} should say {rule:?}", message(&answer));
        assert!(!message(&answer).contains("script"), "the refused value is not echoed");
    }
    // Someone else's query, an unknown id and a malformed id are all "no such query".
    for (path_id, user) in [(id.as_str(), "u2"), ("6f1c2d3e-0000-4000-8000-000000000000", "u1"), ("not-a-uuid", "u1")] {
        let (got, answer) = feedback(&h, path_id, user, r#"{"rating": 5}"#).await;
        assert_eq!((got, message(&answer)), (404, "no such query".to_string()), "{path_id} as {user}");
    }
    // No identity.
    let mut anonymous =
        api_request("POST", &format!("/v1/queries/{id}/feedback"), "", Some(r#"{"rating": 5}"#), "", "");
    anonymous.request_context.authorizer = None;
    assert_eq!(handle_http(&h.system.deps, anonymous).await.status_code, 401);
    // Nothing refused was stored.
    let (_, page) = signals(&h, "", TRAINER).await;
    assert_eq!(page["signals"][0]["user_satisfaction"], Value::Null, "{page}");
}

#[tokio::test(start_paused = true)]
async fn feedback_before_the_query_finished_is_a_conflict() {
    // GIVEN a query whose agent hangs until the deadline (5 s).
    let h = Harness::start(manifest());
    let id = submit(&h, "hotel hanging question", "u1").await;
    // WHEN its owner rates it at once.
    let (status, body) = feedback(&h, &id, "u1", r#"{"rating": 1}"#).await;
    // THEN it is refused until the answer is written, and accepted after.
    assert_eq!(status, 409, "{body}");
    assert!(message(&body).contains("has not finished"), "{body}");
    h.output(&id).await;
    assert_eq!(feedback(&h, &id, "u1", r#"{"rating": 1}"#).await.0, 201);
}

#[tokio::test(start_paused = true)]
async fn signals_are_served_only_to_the_manifests_export_roles_and_bad_parameters_name_the_field() {
    let h = Harness::start(manifest());
    ask(&h, "alpha steady question", "u1").await;
    for roles in ["", "analyst", "admin"] {
        let (status, body) = signals(&h, "", roles).await;
        assert_eq!(status, 403, "roles {roles:?}: {body}");
        assert!(message(&body).contains(TRAINER), "{body}");
    }
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=ten", "limit"),
        ("since=yesterday", "since"),
        ("min_reward=1.5", "min_reward"),
        ("min_reward=-0.1", "min_reward"),
        ("cursor=garbage", "cursor"),
    ] {
        let (status, body) = signals(&h, query, TRAINER).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(message(&body).starts_with(&format!("{field}: ")), "{query}: {body}");
    }
    let (status, body) = signals(&h, "min_reward=0.99&since=2020-01-01T00:00:00Z", TRAINER).await;
    assert_eq!(status, 200, "{body}");
    // A manifest without export roles serves nobody.
    let closed = Harness::start(manifest_fixture("manifests/scripted.yaml"));
    let (status, body) = signals(&closed, "", TRAINER).await;
    assert_eq!(status, 403);
    assert!(message(&body).contains("export_roles is empty"), "{body}");
}

#[tokio::test(start_paused = true)]
async fn signals_page_newest_first_and_every_signal_comes_once() {
    let h = Harness::start(manifest());
    let mut ids = Vec::new();
    for q in [
        "alpha steady question",
        "lima band question",
        "mike band question",
        "november band question",
        "oscar band question",
    ] {
        ids.push(ask(&h, q, "u1").await);
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = match &cursor {
            Some(c) => format!("limit=2&cursor={c}"),
            None => "limit=2".to_string(),
        };
        let (status, body) = signals(&h, &query, TRAINER).await;
        assert_eq!(status, 200, "{body}");
        let page = body["signals"].as_array().expect("signals");
        assert!(page.len() <= 2);
        seen.extend(page.iter().map(|s| s["signal_id"].as_str().expect("id").to_string()));
        pages += 1;
        match body["next"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(seen, ids, "newest first, each once");
    assert_eq!(pages, 3);
    // `since` keeps the newer ones: the export's filter and the route's agree.
    let records =
        learning::export(h.system.deps.store.as_ref(), &h.system.deps.manifest, h.system.deps.clock.now(), None, 2)
            .await
            .expect("export");
    assert_eq!(records.iter().map(|r| r.signal.signal_id.clone()).collect::<Vec<_>>(), ids);
    let since = records[1].recorded_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let (_, body) = signals(&h, &format!("since={since}"), TRAINER).await;
    assert_eq!(body["signals"].as_array().map(Vec::len), Some(2), "{body}");
}

#[tokio::test(start_paused = true)]
async fn a_falling_mean_reward_raises_pending_optimization_requests_from_the_stored_signals() {
    // GIVEN a manifest whose threshold the failing route's reward falls under.
    let mut m = manifest();
    m.signals.optimization.threshold = 0.9;
    m.signals.optimization.min_signals = 2;
    m.signals.optimization.window = 10;
    let h = Harness::start(m);
    for _ in 0..3 {
        ask(&h, "charlie broken question", "u1").await;
    }
    ask(&h, "alpha steady question", "u1").await;
    let deps = &h.system.deps;
    // WHEN the stored signals are checked.
    let requests =
        learning::pending_requests(deps.store.as_ref(), &deps.manifest, deps.clock.now()).await.expect("read");
    // THEN the agent whose routes keep needing a fallback has a pending request; the steady
    // one (one signal, under min_signals) has none.
    let targets: Vec<&str> = requests.iter().map(|r| r.target.as_str()).collect();
    assert!(targets.contains(&"broken"), "{requests:?}");
    assert!(!targets.contains(&"steady"), "{requests:?}");
    assert!(requests.iter().all(|r| r.status == "pending" && r.mean_reward < 0.9 && r.threshold == 0.9));
}

#[test]
fn the_manifests_signal_settings_are_validated_with_their_path() {
    let base = std::fs::read_to_string(switchyard_tests::fixture("manifests/scripted.yaml")).expect("fixture");
    for (section, path) in [
        ("signals: {optimization: {threshold: 1.5}}", "signals.optimization.threshold"),
        ("signals: {optimization: {window: 0}}", "signals.optimization.window"),
        ("signals: {optimization: {window: 5, min_signals: 6}}", "signals.optimization.min_signals"),
        ("signals: {export_roles: ['has space']}", "signals.export_roles[0]"),
    ] {
        let text = format!("{base}\n{section}\n");
        let err = Manifest::from_yaml(&text, "m.yaml").expect_err(section);
        assert!(err.to_string().contains(path), "{section}: {err}");
    }
    let unknown = format!("{base}\nsignals: {{threshold: 0.5}}\n");
    assert!(Manifest::from_yaml(&unknown, "m.yaml").is_err(), "unknown fields are refused");
    let ok = format!("{base}\nsignals: {{export_roles: [ml-ops], query_text: false, optimization: {{window: 50, threshold: 0.5, min_signals: 5}}}}\n");
    let m = Manifest::from_yaml(&ok, "m.yaml").expect("valid");
    assert_eq!(m.signals.optimization.window, 50);
    // Defaults leave the canonical JSON (and so every existing fingerprint) as it was.
    let plain = Manifest::from_yaml(&base, "m.yaml").expect("valid");
    assert!(!serde_json::to_string(&plain).expect("json").contains("\"signals\""));
}
