//! # switchyard-sim: deterministic fault simulation
//!
//! Runs the whole system — intake, router, agent workers, synthesizer — on the in-memory
//! adapters in virtual time (tokio's paused clock, which [`switchyard_engine::ports::TokioClock`] follows),
//! with one seeded RNG injecting every fault, then checks that nothing was lost or done twice.
//! A seed is a complete description of a run: `cargo run -p switchyard-sim -- --seed S` replays it exactly.
//!
//! One seed: draw fault intensities ([`chaos::Faults::draw`]); start Lambda-like pollers
//! ([`poller`]); submit a handful of queries through the HTTP handler at random instants, with
//! idempotency keys and client retries, and a few poison messages straight onto the queues; run
//! until every queue outside the dead-letter queues is empty; check [`invariants`]:
//!
//! - every accepted query is terminal by its deadline + `deadline_slack` + [`redelivery_slack`];
//! - exactly one output per query (applied `finish_query` writes);
//! - every dispatch sent ends with exactly one handoff;
//! - no message is left anywhere but a dead-letter queue; every dead-lettered message has a
//!   logged reason and a logged move; every poison message is dead-lettered;
//! - the event log agrees with the records (a handoff event per handoff record, a dispatch
//!   event per planned dispatch, a final event iff an output);
//! - an output accounts for every slot of the stages it ran.
//! - no output while a tool call waits for a person's decision or before it was decided, and
//!   no successful call of a tool whose approval was rejected or expired;
//! - no write tool called twice for one logical call (one idempotency key), none called
//!   without a claimed record, and, when the agent answered, a result in the log for each of
//!   its write calls (`unknown` for a record without an outcome).
//!
//! The mix includes an `llm` agent on a scripted model that reads, writes and asks a person
//! before one write: its tools are served in process ([`tools`], counting each write call), and
//! crash before a call, after it and after its record, err or answer slowly; a seeded person
//! ([`person`]) approves, rejects or never answers through the approval route.
//!
//! Determinism: the RNG is seeded, time is virtual and starts at a fixed instant, the engine's
//! jitter RNG is seeded ([`switchyard_engine::Deps::with_seed`]) and the runtime is
//! single-threaded. Query and dispatch ids stay random UUID v4s (they must be unguessable);
//! nothing the harness decides or prints depends on their values, and the replay test checks
//! that two runs of a seed produce the same trace.
//!
//! # Layout
//!
//! - [`chaos`]: the seeded RNG and the faulty queue, store and agent wrappers.
//! - [`poller`]: SQS event sources that crash before acking, stall, and see visibility expire.
//! - [`reasons`]: a `tracing` layer that collects why each message failed.
//! - [`invariants`]: the checks.
//! - [`tools`]: the in-process tool server and its faults; [`person`]: the seeded approver.
//! - this file: one run ([`run_seed`]) and many ([`run_seeds`]).

pub mod chaos;
pub mod invariants;
pub mod person;
pub mod poller;
pub mod reasons;
pub mod tools;

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use chaos::{chaos_store, Chaos, ChaosAgents, ChaosQueue, CALM, CRASH_PREFIX, FAULTED_DELIVERIES};
use invariants::QueryFacts;
use reasons::ReasonLog;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Once};
use std::time::Duration;
use switchyard_agents::llm::LlmAgents;
use switchyard_agents::tools::ToolBox;
use switchyard_agents::Agents;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::http_client::HttpClient;
use switchyard_engine::memory::{MemoryQueue, MemoryStore};
use switchyard_engine::ports::{AgentRuntime, Clock, OutgoingMessage, Queue, QueueId, Store, TokioClock};
use switchyard_engine::{Deps, EngineSettings};
use switchyard_model::jobs::{Job, JobMessage};
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::Topology;
use tracing::Level;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

/// Seeds run by default (the README's test command runs these).
pub const DEFAULT_SEEDS: u64 = 500;

/// The command that replays one seed; a failure report ends with it and the seed.
pub const REPLAY_COMMAND: &str = "cargo run -p switchyard-sim -- --seed";

/// The simulation's manifest.
pub const SIM_MANIFEST: &str = include_str!("../sim-routing.yaml");

const API_EVENT: &str = include_str!("../../fixtures/events/apigw-v2-request-jwt-authorizer.json");

/// Questions of the manifest's intents, with the intent each classifies to.
const QUESTIONS: [(&str, &str); 7] = [
    ("alpha single question", "single_q"),
    ("bravo fan out question", "fanout_q"),
    ("charlie pair question", "pair_q"),
    ("delta short question", "short_q"),
    ("echo pipeline question", "pipeline_q"),
    ("foxtrot long question", "long_q"),
    ("golf refund question", "refund_q"),
];

/// Virtual time after which a run that has not quiesced is reported.
const QUIESCE_LIMIT: Duration = Duration::from_secs(6 * 3_600);

/// Why a run could not be carried out at all (not an invariant violation).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The simulation manifest did not load.
    #[error("simulation manifest: {0}")]
    Manifest(#[from] switchyard_model::manifest::ManifestError),
    /// The runtime could not be built.
    #[error("runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// A request event could not be built.
    #[error("request event: {0}")]
    Event(#[from] serde_json::Error),
}

/// What one seed did and found.
#[derive(Debug, Clone)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// The fault intensities it drew.
    pub faults: chaos::Faults,
    /// Queries accepted.
    pub queries: usize,
    /// Virtual time the run took.
    pub virtual_time: Duration,
    /// Invariant violations (empty: the seed passed).
    pub violations: Vec<String>,
    /// Every injected fault and every query's fate, stamped with virtual time; identical
    /// across replays of the seed.
    pub trace: Vec<String>,
}

impl SeedReport {
    /// Whether every invariant held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Outcome of many seeds.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// Seeds that violated an invariant, with their reports.
    pub failures: Vec<SeedReport>,
    /// Queries accepted over all seeds.
    pub queries: usize,
    /// Faults injected over all seeds.
    pub faults_injected: usize,
}

/// The slack past `deadline + deadline_slack` a query may need because of message faults: each
/// message may fail [`FAULTED_DELIVERIES`] deliveries, each costing its queue's visibility
/// timeout, on the route queue (routing, which arms the deadline) and then on the synth queue
/// (the deadline job); a crashed synthesizer's claim must age past the lease; and a message may
/// be held back by the injected extra delay once on each of the two queues.
pub fn redelivery_slack(topology: &Topology, settings: &EngineSettings, max_extra_delay: Duration) -> Duration {
    let visibility = |id: QueueId| Duration::from_secs(topology.queue(id).map(|q| q.visibility_timeout_s).unwrap_or(0));
    (visibility(QueueId::route()) + visibility(QueueId::synth())) * FAULTED_DELIVERIES
        + settings.synth_lease
        + max_extra_delay * 2
}

/// Run one seed.
pub fn run_seed(seed: u64) -> Result<SeedReport, SimError> {
    quiet_injected_crashes();
    let manifest = Arc::new(Manifest::from_yaml(SIM_MANIFEST, "<sim-routing.yaml>")?);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?;
    let log = ReasonLog::default();
    let reasons = log.reasons.clone();
    let filter = tracing_subscriber::filter::filter_fn(|m| m.is_span() || *m.level() <= Level::WARN);
    let subscriber = tracing_subscriber::registry().with(log.with_filter(filter));
    let _guard = tracing::subscriber::set_default(subscriber);
    runtime.block_on(simulate(seed, manifest, reasons))
}

/// Run `count` seeds from `first`, calling `each` after every one.
pub fn run_seeds(first: u64, count: u64, mut each: impl FnMut(&SeedReport)) -> Result<Summary, SimError> {
    let mut summary = Summary::default();
    for seed in first..first.saturating_add(count) {
        let report = run_seed(seed)?;
        summary.seeds += 1;
        summary.queries += report.queries;
        summary.faults_injected += report.trace.iter().filter(|l| !l.contains("query #")).count();
        each(&report);
        if !report.passed() {
            summary.failures.push(report);
        }
    }
    Ok(summary)
}

/// Every agent kind, the `llm` agents on the scripted [`tools::ClerkModel`] with the `orders`
/// tools served by `desk`.
fn sim_agents(manifest: &Manifest, desk: Arc<tools::Desk>) -> Arc<dyn AgentRuntime> {
    let http = HttpClient::new();
    let mut llm =
        LlmAgents::new(manifest, &http).with_tools(ToolBox::new(manifest, &http).with_server(tools::SOURCE, desk));
    if let Some(provider) = manifest.provider(tools::PROVIDER) {
        llm = llm.with_provider(tools::PROVIDER, Arc::new(tools::ClerkModel), provider.clone());
    }
    Arc::new(Agents::new(manifest).with_llm(llm))
}

/// Keep injected crashes off stderr (they are expected); every other panic still prints.
fn quiet_injected_crashes() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let text = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied());
            if !text.is_some_and(|t| t.starts_with(CRASH_PREFIX)) {
                previous(info);
            }
        }));
    });
}

/// A `POST` of `body` to `path` by `claims`' caller, with idempotency key `key`.
pub(crate) fn post_event(
    path: &str,
    body: &str,
    claims: Value,
    key: &str,
) -> Result<ApiGatewayV2httpRequest, SimError> {
    let mut event: Value = serde_json::from_str(API_EVENT)?;
    event["rawPath"] = json!(path);
    event["rawQueryString"] = json!("");
    event["queryStringParameters"] = json!({});
    event["requestContext"]["http"]["method"] = json!("POST");
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["authorizer"]["jwt"]["claims"] = claims;
    event["headers"] = json!({ "content-type": "application/json", "idempotency-key": key });
    event["body"] = json!(body);
    Ok(serde_json::from_value(event)?)
}

struct Accepted {
    index: usize,
    intent: String,
    query_id: String,
    user: String,
    session: String,
}

/// Submit question `index` the way a careful client does: with an idempotency key, retrying
/// 5xx answers and dropped connections (a crashed intake). Retries past the faulted ones run
/// calm, like every other delivery.
async fn submit(
    deps: &Arc<Deps>,
    chaos: &Chaos,
    index: usize,
    violations: &mut Vec<String>,
) -> Result<Option<Accepted>, SimError> {
    let (question, intent) = QUESTIONS[chaos.below(0, QUESTIONS.len() as u64) as usize];
    let user = format!("user-{}", chaos.below(0, 3));
    // Every caller keeps one conversation: its questions are turns of one session, often in
    // flight at the same time, and their synth jobs are redelivered like any other message.
    let session = format!("conv-{user}");
    let body = json!({ "query": question, "session_id": session }).to_string();
    for attempt in 0..=FAULTED_DELIVERIES + 2 {
        let request = post_event("/v1/queries", &body, json!({ "sub": user }), &format!("sim-{index}"))?;
        let d = deps.clone();
        let calm = attempt >= FAULTED_DELIVERIES;
        let outcome = tokio::spawn(CALM.scope(calm, async move { handle_http(&d, request).await })).await;
        match outcome {
            Ok(r) if r.status_code == 200 || r.status_code == 202 => {
                let text = match &r.body {
                    Some(aws_lambda_events::encodings::Body::Text(t)) => t.clone(),
                    _ => String::new(),
                };
                let value: Value = serde_json::from_str(&text)?;
                let query_id = value["query_id"].as_str().unwrap_or_default().to_string();
                let got = value["intent"].as_str().unwrap_or_default();
                if got != intent {
                    violations.push(format!("query #{index} was classified {got}, not {intent}"));
                }
                chaos.note(&format!("query #{index} ({intent}) accepted after {} tries", attempt + 1));
                return Ok(Some(Accepted { index, intent: intent.to_string(), query_id, user, session }));
            }
            Ok(r) if r.status_code >= 500 => {
                chaos.note(&format!("query #{index}: intake answered {}; retrying", r.status_code))
            }
            Ok(r) => {
                violations.push(format!("query #{index} was refused with {}", r.status_code));
                return Ok(None);
            }
            Err(_) => chaos.note(&format!("query #{index}: intake crashed; retrying")),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    violations.push(format!("query #{index} was never accepted, calm retries included"));
    Ok(None)
}

/// A message no handler can ever process, sent past the faults.
async fn send_poison(queue: &MemoryQueue, chaos: &Chaos, topology: &Topology) -> Option<String> {
    let target = topology.queues.get(chaos.below(0, topology.queues.len() as u64) as usize)?.id;
    let unknown =
        format!("{:08x}-0000-4000-8000-{:012x}", chaos.below(0, u64::from(u32::MAX)), chaos.below(0, 1 << 40));
    let bodies = [
        "{not json".to_string(),
        r#"{"v":9,"type":"route","query_id":"x"}"#.to_string(),
        JobMessage::new(Job::Route { query_id: unknown.clone() }).to_body(),
        JobMessage::new(Job::Synthesize { query_id: unknown }).to_body(),
    ];
    let choice = chaos.below(0, bodies.len() as u64) as usize;
    let body = bodies.get(choice)?.clone();
    chaos.note(&format!("poison message {choice} sent to {}", target.name()));
    let message = OutgoingMessage { body, delay: Duration::ZERO, attributes: BTreeMap::new() };
    queue.send(target, message).await.ok()
}

async fn simulate(
    seed: u64,
    manifest: Arc<Manifest>,
    reasons: Arc<std::sync::Mutex<reasons::Reasons>>,
) -> Result<SeedReport, SimError> {
    let started = tokio::time::Instant::now();
    let chaos = Arc::new(Chaos::new(seed));
    let epoch = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").map(|t| t.to_utc()).unwrap_or_default();
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::starting_at(epoch));
    let topology = Topology::for_manifest(&manifest);
    let lost = {
        let chaos = chaos.clone();
        Arc::new(move |_query_id: &str| {
            chaos.roll(chaos.faults.lost_fan_in_answer, "a fan-in write's answer is lost; the write is sent again")
        })
    };
    let memory_store = Arc::new(MemoryStore::new(clock.clone()).with_lost_fan_in_answers(lost));
    let memory_queue = Arc::new(MemoryQueue::new(&topology));
    let store = Arc::new(chaos_store(memory_store.clone(), chaos.clone()));
    let queue = Arc::new(ChaosQueue::new(memory_queue.clone(), chaos.clone()));
    let desk = Arc::new(tools::Desk::new(chaos.clone()));
    let agents = Arc::new(ChaosAgents::new(sim_agents(&manifest, desk.clone()), chaos.clone()));
    let settings = EngineSettings::default();
    let slack =
        manifest.query.deadline_slack.as_std() + redelivery_slack(&topology, &settings, chaos.faults.max_extra_delay);
    let deps = Arc::new(Deps::new(manifest.clone(), store, queue, clock, agents, settings).with_seed(seed));
    let pollers = poller::start(deps.clone(), &topology, chaos.clone());

    let mut violations = Vec::new();
    let mut accepted = Vec::new();
    let mut poison = BTreeSet::new();
    let mut people = Vec::new();
    let queries = chaos.below(2, 6) as usize;
    for index in 0..queries {
        tokio::time::sleep(Duration::from_millis(chaos.below(0, 2_000))).await;
        if let Some(a) = submit(&deps, &chaos, index, &mut violations).await? {
            let (d, m, c) = (deps.clone(), memory_store.clone(), chaos.clone());
            let (query_id, user) = (a.query_id.clone(), a.user.clone());
            people.push(tokio::spawn(person::decide(d, m, c, index, query_id, user)));
            accepted.push(a);
        }
        if chaos.roll_always(0.2, "a poison message is injected") {
            if let Some(id) = send_poison(&memory_queue, &chaos, &topology).await {
                poison.insert(id);
            }
        }
    }

    // Run until every queue outside the dead-letter queues is empty.
    let mut leftovers = Vec::new();
    let until = tokio::time::Instant::now() + QUIESCE_LIMIT;
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        leftovers.clear();
        for spec in &topology.queues {
            let depth = memory_queue.depth(spec.id).await.map(|d| d.total()).unwrap_or(0);
            if depth > 0 {
                leftovers.push((spec.id.name(), depth));
            }
        }
        if leftovers.is_empty() || tokio::time::Instant::now() >= until {
            break;
        }
    }
    drop(pollers);
    for p in people {
        // A person still watching is watching a query that never ended, which is reported.
        if p.is_finished() {
            if let Ok(Ok(seen)) = p.await {
                violations.extend(seen);
            }
        } else {
            p.abort();
        }
    }
    let virtual_time = started.elapsed();
    let desk = desk.log();

    // Collect the facts and check.
    let observed = chaos.observed();
    let mut known = BTreeSet::new();
    for a in &accepted {
        known.insert(a.query_id.clone());
        let facts = QueryFacts {
            index: a.index,
            intent: a.intent.clone(),
            record: memory_store.get_query(&a.query_id).await.ok().flatten(),
            output: memory_store.get_output(&a.query_id).await.ok().flatten(),
            handoffs: memory_store.list_handoffs(&a.query_id).await.unwrap_or_default(),
            events: memory_store.list_events(&a.query_id).await.unwrap_or_default(),
        };
        if let Some(o) = &facts.output {
            let results: Vec<String> =
                o.agent_results.iter().map(|r| format!("{}:{:?}", r.agent_id, r.status)).collect();
            chaos.note(&format!(
                "query #{} ended {:?} after {} ms (confidence {}, {} caveats; {})",
                a.index,
                o.status,
                o.total_latency_ms,
                o.response_confidence,
                o.caveats.len(),
                results.join(" ")
            ));
        }
        invariants::check_query(&facts, &observed, slack, &mut violations);
        let records = memory_store.tool_calls_of(&a.query_id);
        invariants::check_tools(&facts, &records, &desk, &mut violations);
        if let Some(line) = tool_summary(&facts, &desk) {
            chaos.note(&line);
        }
    }
    // Sessions: every answered query is one turn of its caller's session, recorded once.
    let mut sessions: std::collections::BTreeMap<(String, String), Vec<invariants::TurnFacts>> = Default::default();
    for a in &accepted {
        let answered = memory_store.get_output(&a.query_id).await.ok().flatten().is_some();
        sessions.entry((a.user.clone(), a.session.clone())).or_default().push(invariants::TurnFacts {
            index: a.index,
            intent: a.intent.clone(),
            query_id: a.query_id.clone(),
            answered,
        });
    }
    for ((user, session), turns) in &sessions {
        let record = memory_store.get_session(user, session).await.ok().flatten();
        invariants::check_session(session, record.as_ref(), turns, &mut violations);
    }
    for tool in &desk.unkeyed {
        violations.push(format!("a {tool} call was made without an idempotency key"));
    }
    let mut stray: Vec<String> = memory_store.query_ids().into_iter().filter(|id| !known.contains(id)).collect();
    stray.sort();
    for id in stray {
        violations.push(format!(
            "a query nobody was told about was recorded (status {:?})",
            memory_store.get_query(&id).await.ok().flatten().map(|q| q.status)
        ));
    }
    let mut dead_letters = Vec::new();
    for spec in &topology.queues {
        let dlq = spec.id.dlq();
        loop {
            let batch = memory_queue.receive(dlq, 10, Duration::ZERO).await.unwrap_or_default();
            if batch.is_empty() {
                break;
            }
            dead_letters.extend(batch.into_iter().map(|m| (dlq.name(), m.message_id)));
        }
    }
    let reasons = reasons.lock().map(|r| r.clone()).unwrap_or_default();
    invariants::check_messages(&leftovers, &dead_letters, &poison, &reasons, &mut violations);
    let healthy_dead = dead_letters.iter().filter(|(_, id)| !poison.contains(id)).count();
    if healthy_dead > 0 {
        chaos.note(&format!("{healthy_dead} healthy messages were dead-lettered"));
    }
    Ok(SeedReport {
        seed,
        faults: chaos.faults,
        queries: accepted.len(),
        virtual_time,
        violations,
        trace: chaos.trace(),
    })
}

/// How a failing seed prints itself: every violation, then the command that replays it.
pub fn describe_failure(report: &SeedReport) -> String {
    let mut out = String::new();
    for v in &report.violations {
        out.push_str(&format!("seed {}: invariant violated: {v}\n", report.seed));
    }
    out.push_str(&format!("seed {}: replay with `{} {}`\n", report.seed, REPLAY_COMMAND, report.seed));
    out
}

/// One query's tool calls and approvals as a trace line (`None`: it called no tool).
fn tool_summary(facts: &invariants::QueryFacts, desk: &tools::DeskLog) -> Option<String> {
    use switchyard_engine::ports::{EventKind, Verdict};
    let results: Vec<&switchyard_engine::ports::Event> =
        facts.events.iter().filter(|e| e.kind == EventKind::ToolResult).collect();
    if results.is_empty() {
        return None;
    }
    let dispatches: Vec<&str> = results.iter().filter_map(|e| e.detail["dispatch_id"].as_str()).collect();
    let made = desk.writes.iter().filter(|(k, _)| dispatches.iter().any(|d| k.starts_with(d))).count();
    let unknown = results.iter().filter(|e| e.detail["status"].as_str() == Some("unknown")).count();
    let replayed = results.iter().filter(|e| e.detail["replayed"].as_bool() == Some(true)).count();
    let approvals: Vec<&str> = facts
        .record
        .iter()
        .flat_map(|q| q.approvals.iter())
        .map(|a| match a.decision.as_ref().map(|d| d.verdict) {
            Some(Verdict::Approve) => "approval approved",
            Some(Verdict::Reject) => "approval rejected",
            Some(Verdict::Expired) => "approval expired",
            None => "approval pending",
        })
        .collect();
    let mut parts = vec![format!("{} results", results.len()), format!("{made} write calls made")];
    if unknown > 0 {
        parts.push(format!("{unknown} reported unknown"));
    }
    if replayed > 0 {
        parts.push(format!("{replayed} replayed"));
    }
    parts.extend(approvals.into_iter().map(str::to_string));
    Some(format!("query #{} tools: {}", facts.index, parts.join(", ")))
}

/// What the tool mix must exercise somewhere over the default seeds (trace markers).
pub const TOOL_MIX: [&str; 12] = [
    "crash before the note call is made",
    "crash before the refund call is made",
    "call is made, before its record",
    "crash after a tool call's record",
    "call errs",
    "call is slow",
    "reported unknown",
    "replayed",
    "never answers",
    "approval approved",
    "approval rejected",
    "approval expired",
];

/// The fault kinds a trace line can name, for coverage checks.
pub const FAULT_KINDS: [&str; 17] = [
    "delivered twice",
    "arrives late",
    "arrives early",
    "fails (not applied)",
    "applied but reported unavailable",
    "crash before",
    "crash after",
    "concurrent writer",
    "fan-in write's answer is lost",
    "crashes before deleting",
    "becomes visible while its handler runs",
    "stalls before deleting",
    "errs",
    "hangs",
    "is slow",
    "answers garbage",
    "poison message",
];

/// What a planted-bug test checks: that the default seeds contain one whose violations
/// `caught` accepts, that the harness prints it with the command that replays it, and that the
/// replay violates the same invariants. `planted` names the bug in the failure message. Prints
/// the first such report and how many seeds caught the bug.
pub fn assert_seeds_catch(planted: &str, caught: impl Fn(&SeedReport) -> bool) {
    let mut first_failure = None;
    let summary = run_seeds(0, DEFAULT_SEEDS, |report| {
        if caught(report) && first_failure.is_none() {
            first_failure = Some(report.clone());
        }
    })
    .expect("simulation runs");
    let failure =
        first_failure.unwrap_or_else(|| panic!("{} seeds ran and none noticed the planted {planted}", summary.seeds));
    let printed = describe_failure(&failure);
    println!("{printed}");
    assert!(printed.starts_with(&format!("seed {}: invariant violated: ", failure.seed)), "{printed}");
    assert!(printed.contains(&format!("{REPLAY_COMMAND} {}", failure.seed)));
    let replay = run_seed(failure.seed).expect("replays");
    assert_eq!(replay.violations, failure.violations, "the printed seed replays the same violations");
    let count = summary.failures.iter().filter(|r| caught(r)).count();
    println!("{count} of {} seeds caught it", summary.seeds);
}
