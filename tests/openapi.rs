//! `docs/openapi.json` and the intake handler cannot drift apart:
//! - the document is valid OpenAPI 3.1 (openapi-spec-validator);
//! - `/openapi.json` serves exactly that file;
//! - every documented path answers its documented methods and refuses the others with 405, and
//!   undocumented paths are 404;
//! - every response the handler gives in the scenarios below (success, replay, progress, events
//!   as JSON and as SSE, and each error) has a documented status and content type, and its body
//!   validates against the documented schema (Python's jsonschema, Draft 2020-12);
//! - every error code the one error mapping can produce is in the documented enum.
//!
//! schemathesis then fuzzes `switchyard serve` against the same document (tests/schemathesis.sh).

#[path = "python.rs"]
mod python;

use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use switchyard_engine::handlers::{error_response, handle_http, OPENAPI_JSON};
use switchyard_engine::intake::IntakeError;
use switchyard_engine::EngineSettings;
use switchyard_tests::*;

fn document() -> Value {
    serde_json::from_str(OPENAPI_JSON).expect("docs/openapi.json is JSON")
}

fn doc_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json")
}

/// `/v1/queries/{id}` with a concrete id.
fn concrete(template: &str, id: &str) -> String {
    template.replace("{id}", id)
}

/// One observed response, keyed to the documented operation it answers.
struct Sample {
    path: &'static str,
    method: &'static str,
    response: ApiGatewayV2httpResponse,
}

fn content_type(r: &ApiGatewayV2httpResponse) -> String {
    r.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

fn request(method: &str, path: &str, query: &str, body: Option<&str>, user: &str) -> ApiGatewayV2httpRequest {
    api_request(method, path, query, body, user, "")
}

fn unauthenticated(method: &str, path: &str, body: Option<&str>) -> ApiGatewayV2httpRequest {
    let mut r = request(method, path, "", body, "x");
    r.request_context.authorizer = None;
    r
}

const VALIDATE_SAMPLES: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
doc = json.load(open(sys.argv[1]))
samples = json.load(open(sys.argv[2]))
problems = []
for s in samples:
    where = f"{s['method'].upper()} {s['path']} -> {s['status']}"
    op = doc["paths"][s["path"]][s["method"]]
    response = op["responses"].get(str(s["status"]))
    if response is None:
        problems.append(f"{where}: status not documented")
        continue
    media = response.get("content", {}).get(s["content_type"])
    if media is None:
        problems.append(f"{where}: content type {s['content_type']!r} not documented")
        continue
    if s["content_type"] != "application/json":
        continue
    schema = dict(media["schema"])
    schema["components"] = doc["components"]
    for error in Draft202012Validator(schema).iter_errors(s["body"]):
        problems.append(f"{where}: {error.message} at {list(error.absolute_path)}")
print(len(samples))
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
"#;

#[test]
fn the_document_is_valid_openapi_3_1() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    python::run(
        "import sys\nfrom openapi_spec_validator import validate\nfrom openapi_spec_validator.readers import read_from_filename\n\
         spec, _ = read_from_filename(sys.argv[1])\nvalidate(spec)\n",
        &[&doc_path()],
    )
    .unwrap_or_else(|e| panic!("openapi-spec-validator refuses docs/openapi.json:\n{e}"));
}

#[test]
fn the_validator_refuses_a_broken_document() {
    // The check above can fail: the same call on a document with a dangling $ref.
    let broken = document().to_string().replace("#/components/schemas/ErrorBody", "#/components/schemas/Nope");
    let file = std::env::temp_dir().join(format!("switchyard-openapi-broken-{}.json", std::process::id()));
    std::fs::write(&file, broken).expect("write");
    let result = python::run(
        "import sys\nfrom openapi_spec_validator import validate\nfrom openapi_spec_validator.readers import read_from_filename\n\
         spec, _ = read_from_filename(sys.argv[1])\nvalidate(spec)\n",
        &[&file],
    );
    let _ = std::fs::remove_file(&file);
    assert!(result.is_err(), "a dangling $ref must be refused");
}

#[tokio::test(start_paused = true)]
async fn openapi_json_serves_the_document_in_the_repo_without_identity() {
    let system =
        switchyard_agents::embedded(Arc::new(manifest_fixture("manifests/scripted.yaml")), EngineSettings::default());
    let r = handle_http(&system.deps, unauthenticated("GET", "/openapi.json", None)).await;
    assert_eq!(r.status_code, 200);
    assert_eq!(content_type(&r), "application/json");
    let on_disk = std::fs::read_to_string(doc_path()).expect("docs/openapi.json");
    assert_eq!(text_body(&r), on_disk, "the served document is the file in the repo");
    let r = handle_http(&system.deps, unauthenticated("POST", "/openapi.json", Some("{}"))).await;
    assert_eq!(r.status_code, 405);
}

#[tokio::test(start_paused = true)]
async fn every_documented_route_answers_its_methods_and_no_other() {
    let system =
        switchyard_agents::embedded(Arc::new(manifest_fixture("manifests/scripted.yaml")), EngineSettings::default());
    let doc = document();
    let paths = doc["paths"].as_object().expect("paths");
    let id = uuid::Uuid::new_v4().to_string();
    for (template, item) in paths {
        let path = concrete(template, &id);
        for method in ["get", "post", "put", "patch", "delete"] {
            let documented = item.get(method).is_some();
            let r = handle_http(&system.deps, request(&method.to_uppercase(), &path, "", Some("{}"), "u1")).await;
            let body = json_body(&r);
            if documented {
                assert_ne!(r.status_code, 405, "{method} {template} is documented but refused: {body}");
                assert_ne!(body["error"]["message"], "no such route", "{method} {template}");
            } else {
                assert_eq!(r.status_code, 405, "{method} {template} is not documented but answered: {body}");
            }
        }
    }
    for undocumented in
        ["/", "/v1", "/v2/queries", &format!("/v1/queries/{id}/feedback/x"), "/v1/signals/x", "/v1/queries/a/b/c"]
    {
        let r = handle_http(&system.deps, request("GET", undocumented, "", None, "u1")).await;
        assert_eq!(
            (r.status_code, json_body(&r)["error"]["message"].clone()),
            (404, json!("no such route")),
            "{undocumented}"
        );
    }
}

#[test]
fn every_error_code_the_handler_maps_is_documented() {
    let doc = document();
    let documented: Vec<String> = doc["components"]["schemas"]["ErrorBody"]["properties"]["error"]["properties"]
        ["code"]["enum"]
        .as_array()
        .expect("enum")
        .iter()
        .map(|c| c.as_str().expect("string").to_string())
        .collect();
    let errors = [
        IntakeError::Invalid(switchyard_core::admission::ValidationError { errors: vec![] }),
        IntakeError::Unauthenticated,
        IntakeError::Forbidden { intent: "i".into(), role: "r".into() },
        IntakeError::RoleRequired { what: "training signals", roles: vec!["r".into()] },
        IntakeError::NotFound,
        IntakeError::Conflict("c".into()),
        IntakeError::Unavailable("u".into()),
        IntakeError::UnknownRoute,
        IntakeError::MethodNotAllowed { allowed: "GET" },
        IntakeError::TooLarge { size: Some(2), limit: 1 },
        IntakeError::RateLimited { retry_after: std::time::Duration::from_millis(1500) },
        IntakeError::NotReady { query_id: "q".into(), waited: std::time::Duration::from_secs(1) },
        IntakeError::BodyTimeout { limit: std::time::Duration::from_secs(10) },
        IntakeError::UnknownHost,
    ];
    for e in &errors {
        let r = error_response(e, "req-1");
        let code = json_body(&r)["error"]["code"].as_str().expect("code").to_string();
        assert!(documented.contains(&code), "{code} is not in the documented enum {documented:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn every_response_in_the_scenarios_matches_the_document() {
    let mut scripted = manifest_fixture("manifests/scripted.yaml");
    scripted.signals.export_roles = vec!["trainer".into()];
    let h = Harness::start(scripted);
    let deps = &h.system.deps;
    let mut samples: Vec<Sample> = Vec::new();
    let post = |body: &str| request("POST", "/v1/queries", "", Some(body), "u1");
    let q = json!({ "query": "alpha steady question" }).to_string();

    // POST: accepted, replayed, conflict, invalid, unauthenticated, forbidden, waited.
    let mut keyed = post(&q);
    keyed.headers.insert("idempotency-key", "key-1".parse().expect("header"));
    let accepted = handle_http(deps, keyed.clone()).await;
    assert_eq!(accepted.status_code, 202, "{}", text_body(&accepted));
    let id = json_body(&accepted)["query_id"].as_str().expect("id").to_string();
    samples.push(Sample { path: "/v1/queries", method: "post", response: accepted });
    let replay = handle_http(deps, keyed.clone()).await;
    assert_eq!(replay.status_code, 200);
    samples.push(Sample { path: "/v1/queries", method: "post", response: replay });
    let mut conflict = post(&json!({ "query": "alpha steady question, again" }).to_string());
    conflict.headers.insert("idempotency-key", "key-1".parse().expect("header"));
    samples.push(Sample { path: "/v1/queries", method: "post", response: handle_http(deps, conflict).await });
    for bad in ["", "[]", "{\"query\": 5}", "{\"query\": \"  \"}", "{\"nope\": 1}", "{\"parsed_query\": {}}"] {
        samples.push(Sample { path: "/v1/queries", method: "post", response: handle_http(deps, post(bad)).await });
    }
    samples.push(Sample {
        path: "/v1/queries",
        method: "post",
        response: handle_http(deps, unauthenticated("POST", "/v1/queries", Some(&q))).await,
    });
    let guarded = json!({ "query": "papa guarded question" }).to_string();
    samples.push(Sample { path: "/v1/queries", method: "post", response: handle_http(deps, post(&guarded)).await });
    let waited = handle_http(deps, request("POST", "/v1/queries", "wait=20", Some(&q), "u1")).await;
    assert_eq!(waited.status_code, 200, "{}", text_body(&waited));
    samples.push(Sample { path: "/v1/queries", method: "post", response: waited });
    samples.push(Sample {
        path: "/v1/queries",
        method: "post",
        response: handle_http(deps, request("POST", "/v1/queries", "wait=99", Some(&q), "u1")).await,
    });

    // GET one query: done, waited, not found, someone else's, bad wait, unauthenticated.
    let one = format!("/v1/queries/{id}");
    let done = handle_http(deps, request("GET", &one, "wait=20", None, "u1")).await;
    assert_eq!(done.status_code, 200, "{}", text_body(&done));
    samples.push(Sample { path: "/v1/queries/{id}", method: "get", response: done });
    for (path, query, user) in
        [(one.as_str(), "", "u2"), ("/v1/queries/not-a-uuid", "", "u1"), (one.as_str(), "wait=x", "u1")]
    {
        let r = handle_http(deps, request("GET", path, query, None, user)).await;
        samples.push(Sample { path: "/v1/queries/{id}", method: "get", response: r });
    }
    samples.push(Sample {
        path: "/v1/queries/{id}",
        method: "get",
        response: handle_http(deps, unauthenticated("GET", &one, None)).await,
    });

    // Events as JSON and as SSE, and not found.
    let events = format!("{one}/events");
    samples.push(Sample {
        path: "/v1/queries/{id}/events",
        method: "get",
        response: handle_http(deps, request("GET", &events, "", None, "u1")).await,
    });
    let mut sse = request("GET", &events, "", None, "u1");
    sse.headers.insert("accept", "text/event-stream".parse().expect("header"));
    let sse = handle_http(deps, sse).await;
    assert!(text_body(&sse).contains("event: final"), "{}", text_body(&sse));
    samples.push(Sample { path: "/v1/queries/{id}/events", method: "get", response: sse });
    samples.push(Sample {
        path: "/v1/queries/{id}/events",
        method: "get",
        response: handle_http(deps, request("GET", &events, "", None, "u2")).await,
    });

    // Feedback: first (201), replacing (200), invalid, someone else's, too large.
    let feedback = format!("{one}/feedback");
    for (body, user) in [
        (r#"{"rating": 4}"#.to_string(), "u1"),
        (r#"{"rating": 2, "correct_intent": "flaky_q", "comment": "not this one"}"#.to_string(), "u1"),
        (r#"{"rating": 0}"#.to_string(), "u1"),
        (r#"{"rating": 5}"#.to_string(), "u2"),
        (json!({ "rating": 5, "comment": "z".repeat(9_000) }).to_string(), "u1"),
    ] {
        let r = handle_http(deps, request("POST", &feedback, "", Some(&body), user)).await;
        samples.push(Sample { path: "/v1/queries/{id}/feedback", method: "post", response: r });
    }
    // Approval: nothing waits on a finished query (409), someone else's (404), a bad
    // decision (400), too large (413).
    let approval = format!("{one}/approval");
    for (body, user) in [
        (r#"{"decision": "approve"}"#.to_string(), "u1"),
        (r#"{"decision": "approve"}"#.to_string(), "u2"),
        (r#"{"decision": "later"}"#.to_string(), "u1"),
        (json!({ "decision": "reject", "note": "z".repeat(70_000) }).to_string(), "u1"),
    ] {
        let r = handle_http(deps, api_request("POST", &approval, "", Some(&body), user, "approver")).await;
        samples.push(Sample { path: "/v1/queries/{id}/approval", method: "post", response: r });
    }
    // Signals: a page for an export role, refused for others, a bad limit.
    for (query, roles) in [("limit=1", "trainer"), ("", "analyst"), ("limit=0", "trainer")] {
        let r = handle_http(deps, api_request("GET", "/v1/signals", query, None, "u9", roles)).await;
        samples.push(Sample { path: "/v1/signals", method: "get", response: r });
    }

    // A query still running: progress (202) from a system with no workers.
    let idle =
        switchyard_agents::embedded(Arc::new(manifest_fixture("manifests/scripted.yaml")), EngineSettings::default());
    let r = handle_http(&idle.deps, post(&q)).await;
    let idle_id = json_body(&r)["query_id"].as_str().expect("id").to_string();
    let progress = handle_http(&idle.deps, request("GET", &format!("/v1/queries/{idle_id}"), "", None, "u1")).await;
    assert_eq!(progress.status_code, 202, "{}", text_body(&progress));
    samples.push(Sample { path: "/v1/queries/{id}", method: "get", response: progress });
    // Feedback before it finished: 409.
    let early = handle_http(
        &idle.deps,
        request("POST", &format!("/v1/queries/{idle_id}/feedback"), "", Some(r#"{"rating": 3}"#), "u1"),
    )
    .await;
    assert_eq!(early.status_code, 409, "{}", text_body(&early));
    samples.push(Sample { path: "/v1/queries/{id}/feedback", method: "post", response: early });

    // The 503 shape, from the one error mapping.
    samples.push(Sample {
        path: "/v1/queries",
        method: "post",
        response: error_response(&IntakeError::Unavailable("store down".into()), "req-1"),
    });

    // The answers `switchyard serve` gives before the handler: a body slower than the body
    // timeout (408) and a Host it does not answer for (421), on every route, in the route's
    // error shape.
    for (method, path) in switchyard_engine::handlers::HTTP_ROUTES {
        let method = if method == "POST" { "post" } else { "get" };
        for e in [IntakeError::BodyTimeout { limit: std::time::Duration::from_secs(10) }, IntakeError::UnknownHost] {
            let response = if switchyard_engine::handlers::is_openai_path(path) {
                switchyard_engine::handlers::openai_error_response(&e, "req-1")
            } else {
                error_response(&e, "req-1")
            };
            samples.push(Sample { path, method, response });
        }
    }

    // The OpenAI-compatible routes: a completion, a (buffered) stream, the model list, and
    // errors in the OpenAI shape, the 504 of an answer not ready among them.
    let chat = |body: Value, user: &str| request("POST", "/v1/chat/completions", "", Some(&body.to_string()), user);
    let ask =
        json!({ "model": "scripted-scenarios", "messages": [{ "role": "user", "content": "alpha steady question" }] });
    let completion = handle_http(deps, chat(ask.clone(), "u1")).await;
    assert_eq!(completion.status_code, 200, "{}", text_body(&completion));
    samples.push(Sample { path: "/v1/chat/completions", method: "post", response: completion });
    let mut streamed_body = ask.clone();
    streamed_body["stream"] = json!(true);
    let streamed = handle_http(deps, chat(streamed_body, "u1")).await;
    assert_eq!(content_type(&streamed), "text/event-stream");
    assert!(text_body(&streamed).ends_with("data: [DONE]\n\n"), "{}", text_body(&streamed));
    samples.push(Sample { path: "/v1/chat/completions", method: "post", response: streamed });
    let bad_role = json!({ "model": "scripted-scenarios", "messages": [{ "role": "wizard", "content": "hi" }] });
    samples.push(Sample {
        path: "/v1/chat/completions",
        method: "post",
        response: handle_http(deps, chat(bad_role, "u1")).await,
    });
    samples.push(Sample {
        path: "/v1/chat/completions",
        method: "post",
        response: handle_http(deps, unauthenticated("POST", "/v1/chat/completions", Some(&ask.to_string()))).await,
    });
    samples.push(Sample {
        path: "/v1/chat/completions",
        method: "post",
        response: switchyard_engine::handlers::openai_error_response(
            &IntakeError::NotReady { query_id: "q".into(), waited: std::time::Duration::from_secs(25) },
            "req-1",
        ),
    });
    samples.push(Sample {
        path: "/v1/models",
        method: "get",
        response: handle_http(deps, request("GET", "/v1/models", "", None, "u1")).await,
    });

    let statuses: std::collections::BTreeSet<i64> = samples.iter().map(|s| s.response.status_code).collect();
    assert_eq!(
        statuses.into_iter().collect::<Vec<_>>(),
        vec![200, 201, 202, 400, 401, 403, 404, 408, 409, 413, 421, 503, 504],
        "the scenarios cover every status the handler gives"
    );
    let records: Vec<Value> = samples
        .iter()
        .map(|s| {
            let ct = content_type(&s.response);
            let body = if ct == "application/json" { json_body(&s.response) } else { Value::Null };
            json!({ "path": s.path, "method": s.method, "status": s.response.status_code, "content_type": ct, "body": body })
        })
        .collect();
    let file = std::env::temp_dir().join(format!("switchyard-openapi-samples-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::to_string(&records).expect("json")).expect("write samples");
    let result = python::run(VALIDATE_SAMPLES, &[&doc_path(), &file]);
    let _ = std::fs::remove_file(&file);
    let checked = result.unwrap_or_else(|e| panic!("responses that do not match docs/openapi.json:\n{e}"));
    assert_eq!(checked.trim(), records.len().to_string());
}

/// The `cargo lambda watch` routes in the workspace's Cargo.toml, as (method, path) pairs.
fn cargo_lambda_watch_routes() -> std::collections::BTreeSet<(String, String)> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml")).expect("Cargo.toml");
    let section = text.split("[workspace.metadata.lambda.watch.router]").nth(1).expect("the watch router section");
    let mut routes = std::collections::BTreeSet::new();
    for line in section.lines().take_while(|l| !l.starts_with('[')) {
        let Some((path, targets)) = line.split_once(" = ") else { continue };
        let path = path.trim().trim_matches('"').to_string();
        for method in targets.split("method = \"").skip(1) {
            let method = method.split('"').next().expect("closing quote");
            assert!(targets.contains("function = \"intake\""), "{path}: every route goes to intake");
            routes.insert((method.to_string(), path.clone()));
        }
    }
    routes
}

#[test]
fn every_route_the_handler_serves_is_documented_and_served_by_cargo_lambda_watch() {
    use switchyard_engine::handlers::HTTP_ROUTES;
    let served: std::collections::BTreeSet<(String, String)> =
        HTTP_ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    assert_eq!(cargo_lambda_watch_routes(), served, "Cargo.toml's [workspace.metadata.lambda.watch.router]");
    let doc = document();
    let documented: std::collections::BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("path item")
                .keys()
                .filter(|k| ["get", "post", "put", "patch", "delete"].contains(&k.as_str()))
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    assert!(undocumented.is_empty(), "served but not in docs/openapi.json: {undocumented:?}");
}
