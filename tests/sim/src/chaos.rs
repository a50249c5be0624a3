//! The faults: one seeded RNG ([`Chaos`]) and the port wrappers it drives.
//!
//! - [`ChaosQueue`]: sends that fail before reaching the queue, duplicate deliveries, extra
//!   delays (reordering, deadlines firing late) and shortened delays (deadlines and retries
//!   firing early).
//! - [`ChaosStore`]: a write that errors without applying, crashes (panics) before or after it
//!   applies, applies and then reports `Unavailable` (the ambiguous error), or loses its
//!   condition to a concurrent writer; reads that fail. It also observes what was applied
//!   (outputs, handoffs) for the invariants.
//!   The memory store underneath loses fan-in answers ([`Faults::lost_fan_in_answer`]): the
//!   write applied, and the store sends it again while other handoffs may land.
//! - [`ChaosAgents`]: agent errors, hangs, slow and malformed answers.
//!
//! Faults that fail a message's delivery are *transient*: a delivery after
//! [`FAULTED_DELIVERIES`] receives runs calm (no store, queue or crash faults), set per
//! invocation through a task-local by [`crate::poller`]. Without that cap a run of bad luck
//! dead-letters a healthy message, which is the queue's documented behaviour, not a bug; poison
//! messages, which fail on every delivery, are injected separately and must be dead-lettered.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_engine::ports::{
    AgentError, AgentReply, AgentRuntime, HandoffWrite, OutgoingMessage, Queue, QueueDepth, QueueError, QueueId,
    ReceivedMessage, RunContext, Store, StoreError,
};
use switchyard_model::contracts::AgentDispatch;
use switchyard_model::jobs::{Job, JobMessage};
use switchyard_model::manifest::Agent;
use switchyard_testkit::hooked::{Applied, HookedStore, StoreHooks, StoreOp};
use tokio::time::Instant;

/// Deliveries of one message that may be faulted; later ones run calm.
pub const FAULTED_DELIVERIES: u32 = 2;

/// Prefix of every injected panic, so the harness's panic hook can keep them quiet.
pub const CRASH_PREFIX: &str = "sim: injected crash";

tokio::task_local! {
    /// Whether the running invocation must run without injected delivery faults.
    pub static CALM: bool;
}

fn calm() -> bool {
    CALM.try_with(|c| *c).unwrap_or(false)
}

/// How often each fault happens in one run (probabilities per opportunity), drawn from the seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    /// A message is delivered twice.
    pub duplicate: f64,
    /// A message is delayed by up to [`Faults::max_extra_delay`] more than asked.
    pub late: f64,
    /// Longest extra delay.
    pub max_extra_delay: Duration,
    /// A delayed message arrives after a random fraction of its delay.
    pub early: f64,
    /// A send fails before reaching the queue.
    pub send_fails: f64,
    /// A store call fails without applying.
    pub store_unavailable: f64,
    /// A store write applies, then reports `Unavailable`.
    pub ambiguous: f64,
    /// The handler crashes just before a store write.
    pub crash_before_write: f64,
    /// The handler crashes just after a store write applied.
    pub crash_after_write: f64,
    /// A concurrent writer moves the query's version just before an update.
    pub conflict: f64,
    /// A fan-in write applies and its answer is lost, so the store sends it again (as the AWS
    /// SDK retries an `UpdateItem` whose response never came), other writers running between.
    pub lost_fan_in_answer: f64,
    /// The invocation crashes after handling, before deleting its messages.
    pub crash_before_ack: f64,
    /// A message becomes visible again while its handler runs (a second consumer gets it).
    pub visibility_expiry: f64,
    /// The invocation stalls before deleting, possibly past the visibility timeout.
    pub slow_ack: f64,
    /// An agent attempt fails with a recoverable error.
    pub agent_error: f64,
    /// An agent attempt never answers.
    pub agent_hang: f64,
    /// An agent attempt answers after up to twice its timeout.
    pub agent_slow: f64,
    /// An agent attempt answers with text that is not a handoff.
    pub agent_malformed: f64,
    /// Concurrent invocations per queue (1 = throttled to one at a time).
    pub concurrency: usize,
    /// The handler crashes around a write tool's call: before it is made, after it is made
    /// and before its outcome is recorded, and after the record.
    pub tool_crash: f64,
    /// A tool call answers with an error (and is not made).
    pub tool_error: f64,
    /// A tool call answers late, up to twice its timeout.
    pub tool_slow: f64,
    /// A person asked to approve a call never answers (so the approval expires).
    pub person_away: f64,
    /// A person rejects a call rather than approving it.
    pub person_rejects: f64,
}

impl Faults {
    /// No faults at all.
    pub fn none() -> Faults {
        Faults {
            duplicate: 0.0,
            late: 0.0,
            max_extra_delay: Duration::ZERO,
            early: 0.0,
            send_fails: 0.0,
            store_unavailable: 0.0,
            ambiguous: 0.0,
            crash_before_write: 0.0,
            crash_after_write: 0.0,
            conflict: 0.0,
            lost_fan_in_answer: 0.0,
            crash_before_ack: 0.0,
            visibility_expiry: 0.0,
            slow_ack: 0.0,
            agent_error: 0.0,
            agent_hang: 0.0,
            agent_slow: 0.0,
            agent_malformed: 0.0,
            concurrency: 8,
            tool_crash: 0.0,
            tool_error: 0.0,
            tool_slow: 0.0,
            person_away: 0.0,
            person_rejects: 0.0,
        }
    }

    /// Intensities drawn from `rng`: each fault is off in some seeds and up to its maximum in
    /// others, so calm and stormy runs both occur.
    pub fn draw(rng: &mut StdRng) -> Faults {
        let mut p = |max: f64| if rng.random_bool(0.25) { 0.0 } else { rng.random_range(0.0..max) };
        let duplicate = p(0.3);
        let late = p(0.3);
        let early = p(0.3);
        let send_fails = p(0.05);
        let store_unavailable = p(0.03);
        let ambiguous = p(0.05);
        let crash_before_write = p(0.03);
        let crash_after_write = p(0.03);
        let conflict = p(0.1);
        let crash_before_ack = p(0.1);
        let visibility_expiry = p(0.1);
        let slow_ack = p(0.05);
        let agent_error = p(0.3);
        let agent_hang = p(0.1);
        let agent_slow = p(0.2);
        let agent_malformed = p(0.1);
        // Drawn in the order they always were, the new fault last, so a seed's other faults
        // stay as they were.
        let max_extra_delay = Duration::from_millis(rng.random_range(0..5_000));
        let concurrency = rng.random_range(1..=4);
        let lost_fan_in_answer = if rng.random_bool(0.25) { 0.0 } else { rng.random_range(0.0..0.3) };
        let mut p = |max: f64| if rng.random_bool(0.25) { 0.0 } else { rng.random_range(0.0..max) };
        let tool_crash = p(0.2);
        let tool_error = p(0.2);
        let tool_slow = p(0.3);
        let person_away = p(0.4);
        let person_rejects = p(0.5);
        Faults {
            duplicate,
            late,
            max_extra_delay,
            early,
            send_fails,
            store_unavailable,
            ambiguous,
            crash_before_write,
            crash_after_write,
            conflict,
            lost_fan_in_answer,
            crash_before_ack,
            visibility_expiry,
            slow_ack,
            agent_error,
            agent_hang,
            agent_slow,
            agent_malformed,
            concurrency,
            tool_crash,
            tool_error,
            tool_slow,
            person_away,
            person_rejects,
        }
    }
}

/// What the wrappers saw applied, for the invariants.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    /// Outputs written (applied `finish_query`), per query.
    pub outputs: BTreeMap<String, u32>,
    /// Handoffs written (applied `record_handoff`), per (query, dispatch).
    pub handoffs: BTreeMap<(String, String), u32>,
    /// Dispatch jobs that reached a queue: (query, dispatch).
    pub dispatches_sent: BTreeSet<(String, String)>,
    /// What each applied handoff write that filled a slot was told the fan-in set became:
    /// (query, slot, set).
    pub fan_in_answers: Vec<(String, String, BTreeSet<String>)>,
}

/// The seeded source of every fault, and the trace of the faults injected.
pub struct Chaos {
    rng: Mutex<StdRng>,
    /// This run's intensities.
    pub faults: Faults,
    trace: Mutex<Vec<String>>,
    observed: Mutex<Observed>,
    start: Instant,
}

impl std::fmt::Debug for Chaos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chaos").field("faults", &self.faults).finish_non_exhaustive()
    }
}

impl Chaos {
    /// Faults drawn from `seed` (the same RNG then drives every decision).
    pub fn new(seed: u64) -> Chaos {
        let mut rng = StdRng::seed_from_u64(seed);
        let faults = Faults::draw(&mut rng);
        Chaos::with_faults(faults, rng)
    }

    /// Explicit faults, decisions from `rng`.
    pub fn with_faults(faults: Faults, rng: StdRng) -> Chaos {
        Chaos {
            rng: Mutex::new(rng),
            faults,
            trace: Mutex::new(Vec::new()),
            observed: Mutex::new(Observed::default()),
            start: Instant::now(),
        }
    }

    /// Add a line to the trace, stamped with the virtual time.
    pub fn note(&self, what: &str) {
        let at = self.start.elapsed().as_secs_f64();
        if let Ok(mut t) = self.trace.lock() {
            t.push(format!("{at:>10.3}s {what}"));
        }
    }

    /// The trace so far.
    pub fn trace(&self) -> Vec<String> {
        self.trace.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// What was applied so far.
    pub fn observed(&self) -> Observed {
        self.observed.lock().map(|o| o.clone()).unwrap_or_default()
    }

    fn observe(&self, f: impl FnOnce(&mut Observed)) {
        if let Ok(mut o) = self.observed.lock() {
            f(&mut o);
        }
    }

    /// True with probability `p` (never in a calm invocation); traced when true.
    pub fn roll(&self, p: f64, what: &str) -> bool {
        if p <= 0.0 || calm() {
            return false;
        }
        self.roll_always(p, what)
    }

    /// Like [`Chaos::roll`], also in calm invocations (faults that are data, not delivery
    /// failures: agent misbehaviour).
    pub fn roll_always(&self, p: f64, what: &str) -> bool {
        if p <= 0.0 {
            return false;
        }
        let hit = self.rng.lock().map(|mut r| r.random_bool(p.clamp(0.0, 1.0))).unwrap_or(false);
        if hit {
            self.note(what);
        }
        hit
    }

    /// A uniformly random fraction in [0, 1).
    pub fn fraction(&self) -> f64 {
        self.rng.lock().map(|mut r| r.random::<f64>()).unwrap_or(0.5)
    }

    /// A random integer in `[lo, hi)`.
    pub fn below(&self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        self.rng.lock().map(|mut r| r.random_range(lo..hi)).unwrap_or(lo)
    }
}

/// An injected crash of the running handler (a panic its invocation dies of).
pub fn crash(what: &str) -> ! {
    panic!("{CRASH_PREFIX} {what}")
}

fn unavailable(what: &str) -> StoreError {
    StoreError::Unavailable { message: format!("sim: {what}"), source: None }
}

// ------------------------------------------------------------------------------------------

/// A queue that fails sends, duplicates, delays and hurries messages.
pub struct ChaosQueue {
    inner: Arc<dyn Queue>,
    chaos: Arc<Chaos>,
}

impl ChaosQueue {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn Queue>, chaos: Arc<Chaos>) -> ChaosQueue {
        ChaosQueue { inner, chaos }
    }

    fn jitter(&self, mut message: OutgoingMessage, what: &str) -> OutgoingMessage {
        let f = &self.chaos.faults;
        if !message.delay.is_zero() && self.chaos.roll(f.early, &format!("{what} arrives early")) {
            message.delay = message.delay.mul_f64(self.chaos.fraction());
        }
        if self.chaos.roll(f.late, &format!("{what} arrives late")) {
            message.delay += f.max_extra_delay.mul_f64(self.chaos.fraction());
        }
        message
    }

    async fn deliver(&self, queue: QueueId, message: OutgoingMessage) -> Result<String, QueueError> {
        let job = JobMessage::parse(&message.body).ok();
        let id = self.inner.send(queue, message).await?;
        if let Some(Job::Dispatch { query_id, dispatch_id, .. }) = job {
            self.chaos.observe(|o| {
                o.dispatches_sent.insert((query_id, dispatch_id));
            });
        }
        Ok(id)
    }
}

fn job_name(body: &str) -> String {
    match JobMessage::parse(body) {
        Ok(Job::Route { .. }) => "route job".into(),
        Ok(Job::Dispatch { attempt, .. }) => format!("dispatch job (attempt {attempt})"),
        Ok(Job::Synthesize { .. }) => "synth job".into(),
        Ok(Job::Deadline { .. }) => "deadline job".into(),
        Err(_) => "message".into(),
    }
}

#[async_trait::async_trait]
impl Queue for ChaosQueue {
    async fn send(&self, queue: QueueId, message: OutgoingMessage) -> Result<String, QueueError> {
        let what = format!("{} to {}", job_name(&message.body), queue.name());
        if self.chaos.roll(self.chaos.faults.send_fails, &format!("send of {what} fails")) {
            return Err(QueueError::Unavailable { message: "sim: send failed".into(), source: None });
        }
        if self.chaos.roll(self.chaos.faults.duplicate, &format!("{what} delivered twice")) {
            let copy = self.jitter(message.clone(), &what);
            self.deliver(queue, copy).await?;
        }
        let message = self.jitter(message, &what);
        self.deliver(queue, message).await
    }

    async fn receive(&self, queue: QueueId, max: usize, wait: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.inner.receive(queue, max, wait).await
    }

    async fn delete(&self, queue: QueueId, receipt_handle: &str) -> Result<(), QueueError> {
        self.inner.delete(queue, receipt_handle).await
    }

    async fn change_visibility(
        &self,
        queue: QueueId,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), QueueError> {
        self.inner.change_visibility(queue, receipt_handle, timeout).await
    }

    async fn depth(&self, queue: QueueId) -> Result<QueueDepth, QueueError> {
        self.inner.depth(queue).await
    }
}

// ------------------------------------------------------------------------------------------

/// The store's faults, as hooks around the in-memory store ([`HookedStore`]): it fails, crashes
/// around writes, answers ambiguously and loses conditions; and observes what it applied.
pub type ChaosStore = HookedStore<StoreChaos>;

/// A [`ChaosStore`] around `inner`.
pub fn chaos_store(inner: Arc<dyn Store>, chaos: Arc<Chaos>) -> ChaosStore {
    HookedStore::new(inner, StoreChaos { chaos })
}

/// The hooks of a [`ChaosStore`].
pub struct StoreChaos {
    chaos: Arc<Chaos>,
}

/// Reads that never fail in the simulation (the output and the event log are read by the
/// checks themselves, and the idempotency key only at intake).
fn is_unfailing_read(op: StoreOp<'_>) -> bool {
    matches!(op, StoreOp::FindIdempotencyKey | StoreOp::GetOutput(_) | StoreOp::ListEvents(_))
}

#[async_trait::async_trait]
impl StoreHooks for StoreChaos {
    async fn before(&self, inner: &dyn Store, op: StoreOp<'_>) -> Result<(), StoreError> {
        let f = &self.chaos.faults;
        let name = op.name();
        if !op.is_write() {
            if !is_unfailing_read(op) && self.chaos.roll(f.store_unavailable, &format!("{name} fails")) {
                return Err(unavailable("store unavailable"));
            }
            return Ok(());
        }
        if self.chaos.roll(f.store_unavailable, &format!("{name} fails (not applied)")) {
            return Err(unavailable("store unavailable"));
        }
        if self.chaos.roll(f.crash_before_write, &format!("crash before {name}")) {
            crash(&format!("before {name}"));
        }
        if let StoreOp::UpdateQuery(query) = op {
            // Another writer updates the query first (a no-op change that moves its version).
            if self.chaos.roll(f.conflict, "update_query loses its condition to a concurrent writer") {
                if let Ok(Some(stored)) = inner.get_query(&query.query_id).await {
                    let _ = inner.update_query(&stored, stored.version, &[]).await;
                }
            }
        }
        Ok(())
    }

    fn after(&self, op: StoreOp<'_>, outcome: Result<Applied<'_>, &StoreError>) -> Result<(), StoreError> {
        if !op.is_write() || outcome.is_err() {
            return Ok(());
        }
        match (op, outcome) {
            (StoreOp::RecordHandoff(record), Ok(Applied::Handoff(HandoffWrite::Recorded { completed }))) => {
                let key = (record.query_id.clone(), record.handoff.dispatch_id.clone());
                self.chaos.observe(|o| {
                    *o.handoffs.entry(key).or_default() += 1;
                    if let Some(slot) = &record.slot {
                        o.fan_in_answers.push((record.query_id.clone(), slot.clone(), completed.clone()));
                    }
                });
            }
            (StoreOp::FinishQuery(_, query), _) => {
                self.chaos.observe(|o| *o.outputs.entry(query.query_id.clone()).or_default() += 1);
            }
            _ => {}
        }
        let f = &self.chaos.faults;
        let name = op.name();
        if matches!(op, StoreOp::FinishToolCall(_)) && self.chaos.roll(f.tool_crash, "crash after a tool call's record")
        {
            crash("after a tool call's record");
        }
        if self.chaos.roll(f.crash_after_write, &format!("crash after {name}")) {
            crash(&format!("after {name}"));
        }
        if self.chaos.roll(f.ambiguous, &format!("{name} applied but reported unavailable")) {
            return Err(unavailable("ambiguous: the write applied"));
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------

/// Agents that err, hang, dawdle and garble on top of what the manifest scripts.
pub struct ChaosAgents {
    inner: Arc<dyn AgentRuntime>,
    chaos: Arc<Chaos>,
}

impl ChaosAgents {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn AgentRuntime>, chaos: Arc<Chaos>) -> ChaosAgents {
        ChaosAgents { inner, chaos }
    }
}

impl ChaosAgents {
    /// The injected misbehaviour of one attempt: `Err` or `Ok(Some(_))` ends it (an error, a
    /// garbled answer; a hang never returns), `Ok(None)` lets the agent run.
    async fn misbehave(
        &self,
        agent: &Agent,
        dispatch: &AgentDispatch,
        attempt: u32,
    ) -> Result<Option<AgentReply>, AgentError> {
        let f = &self.chaos.faults;
        let who = format!("{} attempt {attempt}", agent.id);
        if self.chaos.roll_always(f.agent_error, &format!("{who} errs")) {
            return Err(AgentError { message: "sim: agent error".into(), recoverable: true });
        }
        if self.chaos.roll_always(f.agent_hang, &format!("{who} hangs")) {
            std::future::pending::<()>().await;
        }
        if self.chaos.roll_always(f.agent_slow, &format!("{who} is slow")) {
            let timeout = dispatch.routing.timeout_ms.max(1);
            tokio::time::sleep(Duration::from_millis(self.chaos.below(0, 2 * timeout))).await;
        }
        if self.chaos.roll_always(f.agent_malformed, &format!("{who} answers garbage")) {
            return Ok(Some(AgentReply::Malformed("sim: <<not a handoff>>".into())));
        }
        Ok(None)
    }
}

#[async_trait::async_trait]
impl AgentRuntime for ChaosAgents {
    async fn run(&self, agent: &Agent, dispatch: &AgentDispatch, attempt: u32) -> Result<AgentReply, AgentError> {
        match self.misbehave(agent, dispatch, attempt).await? {
            Some(reply) => Ok(reply),
            None => self.inner.run(agent, dispatch, attempt).await,
        }
    }

    /// The same faults, then the agent with what the engine lends it (tool-call records,
    /// a token sink), so an agent with tools calls them under the simulation's faults too.
    async fn run_with(
        &self,
        agent: &Agent,
        dispatch: &AgentDispatch,
        attempt: u32,
        context: RunContext<'_>,
    ) -> Result<AgentReply, AgentError> {
        match self.misbehave(agent, dispatch, attempt).await? {
            Some(reply) => Ok(reply),
            None => self.inner.run_with(agent, dispatch, attempt, context).await,
        }
    }
}
