//! `switchyard tools list [--manifest M]`: connects to every tool source of the manifest
//! and prints each tool with its effect, approval and arguments' schema.

use std::io::Write;
use switchyard_agents::tools::ToolBox;
use switchyard_model::manifest::Manifest;

/// Print every tool of `manifest`; exit code 1 when a source could not be read.
pub async fn list(manifest: &Manifest, out: &mut dyn Write) -> anyhow::Result<u8> {
    if manifest.tools.is_empty() {
        writeln!(out, "{}: no tools are declared (`tools:` is empty)", manifest.name)?;
        return Ok(0);
    }
    let http = switchyard_engine::http_client::HttpClient::new();
    let toolbox = ToolBox::new(manifest, &http);
    let mut failed = false;
    for (source, listed) in toolbox.list_all().await {
        match listed {
            Ok(specs) => {
                writeln!(out, "{source}: {} tool(s)", specs.len())?;
                for s in specs {
                    let approval = if s.needs_approval { ", needs approval" } else { "" };
                    let role = s.required_role.as_deref().map(|r| format!(", role {r}")).unwrap_or_default();
                    writeln!(out, "  {} ({}{approval}{role}) — {}", s.name, s.effect.as_str(), s.description)?;
                    writeln!(out, "    model name: {}", s.provider_name)?;
                    writeln!(out, "    arguments: {}", s.parameters)?;
                }
            }
            Err(why) => {
                failed = true;
                writeln!(out, "{source}: not read: {why}")?;
            }
        }
    }
    Ok(u8::from(failed))
}
