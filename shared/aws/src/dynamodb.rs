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
//! | tool call | `Q#<query_id>` | `C#<dispatch_id>#<index, 4 digits>` | `kind` S, `expires_at` N | `doc`: [`ToolCallRecord`] as claimed (before the call); `outcome`: its [`ToolCallOutcome`] once the call ended |
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
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use chrono::Utc;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::fanin::{self};
use switchyard_engine::ports::{
    Event, HandoffRecord, HandoffWrite, QueryRecord, SessionRecord, SignalPage, SignalPageRequest, Store, StoreError,
    ToolCallOutcome, ToolCallRecord, ToolClaim,
};
use switchyard_model::contracts::OrchestratorOutput;
use switchyard_model::limits::{DYNAMODB_MAX_ITEM_BYTES, DYNAMODB_MAX_TRANSACT_ITEMS};

/// A DynamoDB item.
type Item = HashMap<String, AttributeValue>;

mod packing;
mod signals;
mod tool_calls;
pub use signals::INDEX_BY_SIGNAL_DAY;

mod items;
use items::*;

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

    async fn claim_tool_call(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError> {
        self.claim_call(record).await
    }

    async fn finish_tool_call(
        &self,
        query_id: &str,
        dispatch_id: &str,
        index: u32,
        outcome: &ToolCallOutcome,
    ) -> Result<(), StoreError> {
        self.finish_call(query_id, dispatch_id, index, outcome).await
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
mod tests;
