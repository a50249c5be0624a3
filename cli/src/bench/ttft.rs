//! `switchyard bench ttft`: time to first token of a streamed answer, embedded.
//!
//! The `s1` intent of `bench/manifests/k-agents.yaml` routes to one `llm` agent on the scripted
//! provider, which writes a 53-word answer one word every 10 ms; its `answer` field is streamed
//! into the event log. Closed-loop clients submit through the intake handler; a store hook
//! notes the instant the query's first `token` event is appended and the instant its output is
//! written. Time to first token is submit → first token event in the log (what a reader of the
//! log can see first), next to the model's own first word (one `pace`), the whole answer, and
//! the token events (store writes) per answer. Each queue's poller runs 16 handlers at once:
//! with more queries in flight than that, the figure includes the wait for a free worker.

use super::{quantile, submit, BenchOptions, K_AGENTS_MANIFEST};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchyard_agents::Agents;
use switchyard_engine::memory::{MemoryQueue, MemoryStore};
use switchyard_engine::ports::{Clock, EventKind, StoreError, TokioClock};
use switchyard_engine::{pollers::start, pollers::PollerConfig};
use switchyard_engine::{Deps, EngineSettings};
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::Topology;
use switchyard_testkit::hooked::{Applied, HookedStore, StoreHooks, StoreOp};

/// The streamed question of the bench manifest.
pub const STREAMED_QUESTION: &str = "echo streamed answer";

/// When each query's first token event and output were written, and its token events.
#[derive(Default)]
struct TokenClock {
    seen: Mutex<HashMap<String, Seen>>,
}

#[derive(Default, Clone, Copy)]
struct Seen {
    first_token: Option<Instant>,
    finished: Option<Instant>,
    token_events: usize,
}

impl StoreHooks for TokenClock {
    fn after(&self, op: StoreOp<'_>, outcome: Result<Applied<'_>, &StoreError>) -> Result<(), StoreError> {
        if outcome.is_err() {
            return Ok(());
        }
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match op {
            StoreOp::AppendEvents(events) => {
                for e in events.iter().filter(|e| e.kind == EventKind::Token) {
                    let s = seen.entry(e.query_id.clone()).or_default();
                    s.first_token.get_or_insert(now);
                    s.token_events += 1;
                }
            }
            StoreOp::FinishQuery(_, query) => {
                seen.entry(query.query_id.clone()).or_default().finished = Some(now);
            }
            _ => {}
        }
        Ok(())
    }
}

/// One measured run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TtftRow {
    /// Queries timed.
    pub queries: usize,
    /// Queries in flight at once.
    pub concurrency: usize,
    /// The scripted model's wait before each word, ms.
    pub pace_ms: u64,
    /// Median submit → first token event, ms.
    pub ttft_p50_ms: f64,
    /// 99th percentile submit → first token event, ms.
    pub ttft_p99_ms: f64,
    /// Median submit → output written, ms.
    pub answer_p50_ms: f64,
    /// Token events (store writes) per streamed answer.
    pub token_events_per_answer: f64,
}

/// Run the suite.
pub async fn run(options: &BenchOptions) -> anyhow::Result<u8> {
    let manifest = Arc::new(
        Manifest::from_yaml(K_AGENTS_MANIFEST, "bench/manifests/k-agents.yaml").map_err(|e| anyhow::anyhow!("{e}"))?,
    );
    let pace_ms = manifest.provider("offline").and_then(|p| p.pace).map_or(0, |d| d.as_millis());
    let queries = options.queries.unwrap_or(200).max(1);
    let concurrency = options.concurrency.clamp(1, queries);
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let topology = Topology::for_manifest(&manifest);
    let memory = Arc::new(MemoryStore::new(clock.clone()));
    let store = Arc::new(HookedStore::new(memory, TokenClock::default()));
    let queue = Arc::new(MemoryQueue::new(&topology));
    let agents = Arc::new(Agents::new(&manifest));
    let deps = Arc::new(Deps::new(manifest, store.clone(), queue, clock, agents, EngineSettings::default()));
    let _pollers = start(deps.clone(), &topology, PollerConfig::default());
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..concurrency {
        let (deps, store, next) = (deps.clone(), store.clone(), next.clone());
        clients.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < queries {
                let started = Instant::now();
                let id = submit(&deps, STREAMED_QUESTION).await?;
                let until = started + Duration::from_secs(60);
                let seen = loop {
                    let seen = store.hooks().seen.lock().map(|s| s.get(&id).copied()).unwrap_or_default();
                    if let Some(s) = seen.filter(|s| s.finished.is_some()) {
                        break s;
                    }
                    anyhow::ensure!(Instant::now() < until, "query {id} did not finish within 60 s");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                };
                let first = seen.first_token.ok_or_else(|| anyhow::anyhow!("query {id} streamed no token"))?;
                let ms = |at: Instant| at.saturating_duration_since(started).as_secs_f64() * 1e3;
                samples.push((ms(first), seen.finished.map_or(0.0, ms), seen.token_events));
            }
            anyhow::Ok(samples)
        }));
    }
    let mut samples = Vec::new();
    for c in clients {
        samples.extend(c.await??);
    }
    let mut ttft: Vec<f64> = samples.iter().map(|s| s.0).collect();
    let mut answer: Vec<f64> = samples.iter().map(|s| s.1).collect();
    ttft.sort_by(f64::total_cmp);
    answer.sort_by(f64::total_cmp);
    let row = TtftRow {
        queries: samples.len(),
        concurrency,
        pace_ms,
        ttft_p50_ms: quantile(&ttft, 0.5),
        ttft_p99_ms: quantile(&ttft, 0.99),
        answer_p50_ms: quantile(&answer, 0.5),
        token_events_per_answer: samples.iter().map(|s| s.2 as f64).sum::<f64>() / samples.len().max(1) as f64,
    };
    if options.json {
        println!("{}", serde_json::to_string(&row)?);
    } else {
        println!(
            "time to first token, embedded (bench/manifests/k-agents.yaml intent s1: scripted model, one word every \
             {pace_ms} ms, 53 words; tokens flushed first piece at once, then every 100 ms or 400 chars; {} queries, \
             {concurrency} in flight)",
            row.queries
        );
        println!("{:>14} {:>14} {:>16} {:>22}", "TTFT p50 ms", "TTFT p99 ms", "answer p50 ms", "token events/answer");
        println!(
            "{:>14.1} {:>14.1} {:>16.1} {:>22.1}",
            row.ttft_p50_ms, row.ttft_p99_ms, row.answer_p50_ms, row.token_events_per_answer
        );
        println!("(the model's own first word comes after one pace, {pace_ms} ms: the rest is orchestration and the log write;");
        println!(
            " each queue's poller runs 16 handlers at once, so above 16 in flight a query also waits for a worker)"
        );
    }
    Ok(0)
}
