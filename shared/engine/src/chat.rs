//! The OpenAI-compatible chat completions API: `POST /v1/chat/completions` and `GET /v1/models`,
//! so any client of that protocol (the official SDKs, chat front ends, evaluation tools) puts
//! Switchyard behind it by changing its base URL (docs/openai-compatible.md).
//!
//! - **The manifest is the model.** `GET /v1/models` lists one model whose id is the manifest's
//!   `name`; a request names it in `model`.
//! - **Messages are the conversation.** The last message is the turn (it must be the user's);
//!   the user and assistant messages before it are the session's earlier turns. They continue
//!   the caller's session when it holds exactly those turns, and replace its turns when it does
//!   not (the client's messages are the truth), so a follow-up is classified with the questions
//!   before it ([`switchyard_core::classify::PriorTurn`]). The session is the caller's own, as everywhere:
//!   its id is the request's `session_id` extension, or derived from the conversation's first
//!   exchange, and another caller's use of the same id is another session.
//! - **One query per turn.** The turn goes through [`super::intake::submit`] like any
//!   `POST /v1/queries`: validation, classification, roles, the route job. A non-streamed request
//!   waits for the output (up to `max_wait`) and answers one `chat.completion`; a streamed one
//!   follows the query's event log ([`super::follow::follow_events`]) and sends
//!   `chat.completion.chunk` events ending with `data: [DONE]`.
//! - **Which tokens are the answer.** `delta.content` carries the text of the stream that will
//!   be the answer, live, when the manifest says which one that is: the synthesis agent's stream
//!   when one answers the intent, else the primary agent's stream when it answers alone (no
//!   critic, pipeline, supporting agents, deliberation, merge or reflection). Drafts that a
//!   critic or a synthesis may still replace go to `delta.reasoning_content`, labelled with
//!   their agent, and the accepted answer follows as `content` once the query ends. At the end
//!   the answer is reconciled: whatever of `response_text` was not sent yet is sent, so the
//!   joined `content` deltas equal the output's `response_text`; in the one case they cannot
//!   (a stream already sent was abandoned: an attempt retried after a failure, a synthesis that
//!   fell back), the final chunk says `"revised": true` and carries the answer.
//! - **Nothing is lost.** Citations, confidence band, intent, query and session ids travel in
//!   a `switchyard` object on the completion and on the final chunk; `usage` counts the tokens
//!   the query's agents reported.

use super::deps::Deps;
use super::follow::{follow_events, FollowSettings, Followed};
use super::intake::{self, Accepted, Caller, IntakeError};
use crate::ports::{Event, EventKind, Store, StoreError};
use crate::telemetry::trace::fnv_hex;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use switchyard_core::context::{self, SessionRecord, TurnInput, QUESTION_CHARS};
use switchyard_model::contracts::{OrchestratorOutput, OutputStatus};
use switchyard_model::manifest::Manifest;

mod request;
pub use request::{model_id, models, parse_request, ChatRequest};

/// Largest request body, in bytes (the history travels in every request).
pub const MAX_CHAT_BODY_BYTES: usize = 512 * 1024;
/// Most entries in `messages`.
pub const MAX_MESSAGES: usize = 256;
/// Longest earlier message, in characters (the turn itself has the manifest's
/// `query.max_query_chars`).
pub const MAX_MESSAGE_CHARS: usize = 32 * 1024;

/// Parameters accepted and ignored: the manifest sets each agent's model settings, so a chat
/// client cannot override them; they are reported back in `switchyard.ignored_parameters`.
pub const IGNORED_PARAMETERS: [&str; 13] = [
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "stop",
    "seed",
    "user",
    "metadata",
    "store",
    "service_tier",
    "reasoning_effort",
];

/// Parameters refused with a 400 that says why: each would change what the client gets back
/// in a way Switchyard does not do.
const REFUSED_PARAMETERS: [(&str, &str); 9] = [
    ("tools", "is not supported: Switchyard's agents and their tools are declared in routing.yaml"),
    ("functions", "is not supported: Switchyard's agents and their tools are declared in routing.yaml"),
    ("function_call", "is not supported: no functions are offered"),
    ("top_logprobs", "is not supported: agents' log probabilities are not relayed"),
    ("audio", "is not supported: answers are text"),
    ("prediction", "is not supported"),
    ("web_search_options", "is not supported: retrieval is configured per route in routing.yaml"),
    ("logit_bias", "is not supported: the manifest sets each agent's model settings"),
    ("response_format", "is not supported except {\"type\": \"text\"}: answers are Switchyard outputs"),
];

/// The session a request continues: its `session_id`, or one derived from the conversation's
/// first exchange (stable across the requests of one conversation), or none (a first turn
/// starts a new session named after its query).
pub fn session_for(request: &ChatRequest) -> Option<String> {
    request
        .session_id
        .clone()
        .or_else(|| request.prior.first().map(|(q, a)| format!("chat-{}", fnv_hex(format!("{q}\u{1f}{a}").as_bytes()))))
}

/// Whether `session` holds exactly the exchanges `prior` (its retained turns match their
/// counterparts as stored: clipped like the session clips them).
fn holds(manifest: &Manifest, session: &SessionRecord, prior: &[(String, String)]) -> bool {
    session.turn_count == prior.len() as u64
        && session.turns.iter().all(|t| {
            let Some((q, a)) = usize::try_from(t.seq).ok().and_then(|seq| prior.get(seq.wrapping_sub(1))) else {
                return false;
            };
            context::clip(q, QUESTION_CHARS) == t.question
                && context::clip(a, manifest.context.answer_chars) == t.answer
        })
}

/// Attempts at writing the session from the messages before giving up with 409.
const SEED_ATTEMPTS: usize = 4;

/// Make the caller's session `session_id` hold the exchanges of `prior`: kept when it does,
/// rewritten from the messages when it does not (each question classified in the context of
/// the ones before it, as its turn would have been). No earlier messages: the session is
/// used as stored.
pub async fn sync_session(
    deps: &Deps,
    caller: &Caller,
    session_id: &str,
    prior: &[(String, String)],
) -> Result<(), IntakeError> {
    if prior.is_empty() {
        return Ok(());
    }
    let manifest = &deps.manifest;
    for _ in 0..SEED_ATTEMPTS {
        let stored = deps.store.get_session(&caller.user_id, session_id).await?;
        if stored.as_ref().is_some_and(|s| holds(manifest, s, prior)) {
            return Ok(());
        }
        let expected = stored.as_ref().map_or(0, |s| s.version);
        let now = deps.clock.now();
        let ttl = manifest.context.session_ttl.unwrap_or(manifest.query.record_ttl);
        let expires_at = now.timestamp() + (ttl.as_millis() / 1_000) as i64;
        let mut session = SessionRecord::new(&caller.user_id, session_id, now, expires_at);
        for (i, (question, answer)) in prior.iter().enumerate() {
            // As intake reads a turn: one after a question for missing entities may supply them.
            let c = deps.classifier().resume(question, &session.prior_turns(), session.pending_slots(), now);
            let scope = switchyard_core::scope::check(manifest, c.in_scope, c.scope_score);
            let out_of_scope = scope.decision == switchyard_core::scope::ScopeDecision::OutOfScope;
            // A request that lacked a required entity was answered with a question for it: the
            // next message may supply it, as in a stored session.
            let missing_entities = if out_of_scope {
                Vec::new()
            } else {
                switchyard_core::slots::missing(manifest, &c.intent, &c.entities)
            };
            let input = TurnInput {
                query_id: format!("{session_id}-m{i}"),
                question: question.clone(),
                intent: c.intent,
                entities: c.entities,
                answer: answer.clone(),
                status: OutputStatus::Success,
                out_of_scope,
                missing_entities,
                unsure: false,
                preferences: None,
            };
            let compacted = context::append_turn(&manifest.context, &mut session, input, now, expires_at);
            if let Some(through) = compacted.last().map(|t| t.seq) {
                let lines = context::extractive_lines(&compacted);
                context::merge_summary(&manifest.context, &mut session, lines, through, "extractive");
            }
        }
        match deps.store.put_session(&session, expected).await {
            Ok(()) => {
                tracing::info!(session_id, turns = prior.len(), "session written from the request's messages");
                return Ok(());
            }
            Err(StoreError::ConditionFailed(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(IntakeError::Conflict(format!("session {session_id} kept changing while its messages were written; retry")))
}

/// Start the turn: the session made to hold the earlier messages, then the query submitted.
async fn start(
    deps: &Deps,
    caller: &Caller,
    request: &ChatRequest,
    idempotency_key: Option<&str>,
) -> Result<Accepted, IntakeError> {
    let session_id = session_for(request);
    if let Some(id) = &session_id {
        sync_session(deps, caller, id, &request.prior).await?;
    }
    let mut body = json!({ "query": request.turn });
    if let Some(id) = session_id {
        body["session_id"] = json!(id);
    }
    if let Some(p) = &request.preferences {
        body["preferences"] = p.clone();
    }
    let body = serde_json::to_vec(&body).map_err(|e| IntakeError::Unavailable(e.to_string()))?;
    intake::submit(deps, caller, &body, idempotency_key).await
}

/// Tokens the query's agents reported: in their handoffs, and the synthesis agent's in the
/// output's `orchestration.synthesis` report.
async fn usage_of(store: &dyn Store, output: &OrchestratorOutput) -> Value {
    let query_id = output.query_id.as_str();
    let synthesis = output.orchestration.as_ref().map(|o| &o["synthesis"]);
    let reported = |key: &str| synthesis.and_then(|s| s[key].as_u64()).unwrap_or(0);
    let (mut prompt, mut completion) = (reported("input_tokens"), reported("output_tokens"));
    let mut total = prompt + completion;
    if let Ok(handoffs) = store.list_handoffs(query_id).await {
        for h in handoffs {
            let m = &h.handoff.metadata;
            prompt += m.input_tokens;
            completion += m.output_tokens;
            total += m.tokens_consumed.max(m.input_tokens + m.output_tokens);
        }
    }
    json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total.max(prompt + completion) })
}

/// The `switchyard` extension object: what the answer is, beyond its text.
fn extension(output: &OrchestratorOutput, ignored: &[String]) -> Value {
    let links = format!("/v1/queries/{}", output.query_id);
    json!({
        "query_id": output.query_id,
        "session_id": output.session_id,
        "intent": output.intent,
        "status": output.status,
        "confidence": output.response_confidence,
        "confidence_band": output.final_reason,
        "citations": output.citations,
        "caveats": output.caveats,
        "warnings": output.warnings,
        "entities": output.entities,
        "follow_up_suggestions": output.follow_up_suggestions,
        "ignored_parameters": ignored,
        "links": { "self": links, "events": format!("{links}/events"), "feedback": format!("{links}/feedback") },
    })
}

/// The completion id of a query.
fn completion_id(query_id: &str) -> String {
    format!("chatcmpl-{query_id}")
}

/// A non-streamed request: submit the turn, wait for the output, answer one `chat.completion`.
pub async fn complete(
    deps: &Deps,
    caller: &Caller,
    request: &ChatRequest,
    idempotency_key: Option<&str>,
) -> Result<Value, IntakeError> {
    let accepted = start(deps, caller, request, idempotency_key).await?;
    let created = deps.clock.now().timestamp();
    let output = intake::wait_for_output(deps, &accepted.query_id, deps.settings.max_wait)
        .await
        .map_err(|e| IntakeError::Unavailable(e.to_string()))?
        .ok_or_else(|| IntakeError::NotReady { query_id: accepted.query_id.clone(), waited: deps.settings.max_wait })?;
    let usage = usage_of(deps.store.as_ref(), &output).await;
    Ok(json!({
        "id": completion_id(&output.query_id),
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "system_fingerprint": deps.fingerprint(),
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": output.response_text, "refusal": null },
            "finish_reason": "stop",
            "logprobs": null,
        }],
        "usage": usage,
        "switchyard": extension(&output, &request.ignored),
    }))
}

/// Which token stream's text is sent live as `content`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentLane {
    /// The synthesis agent's stream (it writes the answer).
    Synthesis,
    /// The primary agent's stream (it answers alone).
    SoleAgent,
    /// No stream is known to be the answer until the query ends (a critic, a pipeline,
    /// several agents): drafts go to `reasoning_content`.
    AtTheEnd,
}

/// The lane of an intent under `manifest`.
pub fn content_lane(manifest: &Manifest, intent: &str) -> ContentLane {
    if manifest.synthesis.as_ref().is_some_and(|s| s.intents.is_empty() || s.intents.iter().any(|i| i == intent)) {
        return ContentLane::Synthesis;
    }
    let Some(route) = manifest.intent(intent).map(|i| &i.route) else { return ContentLane::AtTheEnd };
    let alone = route.primary.is_some()
        && route.pipeline.is_none()
        && route.supporting.is_empty()
        && route.deliberate.is_none()
        && route.critic.is_none()
        && route.merge.is_none()
        && route.reflection.is_none();
    if alone {
        ContentLane::SoleAgent
    } else {
        ContentLane::AtTheEnd
    }
}

/// A token stream being relayed: its pieces in `seq` order.
#[derive(Debug, Default)]
struct Relay {
    next_seq: u64,
    pending: BTreeMap<u64, String>,
}

impl Relay {
    /// Add a piece; the text now in order, if any.
    fn take(&mut self, seq: u64, text: String) -> String {
        if seq >= self.next_seq {
            self.pending.insert(seq, text);
        }
        let mut out = String::new();
        while let Some(t) = self.pending.remove(&self.next_seq) {
            out.push_str(&t);
            self.next_seq += 1;
        }
        out
    }
}

/// The state of one streamed completion.
struct ChunkStream {
    store: Arc<dyn Store>,
    follower: BoxStream<'static, Followed>,
    query_id: String,
    model: String,
    created: i64,
    fingerprint: String,
    include_usage: bool,
    ignored: Vec<String>,
    lane: ContentLane,
    /// The stream relayed as `content`, once chosen.
    content_stream: Option<String>,
    content_sent: String,
    relays: BTreeMap<String, Relay>,
    /// The last stream whose text went to `reasoning_content` (a label precedes a change).
    reasoning_stream: Option<String>,
    /// Streams seen per agent on `reasoning_content`.
    drafts: BTreeMap<String, u32>,
    /// The label of each stream sent on `reasoning_content`.
    labels: BTreeMap<String, String>,
    out: VecDeque<Bytes>,
    finished: bool,
}

fn data(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

impl ChunkStream {
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": completion_id(&self.query_id),
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": null }],
        })
    }

    fn push_delta(&mut self, delta: Value) {
        let chunk = self.chunk(delta, None);
        self.out.push_back(data(&chunk));
    }

    fn error(&mut self, code: &str, message: String) {
        let error = json!({ "error": { "message": message, "type": "server_error", "param": null, "code": code } });
        self.out.push_back(data(&error));
        self.out.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        self.finished = true;
    }

    /// Whether a token event of this stream is the answer's.
    fn is_content(&mut self, stream: &str, synthesis: bool) -> bool {
        if let Some(chosen) = &self.content_stream {
            return chosen == stream;
        }
        let eligible = match self.lane {
            ContentLane::Synthesis => synthesis,
            ContentLane::SoleAgent => !synthesis,
            ContentLane::AtTheEnd => false,
        };
        if eligible {
            self.content_stream = Some(stream.to_string());
        }
        eligible
    }

    fn on_token(&mut self, event: &Event) {
        let d = &event.detail;
        let (Some(stream), Some(seq), Some(text)) = (d["stream"].as_str(), d["seq"].as_u64(), d["text"].as_str())
        else {
            return;
        };
        let synthesis = d["synthesis"].as_bool().unwrap_or(false);
        let ready = self.relays.entry(stream.to_string()).or_default().take(seq, text.to_string());
        if ready.is_empty() {
            return;
        }
        if self.is_content(stream, synthesis) {
            self.content_sent.push_str(&ready);
            self.push_delta(json!({ "content": ready }));
            return;
        }
        let mut reasoning = String::new();
        if self.reasoning_stream.as_deref() != Some(stream) {
            let label = match self.labels.get(stream) {
                Some(label) => label.clone(),
                None => {
                    let agent = d["agent"].as_str().unwrap_or("agent").to_string();
                    let label = if synthesis {
                        format!("[{agent}, synthesis]")
                    } else {
                        // Each new stream of an agent is its next draft (a revision or a retry).
                        let drafts = self.drafts.entry(agent.clone()).or_default();
                        *drafts += 1;
                        format!("[{agent}, draft {drafts}]")
                    };
                    self.labels.insert(stream.to_string(), label.clone());
                    label
                }
            };
            if self.reasoning_stream.is_some() {
                reasoning.push_str("\n\n");
            }
            reasoning.push_str(&label);
            reasoning.push('\n');
            self.reasoning_stream = Some(stream.to_string());
        }
        reasoning.push_str(&ready);
        self.push_delta(json!({ "reasoning_content": reasoning }));
    }

    async fn on_final(&mut self) {
        let mut output = None;
        for _ in 0..3 {
            match self.store.get_output(&self.query_id).await {
                Ok(Some(o)) => {
                    output = Some(o);
                    break;
                }
                Ok(None) | Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        }
        let Some(output) = output else {
            let id = self.query_id.clone();
            self.error("unavailable", format!("the answer could not be read; it is at GET /v1/queries/{id}"));
            return;
        };
        let answer = output.response_text.as_str();
        let revised = !answer.starts_with(self.content_sent.as_str());
        if !revised && answer.len() > self.content_sent.len() {
            let rest = answer[self.content_sent.len()..].to_string();
            self.content_sent.push_str(&rest);
            self.push_delta(json!({ "content": rest }));
        }
        let usage = usage_of(self.store.as_ref(), &output).await;
        let mut extension = extension(&output, &self.ignored);
        extension["revised"] = json!(revised);
        if revised {
            extension["response_text"] = json!(output.response_text);
        }
        let mut last = self.chunk(json!({}), Some("stop"));
        last["switchyard"] = extension;
        self.out.push_back(data(&last));
        if self.include_usage {
            let mut usage_chunk = self.chunk(json!({}), None);
            usage_chunk["choices"] = json!([]);
            usage_chunk["usage"] = usage;
            self.out.push_back(data(&usage_chunk));
        }
        self.out.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        self.finished = true;
    }

    async fn on_item(&mut self, item: Followed) {
        match item {
            Followed::Opened(_) => self.push_delta(json!({ "role": "assistant", "content": "" })),
            Followed::Heartbeat => self.out.push_back(Bytes::from_static(b": keep-alive\n\n")),
            Followed::TimeLimit => {
                let id = self.query_id.clone();
                self.error(
                    "timeout",
                    format!("the stream reached its time limit before the answer; it will be at GET /v1/queries/{id}"),
                );
            }
            Followed::Unavailable => {
                let id = self.query_id.clone();
                self.error(
                    "unavailable",
                    format!("the query's event log cannot be read; the answer will be at GET /v1/queries/{id}"),
                );
            }
            Followed::Events(events) => {
                for event in &events {
                    match event.kind {
                        EventKind::Token => self.on_token(event),
                        EventKind::Final => {
                            self.on_final().await;
                            return;
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// A streamed request: submit the turn (every refusal is an ordinary error, before the first
/// byte), then `chat.completion.chunk` events as the query's log is written, until
/// `data: [DONE]`. `settings` bound the stream (on a buffering API, its wait limit).
pub async fn stream(
    deps: &Deps,
    caller: &Caller,
    request: &ChatRequest,
    idempotency_key: Option<&str>,
    settings: FollowSettings,
) -> Result<BoxStream<'static, Bytes>, IntakeError> {
    let accepted = start(deps, caller, request, idempotency_key).await?;
    let state = ChunkStream {
        store: deps.store.clone(),
        follower: follow_events(deps.store.clone(), accepted.query_id.clone(), None, settings).boxed(),
        query_id: accepted.query_id.clone(),
        model: request.model.clone(),
        created: deps.clock.now().timestamp(),
        fingerprint: deps.fingerprint().to_string(),
        include_usage: request.include_usage,
        ignored: request.ignored.clone(),
        lane: content_lane(&deps.manifest, &accepted.intent),
        content_stream: None,
        content_sent: String::new(),
        relays: BTreeMap::new(),
        reasoning_stream: None,
        drafts: BTreeMap::new(),
        labels: BTreeMap::new(),
        out: VecDeque::new(),
        finished: false,
    };
    Ok(futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(bytes) = s.out.pop_front() {
                return Some((bytes, s));
            }
            if s.finished {
                return None;
            }
            match s.follower.next().await {
                Some(item) => s.on_item(item).await,
                None => {
                    let id = s.query_id.clone();
                    s.error("unavailable", format!("the event log ended before the answer; see GET /v1/queries/{id}"));
                }
            }
        }
    })
    .boxed())
}

/// The OpenAI error shape for an error: `{"error": {message, type, param, code}}`, with
/// Switchyard's code (the same as on every other route) and the first field at fault as `param`.
pub fn error_body(status: i64, code: &str, message: &str, error: &IntakeError) -> Value {
    let kind = match status {
        400 | 405 | 408 | 413 | 421 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        409 => "conflict_error",
        429 => "rate_limit_error",
        _ => "server_error",
    };
    let param = match error {
        IntakeError::Invalid(v) => v.errors.first().map(|e| e.field.clone()),
        _ => None,
    };
    let mut body = json!({ "error": { "message": message, "type": kind, "param": param, "code": code } });
    if let IntakeError::Invalid(v) = error {
        body["error"]["details"] = json!(v.errors);
    }
    body
}

#[cfg(test)]
mod tests;
