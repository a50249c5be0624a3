//! `switchyard setup --backend aws`: create the table and queues a manifest needs (each queue
//! with its dead-letter queue and redrive policy) on the configured endpoint, from the same
//! topology the SAM template is rendered from, and print the environment the functions read.

use crate::backend::Backend;
use std::io::Write;
use switchyard_aws::sdk::{aws_config_from_env, ensure_resources};
use switchyard_model::manifest::Manifest;
use switchyard_model::topology::Topology;

/// Create the resources (idempotent) and write `export NAME=value` lines to `out`.
pub async fn run(
    backend: Backend,
    manifest: &Manifest,
    table: &str,
    prefix: &str,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    if backend == Backend::Memory {
        writeln!(out, "# the memory backend needs no setup")?;
        return Ok(0);
    }
    let config = aws_config_from_env().await;
    let topology = Topology::for_manifest(manifest);
    let urls = ensure_resources(
        &aws_sdk_dynamodb::Client::new(&config),
        &aws_sdk_sqs::Client::new(&config),
        &topology,
        table,
        prefix,
    )
    .await?;
    writeln!(
        out,
        "# Switchyard resources for manifest `{}` (table, {} queues, each with a DLQ)",
        manifest.name,
        topology.queues.len()
    )?;
    for line in urls.export_lines() {
        writeln!(out, "{line}")?;
    }
    Ok(0)
}
