//! What every step is given: the ports, the manifest and its classifier, the engine's tunables;
//! and the step error that decides whether a message is retried.

use crate::ports::{
    AgentRuntime, Clock, OutgoingMessage, QueryRecord, Queue, QueueError, QueueId, Store, StoreError,
    ATTR_CORRELATION_ID, ATTR_TRACEPARENT,
};
use crate::telemetry::trace::traceparent;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use switchyard_core::classify::Classifier;
use switchyard_model::jobs::{Job, JobMessage};
use switchyard_model::manifest::Manifest;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Tunables of the engine that are not part of the manifest.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// A synthesizer's claim older than this may be taken over (the claimer crashed).
    pub synth_lease: Duration,
    /// How long a duplicate synth job waits for the claim holder to finish before it is
    /// returned to its queue.
    pub claim_wait: Duration,
    /// Longest `?wait=N` accepted (API Gateway's own limit is 29 s).
    pub max_wait: Duration,
    /// How often `?wait` re-reads the output.
    pub wait_poll: Duration,
    /// Accept the caller from `x-switchyard-user` / `x-switchyard-roles` headers. For
    /// `switchyard serve` on loopback only; Lambda reads the JWT authorizer's claims.
    pub dev_identity_headers: bool,
    /// How the live events endpoint polls the log, beats and ends
    /// ([`super::follow::FollowSettings`]).
    pub follow: super::follow::FollowSettings,
    /// What the embedded store holds at most ([`super::memory::Quota`]; unbounded by default,
    /// bounded by `switchyard serve`). The other adapters ignore it.
    pub memory_quota: super::memory::Quota,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            synth_lease: Duration::from_secs(60),
            claim_wait: Duration::from_secs(3),
            max_wait: Duration::from_secs(25),
            wait_poll: Duration::from_millis(25),
            dev_identity_headers: false,
            follow: super::follow::FollowSettings::default(),
            memory_quota: super::memory::Quota::UNBOUNDED,
        }
    }
}

/// Everything a step needs, built once per process (docs/architecture.md#layout: dependencies first, event second).
pub struct Deps {
    /// The manifest, validated.
    pub manifest: Arc<Manifest>,
    /// Built from the manifest on first use: only intake classifies, so the router, the
    /// workers and the synthesizer never pay for it at init.
    classifier: OnceLock<Classifier>,
    /// Source of truth.
    pub store: Arc<dyn Store>,
    /// Pointer messages.
    pub queue: Arc<dyn Queue>,
    /// Wall-clock time.
    pub clock: Arc<dyn Clock>,
    /// Runs agents.
    pub agents: Arc<dyn AgentRuntime>,
    /// Tunables.
    pub settings: EngineSettings,
    rng: Mutex<StdRng>,
    /// [`Manifest::fingerprint`] of `manifest`, computed once.
    fingerprint: String,
    /// Manifests of earlier versions that queries started on, by fingerprint.
    versions: Mutex<BTreeMap<String, Arc<Manifest>>>,
    /// Whether this process has stored `manifest` in the store.
    manifest_stored: AtomicBool,
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps").field("manifest", &self.manifest.name).finish_non_exhaustive()
    }
}

impl Deps {
    /// Dependencies with an RNG seeded from the OS (retry jitter).
    pub fn new(
        manifest: Arc<Manifest>,
        store: Arc<dyn Store>,
        queue: Arc<dyn Queue>,
        clock: Arc<dyn Clock>,
        agents: Arc<dyn AgentRuntime>,
        settings: EngineSettings,
    ) -> Deps {
        let fingerprint = manifest.fingerprint();
        Deps {
            manifest,
            classifier: OnceLock::new(),
            store,
            queue,
            clock,
            agents,
            settings,
            rng: Mutex::new(StdRng::from_os_rng()),
            fingerprint,
            versions: Mutex::new(BTreeMap::new()),
            manifest_stored: AtomicBool::new(false),
        }
    }

    /// The classifier of `manifest`, built on the first call (once per process).
    pub fn classifier(&self) -> &Classifier {
        self.classifier.get_or_init(|| Classifier::new(&self.manifest))
    }

    /// Whether the classifier has been built yet (init checks: only intake builds it).
    pub fn classifier_built(&self) -> bool {
        self.classifier.get().is_some()
    }

    /// Fingerprint of the manifest new queries start on.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Keep the current manifest in the store (once per process), so that queries starting on
    /// it finish on it even after another manifest is deployed.
    pub(super) async fn store_manifest(&self) -> Result<(), StoreError> {
        if self.manifest_stored.load(Ordering::Relaxed) {
            return Ok(());
        }
        let body = serde_json::to_string(self.manifest.as_ref())
            .map_err(|e| StoreError::Corrupt(format!("the manifest does not serialize: {e}")))?;
        match self.store.put_manifest(&self.fingerprint, &body).await {
            Ok(()) => {}
            // Too large to keep: queries still run, on whichever manifest each step has.
            Err(StoreError::TooLarge(reason)) => {
                tracing::warn!(fingerprint = %self.fingerprint, %reason, "the manifest is too large to store; running queries follow manifest changes")
            }
            Err(e) => return Err(e),
        }
        self.manifest_stored.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// The manifest `query` started on: the current one, or the version stored under its
    /// fingerprint (read once per process). A query recorded before manifests were stored runs
    /// on the current manifest.
    pub async fn manifest_for(&self, query: &QueryRecord) -> Result<Arc<Manifest>, StepError> {
        let wanted = &query.manifest_fingerprint;
        if *wanted == self.fingerprint {
            return Ok(self.manifest.clone());
        }
        if let Some(m) = self.versions.lock().ok().and_then(|v| v.get(wanted).cloned()) {
            return Ok(m);
        }
        let Some(body) = self.store.get_manifest(wanted).await? else {
            tracing::warn!(query_id = %query.query_id, fingerprint = %wanted, "the query's manifest version is not stored; using the current one");
            return Ok(self.manifest.clone());
        };
        let manifest: Manifest = serde_json::from_str(&body)
            .map_err(|e| StepError::Permanent(format!("stored manifest {wanted} does not parse: {e}")))?;
        if manifest.fingerprint() != *wanted {
            return Err(StepError::Permanent(format!("the manifest stored under {wanted} has another fingerprint")));
        }
        let manifest = Arc::new(manifest);
        if let Ok(mut v) = self.versions.lock() {
            v.insert(wanted.clone(), manifest.clone());
        }
        Ok(manifest)
    }

    /// Seed the jitter RNG, for simulations that must replay identically.
    pub fn with_seed(mut self, seed: u64) -> Deps {
        self.rng = Mutex::new(StdRng::seed_from_u64(seed));
        self
    }

    /// A uniformly random fraction in [0, 1) for jitter.
    pub(super) fn random_fraction(&self) -> f64 {
        self.rng.lock().map(|mut r| r.random::<f64>()).unwrap_or(0.5)
    }

    /// Epoch seconds at which a record written now expires.
    pub(super) fn expires_at(&self) -> i64 {
        self.clock.now().timestamp() + (self.manifest.query.record_ttl.as_millis() / 1_000) as i64
    }

    /// Send a job to a queue with the query's correlation id as a message attribute.
    pub(super) async fn send(&self, queue: QueueId, job: Job, delay: Duration) -> Result<String, QueueError> {
        let message = self.message(job, delay);
        self.queue.send(queue, message).await
    }

    /// Send several jobs to one queue at once (one `SendMessageBatch` on SQS).
    pub(super) async fn send_batch(&self, queue: QueueId, jobs: Vec<Job>) -> Result<Vec<String>, QueueError> {
        let messages = jobs.into_iter().map(|job| self.message(job, Duration::ZERO)).collect();
        self.queue.send_batch(queue, messages).await
    }

    /// A job's message, with the query's correlation id and trace context as attributes.
    fn message(&self, job: Job, delay: Duration) -> OutgoingMessage {
        // The sending step's span when spans are exported (so the receiver's span hangs below
        // it in the trace), else a random id. The RNG is drawn either way so seeded runs replay.
        let random_span = (self.random_fraction() * u64::MAX as f64) as u64 | 1;
        let span_id = crate::telemetry::otlp::current_span_id().unwrap_or(random_span);
        let traceparent = traceparent(job.query_id(), span_id);
        let body = JobMessage::new(job);
        let text = body.to_body();
        // The job is not needed once written: its query id becomes the correlation attribute
        // (moved, not copied).
        let query_id = body.job.into_query_id();
        let mut attributes = BTreeMap::new();
        attributes.insert(ATTR_CORRELATION_ID.to_string(), query_id);
        attributes.insert(ATTR_TRACEPARENT.to_string(), traceparent);
        OutgoingMessage { body: text, delay, attributes }
    }
}

/// Why a step could not finish. Both kinds leave the message on its queue (a batch item
/// failure); it is redelivered and, after the queue's max receives, dead-lettered with this
/// reason logged.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// A dependency failed; the same message may succeed later.
    #[error("retryable: {0}")]
    Retryable(String),
    /// The message can never succeed (unknown query, wrong queue, corrupt record).
    #[error("permanent: {0}")]
    Permanent(String),
}

/// Errors are classified in one place: the port's own `is_retryable` says whether the same
/// message can succeed later (a store or queue that is down) or never (an item or message too
/// large, a corrupt record, a condition a step did not expect to lose).
impl From<StoreError> for StepError {
    fn from(e: StoreError) -> StepError {
        if e.is_retryable() {
            StepError::Retryable(e.to_string())
        } else {
            StepError::Permanent(e.to_string())
        }
    }
}

impl From<QueueError> for StepError {
    fn from(e: QueueError) -> StepError {
        if e.is_retryable() {
            StepError::Retryable(e.to_string())
        } else {
            StepError::Permanent(e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {

    use crate::telemetry::trace::{fnv_hex, parent_span_id, trace_id, traceparent};

    #[test]
    fn a_trace_id_is_read_only_from_a_version_00_header_with_32_hex_digits() {
        let trace = "6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f";
        assert_eq!(trace_id(&format!("00-{trace}")), Some(trace), "nothing after the trace id");
        assert_eq!(trace_id(&format!("00-{trace}-")), Some(trace));
        assert_eq!(trace_id(&format!("00-{trace}a-00000000000000ab-01")), None, "33 digits");
        assert_eq!(trace_id(&format!("00-{trace}x-00000000000000ab-01")), None);
        assert_eq!(trace_id(&format!("01-{trace}-00000000000000ab-01")), None, "another version");
        assert_eq!(trace_id(&format!("000-{trace}-00000000000000ab-01")), None);
        assert_eq!(trace_id(&format!("00-{}é-00000000000000ab-01", &trace[..31])), None);
        assert_eq!(trace_id(&format!("00-{}", &trace[..31])), None);
        assert_eq!(trace_id("00"), None);
    }

    #[test]
    fn a_querys_traceparent_carries_its_id_as_the_trace_id() {
        let tp = traceparent("6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f", 0xab);
        assert_eq!(tp, "00-6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f-00000000000000ab-01");
        assert_eq!(trace_id(&tp), Some("6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f"));
        assert_eq!(trace_id("junk"), None);
        assert_eq!(parent_span_id(&tp), Some("00000000000000ab"));
        assert_eq!(parent_span_id("00-6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f-zz-01"), None);
        assert_eq!(parent_span_id("junk"), None);
        assert_eq!(trace_id("00-xyz-00000000000000ab-01"), None);
        for span in [0, 1, 0xab, 0x0123_4567_89ab_cdef, u64::MAX] {
            let tp = traceparent("6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f", span);
            assert_eq!(tp, format!("00-6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f-{span:016x}-01"));
            assert_eq!(parent_span_id(&tp), Some(format!("{span:016x}").as_str()));
        }
        for id in [
            "not a uuid",
            "",
            "6F1C2D3E-4A5B-4C6D-8E7F-0A1B2C3D4E5F",
            "6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f",
            "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5g",
            "{6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f}",
            "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5fa",
        ] {
            let digits: String = id.chars().filter(char::is_ascii_hexdigit).collect();
            let expected = if digits.len() == 32 {
                format!("00-{}-00000000000000ab-01", digits.to_lowercase())
            } else {
                format!("00-{:0>32}-00000000000000ab-01", fnv_hex(id.as_bytes()))
            };
            assert_eq!(traceparent(id, 0xab), expected);
        }
        assert_eq!(parent_span_id("00-6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f"), None);
        assert_eq!(parent_span_id("00-6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f-00000000000000ab"), Some("00000000000000ab"));
        assert_eq!(parent_span_id("00-6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f-00000000000000ab0-01"), None, "17 digits");
        assert_eq!(parent_span_id("00-6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f-00000000000000a-01"), None, "15 digits");
        assert_eq!(parent_span_id("00-6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f-0000000000000é-01"), None);
    }
}
