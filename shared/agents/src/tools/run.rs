//! The tool loop of one attempt of an `llm` agent.
//!
//! The model is offered the agent's tools (those the caller's roles allow) and answers with
//! calls or with its final answer. Each turn's calls run in parallel; each is checked first
//! (a known tool, arguments matching its schema, the caller's role), made under its own
//! timeout inside what is left of the attempt's, and its result — or what went wrong: an
//! unknown tool, bad arguments, a tool error, a timeout — goes back to the model as the
//! call's result, cut to the source's limit with a marker. Nothing a tool does ends the
//! attempt, except a store that cannot record a write call before it is made or log its
//! result after.
//!
//! A `write` call is claimed in the store first (keyed by dispatch id and the call's index
//! among the dispatch's write calls), made only by the claimer, and its outcome recorded
//! after. A later delivery of the same dispatch that reaches a recorded call gives the
//! recorded result back instead of calling again; a record without an outcome (the worker
//! stopped mid-call) is reported `unknown` with the call's idempotency key, never repeated;
//! while its claimer may still be making the call (a duplicate delivery running beside this
//! one), the loop waits for the claimer's outcome first.
//!
//! After `max_tool_calls` calls the model is asked once more with no tools offered, and the
//! answer carries a caveat saying so.

use super::{ToolBox, ToolError, ToolSpec};
use crate::provider::{
    ModelProvider, ModelRequest, ModelResponse, ProviderError, ToolOffer, ToolReply, ToolRequest, Turn,
};
use crate::schema;
use serde_json::Value;
use std::time::Duration;
use switchyard_engine::ports::{
    ApprovalAsk, ApprovalState, StoreError, ToolCallOutcome, ToolCallRecord, ToolCallStatus, ToolCalls, ToolClaim,
    ToolNote,
};
use switchyard_model::contracts::AgentDispatch;
use switchyard_model::manifest::Effect;
use tokio::time::Instant;
use tracing::Instrument;

/// What one attempt's loop is given.
pub struct ToolLoop<'a> {
    /// The model.
    pub provider: &'a dyn ModelProvider,
    /// The agent's request (system prompt, prompt, schema, budget).
    pub request: &'a ModelRequest,
    /// The process's tool sources.
    pub toolbox: &'a ToolBox,
    /// The agent's tools.
    pub specs: &'a [ToolSpec],
    /// The dispatch's records and events (none: write tools are not called).
    pub calls: Option<&'a dyn ToolCalls>,
    /// The dispatch.
    pub dispatch: &'a AgentDispatch,
    /// The attempt, from 1.
    pub attempt: u32,
    /// Most calls in this attempt.
    pub max_tool_calls: u32,
    /// When the attempt's time runs out.
    pub deadline: Instant,
    /// Retries of a throttled model request, and the first wait.
    pub throttle: (u32, Duration),
}

impl std::fmt::Debug for ToolLoop<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolLoop").field("dispatch_id", &self.dispatch.dispatch_id).finish_non_exhaustive()
    }
}

/// The loop's end: the final answer with the usage of every turn, and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOutcome {
    /// The model's final answer; tokens summed over every turn.
    pub response: ModelResponse,
    /// Calls asked for.
    pub calls: u32,
    /// Caveats for the answer (the call limit reached, unknown outcomes).
    pub caveats: Vec<String>,
}

/// Why the loop ended without an answer.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The model could not be asked.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A write call could not be recorded before it was made (so it was not made), or a
    /// call needing approval could not be stored as waiting.
    #[error("a write call could not be recorded before it was made: {0}")]
    Store(#[source] StoreError),
    /// The result of a write call could not be written to the query's event log: the
    /// attempt ends (a later one replays the recorded outcome and logs it).
    #[error("the result of a write call could not be logged: {0}")]
    Unlogged(#[source] StoreError),
    /// A call waits for a person's decision: the attempt ends without an answer, and the
    /// decision resumes the dispatch.
    #[error("a tool call waits for a person's decision")]
    AwaitingApproval,
}

/// What one call came to.
struct Done {
    reply: ToolReply,
    caveat: Option<String>,
    /// The call waits for a person (no result yet).
    waiting: bool,
}

/// Where a planned call stands among the dispatch's calls.
#[derive(Clone, Copy)]
struct Slots {
    /// Position in the attempt.
    index: u32,
    /// Position among the calls recorded once (writes, and calls under approval).
    write: Option<u32>,
    /// Position among the calls under approval.
    approval: Option<u32>,
    /// Past `max_tool_calls`.
    over_limit: bool,
}

impl ToolLoop<'_> {
    /// Run the loop to the final answer.
    pub async fn run(&self) -> Result<LoopOutcome, LoopError> {
        let roles: &[String] = self.calls.map(|c| c.caller_roles()).unwrap_or(&[]);
        let allowed = |s: &ToolSpec| s.required_role.as_ref().is_none_or(|r| roles.contains(r));
        let offers: Vec<ToolOffer> = self
            .specs
            .iter()
            .filter(|s| allowed(s))
            .map(|s| ToolOffer {
                name: s.provider_name.clone(),
                description: s.description.clone(),
                parameters: s.parameters.clone(),
            })
            .collect();
        let mut turns: Vec<Turn> = Vec::new();
        let (mut input_tokens, mut output_tokens) = (0u64, 0u64);
        let mut made = 0u32;
        let mut writes = 0u32;
        let mut approvals = 0u32;
        let mut caveats = Vec::new();
        loop {
            let exhausted = made >= self.max_tool_calls || offers.is_empty();
            let offered: &[ToolOffer] = if exhausted { &[] } else { &offers };
            let turn = self.converse(&turns, offered).await?;
            input_tokens += turn.response.input_tokens;
            output_tokens += turn.response.output_tokens;
            if turn.calls.is_empty() || exhausted {
                if exhausted && made >= self.max_tool_calls && made > 0 {
                    caveats.push(format!(
                        "the agent reached its limit of {} tool calls; the answer was given without further calls",
                        self.max_tool_calls
                    ));
                }
                let mut response = turn.response;
                response.input_tokens = input_tokens;
                response.output_tokens = output_tokens;
                return Ok(LoopOutcome { response, calls: made, caveats });
            }
            let mut planned = Vec::with_capacity(turn.calls.len());
            for call in &turn.calls {
                let index = made;
                made += 1;
                let spec = self.specs.iter().find(|s| s.provider_name == call.name);
                // A call under approval is recorded once like a write: approved, it is made
                // once however often the resumption is delivered.
                let write = spec.filter(|s| s.effect == Effect::Write || s.needs_approval).map(|_| {
                    writes += 1;
                    writes - 1
                });
                let approval = spec.filter(|s| s.needs_approval).map(|_| {
                    approvals += 1;
                    approvals - 1
                });
                let slots = Slots { index, write, approval, over_limit: index >= self.max_tool_calls };
                planned.push((slots, call, spec));
            }
            let runs = planned.iter().map(|(slots, call, spec)| {
                let span = tracing::info_span!(
                    "tool_call",
                    tool = %spec.map_or(call.name.as_str(), |s| s.name.as_str()),
                    index = slots.index,
                    dispatch_id = %self.dispatch.dispatch_id,
                );
                self.one(*slots, call, *spec, roles).instrument(span)
            });
            let done = futures::future::join_all(runs).await;
            let mut replies = Vec::with_capacity(done.len());
            let mut waiting = false;
            for d in done {
                let d = d?;
                waiting |= d.waiting;
                caveats.extend(d.caveat);
                replies.push(d.reply);
            }
            if waiting {
                return Err(LoopError::AwaitingApproval);
            }
            turns.push(Turn::Calls { text: turn.response.text, calls: turn.calls });
            turns.push(Turn::Results(replies));
        }
    }

    async fn converse(&self, turns: &[Turn], tools: &[ToolOffer]) -> Result<crate::provider::ModelTurn, ProviderError> {
        let (retries, mut wait) = self.throttle;
        let mut throttled = 0;
        loop {
            match self.provider.converse(self.request, turns, tools).await {
                Err(ProviderError::Throttled { retry_after }) if throttled < retries => {
                    throttled += 1;
                    tokio::time::sleep(retry_after.unwrap_or(wait)).await;
                    wait = wait.saturating_mul(2);
                }
                other => return other,
            }
        }
    }

    /// One call: checked, claimed when it writes, made, recorded, logged.
    async fn one(
        &self,
        slots: Slots,
        call: &ToolRequest,
        spec: Option<&ToolSpec>,
        roles: &[String],
    ) -> Result<Done, LoopError> {
        let Slots { index, write, approval, over_limit } = slots;
        let shown_name = spec.map_or_else(|| call.name.clone(), |s| s.name.clone());
        let digest = digest(call);
        if let Some(calls) = self.calls {
            let arguments = spec.and_then(|s| call.arguments.as_ref().ok().map(|a| masked(a, &s.sensitive)));
            // A lost `tool_call` event is logged by the store's side; the call goes on.
            let _ = calls
                .note(
                    self.attempt,
                    ToolNote::Call { index, tool: shown_name.clone(), digest: digest.clone(), arguments },
                )
                .await;
        }
        let started = Instant::now();
        let refused = |text: String| Ok((ToolCallStatus::Refused, text, false, None::<String>, None::<String>));
        let checked: Result<(ToolCallStatus, String, bool, Option<String>, Option<String>), LoopError> = match spec {
            _ if over_limit => refused(format!(
                "not made: the agent's limit of {} tool calls is reached; answer with what you have",
                self.max_tool_calls
            )),
            None => {
                let known: Vec<&str> = self.specs.iter().map(|s| s.provider_name.as_str()).collect();
                refused(format!("unknown tool `{}`; the tools are: {}", call.name, known.join(", ")))
            }
            Some(s) if s.required_role.as_ref().is_some_and(|r| !roles.contains(r)) => refused(format!(
                "`{}` needs the role `{}`, which the caller does not have",
                s.name,
                s.required_role.as_deref().unwrap_or_default()
            )),
            Some(s) => match &call.arguments {
                Err(why) => refused(format!("bad arguments for `{}`: {why}", s.name)),
                Ok(arguments) => match schema::check(&s.parameters, arguments) {
                    Err(why) => refused(format!("bad arguments for `{}`: {why}", s.name)),
                    Ok(()) if s.needs_approval => match self.approved(approval.unwrap_or(0), s, arguments).await? {
                        Decided::Waiting => {
                            let reply = ToolReply {
                                id: call.id.clone(),
                                name: call.name.clone(),
                                content: String::new(),
                                is_error: false,
                            };
                            return Ok(Done { reply, caveat: None, waiting: true });
                        }
                        Decided::Refused(text) => refused(text),
                        Decided::Approved(approved) => match schema::check(&s.parameters, &approved) {
                            Err(why) => refused(format!("bad approved arguments for `{}`: {why}", s.name)),
                            Ok(()) => {
                                let digest = digest_of(&approved);
                                self.make(index, write, s, &approved, &digest).await
                            }
                        },
                    },
                    Ok(()) => self.make(index, write, s, arguments, &digest).await,
                },
            },
        };
        let (status, content, replayed, key, caveat) = checked?;
        let limit = spec.map_or(switchyard_model::manifest::DEFAULT_MAX_RESULT_BYTES, |s| s.result_limit);
        let (content, truncated) = cut(&content, limit);
        let latency_ms = started.elapsed().as_millis() as u64;
        tracing::info!(tool = %shown_name, index, status = status.as_str(), latency_ms, size = content.len(), replayed, "tool call");
        if let Some(calls) = self.calls {
            let recorded_once = key.is_some();
            let logged = calls
                .note(
                    self.attempt,
                    ToolNote::Result {
                        index,
                        tool: shown_name,
                        status,
                        latency_ms,
                        size: content.len(),
                        truncated,
                        replayed,
                        idempotency_key: key,
                    },
                )
                .await;
            // The answer must not rest on a write the query's log does not show.
            if let (Err(e), true) = (logged, recorded_once) {
                return Err(LoopError::Unlogged(e));
            }
        }
        let is_error = status != ToolCallStatus::Ok;
        let reply = ToolReply { id: call.id.clone(), name: call.name.clone(), content, is_error };
        Ok(Done { reply, caveat, waiting: false })
    }

    /// The decision on call `approval` (asked for when not yet asked).
    async fn approved(&self, approval: u32, spec: &ToolSpec, arguments: &Value) -> Result<Decided, LoopError> {
        let Some(calls) = self.calls else {
            return Ok(Decided::Refused(format!(
                "`{}` needs a person's approval, which cannot be asked for here; the call was not made",
                spec.name
            )));
        };
        let Some(settings) = &spec.approval else {
            return Ok(Decided::Refused(format!("`{}` has no approval settings; the call was not made", spec.name)));
        };
        let ask = ApprovalAsk {
            index: approval,
            tool: spec.name.clone(),
            arguments: arguments.clone(),
            role: settings.role.clone(),
            timeout: settings.timeout.as_std(),
        };
        match calls.approval(&ask).await.map_err(LoopError::Store)? {
            None => Ok(Decided::Refused(format!(
                "`{}` needs a person's approval, which cannot be asked for here; the call was not made",
                spec.name
            ))),
            Some(ApprovalState::Pending) => Ok(Decided::Waiting),
            Some(ApprovalState::Approved(approved)) => Ok(Decided::Approved(approved)),
            Some(ApprovalState::Rejected(text)) => Ok(Decided::Refused(text)),
        }
    }

    /// Make a checked call (claimed first when it writes): (status, content, replayed, key,
    /// caveat).
    async fn make(
        &self,
        _index: u32,
        write: Option<u32>,
        spec: &ToolSpec,
        arguments: &Value,
        digest: &str,
    ) -> Result<(ToolCallStatus, String, bool, Option<String>, Option<String>), LoopError> {
        let timeout = spec.timeout.min(self.deadline.saturating_duration_since(Instant::now()));
        let Some(write_index) = write else {
            let (status, content) = self.call_tool(spec, arguments, None, timeout).await;
            return Ok((status, content, false, None, None));
        };
        let Some(calls) = self.calls else {
            return Ok((
                ToolCallStatus::Refused,
                format!(
                    "`{}` changes something and no call record is available here; the call was not made",
                    spec.name
                ),
                false,
                None,
                None,
            ));
        };
        let key = ToolCallRecord::key_for(&self.dispatch.dispatch_id, write_index);
        let record = ToolCallRecord {
            query_id: self.dispatch.query_id.clone(),
            dispatch_id: self.dispatch.dispatch_id.clone(),
            index: write_index,
            tool: spec.name.clone(),
            arguments_digest: digest.to_string(),
            idempotency_key: key.clone(),
            claimed_at: calls.now(),
            outcome: None,
            expires_at: calls.expires_at(),
        };
        let mut claim = calls.claim(&record).await.map_err(LoopError::Store)?;
        // A record without an outcome may be a claimer still making the call (a duplicate
        // delivery running beside this one): wait for its outcome while the claimer can still
        // be alive; after that, the claimer stopped and the outcome is unknown.
        let alive_until = record_claimed_at(&claim, calls)
            + chrono::Duration::from_std(spec.timeout + CLAIMER_GRACE).unwrap_or_else(|_| chrono::Duration::zero());
        while let ToolClaim::Recorded(stored) = &claim {
            if stored.outcome.is_some() || calls.now() >= alive_until || Instant::now() >= self.deadline {
                break;
            }
            tokio::time::sleep(CLAIM_POLL).await;
            claim = calls.claim(&record).await.map_err(LoopError::Store)?;
        }
        let claim = match claim {
            ToolClaim::Recorded(stored) if stored.free_to_call() => ToolClaim::Claimed,
            other => other,
        };
        match claim {
            ToolClaim::Claimed => {
                let (status, content) = self.call_tool(spec, arguments, Some(&key), timeout).await;
                let outcome = ToolCallOutcome { status, content: cut(&content, spec.result_limit).0, completed_at: calls.now() };
                if let Err(e) = calls.finish(&self.dispatch.dispatch_id, write_index, &outcome).await {
                    tracing::warn!(tool = %spec.name, key = %key, error = %e, "the outcome of a write call was not recorded; a redelivery reports it unknown");
                }
                Ok((status, content, false, Some(key), None))
            }
            ToolClaim::Recorded(stored) if stored.tool != spec.name || stored.arguments_digest != digest => Ok((
                ToolCallStatus::Refused,
                format!(
                    "not made: write call {write_index} of this dispatch was already made as `{}` with other arguments (idempotency key {key})",
                    stored.tool
                ),
                false,
                Some(key),
                None,
            )),
            ToolClaim::Recorded(stored) => match stored.outcome {
                Some(outcome) => Ok((outcome.status, outcome.content, true, Some(key), None)),
                None => Ok((
                    ToolCallStatus::Unknown,
                    format!(
                        "the outcome of this call is unknown: an earlier run made it and stopped before recording the result; it is not made again (idempotency key {key})"
                    ),
                    false,
                    Some(key.clone()),
                    Some(format!("the outcome of `{}` is unknown (idempotency key {key}); check it before acting again", spec.name)),
                )),
            },
        }
    }

    async fn call_tool(
        &self,
        spec: &ToolSpec,
        arguments: &Value,
        key: Option<&str>,
        timeout: Duration,
    ) -> (ToolCallStatus, String) {
        if timeout.is_zero() {
            return (ToolCallStatus::Timeout, "not made: the attempt's time is up".into());
        }
        match self.toolbox.call(spec, arguments, key, timeout).await {
            Ok(out) if out.is_error => (ToolCallStatus::Error, format!("the tool reported an error: {}", out.text)),
            Ok(out) => (ToolCallStatus::Ok, out.text),
            Err(ToolError::Timeout(ms)) => (ToolCallStatus::Timeout, format!("the tool did not answer within {ms} ms")),
            Err(e) => {
                tracing::warn!(tool = %spec.name, error = %e, "tool call failed");
                (ToolCallStatus::Error, format!("the tool failed: {e}"))
            }
        }
    }
}

/// How long past a claimed call's own timeout its claimer may still record the outcome
/// before a duplicate delivery takes the claimer as stopped (the store's write latency, with
/// room to spare).
const CLAIMER_GRACE: Duration = Duration::from_millis(1_000);

/// How often a duplicate delivery looks again for the outcome of a call another one claimed.
const CLAIM_POLL: Duration = Duration::from_millis(50);

/// When the call found in the store was claimed (now, for a claim this worker holds).
fn record_claimed_at(claim: &ToolClaim, calls: &dyn ToolCalls) -> chrono::DateTime<chrono::Utc> {
    match claim {
        ToolClaim::Recorded(stored) => stored.claimed_at,
        ToolClaim::Claimed => calls.now(),
    }
}

/// What a person's decision lets a call under approval do.
enum Decided {
    /// Nobody has decided yet.
    Waiting,
    /// Make the call with these arguments (the model's, or the ones the person edited).
    Approved(Value),
    /// Not made; the text is the call's result.
    Refused(String),
}

/// SHA-256 of the call's arguments as canonical JSON (the raw text when they are not JSON).
pub fn digest(call: &ToolRequest) -> String {
    match &call.arguments {
        Ok(v) => digest_of(v),
        Err(_) => hex_sha256(call.raw_arguments.as_bytes()),
    }
}

/// SHA-256 of `arguments` as canonical JSON, hex.
pub fn digest_of(arguments: &Value) -> String {
    hex_sha256(arguments.to_string().as_bytes())
}

fn hex_sha256(bytes: &[u8]) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The arguments with each sensitive field's value replaced.
fn masked(arguments: &Value, sensitive: &[String]) -> Value {
    let mut shown = arguments.clone();
    if let Value::Object(map) = &mut shown {
        for field in sensitive {
            if let Some(v) = map.get_mut(field) {
                *v = Value::String("[sensitive]".into());
            }
        }
    }
    shown
}

/// `text` cut to at most `limit` bytes (at a character boundary) with a marker saying so.
pub fn cut(text: &str, limit: usize) -> (String, bool) {
    if text.len() <= limit {
        return (text.to_string(), false);
    }
    let marker = format!("\n[cut: the result is {} bytes; the first ones are shown]", text.len());
    let mut end = limit.saturating_sub(marker.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    (format!("{}{marker}", &text[..end]), true)
}
