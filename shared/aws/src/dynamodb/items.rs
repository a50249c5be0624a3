//! Item mapping: records ↔ DynamoDB items. `AttributeValue` stays in the adapter.

use super::*;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::BTreeSet;
use switchyard_engine::fanin::{self, Arrival};
use switchyard_engine::ports::{Event, HandoffRecord, QueryRecord, QueryStatus, StoreError};
use switchyard_model::limits::DYNAMODB_MAX_ITEM_BYTES;

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn rfc3339(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// `Q#<query_id>`.
/// The query record's fields at the version after `expected_version`, with the events the
/// write carries packed into that version's event attribute.
pub(crate) fn record_fields(query: &QueryRecord, expected_version: u64, events: &[Event]) -> Result<Item, StoreError> {
    let next = next_version(expected_version)?;
    let mut fields = query_fields(query, next)?;
    let events = unique_events(events);
    if !events.is_empty() {
        fields.insert(events_attribute(next), packed_events(&events, query.expires_at)?);
    }
    Ok(fields)
}

pub(crate) fn query_pk(query_id: &str) -> String {
    format!("Q#{query_id}")
}

/// `IDEM#<user_id>#<key>` with `%` and `#` escaped in both parts.
pub(crate) fn idempotency_pk(user_id: &str, key: &str) -> String {
    fn escape(part: &str) -> String {
        part.replace('%', "%25").replace('#', "%23")
    }
    format!("IDEM#{}#{}", escape(user_id), escape(key))
}

/// `S#<session_id>#<user_id>` with `%` and `#` escaped in both parts.
pub(crate) fn session_pk(user_id: &str, session_id: &str) -> String {
    fn escape(part: &str) -> String {
        part.replace('%', "%25").replace('#', "%23")
    }
    format!("S#{}#{}", escape(session_id), escape(user_id))
}

pub(crate) fn status_name(status: QueryStatus) -> &'static str {
    match status {
        QueryStatus::Accepted => "accepted",
        QueryStatus::Routed => "routed",
        QueryStatus::Synthesizing => "synthesizing",
        QueryStatus::Done => "done",
    }
}

pub(crate) fn parse_status(name: &str) -> Option<QueryStatus> {
    Some(match name {
        "accepted" => QueryStatus::Accepted,
        "routed" => QueryStatus::Routed,
        "synthesizing" => QueryStatus::Synthesizing,
        "done" => QueryStatus::Done,
        _ => return None,
    })
}

pub(crate) fn to_doc<T: serde::Serialize>(what: &str, record: &T) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(record).map_err(|e| StoreError::Corrupt(format!("{what} cannot be encoded: {e}")))
}

/// A record's JSON, deflated, as a binary attribute.
pub(crate) fn packed<T: serde::Serialize + ?Sized>(what: &str, record: &T) -> Result<AttributeValue, StoreError> {
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
pub(crate) fn unpack<T: serde::de::DeserializeOwned>(
    what: &str,
    item: &Item,
    name: &str,
) -> Result<Option<T>, StoreError> {
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
pub(crate) fn from_doc<T: serde::de::DeserializeOwned>(what: &str, item: &Item) -> Result<T, StoreError> {
    unpack(what, item, DOC)?.ok_or_else(|| StoreError::Corrupt(format!("{what} {}: no doc", describe(item))))
}

/// The attributes of a query record that `update_query` replaces: everything except the
/// keys, the events and the output. `version` is the version to store.
pub(crate) fn query_fields(query: &QueryRecord, version: u64) -> Result<Item, StoreError> {
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
pub(crate) fn events_attribute(version: u64) -> String {
    format!("{EV_PREFIX}{version}")
}

/// Events for one write, one per key (the first).
pub(crate) fn unique_events(events: &[Event]) -> Vec<&Event> {
    let mut seen = BTreeSet::new();
    events.iter().filter(|e| seen.insert((e.query_id.as_str(), e.key.as_str()))).collect()
}

/// An event as stored inside a record's item: without the query id and the expiry, which the
/// item holds (its `pk` and `expires_at`).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct StoredEvent {
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
pub(crate) fn packed_events(events: &[&Event], item_expires_at: i64) -> Result<AttributeValue, StoreError> {
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
pub(crate) fn query_item(query: &QueryRecord, events: &[Event]) -> Result<Item, StoreError> {
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
pub(crate) fn query_from_items(meta: &Item, fan_in: Option<&Item>) -> Result<QueryRecord, StoreError> {
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
pub(crate) fn arrivals_of(item: &Item) -> Result<Vec<Arrival>, StoreError> {
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

pub(crate) fn handoff_item(record: &HandoffRecord, events: &[Event]) -> Result<Item, StoreError> {
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

pub(crate) fn handoff_from_item(item: &Item) -> Result<HandoffRecord, StoreError> {
    from_doc("handoff", item)
}

pub(crate) fn event_item(event: &Event) -> Result<Item, StoreError> {
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

pub(crate) fn event_from_item(item: &Item) -> Result<Event, StoreError> {
    from_doc("event", item)
}

/// Every event an item of the query's partition carries: its `ev_<n>` attributes (query
/// record), `ev` (handoff) or itself (event item).
pub(crate) fn events_of(item: &Item) -> Result<Vec<Event>, StoreError> {
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

pub(crate) fn idempotency_item(user_id: &str, key: &str, query_id: &str, expires_at: i64) -> Item {
    let mut item = Item::new();
    item.insert(PK.into(), s(idempotency_pk(user_id, key)));
    item.insert(SK.into(), s(SK_IDEM));
    item.insert(KIND.into(), s("idempotency"));
    item.insert(QUERY_ID.into(), s(query_id));
    item.insert(EXPIRES_AT.into(), n(expires_at));
    item
}

pub(crate) fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v),
        _ => None,
    }
}

pub(crate) fn get_n<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => Some(v),
        _ => None,
    }
}

pub(crate) fn describe(item: &Item) -> String {
    format!("{} / {}", get_s(item, PK).unwrap_or("?"), get_s(item, SK).unwrap_or("?"))
}

/// Whether the item's `expires_at` has passed (TTL not yet applied).
pub(crate) fn is_expired(item: &Item, now: i64) -> bool {
    get_n(item, EXPIRES_AT).and_then(|v| v.parse::<f64>().ok()).is_some_and(|at| at < now as f64)
}

/// Estimated size of an attribute value, never below DynamoDB's own count.
pub(crate) fn value_size(value: &AttributeValue) -> usize {
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
pub(crate) fn item_size(item: &Item) -> usize {
    item.iter().map(|(name, value)| name.len() + value_size(value) + 1).sum()
}

/// An item's size as DynamoDB bills it: attribute names plus values, a number by its digits
/// (about one byte per two digits, plus one), a list or map with 3 bytes of overhead and 1 per
/// element.
pub(crate) fn billed_size(item: &Item) -> usize {
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
pub(crate) fn check_size(what: &str, item: &Item) -> Result<(), StoreError> {
    let size = item_size(item);
    if size > DYNAMODB_MAX_ITEM_BYTES {
        return Err(StoreError::TooLarge(format!(
            "{what} item {} is about {size} bytes (DynamoDB allows {DYNAMODB_MAX_ITEM_BYTES})",
            describe(item)
        )));
    }
    Ok(())
}

pub(crate) fn build_error(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Unavailable { message: format!("request could not be built: {e}"), source: Some(Box::new(e)) }
}

/// Put `item` in a transaction, on condition that no live item has its key.
pub(crate) fn put_once_action(table: &str, item: Item, now: i64) -> Result<TransactWriteItem, StoreError> {
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

pub(crate) fn meta_key(query_id: &str) -> Item {
    let mut key = Item::new();
    key.insert(PK.into(), s(query_pk(query_id)));
    key.insert(SK.into(), s(SK_META));
    key
}

/// The next version after `expected`.
pub(crate) fn next_version(expected: u64) -> Result<u64, StoreError> {
    expected.checked_add(1).ok_or_else(|| StoreError::ConditionFailed("version overflow".to_string()))
}
