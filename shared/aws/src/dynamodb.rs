//! The [`Store`] on DynamoDB: one table, one partition per query.
//!
//! # Item layout
//!
//! | item | `pk` | `sk` | typed attributes (used in conditions, keys, TTL) | compressed documents (B) |
//! |---|---|---|---|---|
//! | query | `Q#<query_id>` | `META` | `status` S, `version` N, `gsi1pk` = `U#<user_id>`, `gsi1sk` = accepted_at (RFC 3339) (both written once, at creation), `expires_at` N; once the query is done, `gsi2pk` = `SIG#<day>`, `gsi2sk` = `<recorded_at>#<query_id>`, `sig` B (the exported training signal, compressed like a document; plain JSON S in items written before) for the `by_signal_day` index | `doc`: [`QueryRecord`] without `completed`; `ev_<n>`: the events written with version `n`; `out`: the [`OrchestratorOutput`] once finished |
//! | fan-in | `Q#<query_id>` | `META#FANIN` | `completed` SS, `ids` SS (dispatches arrived), `arrivals` L of M (`d` dispatch, `s` slot, in the order applied), `expires_at` N | — |
//! | handoff | `Q#<query_id>` | `H#<dispatch_id>` | `slot` S (when it fills one), `status` S, `expires_at` N | `doc`: [`HandoffRecord`]; `ev`: its events |
//! | event | `Q#<query_id>` | `E#<event key>` | `at` S (RFC 3339), `expires_at` N | `doc` S (plain JSON): [`Event`] — only events with no record write ([`Store::append_events`]) |
//! | idempotency key | `IDEM#<user_id>#<key>` | `IDEM` | `query_id` S, `expires_at` N | — |
//! | manifest version | `M#<fingerprint>` | `MANIFEST` | — (no TTL) | `doc` S: the manifest's canonical JSON |
//! | session | `S#<session_id>#<user_id>` | `SESSION` | `version` N, `expires_at` N, `kind` S | `doc`: [`SessionRecord`] (latest turns, summary, notes) |
//!
//! Items written once also carry `kind` S (`handoff`, `event`, `idempotency`, `manifest`) for
//! people reading the table; the query record and the fan-in, rewritten on every step, leave it
//! out (their sort keys say what they are). A compressed document is the record's JSON, deflated
//! (RFC 1951) against a fixed dictionary of the records' field names and tagged with the
//! dictionary's version (`dynamodb_packing.rs`); untagged deflate written before the dictionary,
//! and `doc` written as a plain string (S), are read as well. Events inside a record's
//! item are stored without their query id and expiry, which the item holds. In the idempotency
//! key's `pk`, `%` and `#` inside the user id and the key are written `%25` and `%23`, so
//! `(a#b, c)` and `(a, b#c)` cannot share an item; the session's `pk` escapes both parts the
//! same way, so one caller's session id never names another caller's session. The `by_user`
//! index projects keys only; the `by_signal_day` index projects `sig` and `expires_at` (see
//! `dynamodb_signals.rs`).
//!
//! # Why this shape: what a query costs
//!
//! DynamoDB bills a write by the size of the whole item in 1 KB units (an `UpdateItem` by the
//! larger of the item before and after), a transaction at twice that, and a strongly consistent
//! read by 4 KB units. The layout spends as few of those units as the rules allow:
//!
//! - **One conditional single-item write per step, no transactions.** The engine's
//!   correctness rests on conditional writes (docs/architecture.md#rules, rules 2 and 3):
//!   `attribute_not_exists(pk)` for records written once, `version = :expected` for the query
//!   record. Each store call is one request on one item that carries its own condition; only
//!   a query with an idempotency key, whose key item must be claimed with it, is a transaction.
//! - **Events live in the record write that causes them.** A step's event-log entries are an
//!   attribute of the item its write changes: `ev_<n>` on the query record for the write that
//!   made version `n` (`create_query` is version 0; a stale version fails the condition, so its
//!   events are never written), `ev` on the handoff item. A duplicate delivery that loses its
//!   condition therefore writes no event, as before, and the log costs no item of its own.
//!   [`Store::list_events`] reads the partition and unpacks them.
//! - **The output is part of the query record's last write.** [`Store::finish_query`] is one
//!   `UpdateItem` on `META` conditional on the version *and* on `out` not existing: the output
//!   is written once, together with the final status, with no second item to keep in step.
//! - **Fan-in is a small item of its own, updated with `ADD` and `ReturnValues`.** Each handoff
//!   that fills a slot sends one `UpdateItem` to `META#FANIN`: `ADD` the slot to `completed` and
//!   the dispatch to `ids`, append `{d, s}` to `arrivals`, on condition that the dispatch is not
//!   in `ids` yet; the item comes back with the write (`ALL_NEW`). The writer's set is the slots
//!   of the arrivals up to its own ([`super::fanin`]), so exactly one writer sees the stage
//!   complete — also when its request is retried after a lost answer: the retry fails the
//!   condition, the item comes back with the failure (`ALL_OLD`), and the arrivals say the same
//!   thing as the first answer would have. The item stays a few hundred bytes, so each fan-in
//!   write is one unit, however large the query record grows. No read comes first.
//! - **The handoff is stored before its slot is added.** `record_handoff` puts the handoff item
//!   (with its event) first, then updates the fan-in. A crash in between leaves the handoff
//!   stored and its slot missing; the redelivered job finds the handoff (`Duplicate`) and adds
//!   the slot again, which is idempotent by dispatch, so the slot is never lost.
//! - **Documents are compressed, against a dictionary.** Records are JSON with much repetition
//!   (a plan repeats the query in every dispatch); deflated they take a third to a quarter of
//!   the bytes, and the bytes are what every write and read is billed by. Each document is
//!   small, so plain deflate still spends most of its output on the first occurrence of every
//!   field name and on each stream's own code tables; a preset dictionary (a sample of every
//!   record's JSON, `dynamodb_dictionary.txt`) halves it again. The exported signal `sig` is
//!   packed the same way (the index projects it as it is). At k = 3 (`bench requests`) the
//!   query item after routing is about 900 B instead of 1,687 B, so the router's and the
//!   claim's updates bill 1 WRU each instead of 2, and the finished item is about 1,490 B
//!   (2 WRU) instead of 3,042 B (3 WRU). The routed item is the tight one: by estimate, a
//!   question about 170 characters longer than the benchmark's takes it past 1 KB.
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
//! | `create_query` | 1 `PutItem` (1 `TransactWriteItems` with an idempotency key) |
//! | `update_query`, `finish_query` | 1 `UpdateItem` |
//! | `record_handoff` | 1 `PutItem`, + 1 `UpdateItem` when it fills a slot (+ 1 `GetItem` when it fills none) |
//! | `get_query` | 1 `Query` (`META` and `META#FANIN`) |
//! | `get_handoff`, `get_output`, `find_idempotency_key`, `get_manifest` | 1 `GetItem` |
//! | `list_handoffs`, `list_events` | 1 `Query` per page of 1 MB |
//! | `append_events` | 1 conditional `PutItem` per event |
//!
//! A transaction cancelled only by `TransactionConflict` is sent at most three times in all;
//! past that the call fails with the retryable [`StoreError::Unavailable`]. Every request sent
//! is counted in [`DynamoStore::counts`], with the read and write units it is billed.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::fanin::{self, Arrival};
use switchyard_engine::ports::{
    Event, HandoffRecord, HandoffWrite, QueryRecord, QueryStatus, SessionRecord, SignalPage, SignalPageRequest, Store,
    StoreError,
};
use switchyard_model::contracts::OrchestratorOutput;
use switchyard_model::limits::{DYNAMODB_MAX_ITEM_BYTES, DYNAMODB_MAX_TRANSACT_ITEMS};

/// A DynamoDB item.
type Item = HashMap<String, AttributeValue>;

mod packing;
mod signals;
pub use signals::INDEX_BY_SIGNAL_DAY;

/// How often a transaction cancelled only by `TransactionConflict` is sent.
const CONFLICT_ATTEMPTS: u32 = 3;
/// A write unit: 1 KB of item.
const WRITE_UNIT_BYTES: usize = 1024;
/// A strongly consistent read unit: 4 KB.
const READ_UNIT_BYTES: usize = 4096;
/// Largest document a compressed attribute may inflate to (the item limit, with room).
const MAX_INFLATED_BYTES: usize = 16 * DYNAMODB_MAX_ITEM_BYTES;

const PK: &str = "pk";
const SK: &str = "sk";
const DOC: &str = "doc";
const KIND: &str = "kind";
const STATUS: &str = "status";
const VERSION: &str = "version";
const COMPLETED: &str = "completed";
const IDS: &str = "ids";
const ARRIVALS: &str = "arrivals";
const EXPIRES_AT: &str = "expires_at";
const GSI1PK: &str = "gsi1pk";
const GSI1SK: &str = "gsi1sk";
/// The per-user index over `gsi1pk` / `gsi1sk` (see [`switchyard_model::topology`]).
const INDEX_BY_USER: &str = "by_user";
const SLOT: &str = "slot";
const AT: &str = "at";
const QUERY_ID: &str = "query_id";
const OUT: &str = "out";
/// The events of a handoff item.
const EV: &str = "ev";
/// Prefix of the query record's event attributes (`ev_<version>`).
const EV_PREFIX: &str = "ev_";

const SK_META: &str = "META";
const SK_FANIN: &str = "META#FANIN";
const SK_IDEM: &str = "IDEM";
const SK_MANIFEST: &str = "MANIFEST";
const SK_SESSION: &str = "SESSION";
const PREFIX_HANDOFF: &str = "H#";
const PREFIX_EVENT: &str = "E#";

/// Condition of a write-once item: absent, or present but expired.
const COND_ABSENT: &str = "attribute_not_exists(#pk) OR #expires_at < :now";

/// Requests a [`DynamoStore`] has sent since it was built, and the units they are billed.
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
    /// Write request units billed (on-demand): 1 per KB of the item written (an update: of the
    /// item after it), twice that in a transaction, plus the `by_user` index's write when a
    /// query record is created and the `by_signal_day` index's write when a finished signal is
    /// written (the final write, and feedback); a write whose condition fails is billed too.
    pub write_units: u64,
    /// Read request units billed: 1 per 4 KB read strongly consistently (a query: of all the
    /// items of the page together), at least 1 per request.
    pub read_units: u64,
}

#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    transact_writes: AtomicU64,
    items_written: AtomicU64,
    write_units: AtomicU64,
    read_units: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Units of `bytes` at `unit` bytes each, at least one.
fn units(bytes: usize, unit: usize) -> u64 {
    bytes.div_ceil(unit).max(1) as u64
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
            write_units: c.write_units.load(Ordering::Relaxed),
            read_units: c.read_units.load(Ordering::Relaxed),
        }
    }

    // --------------------------------------------------------------------------------------
    // Requests
    // --------------------------------------------------------------------------------------

    /// One conditional `PutItem` of a write-once item (absent or expired). `Ok(false)` when a
    /// live item has the key (nothing written).
    async fn put_once(&self, kind: &str, item: Item) -> Result<bool, StoreError> {
        check_size(kind, &item)?;
        bump(&self.counters.writes, 1);
        bump(&self.counters.write_units, units(billed_size(&item), WRITE_UNIT_BYTES));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(COND_ABSENT)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_values(":now", n(now_epoch()))
            .send()
            .await;
        match result.map_err(|e| sdk_error("PutItem", e)) {
            Ok(_) => {
                bump(&self.counters.items_written, 1);
                Ok(true)
            }
            Err(StoreError::ConditionFailed(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One conditional `PutItem` that writes `item` unless an item with its key exists (live
    /// or not); an existing item is not an error (the write is idempotent by key).
    async fn put_if_absent(&self, kind: &str, item: Item) -> Result<(), StoreError> {
        check_size(kind, &item)?;
        bump(&self.counters.writes, 1);
        bump(&self.counters.write_units, units(billed_size(&item), WRITE_UNIT_BYTES));
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
        bump(&self.counters.read_units, units(out.item.as_ref().map_or(0, billed_size), READ_UNIT_BYTES));
        Ok(out.item.filter(|item| !is_expired(item, now_epoch())))
    }

    /// Every live item of partition `pk` whose sort key starts with `prefix` (all of them for
    /// an empty prefix), all pages, strongly consistent, in sort-key order.
    async fn query_prefix(&self, pk: String, prefix: &str) -> Result<Vec<Item>, StoreError> {
        let now = now_epoch();
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            bump(&self.counters.reads, 1);
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", AttributeValue::S(pk.clone()))
                .consistent_read(true)
                .set_exclusive_start_key(start.take());
            request = if prefix.is_empty() {
                request.key_condition_expression("#pk = :pk")
            } else {
                request
                    .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                    .expression_attribute_names("#sk", SK)
                    .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_string()))
            };
            let out = request.send().await.map_err(|e| sdk_error("Query", e))?;
            let page = out.items.unwrap_or_default();
            bump(&self.counters.read_units, units(page.iter().map(billed_size).sum(), READ_UNIT_BYTES));
            items.extend(page.into_iter().filter(|item| !is_expired(item, now)));
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// One `UpdateItem` on the query record: set `fields`, on `condition`, returning the item
    /// after the write (to bill it by its size).
    async fn update_meta(
        &self,
        query_id: &str,
        fields: Item,
        condition: &str,
        values: Vec<(&str, AttributeValue)>,
        names: Vec<(&str, &str)>,
        label: &str,
    ) -> Result<(), StoreError> {
        let mut sized = fields.clone();
        sized.extend(meta_key(query_id));
        check_size("query", &sized)?;
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(meta_key(query_id)))
            .condition_expression(condition)
            .return_values(ReturnValue::AllNew);
        for (name, value) in values {
            update = update.expression_attribute_values(name, value);
        }
        for (placeholder, name) in names {
            update = update.expression_attribute_names(placeholder, name);
        }
        let mut sets = Vec::new();
        for (i, (name, value)) in fields.into_iter().enumerate() {
            sets.push(format!("#f{i} = :f{i}"));
            update = update
                .expression_attribute_names(format!("#f{i}"), name)
                .expression_attribute_values(format!(":f{i}"), value);
        }
        bump(&self.counters.writes, 1);
        let result = update.update_expression(format!("SET {}", sets.join(", "))).send().await;
        match result {
            Ok(out) => {
                bump(&self.counters.items_written, 1);
                let size = out.attributes.as_ref().map_or_else(|| billed_size(&sized), billed_size);
                bump(&self.counters.write_units, units(size, WRITE_UNIT_BYTES));
                Ok(())
            }
            Err(e) => {
                bump(&self.counters.write_units, units(billed_size(&sized), WRITE_UNIT_BYTES));
                match sdk_error("UpdateItem", e) {
                    StoreError::ConditionFailed(_) => Err(StoreError::ConditionFailed(label.to_string())),
                    other => Err(other),
                }
            }
        }
    }

    /// Add a handoff's slot to the fan-in (idempotent by dispatch); the set right after this
    /// dispatch's arrival, whichever request applied it. [`Store::record_handoff`] sends it
    /// after storing the handoff; it is public so that tests can send it again, as the SDK
    /// does when the first answer is lost.
    pub async fn arrive(
        &self,
        query_id: &str,
        dispatch_id: &str,
        slot: &str,
        expires_at: i64,
    ) -> Result<BTreeSet<String>, StoreError> {
        let mut arrival = HashMap::new();
        arrival.insert("d".to_string(), s(dispatch_id));
        arrival.insert("s".to_string(), s(slot));
        bump(&self.counters.writes, 1);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(query_pk(query_id)))
            .key(SK, s(SK_FANIN))
            .update_expression(
                "ADD #completed :slot, #ids :dispatch \
                 SET #arrivals = list_append(if_not_exists(#arrivals, :none), :arrival), \
                 #expires_at = if_not_exists(#expires_at, :expires_at)",
            )
            .condition_expression("NOT contains(#ids, :dispatch_id)")
            .expression_attribute_names("#completed", COMPLETED)
            .expression_attribute_names("#ids", IDS)
            .expression_attribute_names("#arrivals", ARRIVALS)
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_values(":slot", AttributeValue::Ss(vec![slot.to_string()]))
            .expression_attribute_values(":dispatch", AttributeValue::Ss(vec![dispatch_id.to_string()]))
            .expression_attribute_values(":dispatch_id", s(dispatch_id))
            .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
            .expression_attribute_values(":arrival", AttributeValue::L(vec![AttributeValue::M(arrival)]))
            .expression_attribute_values(":expires_at", n(expires_at))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let item = match result {
            Ok(out) => {
                bump(&self.counters.items_written, 1);
                out.attributes
            }
            Err(err) => match err.as_service_error() {
                // Arrived before: a retry whose first answer was lost, or a redelivered job.
                Some(UpdateItemError::ConditionalCheckFailedException(c)) => c.item().cloned(),
                _ => return Err(sdk_error("UpdateItem", err)),
            },
        };
        let item = match item {
            Some(item) => item,
            None => self.get_item(query_pk(query_id), SK_FANIN).await?.unwrap_or_default(),
        };
        bump(&self.counters.write_units, units(billed_size(&item), WRITE_UNIT_BYTES));
        let arrivals = arrivals_of(&item)?;
        fanin::completed_through(&arrivals, dispatch_id).ok_or_else(|| {
            StoreError::Corrupt(format!("fan-in of query {query_id}: dispatch {dispatch_id} missing after its arrival"))
        })
    }

    /// One `TransactWriteItems`, sent again while it is cancelled only by transaction
    /// conflicts. A cancellation for any other reason comes back as its reasons, one per
    /// action, for the caller to interpret. `units` is what one attempt is billed.
    async fn transact(&self, actions: Vec<TransactWriteItem>, units: u64) -> Result<(), TxError> {
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
            bump(&self.counters.write_units, units);
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
/// The query record's fields at the version after `expected_version`, with the events the
/// write carries packed into that version's event attribute.
fn record_fields(query: &QueryRecord, expected_version: u64, events: &[Event]) -> Result<Item, StoreError> {
    let next = next_version(expected_version)?;
    let mut fields = query_fields(query, next)?;
    let events = unique_events(events);
    if !events.is_empty() {
        fields.insert(events_attribute(next), packed_events(&events, query.expires_at)?);
    }
    Ok(fields)
}

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

/// `S#<session_id>#<user_id>` with `%` and `#` escaped in both parts.
fn session_pk(user_id: &str, session_id: &str) -> String {
    fn escape(part: &str) -> String {
        part.replace('%', "%25").replace('#', "%23")
    }
    format!("S#{}#{}", escape(session_id), escape(user_id))
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

/// A record's JSON, deflated, as a binary attribute.
fn packed<T: serde::Serialize + ?Sized>(what: &str, record: &T) -> Result<AttributeValue, StoreError> {
    let json = serde_json::to_vec(record).map_err(|e| StoreError::Corrupt(format!("{what} cannot be encoded: {e}")))?;
    // The limit holds for the record itself, not only for its compressed form: a record that
    // DynamoDB could not hold uncompressed is refused here as in the memory store.
    if json.len() > DYNAMODB_MAX_ITEM_BYTES {
        return Err(StoreError::TooLarge(format!(
            "{what} is {} bytes of JSON (DynamoDB allows {DYNAMODB_MAX_ITEM_BYTES} per item)",
            json.len()
        )));
    }
    Ok(AttributeValue::B(Blob::new(packing::pack(&json))))
}

/// A document attribute: deflated JSON (B) or plain JSON (S).
fn unpack<T: serde::de::DeserializeOwned>(what: &str, item: &Item, name: &str) -> Result<Option<T>, StoreError> {
    let corrupt = |e: String| StoreError::Corrupt(format!("{what} {}: {name}: {e}", describe(item)));
    match item.get(name) {
        None => Ok(None),
        Some(AttributeValue::S(json)) => serde_json::from_str(json).map(Some).map_err(|e| corrupt(e.to_string())),
        Some(AttributeValue::B(blob)) => {
            let json = if packing::is_tagged(blob.as_ref()) {
                packing::unpack(blob.as_ref(), MAX_INFLATED_BYTES)
                    .map_err(|e| corrupt(format!("cannot be inflated: {e}")))?
            } else {
                // Written before the dictionary: plain raw deflate.
                miniz_oxide::inflate::decompress_to_vec_with_limit(blob.as_ref(), MAX_INFLATED_BYTES)
                    .map_err(|e| corrupt(format!("cannot be inflated: {e:?}")))?
            };
            serde_json::from_slice(&json).map(Some).map_err(|e| corrupt(e.to_string()))
        }
        Some(_) => Err(corrupt("neither a string nor binary".into())),
    }
}

/// The document of an item, which must have one.
fn from_doc<T: serde::de::DeserializeOwned>(what: &str, item: &Item) -> Result<T, StoreError> {
    unpack(what, item, DOC)?.ok_or_else(|| StoreError::Corrupt(format!("{what} {}: no doc", describe(item))))
}

/// The attributes of a query record that `update_query` replaces: everything except the
/// keys, the events and the output. `version` is the version to store.
fn query_fields(query: &QueryRecord, version: u64) -> Result<Item, StoreError> {
    let mut doc = to_doc("query", query)?;
    if let Some(fields) = doc.as_object_mut() {
        fields.remove(COMPLETED);
        fields.insert(VERSION.to_string(), serde_json::Value::from(version));
    }
    let mut item = Item::new();
    item.insert(DOC.into(), packed("query", &doc)?);
    item.insert(STATUS.into(), s(status_name(query.status)));
    item.insert(VERSION.into(), n(version));
    item.insert(EXPIRES_AT.into(), n(query.expires_at));
    item.extend(signals::signal_fields(query)?);
    Ok(item)
}

/// `ev_<version>`: the events written with the query record's version `version`.
fn events_attribute(version: u64) -> String {
    format!("{EV_PREFIX}{version}")
}

/// Events for one write, one per key (the first).
fn unique_events(events: &[Event]) -> Vec<&Event> {
    let mut seen = BTreeSet::new();
    events.iter().filter(|e| seen.insert((e.query_id.as_str(), e.key.as_str()))).collect()
}

/// An event as stored inside a record's item: without the query id and the expiry, which the
/// item holds (its `pk` and `expires_at`).
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredEvent {
    key: String,
    at: DateTime<Utc>,
    kind: switchyard_engine::ports::EventKind,
    #[serde(default)]
    detail: std::sync::Arc<switchyard_engine::ports::Detail>,
    /// Only when it differs from the item's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

/// The events of one write, compressed, for an attribute of the item they belong to.
fn packed_events(events: &[&Event], item_expires_at: i64) -> Result<AttributeValue, StoreError> {
    let stored: Vec<StoredEvent> = events
        .iter()
        .map(|e| StoredEvent {
            key: e.key.clone(),
            at: e.at,
            kind: e.kind,
            detail: e.detail.clone(),
            expires_at: (e.expires_at != item_expires_at).then_some(e.expires_at),
        })
        .collect();
    packed("events", &stored)
}

/// The whole query item as `create_query` writes it, with its first events.
fn query_item(query: &QueryRecord, events: &[Event]) -> Result<Item, StoreError> {
    let mut item = query_fields(query, query.version)?;
    item.insert(PK.into(), s(query_pk(&query.query_id)));
    item.insert(SK.into(), s(SK_META));
    // The index keys never change (user and acceptance time), so updates leave them, and the
    // index, alone.
    item.insert(GSI1PK.into(), s(format!("U#{}", query.user_id)));
    item.insert(GSI1SK.into(), s(rfc3339(&query.accepted_at)));
    let events = unique_events(events);
    if !events.is_empty() {
        item.insert(events_attribute(query.version), packed_events(&events, query.expires_at)?);
    }
    Ok(item)
}

/// The query record from its `META` item and, when present, its fan-in item.
fn query_from_items(meta: &Item, fan_in: Option<&Item>) -> Result<QueryRecord, StoreError> {
    let mut query: QueryRecord = from_doc("query", meta)?;
    if let Some(status) = get_s(meta, STATUS) {
        query.status = parse_status(status)
            .ok_or_else(|| StoreError::Corrupt(format!("query {}: unknown status {status:?}", query.query_id)))?;
    }
    if let Some(version) = get_n(meta, VERSION) {
        query.version = version
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("query {}: version {version:?}", query.query_id)))?;
    }
    query.completed = match fan_in {
        Some(item) => fanin::completed(&arrivals_of(item)?),
        None => BTreeSet::new(),
    };
    Ok(query)
}

/// The arrivals of a fan-in item, in the order they were applied.
fn arrivals_of(item: &Item) -> Result<Vec<Arrival>, StoreError> {
    let Some(list) = item.get(ARRIVALS) else { return Ok(Vec::new()) };
    let AttributeValue::L(list) = list else {
        return Err(StoreError::Corrupt(format!("fan-in {}: arrivals is not a list", describe(item))));
    };
    list.iter()
        .map(|entry| match entry {
            AttributeValue::M(m) => match (get_s(m, "d"), get_s(m, "s")) {
                (Some(d), Some(slot)) => Ok(Arrival { dispatch_id: d.to_string(), slot: slot.to_string() }),
                _ => Err(StoreError::Corrupt(format!("fan-in {}: an arrival without d or s", describe(item)))),
            },
            _ => Err(StoreError::Corrupt(format!("fan-in {}: an arrival is not a map", describe(item)))),
        })
        .collect()
}

fn handoff_item(record: &HandoffRecord, events: &[Event]) -> Result<Item, StoreError> {
    let mut item = Item::new();
    item.insert(PK.into(), s(query_pk(&record.query_id)));
    item.insert(SK.into(), s(format!("{PREFIX_HANDOFF}{}", record.handoff.dispatch_id)));
    item.insert(KIND.into(), s("handoff"));
    item.insert(DOC.into(), packed("handoff", record)?);
    let events = unique_events(events);
    if !events.is_empty() {
        item.insert(EV.into(), packed_events(&events, record.expires_at)?);
    }
    if let Some(slot) = &record.slot {
        item.insert(SLOT.into(), s(slot.clone()));
    }
    if let Some(status) = to_doc("status", &record.handoff.execution.status)?.as_str() {
        item.insert(STATUS.into(), s(status));
    }
    item.insert(EXPIRES_AT.into(), n(record.expires_at));
    Ok(item)
}

fn handoff_from_item(item: &Item) -> Result<HandoffRecord, StoreError> {
    from_doc("handoff", item)
}

fn event_item(event: &Event) -> Result<Item, StoreError> {
    let doc = serde_json::to_string(event).map_err(|e| StoreError::Corrupt(format!("event cannot be encoded: {e}")))?;
    let mut item = Item::new();
    item.insert(PK.into(), s(query_pk(&event.query_id)));
    item.insert(SK.into(), s(format!("{PREFIX_EVENT}{}", event.key)));
    item.insert(KIND.into(), s("event"));
    item.insert(DOC.into(), s(doc));
    item.insert(AT.into(), s(rfc3339(&event.at)));
    item.insert(EXPIRES_AT.into(), n(event.expires_at));
    Ok(item)
}

fn event_from_item(item: &Item) -> Result<Event, StoreError> {
    from_doc("event", item)
}

/// Every event an item of the query's partition carries: its `ev_<n>` attributes (query
/// record), `ev` (handoff) or itself (event item).
fn events_of(item: &Item) -> Result<Vec<Event>, StoreError> {
    let sk = get_s(item, SK).unwrap_or_default();
    if sk.starts_with(PREFIX_EVENT) {
        return Ok(vec![event_from_item(item)?]);
    }
    let mut names: Vec<&String> = item.keys().filter(|k| k.starts_with(EV_PREFIX) || k.as_str() == EV).collect();
    names.sort();
    let query_id = get_s(item, PK).and_then(|pk| pk.strip_prefix("Q#")).unwrap_or_default();
    let expires_at = get_n(item, EXPIRES_AT).and_then(|v| v.parse::<i64>().ok()).unwrap_or(i64::MAX);
    let mut events = Vec::new();
    for name in names {
        for e in unpack::<Vec<StoredEvent>>("events", item, name)?.unwrap_or_default() {
            events.push(Event {
                query_id: query_id.to_string(),
                key: e.key,
                at: e.at,
                kind: e.kind,
                detail: e.detail,
                expires_at: e.expires_at.unwrap_or(expires_at),
            });
        }
    }
    Ok(events)
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

/// An item's size as DynamoDB bills it: attribute names plus values, a number by its digits
/// (about one byte per two digits, plus one), a list or map with 3 bytes of overhead and 1 per
/// element.
fn billed_size(item: &Item) -> usize {
    fn value(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(s) => s.len(),
            AttributeValue::N(n) => n.len().div_ceil(2) + 1,
            AttributeValue::B(b) => b.as_ref().len(),
            AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
            AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
            AttributeValue::Ns(v) => v.iter().map(|n| n.len().div_ceil(2) + 1).sum(),
            AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len()).sum(),
            AttributeValue::L(v) => 3 + v.iter().map(|x| 1 + value(x)).sum::<usize>(),
            AttributeValue::M(m) => 3 + m.iter().map(|(k, x)| 1 + k.len() + value(x)).sum::<usize>(),
            _ => 0,
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
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

fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Unavailable { message: format!("request could not be built: {e}"), source: Some(Box::new(e)) }
}

/// Put `item` in a transaction, on condition that no live item has its key.
fn put_once_action(table: &str, item: Item, now: i64) -> Result<TransactWriteItem, StoreError> {
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

fn meta_key(query_id: &str) -> Item {
    let mut key = Item::new();
    key.insert(PK.into(), s(query_pk(query_id)));
    key.insert(SK.into(), s(SK_META));
    key
}

/// The next version after `expected`.
fn next_version(expected: u64) -> Result<u64, StoreError> {
    expected.checked_add(1).ok_or_else(|| StoreError::ConditionFailed("version overflow".to_string()))
}

// ------------------------------------------------------------------------------------------
// The port
// ------------------------------------------------------------------------------------------

#[async_trait]
impl Store for DynamoStore {
    async fn create_query(&self, query: &QueryRecord, events: &[Event]) -> Result<(), StoreError> {
        let meta = query_item(query, events)?;
        check_size("query", &meta)?;
        // The `by_user` index (keys only) gets one small write when the record is created.
        let index_write = 1;
        let Some(key) = &query.idempotency_key else {
            bump(&self.counters.write_units, index_write);
            return match self.put_once("query", meta).await? {
                true => Ok(()),
                false => Err(StoreError::ConditionFailed("query exists".into())),
            };
        };
        let now = now_epoch();
        let idem = idempotency_item(&query.user_id, key, &query.query_id, query.expires_at);
        check_size("idempotency key", &idem)?;
        let units = 2 * (units(billed_size(&meta), WRITE_UNIT_BYTES) + units(billed_size(&idem), WRITE_UNIT_BYTES))
            + index_write;
        let actions = vec![put_once_action(&self.table, meta, now)?, put_once_action(&self.table, idem, now)?];
        self.transact(actions, units).await.map_err(|e| e.into_store_error(&["query exists", "idempotency key held"]))
    }

    async fn get_query(&self, query_id: &str) -> Result<Option<QueryRecord>, StoreError> {
        let items = self.query_prefix(query_pk(query_id), SK_META).await?;
        let meta = items.iter().find(|i| get_s(i, SK) == Some(SK_META));
        let fan_in = items.iter().find(|i| get_s(i, SK) == Some(SK_FANIN));
        meta.map(|m| query_from_items(m, fan_in)).transpose()
    }

    async fn list_user_queries(&self, user_id: &str, limit: usize) -> Result<Vec<QueryRecord>, StoreError> {
        let now = now_epoch();
        let mut queries = Vec::new();
        let mut start: Option<Item> = None;
        while queries.len() < limit {
            bump(&self.counters.reads, 1);
            let page = i32::try_from(limit - queries.len()).unwrap_or(i32::MAX);
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(INDEX_BY_USER)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", GSI1PK)
                .expression_attribute_values(":pk", s(format!("U#{user_id}")))
                .scan_index_forward(false)
                .limit(page)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| sdk_error("Query", e))?;
            // The index projects keys only (its items stay small): read each query whole.
            for item in out.items.unwrap_or_default().iter().filter(|item| !is_expired(item, now)) {
                let Some(query_id) = get_s(item, PK).and_then(|pk| pk.strip_prefix("Q#")) else { continue };
                if let Some(query) = self.get_query(query_id).await? {
                    queries.push(query);
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        queries.truncate(limit);
        Ok(queries)
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
        let fields = record_fields(query, expected_version, events)?;
        let index_units = signals::index_write_units(&query.query_id, &fields);
        self.update_meta(
            &query.query_id,
            fields,
            "#version = :expected",
            vec![(":expected", n(expected_version))],
            vec![("#version", VERSION)],
            "version moved on",
        )
        .await?;
        bump(&self.counters.write_units, index_units);
        Ok(())
    }

    async fn record_handoff(&self, record: Arc<HandoffRecord>, events: &[Event]) -> Result<HandoffWrite, StoreError> {
        let item = handoff_item(&record, events)?;
        let stored = self.put_once("handoff", item).await?;
        let dispatch_id = &record.handoff.dispatch_id;
        let completed = match &record.slot {
            // Also on a duplicate: a first attempt that stored the handoff and crashed before
            // the fan-in is completed here (idempotent by dispatch).
            Some(slot) => self.arrive(&record.query_id, dispatch_id, slot, record.expires_at).await?,
            None if stored => match self.get_item(query_pk(&record.query_id), SK_FANIN).await? {
                Some(item) => fanin::completed(&arrivals_of(&item)?),
                None => BTreeSet::new(),
            },
            None => BTreeSet::new(),
        };
        Ok(if stored { HandoffWrite::Recorded { completed } } else { HandoffWrite::Duplicate })
    }

    async fn get_handoff(&self, query_id: &str, dispatch_id: &str) -> Result<Option<Arc<HandoffRecord>>, StoreError> {
        let sk = format!("{PREFIX_HANDOFF}{dispatch_id}");
        let item = self.get_item(query_pk(query_id), &sk).await?;
        item.as_ref().map(|item| handoff_from_item(item).map(Arc::new)).transpose()
    }

    async fn list_handoffs(&self, query_id: &str) -> Result<Vec<Arc<HandoffRecord>>, StoreError> {
        let items = self.query_prefix(query_pk(query_id), PREFIX_HANDOFF).await?;
        items.iter().map(|item| handoff_from_item(item).map(Arc::new)).collect()
    }

    async fn finish_query(
        &self,
        output: Arc<OrchestratorOutput>,
        query: &QueryRecord,
        expected_version: u64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        let mut fields = record_fields(query, expected_version, events)?;
        fields.insert(OUT.into(), packed("output", &*output)?);
        let index_units = signals::index_write_units(&query.query_id, &fields);
        self.update_meta(
            &query.query_id,
            fields,
            "#version = :expected AND attribute_not_exists(#out)",
            vec![(":expected", n(expected_version))],
            vec![("#version", VERSION), ("#out", OUT)],
            "output exists or version moved on",
        )
        .await?;
        bump(&self.counters.write_units, index_units);
        Ok(())
    }

    async fn get_output(&self, query_id: &str) -> Result<Option<Arc<OrchestratorOutput>>, StoreError> {
        match self.get_item(query_pk(query_id), SK_META).await? {
            Some(item) => Ok(unpack::<OrchestratorOutput>("output", &item, OUT)?.map(Arc::new)),
            None => Ok(None),
        }
    }

    async fn append_events(&self, events: &[Event]) -> Result<(), StoreError> {
        for event in unique_events(events) {
            // Already logged under this key: idempotent.
            self.put_if_absent("event", event_item(event)?).await?;
        }
        Ok(())
    }

    async fn list_events(&self, query_id: &str) -> Result<Vec<Event>, StoreError> {
        let items = self.query_prefix(query_pk(query_id), "").await?;
        // A key logged twice (a record's event and an appended one) keeps the record's.
        let mut by_key: BTreeMap<String, Event> = BTreeMap::new();
        let (records, appended): (Vec<&Item>, Vec<&Item>) =
            items.iter().partition(|i| !get_s(i, SK).unwrap_or_default().starts_with(PREFIX_EVENT));
        for item in records.into_iter().chain(appended) {
            for event in events_of(item)? {
                by_key.entry(event.key.clone()).or_insert(event);
            }
        }
        let now = now_epoch();
        let mut events: Vec<Event> = by_key.into_values().filter(|e| e.expires_at >= now).collect();
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

    async fn list_signals(&self, request: &SignalPageRequest) -> Result<SignalPage, StoreError> {
        signals::list(self, request).await
    }

    async fn get_manifest(&self, fingerprint: &str) -> Result<Option<String>, StoreError> {
        let item = self.get_item(format!("M#{fingerprint}"), SK_MANIFEST).await?;
        Ok(item.and_then(|i| match i.get(DOC) {
            Some(AttributeValue::S(body)) => Some(body.clone()),
            _ => None,
        }))
    }

    async fn get_session(&self, user_id: &str, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let Some(item) = self.get_item(session_pk(user_id, session_id), SK_SESSION).await? else {
            return Ok(None);
        };
        let mut session: SessionRecord = from_doc("session", &item)?;
        if let Some(version) = get_n(&item, VERSION).and_then(|v| v.parse().ok()) {
            session.version = version;
        }
        Ok(Some(session))
    }

    async fn put_session(&self, session: &SessionRecord, expected_version: u64) -> Result<(), StoreError> {
        let next = next_version(expected_version)?;
        let mut record = session.clone();
        record.version = next;
        let mut item = Item::new();
        item.insert(PK.into(), s(session_pk(&session.user_id, &session.session_id)));
        item.insert(SK.into(), s(SK_SESSION));
        item.insert(KIND.into(), s("session"));
        item.insert(VERSION.into(), n(next));
        item.insert(EXPIRES_AT.into(), n(session.expires_at));
        item.insert(DOC.into(), packed("session", &record)?);
        check_size("session", &item)?;
        bump(&self.counters.writes, 1);
        bump(&self.counters.write_units, units(billed_size(&item), WRITE_UNIT_BYTES));
        // Version 0: no live session (absent, or expired but not yet removed by TTL).
        let request = self.client.put_item().table_name(&self.table).set_item(Some(item));
        let request = if expected_version == 0 {
            request
                .condition_expression(COND_ABSENT)
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#expires_at", EXPIRES_AT)
                .expression_attribute_values(":now", n(now_epoch()))
        } else {
            request
                .condition_expression("#version = :expected AND #expires_at >= :now")
                .expression_attribute_names("#version", VERSION)
                .expression_attribute_names("#expires_at", EXPIRES_AT)
                .expression_attribute_values(":expected", n(expected_version))
                .expression_attribute_values(":now", n(now_epoch()))
        };
        request.send().await.map_err(|e| sdk_error("PutItem", e))?;
        bump(&self.counters.items_written, 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use switchyard_engine::ports::EventKind;
    use switchyard_model::contracts::{
        AgentHandoff, AgentResult, Citation, CitationSourceType, EntitySource, EntityType, HandoffExecution,
        HandoffResult, HandoffStatus, OutputStatus, ParsedEntity, ParsedQuery,
    };

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
            parsed: std::sync::Arc::new(ParsedQuery {
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
            }),
            warnings: vec!["w".into()],
            scope: None,
            plan: None,
            completed: ["d-1".to_string(), "d-2".to_string()].into_iter().collect(),
            accepted_at: at(1),
            deadline_at: Some(at(60)),
            synth_claimed_at: None,
            outcome: None,
            signal: None,
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
            detail: std::sync::Arc::new(serde_json::json!({"dispatch_id": "d-1"}).into()),
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
            reflection: None,
            session_id: "s-1".into(),
            entities: vec![],
        }
    }

    fn fan_in_item(arrivals: &[(&str, &str)]) -> Item {
        let mut item = Item::new();
        item.insert(PK.into(), s("Q#q-1"));
        item.insert(SK.into(), s(SK_FANIN));
        let list = arrivals
            .iter()
            .map(|(d, slot)| {
                let mut m = HashMap::new();
                m.insert("d".to_string(), s(*d));
                m.insert("s".to_string(), s(*slot));
                AttributeValue::M(m)
            })
            .collect();
        item.insert(ARRIVALS.into(), AttributeValue::L(list));
        item
    }

    #[test]
    fn a_query_record_survives_the_round_trip_through_its_items() {
        let q = query();
        let item = query_item(&q, &[event("00-10-accepted", 0)]).expect("encodes");
        assert_eq!(get_s(&item, PK), Some("Q#9b2f0c1e-0000-4000-8000-000000000001"));
        assert_eq!(get_s(&item, SK), Some("META"));
        assert_eq!(get_s(&item, STATUS), Some("routed"));
        assert_eq!(get_n(&item, VERSION), Some("3"));
        assert_eq!(get_n(&item, EXPIRES_AT), Some("1790086400"));
        assert_eq!(get_s(&item, GSI1PK), Some("U#user#1"));
        assert_eq!(get_s(&item, GSI1SK), Some("2026-09-21T14:13:21.123456Z"));
        assert!(matches!(item.get(DOC), Some(AttributeValue::B(_))), "the record is stored compressed");
        assert!(item.contains_key("ev_3"), "the events of the write that made version 3");
        let fan_in = fan_in_item(&[("d-2", "d-2"), ("d-1", "d-1")]);
        assert_eq!(query_from_items(&item, Some(&fan_in)).expect("decodes"), q);
        let mut without = q.clone();
        without.completed.clear();
        assert_eq!(query_from_items(&item, None).expect("decodes"), without, "no fan-in item: an empty set");
        let mut logged = event("00-10-accepted", 0);
        logged.query_id = q.query_id.clone();
        assert_eq!(events_of(&item).expect("events"), vec![logged], "the query id comes from the item");
    }

    #[test]
    fn a_compressed_record_is_a_fraction_of_its_json() {
        let q = query();
        let json = serde_json::to_vec(&q).expect("json").len();
        let item = query_item(&q, &[]).expect("encodes");
        let Some(AttributeValue::B(doc)) = item.get(DOC) else { panic!("doc is binary") };
        assert!(doc.as_ref().len() < json, "{} compressed vs {json} bytes of JSON", doc.as_ref().len());
    }

    #[test]
    fn a_document_deflated_before_the_dictionary_is_still_read() {
        let q = query();
        let mut item = query_item(&q, &[]).expect("encodes");
        let mut doc = to_doc("query", &q).expect("json");
        doc.as_object_mut().expect("object").remove(COMPLETED);
        let plain = miniz_oxide::deflate::compress_to_vec(&serde_json::to_vec(&doc).expect("json"), 6);
        item.insert(DOC.into(), AttributeValue::B(Blob::new(plain)));
        let mut without = q.clone();
        without.completed.clear();
        assert_eq!(query_from_items(&item, None).expect("decodes"), without);
    }

    #[test]
    fn typed_attributes_win_over_the_doc_on_read() {
        let q = query();
        let mut item = query_item(&q, &[]).expect("encodes");
        item.insert(STATUS.into(), s("done"));
        item.insert(VERSION.into(), n(9));
        let read = query_from_items(&item, Some(&fan_in_item(&[("x", "d-9")]))).expect("decodes");
        assert_eq!(read.status, QueryStatus::Done);
        assert_eq!(read.version, 9);
        assert_eq!(read.completed, ["d-9".to_string()].into_iter().collect());
    }

    #[test]
    fn a_plain_json_doc_is_read_as_well() {
        let e = event("k", 0);
        let item = event_item(&e).expect("encodes");
        assert!(matches!(item.get(DOC), Some(AttributeValue::S(_))));
        assert_eq!(event_from_item(&item).expect("decodes"), e);
        let mut h = handoff_item(&handoff(Some("d-1")), &[]).expect("encodes");
        let plain = serde_json::to_string(&handoff(Some("d-1"))).expect("json");
        h.insert(DOC.into(), s(plain));
        assert_eq!(handoff_from_item(&h).expect("decodes"), handoff(Some("d-1")));
    }

    #[test]
    fn update_fields_carry_the_next_version_and_never_the_fan_in_set() {
        let fields = query_fields(&query(), 4).expect("encodes");
        assert_eq!(get_n(&fields, VERSION), Some("4"));
        assert!(!fields.contains_key(COMPLETED) && !fields.contains_key(PK) && !fields.contains_key(OUT));
        let doc: serde_json::Value = unpack("query", &fields, DOC).expect("decodes").expect("doc");
        assert_eq!(doc["version"], 4);
        assert!(doc.get("completed").is_none(), "the set lives only in the fan-in item");
        assert_eq!(events_attribute(4), "ev_4");
    }

    #[test]
    fn handoff_and_event_records_survive_the_round_trip_with_their_events() {
        for record in [handoff(Some("d-1")), handoff(None)] {
            let item = handoff_item(&record, &[event("00-60-handoff-d-1", 3)]).expect("encodes");
            assert_eq!(get_s(&item, SK), Some("H#d-1"));
            assert_eq!(get_s(&item, SLOT), record.slot.as_deref());
            assert_eq!(get_s(&item, STATUS), Some("success"));
            assert_eq!(handoff_from_item(&item).expect("decodes"), record);
            assert_eq!(events_of(&item).expect("events"), vec![event("00-60-handoff-d-1", 3)]);
        }
        let e = event("0003-dispatch-d-1", 5);
        let item = event_item(&e).expect("encodes");
        assert_eq!(get_s(&item, SK), Some("E#0003-dispatch-d-1"));
        assert_eq!(events_of(&item).expect("events"), vec![e]);
    }

    #[test]
    fn an_output_survives_the_round_trip_through_its_attribute() {
        let o = output();
        let mut item = meta_key("q-1");
        item.insert(OUT.into(), packed("output", &o).expect("encodes"));
        assert_eq!(unpack::<OrchestratorOutput>("output", &item, OUT).expect("decodes"), Some(o));
        assert_eq!(unpack::<OrchestratorOutput>("output", &meta_key("q-1"), OUT).expect("absent"), None);
    }

    #[test]
    fn a_fan_in_item_reads_back_as_its_arrivals_in_order() {
        let item = fan_in_item(&[("d-2", "s-2"), ("d-1", "s-1")]);
        let arrivals = arrivals_of(&item).expect("decodes");
        assert_eq!(arrivals.iter().map(|a| a.dispatch_id.as_str()).collect::<Vec<_>>(), ["d-2", "d-1"]);
        assert_eq!(fanin::completed_through(&arrivals, "d-2"), Some(["s-2".to_string()].into_iter().collect()));
        let mut broken = item.clone();
        broken.insert(ARRIVALS.into(), AttributeValue::L(vec![s("not a map")]));
        assert!(matches!(arrivals_of(&broken), Err(StoreError::Corrupt(_))));
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
        item.insert(DOC.into(), AttributeValue::B(Blob::new(b"not deflate".to_vec())));
        assert!(matches!(event_from_item(&item), Err(StoreError::Corrupt(_))));
        item.remove(DOC);
        assert!(matches!(event_from_item(&item), Err(StoreError::Corrupt(_))));
        let mut item = query_item(&query(), &[]).expect("encodes");
        item.insert(STATUS.into(), s("lost"));
        assert!(matches!(query_from_items(&item, None), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn expiry_is_read_from_the_ttl_attribute() {
        let item = event_item(&event("k", 0)).expect("encodes");
        assert!(!is_expired(&item, 1_790_086_399));
        assert!(is_expired(&item, 1_790_086_401));
    }

    #[test]
    fn oversized_records_are_refused_before_compression() {
        let mut q = query();
        std::sync::Arc::make_mut(&mut q.parsed).raw_query = "x".repeat(DYNAMODB_MAX_ITEM_BYTES);
        match query_item(&q, &[]) {
            Err(StoreError::TooLarge(message)) => assert!(message.contains("query is"), "{message}"),
            other => panic!("expected TooLarge, got {other:?}"),
        }
        let small = event_item(&event("k", 0)).expect("encodes");
        let exact: usize = small.iter().map(|(k, v)| k.len() + value_size(v)).sum();
        assert!(item_size(&small) >= exact);
        assert!(item_size(&small) >= billed_size(&small));
        assert!(check_size("event", &small).is_ok());
    }

    #[test]
    fn units_are_billed_per_started_kilobyte_and_at_least_one() {
        assert_eq!(units(0, WRITE_UNIT_BYTES), 1);
        assert_eq!(units(1024, WRITE_UNIT_BYTES), 1);
        assert_eq!(units(1025, WRITE_UNIT_BYTES), 2);
        assert_eq!(units(4097, READ_UNIT_BYTES), 2);
    }

    #[test]
    fn cancellation_reasons_name_the_condition_that_failed() {
        let reason = |code: &str| Reason { code: code.into(), message: String::new() };
        let e = TxError::Cancelled(vec![reason("None"), reason("ConditionalCheckFailed"), reason("None")]);
        match e.into_store_error(&["query exists", "idempotency key held"]) {
            StoreError::ConditionFailed(label) => assert_eq!(label, "idempotency key held"),
            other => panic!("expected ConditionFailed, got {other:?}"),
        }
        assert!(conflict_only(&[reason("None"), reason("TransactionConflict")]));
        assert!(!conflict_only(&[reason("ConditionalCheckFailed"), reason("TransactionConflict")]));
        let conflict = TxError::Cancelled(vec![reason("TransactionConflict")]).into_store_error(&[]);
        assert!(conflict.is_retryable());
        let size = TxError::Cancelled(vec![Reason {
            code: "ValidationError".into(),
            message: "Item size to update has exceeded the maximum allowed size".into(),
        }]);
        assert!(matches!(size.into_store_error(&[]), StoreError::TooLarge(_)));
    }
}
