//! `switchyard refit --signals FILE [--manifest routing.yaml] --out FILE`: propose a manifest
//! with utterances learnt from corrected signals, print the figures and the diff, and write it
//! only when routing gets no worse on the check set and on the manifest's own utterances.
//! `switchyard signals pending --signals FILE`: the optimization requests the signals raise.

use anyhow::Context;
use std::io::Write;
use std::path::Path;
use switchyard_core::signals::refit::{refit, RefitOptions, RefitOutcome, RefitReport};
use switchyard_core::signals::{optimization_requests, read_jsonl};

/// Exit code when a manifest was written (or nothing needed to change).
pub const EXIT_WRITTEN: u8 = 0;
/// Exit code when the change was refused.
pub const EXIT_REFUSED: u8 = 1;

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a (no held-out signals)".to_string(), |v| format!("{:.1}%", v * 100.0))
}

fn print_report(r: &RefitReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "signals {}: {} without text, {} unlabelled, {} fit, {} check",
        r.signals, r.without_text, r.unlabelled, r.fit, r.check
    )?;
    writeln!(out, "check-set accuracy:        {} -> {}", pct(r.check_before), pct(r.check_after))?;
    writeln!(out, "own-utterance accuracy:    {} -> {}", pct(Some(r.own_before)), pct(Some(r.own_after)))?;
    for (intent, utterance) in &r.dropped {
        writeln!(out, "dropped (lowers own-utterance accuracy): {intent}: {utterance:?}")?;
    }
    Ok(())
}

/// Run a re-fit; returns the exit code.
pub fn run(signals: &Path, manifest: &Path, out_path: &Path, out: &mut impl Write) -> anyhow::Result<u8> {
    let signals_text = std::fs::read_to_string(signals).with_context(|| format!("reading {}", signals.display()))?;
    let records = read_jsonl(&signals_text)?;
    let text = std::fs::read_to_string(manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let outcome = refit(&text, &manifest.display().to_string(), &records, &RefitOptions::default())?;
    // Paths in the manifest are relative to its folder: written elsewhere, they are rewritten
    // to name the same files from there.
    let folder = |p: &Path| p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let (from_dir, to_dir) = (folder(manifest), folder(out_path));
    let relocate = |yaml: &str| switchyard_core::signals::refit::relocate(yaml, &from_dir, &to_dir);
    match outcome {
        RefitOutcome::Proposed { yaml, report, diff } => {
            print_report(&report, out)?;
            writeln!(out, "added {} utterance(s):", report.added.len())?;
            write!(out, "{diff}")?;
            let yaml = relocate(&yaml)?;
            std::fs::write(out_path, yaml).with_context(|| format!("writing {}", out_path.display()))?;
            writeln!(out, "wrote {}", out_path.display())?;
            Ok(EXIT_WRITTEN)
        }
        RefitOutcome::Unchanged { report } => {
            print_report(&report, out)?;
            let text = relocate(&text)?;
            std::fs::write(out_path, text).with_context(|| format!("writing {}", out_path.display()))?;
            writeln!(out, "nothing to change: wrote the manifest unchanged to {}", out_path.display())?;
            Ok(EXIT_WRITTEN)
        }
        RefitOutcome::Refused { report, reason } => {
            print_report(&report, out)?;
            writeln!(out, "refused: {reason}; nothing written")?;
            Ok(EXIT_REFUSED)
        }
    }
}

/// Print the optimization requests raised by the signals in `signals`, one JSON line each.
pub fn pending(signals: &Path, window: usize, threshold: f64, out: &mut impl Write) -> anyhow::Result<u8> {
    let text = std::fs::read_to_string(signals).with_context(|| format!("reading {}", signals.display()))?;
    let records = read_jsonl(&text)?;
    for request in optimization_requests(&records, window, threshold, 3) {
        writeln!(out, "{}", serde_json::to_string(&request)?)?;
    }
    Ok(0)
}
