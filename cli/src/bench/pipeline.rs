//! `bench pipeline`: the whole system in one process on the in-memory adapters, k = 1..4
//! agents per query: queries/s and end-to-end latency.

use super::*;

pub(crate) fn check_output(output: &OrchestratorOutput, k: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        output.status == OutputStatus::Success && output.agents_dispatched.len() == k,
        "expected a success with {k} agents, got {:?} with {:?}",
        output.status,
        output.agents_dispatched
    );
    Ok(())
}

pub(crate) enum Finish {
    Waiting(oneshot::Sender<Instant>),
    Done(Instant),
}

/// The in-memory store, telling waiters the instant a query's output is written, so the
/// benchmark needs no polling reads of its own.
pub(crate) struct FinishSignal {
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
pub(crate) async fn load(
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

pub(crate) async fn pipeline(options: &BenchOptions) -> anyhow::Result<u8> {
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
