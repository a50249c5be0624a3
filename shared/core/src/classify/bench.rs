//! Timing of classification, what `switchyard bench classify` prints.

use super::{BenchReport, Classification, Classifier, PriorTurn};
use std::time::Instant;

/// Times [`Classifier::classify`] on each query, `rounds` times, and reports the median and
/// 99th percentile of one call (what `switchyard bench classify` prints).
pub fn bench(classifier: &Classifier, queries: &[String], rounds: usize) -> BenchReport {
    time_each(queries, rounds, |q| classifier.classify(q))
}

/// Times [`Classifier::classify_in_context`] on each query as the next turn after `history`,
/// `rounds` times (what `switchyard bench classify` prints beside [`bench`]).
pub fn bench_in_context(
    classifier: &Classifier,
    queries: &[String],
    history: &[PriorTurn],
    rounds: usize,
) -> BenchReport {
    time_each(queries, rounds, |q| classifier.classify_in_context(q, history))
}

/// Median and 99th percentile of `classify` over `queries`, `rounds` times.
fn time_each(queries: &[String], rounds: usize, classify: impl Fn(&str) -> Classification) -> BenchReport {
    let mut samples: Vec<f64> = Vec::with_capacity(queries.len() * rounds.max(1));
    for _ in 0..rounds.max(1) {
        for q in queries {
            let started = Instant::now();
            let c = classify(q);
            samples.push(started.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(c);
        }
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| -> f64 {
        if samples.is_empty() {
            return 0.0;
        }
        let i = ((samples.len() - 1) as f64 * q).round() as usize;
        samples[i.min(samples.len() - 1)]
    };
    BenchReport { median_us: at(0.5), p99_us: at(0.99), n: queries.len() }
}
