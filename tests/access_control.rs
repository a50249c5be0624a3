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

/// A `POST /v1/queries` body with a pre-parsed query under `query_id`.
fn pre_parsed(query_id: &str) -> String {
    json!({"parsed_query": {"query_id": query_id, "raw_query": "alpha steady question", "intent": "steady_q",
        "confidence": 0.9, "timestamp": "2025-12-08T10:00:00Z"}})
    .to_string()
}

#[tokio::test(start_paused = true)]
async fn a_pre_parsed_query_id_another_caller_used_is_answered_as_one_never_used() {
    let h = Harness::start(scripted());
    let post = |body: String, user: &'static str, key: Option<&'static str>| {
        let mut request = api_request("POST", "/v1/queries", "", Some(&body), user, "");
        if let Some(key) = key {
            request.headers.insert("idempotency-key", key.parse().expect("header"));
        }
        handle_http(&h.system.deps, request)
    };
    let taken = uuid::Uuid::new_v4().to_string();
    let owner = post(pre_parsed(&taken), "owner", Some("k-1")).await;
    assert_eq!(owner.status_code, 202, "{}", text_body(&owner));
    let owners_id = json_body(&owner)["query_id"].as_str().expect("id").to_string();

    // Another caller sending the owner's id and one sending an id nobody used get the same answer.
    let foreign = post(pre_parsed(&taken), "other", None).await;
    let unknown = post(pre_parsed(&uuid::Uuid::new_v4().to_string()), "other", None).await;
    for r in [&foreign, &unknown] {
        assert_eq!(r.status_code, 202, "{}", text_body(r));
        let body = json_body(r);
        let keys: Vec<&String> = body.as_object().expect("object").keys().collect();
        let unknown_body = json_body(&unknown);
        assert_eq!(keys, unknown_body.as_object().expect("object").keys().collect::<Vec<_>>());
        assert_eq!(body["status"], "accepted");
        assert_ne!(body["query_id"], owners_id.as_str());
    }
    let foreign_id = json_body(&foreign)["query_id"].as_str().expect("id").to_string();
    let stored = h.system.store.get_query(&foreign_id).await.expect("store").expect("the other caller's query");
    assert_eq!(stored.user_id, "other");
    let owners = h.system.store.get_query(&owners_id).await.expect("store").expect("the owner's query");
    assert_eq!(owners.user_id, "owner", "the owner's query is untouched");

    // The owner keeps idempotency: the same body and key replay the query, with spacing and key
    // order of its own; the same id without the key is the owner's own id, already in use.
    let respaced =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(&pre_parsed(&taken)).expect("json"))
            .expect("json");
    let replay = post(respaced, "owner", Some("k-1")).await;
    assert_eq!((replay.status_code, json_body(&replay)["query_id"].clone()), (200, json!(owners_id)));
    let again = post(pre_parsed(&taken), "owner", None).await;
    assert_eq!(again.status_code, 409, "{}", text_body(&again));
    assert!(json_body(&again)["error"]["message"].as_str().expect("message").contains("already in use"));
    // The other caller sending the same id again reaches its own query, not the owner's.
    let foreign_again = post(pre_parsed(&taken), "other", None).await;
    assert_eq!(foreign_again.status_code, 409, "{}", text_body(&foreign_again));
    let read =
        handle_http(&h.system.deps, api_request("GET", &format!("/v1/queries/{owners_id}"), "", None, "other", ""))
            .await;
    assert_eq!(read.status_code, 404);
}

#[tokio::test(start_paused = true)]
async fn an_idempotent_retry_is_the_same_request_whatever_its_spacing_and_key_order() {
    let h = Harness::start(scripted());
    let post = |body: &str| {
        let mut request = api_request("POST", "/v1/queries", "", Some(body), "u1", "");
        request.headers.insert("idempotency-key", "retry-1".parse().expect("header"));
        handle_http(&h.system.deps, request)
    };
    let first = post(r#"{"query":"alpha steady question","preferences":{"b":1,"a":[1,2]}}"#).await;
    assert_eq!(first.status_code, 202, "{}", text_body(&first));
    let id = json_body(&first)["query_id"].clone();
    let same =
        post("{ \"preferences\" : { \"a\" : [ 1, 2 ], \"b\" : 1 },\n  \"query\" : \"alpha steady question\" }").await;
    assert_eq!((same.status_code, json_body(&same)["query_id"].clone()), (200, id));
    // A different value is a different request, however it is spaced.
    let different = post(r#"{ "query": "alpha steady question", "preferences": {"a": [2, 1], "b": 1} }"#).await;
    assert_eq!(different.status_code, 409, "{}", text_body(&different));
    assert_eq!(json_body(&different)["error"]["code"], "conflict");
}
