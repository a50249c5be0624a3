//! `switchyard train [--manifest M]`: the manifest's router, trained ahead and written beside it
//! (`routing.yaml` → `routing.router`), with what it learnt from, how long it took and how well
//! it routes its own held-out examples.

use std::io::Write;
use std::path::Path;
use std::time::Instant;
use switchyard_core::router;
use switchyard_model::manifest::Manifest;

/// Train `path`'s router and write its artifact; a summary on `out`.
pub fn run(path: &Path, out: &mut impl Write) -> anyhow::Result<u8> {
    let manifest = Manifest::load(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let target = router::artifact_path(&manifest)
        .ok_or_else(|| anyhow::anyhow!("{}: the manifest has no file to write beside", path.display()))?;
    let before = router::state(&manifest);
    let training = router::training(&manifest)?;
    let started = Instant::now();
    let (trained, bytes) = router::train_from(&manifest, &training)?;
    let train_s = started.elapsed().as_secs_f64();
    router::write_artifact(&target, &bytes).map_err(|e| anyhow::anyhow!("{}: {e}", target.display()))?;
    let set = &training.set;
    writeln!(
        out,
        "{}: trained the router of manifest `{}` in {train_s:.2} s ({})",
        target.display(),
        manifest.name,
        switchyard_intents::artifact::TRAINER
    )?;
    writeln!(
        out,
        "  {} intents, {} examples ({} from classifier.examples), {} background questions",
        set.intents.len(),
        set.examples.len(),
        set.examples.len() - manifest_examples(&manifest),
        set.background.len()
    )?;
    if let Some(model) = &trained.continuation {
        let turns: usize = training.conversations.iter().map(|c| c.len().saturating_sub(1)).sum();
        writeln!(
            out,
            "  continuation model: {} follow-ups of {} conversations from classifier.dialogues ({} features)",
            turns,
            training.conversations.len(),
            model.len()
        )?;
    }
    writeln!(
        out,
        "  artifact {:.1} KB, threshold {:.3}, temperature {:.3}; before: {}",
        bytes.len() as f64 / 1e3,
        trained.router.threshold,
        trained.router.temperature,
        before.describe()
    )?;
    Ok(0)
}

/// How many examples the manifest itself gives (ids, descriptions, keywords, utterances).
fn manifest_examples(m: &Manifest) -> usize {
    m.intents
        .iter()
        .map(|i| 1 + usize::from(!i.description.trim().is_empty()) + i.keywords.len() + i.utterances.len())
        .sum()
}
