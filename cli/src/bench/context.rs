//! `switchyard bench context`: what the conversation pipeline costs.
//!
//! Prints the tokenizer's one-off load (the first count in this process: the cl100k tables are
//! parsed then, and only then), the time to record a turn, to take a 12-turn snapshot and to
//! select one stage's context from it (median and p99 over many runs).

use chrono::Utc;
use std::time::{Duration, Instant};
use switchyard_core::context::{self, tokens, SessionRecord, TurnInput};
use switchyard_model::contracts::OutputStatus;
use switchyard_model::manifest::ContextSettings;

const RUNS: usize = 2_000;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(i).copied().unwrap_or_default()
}

fn turn(n: usize) -> TurnInput {
    TurnInput {
        query_id: format!("q-{n}"),
        question: format!("What is the market share of Kisqali in the Northeast in quarter {n}?"),
        intent: "gap_analysis".into(),
        entities: vec![],
        answer: format!(
            "Turn {n}: the largest market share gap for Kisqali is in the Northeast, 14% below the benchmark over the last quarter, worth about 2,300 additional patients. Shift 15% of field budget to lift share by 4%."
        ),
        status: OutputStatus::Success,
        out_of_scope: false,
        missing_entities: vec![],
        unsure: false,
        preferences: None,
    }
}

/// Run the suite and print its figures.
pub fn run(json: bool) -> u8 {
    let settings = ContextSettings::default();
    let loaded_before = tokens::loaded();
    let started = Instant::now();
    let first = tokens::count("What is the market share of Kisqali in the Northeast?");
    let load = started.elapsed();
    let mut session = SessionRecord::new("bench", "bench", Utc::now(), 0);
    for n in 1..=12 {
        context::append_turn(&settings, &mut session, turn(n), Utc::now(), 0);
    }
    let (mut record, mut snap, mut select) = (Vec::new(), Vec::new(), Vec::new());
    let mut snapshot = context::snapshot(&settings, &session, "And for Fabhalta?");
    for i in 0..RUNS {
        let mut s = session.clone();
        let t = Instant::now();
        let old = context::append_turn(&settings, &mut s, turn(100 + i), Utc::now(), 0);
        if let Some(last) = old.last() {
            let through = last.seq;
            context::merge_summary(&settings, &mut s, context::extractive_lines(&old), through, "extractive");
        }
        record.push(t.elapsed());
        let t = Instant::now();
        snapshot = context::snapshot(&settings, &session, "And for Fabhalta?");
        snap.push(t.elapsed());
        let t = Instant::now();
        let sel = context::select(&snapshot, settings.budgets.agent);
        select.push(t.elapsed());
        std::hint::black_box(sel);
    }
    let history_tokens: usize = snapshot.turns.iter().map(|p| p.tokens).sum();
    let rows = [("record turn", &mut record), ("snapshot (12 turns)", &mut snap), ("select (1 stage)", &mut select)];
    if json {
        println!(
            "{}",
            serde_json::json!({ "suite": "context", "tokenizer_load_ms": load.as_secs_f64() * 1e3, "loaded_before": loaded_before, "first_count_tokens": first, "history_tokens": history_tokens })
        );
        for (name, samples) in rows {
            let p50 = percentile(samples, 0.5).as_secs_f64() * 1e6;
            let p99 = percentile(samples, 0.99).as_secs_f64() * 1e6;
            println!("{}", serde_json::json!({ "suite": "context", "step": name, "p50_us": p50, "p99_us": p99 }));
        }
    } else {
        println!(
            "context pipeline (cl100k tokenizer: first count {:.1} ms including the one-off table load; 12-turn history = {history_tokens} tokens)",
            load.as_secs_f64() * 1e3
        );
        println!("{:<22} {:>10} {:>10}", "step", "p50 µs", "p99 µs");
        for (name, samples) in rows {
            let p50 = percentile(samples, 0.5).as_secs_f64() * 1e6;
            let p99 = percentile(samples, 0.99).as_secs_f64() * 1e6;
            println!("{name:<22} {p50:>10.1} {p99:>10.1}");
        }
    }
    0
}
