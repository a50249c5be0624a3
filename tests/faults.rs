//! The named fault tests of "Nothing lost" (issue 7): each fault the queues, functions and
//! store can throw at the pipeline, injected exactly once (or exactly as described) through
//! port wrappers, then the outcome a user would see — one answer, once — checked. Everything
//! runs in virtual time, so visibility timeouts of minutes and deadlines of an hour are instant.

use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;
use switchyard_agents::ManifestAgents;
use switchyard_engine::handlers::{handle_http, handle_sqs, Function};
use switchyard_engine::memory::{MemoryQueue, MemoryStore};
use switchyard_engine::ports::{
    AgentError, AgentReply, AgentRuntime, Event, EventKind, HandoffRecord, HandoffWrite, OutgoingMessage, QueryRecord,
    QueryStatus, Queue, QueueDepth, QueueError, QueueId, ReceivedMessage, Store, StoreError, TokioClock,
};
use switchyard_engine::Deps;
use switchyard_engine::{pollers::invoke, pollers::PollerConfig, pollers::Pollers, Embedded};
use switchyard_model::contracts::{AgentDispatch, HandoffStatus, OrchestratorOutput, OutputStatus};
use switchyard_model::jobs::{Job, JobMessage};
use switchyard_model::limits::{DYNAMODB_MAX_ITEM_BYTES, SQS_MAX_MESSAGE_BYTES};
use switchyard_model::manifest::{Agent, Manifest};
use switchyard_model::topology::Topology;
use switchyard_testkit::faults::{FaultyQueue, QueueFaults};
use switchyard_tests::*;

// ---- rig: the embedded system with a trippable store and a recording queue ------------------

/// What a tripped store call does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// Panic before the write (the function is killed; nothing applied).
    CrashBefore,
    /// Panic after the write applied.
    CrashAfter,
    /// Apply the write, then report `Unavailable`.
    Ambiguous,
    /// Report `Unavailable` without applying.
    Unavailable,
}

/// One store call, for a rule to decide on.
struct Call<'a> {
    op: &'static str,
    /// 1 for the first call of this op.
    n: u32,
    handoff: Option<&'a HandoffRecord>,
}

type Rule = Box<dyn Fn(&Call) -> Option<Fault> + Send + Sync>;

const CRASH: &str = "test: injected crash";

fn quiet_injected_crashes() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let text = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied());
            if !text.is_some_and(|t| t.starts_with(CRASH)) {
                previous(info);
            }
        }));
    });
}

/// A store whose calls fail as a rule says, and that counts what it applied.
struct TrippedStore {
    inner: Arc<dyn Store>,
    rule: Mutex<Option<Rule>>,
    calls: Mutex<BTreeMap<&'static str, u32>>,
    claims: AtomicU32,
    outputs: AtomicU32,
    handoffs: Mutex<BTreeMap<String, u32>>,
}

impl TrippedStore {
    fn new(inner: Arc<dyn Store>) -> TrippedStore {
        TrippedStore {
            inner,
            rule: Mutex::new(None),
            calls: Mutex::new(BTreeMap::new()),
            claims: AtomicU32::new(0),
            outputs: AtomicU32::new(0),
            handoffs: Mutex::new(BTreeMap::new()),
        }
    }

    fn trip(&self, rule: impl Fn(&Call) -> Option<Fault> + Send + Sync + 'static) {
        *self.rule.lock().expect("rule") = Some(Box::new(rule));
    }

    /// The fix is deployed: no more faults.
    fn heal(&self) {
        *self.rule.lock().expect("rule") = None;
    }

    fn calls(&self, op: &str) -> u32 {
        self.calls.lock().expect("calls").get(op).copied().unwrap_or(0)
    }

    fn handoffs_written(&self, dispatch_id: &str) -> u32 {
        self.handoffs.lock().expect("handoffs").get(dispatch_id).copied().unwrap_or(0)
    }

    fn before(&self, op: &'static str, handoff: Option<&HandoffRecord>) -> Result<Option<Fault>, StoreError> {
        let n = {
            let mut calls = self.calls.lock().expect("calls");
            let n = calls.entry(op).or_default();
            *n += 1;
            *n
        };
        let fault = self.rule.lock().expect("rule").as_ref().and_then(|rule| rule(&Call { op, n, handoff }));
        match fault {
            Some(Fault::CrashBefore) => panic!("{CRASH} before {op}"),
            Some(Fault::Unavailable) => {
                Err(StoreError::Unavailable { message: format!("test: {op} unavailable"), source: None })
            }
            other => Ok(other),
        }
    }

    fn after<T>(&self, op: &str, fault: Option<Fault>, result: Result<T, StoreError>) -> Result<T, StoreError> {
        match (fault, result) {
            (Some(Fault::CrashAfter), Ok(_)) => panic!("{CRASH} after {op}"),
            (Some(Fault::Ambiguous), Ok(_)) => Err(StoreError::Unavailable {
                message: format!("test: {op} applied, reported unavailable"),
                source: None,
            }),
            (_, result) => result,
        }
    }
}

#[async_trait::async_trait]
impl Store for TrippedStore {
    async fn create_query(&self, q: &QueryRecord, e: &[Event]) -> Result<(), StoreError> {
        let f = self.before("create_query", None)?;
        let r = self.inner.create_query(q, e).await;
        self.after("create_query", f, r)
    }
    async fn get_query(&self, id: &str) -> Result<Option<QueryRecord>, StoreError> {
        self.inner.get_query(id).await
    }
    async fn list_user_queries(&self, user_id: &str, limit: usize) -> Result<Vec<QueryRecord>, StoreError> {
        self.inner.list_user_queries(user_id, limit).await
    }
    async fn find_idempotency_key(&self, u: &str, k: &str) -> Result<Option<String>, StoreError> {
        self.inner.find_idempotency_key(u, k).await
    }
    async fn list_signals(
        &self,
        r: &switchyard_engine::ports::SignalPageRequest,
    ) -> Result<switchyard_engine::ports::SignalPage, StoreError> {
        self.inner.list_signals(r).await
    }
    async fn update_query(&self, q: &QueryRecord, v: u64, e: &[Event]) -> Result<(), StoreError> {
        let f = self.before("update_query", None)?;
        let r = self.inner.update_query(q, v, e).await;
        if r.is_ok() && q.status == QueryStatus::Synthesizing {
            self.claims.fetch_add(1, Ordering::SeqCst);
        }
        self.after("update_query", f, r)
    }
    async fn record_handoff(&self, h: Arc<HandoffRecord>, e: &[Event]) -> Result<HandoffWrite, StoreError> {
        let f = self.before("record_handoff", Some(&h))?;
        let r = self.inner.record_handoff(Arc::clone(&h), e).await;
        if matches!(r, Ok(HandoffWrite::Recorded { .. })) {
            *self.handoffs.lock().expect("handoffs").entry(h.handoff.dispatch_id.clone()).or_default() += 1;
        }
        self.after("record_handoff", f, r)
    }
    async fn get_handoff(&self, q: &str, d: &str) -> Result<Option<Arc<HandoffRecord>>, StoreError> {
        self.inner.get_handoff(q, d).await
    }
    async fn list_handoffs(&self, q: &str) -> Result<Vec<Arc<HandoffRecord>>, StoreError> {
        self.inner.list_handoffs(q).await
    }
    async fn finish_query(
        &self,
        o: Arc<OrchestratorOutput>,
        q: &QueryRecord,
        v: u64,
        e: &[Event],
    ) -> Result<(), StoreError> {
        let f = self.before("finish_query", None)?;
        let r = self.inner.finish_query(o, q, v, e).await;
        if r.is_ok() {
            self.outputs.fetch_add(1, Ordering::SeqCst);
        }
        self.after("finish_query", f, r)
    }
    async fn get_output(&self, q: &str) -> Result<Option<Arc<OrchestratorOutput>>, StoreError> {
        self.inner.get_output(q).await
    }
    async fn append_events(&self, e: &[Event]) -> Result<(), StoreError> {
        let f = self.before("append_events", None)?;
        let r = self.inner.append_events(e).await;
        self.after("append_events", f, r)
    }
    async fn list_events(&self, q: &str) -> Result<Vec<Event>, StoreError> {
        self.inner.list_events(q).await
    }
    async fn put_manifest(&self, f: &str, b: &str) -> Result<(), StoreError> {
        self.inner.put_manifest(f, b).await
    }
    async fn get_manifest(&self, f: &str) -> Result<Option<String>, StoreError> {
        self.inner.get_manifest(f).await
    }
    async fn get_session(
        &self,
        u: &str,
        s: &str,
    ) -> Result<Option<switchyard_engine::ports::SessionRecord>, StoreError> {
        self.inner.get_session(u, s).await
    }
    async fn put_session(&self, s: &switchyard_engine::ports::SessionRecord, v: u64) -> Result<(), StoreError> {
        let f = self.before("put_session", None)?;
        let r = self.inner.put_session(s, v).await;
        self.after("put_session", f, r)
    }
}

type SendRule = Box<dyn Fn(QueueId, &Job) -> bool + Send + Sync>;

/// A queue that records every message that reached it (job and delay), and can refuse sends.
struct RecordingQueue {
    inner: Arc<dyn Queue>,
    sent: Mutex<Vec<(QueueId, Job, Duration)>>,
    refuse: Mutex<Option<SendRule>>,
}

impl RecordingQueue {
    fn sent(&self) -> Vec<(QueueId, Job, Duration)> {
        self.sent.lock().expect("sent").clone()
    }

    fn count(&self, pick: impl Fn(&Job) -> bool) -> usize {
        self.sent().iter().filter(|(_, j, _)| pick(j)).count()
    }
}

#[async_trait::async_trait]
impl Queue for RecordingQueue {
    async fn send(&self, queue: QueueId, message: OutgoingMessage) -> Result<String, QueueError> {
        let job = JobMessage::parse(&message.body).ok();
        if let Some(job) = &job {
            if self.refuse.lock().expect("refuse").as_ref().is_some_and(|refuse| refuse(queue, job)) {
                return Err(QueueError::Unavailable { message: "test: send refused".into(), source: None });
            }
        }
        let delay = message.delay;
        let id = self.inner.send(queue, message).await?;
        if let Some(job) = job {
            self.sent.lock().expect("sent").push((queue, job, delay));
        }
        Ok(id)
    }
    async fn receive(&self, queue: QueueId, max: usize, wait: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.inner.receive(queue, max, wait).await
    }
    async fn delete(&self, queue: QueueId, receipt: &str) -> Result<(), QueueError> {
        self.inner.delete(queue, receipt).await
    }
    async fn change_visibility(&self, queue: QueueId, receipt: &str, timeout: Duration) -> Result<(), QueueError> {
        self.inner.change_visibility(queue, receipt, timeout).await
    }
    async fn depth(&self, queue: QueueId) -> Result<QueueDepth, QueueError> {
        self.inner.depth(queue).await
    }
}

struct Rig {
    system: Embedded,
    store: Arc<TrippedStore>,
    queue: Arc<RecordingQueue>,
    pollers: Option<Pollers>,
}

fn faults_manifest() -> Manifest {
    manifest_fixture("manifests/faults.yaml")
}

/// The embedded system on `manifest` with a trippable store and a recording queue (every
/// message duplicated when `duplicate`), pollers not started.
fn rig_with(manifest: Manifest, duplicate: bool, agents: Arc<dyn AgentRuntime>) -> Rig {
    quiet_injected_crashes();
    let manifest = Arc::new(manifest);
    let clock = Arc::new(TokioClock::new());
    let topology = Topology::for_manifest(&manifest);
    let memory_store = Arc::new(MemoryStore::new(clock.clone()));
    let store = Arc::new(TrippedStore::new(memory_store.clone()));
    let memory_queue = Arc::new(MemoryQueue::new(&topology));
    let queue = Arc::new(RecordingQueue {
        inner: memory_queue.clone(),
        sent: Mutex::new(Vec::new()),
        refuse: Mutex::new(None),
    });
    let port: Arc<dyn Queue> = if duplicate {
        Arc::new(FaultyQueue::new(queue.clone(), QueueFaults { duplicate: 1.0, max_extra_delay: Duration::ZERO }, 1))
    } else {
        queue.clone()
    };
    let deps = Deps::new(manifest, store.clone(), port, clock, agents, Default::default()).with_seed(1);
    let system = Embedded { deps: Arc::new(deps), store: memory_store, queue: memory_queue, topology };
    Rig { system, store, queue, pollers: None }
}

fn rig() -> Rig {
    rig_with(faults_manifest(), false, Arc::new(ManifestAgents))
}

impl Rig {
    fn start(mut self) -> Rig {
        self.pollers = Some(self.system.start(PollerConfig { wait: Duration::from_secs(20), default_concurrency: 16 }));
        self
    }

    fn deps(&self) -> &Arc<Deps> {
        &self.system.deps
    }

    async fn submit(&self, question: &str) -> String {
        let body = json!({ "query": question }).to_string();
        let r = handle_http(self.deps(), api_request("POST", "/v1/queries", "", Some(&body), "analyst-1", "")).await;
        assert_eq!(r.status_code, 202, "{}", text_body(&r));
        json_body(&r)["query_id"].as_str().expect("query id").to_string()
    }

    async fn output(&self, query_id: &str) -> OrchestratorOutput {
        for _ in 0..100_000 {
            if let Some(o) = self.system.store.get_output(query_id).await.expect("store") {
                return Arc::unwrap_or_clone(o);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("query {query_id} never finished");
    }

    async fn query(&self, query_id: &str) -> QueryRecord {
        self.system.store.get_query(query_id).await.expect("store").expect("query")
    }

    async fn events(&self, query_id: &str, kind: EventKind) -> Vec<Event> {
        self.system.store.list_events(query_id).await.expect("events").into_iter().filter(|e| e.kind == kind).collect()
    }

    async fn depth(&self, queue: QueueId) -> QueueDepth {
        self.system.queue.depth(queue).await.expect("depth")
    }

    /// Every message on every queue, dead-letter queues included, by queue name.
    async fn leftovers(&self) -> Vec<(String, u64)> {
        let mut left = Vec::new();
        for q in self.system.queue.queue_ids() {
            let total = self.depth(q).await.total();
            if total > 0 {
                left.push((q.name(), total));
            }
        }
        left
    }

    fn visibility(&self, queue: QueueId) -> Duration {
        Duration::from_secs(self.system.topology.queue(queue).expect("queue").visibility_timeout_s)
    }

    /// Every dispatch of the plan has exactly one handoff, written once.
    async fn assert_one_handoff_per_dispatch(&self, query_id: &str) {
        let plan = self.query(query_id).await.plan.expect("plan");
        let handoffs = self.system.store.list_handoffs(query_id).await.expect("handoffs");
        for d in plan.all_dispatches() {
            let id = &d.dispatch.dispatch_id;
            assert_eq!(
                handoffs.iter().filter(|h| &h.handoff.dispatch_id == id).count(),
                1,
                "{} has one handoff",
                d.dispatch.target_agent
            );
            assert_eq!(self.store.handoffs_written(id), 1, "{}'s handoff was written once", d.dispatch.target_agent);
        }
    }
}

fn result<'a>(output: &'a OrchestratorOutput, agent: &str) -> &'a switchyard_model::contracts::AgentResult {
    output
        .agent_results
        .iter()
        .find(|r| r.agent_id == agent)
        .unwrap_or_else(|| panic!("no result for {agent}: {output:#?}"))
}

fn is_dispatch_to(plan_dispatch: &AgentDispatch) -> impl Fn(&Job) -> bool + '_ {
    move |job| matches!(job, Job::Dispatch { dispatch_id, .. } if *dispatch_id == plan_dispatch.dispatch_id)
}

// ---- 1 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn every_message_type_delivered_twice_has_one_effect_each_and_one_synthesis() {
    let rig = rig_with(faults_manifest(), true, Arc::new(ManifestAgents)).start();
    let questions = ["bravo pair question", "delta broken question", "foxtrot quick question"];
    let mut ids = Vec::new();
    for q in questions {
        ids.push(rig.submit(q).await);
    }
    for id in &ids {
        rig.output(id).await;
    }
    tokio::time::sleep(Duration::from_secs(4 * 3_600)).await; // every deadline fires, twice
    for (name, pick) in [
        ("route", (|j: &Job| matches!(j, Job::Route { .. })) as fn(&Job) -> bool),
        ("dispatch", |j| matches!(j, Job::Dispatch { .. })),
        ("synthesize", |j| matches!(j, Job::Synthesize { .. })),
        ("deadline", |j| matches!(j, Job::Deadline { .. })),
    ] {
        let n = rig.queue.count(pick);
        assert!(n >= 2 && n % 2 == 0, "every {name} message was delivered twice: {n}");
    }
    assert_eq!(rig.store.outputs.load(Ordering::SeqCst), 3, "one output per query");
    assert_eq!(rig.store.claims.load(Ordering::SeqCst), 3, "one synthesis per query");
    for id in &ids {
        rig.assert_one_handoff_per_dispatch(id).await;
        assert_eq!(rig.events(id, EventKind::Final).await.len(), 1);
    }
    assert_eq!(rig.leftovers().await, Vec::<(String, u64)>::new(), "every copy was consumed, none dead-lettered");
}

// ---- 2 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_worker_killed_after_writing_its_handoff_before_the_ack_is_redelivered_and_the_handoff_is_stored_once() {
    let rig = rig().start();
    rig.store.trip(|c| (c.op == "record_handoff" && c.n == 1).then_some(Fault::CrashAfter));
    let id = rig.submit("alpha steady question").await;
    let output = rig.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success);
    assert!(
        output.total_latency_ms >= rig.visibility(QueueId::tier(2)).as_millis() as u64,
        "the fan-in moved on only when the redelivered job found the handoff: {} ms",
        output.total_latency_ms
    );
    rig.assert_one_handoff_per_dispatch(&id).await;
    assert_eq!(rig.store.calls("record_handoff"), 1, "the redelivery found the handoff and did not write again");
    assert_eq!(rig.depth(QueueId::tier(2)).await.total(), 0, "the redelivered job was acked");
}

// ---- 3 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_worker_killed_before_writing_is_retried_and_after_max_receives_is_dead_lettered_with_the_dispatch_failed() {
    let rig = rig().start();
    // The agent's answer never reaches the store; only the engine's give-up record does.
    rig.store.trip(|c| {
        (c.op == "record_handoff" && c.handoff.is_some_and(|h| h.handoff.execution.status == HandoffStatus::Success))
            .then_some(Fault::Unavailable)
    });
    let id = rig.submit("alpha steady question").await;
    let output = rig.output(&id).await;
    let steady = result(&output, "steady");
    assert_eq!(steady.status, HandoffStatus::Failed);
    assert!(steady.error.as_deref().is_some_and(|e| e.contains("failed on all 5 deliveries")), "{:?}", steady.error);
    assert_eq!(output.status, OutputStatus::Failed);
    assert_eq!(
        rig.store.calls("record_handoff"),
        6,
        "five deliveries tried to write, the last one also recorded the failure"
    );
    tokio::time::sleep(rig.visibility(QueueId::tier(2)) * 2).await;
    assert_eq!(rig.system.queue.peek(QueueId::tier(2).dlq()).len(), 1, "the job is in the dead-letter queue");
    assert_eq!(rig.depth(QueueId::tier(2)).await.total(), 0);
}

// ---- 4 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn one_poison_message_in_a_batch_of_ten_is_the_only_one_retried_and_then_dead_lettered() {
    let rig = rig();
    let mut ids = Vec::new();
    for _ in 0..9 {
        ids.push(rig.submit("alpha steady question").await);
    }
    let poison = "{\"v\":1,\"type\":\"route\",\"query_id\":\"' OR 1=1 --\"}";
    rig.system
        .queue
        .send(
            QueueId::route(),
            OutgoingMessage { body: poison.into(), delay: Duration::ZERO, attributes: BTreeMap::new() },
        )
        .await
        .expect("send");
    let batch = rig.system.queue.receive(QueueId::route(), 10, Duration::ZERO).await.expect("receive");
    assert_eq!(batch.len(), 10, "one batch of ten");
    invoke(rig.deps().clone(), QueueId::route(), Function::Router, batch).await;
    assert_eq!(
        rig.depth(QueueId::route()).await,
        QueueDepth { visible: 0, in_flight: 1, delayed: 0 },
        "only the poison message stays"
    );
    for id in &ids {
        assert_eq!(rig.query(id).await.status, QueryStatus::Routed);
    }
    for receive in 2..=5 {
        tokio::time::sleep(rig.visibility(QueueId::route()) + Duration::from_secs(1)).await;
        let again = rig.system.queue.receive(QueueId::route(), 10, Duration::ZERO).await.expect("receive");
        assert_eq!(again.iter().map(|m| (m.body.as_str(), m.receive_count)).collect::<Vec<_>>(), [(poison, receive)]);
        invoke(rig.deps().clone(), QueueId::route(), Function::Router, again).await;
    }
    tokio::time::sleep(rig.visibility(QueueId::route()) + Duration::from_secs(1)).await;
    assert!(rig.system.queue.receive(QueueId::route(), 10, Duration::ZERO).await.expect("receive").is_empty());
    assert_eq!(rig.system.queue.peek(QueueId::route().dlq()), [poison]);
}

// ---- 5 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_handler_panic_redelivers_its_whole_batch_and_the_duplicates_are_harmless() {
    let rig = rig();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(rig.submit("bravo pair question").await);
    }
    // The third routing write of the batch applies, then the router crashes.
    rig.store.trip(|c| (c.op == "update_query" && c.n == 3).then_some(Fault::CrashAfter));
    let rig = rig.start();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(rig.depth(QueueId::route()).await.in_flight, 3, "the crash left the whole batch unacknowledged");
    let mut latencies = Vec::new();
    for id in &ids {
        let output = rig.output(id).await;
        assert_eq!(output.status, OutputStatus::Success);
        latencies.push(output.total_latency_ms);
    }
    assert!(
        latencies.iter().any(|l| *l >= rig.visibility(QueueId::route()).as_millis() as u64),
        "one query waited for the redelivery: {latencies:?}"
    );
    tokio::time::sleep(Duration::from_secs(4 * 3_600)).await;
    assert_eq!(rig.store.outputs.load(Ordering::SeqCst), 3);
    assert_eq!(rig.store.claims.load(Ordering::SeqCst), 3);
    for id in &ids {
        rig.assert_one_handoff_per_dispatch(id).await;
        assert!(rig.events(id, EventKind::Deadline).await.is_empty(), "the duplicate deadlines were no-ops");
    }
    assert_eq!(rig.leftovers().await, Vec::<(String, u64)>::new());
}

// ---- 6 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn an_agent_past_the_deadline_is_a_timeout_and_its_late_answer_changes_nothing() {
    let rig = rig().start();
    let id = rig.submit("echo late question").await;
    let output = rig.output(&id).await;
    assert_eq!(output.status, OutputStatus::Partial);
    assert!(
        (5_000..=6_000).contains(&output.total_latency_ms),
        "deadline 5 s + slack 1 s: {}",
        output.total_latency_ms
    );
    assert_eq!(result(&output, "latecomer").status, HandoffStatus::Timeout);
    tokio::time::sleep(Duration::from_secs(120)).await; // the latecomer answers at 30 s
    assert_eq!(rig.system.store.get_output(&id).await.expect("store").as_deref(), Some(&output));
    let handoffs = rig.system.store.list_handoffs(&id).await.expect("handoffs");
    let late: Vec<_> = handoffs.iter().filter(|h| h.handoff.agent_id == "latecomer").collect();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].handoff.execution.status, HandoffStatus::Timeout, "the late answer did not replace the timeout");
    assert_eq!(rig.store.outputs.load(Ordering::SeqCst), 1);
}

// ---- 7 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_deadline_message_after_the_answer_is_a_no_op() {
    let rig = rig().start();
    let id = rig.submit("foxtrot quick question").await;
    let output = rig.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success);
    assert!(output.total_latency_ms < 1_000);
    tokio::time::sleep(Duration::from_secs(30)).await; // the 10 s deadline fires
    assert_eq!(rig.queue.count(|j| matches!(j, Job::Deadline { .. })), 1);
    assert_eq!(rig.depth(QueueId::synth()).await.total(), 0, "the deadline message was consumed");
    assert_eq!(rig.system.store.get_output(&id).await.expect("store").as_deref(), Some(&output));
    assert!(rig.events(&id, EventKind::Deadline).await.is_empty());
    assert_eq!((rig.store.claims.load(Ordering::SeqCst), rig.store.outputs.load(Ordering::SeqCst)), (1, 1));
}

// ---- 8 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_last_two_handoffs_arriving_at_the_same_instant_give_exactly_one_synthesis() {
    let rig = rig();
    let deps = rig.deps().clone();
    let id = rig.submit("charlie twins question").await;
    let route = rig.system.queue.receive(QueueId::route(), 10, Duration::ZERO).await.expect("receive");
    invoke(deps.clone(), QueueId::route(), Function::Router, route).await;
    let dispatches = rig.system.queue.receive(QueueId::tier(2), 10, Duration::ZERO).await.expect("receive");
    assert_eq!(dispatches.len(), 2);
    let (a, b) = (vec![dispatches[0].clone()], vec![dispatches[1].clone()]);
    // Two worker invocations at once; both agents answer after 500 ms, at the same instant.
    tokio::join!(
        invoke(deps.clone(), QueueId::tier(2), Function::Worker { tier: Some(2) }, a),
        invoke(deps.clone(), QueueId::tier(2), Function::Worker { tier: Some(2) }, b),
    );
    assert_eq!(rig.store.calls("record_handoff"), 2);
    assert_eq!(rig.queue.count(|j| matches!(j, Job::Synthesize { .. })), 1, "exactly one writer completed the fan-in");
    let synth = rig.system.queue.receive(QueueId::synth(), 10, Duration::ZERO).await.expect("receive");
    invoke(deps.clone(), QueueId::synth(), Function::Synthesizer, synth).await;
    let output = rig.system.store.get_output(&id).await.expect("store").expect("output");
    assert_eq!(output.status, OutputStatus::Success);
    assert_eq!(output.agent_results.len(), 2);
    assert_eq!((rig.store.claims.load(Ordering::SeqCst), rig.store.outputs.load(Ordering::SeqCst)), (1, 1));
}

// ---- 9 ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_primary_that_exhausts_its_retries_sends_its_fallback_once_and_a_failing_fallback_makes_the_answer_partial() {
    let rig = rig().start();
    let id = rig.submit("delta broken question").await;
    let output = rig.output(&id).await;
    let broken = result(&output, "broken");
    assert_eq!((broken.status, broken.attempts), (HandoffStatus::Failed, 3));
    let sinking = result(&output, "sinking");
    assert_eq!((sinking.status, sinking.fallback_for.as_deref()), (HandoffStatus::Failed, Some("broken")));
    assert_eq!(result(&output, "helper").status, HandoffStatus::Success);
    assert_eq!(output.status, OutputStatus::Partial);
    let plan = rig.query(&id).await.plan.expect("plan");
    let fallbacks: Vec<_> = plan.all_dispatches().filter(|d| d.fallback_for.is_some()).collect();
    assert_eq!(fallbacks.len(), 1, "one fallback dispatch");
    let first_attempts = rig.queue.count(|j| matches!(j, Job::Dispatch { dispatch_id, attempt: 1, .. } if *dispatch_id == fallbacks[0].dispatch.dispatch_id));
    assert_eq!(first_attempts, 1, "the fallback was sent once");
    assert_eq!(rig.events(&id, EventKind::Fallback).await.len(), 1);
    rig.assert_one_handoff_per_dispatch(&id).await;
}

// ---- 10 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn an_ambiguous_store_error_on_the_fan_in_update_is_retried_idempotently() {
    let rig = rig().start();
    // The handoff that completes the fan-in set is written, but the worker is told it failed.
    rig.store.trip(|c| (c.op == "record_handoff" && c.n == 2).then_some(Fault::Ambiguous));
    let id = rig.submit("bravo pair question").await;
    let output = rig.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success);
    assert_eq!(output.agent_results.len(), 2);
    assert!(output.total_latency_ms >= rig.visibility(QueueId::tier(2)).as_millis() as u64, "synthesized by the retry");
    rig.assert_one_handoff_per_dispatch(&id).await;
    assert_eq!((rig.store.claims.load(Ordering::SeqCst), rig.store.outputs.load(Ordering::SeqCst)), (1, 1));
    assert_eq!(rig.events(&id, EventKind::Handoff).await.len(), 2);
}

// ---- 11 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_queue_send_failing_after_the_store_write_is_repaired_by_the_route_job_redelivery_with_the_same_dispatch_ids()
{
    let rig = rig();
    let refused = Arc::new(AtomicU32::new(0));
    let counter = refused.clone();
    // The second dispatch of the plan fails to send, once, after the plan was written.
    let seen = Arc::new(AtomicU32::new(0));
    *rig.queue.refuse.lock().expect("refuse") = Some(Box::new(move |_, job| {
        matches!(job, Job::Dispatch { .. })
            && seen.fetch_add(1, Ordering::SeqCst) == 1
            && counter.fetch_add(1, Ordering::SeqCst) == 0
    }));
    let rig = rig.start();
    let id = rig.submit("bravo pair question").await;
    let output = rig.output(&id).await;
    assert_eq!(refused.load(Ordering::SeqCst), 1, "a send was refused");
    assert_eq!(output.status, OutputStatus::Success);
    assert!(
        output.total_latency_ms >= rig.visibility(QueueId::route()).as_millis() as u64,
        "repaired by the redelivered route job"
    );
    let plan = rig.query(&id).await.plan.expect("plan");
    for d in plan.all_dispatches() {
        assert_eq!(
            rig.queue.count(is_dispatch_to(&d.dispatch)),
            1,
            "{} was sent once, under its planned id",
            d.dispatch.target_agent
        );
    }
    rig.assert_one_handoff_per_dispatch(&id).await;
}

// ---- 12 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_synthesizer_that_crashes_mid_run_is_resumed_and_the_output_written_once() {
    let rig = rig().start();
    // Killed after claiming the query and merging the handoffs, before writing the output.
    rig.store.trip(|c| (c.op == "finish_query" && c.n == 1).then_some(Fault::CrashBefore));
    let id = rig.submit("bravo pair question").await;
    let output = rig.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success);
    assert!(
        output.total_latency_ms >= rig.visibility(QueueId::synth()).as_millis() as u64,
        "resumed after the redelivery"
    );
    assert_eq!(rig.store.claims.load(Ordering::SeqCst), 2, "the stale claim was taken over");
    assert_eq!(rig.store.outputs.load(Ordering::SeqCst), 1);
    assert_eq!(rig.query(&id).await.status, QueryStatus::Done);
    assert_eq!(rig.events(&id, EventKind::Final).await.len(), 1);
}

// ---- 13 --------------------------------------------------------------------------------------

#[test]
fn a_manifest_whose_timeouts_break_the_queue_and_function_rules_is_rejected_with_a_clear_error() {
    let err = Manifest::load(&fixture("manifests/broken/timeout_over_lambda_limit.yaml")).expect_err("rejected");
    let text = err.to_string();
    assert!(text.contains("agents[0].timeout") && text.contains("exceeds the maximum 870s"), "{text}");
    let tier = fixture_text("manifests/faults.yaml").replace("timeout: 800s", "timeout: 20m");
    let err = Manifest::from_yaml(&tier, "faults.yaml").expect_err("rejected");
    let text = err.to_string();
    assert!(text.contains("faults.yaml") && text.contains("tiers[1].timeout") && text.contains("870s"), "{text}");
}

// ---- 14 --------------------------------------------------------------------------------------

/// Agents that answer with `bytes` of text each.
struct Verbose {
    bytes: usize,
}

#[async_trait::async_trait]
impl AgentRuntime for Verbose {
    async fn run(&self, agent: &Agent, _dispatch: &AgentDispatch, _attempt: u32) -> Result<AgentReply, AgentError> {
        Ok(AgentReply::Answer(json!({
            "primary_output": { "response": format!("{}: {}", agent.id, "x".repeat(self.bytes)) },
            "confidence": 0.9,
        })))
    }
}

/// In memory here; `aws_adapters.rs` runs the same case on DynamoDB and SQS (local endpoint).
#[tokio::test(start_paused = true)]
async fn payloads_at_the_sqs_and_dynamodb_limits_are_handled_as_documented() {
    // A 600 KB answer: the handoff keeps its status and the first 4000 characters, with a caveat.
    let rig = rig_with(faults_manifest(), false, Arc::new(Verbose { bytes: 600 * 1024 })).start();
    let id = rig.submit("alpha steady question").await;
    let output = rig.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success);
    let handoff = &rig.system.store.list_handoffs(&id).await.expect("handoffs")[0];
    assert!(serde_json::to_vec(handoff).expect("json").len() < DYNAMODB_MAX_ITEM_BYTES);
    assert!(output.caveats.iter().any(|c| c.contains("record limit")), "{:?}", output.caveats);

    // Two 250 KB answers fit one item each, but not together in the output.
    let rig = rig_with(faults_manifest(), false, Arc::new(Verbose { bytes: 250 * 1024 })).start();
    let id = rig.submit("bravo pair question").await;
    let output = rig.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success);
    assert!(serde_json::to_vec(&output).expect("json").len() < DYNAMODB_MAX_ITEM_BYTES);
    assert!(output.caveats.iter().any(|c| c.contains("shortened")), "{:?}", output.caveats);

    // SQS: a message over 256 KiB is refused by the queue; a body over the job limit is a batch
    // item failure, never a crash.
    let big = OutgoingMessage {
        body: "x".repeat(SQS_MAX_MESSAGE_BYTES + 1),
        delay: Duration::ZERO,
        attributes: BTreeMap::new(),
    };
    assert!(matches!(rig.system.queue.send(QueueId::route(), big).await, Err(QueueError::TooLarge(_))));
    let at_limit = "x".repeat(SQS_MAX_MESSAGE_BYTES);
    let response = handle_sqs(rig.deps(), Function::Router, sqs_event(&[&at_limit])).await.expect("handled");
    assert_eq!(response.batch_item_failures.len(), 1);
}

// ---- 15 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_deadline_longer_than_the_sqs_maximum_delay_is_chained_and_fires_on_time() {
    let rig = rig().start();
    let id = rig.submit("golf marathon question").await;
    let output = rig.output(&id).await;
    assert!(
        (2_400_000..=2_401_000).contains(&output.total_latency_ms),
        "40 min + 1 s slack: {} ms",
        output.total_latency_ms
    );
    assert_eq!(output.status, OutputStatus::Partial);
    assert_eq!(result(&output, "marathon").status, HandoffStatus::Timeout);
    assert_eq!(result(&output, "steady").status, HandoffStatus::Success);
    let deadlines: Vec<Duration> =
        rig.queue.sent().into_iter().filter(|(_, j, _)| matches!(j, Job::Deadline { .. })).map(|(_, _, d)| d).collect();
    assert_eq!(
        deadlines,
        [Duration::from_secs(900), Duration::from_secs(900), Duration::from_secs(601)],
        "chained 15 + 15 + 10 min, the last with the 1 s deadline slack"
    );
    assert_eq!(rig.events(&id, EventKind::Deadline).await.len(), 1);
}

// ---- 16 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn an_expired_record_that_ttl_has_not_yet_removed_is_treated_as_expired() {
    let rig = rig().start();
    let body = json!({ "query": "alpha steady question" }).to_string();
    let mut post = api_request("POST", "/v1/queries", "", Some(&body), "analyst-1", "");
    post.headers.insert("idempotency-key", "expiring-1".parse().expect("header"));
    let r = handle_http(rig.deps(), post.clone()).await;
    let id = json_body(&r)["query_id"].as_str().expect("id").to_string();
    rig.output(&id).await;
    tokio::time::sleep(Duration::from_secs(25 * 3_600)).await; // record_ttl is 1 day
    assert!(rig.system.store.query_ids().contains(&id), "the record is still present");
    assert_eq!(rig.system.store.get_query(&id).await.expect("store"), None);
    assert_eq!(rig.system.store.get_output(&id).await.expect("store"), None);
    assert!(rig.system.store.list_events(&id).await.expect("store").is_empty());
    for path in [format!("/v1/queries/{id}"), format!("/v1/queries/{id}/events")] {
        let r = handle_http(rig.deps(), api_request("GET", &path, "", None, "analyst-1", "")).await;
        assert_eq!(r.status_code, 404, "{path}");
    }
    let route = JobMessage::new(Job::Route { query_id: id.clone() }).to_body();
    let response = handle_sqs(rig.deps(), Function::Router, sqs_event(&[&route])).await.expect("handled");
    assert_eq!(response.batch_item_failures.len(), 1, "a job for an expired query cannot succeed");
    let again = handle_http(rig.deps(), post).await;
    assert_eq!(again.status_code, 202, "the expired query no longer holds its idempotency key");
    assert_ne!(json_body(&again)["query_id"].as_str(), Some(id.as_str()));
}

// ---- 17 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_dlq_redrive_after_the_fix_completes_the_query_without_a_duplicate_synthesis() {
    let rig = rig().start();
    rig.store.trip(|c| (c.op == "finish_query").then_some(Fault::Unavailable)); // the bug
    let id = rig.submit("alpha steady question").await;
    tokio::time::sleep(Duration::from_secs(5 * 3_600)).await; // synth and deadline jobs exhaust their receives
    assert_eq!(rig.system.store.get_output(&id).await.expect("store"), None);
    assert_eq!(rig.depth(QueueId::synth()).await.total(), 0);
    let dead = rig.depth(QueueId::synth().dlq()).await.total();
    assert_eq!(dead, 2, "the synth job and the deadline job are dead-lettered");
    rig.store.heal(); // the fix is deployed
    assert_eq!(rig.system.queue.redrive(QueueId::synth()), 2);
    let output = rig.output(&id).await;
    assert_eq!(output.status, OutputStatus::Success);
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    assert_eq!(rig.store.outputs.load(Ordering::SeqCst), 1, "one output");
    assert_eq!(rig.events(&id, EventKind::Final).await.len(), 1);
    assert_eq!(rig.leftovers().await, Vec::<(String, u64)>::new());
}

// ---- 18 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_throttled_function_delays_its_messages_and_drops_none() {
    let rig = rig();
    let mut throttled = rig.system.topology.clone();
    throttled.queues.retain(|q| q.id != QueueId::tier(2)); // tier 2's worker has no concurrency
    let _others = switchyard_engine::pollers::start(rig.deps().clone(), &throttled, PollerConfig::default());
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(rig.submit("alpha steady question").await);
    }
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    assert_eq!(
        rig.depth(QueueId::tier(2)).await,
        QueueDepth { visible: 10, in_flight: 0, delayed: 0 },
        "waiting, not dropped"
    );
    assert_eq!(rig.depth(QueueId::tier(2).dlq()).await.total(), 0);
    let mut tier2 = rig.system.topology.clone();
    tier2.queues.retain(|q| q.id == QueueId::tier(2));
    tier2.queues[0].reserved_concurrency = Some(1); // the throttle lifts to one at a time
    let _worker = switchyard_engine::pollers::start(rig.deps().clone(), &tier2, PollerConfig::default());
    for id in &ids {
        assert_eq!(rig.output(id).await.status, OutputStatus::Success);
    }
    assert_eq!(rig.store.outputs.load(Ordering::SeqCst), 10);
}

// ---- 19 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_same_idempotency_key_with_a_different_payload_is_a_409_and_with_the_same_payload_the_same_query() {
    let rig = rig();
    let post = |question: &str, user: &str| {
        let body = json!({ "query": question }).to_string();
        let mut r = api_request("POST", "/v1/queries", "", Some(&body), user, "");
        r.headers.insert("idempotency-key", "order-7".parse().expect("header"));
        r
    };
    let first = handle_http(rig.deps(), post("alpha steady question", "u1")).await;
    assert_eq!(first.status_code, 202);
    let id = json_body(&first)["query_id"].clone();
    let same = handle_http(rig.deps(), post("alpha steady question", "u1")).await;
    assert_eq!(
        (same.status_code, json_body(&same)["query_id"].clone(), json_body(&same)["replayed"].clone()),
        (200, id.clone(), json!(true))
    );
    let different = handle_http(rig.deps(), post("bravo pair question", "u1")).await;
    assert_eq!(different.status_code, 409, "{}", text_body(&different));
    assert_eq!(json_body(&different)["error"]["code"], "conflict");
    let other_user = handle_http(rig.deps(), post("bravo pair question", "u2")).await;
    assert_eq!(other_user.status_code, 202, "keys belong to their caller");
    assert_ne!(json_body(&other_user)["query_id"], id);
    assert_eq!(rig.system.store.query_ids().len(), 2);
}

// ---- 20 --------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_query_running_when_the_manifest_changes_finishes_on_the_manifest_version_it_started_with() {
    // Version 1 accepts the query; then version 2 is deployed (steady says something else,
    // helper is gone) and every later step of the query runs in version 2's functions.
    let v1 = rig();
    let id = v1.submit("bravo pair question").await;
    let v2_yaml = fixture_text("manifests/faults.yaml")
        .replace("\"Steady answer.\"", "\"Steady answer, version 2.\"")
        .replace("supporting: [helper], deadline: 3h}", "deadline: 3h}")
        .replace(
            "  - {id: helper, tier: 2, kind: scripted, scripted: {response: \"Helper answer.\", confidence: 0.9}}\n",
            "",
        );
    let v2_manifest = Manifest::from_yaml(&v2_yaml, "faults-v2.yaml").expect("version 2 is valid");
    assert!(v2_manifest.agent("helper").is_none());
    let v2 = Deps::new(
        Arc::new(v2_manifest),
        v1.store.clone(),
        v1.queue.clone(),
        v1.deps().clock.clone(),
        Arc::new(ManifestAgents),
        Default::default(),
    );
    assert_ne!(v2.fingerprint(), v1.deps().fingerprint());
    let v2 = Embedded {
        deps: Arc::new(v2),
        store: v1.system.store.clone(),
        queue: v1.system.queue.clone(),
        topology: v1.system.topology.clone(),
    };
    let _pollers = v2.start(PollerConfig::default());

    let old = v1.output(&id).await;
    assert_eq!(old.status, OutputStatus::Success);
    assert_eq!(old.agents_dispatched, ["steady", "helper"], "planned on version 1");
    assert_eq!(result(&old, "steady").result["response"], "Steady answer.");
    assert_eq!(result(&old, "helper").result["response"], "Helper answer.");

    let body = json!({ "query": "bravo pair question" }).to_string();
    let r = handle_http(&v2.deps, api_request("POST", "/v1/queries", "", Some(&body), "analyst-1", "")).await;
    let new_id = json_body(&r)["query_id"].as_str().expect("id").to_string();
    let new = v1.output(&new_id).await;
    assert_eq!(new.agents_dispatched, ["steady"], "a new query starts on version 2");
    assert_eq!(result(&new, "steady").result["response"], "Steady answer, version 2.");
}
