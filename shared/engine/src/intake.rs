//! Intake: a question becomes a recorded query with a route job on its way.
//!
//! Validation follows the E2I design's table (bad UUID → 400 with details, unknown intent → the
//! manifest's fallback intent with a warning, confidence clamped, entities truncated with a
//! warning). Raw text is classified here with the embedded classifier — it takes microseconds —
//! so the caller's role can be checked against the intent before anything is recorded (403).

use super::deps::{Deps, StepError};
use super::effects::Entry;
use crate::ports::{Detail, Event, QueryRecord, QueryStatus, QueueId, StoreError};
use crate::telemetry::trace::fnv_hex;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::admission::{validate_request, FieldError, ValidationError};
use switchyard_model::contracts::{OrchestratorOutput, ParsedQuery};
use switchyard_model::jobs::Job;
use tracing::{info, instrument, warn};

/// A scope check in the route event: its fields in key order, as its `Value` prints.
#[derive(Serialize)]
struct ScopeDetail {
    decision: switchyard_core::scope::ScopeDecision,
    score: f64,
    threshold: f64,
}

impl From<&switchyard_core::scope::ScopeCheck> for ScopeDetail {
    fn from(c: &switchyard_core::scope::ScopeCheck) -> Self {
        ScopeDetail { decision: c.decision, score: c.score, threshold: c.threshold }
    }
}

/// Who is asking: from the API Gateway JWT authorizer (or, for `serve`, dev headers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The JWT `sub`.
    pub user_id: String,
    /// Roles from the token's `roles` (or `cognito:groups`) claim.
    pub roles: Vec<String>,
}

/// Why intake refused or could not serve a request. [`super::handlers`] maps each variant to
/// one HTTP status, in one place.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    /// 400: the request breaks a rule; `errors` name the fields.
    #[error("invalid request")]
    Invalid(ValidationError),
    /// 401: no caller identity.
    #[error(
        "no caller identity: send `Authorization: Bearer <token>` (a JWT the API's authorizer accepts) or, on a dev server, an `x-switchyard-user` header"
    )]
    Unauthenticated,
    /// 401: the bearer token was refused (a function that verifies JWTs itself); says why.
    #[error("Authorization: {0}")]
    BadToken(String),
    /// 403: the intent needs a role the caller lacks.
    #[error("intent `{intent}` requires role `{role}`")]
    Forbidden {
        /// The classified intent.
        intent: String,
        /// The role it needs.
        role: String,
    },
    /// 403: reading `what` needs one of `roles` (none: nobody may, over HTTP).
    #[error("{}", role_required(what, roles))]
    RoleRequired {
        /// What was asked for.
        what: &'static str,
        /// The roles that may.
        roles: Vec<String>,
    },
    /// 404: no such query for this caller.
    #[error("no such query")]
    NotFound,
    /// 404: no such route ([`super::handlers::HTTP_ROUTES`] lists the ones there are).
    #[error("no such route")]
    UnknownRoute,
    /// 421: the request's `Host` is not one the server answers for (a server that checks
    /// it, against DNS rebinding).
    #[error("this server does not answer for the request's Host; it answers for its own names only")]
    UnknownHost,
    /// 405: the route exists, but not with this method.
    #[error("method not allowed on this route (allowed: {allowed})")]
    MethodNotAllowed {
        /// The methods the route answers, for the `allow` header.
        allowed: &'static str,
    },
    /// 413: the request body is larger than the route accepts.
    #[error("{}", too_large(*size, *limit))]
    TooLarge {
        /// The body's size, when known (a `content-length`, or the bytes received); a body
        /// sent in chunks is stopped at the limit, its size unknown.
        size: Option<usize>,
        /// Bytes allowed.
        limit: usize,
    },
    /// 408: the request's body did not arrive within the server's body timeout.
    #[error("the request body did not arrive within {} ms", limit.as_millis())]
    BodyTimeout {
        /// The body timeout.
        limit: Duration,
    },
    /// 429: the caller has sent more requests than its rate allows (a server that limits
    /// it); the request may be sent again after `retry_after`.
    #[error("too many requests from this caller; retry in {} s", retry_after_secs(*retry_after))]
    RateLimited {
        /// When the caller's next request is allowed.
        retry_after: Duration,
    },
    /// 409: the idempotency key or query id is already used by a different request.
    #[error("{0}")]
    Conflict(String),
    /// 504: the query was accepted but its answer was not ready within the wait (a
    /// non-streamed chat completion); it stays readable at `GET /v1/queries/{query_id}`.
    #[error("the answer was not ready within {} s; the query {query_id} goes on: read it at GET /v1/queries/{query_id}", waited.as_secs())]
    NotReady {
        /// The accepted query.
        query_id: String,
        /// How long the request waited.
        waited: Duration,
    },
    /// 503: a dependency is down; the request may be retried (with the same idempotency key).
    #[error("temporarily unavailable: {0}")]
    Unavailable(String),
}

/// `Retry-After` seconds for a wait: whole seconds, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

fn too_large(size: Option<usize>, limit: usize) -> String {
    match size {
        Some(size) => format!("request body is {size} bytes; this route's limit is {limit} bytes"),
        None => format!("request body is over this route's limit of {limit} bytes"),
    }
}

fn role_required(what: &str, roles: &[String]) -> String {
    if roles.is_empty() {
        format!("no role may read {what} over HTTP (the manifest's signals.export_roles is empty)")
    } else {
        format!("reading {what} requires one of the roles: {}", roles.join(", "))
    }
}

impl From<StoreError> for IntakeError {
    fn from(e: StoreError) -> IntakeError {
        IntakeError::Unavailable(e.to_string())
    }
}

fn invalid(field: &str, rule: &str) -> IntakeError {
    IntakeError::Invalid(ValidationError { errors: vec![FieldError { field: field.into(), rule: rule.into() }] })
}

/// A recorded query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accepted {
    /// Its id (UUID v4).
    pub query_id: String,
    /// The conversation it belongs to (the caller's, or a new one named after the query).
    pub session_id: String,
    /// `accepted`.
    pub status: QueryStatus,
    /// The routed intent.
    pub intent: String,
    /// Classification confidence.
    pub confidence: f64,
    /// Validation and classification warnings.
    pub warnings: Vec<String>,
    /// True when an earlier request with the same idempotency key created it.
    pub replayed: bool,
}

/// The body the idempotency check compares: JSON re-serialized with sorted keys and no
/// insignificant whitespace, so the same request sent with other spacing or key order is the
/// same request. A body that is not JSON (refused later) is compared as sent.
fn canonical_json(body: &[u8]) -> Vec<u8> {
    fn sorted(value: serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(map) => {
                let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
            }
            serde_json::Value::Array(items) => serde_json::Value::Array(items.into_iter().map(sorted).collect()),
            other => other,
        }
    }
    if body.len() > switchyard_core::admission::MAX_BODY_BYTES {
        return body.to_vec();
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => serde_json::to_vec(&sorted(value)).unwrap_or_else(|_| body.to_vec()),
        Err(_) => body.to_vec(),
    }
}

/// The id a pre-parsed query is stored under: a UUID (version 8) made from the SHA-256 of the
/// caller and the `parsed_query.query_id` sent. Each caller's ids are their own: an id another
/// caller has used is answered as one never used (a new query, under this caller's id), so a
/// `POST` cannot tell whether someone else's query exists; the same caller sending the same id
/// again reaches the same record (a replay with its idempotency key, else 409).
pub fn callers_query_id(user_id: &str, sent: &str) -> String {
    let mut input = Vec::with_capacity(16 + user_id.len() + sent.len());
    input.extend_from_slice(&(user_id.len() as u64).to_be_bytes());
    input.extend_from_slice(user_id.as_bytes());
    input.extend_from_slice(sent.to_ascii_lowercase().as_bytes());
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &input);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest.as_ref()[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid().hyphenated().to_string()
}

/// Check an `Idempotency-Key` header: 1–128 characters of `[A-Za-z0-9._:-]`.
fn check_idempotency_key(key: &str) -> Result<(), IntakeError> {
    let ok =
        !key.is_empty() && key.len() <= 128 && key.chars().all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(invalid("Idempotency-Key", "1-128 characters of A-Z a-z 0-9 . _ : -"))
    }
}

/// Validate, classify, authorize, record the query and enqueue its route job.
#[instrument(skip_all, fields(user_id = %caller.user_id, query_id = tracing::field::Empty))]
pub async fn submit(
    deps: &Deps,
    caller: &Caller,
    body: &[u8],
    idempotency_key: Option<&str>,
) -> Result<Accepted, IntakeError> {
    let request_hash = fnv_hex(&canonical_json(body));
    if let Some(key) = idempotency_key {
        check_idempotency_key(key)?;
        if let Some(existing) = replay(deps, caller, key, &request_hash).await? {
            return Ok(existing);
        }
    }
    let request = validate_request(body, &deps.manifest).map_err(IntakeError::Invalid)?;
    let now = deps.clock.now();
    let mut warnings = request.warnings;
    // The caller's own session under this id (another caller's is another record): a new or
    // unknown id starts an empty one. The turn sees the turns completed before it was accepted.
    let session = match &request.session_id {
        Some(id) => deps.store.get_session(&caller.user_id, id).await?,
        None => None,
    };
    let history = session.as_ref().map(switchyard_core::context::SessionRecord::prior_turns).unwrap_or_default();
    // The classifier's ranked intents (ids and scores only) go into the route event, so the
    // console can show the decision against its alternatives.
    let mut alternatives = Vec::new();
    let (mut parsed, stage, scope) = match request.parsed {
        Some(mut parsed) => {
            parsed.query_id = callers_query_id(&caller.user_id, &parsed.query_id);
            (parsed, "pre-parsed", None)
        }
        None => {
            // A turn after a question for missing entities may supply them (core::slots).
            let pending = session.as_ref().and_then(|s| s.pending_slots());
            let read_at = request.now.unwrap_or(now);
            let c = deps.classifier().resume(&request.text, &history, pending, read_at);
            let scope = switchyard_core::scope::check(&deps.manifest, c.in_scope, c.scope_score);
            alternatives = c.alternatives;
            let max = deps.manifest.query.max_entities;
            let mut entities = c.entities;
            if entities.len() > max {
                warnings.push(format!("{} entities found; kept the first {max}", entities.len()));
                entities.truncate(max);
            }
            let parsed = ParsedQuery {
                query_id: uuid::Uuid::new_v4().to_string(),
                raw_query: request.text.clone(),
                intent: c.intent,
                entities,
                confidence: c.confidence,
                // A borderline scope is a doubt the cascaded classifier must settle first.
                ambiguity_flag: c.ambiguity_flag || scope.decision == switchyard_core::scope::ScopeDecision::Borderline,
                context: None,
                timestamp: now,
            };
            (parsed, "embedded", Some(scope))
        }
    };
    // The caller's preferences (the RAG manager design's `requested_years`, `recent_year_window`, …) reach
    // the agents as the context field `preferences`.
    if let Some(preferences) = request.preferences.filter(|p| p.is_object()) {
        let mut context = match parsed.context.take() {
            Some(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        context.insert("preferences".into(), preferences);
        parsed.context = Some(serde_json::Value::Object(context));
    }
    // The conversation every stage of this turn draws from, counted once here.
    let mut context_event = None;
    if let Some(session) =
        session.as_ref().filter(|s| !s.turns.is_empty() || s.summary.is_some() || !s.notes.is_empty())
    {
        let settings = &deps.manifest.context;
        let snapshot = switchyard_core::context::snapshot(settings, session, &request.text);
        let classifier = switchyard_core::context::select(&snapshot, settings.budgets.classifier).report;
        let agent = switchyard_core::context::select(&snapshot, settings.budgets.agent).report;
        context_event = Some(json!({
            "turn": snapshot.turn,
            "turns_available": snapshot.turns_available,
            "echoes_dropped": snapshot.echoes_dropped,
            "over_budget": snapshot.over_budget,
            "summary_method": snapshot.summary_method,
            "carried_entities": parsed.entities.iter().filter(|e| e.source == switchyard_model::contracts::EntitySource::Context).count(),
            "classifier": classifier,
            "agent": agent,
        }));
        let mut context = match parsed.context.take() {
            Some(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        context.insert("conversation".into(), serde_json::to_value(&snapshot).unwrap_or_default());
        parsed.context = Some(serde_json::Value::Object(context));
    }
    let intent = deps
        .manifest
        .intent(&parsed.intent)
        .ok_or_else(|| invalid("parsed_query.intent", "must be a declared intent"))?;
    // An unsure classification with a cascaded classifier configured is re-classified by the
    // router, which checks the role of the intent it decides (plan::modes); refusing here
    // would answer 403 for a guess.
    // An out-of-scope question (or a borderline one, which the cascade settles) is covered by
    // no intent, so no intent's role applies to it.
    let cascades = deps.manifest.classifier.llm.is_some()
        && deps.manifest.classifier.needs_cascade(parsed.confidence, parsed.ambiguity_flag);
    let unscoped = scope.as_ref().is_some_and(switchyard_core::scope::ScopeCheck::skips_role_check);
    if let Some(role) = intent.required_role.as_ref().filter(|_| !cascades && !unscoped) {
        if !caller.roles.iter().any(|r| r == role) {
            info!(intent = %intent.id, "refused: caller lacks the intent's role");
            return Err(IntakeError::Forbidden { intent: intent.id.clone(), role: role.clone() });
        }
    }
    tracing::Span::current().record("query_id", parsed.query_id.as_str());
    let query = QueryRecord {
        query_id: parsed.query_id.clone(),
        user_id: caller.user_id.clone(),
        session_id: request.session_id.unwrap_or_else(|| parsed.query_id.clone()),
        roles: caller.roles.clone(),
        idempotency_key: idempotency_key.map(str::to_string),
        request_hash,
        manifest_fingerprint: deps.fingerprint().to_string(),
        status: QueryStatus::Accepted,
        version: 0,
        parsed: std::sync::Arc::new(parsed),
        warnings,
        scope,
        plan: None,
        completed: Default::default(),
        accepted_at: now,
        deadline_at: None,
        synth_claimed_at: None,
        outcome: None,
        signal: None,
        approvals: Vec::new(),
        expires_at: deps.expires_at(),
    };
    let route = Detail::object()
        .field("alternatives", &alternatives)
        .field("ambiguity_flag", &query.parsed.ambiguity_flag)
        .field("confidence", &query.parsed.confidence)
        .field("intent", &query.parsed.intent)
        .field("scope", &query.scope.as_ref().map(ScopeDetail::from))
        .field("stage", &stage)
        .finish();
    let mut events = vec![
        deps.event(
            &query,
            Entry::Accepted,
            0,
            "",
            Detail::object().field("session_id", &query.session_id).field("warnings", &query.warnings).finish(),
        ),
        deps.event(&query, Entry::Route, 0, "", route),
    ];
    if let Some(detail) = context_event {
        events.push(deps.event(&query, Entry::Context, 0, "", detail));
    }
    deps.store_manifest().await?;
    match deps.store.create_query(&query, &events).await {
        Ok(()) => {}
        Err(StoreError::ConditionFailed(_)) => {
            if let Some(key) = idempotency_key {
                if let Some(existing) = replay(deps, caller, key, &query.request_hash).await? {
                    return Ok(existing);
                }
            }
            // The id is the caller's own (see `callers_query_id`): another caller's query
            // never holds it.
            return Err(IntakeError::Conflict(format!("query id {} is already in use", query.query_id)));
        }
        Err(e) => return Err(e.into()),
    }
    info!(query_id = %query.query_id, intent = %query.parsed.intent, confidence = query.parsed.confidence, "query accepted");
    send_route_job(deps, &query.query_id).await?;
    Ok(Accepted {
        query_id: query.query_id,
        session_id: query.session_id,
        status: QueryStatus::Accepted,
        intent: query.parsed.intent.clone(),
        confidence: query.parsed.confidence,
        warnings: query.warnings,
        replayed: false,
    })
}

async fn send_route_job(deps: &Deps, query_id: &str) -> Result<(), IntakeError> {
    let job = Job::Route { query_id: query_id.to_string() };
    deps.send(QueueId::route(), job, Duration::ZERO).await.map(|_| ()).map_err(|e| {
        warn!(query_id, error = %e, "route job not sent; a retry with the same idempotency key re-sends it");
        IntakeError::Unavailable(e.to_string())
    })
}

/// The query an idempotency key already created: the same request replays it (re-sending a
/// route job that may have been lost), a different one is a conflict.
async fn replay(deps: &Deps, caller: &Caller, key: &str, request_hash: &str) -> Result<Option<Accepted>, IntakeError> {
    let Some(query_id) = deps.store.find_idempotency_key(&caller.user_id, key).await? else {
        return Ok(None);
    };
    let Some(query) = deps.store.get_query(&query_id).await? else {
        return Ok(None);
    };
    if query.request_hash != request_hash {
        return Err(IntakeError::Conflict(format!(
            "idempotency key `{key}` was used for a different request (query {query_id})"
        )));
    }
    if query.status == QueryStatus::Accepted {
        send_route_job(deps, &query_id).await?;
    }
    Ok(Some(Accepted {
        query_id,
        session_id: query.session_id,
        status: query.status,
        intent: query.parsed.intent.clone(),
        confidence: query.parsed.confidence,
        warnings: query.warnings,
        replayed: true,
    }))
}

/// What `GET /v1/queries/{id}` returns: the output once written, else the progress so far.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum QueryView {
    /// The query ended.
    Done(Arc<OrchestratorOutput>),
    /// Still running.
    Running {
        /// The query.
        query_id: String,
        /// Where it is (`awaiting_approval` while a tool call waits for a person).
        status: Progress,
        /// The tool call that waits for a person, if one does.
        #[serde(skip_serializing_if = "Option::is_none")]
        pending_approval: Option<crate::ports::PendingApproval>,
        /// Routed intent.
        intent: String,
        /// Handoffs recorded so far out of dispatches sent.
        handoffs: usize,
        /// Dispatches sent so far.
        dispatches: usize,
        /// When the deadline fires.
        #[serde(skip_serializing_if = "Option::is_none")]
        deadline_at: Option<chrono::DateTime<chrono::Utc>>,
    },
}

/// Where a running query is, as callers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Progress {
    /// Recorded; the route job is on its way.
    Accepted,
    /// Planned and dispatched; handoffs are arriving.
    Routed,
    /// A tool call waits for a person's decision (`pending_approval`); the deadline is paused.
    AwaitingApproval,
    /// The answer is being written.
    Synthesizing,
    /// Finished (the output is being read).
    Done,
}

impl Progress {
    fn of(query: &QueryRecord) -> Progress {
        match query.status {
            QueryStatus::Accepted => Progress::Accepted,
            QueryStatus::Routed if query.approvals.iter().any(|a| a.is_pending()) => Progress::AwaitingApproval,
            QueryStatus::Routed => Progress::Routed,
            QueryStatus::Synthesizing => Progress::Synthesizing,
            QueryStatus::Done => Progress::Done,
        }
    }
}

/// The caller's query, or `NotFound` (also for another caller's query: ids do not leak).
pub async fn owned_query(deps: &Deps, caller: &Caller, query_id: &str) -> Result<QueryRecord, IntakeError> {
    if uuid::Uuid::parse_str(query_id).is_err() {
        return Err(IntakeError::NotFound);
    }
    match deps.store.get_query(query_id).await? {
        Some(q) if q.user_id == caller.user_id => Ok(q),
        _ => Err(IntakeError::NotFound),
    }
}

/// The output or progress of the caller's query.
pub async fn view(deps: &Deps, caller: &Caller, query_id: &str) -> Result<QueryView, IntakeError> {
    let query = owned_query(deps, caller, query_id).await?;
    if query.status == QueryStatus::Done {
        if let Some(output) = deps.store.get_output(query_id).await? {
            return Ok(QueryView::Done(output));
        }
    }
    let dispatches = query
        .plan
        .as_ref()
        .map(|p| p.stages.iter().take(p.current_stage + 1).map(|s| s.dispatches.len()).sum::<usize>());
    let handoffs = if query.plan.is_some() { deps.store.list_handoffs(query_id).await?.len() } else { 0 };
    Ok(QueryView::Running {
        status: Progress::of(&query),
        pending_approval: query.approvals.iter().find(|a| a.is_pending()).map(crate::ports::Approval::pending_view),
        query_id: query.query_id,
        intent: query.parsed.intent.clone(),
        handoffs,
        dispatches: dispatches.unwrap_or(0),
        deadline_at: query.deadline_at,
    })
}

/// The caller's event log.
pub async fn events(deps: &Deps, caller: &Caller, query_id: &str) -> Result<Vec<Event>, IntakeError> {
    owned_query(deps, caller, query_id).await?;
    Ok(deps.store.list_events(query_id).await?)
}

/// Wait up to `wait` for the output (the sync mode: `?wait=N`).
pub async fn wait_for_output(
    deps: &Deps,
    query_id: &str,
    wait: Duration,
) -> Result<Option<Arc<OrchestratorOutput>>, StepError> {
    let until = tokio::time::Instant::now() + wait.min(deps.settings.max_wait);
    loop {
        if let Some(output) = deps.store.get_output(query_id).await? {
            return Ok(Some(output));
        }
        if tokio::time::Instant::now() >= until {
            return Ok(None);
        }
        tokio::time::sleep(deps.settings.wait_poll).await;
    }
}
