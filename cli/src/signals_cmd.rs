//! `switchyard feedback QUERY_ID --rating N [--intent I] [--comment C]` and
//! `switchyard signals export|pending --backend aws`: the learning loop's commands that read or
//! write the training signals in the table named in the environment
//! (`eval "$(switchyard setup --backend aws)"`).
//!
//! The memory backend keeps its signals inside the one process that runs `switchyard serve`;
//! there they are read with `GET /v1/signals` and written with `POST /v1/queries/{id}/feedback`,
//! so these commands refuse `--backend memory` with that pointer instead of reading an empty
//! store.

use crate::backend::Backend;
use std::io::Write;
use std::sync::Arc;
use switchyard_aws::AwsSystem;
use switchyard_core::signals::{parse_min_reward, parse_since, ExportFilter};
use switchyard_engine::intake::{Caller, IntakeError};
use switchyard_engine::learning;
use switchyard_engine::ports::Store;
use switchyard_engine::EngineSettings;
use switchyard_model::manifest::Manifest;

/// Signals read per index page by an export.
const EXPORT_PAGE: usize = 200;

fn memory_refused(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} --backend memory: the memory backend keeps signals inside the `switchyard serve` process; \
         use its GET /v1/signals and POST /v1/queries/{{id}}/feedback, or run on --backend aws"
    )
}

async fn system(manifest: Manifest) -> anyhow::Result<AwsSystem> {
    AwsSystem::with_manifest(Arc::new(manifest), EngineSettings::default()).await.map_err(|e| {
        anyhow::anyhow!(
            "{e}\nthese commands read the AWS table named in the environment (eval \"$(switchyard setup --backend aws)\")"
        )
    })
}

/// The feedback a command line gives, as the JSON body the HTTP route takes (so both are
/// checked by the same rules).
pub fn feedback_body(rating: i64, intent: Option<&str>, comment: Option<&str>) -> String {
    let mut body = serde_json::json!({ "rating": rating });
    if let Some(intent) = intent {
        body["correct_intent"] = intent.into();
    }
    if let Some(comment) = comment {
        body["comment"] = comment.into();
    }
    body.to_string()
}

/// `switchyard feedback`: record feedback on a finished query as its owner would. Exit 0 when
/// recorded (the JSON answer on stdout, `replaced` saying whether it replaced earlier feedback),
/// 1 when refused (the reason on stderr).
pub async fn feedback(
    backend: Backend,
    manifest: Manifest,
    query_id: &str,
    body: &str,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    if backend == Backend::Memory {
        return Err(memory_refused("feedback"));
    }
    if uuid::Uuid::parse_str(query_id).is_err() {
        anyhow::bail!("query id: must be a UUID");
    }
    let system = system(manifest).await?;
    let Some(query) = system.store.get_query(query_id).await? else {
        eprintln!("switchyard: query {query_id}: not in the table (never written, or expired)");
        return Ok(1);
    };
    // The operator acts for the query's owner (the HTTP route lets only the owner do this).
    let owner = Caller { user_id: query.user_id.clone(), roles: query.roles.clone() };
    match learning::give_feedback(&system.deps, &owner, query_id, body.as_bytes()).await {
        Ok(recorded) => {
            writeln!(out, "{}", serde_json::to_string(&recorded)?)?;
            Ok(0)
        }
        Err(IntakeError::Invalid(v)) => {
            for e in v.errors {
                eprintln!("switchyard: feedback refused: {}: {}", e.field, e.rule);
            }
            Ok(1)
        }
        Err(IntakeError::Unavailable(reason)) => Err(anyhow::anyhow!("the table is unavailable: {reason}")),
        Err(e) => {
            eprintln!("switchyard: feedback refused: {e}");
            Ok(1)
        }
    }
}

/// Print `store`'s finished signals as JSON lines, newest first.
pub async fn export_from(
    store: &dyn Store,
    manifest: &Manifest,
    since: Option<&str>,
    min_reward: Option<&str>,
    out: &mut impl Write,
) -> anyhow::Result<usize> {
    let filter = ExportFilter {
        since: since.map(parse_since).transpose()?,
        min_reward: min_reward.map(parse_min_reward).transpose()?,
    };
    let records = learning::export(store, manifest, chrono::Utc::now(), filter.since, EXPORT_PAGE).await?;
    let kept = filter.apply(records);
    for record in &kept {
        writeln!(out, "{}", serde_json::to_string(record)?)?;
    }
    Ok(kept.len())
}

/// `switchyard signals export`.
pub async fn export(
    backend: Backend,
    manifest: Manifest,
    since: Option<&str>,
    min_reward: Option<&str>,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    if backend == Backend::Memory {
        return Err(memory_refused("signals export"));
    }
    // Check the flags before reaching for the table.
    since.map(parse_since).transpose()?;
    min_reward.map(parse_min_reward).transpose()?;
    let system = system(manifest.clone()).await?;
    let n = export_from(system.store.as_ref(), &manifest, since, min_reward, out).await?;
    eprintln!("switchyard: exported {n} signal(s)");
    Ok(0)
}

/// `switchyard signals pending --backend aws`: the optimization requests the newest stored
/// signals raise under the manifest's `signals.optimization`, one JSON line each.
pub async fn pending(backend: Backend, manifest: Manifest, out: &mut impl Write) -> anyhow::Result<u8> {
    if backend == Backend::Memory {
        return Err(memory_refused("signals pending"));
    }
    let system = system(manifest.clone()).await?;
    for request in learning::pending_requests(system.store.as_ref(), &manifest, chrono::Utc::now()).await? {
        writeln!(out, "{}", serde_json::to_string(&request)?)?;
    }
    Ok(0)
}
