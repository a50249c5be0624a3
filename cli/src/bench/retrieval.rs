//! `switchyard bench retrieval`: what a `retriever` agent costs at function init and per
//! query, for each retriever of a manifest (default: the rag-manager example).
//!
//! - build: chunk and index the corpus folder (what init does with `corpus:`), median and
//!   slowest of `--repeat` builds;
//! - index file: its size, and the load time of the file `switchyard index build` writes (what
//!   init does with `index:`);
//! - query: one whole retrieval (every list, RRF, thresholds, fallback, rerank, answer) for each
//!   utterance of the manifest's intents and a few fixed questions, median and p99.

use super::BenchOptions;
use std::path::PathBuf;
use std::time::Instant;
use switchyard_agents::retriever::request;
use switchyard_core::retrieval::search::{compose, retrieve};
use switchyard_core::retrieval::{Index, IndexFile};
use switchyard_model::manifest::Manifest;

/// The example whose corpus is measured when no `--manifest` is given.
const DEFAULT_MANIFEST: &str = "examples/rag-manager/routing.yaml";

/// Questions measured besides the manifest's utterances.
const QUESTIONS: [&str; 4] = [
    "How did Cloud revenue grow in 2023?",
    "What dividend does the board propose?",
    "How many people did Larkspur employ?",
    "reveneu of the servces segmnt",
];

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Run the suite; prints one table (or JSON line) per retriever.
pub fn run(options: &BenchOptions) -> anyhow::Result<u8> {
    let path = options.manifest.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_MANIFEST));
    let manifest = Manifest::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let repeat = options.repeat.max(1);
    let mut found = false;
    for agent in &manifest.agents {
        let Some(s) = &agent.retriever else { continue };
        found = true;
        let (file, builds) = match (&s.corpus, &s.index) {
            (Some(dir), _) => {
                let dir = manifest.resolve(dir);
                let mut times = Vec::with_capacity(repeat);
                let mut file = None;
                for _ in 0..repeat {
                    let started = Instant::now();
                    let built = IndexFile::build(&dir, s.chunking)?;
                    let index = Index::new(built.clone()).map_err(|e| anyhow::anyhow!(e))?;
                    times.push(ms(started.elapsed()));
                    drop(index);
                    file = Some(built);
                }
                (file.ok_or_else(|| anyhow::anyhow!("no build"))?, times)
            }
            (None, Some(f)) => (Index::load(&manifest.resolve(f))?.file().clone(), vec![]),
            (None, None) => continue,
        };
        let tmp = std::env::temp_dir().join(format!("switchyard-bench-index-{}.json", std::process::id()));
        let bytes = file.write(&tmp)?;
        let mut loads = Vec::with_capacity(repeat);
        let mut index = None;
        for _ in 0..repeat {
            let started = Instant::now();
            let loaded = Index::load(&tmp)?;
            loads.push(ms(started.elapsed()));
            index = Some(loaded);
        }
        let _ = std::fs::remove_file(&tmp);
        let index = index.ok_or_else(|| anyhow::anyhow!("no load"))?;
        let mut questions: Vec<String> = manifest.intents.iter().flat_map(|i| i.utterances.iter().cloned()).collect();
        questions.extend(QUESTIONS.iter().map(|q| q.to_string()));
        let mut queries = Vec::with_capacity(repeat * questions.len());
        let rounds = (repeat * 10).max(10);
        for _ in 0..rounds {
            for q in &questions {
                let req = request(&serde_json::json!({ "question": q })).map_err(|e| anyhow::anyhow!(e))?;
                let started = Instant::now();
                let r = retrieve(&index, &req, s);
                let answer = compose(&req, &r.candidates, s.answer_sentences);
                queries.push(ms(started.elapsed()));
                std::hint::black_box(answer);
            }
        }
        for v in [&mut loads, &mut queries] {
            v.sort_by(f64::total_cmp);
        }
        let mut builds = builds;
        builds.sort_by(f64::total_cmp);
        let row = serde_json::json!({
            "suite": "retrieval",
            "agent": agent.id,
            "documents": file.documents.len(),
            "chunks": file.chunks.len(),
            "index_bytes": bytes,
            "build_ms_median": percentile(&builds, 0.5),
            "build_ms_max": builds.last().copied().unwrap_or(0.0),
            "load_ms_median": percentile(&loads, 0.5),
            "load_ms_max": loads.last().copied().unwrap_or(0.0),
            "query_ms_median": percentile(&queries, 0.5),
            "query_ms_p99": percentile(&queries, 0.99),
            "queries": queries.len(),
        });
        if options.json {
            println!("{row}");
        } else {
            println!(
                "retrieval: `{}` over {} ({} documents, {} chunks)",
                agent.id,
                path.display(),
                row["documents"],
                row["chunks"]
            );
            println!("  index file          {:>10} bytes", bytes);
            println!(
                "  build from corpus   {:>10.3} ms median  {:>8.3} ms slowest of {}",
                row["build_ms_median"].as_f64().unwrap_or(0.0),
                row["build_ms_max"].as_f64().unwrap_or(0.0),
                builds.len()
            );
            println!(
                "  load index file     {:>10.3} ms median  {:>8.3} ms slowest of {}",
                row["load_ms_median"].as_f64().unwrap_or(0.0),
                row["load_ms_max"].as_f64().unwrap_or(0.0),
                loads.len()
            );
            println!(
                "  query (retrieve + answer) {:>6.3} ms median  {:>8.3} ms p99 of {}",
                row["query_ms_median"].as_f64().unwrap_or(0.0),
                row["query_ms_p99"].as_f64().unwrap_or(0.0),
                queries.len()
            );
        }
    }
    if !found {
        return Err(anyhow::anyhow!("{} declares no `retriever` agent", path.display()));
    }
    Ok(0)
}
