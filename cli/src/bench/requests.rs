//! `bench requests`: the flow against a local SQS/DynamoDB endpoint, requests per query
//! counted by the adapters, handler durations and the cost per million queries.

use super::cost::*;
use super::pipeline::check_output;
use super::*;

pub(crate) fn endpoint() -> Option<String> {
    std::env::var("AWS_ENDPOINT_URL").ok().filter(|e| !e.trim().is_empty())
}

/// Handler durations of the invocations the timed pollers ran.
#[derive(Default)]
pub(crate) struct Durations {
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

pub(crate) fn function_name(f: Function) -> &'static str {
    match f {
        Function::Router => "router",
        Function::Synthesizer => "synthesizer",
        _ => "agent-worker",
    }
}

/// Lambda's SQS event source, as `switchyard_engine::pollers` does it, timing each handler call.
pub(crate) async fn timed_poll(
    deps: Arc<Deps>,
    queue: switchyard_engine::ports::QueueId,
    batch: usize,
    durations: Arc<Durations>,
) {
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
pub(crate) fn item_size(item: &HashMap<String, aws_sdk_dynamodb::types::AttributeValue>) -> usize {
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

pub(crate) async fn requests(options: &BenchOptions) -> anyhow::Result<u8> {
    if endpoint().is_none() {
        eprintln!(
            "switchyard bench requests: AWS_ENDPOINT_URL is not set. This suite counts requests against a local \
             SQS/DynamoDB endpoint: `source scripts/moto.sh && moto_start`, then run it again."
        );
        return Ok(2);
    }
    let queries = options.queries.unwrap_or(5).clamp(1, 50);
    let manifest = k_manifest(&K_AGENTS_MANIFEST.replace("deadline: 600s", "deadline: 2s"))?;
    let config = switchyard_aws::sdk::aws_config_from_env().await;
    let topology = Topology::for_manifest(&manifest);
    let prefix = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let ddb = aws_sdk_dynamodb::Client::new(&config);
    let urls = switchyard_aws::sdk::ensure_resources(
        &ddb,
        &aws_sdk_sqs::Client::new(&config),
        &topology,
        &format!("{prefix}-table"),
        &format!("{prefix}-"),
    )
    .await
    .map_err(|e| anyhow::anyhow!("creating the table and queues on {}: {e}", endpoint().unwrap_or_default()))?;
    let system = switchyard_aws::AwsSystem::with_resources(
        manifest,
        EngineSettings::default(),
        &config,
        &urls.table,
        urls.queues,
    );
    // A second store on its own counters, for the benchmark's own waiting reads.
    let watcher = switchyard_aws::dynamodb::DynamoStore::new(ddb.clone(), urls.table.clone());
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
        runs.push((1, super::ttft::STREAMED_QUESTION, true));
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

pub(crate) fn requests_tables(rows: &[RequestsRow]) -> String {
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
