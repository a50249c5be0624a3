//! `bench routing --dataset clinc150 [--shots N]`: the trained router (`switchyard-intents`) on
//! a public intent benchmark, by the benchmark's protocol: trained on `train` (all of it, or
//! the first N queries per intent), scored on `val` + `oos_val`; `test` + `oos_test` only with
//! `--report-test`, once per change, never while choosing settings. In-scope accuracy counts a
//! refused in-scope query as wrong; out-of-scope recall is the share of out-of-scope queries
//! refused. The threshold comes from the router's own cross-validation on the training
//! queries, not from the benchmark's out-of-scope queries.

use super::{quantile, BenchOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use switchyard_intents::{artifact, Embedder, Router, TrainingSet};

/// Where a `--dataset` name points.
fn dataset_file(name: &Path) -> PathBuf {
    if name == Path::new("clinc150") {
        return PathBuf::from("../shared/benchmarks/clinc150/data_full.json");
    }
    if name.is_dir() {
        return name.join("data_full.json");
    }
    name.to_path_buf()
}

/// `(text, intent)` rows of one split.
fn split(data: &serde_json::Value, key: &str) -> anyhow::Result<Vec<(String, String)>> {
    let rows = data[key].as_array().ok_or_else(|| anyhow::anyhow!("the dataset has no `{key}` list"))?;
    rows.iter()
        .map(|r| match (r[0].as_str(), r[1].as_str()) {
            (Some(t), Some(l)) => Ok((t.to_string(), l.to_string())),
            _ => Err(anyhow::anyhow!("a `{key}` row is not [text, intent]: {r}")),
        })
        .collect()
}

/// One split's figures.
#[derive(Debug, serde::Serialize)]
struct Scored {
    split: String,
    in_scope_accuracy: f64,
    accuracy_ignoring_refusals: f64,
    in_scope_refused: f64,
    out_of_scope_recall: f64,
    p50_us: f64,
    p99_us: f64,
}

fn score(router: &Router, name: &str, ins: &[(String, String)], oos: &[(String, String)]) -> Scored {
    let (mut right, mut plain, mut refused) = (0usize, 0usize, 0usize);
    let mut times = Vec::with_capacity(ins.len() + oos.len());
    for (text, intent) in ins {
        let started = Instant::now();
        let routed = switchyard_core::router::route(router, text);
        times.push(started.elapsed().as_secs_f64() * 1e6);
        let ok = router.intents[routed.intent] == *intent;
        plain += usize::from(ok);
        right += usize::from(ok && routed.in_scope);
        refused += usize::from(!routed.in_scope);
    }
    let mut oos_refused = 0usize;
    for (text, _) in oos {
        let started = Instant::now();
        oos_refused += usize::from(!switchyard_core::router::route(router, text).in_scope);
        times.push(started.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    let share = |n: usize, of: usize| if of == 0 { 0.0 } else { 100.0 * n as f64 / of as f64 };
    Scored {
        split: name.to_string(),
        in_scope_accuracy: share(right, ins.len()),
        accuracy_ignoring_refusals: share(plain, ins.len()),
        in_scope_refused: share(refused, ins.len()),
        out_of_scope_recall: share(oos_refused, oos.len()),
        p50_us: quantile(&times, 0.5),
        p99_us: quantile(&times, 0.99),
    }
}

/// Run the suite.
pub(crate) fn run(options: &BenchOptions) -> anyhow::Result<u8> {
    let file = dataset_file(options.dataset.as_deref().unwrap_or(Path::new("clinc150")));
    let text = std::fs::read_to_string(&file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let data: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let train = split(&data, "train")?;
    let mut intents: Vec<String> = train.iter().map(|(_, l)| l.clone()).collect();
    intents.sort();
    intents.dedup();
    let index: BTreeMap<&str, usize> = intents.iter().enumerate().map(|(i, s)| (s.as_str(), i)).collect();
    let mut taken = vec![0usize; intents.len()];
    let mut examples = Vec::new();
    for (text, label) in &train {
        let i = index[label.as_str()];
        if options.shots.is_none_or(|n| taken[i] < n) {
            taken[i] += 1;
            examples.push((text.clone(), i));
        }
    }
    let background = switchyard_core::router::background();
    let set = TrainingSet { intents, examples, background };
    let background_lines = set.background.len();
    let spec = switchyard_core::router::train_spec();
    let started = Instant::now();
    let router = switchyard_core::router::train_set(&set)?;
    let train_s = started.elapsed().as_secs_f64();
    let bytes = artifact::encode(&router, &artifact::Header::new(0, 0), &[]);
    let (_, loaded, _) = artifact::decode(&bytes)?;
    anyhow::ensure!(loaded == router, "the artifact did not read back as the router it was written from");
    let mut loads: Vec<f64> = (0..5)
        .map(|_| {
            let started = Instant::now();
            let loaded = artifact::decode(&bytes);
            let ms = started.elapsed().as_secs_f64() * 1e3;
            drop(loaded);
            ms
        })
        .collect();
    loads.sort_by(f64::total_cmp);
    let mut rows = vec![score(&router, "val", &split(&data, "val")?, &split(&data, "oos_val")?)];
    if options.report_test {
        rows.push(score(&router, "test", &split(&data, "test")?, &split(&data, "oos_test")?));
    }
    let shots = options.shots.map_or("all".to_string(), |n| n.to_string());
    let cascade_rows = match &options.encoder {
        Some(folder) => Some(cascade(&set, &router, folder, &data, options)?),
        None => None,
    };
    if options.json {
        for row in &rows {
            let mut value = serde_json::to_value(row)?;
            value["shots"] = serde_json::json!(shots);
            value["train_s"] = serde_json::json!(train_s);
            value["artifact_bytes"] = serde_json::json!(bytes.len());
            value["load_ms"] = serde_json::json!(loads[loads.len() / 2]);
            value["background_lines"] = serde_json::json!(background_lines);
            println!("{value}");
        }
        if let Some((train_s, rows)) = &cascade_rows {
            for row in rows {
                let mut value = serde_json::to_value(row)?;
                value["shots"] = serde_json::json!(shots);
                value["cascade_train_s"] = serde_json::json!(train_s);
                println!("{value}");
            }
        }
        return Ok(0);
    }
    println!(
        "routing on {} ({} intents, {} training queries, shots per intent: {shots}; {background_lines} background lines; trainer {})",
        file.display(),
        router.intents.len(),
        set.examples.len(),
        artifact::TRAINER
    );
    println!(
        "{:<6} {:>10} {:>12} {:>10} {:>10} {:>8} {:>8}",
        "split", "in-scope", "(no refusal)", "refused", "oos recall", "p50 µs", "p99 µs"
    );
    for r in &rows {
        println!(
            "{:<6} {:>9.2}% {:>11.2}% {:>9.2}% {:>9.1}% {:>8.1} {:>8.1}",
            r.split,
            r.in_scope_accuracy,
            r.accuracy_ignoring_refusals,
            r.in_scope_refused,
            r.out_of_scope_recall,
            r.p50_us,
            r.p99_us
        );
    }
    println!(
        "training {train_s:.1} s (with the threshold's {}-fold cross-validation), artifact {:.2} MB, load {:.2} ms",
        spec.folds,
        bytes.len() as f64 / 1e6,
        loads[loads.len() / 2]
    );
    if let Some((train_s, rows)) = &cascade_rows {
        println!("\nwith the cascade (a second router with the sentence encoder, asked on doubt or refusal):");
        println!(
            "{:<6} {:>6} {:>10} {:>12} {:>10} {:>10} {:>9} {:>8} {:>8}",
            "split", "doubt", "in-scope", "(no refusal)", "refused", "oos recall", "cascaded", "p50 µs", "p99 µs"
        );
        for r in rows {
            println!(
                "{:<6} {:>6.2} {:>9.2}% {:>11.2}% {:>9.2}% {:>9.1}% {:>8.1}% {:>8.1} {:>8.1}",
                r.split,
                r.doubt,
                r.in_scope_accuracy,
                r.accuracy_ignoring_refusals,
                r.in_scope_refused,
                r.out_of_scope_recall,
                r.cascaded,
                r.p50_us,
                r.p99_us
            );
        }
        println!(
            "cascade training {train_s:.1} s (the encoder's vectors of every training text, then the same trainer)"
        );
    }
    Ok(0)
}

/// One split's figures with the cascade at one doubt.
#[derive(Debug, serde::Serialize)]
struct CascadeScored {
    split: String,
    doubt: f64,
    in_scope_accuracy: f64,
    accuracy_ignoring_refusals: f64,
    in_scope_refused: f64,
    out_of_scope_recall: f64,
    /// Share of all the split's questions read again by the cascade.
    cascaded: f64,
    p50_us: f64,
    p99_us: f64,
}

/// One question read both ways.
struct Both {
    fast: switchyard_intents::Routed,
    fast_us: f64,
    second: switchyard_intents::Routed,
    second_us: f64,
}

/// The doubts val is scored at (the test split only at the chosen one).
const DOUBTS: [f64; 7] = [0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.01];

/// Train the cascade on `set` with the encoder of `folder`; score val at several doubts, and
/// test (with `--report-test`) at the chosen one.
fn cascade(
    set: &TrainingSet,
    fast: &Router,
    folder: &Path,
    data: &serde_json::Value,
    options: &BenchOptions,
) -> anyhow::Result<(f64, Vec<CascadeScored>)> {
    let started = Instant::now();
    let (cascade, _) = switchyard_core::router::train_cascade(set, folder)?;
    let train_s = started.elapsed().as_secs_f64();
    // Two passes, so that the first router is timed as it runs when the encoder is not called
    // between two questions (the encoder's weights would push its tables out of the caches).
    let read = |rows: &[(String, String)]| -> anyhow::Result<Vec<(Both, String)>> {
        let first: Vec<(switchyard_intents::Routed, f64)> = rows
            .iter()
            .map(|(text, _)| {
                let started = Instant::now();
                let routed = switchyard_core::router::route(fast, text);
                (routed, started.elapsed().as_secs_f64() * 1e6)
            })
            .collect();
        rows.iter()
            .zip(first)
            .map(|((text, intent), (fast, fast_us))| {
                let started = Instant::now();
                let words = switchyard_core::router::WordVectors.embed(text);
                let second =
                    cascade.route(text, words.as_deref()).ok_or_else(|| anyhow::anyhow!("the encoder did not load"))?;
                let second_us = started.elapsed().as_secs_f64() * 1e6;
                Ok((Both { fast, fast_us, second, second_us }, intent.clone()))
            })
            .collect()
    };
    let mut out = Vec::new();
    let splits: &[(&str, &str, &str)] = if options.report_test {
        &[("val", "val", "oos_val"), ("test", "test", "oos_test")]
    } else {
        &[("val", "val", "oos_val")]
    };
    let chosen = options.doubt.unwrap_or(switchyard_model::manifest::DEFAULT_DOUBT);
    for (name, ins, oos) in splits {
        let ins = read(&split(data, ins)?)?;
        let oos = read(&split(data, oos)?)?;
        let doubts: Vec<f64> = if *name == "val" { DOUBTS.to_vec() } else { vec![chosen] };
        for doubt in doubts {
            out.push(score_cascade(fast, name, doubt, &ins, &oos));
        }
    }
    Ok((train_s, out))
}

fn score_cascade(
    fast: &Router,
    name: &str,
    doubt: f64,
    ins: &[(Both, String)],
    oos: &[(Both, String)],
) -> CascadeScored {
    let mut times = Vec::with_capacity(ins.len() + oos.len());
    let mut cascaded = 0usize;
    let mut pick = |b: &Both| -> switchyard_intents::Routed {
        if switchyard_core::classify::cascade::in_doubt(&b.fast, doubt) {
            cascaded += 1;
            times.push(b.fast_us + b.second_us);
            b.second.clone()
        } else {
            times.push(b.fast_us);
            b.fast.clone()
        }
    };
    let (mut right, mut plain, mut refused) = (0usize, 0usize, 0usize);
    for (b, intent) in ins {
        let routed = pick(b);
        let ok = fast.intents[routed.intent] == *intent;
        plain += usize::from(ok);
        right += usize::from(ok && routed.in_scope);
        refused += usize::from(!routed.in_scope);
    }
    let oos_refused = oos.iter().filter(|(b, _)| !pick(b).in_scope).count();
    times.sort_by(f64::total_cmp);
    let share = |n: usize, of: usize| if of == 0 { 0.0 } else { 100.0 * n as f64 / of as f64 };
    CascadeScored {
        split: name.to_string(),
        doubt,
        in_scope_accuracy: share(right, ins.len()),
        accuracy_ignoring_refusals: share(plain, ins.len()),
        in_scope_refused: share(refused, ins.len()),
        out_of_scope_recall: share(oos_refused, oos.len()),
        cascaded: share(cascaded, ins.len() + oos.len()),
        p50_us: quantile(&times, 0.5),
        p99_us: quantile(&times, 0.99),
    }
}
