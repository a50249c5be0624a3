//! The [`Store`] on DynamoDB: one table, one partition per query.
//!
//! # Item layout
//!
//! | item | `pk` | `sk` | typed attributes (used in conditions, keys, TTL) | `doc` (S, JSON) |
//! |---|---|---|---|---|
//! | query | `Q#<query_id>` | `META` | `status` S, `version` N, `completed` SS, `fanin` N, `gsi1pk` = `U#<user_id>`, `gsi1sk` = accepted_at (RFC 3339), `expires_at` N | [`QueryRecord`] without `completed` |
//! | handoff | `Q#<query_id>` | `H#<dispatch_id>` | `slot` S (when it fills one), `status` S, `expires_at` N | [`HandoffRecord`] |
//! | event | `Q#<query_id>` | `E#<event key>` | `at` S (RFC 3339), `expires_at` N | [`Event`] |
//! | output | `Q#<query_id>` | `OUT` | `status` S, `expires_at` N | [`OrchestratorOutput`] |
//! | idempotency key | `IDEM#<user_id>#<key>` | `IDEM` | `query_id` S, `expires_at` N | — |
//! | manifest version | `M#<fingerprint>` | `MANIFEST` | — (no TTL) | the manifest's canonical JSON |
//!
//! Every item also carries `kind` S (`query`, `handoff`, `event`, `output`, `idempotency`) for
//! people reading the table. In the idempotency key's `pk`, `%` and `#` inside the user id and
//! the key are written `%25` and `%23`, so `(a#b, c)` and `(a, b#c)` cannot share an item.
//!
//! # Why this shape
//!
//! - **Conditions need typed attributes.** The engine's correctness rests on conditional writes
//!   (ARCHITECTURE, rules 2 and 3): `attribute_not_exists(pk)` for records written once,
//!   `version = :expected` for the query record. Those attributes are top-level and typed; the
//!   rest of a record is one JSON string (`doc`), decoded with the same serde types as
//!   everywhere else, so adding a field to a record needs no change here. Where a typed
//!   attribute and `doc` could disagree (`status`, `version`, `completed`), the typed attribute
//!   wins on read.
//! - **Fan-in is a set, not a counter.** [`Store::record_handoff`] adds the handoff's slot to
//!   the string set `completed` with `ADD`, in the same transaction as the handoff item, whose
//!   `attribute_not_exists` condition makes a redelivered handoff change nothing. A set is
//!   idempotent where a counter is not: the same slot added twice is still one slot.
//!   [`Store::update_query`] never writes `completed`, so a query update cannot erase a
//!   concurrent fan-in.
//! - **The set after the write is exact.** A transaction cannot return values, so
//!   `record_handoff` reads the query record first (`completed` and the counter `fanin`) and
//!   makes its transaction conditional on `fanin` being unchanged while bumping it. If it
//!   commits, the set after the write is exactly the set read plus the slot, so exactly one
//!   writer sees the set become complete (rule 3). If another handoff got in between, the
//!   transaction is cancelled, nothing is written, and the read and write are tried again.
//! - **TTL.** Every item carries `expires_at` (epoch seconds; the table's TTL attribute).
//!   DynamoDB deletes expired items only eventually, so reads treat an item whose `expires_at`
//!   has passed as absent, and the write-once conditions accept an expired item as absent too.
//! - **Size.** An item's size is estimated before sending, erring high (attribute names,
//!   UTF-8 lengths, 21 bytes per number); anything over 400 KiB is refused with
//!   [`StoreError::TooLarge`] without a request. DynamoDB's own size rejection maps to the same
//!   error.
//!
//! # Requests per call
//!
//! | call | requests |
//! |---|---|
//! | `create_query`, `update_query`, `finish_query` | 1 `TransactWriteItems` |
//! | `record_handoff` | 1 `GetItem` + 1 `TransactWriteItems` (again per lost fan-in race) |
//! | `get_query`, `get_handoff`, `get_output`, `find_idempotency_key` | 1 `GetItem` |
//! | `list_handoffs`, `list_events` | 1 `Query` per page of 1 MB |
//! | `append_events` | 1 conditional `PutItem` per event |
//!
//! A transaction cancelled only by `TransactionConflict` (another transaction on the same
//! item at the same moment; nothing was written) is sent at most three times in all; past that
//! the call fails with the retryable [`StoreError::Unavailable`]. `record_handoff` gives up the
//! same way after eight lost fan-in races. Every request sent is counted in
//! [`DynamoStore::counts`].
//!
//! Event-log entries written inside a transaction are plain puts: the record write beside them
//! carries the condition, so a step that runs twice is cancelled whole and logs nothing twice.
//! [`Store::append_events`] has no record to lean on, so each of its puts is conditional on
//! the key being new (the first event under a key stays).

use crate::contracts::OrchestratorOutput;
use crate::limits::{DYNAMODB_MAX_ITEM_BYTES, DYNAMODB_MAX_TRANSACT_ITEMS};
use crate::ports::{Event, HandoffRecord, HandoffWrite, QueryRecord, QueryStatus, Store, StoreError};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A DynamoDB item.
type Item = HashMap<String, AttributeValue>;

/// How often `record_handoff` re-reads and retries after losing a fan-in race.
const FANIN_ATTEMPTS: u32 = 8;
/// How often a transaction cancelled only by `TransactionConflict` is sent.
const CONFLICT_ATTEMPTS: u32 = 3;

const PK: &str = "pk";
const SK: &str = "sk";
const DOC: &str = "doc";
const KIND: &str = "kind";
const STATUS: &str = "status";
const VERSION: &str = "version";
const COMPLETED: &str = "completed";
const FANIN: &str = "fanin";
const EXPIRES_AT: &str = "expires_at";
const GSI1PK: &str = "gsi1pk";
const GSI1SK: &str = "gsi1sk";
const SLOT: &str = "slot";
const AT: &str = "at";
const QUERY_ID: &str = "query_id";

const SK_META: &str = "META";
const SK_OUT: &str = "OUT";
const SK_IDEM: &str = "IDEM";
const SK_MANIFEST: &str = "MANIFEST";
const PREFIX_HANDOFF: &str = "H#";
const PREFIX_EVENT: &str = "E#";

/// Condition of a write-once item: absent, or present but expired.
const COND_ABSENT: &str = "attribute_not_exists(#pk) OR #expires_at < :now";

/// Requests a [`DynamoStore`] has sent since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// `GetItem` and `Query` requests (each page counts).
    pub reads: u64,
    /// Single-item writes (`PutItem`, `UpdateItem`).
    pub writes: u64,
    /// `TransactWriteItems` requests, committed or not.
    pub transact_writes: u64,
    /// Items written by requests that succeeded (a transaction's actions all count).
    pub items_written: u64,
}

#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    transact_writes: AtomicU64,
    items_written: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// The [`Store`] on one DynamoDB table (layout in the [module docs](self)).
///
/// Cheap to clone: clones share the client and the request counters.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    counters: Arc<Counters>,
}

impl DynamoStore {
    /// One conditional `PutItem` that writes `item` unless an item with its key exists; an
    /// existing item is not an error (the write is idempotent by key).
    async fn put_if_absent(&self, kind: &str, item: Item) -> Result<(), StoreError> {
        check_size(kind, &item)?;
        bump(&self.counters.writes, 1);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .send()
            .await;
        match result.map_err(|e| sdk_error("PutItem", e)) {
            Ok(_) => {
                bump(&self.counters.items_written, 1);
                Ok(())
            }
            Err(StoreError::ConditionFailed(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A store on `table`, through a client built once by the caller.
    pub fn new(client: Client, table: String) -> DynamoStore {
        DynamoStore { client, table, counters: Arc::new(Counters::default()) }
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Requests sent so far (for per-query read and write totals in benchmarks).
    pub fn counts(&self) -> StoreCounts {
        let c = &self.counters;
        StoreCounts {
            reads: c.reads.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            transact_writes: c.transact_writes.load(Ordering::Relaxed),
            items_written: c.items_written.load(Ordering::Relaxed),
        }
    }

    // --------------------------------------------------------------------------------------
    // Requests
    // --------------------------------------------------------------------------------------

    /// A strongly consistent `GetItem`; `None` when absent or expired.
    async fn get_item(&self, pk: String, sk: &str) -> Result<Option<Item>, StoreError> {
        bump(&self.counters.reads, 1);
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(pk))
            .key(SK, AttributeValue::S(sk.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| sdk_error("GetItem", e))?;
        Ok(out.item.filter(|item| !is_expired(item, now_epoch())))
    }

    /// Every live item of partition `pk` whose sort key starts with `prefix`, all pages,
    /// strongly consistent, in sort-key order.
    async fn query_prefix(&self, pk: String, prefix: &str) -> Result<Vec<Item>, StoreError> {
        let now = now_epoch();
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            bump(&self.counters.reads, 1);
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#sk", SK)
                .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
                .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_string()))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_error("Query", e))?;
            items.extend(out.items.unwrap_or_default().into_iter().filter(|item| !is_expired(item, now)));
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// One `TransactWriteItems`, sent again while it is cancelled only by transaction
    /// conflicts. A cancellation for any other reason comes back as its reasons, one per
    /// action, for the caller to interpret.
    async fn transact(&self, actions: Vec<TransactWriteItem>) -> Result<(), TxError> {
        if actions.len() > DYNAMODB_MAX_TRANSACT_ITEMS {
            return Err(TxError::Store(StoreError::TooLarge(format!(
                "a transaction of {} items (DynamoDB allows {DYNAMODB_MAX_TRANSACT_ITEMS})",
                actions.len()
            ))));
        }
        let count = actions.len() as u64;
        let mut attempt = 0;
        loop {
            attempt += 1;
            bump(&self.counters.transact_writes, 1);
            let result = self.client.transact_write_items().set_transact_items(Some(actions.clone())).send().await;
            let err = match result {
                Ok(_) => {
                    bump(&self.counters.items_written, count);
                    return Ok(());
                }
                Err(err) => err,
            };
            let reasons = match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                    let mut reasons: Vec<Reason> = cancelled
                        .cancellation_reasons()
                        .iter()
                        .map(|r| Reason {
                            code: r.code().unwrap_or("None").to_string(),
                            message: r.message().unwrap_or_default().to_string(),
                        })
                        .collect();
                    if reasons.is_empty() {
                        // No per-action reasons: read what the message says.
                        let message = cancelled.message().unwrap_or_default();
                        for code in ["ConditionalCheckFailed", "TransactionConflict", "ValidationError"] {
                            if message.contains(code) {
                                reasons.push(Reason { code: code.to_string(), message: message.to_string() });
                            }
                        }
                    }
                    reasons
                }
                _ => return Err(TxError::Store(sdk_error("TransactWriteItems", err))),
            };
            if conflict_only(&reasons) && attempt < CONFLICT_ATTEMPTS {
                tokio::time::sleep(jitter(attempt)).await;
                continue;
            }
            return Err(TxError::Cancelled(reasons));
        }
    }
}

/// Why a transaction did not commit.
#[derive(Debug)]
enum TxError {
    /// Cancelled; one reason per action, in order (`None` for actions that were fine).
    Cancelled(Vec<Reason>),
    /// Failed before DynamoDB looked at the actions.
    Store(StoreError),
}

/// One action's cancellation reason.
#[derive(Debug, Clone)]
struct Reason {
    code: String,
    message: String,
}

impl TxError {
    /// The error for the caller: the first action whose condition failed is named by
    /// `labels[i]` (`"query exists"`, …).
    fn into_store_error(self, labels: &[&str]) -> StoreError {
        let reasons = match self {
            TxError::Store(e) => return e,
            TxError::Cancelled(reasons) => reasons,
        };
        if let Some(i) = reasons.iter().position(|r| r.code == "ConditionalCheckFailed") {
            let label = labels.get(i).copied().unwrap_or("condition failed");
            return StoreError::ConditionFailed(label.to_string());
        }
        if let Some(r) = reasons.iter().find(|r| r.code == "ValidationError" && mentions_size(&r.message)) {
            return StoreError::TooLarge(r.message.clone());
        }
        let codes: Vec<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
        StoreError::Unavailable { message: format!("transaction cancelled: [{}]", codes.join(", ")), source: None }
    }

    /// Whether the only reason was a conflict with a concurrent transaction.
    fn is_conflict_only(&self) -> bool {
        matches!(self, TxError::Cancelled(reasons) if conflict_only(reasons))
    }

    /// Whether action `i`'s condition failed.
    fn condition_failed_at(&self, i: usize) -> bool {
        matches!(self, TxError::Cancelled(reasons) if reasons.get(i).is_some_and(|r| r.code == "ConditionalCheckFailed"))
    }
}

/// Cancelled by a concurrent transaction on the same item and nothing else.
fn conflict_only(reasons: &[Reason]) -> bool {
    reasons.iter().any(|r| r.code == "TransactionConflict")
        && reasons.iter().all(|r| r.code == "TransactionConflict" || r.code == "None")
}

fn mentions_size(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("size") && (m.contains("exceed") || m.contains("maximum") || m.contains("large"))
}

/// Turns an SDK error into a [`StoreError`]: failed conditions are `ConditionFailed`, a size
/// rejection is `TooLarge`, everything else (throttling, 5xx, timeouts, dispatch failures, and
/// requests refused for other reasons) is `Unavailable` with the SDK error as its source.
fn sdk_error<E, R>(operation: &str, err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let message = match &err {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or("Unknown");
            let text = service.err().message().unwrap_or_default();
            if code == "ConditionalCheckFailedException" {
                return StoreError::ConditionFailed(format!("{operation}: {text}"));
            }
            if code == "ValidationException" && mentions_size(text) {
                return StoreError::TooLarge(format!("{operation}: {text}"));
            }
            format!("{operation}: {code}: {text}")
        }
        SdkError::TimeoutError(_) => format!("{operation}: timed out"),
        SdkError::DispatchFailure(_) => format!("{operation}: could not reach DynamoDB"),
        SdkError::ResponseError(_) => format!("{operation}: unreadable response"),
        SdkError::ConstructionFailure(_) => format!("{operation}: request could not be built"),
        _ => format!("{operation}: failed"),
    };
    StoreError::Unavailable { message, source: Some(Box::new(err)) }
}

/// A short pause that grows with `attempt`, jittered by the clock's nanoseconds.
fn jitter(attempt: u32) -> Duration {
    let nanos = u64::from(Utc::now().timestamp_subsec_nanos());
    Duration::from_millis(10 * u64::from(attempt) + nanos % 20)
}

fn now_epoch() -> i64 {
    Utc::now().timestamp()
}

// ------------------------------------------------------------------------------------------
// Item mapping (records ↔ items). AttributeValue stays in this module.
// ------------------------------------------------------------------------------------------

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn rfc3339(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// `Q#<query_id>`.
fn query_pk(query_id: &str) -> String {
    format!("Q#{query_id}")
}

/// `IDEM#<user_id>#<key>` with `%` and `#` escaped in both parts.
fn idempotency_pk(user_id: &str, key: &str) -> String {
    fn escape(part: &str) -> String {
        part.replace('%', "%25").replace('#', "%23")
    }
    format!("IDEM#{}#{}", escape(user_id), escape(key))
}

fn status_name(status: QueryStatus) -> &'static str {
    match status {
        QueryStatus::Accepted => "accepted",
        QueryStatus::Routed => "routed",
        QueryStatus::Synthesizing => "synthesizing",
        QueryStatus::Done => "done",
    }
}

fn parse_status(name: &str) -> Option<QueryStatus> {
    Some(match name {
        "accepted" => QueryStatus::Accepted,
        "routed" => QueryStatus::Routed,
        "synthesizing" => QueryStatus::Synthesizing,
        "done" => QueryStatus::Done,
        _ => return None,
    })
}

fn to_doc<T: serde::Serialize>(what: &str, record: &T) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(record).map_err(|e| StoreError::Corrupt(format!("{what} cannot be encoded: {e}")))
}

fn doc_string(what: &str, doc: &serde_json::Value) -> Result<AttributeValue, StoreError> {
    serde_json::to_string(doc).map(s).map_err(|e| StoreError::Corrupt(format!("{what} cannot be encoded: {e}")))
}

/// The attributes of a query record that `update_query` replaces: everything except the
/// keys, `completed` and `fanin`. `version` is the version to store.
fn query_fields(query: &QueryRecord, version: u64) -> Result<Item, StoreError> {
    let mut doc = to_doc("query", query)?;
    if let Some(fields) = doc.as_object_mut() {
        fields.remove(COMPLETED);
        fields.insert(VERSION.to_string(), serde_json::Value::from(version));
    }
    let mut item = Item::new();
    item.insert(KIND.into(), s("query"));
    item.insert(DOC.into(), doc_string("query", &doc)?);
    item.insert(STATUS.into(), s(status_name(query.status)));
    item.insert(VERSION.into(), n(version));
    item.insert(GSI1PK.into(), s(format!("U#{}", query.user_id)));
    item.insert(GSI1SK.into(), s(rfc3339(&query.accepted_at)));
    item.insert(EXPIRES_AT.into(), n(query.expires_at));
    Ok(item)
}

/// The whole query item as `create_query` writes it.
fn query_item(query: &QueryRecord) -> Result<Item, StoreError> {
    let mut item = query_fields(query, query.version)?;
    item.insert(PK.into(), s(query_pk(&query.query_id)));
    item.insert(SK.into(), s(SK_META));
    item.insert(FANIN.into(), n(0));
    if !query.completed.is_empty() {
        item.insert(COMPLETED.into(), AttributeValue::Ss(query.completed.iter().cloned().collect()));
    }
    Ok(item)
}

fn query_from_item(item: &Item) -> Result<QueryRecord, StoreError> {
    let mut query: QueryRecord = from_doc("query", item)?;
    if let Some(status) = get_s(item, STATUS) {
        query.status = parse_status(status)
            .ok_or_else(|| StoreError::Corrupt(format!("query {}: unknown status {status:?}", query.query_id)))?;
    }
    if let Some(version) = get_n(item, VERSION) {
        query.version = version
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("query {}: version {version:?}", query.query_id)))?;
    }
    query.completed = completed_of(item);
    Ok(query)
}

fn completed_of(item: &Item) -> BTreeSet<String> {
    match item.get(COMPLETED) {
        Some(AttributeValue::Ss(slots)) => slots.iter().cloned().collect(),
        _ => BTreeSet::new(),
    }
}

fn fanin_of(item: &Item) -> Option<String> {
    get_n(item, FANIN).map(str::to_string)
}

fn handoff_item(record: &HandoffRecord) -> Result<Item, StoreError> {
    let doc = to_doc("handoff", record)?;
    let mut item = Item::new();
    item.insert(PK.into(), s(query_pk(&record.query_id)));
    item.insert(SK.into(), s(format!("{PREFIX_HANDOFF}{}", record.handoff.dispatch_id)));
    item.insert(KIND.into(), s("handoff"));
    item.insert(DOC.into(), doc_string("handoff", &doc)?);
    if let Some(slot) = &record.slot {
        item.insert(SLOT.into(), s(slot.clone()));
    }
    if let Some(status) = doc.pointer("/handoff/execution/status").and_then(|v| v.as_str()) {
        item.insert(STATUS.into(), s(status));
    }
    item.insert(EXPIRES_AT.into(), n(record.expires_at));
    Ok(item)
}

fn handoff_from_item(item: &Item) -> Result<HandoffRecord, StoreError> {
    from_doc("handoff", item)
}

fn event_item(event: &Event) -> Result<Item, StoreError> {
    let doc = to_doc("event", event)?;
    let mut item = Item::new();
    item.insert(PK.into(), s(query_pk(&event.query_id)));
    item.insert(SK.into(), s(format!("{PREFIX_EVENT}{}", event.key)));
    item.insert(KIND.into(), s("event"));
    item.insert(DOC.into(), doc_string("event", &doc)?);
    item.insert(AT.into(), s(rfc3339(&event.at)));
    item.insert(EXPIRES_AT.into(), n(event.expires_at));
    Ok(item)
}

fn event_from_item(item: &Item) -> Result<Event, StoreError> {
    from_doc("event", item)
}

/// The output item; it expires with its query.
fn output_item(output: &OrchestratorOutput, expires_at: i64) -> Result<Item, StoreError> {
    let doc = to_doc("output", output)?;
    let mut item = Item::new();
    item.insert(PK.into(), s(query_pk(&output.query_id)));
    item.insert(SK.into(), s(SK_OUT));
    item.insert(KIND.into(), s("output"));
    item.insert(DOC.into(), doc_string("output", &doc)?);
    if let Some(status) = doc.get("status").and_then(|v| v.as_str()) {
        item.insert(STATUS.into(), s(status));
    }
    item.insert(EXPIRES_AT.into(), n(expires_at));
    Ok(item)
}

fn output_from_item(item: &Item) -> Result<OrchestratorOutput, StoreError> {
    from_doc("output", item)
}

fn idempotency_item(user_id: &str, key: &str, query_id: &str, expires_at: i64) -> Item {
    let mut item = Item::new();
    item.insert(PK.into(), s(idempotency_pk(user_id, key)));
    item.insert(SK.into(), s(SK_IDEM));
    item.insert(KIND.into(), s("idempotency"));
    item.insert(QUERY_ID.into(), s(query_id));
    item.insert(EXPIRES_AT.into(), n(expires_at));
    item
}

fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v),
        _ => None,
    }
}

fn get_n<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => Some(v),
        _ => None,
    }
}

fn describe(item: &Item) -> String {
    format!("{} / {}", get_s(item, PK).unwrap_or("?"), get_s(item, SK).unwrap_or("?"))
}

fn from_doc<T: serde::de::DeserializeOwned>(what: &str, item: &Item) -> Result<T, StoreError> {
    let doc = get_s(item, DOC).ok_or_else(|| StoreError::Corrupt(format!("{what} {}: no doc", describe(item))))?;
    serde_json::from_str(doc).map_err(|e| StoreError::Corrupt(format!("{what} {}: {e}", describe(item))))
}

/// Whether the item's `expires_at` has passed (TTL not yet applied).
fn is_expired(item: &Item, now: i64) -> bool {
    get_n(item, EXPIRES_AT).and_then(|v| v.parse::<f64>().ok()).is_some_and(|at| at < now as f64)
}

/// Estimated size of an attribute value, never below DynamoDB's own count.
fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(v) => v.len(),
        AttributeValue::N(_) => 21,
        AttributeValue::B(v) => v.as_ref().len(),
        AttributeValue::Ss(v) => v.iter().map(|e| e.len() + 1).sum(),
        AttributeValue::Ns(v) => v.len() * 21,
        AttributeValue::Bs(v) => v.iter().map(|e| e.as_ref().len() + 1).sum(),
        AttributeValue::M(m) => 3 + m.iter().map(|(k, v)| k.len() + value_size(v) + 1).sum::<usize>(),
        AttributeValue::L(l) => 3 + l.iter().map(|v| value_size(v) + 1).sum::<usize>(),
        _ => 1,
    }
}

/// Estimated size of an item: attribute names plus values, plus one byte per attribute.
fn item_size(item: &Item) -> usize {
    item.iter().map(|(name, value)| name.len() + value_size(value) + 1).sum()
}

/// `TooLarge` when the item would not fit.
fn check_size(what: &str, item: &Item) -> Result<(), StoreError> {
    let size = item_size(item);
    if size > DYNAMODB_MAX_ITEM_BYTES {
        return Err(StoreError::TooLarge(format!(
            "{what} item {} is about {size} bytes (DynamoDB allows {DYNAMODB_MAX_ITEM_BYTES})",
            describe(item)
        )));
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Transaction actions
// ------------------------------------------------------------------------------------------

fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Unavailable { message: format!("request could not be built: {e}"), source: Some(Box::new(e)) }
}

/// Put `item`, on condition that no live item has its key.
fn put_once(table: &str, item: Item, now: i64) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .condition_expression(COND_ABSENT)
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#expires_at", EXPIRES_AT)
        .expression_attribute_values(":now", n(now))
        .build()
        .map_err(build_error)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// Put `item` unconditionally (event-log entries: deterministic keys, so rewriting is harmless).
fn put_plain(table: &str, item: Item) -> Result<TransactWriteItem, StoreError> {
    let put = Put::builder().table_name(table).set_item(Some(item)).build().map_err(build_error)?;
    Ok(TransactWriteItem::builder().put(put).build())
}

fn meta_key(query_id: &str) -> Item {
    let mut key = Item::new();
    key.insert(PK.into(), s(query_pk(query_id)));
    key.insert(SK.into(), s(SK_META));
    key
}

/// Replace every field of the query record except `completed` and `fanin`, on condition that
/// the stored version is `expected_version`.
fn update_query_action(
    table: &str,
    query: &QueryRecord,
    expected_version: u64,
) -> Result<TransactWriteItem, StoreError> {
    let next =
        expected_version.checked_add(1).ok_or_else(|| StoreError::ConditionFailed("version overflow".to_string()))?;
    let fields = query_fields(query, next)?;
    let mut sized = fields.clone();
    sized.extend(meta_key(&query.query_id));
    check_size("query", &sized)?;
    let mut update = Update::builder()
        .table_name(table)
        .set_key(Some(meta_key(&query.query_id)))
        .condition_expression("#version = :expected")
        .expression_attribute_names("#version", VERSION)
        .expression_attribute_values(":expected", n(expected_version));
    let mut sets = Vec::new();
    for (i, (name, value)) in fields.into_iter().enumerate() {
        sets.push(format!("#f{i} = :f{i}"));
        update = update
            .expression_attribute_names(format!("#f{i}"), name)
            .expression_attribute_values(format!(":f{i}"), value);
    }
    let update = update.update_expression(format!("SET {}", sets.join(", "))).build().map_err(build_error)?;
    Ok(TransactWriteItem::builder().update(update).build())
}

/// Add `slot` to the fan-in set and bump `fanin`, on condition that the query exists and
/// `fanin` is still what was read.
fn add_slot_action(
    table: &str,
    query_id: &str,
    slot: &str,
    fanin_read: Option<&str>,
) -> Result<TransactWriteItem, StoreError> {
    let next = fanin_read.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + 1;
    let mut update = Update::builder()
        .table_name(table)
        .set_key(Some(meta_key(query_id)))
        .update_expression("ADD #completed :slot SET #fanin = :next")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_names("#completed", COMPLETED)
        .expression_attribute_names("#fanin", FANIN)
        .expression_attribute_values(":slot", AttributeValue::Ss(vec![slot.to_string()]))
        .expression_attribute_values(":next", n(next));
    update = match fanin_read {
        Some(read) => update
            .condition_expression("attribute_exists(#pk) AND #fanin = :read")
            .expression_attribute_values(":read", AttributeValue::N(read.to_string())),
        None => update.condition_expression("attribute_exists(#pk) AND attribute_not_exists(#fanin)"),
    };
    Ok(TransactWriteItem::builder().update(update.build().map_err(build_error)?).build())
}

/// Event puts for a transaction: sized, one per key (a transaction may touch an item once).
fn event_actions(table: &str, events: &[Event]) -> Result<Vec<TransactWriteItem>, StoreError> {
    let mut seen = BTreeSet::new();
    let mut actions = Vec::new();
    for event in events {
        if !seen.insert((event.query_id.as_str(), event.key.as_str())) {
            continue;
        }
        let item = event_item(event)?;
        check_size("event", &item)?;
        actions.push(put_plain(table, item)?);
    }
    Ok(actions)
}

// ------------------------------------------------------------------------------------------
// The port
// ------------------------------------------------------------------------------------------

#[async_trait]
impl Store for DynamoStore {
    async fn create_query(&self, query: &QueryRecord, events: &[Event]) -> Result<(), StoreError> {
        let now = now_epoch();
        let meta = query_item(query)?;
        check_size("query", &meta)?;
        let mut actions = vec![put_once(&self.table, meta, now)?];
        let mut labels = vec!["query exists"];
        if let Some(key) = &query.idempotency_key {
            let item = idempotency_item(&query.user_id, key, &query.query_id, query.expires_at);
            check_size("idempotency key", &item)?;
            actions.push(put_once(&self.table, item, now)?);
            labels.push("idempotency key held");
        }
        actions.extend(event_actions(&self.table, events)?);
        self.transact(actions).await.map_err(|e| e.into_store_error(&labels))
    }

    async fn get_query(&self, query_id: &str) -> Result<Option<QueryRecord>, StoreError> {
        self.get_item(query_pk(query_id), SK_META).await?.as_ref().map(query_from_item).transpose()
    }

    async fn find_idempotency_key(&self, user_id: &str, key: &str) -> Result<Option<String>, StoreError> {
        let Some(item) = self.get_item(idempotency_pk(user_id, key), SK_IDEM).await? else {
            return Ok(None);
        };
        get_s(&item, QUERY_ID)
            .map(|id| Some(id.to_string()))
            .ok_or_else(|| StoreError::Corrupt(format!("idempotency key {}: no query_id", describe(&item))))
    }

    async fn update_query(
        &self,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        let mut actions = vec![update_query_action(&self.table, query, expected_version)?];
        actions.extend(event_actions(&self.table, events)?);
        self.transact(actions).await.map_err(|e| e.into_store_error(&["version moved on"]))
    }

    async fn record_handoff(&self, record: &HandoffRecord, events: &[Event]) -> Result<HandoffWrite, StoreError> {
        let handoff = handoff_item(record)?;
        check_size("handoff", &handoff)?;
        let event_puts = event_actions(&self.table, events)?;
        for attempt in 1..=FANIN_ATTEMPTS {
            let meta = self.get_item(query_pk(&record.query_id), SK_META).await?;
            let mut completed = meta.as_ref().map(completed_of).unwrap_or_default();
            let mut actions = vec![put_once(&self.table, handoff.clone(), now_epoch())?];
            if let Some(slot) = &record.slot {
                let Some(meta) = &meta else {
                    return Err(StoreError::ConditionFailed(format!("query {} not found", record.query_id)));
                };
                actions.push(add_slot_action(&self.table, &record.query_id, slot, fanin_of(meta).as_deref())?);
                completed.insert(slot.clone());
            }
            actions.extend(event_puts.iter().cloned());
            match self.transact(actions).await {
                Ok(()) => return Ok(HandoffWrite::Recorded { completed }),
                Err(e) if e.condition_failed_at(0) => return Ok(HandoffWrite::Duplicate),
                // Another handoff changed the fan-in set since the read, or is committing
                // on the same item right now: nothing was written, read again.
                Err(e) if (record.slot.is_some() && e.condition_failed_at(1)) || e.is_conflict_only() => {
                    tokio::time::sleep(jitter(attempt)).await;
                }
                Err(e) => return Err(e.into_store_error(&["handoff exists", "query not found"])),
            }
        }
        Err(StoreError::Unavailable {
            message: format!(
                "record_handoff: fan-in of query {} still contended after {FANIN_ATTEMPTS} attempts",
                record.query_id
            ),
            source: None,
        })
    }

    async fn get_handoff(&self, query_id: &str, dispatch_id: &str) -> Result<Option<HandoffRecord>, StoreError> {
        let sk = format!("{PREFIX_HANDOFF}{dispatch_id}");
        self.get_item(query_pk(query_id), &sk).await?.as_ref().map(handoff_from_item).transpose()
    }

    async fn list_handoffs(&self, query_id: &str) -> Result<Vec<HandoffRecord>, StoreError> {
        let items = self.query_prefix(query_pk(query_id), PREFIX_HANDOFF).await?;
        items.iter().map(handoff_from_item).collect()
    }

    async fn finish_query(
        &self,
        output: &OrchestratorOutput,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        let item = output_item(output, query.expires_at)?;
        check_size("output", &item)?;
        let mut actions = vec![put_once(&self.table, item, now_epoch())?];
        actions.push(update_query_action(&self.table, query, expected_version)?);
        actions.extend(event_actions(&self.table, events)?);
        self.transact(actions).await.map_err(|e| e.into_store_error(&["output exists", "version moved on"]))
    }

    async fn get_output(&self, query_id: &str) -> Result<Option<OrchestratorOutput>, StoreError> {
        self.get_item(query_pk(query_id), SK_OUT).await?.as_ref().map(output_from_item).transpose()
    }

    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError> {
        let mut seen = BTreeSet::new();
        for event in events {
            if !seen.insert((event.query_id.as_str(), event.key.as_str())) {
                continue;
            }
            // Already logged under this key: idempotent.
            self.put_if_absent("event", event_item(event)?).await?;
        }
        Ok(())
    }

    async fn list_events(&self, query_id: &str) -> Result<Vec<Event>, StoreError> {
        let items = self.query_prefix(query_pk(query_id), PREFIX_EVENT).await?;
        let mut events = items.iter().map(event_from_item).collect::<Result<Vec<_>, _>>()?;
        events.sort_by(|a, b| (a.at, &a.key).cmp(&(b.at, &b.key)));
        Ok(events)
    }

    async fn put_manifest(&self, fingerprint: &str, body: &str) -> Result<(), StoreError> {
        let mut item = Item::new();
        item.insert(PK.into(), s(format!("M#{fingerprint}")));
        item.insert(SK.into(), s(SK_MANIFEST));
        item.insert(KIND.into(), s("manifest"));
        item.insert(DOC.into(), s(body));
        // Stored before (by this deployment or another process): the same content.
        self.put_if_absent("manifest", item).await
    }

    async fn get_manifest(&self, fingerprint: &str) -> Result<Option<String>, StoreError> {
        let item = self.get_item(format!("M#{fingerprint}"), SK_MANIFEST).await?;
        Ok(item.and_then(|i| match i.get(DOC) {
            Some(AttributeValue::S(body)) => Some(body.clone()),
            _ => None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::{
        AgentHandoff, AgentResult, Citation, CitationSourceType, EntitySource, EntityType, HandoffExecution,
        HandoffResult, HandoffStatus, OutputStatus, ParsedEntity, ParsedQuery,
    };
    use crate::ports::EventKind;
    use chrono::TimeZone;

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_790_000_000 + seconds, 123_456_000).single().expect("valid time")
    }

    fn query() -> QueryRecord {
        QueryRecord {
            query_id: "9b2f0c1e-0000-4000-8000-000000000001".into(),
            user_id: "user#1".into(),
            session_id: "s-1".into(),
            roles: vec!["analyst".into()],
            idempotency_key: Some("key-1".into()),
            request_hash: "abc".into(),
            manifest_fingerprint: "fp".into(),
            status: QueryStatus::Routed,
            version: 3,
            parsed: ParsedQuery {
                query_id: "9b2f0c1e-0000-4000-8000-000000000001".into(),
                raw_query: "Why did Kisqali TRx drop in the Northeast?".into(),
                intent: "causal_analysis".into(),
                entities: vec![ParsedEntity {
                    entity_type: EntityType::Brand,
                    value: "Kisqali".into(),
                    confidence: 0.9,
                    source: EntitySource::Exact,
                }],
                confidence: 0.8,
                ambiguity_flag: false,
                context: None,
                timestamp: at(0),
            },
            warnings: vec!["w".into()],
            scope: None,
            plan: None,
            completed: ["d-1".to_string(), "d-2".to_string()].into_iter().collect(),
            accepted_at: at(1),
            deadline_at: Some(at(60)),
            synth_claimed_at: None,
            outcome: None,
            expires_at: 1_790_086_400,
        }
    }

    fn handoff(slot: Option<&str>) -> HandoffRecord {
        HandoffRecord {
            query_id: "q-1".into(),
            slot: slot.map(str::to_string),
            attempts: 2,
            fallback_for: None,
            engine_caveats: vec!["slow".into()],
            handoff: AgentHandoff {
                dispatch_id: "d-1".into(),
                agent_id: "causal_impact".into(),
                agent_tier: 2,
                execution: HandoffExecution {
                    status: HandoffStatus::Success,
                    started_at: at(2),
                    completed_at: at(3),
                    latency_ms: 1_000,
                },
                result: HandoffResult {
                    primary_output: serde_json::json!({"effect": -0.12}),
                    confidence: 0.83,
                    evidence: vec![],
                    caveats: vec![],
                },
                artifacts: Default::default(),
                errors: Default::default(),
                metadata: Default::default(),
            },
            expires_at: 1_790_086_400,
        }
    }

    fn event(key: &str, seconds: i64) -> Event {
        Event {
            query_id: "q-1".into(),
            key: key.into(),
            at: at(seconds),
            kind: EventKind::Dispatch,
            detail: serde_json::json!({"dispatch_id": "d-1"}),
            expires_at: 1_790_086_400,
        }
    }

    fn output() -> OrchestratorOutput {
        OrchestratorOutput {
            query_id: "q-1".into(),
            status: OutputStatus::Partial,
            response_text: "TRx fell 12%.".into(),
            response_confidence: 0.7,
            agents_dispatched: vec!["causal_impact".into()],
            agent_results: vec![AgentResult {
                agent_id: "causal_impact".into(),
                agent_tier: 2,
                status: HandoffStatus::Success,
                result: serde_json::json!({"effect": -0.12}),
                confidence: 0.83,
                latency_ms: 1_000,
                error: None,
                attempts: 1,
                dispatch_id: "d-1".into(),
                fallback_for: None,
            }],
            citations: vec![Citation {
                source_type: CitationSourceType::AgentActivity,
                source_id: "d-1".into(),
                relevance: 0.9,
                text: None,
                agent_id: None,
            }],
            visualizations: vec![],
            follow_up_suggestions: vec!["And in the West?".into()],
            total_latency_ms: 4_000,
            timestamp: at(4),
            intent: "causal_analysis".into(),
            final_reason: None,
            caveats: vec![],
            warnings: vec![],
            error: None,
            qc_report: None,
            orchestration: Some(serde_json::json!({"critique": {"accepted": true}})),
        }
    }

    #[test]
    fn a_query_record_survives_the_round_trip_through_its_item() {
        let q = query();
        let item = query_item(&q).expect("encodes");
        assert_eq!(get_s(&item, PK), Some("Q#9b2f0c1e-0000-4000-8000-000000000001"));
        assert_eq!(get_s(&item, SK), Some("META"));
        assert_eq!(get_s(&item, STATUS), Some("routed"));
        assert_eq!(get_n(&item, VERSION), Some("3"));
        assert_eq!(get_n(&item, FANIN), Some("0"));
        assert_eq!(get_n(&item, EXPIRES_AT), Some("1790086400"));
        assert_eq!(get_s(&item, GSI1PK), Some("U#user#1"));
        assert_eq!(get_s(&item, GSI1SK), Some("2026-09-21T14:13:21.123456Z"));
        assert!(matches!(item.get(COMPLETED), Some(AttributeValue::Ss(v)) if v.len() == 2));
        assert!(!get_s(&item, DOC).expect("doc").contains("\"completed\""), "the set lives only in its attribute");
        assert_eq!(query_from_item(&item).expect("decodes"), q);
    }

    #[test]
    fn typed_attributes_win_over_the_doc_on_read() {
        let q = query();
        let mut item = query_item(&q).expect("encodes");
        item.insert(STATUS.into(), s("done"));
        item.insert(VERSION.into(), n(9));
        item.insert(COMPLETED.into(), AttributeValue::Ss(vec!["d-9".into()]));
        let read = query_from_item(&item).expect("decodes");
        assert_eq!(read.status, QueryStatus::Done);
        assert_eq!(read.version, 9);
        assert_eq!(read.completed, ["d-9".to_string()].into_iter().collect());
    }

    #[test]
    fn an_empty_fan_in_set_is_left_out_because_dynamodb_has_no_empty_sets() {
        let mut q = query();
        q.completed.clear();
        let item = query_item(&q).expect("encodes");
        assert!(!item.contains_key(COMPLETED));
        assert_eq!(query_from_item(&item).expect("decodes").completed, BTreeSet::new());
    }

    #[test]
    fn update_fields_carry_the_next_version_and_never_the_fan_in_set() {
        let fields = query_fields(&query(), 4).expect("encodes");
        assert_eq!(get_n(&fields, VERSION), Some("4"));
        assert!(!fields.contains_key(COMPLETED) && !fields.contains_key(FANIN) && !fields.contains_key(PK));
        let doc: serde_json::Value = serde_json::from_str(get_s(&fields, DOC).expect("doc")).expect("json");
        assert_eq!(doc["version"], 4);
    }

    #[test]
    fn handoff_event_and_output_records_survive_the_round_trip() {
        for record in [handoff(Some("d-1")), handoff(None)] {
            let item = handoff_item(&record).expect("encodes");
            assert_eq!(get_s(&item, SK), Some("H#d-1"));
            assert_eq!(get_s(&item, SLOT), record.slot.as_deref());
            assert_eq!(get_s(&item, STATUS), Some("success"));
            assert_eq!(handoff_from_item(&item).expect("decodes"), record);
        }
        let e = event("0003-dispatch-d-1", 5);
        let item = event_item(&e).expect("encodes");
        assert_eq!(get_s(&item, SK), Some("E#0003-dispatch-d-1"));
        assert_eq!(event_from_item(&item).expect("decodes"), e);
        let o = output();
        let item = output_item(&o, 42).expect("encodes");
        assert_eq!(
            (get_s(&item, SK), get_s(&item, STATUS), get_n(&item, EXPIRES_AT)),
            (Some("OUT"), Some("partial"), Some("42"))
        );
        assert_eq!(output_from_item(&item).expect("decodes"), o);
    }

    #[test]
    fn idempotency_keys_cannot_collide_across_users() {
        assert_eq!(idempotency_pk("u1", "k"), "IDEM#u1#k");
        assert_ne!(idempotency_pk("a#b", "c"), idempotency_pk("a", "b#c"));
        assert_ne!(idempotency_pk("a%23b", "c"), idempotency_pk("a#b", "c"));
        let item = idempotency_item("u1", "k", "q-1", 7);
        assert_eq!((get_s(&item, SK), get_s(&item, QUERY_ID)), (Some("IDEM"), Some("q-1")));
    }

    #[test]
    fn an_item_without_a_readable_doc_is_corrupt() {
        let mut item = event_item(&event("k", 0)).expect("encodes");
        item.insert(DOC.into(), s("{not json"));
        assert!(matches!(event_from_item(&item), Err(StoreError::Corrupt(_))));
        item.remove(DOC);
        assert!(matches!(event_from_item(&item), Err(StoreError::Corrupt(_))));
        let mut item = query_item(&query()).expect("encodes");
        item.insert(STATUS.into(), s("lost"));
        assert!(matches!(query_from_item(&item), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn expiry_is_read_from_the_ttl_attribute() {
        let item = event_item(&event("k", 0)).expect("encodes");
        assert!(!is_expired(&item, 1_790_086_399));
        assert!(is_expired(&item, 1_790_086_401));
    }

    #[test]
    fn size_is_estimated_high_and_oversized_items_are_refused() {
        let mut q = query();
        q.parsed.raw_query = "x".repeat(DYNAMODB_MAX_ITEM_BYTES);
        let item = query_item(&q).expect("encodes");
        assert!(item_size(&item) > DYNAMODB_MAX_ITEM_BYTES);
        match check_size("query", &item) {
            Err(StoreError::TooLarge(message)) => assert!(message.contains("query item Q#"), "{message}"),
            other => panic!("expected TooLarge, got {other:?}"),
        }
        let small = event_item(&event("k", 0)).expect("encodes");
        let exact: usize = small.iter().map(|(k, v)| k.len() + value_size(v)).sum();
        assert!(item_size(&small) >= exact);
        assert!(check_size("event", &small).is_ok());
    }

    #[test]
    fn cancellation_reasons_name_the_condition_that_failed() {
        let reason = |code: &str| Reason { code: code.into(), message: String::new() };
        let e = TxError::Cancelled(vec![reason("None"), reason("ConditionalCheckFailed"), reason("None")]);
        assert!(e.condition_failed_at(1) && !e.condition_failed_at(0));
        match e.into_store_error(&["query exists", "idempotency key held"]) {
            StoreError::ConditionFailed(label) => assert_eq!(label, "idempotency key held"),
            other => panic!("expected ConditionFailed, got {other:?}"),
        }
        assert!(TxError::Cancelled(vec![reason("None"), reason("TransactionConflict")]).is_conflict_only());
        assert!(!TxError::Cancelled(vec![reason("ConditionalCheckFailed"), reason("TransactionConflict")])
            .is_conflict_only());
        let conflict = TxError::Cancelled(vec![reason("TransactionConflict")]).into_store_error(&[]);
        assert!(conflict.is_retryable());
        let size = TxError::Cancelled(vec![Reason {
            code: "ValidationError".into(),
            message: "Item size to update has exceeded the maximum allowed size".into(),
        }]);
        assert!(matches!(size.into_store_error(&[]), StoreError::TooLarge(_)));
    }
}
