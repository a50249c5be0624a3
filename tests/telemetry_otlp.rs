//! Traces leave the process over OTLP/HTTP: a small OTLP receiver on 127.0.0.1 (this test)
//! gets the spans of a real query run through intake, router, worker and synthesizer, and the
//! spans form one tree per query, linked across the queue hops by the `traceparent` the
//! messages carry, with the query id as the trace id.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_engine::telemetry::otlp::{flush, trace_id_of_query, OtlpConfig, OtlpLayer};
use switchyard_tests::*;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// What the receiver got: (content type, body) per request.
type Received = Arc<Mutex<Vec<(String, Value)>>>;

async fn receive(State(got): State<Received>, headers: HeaderMap, body: Bytes) -> &'static str {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    got.lock().expect("lock").push((content_type, body));
    "{}"
}

/// Start the OTLP receiver; returns its base URL and what it receives.
async fn start_receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let app = axum::Router::new().route("/v1/traces", axum::routing::post(receive)).with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), got)
}

#[derive(Debug, Clone)]
struct Span {
    trace: String,
    id: String,
    parent: Option<String>,
    name: String,
    kind: i64,
    start: u128,
    end: u128,
    attributes: HashMap<String, String>,
}

fn spans_of(got: &Received) -> Vec<Span> {
    let mut out = Vec::new();
    for (_, body) in got.lock().expect("lock").iter() {
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    let attributes = s["attributes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| {
                            let v = &a["value"];
                            let text = v["stringValue"].as_str().or(v["intValue"].as_str()).map(str::to_string);
                            (a["key"].as_str().unwrap_or_default().to_string(), text.unwrap_or_else(|| v.to_string()))
                        })
                        .collect();
                    out.push(Span {
                        trace: s["traceId"].as_str().unwrap_or_default().to_string(),
                        id: s["spanId"].as_str().unwrap_or_default().to_string(),
                        parent: s["parentSpanId"].as_str().map(str::to_string),
                        name: s["name"].as_str().unwrap_or_default().to_string(),
                        kind: s["kind"].as_i64().unwrap_or(0),
                        start: s["startTimeUnixNano"].as_str().and_then(|t| t.parse().ok()).unwrap_or(0),
                        end: s["endTimeUnixNano"].as_str().and_then(|t| t.parse().ok()).unwrap_or(0),
                        attributes,
                    });
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_is_one_otlp_trace_whose_spans_follow_the_flow_across_the_queues() {
    // GIVEN an OTLP receiver and the exporter configured from OTEL_EXPORTER_OTLP_ENDPOINT.
    let (endpoint, got) = start_receiver().await;
    let config =
        OtlpConfig::from_vars("switchyard-test", |k| (k == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| endpoint.clone()))
            .expect("valid settings")
            .expect("export configured");
    assert_eq!(config.traces_url, format!("{endpoint}/v1/traces"));
    let layer = OtlpLayer::start(config).expect("exporter starts").with_filter(
        tracing_subscriber::filter::Targets::new()
            .with_target(switchyard_engine::telemetry::otlp::SPAN_TARGET, tracing::Level::INFO),
    );
    tracing_subscriber::registry().with(layer).init();

    // WHEN a question runs through the whole engine (two agents, then synthesis).
    let question = "Which regions are underperforming against benchmark on market share?";
    let h = Harness::start(shipped_manifest());
    let r = h.post(question, "analyst-1", "").await;
    assert_eq!(r.status_code, 202, "{}", text_body(&r));
    let query_id = json_body(&r)["query_id"].as_str().expect("id").to_string();
    let output = h.output(&query_id).await;
    assert_eq!(output.agents_dispatched, ["gap_analyzer", "resource_optimizer"]);
    let trace = trace_id_of_query(&query_id);
    let mut spans = Vec::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        flush(Duration::from_secs(5)).await;
        spans = spans_of(&got).into_iter().filter(|s| s.trace == trace).collect();
        if spans.iter().any(|s| s.name == "synthesize") {
            break;
        }
    }

    // THEN the receiver got OTLP JSON on /v1/traces, every span of the query in one trace …
    assert!(got.lock().expect("lock").iter().all(|(ct, _)| ct == "application/json"));
    assert_eq!(trace, query_id.replace('-', ""), "the trace id is the query id");
    let count = |name: &str| spans.iter().filter(|s| s.name == name).count();
    assert_eq!(count("submit"), 1, "{spans:#?}");
    assert_eq!(count("route"), 1);
    assert_eq!(count("run_dispatch"), 2);
    assert_eq!(count("synthesize"), 1);
    assert!(count("sqs_record") >= 4, "one consumer span per message handled");

    // … forming one tree rooted at intake's `submit` span (a server span) …
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    assert_eq!(by_id.len(), spans.len(), "span ids are unique");
    let roots: Vec<&Span> = spans.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(roots.len(), 1, "one root: {roots:#?}");
    assert_eq!((roots[0].name.as_str(), roots[0].kind), ("submit", 2));
    for s in &spans {
        assert!(s.start <= s.end, "{s:?}");
        if let Some(p) = &s.parent {
            let parent = by_id.get(p.as_str()).unwrap_or_else(|| panic!("{} has a parent outside the trace", s.name));
            assert!(parent.start <= s.start, "{} starts before its parent {}", s.name, parent.name);
        }
    }

    // … whose shape is the flow: submit → router → route → worker → run_dispatch → synthesizer.
    let parent_of = |s: &Span| by_id[s.parent.as_deref().expect("has a parent")];
    let one = |name: &str| spans.iter().find(|s| s.name == name).expect(name);
    let route = one("route");
    let router_record = parent_of(route);
    assert_eq!((router_record.name.as_str(), router_record.kind), ("sqs_record", 5));
    assert_eq!(router_record.attributes["function"], "router");
    assert_eq!(parent_of(router_record).name, "submit", "the route job was sent from intake's span");
    for run in spans.iter().filter(|s| s.name == "run_dispatch") {
        let record = parent_of(run);
        assert_eq!(record.attributes["function"], "agent-worker");
        assert_eq!(parent_of(record).id, route.id, "each dispatch was sent from the router's span");
        assert!(run.attributes.contains_key("dispatch_id"));
    }
    let synth = one("synthesize");
    let record = parent_of(synth);
    assert_eq!(record.attributes["function"], "synthesizer");
    assert_eq!(
        parent_of(record).name,
        "run_dispatch",
        "the synth job was sent by the worker that completed the fan-in"
    );

    // AND no span carries what the user asked.
    for s in &spans {
        assert!(s.attributes.values().all(|v| !v.contains("underperforming")), "{s:?}");
    }
}
