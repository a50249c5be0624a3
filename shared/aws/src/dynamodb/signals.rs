//! Training signals on DynamoDB: the attributes a finished query's `META` item carries for the
//! `by_signal_day` index, and the paged read of that index.
//!
//! The signal is part of the query record (written by the router's and the synthesizer's
//! writes), so storing it costs no request of its own. Once the query is done, the same write
//! also sets `gsi2pk = SIG#<day of recording>`, `gsi2sk = <recorded_at>#<query_id>` and `sig`
//! (the exported record, deflated against the documents' dictionary: about 200 bytes, where its
//! plain JSON took 500; a `sig` written as plain JSON before is read as well). The index projects `sig` and
//! `expires_at` only, so an export reads small index items and never the query record; a day
//! per partition spreads the writes, and an export walks the days newest first.

use super::{
    bump, get_s, is_expired, now_epoch, packed, s, sdk_error, units, unpack, DynamoStore, Item, PK, SK,
    WRITE_UNIT_BYTES,
};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::NaiveDate;
use switchyard_core::signals::{sort_key, sort_key_time, SignalRecord};
use switchyard_engine::ports::{QueryRecord, SignalPage, SignalPageRequest, StoreError};

/// The signal index's partition key attribute.
pub(super) const GSI2PK: &str = "gsi2pk";
/// The signal index's sort key attribute.
pub(super) const GSI2SK: &str = "gsi2sk";
/// The exported record, compressed like the documents (plain JSON, S, in items written before).
pub(super) const SIG: &str = "sig";
/// The index over finished signals, by day of recording.
pub const INDEX_BY_SIGNAL_DAY: &str = "by_signal_day";

fn day_pk(day: NaiveDate) -> String {
    format!("SIG#{}", day.format("%Y-%m-%d"))
}

/// The index attributes of a query whose signal is finished; nothing before that.
pub(super) fn signal_fields(query: &QueryRecord) -> Result<Vec<(String, AttributeValue)>, StoreError> {
    let Some(stored) = query.signal.as_ref().filter(|s| s.finished()) else { return Ok(Vec::new()) };
    Ok(vec![
        (GSI2PK.to_string(), s(day_pk(stored.recorded_at.date_naive()))),
        (GSI2SK.to_string(), s(sort_key(&stored.recorded_at, &query.query_id))),
        (SIG.to_string(), packed("signal", &stored.record())?),
    ])
}

/// Write units the index's copy of a write costs: its keys, `sig` and `expires_at` (0 when the
/// write carries no finished signal).
pub(super) fn index_write_units(query_id: &str, fields: &Item) -> u64 {
    let sig = match fields.get(SIG) {
        Some(AttributeValue::S(json)) => json.len(),
        Some(AttributeValue::B(blob)) => blob.as_ref().len(),
        _ => return 0,
    };
    let keys = ["pk", "sk", GSI2PK, GSI2SK, "expires_at"].iter().map(|k| k.len()).sum::<usize>();
    let values = query_id.len() + 2 + "META".len() + 14 + 70 + 10;
    units(keys + values + SIG.len() + sig, WRITE_UNIT_BYTES)
}

/// The table key and index key of the item a cursor names, to continue a read after it.
fn start_key(cursor: &str) -> Result<(NaiveDate, Item), StoreError> {
    let at = sort_key_time(cursor).ok_or_else(|| StoreError::Corrupt("signal cursor is malformed".into()))?;
    let query_id = cursor.split_once('#').map(|(_, id)| id).unwrap_or_default();
    let day = at.date_naive();
    let mut key = Item::new();
    key.insert(PK.into(), s(format!("Q#{query_id}")));
    key.insert(SK.into(), s("META"));
    key.insert(GSI2PK.into(), s(day_pk(day)));
    key.insert(GSI2SK.into(), s(cursor));
    Ok((day, key))
}

/// One page of signals from the index: the days from `newest` (or the cursor's day) back to
/// `oldest`, each queried newest first, until `limit` records are found.
pub(super) async fn list(store: &DynamoStore, request: &SignalPageRequest) -> Result<SignalPage, StoreError> {
    let now = now_epoch();
    let oldest_key = sort_key(&request.oldest, "");
    let newest_key = sort_key(&request.newest, "\u{10FFFF}");
    let (mut day, mut start) = match &request.after {
        Some(cursor) => {
            let (day, key) = start_key(cursor)?;
            (day, Some(key))
        }
        None => (request.newest.date_naive(), None),
    };
    let last_day = request.oldest.date_naive();
    let mut records: Vec<(String, SignalRecord)> = Vec::new();
    while day >= last_day && records.len() < request.limit {
        let page = i32::try_from(request.limit - records.len()).unwrap_or(i32::MAX);
        bump(&store.counters.reads, 1);
        let out = store
            .client
            .query()
            .table_name(&store.table)
            .index_name(INDEX_BY_SIGNAL_DAY)
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :oldest AND :newest")
            .expression_attribute_names("#pk", GSI2PK)
            .expression_attribute_names("#sk", GSI2SK)
            .expression_attribute_values(":pk", s(day_pk(day)))
            .expression_attribute_values(":oldest", s(oldest_key.clone()))
            .expression_attribute_values(":newest", s(newest_key.clone()))
            .scan_index_forward(false)
            .limit(page)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| sdk_error("Query", e))?;
        for item in out.items.unwrap_or_default().iter().filter(|item| !is_expired(item, now)) {
            let Some(key) = get_s(item, GSI2SK) else { continue };
            let Some(record) = unpack::<SignalRecord>("signal", item, SIG)? else { continue };
            records.push((key.to_string(), record));
        }
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => match day.pred_opt() {
                Some(previous) => day = previous,
                None => break,
            },
        }
    }
    records.truncate(request.limit);
    // Full page: there may be more (an extra empty page at the very end is the price of not
    // reading ahead). Short page: the days are exhausted.
    let next = if records.len() == request.limit { records.last().map(|(key, _)| key.clone()) } else { None };
    Ok(SignalPage { records: records.into_iter().map(|(_, r)| r).collect(), next })
}
