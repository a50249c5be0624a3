//! In-memory store and queues with DynamoDB's and SQS's semantics: the embedded default.
//!
//! These are not test fakes. `switchyard ask` and `switchyard serve` run the whole pipeline on
//! them, and the simulation harness injects faults around them, so they keep the behaviours the
//! engine relies on:
//!
//! - [`MemoryStore`]: every write is atomic and conditional exactly as documented on
//!   [`Store`]; a failed condition changes nothing; items over DynamoDB's 400 KB limit are
//!   refused; records past their `expires_at` read as absent, as if TTL had removed them.
//! - [`MemoryQueue`]: at-least-once delivery with delays, a visibility timeout per queue,
//!   redelivery of messages that are not deleted, receive counts, and a dead-letter queue that
//!   takes a message once it has been received `max_receive_count` times.
//!
//! - [`Quota`]: the store holds at most so many records (queries and sessions) and so many
//!   bytes (their JSON size); past either, the oldest finished queries and sessions (and any
//!   record past its `expires_at`) are evicted first. A query still running is never
//!   evicted: when only running queries are left, a new query is refused as unavailable.
//!
//! Time comes from `tokio::time`, so a test that pauses tokio's clock runs every delay,
//! visibility timeout and deadline in virtual time.

use super::fanin::{self, Arrival};
use crate::ports::{
    Clock, Event, HandoffRecord, HandoffWrite, QueryRecord, SessionRecord, SignalPage, SignalPageRequest, Store,
    StoreError, ToolCallOutcome, ToolCallRecord, ToolClaim,
};
use async_trait::async_trait;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use switchyard_model::contracts::OrchestratorOutput;

use switchyard_model::limits::{json_fits, json_size, DYNAMODB_MAX_ITEM_BYTES};

mod call_records;
mod queue;
pub use queue::{MemoryQueue, QueueSettings};

/// How much the embedded store holds at most. [`Quota::UNBOUNDED`] (the default) holds
/// everything until it expires; `switchyard serve` bounds it (docs/serve.md#quotas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Records: queries (each with its events, handoffs and output) and sessions.
    pub max_records: usize,
    /// Bytes: the JSON size of those records.
    pub max_bytes: usize,
}

impl Quota {
    /// No bound but expiry.
    pub const UNBOUNDED: Quota = Quota { max_records: usize::MAX, max_bytes: usize::MAX };

    fn bounded(&self) -> bool {
        *self != Quota::UNBOUNDED
    }
}

impl Default for Quota {
    fn default() -> Quota {
        Quota::UNBOUNDED
    }
}

/// What the store holds, against its [`Quota`] (bytes are counted only when it is bounded).
#[derive(Default)]
struct Usage {
    /// Per query: its record, events, handoffs and output.
    queries: Map<String, usize>,
    /// Per (user id, session id).
    sessions: Map<(String, String), usize>,
    bytes: usize,
}

impl Usage {
    fn charge_query(&mut self, query_id: &str, bytes: usize) {
        if bytes > 0 {
            *entry_of(&mut self.queries, query_id) += bytes;
            self.bytes += bytes;
        }
    }
}

/// A record the quota may evict, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Evictable {
    Query(String),
    Session(String, String),
}

/// How many requests an adapter has served, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestCounts {
    /// Store reads (gets and queries).
    pub reads: u64,
    /// Store single-item writes.
    pub writes: u64,
    /// Store transactional writes (one per atomic multi-item write).
    pub transact_writes: u64,
    /// Queue sends.
    pub sends: u64,
    /// Queue receives that returned at least one message.
    pub receives: u64,
    /// Queue deletes.
    pub deletes: u64,
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    transact_writes: AtomicU64,
}

/// The hasher of the store's maps: foldhash, several times cheaper than std's SipHash on the
/// short string keys looked up on every read and write. Keys such as session ids and
/// idempotency keys are chosen by clients, so the hash stays keyed against collision
/// flooding: one random seed per process, drawn from std's `RandomState` (the operating
/// system's randomness; foldhash is built without its `std` feature, which would seed from
/// addresses and the time), and a random per-map seed on top.
#[derive(Clone)]
struct KeyHash(foldhash::fast::SeedableRandomState);

impl Default for KeyHash {
    fn default() -> Self {
        use std::hash::{BuildHasher, RandomState};
        static PROCESS_SEED: std::sync::OnceLock<foldhash::SharedSeed> = std::sync::OnceLock::new();
        let shared = PROCESS_SEED.get_or_init(|| foldhash::SharedSeed::from_u64(RandomState::new().hash_one(0u64)));
        KeyHash(foldhash::fast::SeedableRandomState::with_seed(RandomState::new().hash_one(1u64), shared))
    }
}

impl std::hash::BuildHasher for KeyHash {
    type Hasher = foldhash::fast::FoldHasher;

    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

/// A map of the store, keyed by client-visible strings (see [`KeyHash`]).
type Map<K, V> = HashMap<K, V, KeyHash>;

#[derive(Default)]
struct Tables {
    queries: Map<String, StoredQuery>,
    /// By query, then by dispatch id: a query's handoffs are listed without scanning others'.
    /// Handoffs and outputs are written once: the writer's `Arc` is kept and lent to readers.
    handoffs: Map<String, BTreeMap<String, Arc<HandoffRecord>>>,
    outputs: Map<String, (Arc<OrchestratorOutput>, i64)>,
    /// By query, then by event key; an entry keeps what the key and the query id do not say.
    events: Map<String, EventLog>,
    idempotency: Map<(String, String), String>,
    manifests: Map<String, String>,
    /// By (user id, session id).
    sessions: Map<(String, String), SessionRecord>,
    /// Per query, the fan-in's arrivals in the order applied (see [`super::fanin`]).
    arrivals: Map<String, Vec<Arrival>>,
    usage: Usage,
    /// Write tool calls by (query, dispatch, index).
    tool_calls: Map<(String, String, u32), ToolCallRecord>,
}

impl Tables {
    fn records(&self) -> usize {
        self.queries.len() + self.sessions.len()
    }

    /// Drop a query and everything kept under its id.
    fn evict_query(&mut self, query_id: &str) {
        if let Some(stored) = self.queries.remove(query_id) {
            if let Some(key) = &stored.record.idempotency_key {
                let k = (stored.record.user_id.clone(), key.clone());
                if self.idempotency.get(&k).is_some_and(|holder| holder == query_id) {
                    self.idempotency.remove(&k);
                }
            }
        }
        self.handoffs.remove(query_id);
        self.outputs.remove(query_id);
        self.events.remove(query_id);
        self.arrivals.remove(query_id);
        self.tool_calls.retain(|key, _| key.0 != query_id);
        if let Some(bytes) = self.usage.queries.remove(query_id) {
            self.usage.bytes -= bytes;
        }
    }

    fn evict_session(&mut self, key: &(String, String)) {
        self.sessions.remove(key);
        if let Some(bytes) = self.usage.sessions.remove(key) {
            self.usage.bytes -= bytes;
        }
    }

    /// Evict finished queries, sessions and expired records, oldest first, until `records`
    /// more records and `bytes` more bytes fit in `quota` with a tenth of it to spare (so a
    /// full store evicts in batches, not on every write). A query that is neither done nor
    /// expired is never evicted. Whether the new records fit now.
    fn make_room(&mut self, quota: &Quota, records: usize, bytes: usize, now: i64) -> bool {
        let over = |t: &Tables, spare_records: usize, spare_bytes: usize| {
            t.records().saturating_add(records).saturating_add(spare_records) > quota.max_records
                || t.usage.bytes.saturating_add(bytes).saturating_add(spare_bytes) > quota.max_bytes
        };
        if !over(self, 0, 0) {
            return true;
        }
        let mut candidates: Vec<(i64, Evictable)> = self
            .queries
            .iter()
            .filter(|(_, q)| q.record.status == crate::ports::QueryStatus::Done || q.expires_at() < now)
            .map(|(id, q)| (q.record.accepted_at.timestamp_micros(), Evictable::Query(id.clone())))
            .collect();
        candidates.extend(
            self.sessions
                .iter()
                .map(|(key, s)| (s.updated_at.timestamp_micros(), Evictable::Session(key.0.clone(), key.1.clone()))),
        );
        candidates.sort_unstable();
        let (spare_records, spare_bytes) = (quota.max_records / 10, quota.max_bytes / 10);
        for (_, victim) in candidates {
            if !over(self, spare_records, spare_bytes) {
                break;
            }
            match victim {
                Evictable::Query(id) => self.evict_query(&id),
                Evictable::Session(user, session) => self.evict_session(&(user, session)),
            }
        }
        !over(self, 0, 0)
    }
}

/// A query record as the store keeps it: the record without its fan-in set, shared, so that
/// [`Store::get_query_without_fan_in`] lends it instead of copying it (the agent worker's read
/// of every dispatch), and beside it the fan-in set, which `record_handoff` changes in place
/// while readers hold the record and `update_query` leaves alone.
struct StoredQuery {
    /// `completed` is always empty here.
    record: Arc<QueryRecord>,
    completed: BTreeSet<String>,
    /// The record's JSON size, when the quota counts bytes (else 0).
    bytes: usize,
}

impl StoredQuery {
    fn new(query: &QueryRecord, version: u64, completed: BTreeSet<String>, bytes: usize) -> StoredQuery {
        StoredQuery { record: Arc::new(QueryRecord { version, ..clone_without_fan_in(query) }), completed, bytes }
    }

    fn expires_at(&self) -> i64 {
        self.record.expires_at
    }

    /// The whole record, fan-in set included: a copy.
    fn record(&self) -> QueryRecord {
        QueryRecord { completed: self.completed.clone(), ..QueryRecord::clone(&self.record) }
    }
}

/// An event as the log keeps it: its query id and key are the log's keys, so a write copies
/// the key once instead of the key twice and the query id once.
struct LoggedEvent {
    at: chrono::DateTime<chrono::Utc>,
    kind: crate::ports::EventKind,
    detail: Arc<crate::ports::Detail>,
    expires_at: i64,
}

/// A query's event log: its entries sorted by key. A step's events mostly sort after every key
/// already logged (a key starts with the stage and the entry's rank), so most writes append
/// after one comparison; a `BTreeMap` searched each key node by node and allocated its nodes.
#[derive(Default)]
struct EventLog(Vec<(String, LoggedEvent)>);

impl EventLog {
    /// Log `key` unless it is logged and live: an expired entry is replaced, a live one keeps
    /// its first write, as the DynamoDB adapter's conditional put does.
    fn put(&mut self, key: &str, now: i64, logged: impl FnOnce() -> LoggedEvent) {
        let at = match self.0.last() {
            None => 0,
            Some((last, _)) if last.as_str() < key => self.0.len(),
            Some(_) => match self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
                Ok(i) => {
                    if self.0[i].1.expires_at < now {
                        self.0[i].1 = logged();
                    }
                    return;
                }
                Err(i) => i,
            },
        };
        self.0.insert(at, (key.to_string(), logged()));
    }
}

impl LoggedEvent {
    fn event(&self, query_id: &str, key: &str) -> Event {
        Event {
            query_id: query_id.to_string(),
            key: key.to_string(),
            at: self.at,
            kind: self.kind,
            detail: self.detail.clone(),
            expires_at: self.expires_at,
        }
    }
}

/// Decides, per fan-in write, whether its answer is lost (given the query id): the write has
/// applied, and the store sends it again, as the AWS SDK retries a request whose response
/// never came.
pub type LostAnswer = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The embedded store.
pub struct MemoryStore {
    tables: Mutex<Tables>,
    clock: Arc<dyn Clock>,
    counters: Counters,
    lost_fan_in_answers: Option<LostAnswer>,
    quota: Quota,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

fn poisoned() -> StoreError {
    StoreError::Unavailable { message: "store lock poisoned by a panic".into(), source: None }
}

fn check_size<T: serde::Serialize>(kind: &str, value: &T) -> Result<(), StoreError> {
    json_fits(value, DYNAMODB_MAX_ITEM_BYTES).map_err(|size| {
        StoreError::TooLarge(format!("{kind} item is {size} bytes; the limit is {DYNAMODB_MAX_ITEM_BYTES}"))
    })
}

/// The entry of `key` in `map`, started empty only when absent: the key is copied to start it,
/// not on every write to an existing entry (as `entry(key.to_string())` would).
fn entry_of<'m, V: Default>(map: &'m mut Map<String, V>, key: &str) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_string(), V::default());
    }
    map.get_mut(key).expect("the entry was inserted above")
}

/// A copy of `query` with an empty fan-in set: an update keeps the stored set (owned by
/// `record_handoff`), so the caller's copy of it is not cloned only to be dropped. Every field
/// is named, so a new field is a compile error here rather than a field silently not copied.
fn clone_without_fan_in(query: &QueryRecord) -> QueryRecord {
    let QueryRecord {
        query_id,
        user_id,
        session_id,
        roles,
        idempotency_key,
        request_hash,
        manifest_fingerprint,
        status,
        version,
        parsed,
        warnings,
        scope,
        plan,
        completed: _,
        accepted_at,
        deadline_at,
        synth_claimed_at,
        outcome,
        signal,
        approvals,
        expires_at,
    } = query;
    QueryRecord {
        query_id: query_id.clone(),
        user_id: user_id.clone(),
        session_id: session_id.clone(),
        roles: roles.clone(),
        idempotency_key: idempotency_key.clone(),
        request_hash: request_hash.clone(),
        manifest_fingerprint: manifest_fingerprint.clone(),
        status: *status,
        version: *version,
        parsed: parsed.clone(),
        warnings: warnings.clone(),
        scope: *scope,
        plan: plan.clone(),
        completed: BTreeSet::new(),
        accepted_at: *accepted_at,
        deadline_at: *deadline_at,
        synth_claimed_at: *synth_claimed_at,
        outcome: *outcome,
        signal: signal.clone(),
        approvals: approvals.clone(),
        expires_at: *expires_at,
    }
}

impl MemoryStore {
    /// An empty store reading the time from `clock` (for expiry).
    pub fn new(clock: Arc<dyn Clock>) -> MemoryStore {
        MemoryStore {
            tables: Mutex::new(Tables::default()),
            clock,
            counters: Counters::default(),
            lost_fan_in_answers: None,
            quota: Quota::UNBOUNDED,
        }
    }

    /// The same store, holding at most what `quota` allows.
    pub fn with_quota(mut self, quota: Quota) -> MemoryStore {
        self.quota = quota;
        self
    }

    /// Records held (queries and sessions, expired ones until evicted) and their bytes as the
    /// quota counts them (0 when it is unbounded).
    pub fn usage(&self) -> (usize, usize) {
        self.tables.lock().map(|t| (t.records(), t.usage.bytes)).unwrap_or_default()
    }

    /// The JSON size of `value` when the quota counts bytes, else 0 (nothing is measured).
    fn measure<T: serde::Serialize + ?Sized>(&self, value: &T) -> usize {
        if self.quota.bounded() {
            json_size(value)
        } else {
            0
        }
    }

    fn measure_events(&self, events: &[Event]) -> usize {
        if !self.quota.bounded() {
            return 0;
        }
        events.iter().map(|e| e.key.len() + json_size(&*e.detail) + 64).sum()
    }

    /// The same store, losing the answer of the fan-in writes `lost` picks (for the simulation):
    /// such a write has applied and is sent again, with other writers free to run in between,
    /// exactly as DynamoDB's fan-in `UpdateItem` is retried after a lost response.
    pub fn with_lost_fan_in_answers(mut self, lost: LostAnswer) -> MemoryStore {
        self.lost_fan_in_answers = Some(lost);
        self
    }

    fn lock(&self) -> Result<MutexGuard<'_, Tables>, StoreError> {
        self.tables.lock().map_err(|_| poisoned())
    }

    fn now_s(&self) -> i64 {
        self.clock.now().timestamp()
    }

    fn live(&self, expires_at: i64) -> bool {
        expires_at >= self.now_s()
    }

    fn read(&self) {
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
    }

    fn transact(&self, items: usize) {
        if items > 1 {
            self.counters.transact_writes.fetch_add(1, Ordering::Relaxed);
        } else {
            self.counters.writes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests served so far.
    pub fn counts(&self) -> RequestCounts {
        RequestCounts {
            reads: self.counters.reads.load(Ordering::Relaxed),
            writes: self.counters.writes.load(Ordering::Relaxed),
            transact_writes: self.counters.transact_writes.load(Ordering::Relaxed),
            ..RequestCounts::default()
        }
    }

    /// Every query id in the store (for the simulation's invariant checks).
    pub fn query_ids(&self) -> Vec<String> {
        self.tables.lock().map(|t| t.queries.keys().cloned().collect()).unwrap_or_default()
    }

    /// Replace the live query record stored at `expected_version` with `query`, keeping its
    /// fan-in set (owned by `record_handoff`) and bumping the version; `ConditionFailed` when
    /// the record is absent, expired or at another version. Nothing changes on failure.
    fn replace_at_version(
        t: &mut Tables,
        query: &QueryRecord,
        expected_version: u64,
        now: i64,
        bytes: usize,
    ) -> Result<(), StoreError> {
        let stored = t
            .queries
            .get_mut(&query.query_id)
            .filter(|q| q.expires_at() >= now)
            .ok_or_else(|| StoreError::ConditionFailed(format!("query {} does not exist", query.query_id)))?;
        if stored.record.version != expected_version {
            return Err(StoreError::ConditionFailed(format!(
                "query {} is at version {}, not {expected_version}",
                query.query_id, stored.record.version
            )));
        }
        // A reader may still hold the old record: it is replaced, not changed.
        let before = stored.bytes;
        *stored = StoredQuery::new(query, expected_version + 1, std::mem::take(&mut stored.completed), bytes);
        if before != bytes {
            let held = entry_of(&mut t.usage.queries, &query.query_id);
            *held = (*held + bytes).saturating_sub(before);
            t.usage.bytes = (t.usage.bytes + bytes).saturating_sub(before);
        }
        Ok(())
    }

    /// Append events; a key already logged (and not expired) keeps its first entry, as the
    /// DynamoDB adapter's conditional put does.
    fn put_events(tables: &mut Tables, events: &[Event], now: i64) {
        // A write's events almost always belong to one query: its log is looked up once for
        // each run of events of the same query, not twice per event.
        let mut rest = events;
        while let Some(first) = rest.first() {
            let same = rest.iter().take_while(|e| e.query_id == first.query_id).count();
            let (run, after) = rest.split_at(same);
            rest = after;
            // The query's log usually exists: its id is copied only to start one.
            if !tables.events.contains_key(&first.query_id) {
                tables.events.insert(first.query_id.clone(), EventLog::default());
            }
            let Some(log) = tables.events.get_mut(&first.query_id) else { continue };
            for e in run {
                log.put(&e.key, now, || LoggedEvent {
                    at: e.at,
                    kind: e.kind,
                    detail: e.detail.clone(),
                    expires_at: e.expires_at,
                });
            }
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn create_query(&self, query: &QueryRecord, events: &[Event]) -> Result<(), StoreError> {
        check_size("query", query)?;
        let now = self.now_s();
        let record_bytes = self.measure(query);
        let bytes = record_bytes + self.measure_events(events);
        let mut t = self.lock()?;
        if t.queries.get(&query.query_id).is_some_and(|q| q.expires_at() >= now) {
            return Err(StoreError::ConditionFailed(format!("query {} exists", query.query_id)));
        }
        if self.quota.bounded() {
            // An expired record under the same id is replaced whole.
            if t.queries.contains_key(&query.query_id) {
                t.evict_query(&query.query_id);
            }
            if !t.make_room(&self.quota, 1, bytes, now) {
                return Err(StoreError::Unavailable {
                    message: format!(
                        "the store is at its quota ({} records, {} bytes) with queries still running; retry shortly",
                        self.quota.max_records, self.quota.max_bytes
                    ),
                    source: None,
                });
            }
        }
        if let Some(key) = &query.idempotency_key {
            let k = (query.user_id.clone(), key.clone());
            if let Some(holder) = t.idempotency.get(&k) {
                if t.queries.get(holder).is_some_and(|q| q.expires_at() >= now) {
                    return Err(StoreError::ConditionFailed("idempotency key held by another query".into()));
                }
            }
            t.idempotency.insert(k, query.query_id.clone());
        }
        t.queries.insert(
            query.query_id.clone(),
            StoredQuery::new(query, query.version, query.completed.clone(), record_bytes),
        );
        t.arrivals.remove(&query.query_id);
        t.usage.charge_query(&query.query_id, bytes);
        Self::put_events(&mut t, events, now);
        drop(t);
        self.transact(1 + events.len() + usize::from(query.idempotency_key.is_some()));
        Ok(())
    }

    async fn get_query(&self, query_id: &str) -> Result<Option<QueryRecord>, StoreError> {
        self.read();
        let t = self.lock()?;
        Ok(t.queries.get(query_id).filter(|q| self.live(q.expires_at())).map(StoredQuery::record))
    }

    async fn get_query_without_fan_in(&self, query_id: &str) -> Result<Option<Arc<QueryRecord>>, StoreError> {
        self.read();
        let t = self.lock()?;
        Ok(t.queries.get(query_id).filter(|q| self.live(q.expires_at())).map(|q| q.record.clone()))
    }

    async fn list_user_queries(&self, user_id: &str, limit: usize) -> Result<Vec<QueryRecord>, StoreError> {
        self.read();
        let t = self.lock()?;
        let mut mine: Vec<QueryRecord> = t
            .queries
            .values()
            .filter(|q| q.record.user_id == user_id && self.live(q.expires_at()))
            .map(StoredQuery::record)
            .collect();
        drop(t);
        mine.sort_by(|a, b| (b.accepted_at, &b.query_id).cmp(&(a.accepted_at, &a.query_id)));
        mine.truncate(limit);
        Ok(mine)
    }

    async fn list_signals(&self, request: &SignalPageRequest) -> Result<SignalPage, StoreError> {
        self.read();
        if let Some(after) = &request.after {
            if switchyard_core::signals::sort_key_time(after).is_none() {
                return Err(StoreError::Corrupt("signal cursor is malformed".into()));
            }
        }
        let t = self.lock()?;
        let mut found: Vec<(String, switchyard_core::signals::SignalRecord)> = t
            .queries
            .values()
            .filter(|q| self.live(q.expires_at()))
            .map(|q| &q.record)
            .filter_map(|q| q.signal.as_ref().filter(|s| s.finished()).map(|s| (q, s)))
            .filter(|(_, s)| s.recorded_at >= request.oldest && s.recorded_at <= request.newest)
            .map(|(q, s)| (switchyard_core::signals::sort_key(&s.recorded_at, &q.query_id), s.record()))
            .filter(|(key, _)| request.after.as_ref().is_none_or(|after| key < after))
            .collect();
        drop(t);
        found.sort_by(|a, b| b.0.cmp(&a.0));
        let more = found.len() > request.limit;
        found.truncate(request.limit);
        let next = if more { found.last().map(|(key, _)| key.clone()) } else { None };
        Ok(SignalPage { records: found.into_iter().map(|(_, r)| r).collect(), next })
    }

    async fn find_idempotency_key(&self, user_id: &str, key: &str) -> Result<Option<String>, StoreError> {
        self.read();
        let t = self.lock()?;
        let holder = t.idempotency.get(&(user_id.to_string(), key.to_string()));
        Ok(holder.filter(|id| t.queries.get(*id).is_some_and(|q| self.live(q.expires_at()))).cloned())
    }

    async fn update_query(
        &self,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        check_size("query", query)?;
        let bytes = self.measure(query);
        let event_bytes = self.measure_events(events);
        let mut t = self.lock()?;
        let now = self.now_s();
        Self::replace_at_version(&mut t, query, expected_version, now, bytes)?;
        t.usage.charge_query(&query.query_id, event_bytes);
        Self::put_events(&mut t, events, now);
        drop(t);
        self.transact(1 + events.len());
        Ok(())
    }

    async fn record_handoff(&self, record: Arc<HandoffRecord>, events: &[Event]) -> Result<HandoffWrite, StoreError> {
        check_size("handoff", &*record)?;
        let bytes = self.measure(&*record) + self.measure_events(events);
        // The guard lives in this block only: the future must stay `Send` across the retry's
        // await below.
        let completed = {
            let mut t = self.lock()?;
            let now = self.now_s();
            let dispatch_id = &record.handoff.dispatch_id;
            if t.handoffs.get(&record.query_id).and_then(|m| m.get(dispatch_id)).is_some_and(|h| h.expires_at >= now) {
                return Ok(HandoffWrite::Duplicate);
            }
            // Filling a slot updates the query's fan-in, which needs the query; a handoff that
            // fills no slot is a single conditional put.
            let completed = match &record.slot {
                Some(slot) => {
                    let Some(query) = t.queries.get_mut(&record.query_id).filter(|q| q.expires_at() >= now) else {
                        return Err(StoreError::ConditionFailed(format!("query {} does not exist", record.query_id)));
                    };
                    if !query.completed.contains(slot) {
                        query.completed.insert(slot.clone());
                    }
                    fanin::arrive(entry_of(&mut t.arrivals, &record.query_id), &record.handoff.dispatch_id, slot)
                }
                None => t
                    .queries
                    .get(&record.query_id)
                    .filter(|q| q.expires_at() >= now)
                    .map(|q| q.completed.clone())
                    .unwrap_or_default(),
            };
            entry_of(&mut t.handoffs, &record.query_id).insert(dispatch_id.clone(), Arc::clone(&record));
            t.usage.charge_query(&record.query_id, bytes);
            Self::put_events(&mut t, events, now);
            completed
        };
        self.transact(1 + usize::from(record.slot.is_some()) + events.len());
        let completed = match (&record.slot, &self.lost_fan_in_answers) {
            (Some(slot), Some(lost)) if lost(&record.query_id) => {
                // The answer never came: the same write is sent again and its answer is the one
                // used. (No await between the two: a future dropped there — a crashed or aborted
                // invocation — would leave an applied write that no caller or observer saw, which
                // the simulation's write accounting rightly reports; seed 379 found it.)
                let again = {
                    let mut t = self.lock()?;
                    fanin::arrive(entry_of(&mut t.arrivals, &record.query_id), &record.handoff.dispatch_id, slot)
                };
                self.transact(1);
                again
            }
            _ => completed,
        };
        Ok(HandoffWrite::Recorded { completed })
    }

    async fn claim_tool_call(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError> {
        self.claim_call(record)
    }

    async fn finish_tool_call(
        &self,
        query_id: &str,
        dispatch_id: &str,
        index: u32,
        outcome: &ToolCallOutcome,
    ) -> Result<(), StoreError> {
        self.finish_call(query_id, dispatch_id, index, outcome)
    }

    async fn get_handoff(&self, query_id: &str, dispatch_id: &str) -> Result<Option<Arc<HandoffRecord>>, StoreError> {
        self.read();
        let t = self.lock()?;
        Ok(t.handoffs.get(query_id).and_then(|m| m.get(dispatch_id)).filter(|h| self.live(h.expires_at)).cloned())
    }

    async fn list_handoffs(&self, query_id: &str) -> Result<Vec<Arc<HandoffRecord>>, StoreError> {
        self.read();
        let t = self.lock()?;
        // Keyed by dispatch id, so already in its order.
        let now = self.now_s();
        Ok(t.handoffs
            .get(query_id)
            .map(|m| m.values().filter(|h| h.expires_at >= now).cloned().collect())
            .unwrap_or_default())
    }

    async fn finish_query(
        &self,
        output: Arc<OrchestratorOutput>,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        check_size("output", &*output)?;
        let record_bytes = self.measure(query);
        let bytes = self.measure(&*output) + self.measure_events(events);
        let mut t = self.lock()?;
        if t.outputs.contains_key(&query.query_id) {
            return Err(StoreError::ConditionFailed(format!("output of {} exists", query.query_id)));
        }
        let now = self.now_s();
        Self::replace_at_version(&mut t, query, expected_version, now, record_bytes)?;
        t.outputs.insert(query.query_id.clone(), (output, query.expires_at));
        t.usage.charge_query(&query.query_id, bytes);
        Self::put_events(&mut t, events, now);
        drop(t);
        self.transact(2 + events.len());
        Ok(())
    }

    async fn get_output(&self, query_id: &str) -> Result<Option<Arc<OrchestratorOutput>>, StoreError> {
        self.read();
        let t = self.lock()?;
        Ok(t.outputs.get(query_id).filter(|(_, exp)| self.live(*exp)).map(|(o, _)| o.clone()))
    }

    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError> {
        let now = self.now_s();
        let bytes = if self.quota.bounded() {
            events.iter().map(|e| (e.query_id.as_str(), self.measure_events(std::slice::from_ref(e)))).collect()
        } else {
            Vec::new()
        };
        let mut t = self.lock()?;
        for (query_id, n) in bytes {
            // Events of a query no longer held are logged, but held under no query: count them
            // only while their query is.
            if t.queries.contains_key(query_id) {
                t.usage.charge_query(query_id, n);
            }
        }
        Self::put_events(&mut t, events, now);
        drop(t);
        self.transact(events.len());
        Ok(())
    }

    async fn list_events(&self, query_id: &str) -> Result<Vec<Event>, StoreError> {
        self.read();
        let t = self.lock()?;
        let now = self.now_s();
        let mut list: Vec<Event> = t
            .events
            .get(query_id)
            .map(|log| {
                log.0.iter().filter(|(_, e)| e.expires_at >= now).map(|(key, e)| e.event(query_id, key)).collect()
            })
            .unwrap_or_default();
        list.sort_by(|a, b| (a.at, &a.key).cmp(&(b.at, &b.key)));
        Ok(list)
    }

    async fn put_manifest(&self, fingerprint: &str, body: &str) -> Result<(), StoreError> {
        check_size("manifest", &body)?;
        let mut t = self.lock()?;
        t.manifests.entry(fingerprint.to_string()).or_insert_with(|| body.to_string());
        drop(t);
        self.transact(1);
        Ok(())
    }

    async fn get_manifest(&self, fingerprint: &str) -> Result<Option<String>, StoreError> {
        self.read();
        let t = self.lock()?;
        Ok(t.manifests.get(fingerprint).cloned())
    }

    async fn get_session(&self, user_id: &str, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.read();
        let t = self.lock()?;
        let key = (user_id.to_string(), session_id.to_string());
        Ok(t.sessions.get(&key).filter(|s| self.live(s.expires_at)).cloned())
    }

    async fn put_session(&self, session: &SessionRecord, expected_version: u64) -> Result<(), StoreError> {
        check_size("session", session)?;
        let now = self.now_s();
        let mut t = self.lock()?;
        let key = (session.user_id.clone(), session.session_id.clone());
        let stored = t.sessions.get(&key).filter(|s| s.expires_at >= now).map_or(0, |s| s.version);
        if stored != expected_version {
            return Err(StoreError::ConditionFailed(format!(
                "session {} is at version {stored}, not {expected_version}",
                session.session_id
            )));
        }
        let mut record = session.clone();
        record.version = expected_version + 1;
        if self.quota.bounded() {
            // A session write finishes a query's turn: it is never refused; room is made by
            // evicting older records where there are any (the session's own old version is
            // replaced, so it is taken out first).
            let bytes = json_size(&record);
            t.evict_session(&key);
            t.make_room(&self.quota, 1, bytes, now);
            t.usage.bytes += bytes;
            t.usage.sessions.insert(key.clone(), bytes);
        }
        t.sessions.insert(key, record);
        drop(t);
        self.transact(1);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
