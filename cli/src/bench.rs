//! `switchyard bench [suite]`: figures, never assertions.
//!
//! # Suites
//! - `classify`: median and p99 per query of the embedded classifier (`classify_cmd`).
//! - `pipeline`: the whole system in one process on the in-memory adapters, with the real
//!   pollers, instant builtin agents and every store write: queries/s and end-to-end latency
//!   (intake handler called → output written) for k = 1..4 agents per query.
//! - `requests`: the same flow against a local SQS/DynamoDB endpoint (`AWS_ENDPOINT_URL`,
//!   see `scripts/moto.sh`): requests per query counted by the adapters, handler durations, and
//!   the cost per million queries at us-east-1 prices next to Step Functions Standard.
//! - `cold-start`: each function binary's init time (spawn → its first
//!   `GET /2018-06-01/runtime/invocation/next` on a local Lambda Runtime API) and peak RSS.
//! - `ttft` ([`ttft`]): time to first token of a streamed answer, embedded, with
//!   the scripted model at a fixed pace.
//! - `retrieval` ([`retrieval`]): a retriever's index build, file size, load and
//!   query latency (default: the rag-manager example's corpus).
//! - `routing` ([`routing`]): the trained router on a public intent benchmark (CLINC150), by
//!   its protocol: in-scope accuracy, out-of-scope recall, refusals, latency, training time,
//!   artifact size and load time.
//! - `all`: every suite; `requests` only when `AWS_ENDPOINT_URL` is set.

mod cold_start;
mod context;
pub mod cost;
mod pipeline;
mod requests;
mod retrieval;
mod routing;
mod ttft;

use crate::backend::api_event;

use aws_lambda_events::encodings::Body;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard_agents::Agents;
use switchyard_engine::handlers::{handle_http, handle_sqs, Function};
use switchyard_engine::memory::{MemoryQueue, MemoryStore};
use switchyard_engine::ports::{Clock, EventKind, Queue, Store, StoreError, TokioClock};
use switchyard_engine::{pollers::function_for, pollers::sqs_event, pollers::start, pollers::PollerConfig};
use switchyard_engine::{Deps, EngineSettings};
use switchyard_model::contracts::{OrchestratorOutput, OutputStatus};
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::{queue_url_env, Topology};
use switchyard_testkit::hooked::{Applied, HookedStore, StoreHooks, StoreOp};
use tokio::sync::oneshot;

/// The manifest of the `pipeline` and `requests` suites: intents k1..k4 with 1..4 instant agents.
pub const K_AGENTS_MANIFEST: &str = include_str!("../../bench/manifests/k-agents.yaml");
const K_AGENTS_FILE: &str = "bench/manifests/k-agents.yaml";

/// The question that dispatches k agents under [`K_AGENTS_MANIFEST`].
const QUESTIONS: [(usize, &str); 4] = [
    (1, "alpha single agent"),
    (2, "bravo pair of agents"),
    (3, "charlie trio of agents"),
    (4, "delta quartet of agents"),
];

/// The four Lambda binaries.
pub const FUNCTIONS: [&str; 4] = ["intake", "router", "agent-worker", "synthesizer"];

/// The binaries `cold-start` measures: the pipeline's functions and the live events endpoint.
pub const COLD_START_FUNCTIONS: [&str; 5] = ["intake", "router", "agent-worker", "synthesizer", "events-stream"];

/// The public JWKS the events-stream function is started with (one P-256 key, generated for
/// the benchmark): init parses it, as it parses the issuer's real keys on Lambda.
const BENCH_JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"bench","alg":"ES256","use":"sig","x":"N1ehLqzf-nkSpHTAE4KS32ZPe7Tv2QqbRLnv_b741V4","y":"AB5WJGuWZ3GNSMbSgJtEYtxihY8wt-ebEqbvHcefyXw"}]}"#;

/// Options of `switchyard bench`.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Manifest for `classify` and `retrieval`.
    pub manifest: Option<PathBuf>,
    /// JSON lines instead of tables (pipeline, requests, cold-start).
    pub json: bool,
    /// Queries per k (pipeline; requests uses its own small default when this is unset).
    pub queries: Option<usize>,
    /// Queries in flight at once (pipeline).
    pub concurrency: usize,
    /// Only this k (pipeline, requests).
    pub k: Option<usize>,
    /// Process starts per binary (cold-start).
    pub repeat: usize,
    /// The benchmark (routing): `clinc150`, or a path to its `data_full.json` or folder.
    pub dataset: Option<PathBuf>,
    /// Training queries per intent (routing): the first N; all when unset.
    pub shots: Option<usize>,
    /// Also score the test split (routing): once per change, never while choosing settings.
    pub report_test: bool,
    /// The cascade's sentence encoder folder (routing).
    pub encoder: Option<PathBuf>,
    /// The cascade's doubt for the test split (routing; default `classifier.encoder.doubt`'s).
    pub doubt: Option<f64>,
}

/// Runs a suite and prints its table; returns the exit code.
pub async fn run(suite: &str, options: &BenchOptions) -> anyhow::Result<u8> {
    match suite {
        "classify" => {
            let manifest = crate::load_manifest(options.manifest.as_ref())?;
            println!("{}", crate::classify_cmd::run_bench(&manifest));
            Ok(0)
        }
        "pipeline" => pipeline::pipeline(options).await,
        "requests" => requests::requests(options).await,
        "cold-start" => cold_start::cold_start(options),
        "retrieval" => retrieval::run(options),
        "context" => Ok(context::run(options.json)),
        "ttft" => ttft::run(options).await,
        "routing" => routing::run(options),
        "all" => {
            let mut code = 0;
            for suite in ["classify", "pipeline", "ttft", "cold-start", "retrieval", "context"] {
                code = code.max(Box::pin(run(suite, options)).await?);
            }
            if requests::endpoint().is_some() {
                code = code.max(requests::requests(options).await?);
            } else {
                println!("requests: skipped (AWS_ENDPOINT_URL is not set; see `switchyard bench requests`)");
            }
            Ok(code)
        }
        other => Err(anyhow::anyhow!(
            "unknown benchmark `{other}`; available: classify, pipeline, ttft, requests, cold-start, retrieval, context, all"
        )),
    }
}

fn k_manifest(text: &str) -> anyhow::Result<Arc<Manifest>> {
    Ok(Arc::new(Manifest::from_yaml(text, K_AGENTS_FILE).map_err(|e| anyhow::anyhow!("{e}"))?))
}

fn selected(options: &BenchOptions) -> Vec<(usize, &'static str)> {
    QUESTIONS.iter().copied().filter(|(k, _)| options.k.is_none_or(|only| only == *k)).collect()
}

/// The value at quantile `q` of sorted samples (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn body_text(body: &Option<Body>) -> String {
    match body {
        Some(Body::Text(t)) => t.clone(),
        Some(Body::Binary(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

/// Submit `question` through the intake handler; the query id.
///
/// The request body is written and the 202 read through small typed structs rather than
/// `serde_json::Value`: the client is inside the instructions-per-query figure, and reading the
/// answer into a `Value` (a map and a string per field) cost it about 12,000 instructions a query.
pub(crate) async fn submit(deps: &Deps, question: &str) -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    struct Request<'a> {
        query: &'a str,
    }
    #[derive(serde::Deserialize)]
    struct Accepted {
        query_id: Option<String>,
    }
    let headers = [("content-type".to_string(), "application/json".to_string())];
    let body = serde_json::to_string(&Request { query: question })?;
    let request = api_event("POST", "/v1/queries", "", &headers, Some(body), Some(("bench-user", "")))?;
    let response = handle_http(deps, request).await;
    let text = body_text(&response.body);
    anyhow::ensure!(response.status_code == 202, "intake answered {}: {text}", response.status_code);
    let accepted: Accepted = serde_json::from_str(&text)?;
    accepted.query_id.ok_or_else(|| anyhow::anyhow!("no query_id in {text}"))
}

#[cfg(test)]
mod tests {
    use super::cold_start::*;
    use super::cost::*;
    use super::requests::*;
    use super::*;

    #[test]
    fn an_init_is_reported_as_a_multiple_of_the_bare_binarys() {
        assert_eq!(init_ratio(6.0, 2.0), 3.0);
        assert_eq!(init_ratio(1.0, 2.0), 0.5);
        assert_eq!(init_ratio(5.0, 0.0), 0.0);
    }

    #[test]
    fn the_equivalent_state_machine_takes_k_plus_5_transitions() {
        assert_eq!((1..=4).map(step_functions_transitions).collect::<Vec<_>>(), [6, 7, 8, 9]);
    }

    #[test]
    fn step_functions_costs_25_dollars_per_million_transitions() {
        let cost = cost_per_million(&Usage::default(), 3, &US_EAST_1);
        assert_eq!(cost.step_functions, 200.0);
        assert_eq!(cost.total, 0.0);
    }

    #[test]
    fn every_line_of_the_cost_is_its_units_times_its_price() {
        let usage = Usage { invocations: 7.0, gb_seconds: 0.01, sqs_requests: 18.0, wru: 10.0, rru: 8.0, wall_ms: 0.0 };
        let cost = cost_per_million(&usage, 3, &US_EAST_1);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(cost.lambda, 7.0 * 0.20 + 0.01 * 1e6 * 0.000_013_333_4), "{cost:?}");
        assert!(close(cost.sqs, 18.0 * 0.40), "{cost:?}");
        assert!(close(cost.dynamodb, 10.0 * 0.625 + 8.0 * 0.125), "{cost:?}");
        assert!(close(cost.total, cost.lambda + cost.sqs + cost.dynamodb), "{cost:?}");
    }

    #[test]
    fn express_costs_one_request_plus_its_duration_in_100_ms_steps_at_64_mb() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let at = |wall_ms: f64| cost_per_million(&Usage { wall_ms, ..Usage::default() }, 3, &US_EAST_1);
        let step = 0.1 * 64.0 / 1024.0 * 0.000_016_67 * 1e6;
        assert!(close(at(0.0).step_functions_express, 1.0 + step), "a 100 ms minimum");
        assert!(close(at(100.0).step_functions_express, 1.0 + step));
        assert!(close(at(100.5).step_functions_express, 1.0 + 2.0 * step), "rounded up");
    }

    #[test]
    fn the_latency_model_prices_each_call_and_each_invocation() {
        let calls =
            CallCounts { invocations: 2.0, ddb_reads: 3.0, ddb_writes: 4.0, ddb_transacts: 1.0, sqs_sends: 5.0 };
        let expected = 3.0 * 5.0 + 4.0 * 7.0 + 15.0 + 5.0 * 8.0 + 2.0 * 2.5;
        assert!((LATENCY.function_ms(&calls) - expected).abs() < 1e-9);
        assert_eq!(LATENCY.function_ms(&CallCounts::default()), 0.0);
    }

    #[test]
    fn the_bench_manifest_is_valid_and_routes_each_question_to_its_k() {
        let manifest = k_manifest(K_AGENTS_MANIFEST).expect("valid");
        let classifier = switchyard_core::classify::Classifier::new(&manifest);
        for (k, question) in QUESTIONS {
            assert_eq!(classifier.classify(question).intent, format!("k{k}"));
        }
        assert!(k_manifest(&K_AGENTS_MANIFEST.replace("deadline: 600s", "deadline: 2s")).is_ok());
    }

    #[test]
    fn a_dynamodb_item_size_counts_names_and_values() {
        use aws_sdk_dynamodb::types::AttributeValue as A;
        let item = HashMap::from([("pk".to_string(), A::S("Q#abc".into())), ("n".to_string(), A::N("12".into()))]);
        assert_eq!(item_size(&item), 2 + 5 + 1 + 2);
    }
}
