//! Learning from traffic, the engine side: a caller's feedback on one of their queries
//! (`POST /v1/queries/{id}/feedback`), pages of finished training signals for the roles the
//! manifest names (`GET /v1/signals`), the whole export (`switchyard signals export`), and the
//! optimization requests the stored signals raise (`switchyard signals pending`).
//!
//! The signal itself is written by the router and the synthesizer inside the record writes they
//! already make (switchyard_core::signals::collect); feedback is one more conditional write of the same
//! record. Rules: docs/routing.md#training-signal.

use super::deps::Deps;
use super::intake::{self, Caller, IntakeError};
use crate::ports::{QueryStatus, SignalPage, SignalPageRequest, Store, StoreError};
use chrono::{DateTime, Utc};
use serde::Serialize;
use switchyard_core::admission::{FieldError, ValidationError};
use switchyard_core::signals::{
    optimization_requests, Feedback, OptimizationRequest, SignalRecord, MAX_FEEDBACK_BYTES,
};
use switchyard_model::limits::MAX_SIGNAL_PAGE;
use switchyard_model::manifest::Manifest;
use tracing::{info, instrument};

/// Signals per `GET /v1/signals` page when the caller does not say.
pub const DEFAULT_SIGNAL_PAGE: usize = 100;
/// Attempts at the feedback write when a concurrent write moves the record's version.
const FEEDBACK_ATTEMPTS: u32 = 3;

/// What `POST /v1/queries/{id}/feedback` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FeedbackRecorded {
    /// The query.
    pub query_id: String,
    /// True when this feedback replaced an earlier one (a query keeps only the latest).
    pub replaced: bool,
    /// The rating stored.
    pub rating: u8,
    /// The intent the caller said was right, if any.
    pub correct_intent: Option<String>,
    /// The signal's reward with this feedback.
    pub reward: f64,
}

fn invalid(field: &str, rule: impl Into<String>) -> IntakeError {
    IntakeError::Invalid(ValidationError { errors: vec![FieldError { field: field.into(), rule: rule.into() }] })
}

/// Record the caller's feedback on their finished query. Someone else's query, an unknown id
/// and a malformed id are all "no such query" (404), as for reading it; a query that has not
/// finished yet is a conflict (409): its signal has no outcome to rate. A second feedback
/// replaces the first. The comment is stored and never logged.
#[instrument(skip(deps, caller, body), fields(query_id = %query_id))]
pub async fn give_feedback(
    deps: &Deps,
    caller: &Caller,
    query_id: &str,
    body: &[u8],
) -> Result<FeedbackRecorded, IntakeError> {
    if body.len() > MAX_FEEDBACK_BYTES {
        return Err(IntakeError::TooLarge { size: Some(body.len()), limit: MAX_FEEDBACK_BYTES });
    }
    let feedback = Feedback::parse(body, &deps.manifest).map_err(|e| invalid(e.field, e.rule))?;
    for _ in 0..FEEDBACK_ATTEMPTS {
        let query = intake::owned_query(deps, caller, query_id).await?;
        if query.status != QueryStatus::Done {
            return Err(IntakeError::Conflict(
                "the query has not finished: send feedback once its answer is written".into(),
            ));
        }
        let Some(mut signal) = query.signal.as_deref().cloned() else {
            return Err(IntakeError::Conflict("no training signal was recorded for this query".into()));
        };
        let replaced = signal.feedback.is_some();
        signal.feedback = Some(feedback.clone());
        signal.feedback_at = Some(deps.clock.now());
        let mut updated = query.clone();
        updated.signal = Some(std::sync::Arc::new(signal));
        match deps.store.update_query(&updated, query.version, &[]).await {
            Ok(()) => {
                let reward = updated.signal.as_ref().map(|s| s.record().reward).unwrap_or_default();
                info!(
                    rating = feedback.rating,
                    corrected = feedback.correct_intent.is_some(),
                    replaced,
                    "feedback recorded"
                );
                return Ok(FeedbackRecorded {
                    query_id: query_id.to_string(),
                    replaced,
                    rating: feedback.rating,
                    correct_intent: feedback.correct_intent,
                    reward,
                });
            }
            Err(StoreError::ConditionFailed(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(IntakeError::Unavailable("the query record kept changing while feedback was written".into()))
}

/// What a `GET /v1/signals` caller asked for, as received.
#[derive(Debug, Clone, Default)]
pub struct SignalQuery<'a> {
    /// `since`: RFC 3339.
    pub since: Option<&'a str>,
    /// `min_reward`: 0 – 1.
    pub min_reward: Option<&'a str>,
    /// `limit`: 1 – [`MAX_SIGNAL_PAGE`].
    pub limit: Option<&'a str>,
    /// `cursor`: a previous page's `next`.
    pub cursor: Option<&'a str>,
}

/// The oldest recording time worth reading: `since`, or as far back as records live.
fn oldest(manifest: &Manifest, now: DateTime<Utc>, since: Option<DateTime<Utc>>) -> DateTime<Utc> {
    let ttl = chrono::Duration::milliseconds(i64::try_from(manifest.query.record_ttl.as_millis()).unwrap_or(i64::MAX));
    let retained = now.checked_sub_signed(ttl).unwrap_or(DateTime::<Utc>::MIN_UTC);
    since.map_or(retained, |s| s.max(retained))
}

/// The newest recording time read: a minute past now, for clocks a little apart.
fn newest(now: DateTime<Utc>) -> DateTime<Utc> {
    now + chrono::Duration::minutes(1)
}

/// One page of every caller's finished signals, for a caller holding one of the manifest's
/// `signals.export_roles` (403 otherwise). `min_reward` filters within the page, so a page may
/// hold fewer than `limit` records and still have a `next`.
pub async fn signal_page(deps: &Deps, caller: &Caller, query: &SignalQuery<'_>) -> Result<SignalPage, IntakeError> {
    let roles = &deps.manifest.signals.export_roles;
    if !caller.roles.iter().any(|r| roles.contains(r)) {
        return Err(IntakeError::RoleRequired { what: "training signals", roles: roles.clone() });
    }
    let since =
        query.since.map(switchyard_core::signals::parse_since).transpose().map_err(|e| invalid("since", e.rule))?;
    let min_reward = query
        .min_reward
        .map(switchyard_core::signals::parse_min_reward)
        .transpose()
        .map_err(|e| invalid("min_reward", e.rule))?;
    let limit = match query.limit {
        None => DEFAULT_SIGNAL_PAGE,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=MAX_SIGNAL_PAGE).contains(&n) => n,
            _ => return Err(invalid("limit", format!("a whole number from 1 to {MAX_SIGNAL_PAGE}"))),
        },
    };
    if let Some(cursor) = query.cursor {
        if cursor.len() > 128 || switchyard_core::signals::sort_key_time(cursor).is_none() {
            return Err(invalid("cursor", "must be the `next` of a previous page, unchanged"));
        }
    }
    let now = deps.clock.now();
    let request = SignalPageRequest {
        newest: newest(now),
        oldest: oldest(&deps.manifest, now, since),
        after: query.cursor.map(str::to_string),
        limit,
    };
    let mut page = deps.store.list_signals(&request).await?;
    if let Some(min) = min_reward {
        page.records.retain(|r| r.reward >= min);
    }
    info!(signals = page.records.len(), more = page.next.is_some(), "signals page served");
    Ok(page)
}

/// Every finished signal recorded at or after `since` (or as far back as records live), newest
/// first, read page by page.
pub async fn export(
    store: &dyn Store,
    manifest: &Manifest,
    now: DateTime<Utc>,
    since: Option<DateTime<Utc>>,
    page_size: usize,
) -> Result<Vec<SignalRecord>, StoreError> {
    let mut request = SignalPageRequest {
        newest: newest(now),
        oldest: oldest(manifest, now, since),
        after: None,
        limit: page_size.clamp(1, MAX_SIGNAL_PAGE),
    };
    let mut records = Vec::new();
    loop {
        let page = store.list_signals(&request).await?;
        records.extend(page.records);
        match page.next {
            Some(next) => request.after = Some(next),
            None => return Ok(records),
        }
    }
}

/// The optimization requests the newest `signals.optimization.window` stored signals raise
/// (the E2I design's `request_optimization`, with the manifest's threshold).
pub async fn pending_requests(
    store: &dyn Store,
    manifest: &Manifest,
    now: DateTime<Utc>,
) -> Result<Vec<OptimizationRequest>, StoreError> {
    let o = &manifest.signals.optimization;
    let mut request = SignalPageRequest {
        newest: newest(now),
        oldest: oldest(manifest, now, None),
        after: None,
        limit: o.window.clamp(1, MAX_SIGNAL_PAGE),
    };
    let mut records = Vec::new();
    while records.len() < o.window {
        let page = store.list_signals(&request).await?;
        records.extend(page.records);
        match page.next {
            Some(next) => request.after = Some(next),
            None => break,
        }
    }
    records.truncate(o.window);
    Ok(optimization_requests(&records, o.window, o.threshold, o.min_signals))
}
