//! Operator commands on the AWS backend: `switchyard dlq list`, `switchyard dlq redrive`,
//! `switchyard query show ID` and `switchyard query approve|reject ID`.
//!
//! They read the table and queues named in the environment (`switchyard setup --backend aws`
//! prints it; the deployed stack's outputs give the same variables). The memory backend lives
//! inside one process (`ask`, `serve`), so there is nothing for a second process to inspect:
//! these commands are for AWS (or a local endpoint in `AWS_ENDPOINT_URL`) only.

use chrono::{DateTime, Utc};
use std::io::Write;
use std::sync::Arc;
use switchyard_aws::sqs::{DeadLetter, SqsQueue};
use switchyard_aws::AwsSystem;
use switchyard_engine::ports::{QueueId, Store};
use switchyard_engine::EngineSettings;
use switchyard_model::jobs::JobMessage;
use switchyard_model::manifest::Manifest;

/// A decision from the command line.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Approve (else reject).
    pub approve: bool,
    /// Why.
    pub note: String,
    /// Edited arguments (approve only), as JSON text.
    pub arguments: Option<String>,
}

/// Decide the tool call query `query_id` waits for, as the operator (`$USER`): the AWS
/// credentials that reach the table are the authority here, so no role is asked for.
pub async fn query_decide(
    manifest: Manifest,
    query_id: &str,
    verdict: Verdict,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    if uuid::Uuid::parse_str(query_id).is_err() {
        anyhow::bail!("query id `{}`: must be a UUID", shorten(query_id, 40));
    }
    let arguments = match &verdict.arguments {
        None => None,
        Some(text) => Some(
            serde_json::from_str::<serde_json::Value>(text)
                .map_err(|e| anyhow::anyhow!("--arguments: not JSON ({e})"))?,
        ),
    };
    let mut body = serde_json::json!({
        "decision": if verdict.approve { "approve" } else { "reject" },
        "note": verdict.note,
    });
    if let Some(arguments) = arguments {
        body["arguments"] = arguments;
    }
    let decision = switchyard_engine::approval::Decision::parse(body.to_string().as_bytes())
        .map_err(|e| anyhow::anyhow!("{}", describe(&e)))?;
    let system = system(manifest).await?;
    let operator = format!("operator:{}", std::env::var("USER").unwrap_or_else(|_| "cli".into()));
    let decider = switchyard_engine::approval::Decider::Operator(&operator);
    match switchyard_engine::approval::decide(&system.deps, decider, query_id, &decision).await {
        Ok(d) => {
            writeln!(
                out,
                "query {}: {} {} at {}; the query resumes",
                d.query_id,
                d.decision.as_str(),
                d.tool,
                when(Some(d.decided_at))
            )?;
            Ok(0)
        }
        Err(e) => {
            writeln!(out, "query {query_id}: {}", describe(&e))?;
            Ok(1)
        }
    }
}

/// An engine refusal as one line (field errors spelled out).
fn describe(e: &switchyard_engine::intake::IntakeError) -> String {
    match e {
        switchyard_engine::intake::IntakeError::Invalid(v) => {
            v.errors.iter().map(|f| format!("{}: {}", f.field, f.rule)).collect::<Vec<_>>().join("; ")
        }
        other => other.to_string(),
    }
}

/// Longest event detail shown on one timeline line.
const DETAIL_CHARS: usize = 140;
/// Longest answer text shown.
const ANSWER_CHARS: usize = 600;

async fn system(manifest: Manifest) -> anyhow::Result<AwsSystem> {
    AwsSystem::with_manifest(Arc::new(manifest), EngineSettings::default()).await.map_err(|e| {
        anyhow::anyhow!(
            "{e}\nthese commands read the AWS table and queues named in the environment \
             (eval \"$(switchyard setup --backend aws)\"); the memory backend has nothing to inspect"
        )
    })
}

/// The dead-letter queues selected by `--queue` (`tier-2`, `tier-2-dlq`, or all).
fn selected(queue: &SqsQueue, name: Option<&str>) -> anyhow::Result<Vec<QueueId>> {
    let all = queue.dead_letter_queues();
    if all.is_empty() {
        anyhow::bail!("no dead-letter queue URL in the environment (SWITCHYARD_QUEUE_*_DLQ); run `switchyard setup --backend aws`");
    }
    let Some(name) = name else { return Ok(all) };
    let want = name.trim_end_matches("-dlq");
    let found: Vec<QueueId> = all.iter().copied().filter(|q| q.name().trim_end_matches("-dlq") == want).collect();
    if found.is_empty() {
        let names: Vec<String> = all.iter().map(|q| q.name().trim_end_matches("-dlq").to_string()).collect();
        anyhow::bail!("--queue `{name}`: no such queue; choose one of {}", names.join(", "));
    }
    Ok(found)
}

/// The query a dead letter belongs to, and the most recent failure known for it.
async fn diagnose(store: &dyn Store, letter: &DeadLetter) -> (String, String) {
    let job = match JobMessage::parse(&letter.body) {
        Ok(job) => job,
        Err(e) => return ("-".to_string(), format!("malformed message: {e}")),
    };
    let query_id = job.query_id().to_string();
    let error = match store.get_query(&query_id).await {
        Err(e) => format!("could not read the query: {e}"),
        Ok(None) => "the query is not in the table (expired, or never written): the job cannot run".to_string(),
        Ok(Some(query)) => {
            let handoffs = store.list_handoffs(&query_id).await.unwrap_or_default();
            let failed = handoffs.iter().rev().find(|h| h.handoff.errors.error_message.is_some());
            match failed {
                Some(h) => format!(
                    "agent `{}` {:?}: {}",
                    h.handoff.agent_id,
                    h.handoff.execution.status,
                    h.handoff.errors.error_message.as_deref().unwrap_or_default()
                ),
                None => format!(
                    "no failure recorded in the table (query status {:?}); the function's log has the reason under message id {}",
                    query.status, letter.message_id
                ),
            }
        }
    };
    (query_id, error)
}

fn when(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_else(|| "-".into())
}

/// `switchyard dlq list`.
pub async fn dlq_list(
    manifest: Manifest,
    queue: Option<&str>,
    limit: usize,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    let system = system(manifest).await?;
    for dlq in selected(&system.queue, queue)? {
        let letters = system.queue.peek_dead_letters(dlq, limit).await?;
        let oldest = letters.messages.iter().filter_map(|m| m.sent_at).min();
        writeln!(
            out,
            "{:<12} {} message{}  oldest {}",
            dlq.name(),
            letters.count,
            plural(letters.count),
            when(oldest)
        )?;
        for letter in &letters.messages {
            let (query_id, error) = diagnose(system.store.as_ref(), letter).await;
            writeln!(
                out,
                "  {}  query {query_id}  sent {}  receives {}\n    last error: {error}",
                letter.message_id,
                when(letter.sent_at),
                letter.receive_count
            )?;
        }
        if (letters.messages.len() as u64) < letters.count {
            writeln!(out, "  … {} more (raise --limit)", letters.count - letters.messages.len() as u64)?;
        }
    }
    Ok(0)
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `switchyard dlq redrive [--queue Q]`.
pub async fn dlq_redrive(manifest: Manifest, queue: Option<&str>, out: &mut impl Write) -> anyhow::Result<u8> {
    let system = system(manifest).await?;
    for dlq in selected(&system.queue, queue)? {
        let moved = system.queue.redrive(dlq).await?;
        let source = QueueId { kind: dlq.kind, dead_letter: false };
        writeln!(out, "{}: {moved} message{} moved back to {}", dlq.name(), plural(moved as u64), source.name())?;
    }
    Ok(0)
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// `switchyard query show ID`: the record, dispatches' handoffs, the event log as a timeline,
/// and the output.
pub async fn query_show(manifest: Manifest, query_id: &str, out: &mut impl Write) -> anyhow::Result<u8> {
    if uuid::Uuid::parse_str(query_id).is_err() {
        anyhow::bail!("query id `{}`: must be a UUID", shorten(query_id, 40));
    }
    let system = system(manifest).await?;
    let store = system.store.as_ref();
    let Some(query) = store.get_query(query_id).await? else {
        writeln!(out, "query {query_id}: not in the table (never written, or expired)")?;
        return Ok(1);
    };
    writeln!(out, "query {query_id}")?;
    writeln!(out, "  user {}  session {}  roles [{}]", query.user_id, query.session_id, query.roles.join(", "))?;
    writeln!(
        out,
        "  intent {} ({:.2})  status {:?}  outcome {}",
        query.parsed.intent,
        query.parsed.confidence,
        query.status,
        query.outcome.map(|o| format!("{o:?}")).unwrap_or_else(|| "-".into())
    )?;
    writeln!(out, "  accepted {}  deadline {}", when(Some(query.accepted_at)), when(query.deadline_at))?;
    for warning in &query.warnings {
        writeln!(out, "  warning: {warning}")?;
    }
    for a in &query.approvals {
        let state = match &a.decision {
            None => format!("waits until {}", when(Some(a.expires_at))),
            Some(d) => format!("{} by {} at {}", d.verdict.as_str(), d.decided_by, when(Some(d.decided_at))),
        };
        writeln!(out, "  approval {} {}  {state}", a.tool, shorten(&a.arguments.to_string(), DETAIL_CHARS))?;
    }

    writeln!(out, "\ntimeline")?;
    let events = store.list_events(query_id).await?;
    for event in &events {
        let offset = (event.at - query.accepted_at).num_milliseconds();
        let kind =
            serde_json::to_value(event.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let detail =
            if event.detail.is_null() { String::new() } else { shorten(&event.detail.to_string(), DETAIL_CHARS) };
        writeln!(out, "  {:>+8} ms  {kind:<10} {detail}", offset)?;
    }
    if events.is_empty() {
        writeln!(out, "  (no events)")?;
    }

    writeln!(out, "\nhandoffs")?;
    let handoffs = store.list_handoffs(query_id).await?;
    for h in &handoffs {
        let a = &h.handoff;
        let fallback = h.fallback_for.as_ref().map(|f| format!("  fallback for {f}")).unwrap_or_default();
        writeln!(
            out,
            "  {} tier {}  {:?}  attempts {}  {} ms  confidence {:.2}{fallback}",
            a.agent_id, a.agent_tier, a.execution.status, h.attempts, a.execution.latency_ms, a.result.confidence
        )?;
        if let Some(error) = &a.errors.error_message {
            writeln!(out, "    error: {}", shorten(error, DETAIL_CHARS))?;
        }
    }
    if handoffs.is_empty() {
        writeln!(out, "  (none)")?;
    }

    writeln!(out, "\noutput")?;
    match store.get_output(query_id).await? {
        Some(o) => {
            let band =
                o.final_reason.and_then(|b| serde_json::to_value(b).ok()).map(|v| v.to_string()).unwrap_or_default();
            writeln!(
                out,
                "  {:?}  confidence {:.2} {band}  {} ms  agents [{}]",
                o.status,
                o.response_confidence,
                o.total_latency_ms,
                o.agents_dispatched.join(", ")
            )?;
            writeln!(out, "  {}", shorten(&o.response_text, ANSWER_CHARS))?;
            for caveat in &o.caveats {
                writeln!(out, "  caveat: {caveat}")?;
            }
        }
        None => writeln!(out, "  (not written yet)")?,
    }
    Ok(0)
}
