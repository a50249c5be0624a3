//! Access control: who the caller is (the JWT authorizer's claims; dev headers only when
//! `serve` turns them on), which intents their roles allow, that query ids cannot be guessed,
//! and that logs carry ids but never what the user asked.

use serde_json::json;
use std::io::Write;
use std::sync::{Arc, Mutex};
use switchyard_engine::handlers::handle_http;
use switchyard_engine::ports::Store;
use switchyard_engine::EngineSettings;
use switchyard_tests::*;

fn scripted() -> switchyard_model::manifest::Manifest {
    manifest_fixture("manifests/scripted.yaml")
}

fn post_body(question: &str) -> String {
    json!({ "query": question }).to_string()
}

/// A request with no authorizer at all, only the dev identity headers.
fn dev_header_request(question: &str) -> aws_lambda_events::apigw::ApiGatewayV2httpRequest {
    let mut request = api_request("POST", "/v1/queries", "", Some(&post_body(question)), "ignored", "");
    request.request_context.authorizer = None;
    request.headers.insert("x-switchyard-user", "dev-user".parse().expect("header"));
    request.headers.insert("x-switchyard-roles", "admin".parse().expect("header"));
    request
}

#[tokio::test(start_paused = true)]
async fn dev_identity_headers_are_ignored_unless_the_setting_turns_them_on() {
    let off = switchyard_agents::embedded(Arc::new(scripted()), EngineSettings::default());
    let refused = handle_http(&off.deps, dev_header_request("papa guarded question")).await;
    assert_eq!(refused.status_code, 401, "{}", text_body(&refused));
    assert!(off.store.query_ids().is_empty());

    let on = switchyard_agents::embedded(
        Arc::new(scripted()),
        EngineSettings { dev_identity_headers: true, ..EngineSettings::default() },
    );
    let accepted = handle_http(&on.deps, dev_header_request("papa guarded question")).await;
    assert_eq!(accepted.status_code, 202, "{}", text_body(&accepted));
    let id = json_body(&accepted)["query_id"].as_str().expect("id").to_string();
    let query = on.store.get_query(&id).await.expect("store").expect("query");
    assert_eq!((query.user_id.as_str(), query.roles.as_slice()), ("dev-user", ["admin".to_string()].as_slice()));

    // With both, the token wins: headers cannot override a verified identity.
    let mut both = dev_header_request("alpha steady question");
    both.request_context = api_request("POST", "/v1/queries", "", None, "jwt-user", "").request_context;
    let r = handle_http(&on.deps, both).await;
    let id = json_body(&r)["query_id"].as_str().expect("id").to_string();
    assert_eq!(on.store.get_query(&id).await.expect("store").expect("query").user_id, "jwt-user");
}

#[tokio::test(start_paused = true)]
async fn a_token_without_a_subject_is_unauthenticated() {
    let system = switchyard_agents::embedded(Arc::new(scripted()), EngineSettings::default());
    for claims in [json!({ "roles": "admin" }), json!({ "sub": "", "roles": "admin" })] {
        let mut request = api_request("POST", "/v1/queries", "", Some(&post_body("alpha steady question")), "x", "");
        let jwt = request.request_context.authorizer.as_mut().and_then(|a| a.jwt.as_mut()).expect("jwt");
        jwt.claims = serde_json::from_value(claims.clone()).expect("claims");
        let r = handle_http(&system.deps, request).await;
        assert_eq!(r.status_code, 401, "{claims}");
        assert_eq!(json_body(&r)["error"]["code"], "unauthenticated");
    }
    assert!(system.store.query_ids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn roles_from_cognito_groups_grant_an_intent_that_requires_one() {
    let system = switchyard_agents::embedded(Arc::new(scripted()), EngineSettings::default());
    let mut request = api_request("POST", "/v1/queries", "", Some(&post_body("papa guarded question")), "u1", "");
    let jwt = request.request_context.authorizer.as_mut().and_then(|a| a.jwt.as_mut()).expect("jwt");
    jwt.claims = serde_json::from_value(json!({ "sub": "u1", "cognito:groups": "[analyst admin]" })).expect("claims");
    assert_eq!(handle_http(&system.deps, request).await.status_code, 202);
    let r = handle_http(
        &system.deps,
        api_request("POST", "/v1/queries", "", Some(&post_body("papa guarded question")), "u1", "analyst"),
    )
    .await;
    assert_eq!(r.status_code, 403);
}

#[tokio::test(start_paused = true)]
async fn query_and_dispatch_ids_are_random_uuid_v4s() {
    let h = Harness::start(scripted());
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let r = h.post("echo mixed question", "u1", "").await;
        let id = json_body(&r)["query_id"].as_str().expect("id").to_string();
        let uuid = uuid::Uuid::parse_str(&id).expect("a UUID");
        assert_eq!(uuid.get_version_num(), 4, "{id}");
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
        assert!(ids.insert(id.clone()), "ids do not repeat");
        let output = h.output(&id).await;
        for result in &output.agent_results {
            assert_eq!(uuid::Uuid::parse_str(&result.dispatch_id).expect("dispatch id").get_version_num(), 4);
            assert!(ids.insert(result.dispatch_id.clone()));
        }
    }
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test(start_paused = true)]
async fn logs_at_info_level_carry_ids_and_never_the_text_of_the_question() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::INFO)
        .with_current_span(true)
        .with_span_list(true)
        .with_writer(logs.clone())
        .finish();
    // Process-wide, not `set_default`: tracing caches each callsite's interest globally, so a
    // thread-local subscriber can miss events whose callsites another test's thread hit first.
    // Other tests of this binary log here too; the lines are matched by this query's id.
    tracing::subscriber::set_global_default(subscriber).expect("no other test sets the global subscriber");

    let secret = "zanzibar-quokka-7731";
    let h = Harness::start(scripted());
    // A query that retries, falls back and finishes; one refused for its role; one invalid.
    let r = h.post(&format!("charlie broken question about {secret}"), "analyst-1", "").await;
    let id = json_body(&r)["query_id"].as_str().expect("id").to_string();
    h.output(&id).await;
    assert_eq!(h.post(&format!("papa guarded question {secret}"), "analyst-1", "").await.status_code, 403);
    assert_eq!(h.post(&format!("{secret}\u{7}"), "analyst-1", "").await.status_code, 400);

    let text = String::from_utf8(logs.0.lock().expect("buffer").clone()).expect("utf-8 logs");
    for step in ["query accepted", "query routed", "handoff recorded", "fallback dispatched", "query answered"] {
        assert!(
            text.lines().any(|l| l.contains(step) && l.contains(&id)),
            "no `{step}` line carrying the query id {id} in the logs:\n{text}"
        );
    }
    assert!(
        !text.contains(secret),
        "the question leaked into the logs:\n{}",
        text.lines().filter(|l| l.contains(secret)).collect::<Vec<_>>().join("\n")
    );
    let events = serde_json::to_string(&h.system.deps.store.list_events(&id).await.expect("events")).expect("json");
    assert!(!events.contains(secret), "the event log holds ids and statuses, not the question");
}
