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
//! - `ttft` ([`crate::bench_ttft`]): time to first token of a streamed answer, embedded, with
//!   the scripted model at a fixed pace.
//! - `retrieval` ([`crate::bench_retrieval`]): a retriever's index build, file size, load and
//!   query latency (default: the rag-manager example's corpus).
//! - `all`: every suite; `requests` only when `AWS_ENDPOINT_URL` is set.

use crate::ask::api_event;

use aws_lambda_events::encodings::Body;
use shared::adapters::hooked::{Applied, HookedStore, StoreHooks, StoreOp};
use shared::adapters::memory::{MemoryQueue, MemoryStore};
use shared::agents::Agents;
use shared::contracts::{OrchestratorOutput, OutputStatus};
use shared::engine::handlers::{handle_http, handle_sqs, Function};
use shared::engine::{Deps, EngineSettings};
use shared::manifest::Manifest;
use shared::ports::{Clock, EventKind, Queue, Store, StoreError, TokioClock};
use shared::system::{function_for, sqs_event, start, PollerConfig};
use shared::topology::{queue_url_env, Topology};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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
}

/// Runs a suite and prints its table; returns the exit code.
pub async fn run(suite: &str, options: &BenchOptions) -> anyhow::Result<u8> {
    match suite {
        "classify" => {
            let manifest = crate::load_manifest(options.manifest.as_ref())?;
            println!("{}", crate::classify_cmd::run_bench(&manifest));
            Ok(0)
        }
        "pipeline" => pipeline(options).await,
        "requests" => requests(options).await,
        "cold-start" => cold_start(options),
        "retrieval" => crate::bench_retrieval::run(options),
        "context" => Ok(crate::bench_context::run(options.json)),
        "ttft" => crate::bench_ttft::run(options).await,
        "all" => {
            let mut code = 0;
            for suite in ["classify", "pipeline", "ttft", "cold-start", "retrieval", "context"] {
                code = code.max(Box::pin(run(suite, options)).await?);
            }
            if endpoint().is_some() {
                code = code.max(requests(options).await?);
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

fn check_output(output: &OrchestratorOutput, k: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        output.status == OutputStatus::Success && output.agents_dispatched.len() == k,
        "expected a success with {k} agents, got {:?} with {:?}",
        output.status,
        output.agents_dispatched
    );
    Ok(())
}

// ------------------------------------------------------------------------------------------
// pipeline
// ------------------------------------------------------------------------------------------

enum Finish {
    Waiting(oneshot::Sender<Instant>),
    Done(Instant),
}

/// The in-memory store, telling waiters the instant a query's output is written, so the
/// benchmark needs no polling reads of its own.
struct FinishSignal {
    finishes: Mutex<HashMap<String, Finish>>,
}

impl FinishSignal {
    fn finishes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Finish>> {
        self.finishes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The instant the output of `query_id` was written.
    async fn finished(&self, query_id: &str) -> anyhow::Result<Instant> {
        let receiver = {
            let mut finishes = self.finishes();
            match finishes.remove(query_id) {
                Some(Finish::Done(at)) => return Ok(at),
                Some(Finish::Waiting(_)) | None => {
                    let (sender, receiver) = oneshot::channel();
                    finishes.insert(query_id.to_string(), Finish::Waiting(sender));
                    receiver
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), receiver)
            .await
            .map_err(|_| anyhow::anyhow!("query {query_id} did not finish within 60 s"))?
            .map_err(|_| anyhow::anyhow!("query {query_id}: waiter dropped"))
    }
}

impl StoreHooks for FinishSignal {
    fn after(&self, op: StoreOp<'_>, outcome: Result<Applied<'_>, &StoreError>) -> Result<(), StoreError> {
        let (StoreOp::FinishQuery(_, query), Ok(_)) = (op, outcome) else { return Ok(()) };
        let now = Instant::now();
        let mut finishes = self.finishes();
        match finishes.remove(&query.query_id) {
            Some(Finish::Waiting(sender)) => {
                let _ = sender.send(now);
            }
            _ => {
                finishes.insert(query.query_id.clone(), Finish::Done(now));
            }
        }
        Ok(())
    }
}

/// One row of the pipeline table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PipelineRow {
    /// Agents per query.
    pub k: usize,
    /// Queries timed.
    pub queries: usize,
    /// Queries in flight at once.
    pub concurrency: usize,
    /// Completed queries per second of wall time.
    pub queries_per_s: f64,
    /// Median end-to-end latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile end-to-end latency, microseconds.
    pub p99_us: f64,
    /// Store writes per query (single + transactional), as the in-memory store counts them.
    pub store_writes_per_query: f64,
}

/// `queries` closed-loop queries, `concurrency` at a time; the latency of each.
async fn load(
    deps: &Arc<Deps>,
    store: &Arc<HookedStore<FinishSignal>>,
    question: &'static str,
    queries: usize,
    concurrency: usize,
) -> anyhow::Result<(Vec<f64>, String)> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (deps, store, next) = (deps.clone(), store.clone(), next.clone());
        clients.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut last = String::new();
            while next.fetch_add(1, Ordering::Relaxed) < queries {
                let started = Instant::now();
                let id = submit(&deps, question).await?;
                let finished = store.hooks().finished(&id).await?;
                latencies.push(finished.saturating_duration_since(started).as_secs_f64() * 1e6);
                last = id;
            }
            anyhow::Ok((latencies, last))
        }));
    }
    let mut all = Vec::with_capacity(queries);
    let mut last = String::new();
    for client in clients {
        let (latencies, id) = client.await??;
        all.extend(latencies);
        if !id.is_empty() {
            last = id;
        }
    }
    Ok((all, last))
}

/// Run the embedded pipeline for one k on a fresh system.
pub async fn pipeline_row(
    k: usize,
    question: &'static str,
    queries: usize,
    concurrency: usize,
) -> anyhow::Result<PipelineRow> {
    let manifest = k_manifest(K_AGENTS_MANIFEST)?;
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let topology = Topology::for_manifest(&manifest);
    let memory = Arc::new(MemoryStore::new(clock.clone()));
    let store = Arc::new(HookedStore::new(memory.clone(), FinishSignal { finishes: Mutex::new(HashMap::new()) }));
    let queue = Arc::new(MemoryQueue::new(&topology));
    let agents = Arc::new(Agents::new(&manifest));
    let deps = Arc::new(Deps::new(manifest, store.clone(), queue, clock, agents, EngineSettings::default()));
    let _pollers = start(deps.clone(), &topology, PollerConfig::default());
    let warmup = (queries / 10).clamp(10, 500);
    load(&deps, &store, question, warmup, concurrency).await?;
    let before = memory.counts();
    let started = Instant::now();
    let (mut latencies, last) = load(&deps, &store, question, queries, concurrency).await?;
    let wall = started.elapsed().as_secs_f64();
    let after = memory.counts();
    let output = deps.store.get_output(&last).await?.ok_or_else(|| anyhow::anyhow!("no output for {last}"))?;
    check_output(&output, k)?;
    latencies.sort_by(f64::total_cmp);
    let writes = (after.writes - before.writes) + (after.transact_writes - before.transact_writes);
    Ok(PipelineRow {
        k,
        queries: latencies.len(),
        concurrency,
        queries_per_s: latencies.len() as f64 / wall,
        p50_us: quantile(&latencies, 0.5),
        p99_us: quantile(&latencies, 0.99),
        store_writes_per_query: writes as f64 / latencies.len().max(1) as f64,
    })
}

async fn pipeline(options: &BenchOptions) -> anyhow::Result<u8> {
    let queries = options.queries.unwrap_or(2_000);
    let mut rows = Vec::new();
    for (k, question) in selected(options) {
        let row = pipeline_row(k, question, queries, options.concurrency).await?;
        if options.json {
            println!("{}", serde_json::to_string(&row)?);
        }
        rows.push(row);
    }
    if !options.json {
        println!(
            "embedded pipeline ({K_AGENTS_FILE}: instant builtin agents, in-memory store and queues, real pollers; \
             {queries} queries per k, {} in flight)",
            options.concurrency
        );
        println!("{:>2} {:>12} {:>10} {:>10} {:>14}", "k", "queries/s", "p50 µs", "p99 µs", "writes/query");
        for r in &rows {
            println!(
                "{:>2} {:>12.0} {:>10.0} {:>10.0} {:>14.1}",
                r.k, r.queries_per_s, r.p50_us, r.p99_us, r.store_writes_per_query
            );
        }
    }
    Ok(0)
}

// ------------------------------------------------------------------------------------------
// requests and cost
// ------------------------------------------------------------------------------------------

/// Public us-east-1 prices, USD.
#[derive(Debug, Clone, Copy)]
pub struct Prices {
    /// Lambda on arm64, per GB-second (first tier).
    pub lambda_gb_second: f64,
    /// Lambda, per million requests (invocations).
    pub lambda_per_million_requests: f64,
    /// SQS standard queues, per million requests (each 64 KB chunk of a payload is a request).
    pub sqs_per_million_requests: f64,
    /// DynamoDB on-demand, per million write request units (1 KB; transactional: 2 per KB).
    pub dynamodb_per_million_wru: f64,
    /// DynamoDB on-demand, per million read request units (strongly consistent 4 KB read).
    pub dynamodb_per_million_rru: f64,
    /// Step Functions Standard, per million state transitions.
    pub step_functions_per_million_transitions: f64,
    /// Step Functions Express, per million requests (executions started).
    pub express_per_million_requests: f64,
    /// Step Functions Express, per GB-second of duration (first tier).
    pub express_gb_second: f64,
}

/// The prices used, as published for us-east-1 (see the README's Performance section).
pub const US_EAST_1: Prices = Prices {
    lambda_gb_second: 0.000_013_333_4,
    lambda_per_million_requests: 0.20,
    sqs_per_million_requests: 0.40,
    dynamodb_per_million_wru: 0.625,
    dynamodb_per_million_rru: 0.125,
    step_functions_per_million_transitions: 25.0,
    express_per_million_requests: 1.00,
    express_gb_second: 0.000_016_67,
};

/// Step Functions Express bills duration in 64 MB steps, at least one: its memory floor.
pub const EXPRESS_MEMORY_MB: f64 = 64.0;
/// Step Functions Express rounds each execution's duration up to 100 ms.
pub const EXPRESS_BILLING_STEP_MS: f64 = 100.0;

/// How long a function waits on each AWS call, in ms: the latency model that turns counted
/// requests into Lambda duration. These are typical in-region figures for small items and
/// messages (DynamoDB answers single-item requests in single-digit milliseconds; a transaction
/// coordinates several items and takes about twice as long; an SQS send is a few ms), chosen
/// on the high side and stated here rather than measured: the local endpoint's own latency
/// says nothing about AWS. Receives and deletes are made by Lambda's SQS pollers, outside the
/// function's billed time.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct LatencyModel {
    /// `GetItem`, `Query` (one page).
    pub ddb_read_ms: f64,
    /// `PutItem`, `UpdateItem`.
    pub ddb_write_ms: f64,
    /// `TransactWriteItems`.
    pub ddb_transact_ms: f64,
    /// `SendMessage`, `SendMessageBatch`.
    pub sqs_send_ms: f64,
    /// The handler's own work per invocation (parsing, planning, JSON), at 256 MB.
    pub compute_ms: f64,
    /// Lambda rounds each invocation up to the next millisecond: half a millisecond on average.
    pub rounding_ms: f64,
}

/// The latency model of the cost table.
pub const LATENCY: LatencyModel = LatencyModel {
    ddb_read_ms: 5.0,
    ddb_write_ms: 7.0,
    ddb_transact_ms: 15.0,
    sqs_send_ms: 8.0,
    compute_ms: 2.0,
    rounding_ms: 0.5,
};

/// Requests one query's function invocations made, per kind (averages).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CallCounts {
    /// Function invocations.
    pub invocations: f64,
    /// DynamoDB reads (`GetItem`, `Query` pages).
    pub ddb_reads: f64,
    /// DynamoDB single-item writes.
    pub ddb_writes: f64,
    /// DynamoDB transactions.
    pub ddb_transacts: f64,
    /// SQS send requests.
    pub sqs_sends: f64,
}

impl LatencyModel {
    /// Modeled function time of one query, ms (every invocation's waits and work, summed).
    pub fn function_ms(&self, c: &CallCounts) -> f64 {
        c.ddb_reads * self.ddb_read_ms
            + c.ddb_writes * self.ddb_write_ms
            + c.ddb_transacts * self.ddb_transact_ms
            + c.sqs_sends * self.sqs_send_ms
            + c.invocations * (self.compute_ms + self.rounding_ms)
    }
}

/// When the prices were taken.
pub const PRICES_TAKEN: &str = "2026-11-22";

/// Memory of every function in the SAM template, MB.
pub const FUNCTION_MEMORY_MB: f64 = 256.0;

/// State transitions of the Step Functions Standard state machine doing the same flow for k
/// agents when nothing fails: `Route` (Task: classify and plan) → `Agents` (Parallel, k
/// branches) → k × `Agent_i` (Task with Retry and Catch; the Catch's Pass state is entered only
/// on failure, a retry would add one transition) → `Synthesize` (Task) → `Band` (Choice on the
/// confidence) → `Answer` (Succeed): k + 5. The deadline is the execution's `TimeoutSeconds`,
/// free; the Lambda invocations behind the Tasks are not counted (in Switchyard's favour: SFN
/// would still pay them).
pub fn step_functions_transitions(k: u64) -> u64 {
    k + 5
}

/// What one query uses, averaged over the measured queries.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Usage {
    /// Lambda invocations (intake, router, workers, synthesizer, the deadline's synthesizer run).
    pub invocations: f64,
    /// Billed GB-seconds (each invocation rounded up to 1 ms, at [`FUNCTION_MEMORY_MB`]).
    pub gb_seconds: f64,
    /// Billed SQS requests: sends + receives that returned a message + deletes.
    pub sqs_requests: f64,
    /// DynamoDB write request units.
    pub wru: f64,
    /// DynamoDB read request units.
    pub rru: f64,
    /// Wall time of the query as modeled (for Step Functions Express's duration), ms.
    pub wall_ms: f64,
}

/// Cost per million queries, USD.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Cost {
    /// Lambda requests and duration.
    pub lambda: f64,
    /// SQS requests.
    pub sqs: f64,
    /// DynamoDB request units.
    pub dynamodb: f64,
    /// Sum of the three.
    pub total: f64,
    /// Step Functions Standard transitions for the same flow.
    pub step_functions: f64,
    /// Step Functions Express for the same flow: one request plus its duration (the same wall
    /// time, rounded up to 100 ms) at its 64 MB floor.
    pub step_functions_express: f64,
}

/// Cost per million queries of `usage`, and of Step Functions Standard for k agents.
pub fn cost_per_million(usage: &Usage, k: u64, prices: &Prices) -> Cost {
    let lambda =
        usage.invocations * prices.lambda_per_million_requests + usage.gb_seconds * 1e6 * prices.lambda_gb_second;
    let sqs = usage.sqs_requests * prices.sqs_per_million_requests;
    let dynamodb = usage.wru * prices.dynamodb_per_million_wru + usage.rru * prices.dynamodb_per_million_rru;
    let step_functions = step_functions_transitions(k) as f64 * prices.step_functions_per_million_transitions;
    let billed_s = (usage.wall_ms / EXPRESS_BILLING_STEP_MS).ceil().max(1.0) * EXPRESS_BILLING_STEP_MS / 1e3;
    let step_functions_express =
        prices.express_per_million_requests + billed_s * EXPRESS_MEMORY_MB / 1024.0 * prices.express_gb_second * 1e6;
    Cost { lambda, sqs, dynamodb, total: lambda + sqs + dynamodb, step_functions, step_functions_express }
}

fn endpoint() -> Option<String> {
    std::env::var("AWS_ENDPOINT_URL").ok().filter(|e| !e.trim().is_empty())
}

/// Handler durations of the invocations the timed pollers ran.
#[derive(Default)]
struct Durations {
    samples: Mutex<Vec<(&'static str, Duration)>>,
}

impl Durations {
    fn push(&self, function: &'static str, d: Duration) {
        self.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((function, d));
    }
    fn take(&self) -> Vec<(&'static str, Duration)> {
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

fn function_name(f: Function) -> &'static str {
    match f {
        Function::Router => "router",
        Function::Synthesizer => "synthesizer",
        _ => "agent-worker",
    }
}

/// Lambda's SQS event source, as `shared::system` does it, timing each handler call.
async fn timed_poll(deps: Arc<Deps>, queue: shared::ports::QueueId, batch: usize, durations: Arc<Durations>) {
    let function = function_for(queue);
    let slots = Arc::new(tokio::sync::Semaphore::new(8));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let messages = match deps.queue.receive(queue, batch, Duration::from_secs(1)).await {
            Ok(m) if !m.is_empty() => m,
            Ok(_) => continue,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let (deps, durations) = (deps.clone(), durations.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let event = sqs_event(queue, &messages);
            let started = Instant::now();
            let outcome = handle_sqs(&deps, function, event).await;
            durations.push(function_name(function), started.elapsed());
            let failed: HashSet<String> = match outcome {
                Ok(r) => r.batch_item_failures.into_iter().map(|f| f.item_identifier).collect(),
                Err(_) => return,
            };
            for m in messages.iter().filter(|m| !failed.contains(&m.message_id)) {
                let _ = deps.queue.delete(queue, &m.receipt_handle).await;
            }
        });
    }
}

/// Approximate DynamoDB item size (attribute names + values, per the developer guide's rules).
fn item_size(item: &HashMap<String, aws_sdk_dynamodb::types::AttributeValue>) -> usize {
    fn value(v: &aws_sdk_dynamodb::types::AttributeValue) -> usize {
        use aws_sdk_dynamodb::types::AttributeValue as A;
        match v {
            A::S(s) => s.len(),
            A::N(n) => n.len().div_ceil(2) + 1,
            A::B(b) => b.as_ref().len(),
            A::Bool(_) | A::Null(_) => 1,
            A::Ss(v) => v.iter().map(String::len).sum(),
            A::Ns(v) => v.iter().map(|n| n.len().div_ceil(2) + 1).sum(),
            A::L(v) => 3 + v.iter().map(|x| 1 + value(x)).sum::<usize>(),
            A::M(m) => 3 + m.iter().map(|(k, x)| 1 + k.len() + value(x)).sum::<usize>(),
            _ => 0,
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
}

/// One row of the requests table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RequestsRow {
    /// Agents per query.
    pub k: usize,
    /// Whether the answer was streamed (intent `s1`: one `llm` agent whose answer is
    /// appended to the log as `token` events).
    pub streamed: bool,
    /// Per query: `token` events written (each one store write).
    pub token_events: f64,
    /// Queries measured.
    pub queries: usize,
    /// Per query: SQS SendMessage and SendMessageBatch requests.
    pub sqs_sends: f64,
    /// Per query: ReceiveMessage requests, empty long polls of the pollers included.
    pub sqs_receives: f64,
    /// Per query: messages those receives returned.
    pub sqs_messages_received: f64,
    /// Per query: DeleteMessage.
    pub sqs_deletes: f64,
    /// Per query: GetItem + Query requests.
    pub ddb_reads: f64,
    /// Per query: PutItem + UpdateItem requests.
    pub ddb_writes: f64,
    /// Per query: TransactWriteItems requests.
    pub ddb_transact_writes: f64,
    /// Per query: items written inside transactions.
    pub ddb_transact_items: f64,
    /// Largest item of a query, bytes.
    pub max_item_bytes: usize,
    /// Function time per query under the [`LATENCY`] model, ms.
    pub function_ms: f64,
    /// Handler time per query by function, ms.
    pub handler_ms: Vec<(String, f64)>,
    /// What a query uses, for the cost.
    pub usage: Usage,
    /// Cost per million queries.
    pub cost: Cost,
}

async fn requests(options: &BenchOptions) -> anyhow::Result<u8> {
    if endpoint().is_none() {
        eprintln!(
            "switchyard bench requests: AWS_ENDPOINT_URL is not set. This suite counts requests against a local \
             SQS/DynamoDB endpoint: `source scripts/moto.sh && moto_start`, then run it again."
        );
        return Ok(2);
    }
    let queries = options.queries.unwrap_or(5).clamp(1, 50);
    let manifest = k_manifest(&K_AGENTS_MANIFEST.replace("deadline: 600s", "deadline: 2s"))?;
    let config = shared::adapters::aws::aws_config_from_env().await;
    let topology = Topology::for_manifest(&manifest);
    let prefix = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let ddb = aws_sdk_dynamodb::Client::new(&config);
    let urls = shared::adapters::aws::ensure_resources(
        &ddb,
        &aws_sdk_sqs::Client::new(&config),
        &topology,
        &format!("{prefix}-table"),
        &format!("{prefix}-"),
    )
    .await
    .map_err(|e| anyhow::anyhow!("creating the table and queues on {}: {e}", endpoint().unwrap_or_default()))?;
    let system = shared::system::AwsSystem::with_resources(
        manifest,
        EngineSettings::default(),
        &config,
        &urls.table,
        urls.queues,
    );
    // A second store on its own counters, for the benchmark's own waiting reads.
    let watcher = shared::adapters::dynamodb::DynamoStore::new(ddb.clone(), urls.table.clone());
    let durations = Arc::new(Durations::default());
    let pollers: Vec<_> = topology
        .queues
        .iter()
        .map(|spec| {
            tokio::spawn(timed_poll(
                system.deps.clone(),
                spec.id,
                spec.batch_size.clamp(1, 10) as usize,
                durations.clone(),
            ))
        })
        .collect();
    let drained = || async {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let mut total = 0;
            for spec in &topology.queues {
                total += system.queue.depth(spec.id).await?.total();
            }
            if total == 0 {
                return anyhow::Ok(());
            }
            anyhow::ensure!(Instant::now() < until, "{total} messages still on the queues after 30 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    // One query first, not measured: what a process does once (storing its manifest version)
    // is a cold start's cost, not a query's, as on Lambda where one process serves many.
    let warm_up = submit(&system.deps, QUESTIONS[0].1).await?;
    let until = Instant::now() + Duration::from_secs(30);
    while watcher.get_output(&warm_up).await?.is_none() {
        anyhow::ensure!(Instant::now() < until, "the warm-up query did not finish within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut rows = Vec::new();
    let mut runs: Vec<(usize, &str, bool)> = selected(options).into_iter().map(|(k, q)| (k, q, false)).collect();
    if options.k.is_none_or(|k| k == 1) {
        runs.push((1, crate::bench_ttft::STREAMED_QUESTION, true));
    }
    for (k, question, streamed) in runs {
        drained().await?;
        durations.take();
        let (q0, s0) = (system.queue.counts(), system.store.counts());
        let mut ids = Vec::new();
        for _ in 0..queries {
            let started = Instant::now();
            ids.push(submit(&system.deps, question).await?);
            durations.push("intake", started.elapsed());
        }
        for id in &ids {
            let until = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(output) = watcher.get_output(id).await? {
                    check_output(&output, k)?;
                    break;
                }
                anyhow::ensure!(Instant::now() < until, "query {id} did not finish within 30 s");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // The deadline message (2 s + slack) fires and is handled before the queues drain.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        drained().await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (q1, s1) = (system.queue.counts(), system.store.counts());
        let samples = durations.take();
        let n = queries as f64;
        let per = |a: u64, b: u64| (a - b) as f64 / n;
        let mut sizes = Vec::new();
        for id in &ids {
            let page = ddb
                .query()
                .table_name(&urls.table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S(format!("Q#{id}")))
                .send()
                .await?;
            sizes.extend(page.items().iter().map(item_size));
        }
        let max_item_bytes = sizes.iter().copied().max().unwrap_or(0);
        let mut token_events = 0usize;
        for id in &ids {
            token_events += watcher.list_events(id).await?.iter().filter(|e| e.kind == EventKind::Token).count();
        }
        let ddb_writes = per(s1.writes, s0.writes);
        let ddb_transact_writes = per(s1.transact_writes, s0.transact_writes);
        let ddb_transact_items = (per(s1.items_written, s0.items_written) - ddb_writes).max(0.0);
        let mut handler_ms: Vec<(String, f64)> = Vec::new();
        for name in FUNCTIONS {
            let total: f64 = samples.iter().filter(|(f, _)| *f == name).map(|(_, d)| d.as_secs_f64() * 1e3).sum();
            handler_ms.push((name.to_string(), total / n));
        }
        let calls = CallCounts {
            invocations: samples.len() as f64 / n,
            ddb_reads: per(s1.reads, s0.reads),
            ddb_writes,
            ddb_transacts: ddb_transact_writes,
            sqs_sends: per(q1.sends, q0.sends),
        };
        let function_ms = LATENCY.function_ms(&calls);
        let usage = Usage {
            invocations: calls.invocations,
            gb_seconds: function_ms / 1e3 * FUNCTION_MEMORY_MB / 1024.0,
            sqs_requests: per(q1.sends, q0.sends)
                + per(q1.messages_received, q0.messages_received)
                + per(q1.deletes, q0.deletes),
            wru: per(s1.write_units, s0.write_units),
            rru: per(s1.read_units, s0.read_units),
            wall_ms: function_ms,
        };
        let cost = cost_per_million(&usage, k as u64, &US_EAST_1);
        let row = RequestsRow {
            k,
            streamed,
            token_events: token_events as f64 / n,
            queries,
            sqs_sends: per(q1.sends, q0.sends),
            sqs_receives: per(q1.receives, q0.receives),
            sqs_messages_received: per(q1.messages_received, q0.messages_received),
            sqs_deletes: per(q1.deletes, q0.deletes),
            ddb_reads: per(s1.reads, s0.reads),
            ddb_writes,
            ddb_transact_writes,
            ddb_transact_items,
            max_item_bytes,
            function_ms,
            handler_ms,
            usage,
            cost,
        };
        if options.json {
            println!("{}", serde_json::to_string(&row)?);
        }
        rows.push(row);
    }
    for p in pollers {
        p.abort();
    }
    if !options.json {
        print!("{}", requests_tables(&rows));
    }
    Ok(0)
}

fn requests_tables(rows: &[RequestsRow]) -> String {
    fn label(r: &RequestsRow) -> String {
        if r.streamed {
            format!("{}s", r.k)
        } else {
            r.k.to_string()
        }
    }
    use std::fmt::Write;
    let mut s = String::new();
    let queries = rows.first().map_or(0, |r| r.queries);
    let _ = writeln!(
        s,
        "requests per query against {} ({queries} queries per k; deadline message included)",
        endpoint().unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "{:>2} {:>6} {:>9} {:>9} {:>8} {:>7} {:>7} {:>9} {:>10} {:>9}",
        "k", "sends", "receives", "received", "deletes", "reads", "writes", "transact", "tx items", "max item"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>2} {:>6.1} {:>9.1} {:>9.1} {:>8.1} {:>7.1} {:>7.1} {:>9.1} {:>10.1} {:>8}B",
            label(r),
            r.sqs_sends,
            r.sqs_receives,
            r.sqs_messages_received,
            r.sqs_deletes,
            r.ddb_reads,
            r.ddb_writes,
            r.ddb_transact_writes,
            r.ddb_transact_items,
            r.max_item_bytes
        );
    }
    let _ = writeln!(s, "(receives: every ReceiveMessage, empty long polls of the 1 s test pollers included; Lambda's own pollers make those whatever the traffic, so the cost counts the receives that returned a message)");
    let _ = writeln!(
        s,
        "\nDynamoDB units and SQS requests per query, and the function time they cost under the latency model \
         (ms per call: read {}, write {}, transaction {}, send {}; {} ms of work and {} ms of rounding per invocation)",
        LATENCY.ddb_read_ms,
        LATENCY.ddb_write_ms,
        LATENCY.ddb_transact_ms,
        LATENCY.sqs_send_ms,
        LATENCY.compute_ms,
        LATENCY.rounding_ms
    );
    let _ = writeln!(
        s,
        "{:>2} {:>8} {:>8} {:>13} {:>12} {:>12}",
        "k", "WRU", "RRU", "SQS requests", "function ms", "invocations"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>2} {:>8.1} {:>8.1} {:>13.1} {:>12.1} {:>12.1}",
            label(r),
            r.usage.wru,
            r.usage.rru,
            r.usage.sqs_requests,
            r.function_ms,
            r.usage.invocations
        );
    }
    let _ = writeln!(s, "\nhandler time per query, ms (against the local endpoint; not used for the cost)");
    let _ = writeln!(
        s,
        "{:>2} {:>8} {:>8} {:>13} {:>12} {:>12}",
        "k", "intake", "router", "agent-worker", "synthesizer", "invocations"
    );
    for r in rows {
        let ms = |name: &str| r.handler_ms.iter().find(|(f, _)| f == name).map_or(0.0, |(_, v)| *v);
        let _ = writeln!(
            s,
            "{:>2} {:>8.2} {:>8.2} {:>13.2} {:>12.2} {:>12.1}",
            label(r),
            ms("intake"),
            ms("router"),
            ms("agent-worker"),
            ms("synthesizer"),
            r.usage.invocations
        );
    }
    let p = US_EAST_1;
    let _ = writeln!(
        s,
        "\ncost per million queries, USD (us-east-1 prices of {PRICES_TAKEN}: Lambda arm64 ${}/GB-s + ${}/M requests at {} MB; \
         SQS ${}/M requests; DynamoDB on-demand ${}/M WRU, ${}/M RRU; Step Functions Standard ${}/M transitions; \
         Express ${}/M requests + ${}/GB-s at {} MB in {} ms steps)",
        p.lambda_gb_second, p.lambda_per_million_requests, FUNCTION_MEMORY_MB, p.sqs_per_million_requests, p.dynamodb_per_million_wru,
        p.dynamodb_per_million_rru, p.step_functions_per_million_transitions, p.express_per_million_requests, p.express_gb_second,
        EXPRESS_MEMORY_MB, EXPRESS_BILLING_STEP_MS
    );
    let _ = writeln!(
        s,
        "{:>2} {:>9} {:>8} {:>8} {:>9} {:>10} {:>10} {:>13} {:>14} {:>7} {:>12}",
        "k", "GB-s", "WRU", "RRU", "Lambda", "SQS", "DynamoDB", "Switchyard", "SFN (trans.)", "ratio", "SFN Express"
    );
    for r in rows {
        let c = r.cost;
        let _ = writeln!(
            s,
            "{:>2} {:>9.5} {:>8.1} {:>8.1} {:>9.2} {:>10.2} {:>10.2} {:>13.2} {:>8.2} ({:>2}) {:>6.1}× {:>12.2}",
            label(r),
            r.usage.gb_seconds,
            r.usage.wru,
            r.usage.rru,
            c.lambda,
            c.sqs,
            c.dynamodb,
            c.total,
            c.step_functions,
            step_functions_transitions(r.k as u64),
            c.step_functions / c.total.max(f64::MIN_POSITIVE),
            c.step_functions_express
        );
    }
    let plain = rows.iter().find(|r| r.k == 1 && !r.streamed);
    if let (Some(p), Some(st)) = (plain, rows.iter().find(|r| r.streamed)) {
        let _ = writeln!(
            s,
            "\nstreamed answer (1s: one llm agent, 53 words at one word per 10 ms, its answer streamed): {:.1} token \
             events per answer; {:.1} DynamoDB writes per query against {:.1} for k = 1 unstreamed (+{:.1} per streamed answer)",
            st.token_events,
            st.ddb_writes,
            p.ddb_writes,
            st.ddb_writes - p.ddb_writes
        );
    }
    let _ = writeln!(s, "(SFN: Route → Parallel(k × Task with Retry+Catch) → Synthesize → Choice → Succeed = k + 5 transitions; its Task Lambdas not counted)");
    let _ = writeln!(s, "(SFN Express: 1 request + the modeled function time of the query, summed over its invocations — an upper bound on its wall time — rounded up to 100 ms, at 64 MB; its Task Lambdas not counted either)");
    s
}

// ------------------------------------------------------------------------------------------
// cold start
// ------------------------------------------------------------------------------------------

/// One row of the cold-start table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InitRow {
    /// Binary name.
    pub function: String,
    /// Process starts measured.
    pub starts: usize,
    /// Median spawn → first `/invocation/next`, ms.
    pub init_p50_ms: f64,
    /// Slowest of the starts, ms.
    pub init_max_ms: f64,
    /// Median peak RSS (VmHWM) at that moment, MB.
    pub peak_rss_mb: f64,
    /// Size of the release binary, MB.
    pub binary_mb: f64,
    /// Size of `target/lambda/<bin>/bootstrap` (arm64, cargo lambda) if built, MB.
    pub bootstrap_mb: Option<f64>,
    /// `init_p50_ms` over the bare `lambda_runtime` binary's, started in the same run.
    pub vs_bare: f64,
}

/// The baseline binary (`bench/hello`): a bare `lambda_runtime` echo function.
pub const BARE_LAMBDA: &str = "bare-lambda";

/// The environment a function gets from the SAM template, with dummy values: init reads it but
/// makes no AWS call.
fn function_env(bin: &str, api: &str) -> anyhow::Result<Vec<(String, String)>> {
    let manifest = Manifest::embedded().map_err(|e| anyhow::anyhow!("{e}"))?;
    let topology = Topology::for_manifest(&manifest);
    let mut env: Vec<(String, String)> = vec![
        ("AWS_LAMBDA_RUNTIME_API".into(), api.into()),
        ("AWS_LAMBDA_FUNCTION_NAME".into(), bin.into()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE".into(), "256".into()),
        ("AWS_LAMBDA_FUNCTION_VERSION".into(), "$LATEST".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME".into(), format!("/aws/lambda/{bin}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME".into(), "bench".into()),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_DEFAULT_REGION".into(), "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID".into(), "bench".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "bench".into()),
        ("AWS_SESSION_TOKEN".into(), "bench".into()),
        ("SWITCHYARD_TABLE".into(), "switchyard-bench".into()),
        ("RUST_LOG".into(), "warn".into()),
    ];
    if let Some(tier) = manifest.tiers.first() {
        env.push(("SWITCHYARD_TIER".into(), tier.tier.to_string()));
    }
    env.push((
        shared::jwt::ENV_JWT_ISSUER.into(),
        "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_bench".into(),
    ));
    env.push((shared::jwt::ENV_JWT_AUDIENCE.into(), "bench-client".into()));
    env.push((shared::jwt::ENV_JWT_JWKS.into(), BENCH_JWKS.into()));
    for spec in &topology.queues {
        for id in [spec.id, spec.id.dlq()] {
            env.push((queue_url_env(id), format!("https://sqs.us-east-1.amazonaws.com/000000000000/{}", id.name())));
        }
    }
    Ok(env)
}

/// Start `binary` once; (spawn → first `GET /2018-06-01/runtime/invocation/next`, VmHWM kB).
fn start_once(binary: &Path, bin: &str) -> anyhow::Result<(Duration, u64)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let api = listener.local_addr()?.to_string();
    let env = function_env(bin, &api)?;
    let started = Instant::now();
    let mut child = std::process::Command::new(binary)
        .env_clear()
        .envs(env)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let outcome = (|| -> anyhow::Result<(Duration, u64)> {
        let stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Some(status) = child.try_wait()? {
                        let mut err = String::new();
                        if let Some(mut e) = child.stderr.take() {
                            let _ = e.read_to_string(&mut err);
                        }
                        anyhow::bail!("{bin} exited with {status} before asking for an event: {err}");
                    }
                    anyhow::ensure!(
                        started.elapsed() < Duration::from_secs(10),
                        "{bin} did not ask for an event within 10 s"
                    );
                    std::thread::sleep(Duration::from_micros(20));
                }
                Err(e) => return Err(e.into()),
            }
        };
        let init = started.elapsed();
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line)?;
        anyhow::ensure!(
            line.starts_with("GET /2018-06-01/runtime/invocation/next"),
            "{bin}: unexpected first request {line:?}"
        );
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let hwm = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        Ok((init, hwm))
    })();
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

/// A function's median init as a multiple of the bare binary's (0 when the baseline took no
/// measurable time, which only a broken clock would give).
pub fn init_ratio(function_ms: f64, bare_ms: f64) -> f64 {
    if bare_ms > 0.0 {
        function_ms / bare_ms
    } else {
        0.0
    }
}

fn cold_start(options: &BenchOptions) -> anyhow::Result<u8> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or_else(|| anyhow::anyhow!("no directory for {}", exe.display()))?;
    let lambda_dir = dir.parent().map(|t| t.join("lambda"));
    let repeat = options.repeat.max(1);
    let bins: Vec<&str> = std::iter::once(BARE_LAMBDA).chain(COLD_START_FUNCTIONS.iter().copied()).collect();
    let mut binaries = Vec::with_capacity(bins.len());
    for bin in &bins {
        let binary = dir.join(bin);
        if !binary.is_file() {
            eprintln!(
                "cold-start: {} is missing; build the workspace (cargo build --release --workspace) first",
                binary.display()
            );
            return Ok(1);
        }
        start_once(&binary, bin)?; // page cache warm, as on a Lambda host that has the code
        binaries.push(binary);
    }
    // Round by round, every binary once per round (the bare one first): a change in the
    // machine's speed during the run (this shared machine's wall times move by up to 3×) falls
    // on every binary alike instead of on whichever was being started then, so the ratios to
    // the bare binary compare starts made under the same conditions.
    let mut inits: Vec<Vec<f64>> = (0..bins.len()).map(|_| Vec::with_capacity(repeat)).collect();
    let mut hwms: Vec<Vec<f64>> = (0..bins.len()).map(|_| Vec::with_capacity(repeat)).collect();
    for _ in 0..repeat {
        for (i, (bin, binary)) in bins.iter().zip(&binaries).enumerate() {
            let (init, hwm) = start_once(binary, bin)?;
            inits[i].push(init.as_secs_f64() * 1e3);
            hwms[i].push(hwm as f64 / 1024.0);
        }
    }
    let mut rows: Vec<InitRow> = Vec::new();
    for (i, bin) in bins.iter().enumerate() {
        let (inits, hwms) = (&mut inits[i], &mut hwms[i]);
        inits.sort_by(f64::total_cmp);
        hwms.sort_by(f64::total_cmp);
        let size = |p: &Path| std::fs::metadata(p).ok().map(|m| m.len() as f64 / 1e6);
        let init_p50_ms = quantile(inits, 0.5);
        // The bare binary is the first row: every function's row carries its ratio to it.
        let bare_ms = rows.first().map_or(init_p50_ms, |bare| bare.init_p50_ms);
        let row = InitRow {
            function: bin.to_string(),
            starts: repeat,
            init_p50_ms,
            init_max_ms: inits.last().copied().unwrap_or(0.0),
            peak_rss_mb: quantile(hwms, 0.5),
            binary_mb: size(&binaries[i]).unwrap_or(0.0),
            bootstrap_mb: lambda_dir.as_ref().and_then(|d| size(&d.join(bin).join("bootstrap"))),
            vs_bare: init_ratio(init_p50_ms, bare_ms),
        };
        if options.json {
            println!("{}", serde_json::to_string(&row)?);
        }
        rows.push(row);
    }
    if !options.json {
        println!(
            "function init through a local Lambda Runtime API ({} starts each, one of each binary per round; spawn → first GET …/invocation/next; binaries in {})",
            repeat,
            dir.display()
        );
        println!(
            "{:<13} {:>10} {:>10} {:>8} {:>14} {:>11} {:>15}",
            "function", "init p50", "init max", "vs bare", "peak RSS", "binary", "arm64 bootstrap"
        );
        for r in &rows {
            let boot = r.bootstrap_mb.map_or("not built".to_string(), |b| format!("{b:.2} MB"));
            println!(
                "{:<13} {:>7.2} ms {:>7.2} ms {:>7.2}x {:>11.1} MB {:>8.2} MB {:>15}",
                r.function, r.init_p50_ms, r.init_max_ms, r.vs_bare, r.peak_rss_mb, r.binary_mb, boot
            );
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
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
        let classifier = shared::classify::Classifier::new(&manifest);
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
