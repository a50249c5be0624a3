//! `switchyard-sim`: the deterministic fault simulation ([`switchyard_sim`]) as a command
//! (`cargo run -p switchyard-sim -- --seeds 500`).
//!
//! It is a binary of its own, not a `switchyard` subcommand, because the simulation runs on
//! tokio's paused clock (`test-util`), which no shipped binary should carry.
//!
//! `--seeds N` runs seeds 0..N and prints each failing seed with its violations and the command
//! that replays it; `--seed S` runs one seed and prints its trace (every injected fault and each
//! query's fate, in virtual time). Exit status 0 when every invariant held, 1 otherwise, 2 when
//! the simulation could not run.

use std::io::Write;
use std::time::Instant;

use clap::Parser;
use std::process::ExitCode;

/// Run the deterministic fault simulation: seeds 0..N, or replay one seed with its trace.
#[derive(Debug, Parser)]
#[command(name = "switchyard-sim", version)]
struct Args {
    /// How many seeds to run.
    #[arg(long, default_value_t = switchyard_sim::DEFAULT_SEEDS)]
    seeds: u64,
    /// Run only this seed and print its trace.
    #[arg(long)]
    seed: Option<u64>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    ExitCode::from(run(args.seeds, args.seed, &mut std::io::stdout()).await)
}

/// Run the simulation; returns the exit status.
async fn run(seeds: u64, seed: Option<u64>, out: &mut (dyn Write + Send)) -> u8 {
    let job = tokio::task::spawn_blocking(move || -> Result<(Vec<String>, String, bool), switchyard_sim::SimError> {
        let started = Instant::now();
        match seed {
            Some(s) => {
                let report = switchyard_sim::run_seed(s)?;
                let mut lines = vec![format!("seed {s}: {:?}", report.faults)];
                lines.extend(report.trace.iter().cloned());
                let verdict = if report.passed() {
                    format!(
                        "seed {s}: every invariant held ({} queries, {:.0} s of virtual time)\n",
                        report.queries,
                        report.virtual_time.as_secs_f64()
                    )
                } else {
                    switchyard_sim::describe_failure(&report)
                };
                Ok((lines, verdict, report.passed()))
            }
            None => {
                let mut lines = Vec::new();
                let summary = switchyard_sim::run_seeds(0, seeds, |report| {
                    if !report.passed() {
                        lines.push(switchyard_sim::describe_failure(report).trim_end().to_string());
                    }
                })?;
                let elapsed = started.elapsed().as_secs_f64();
                let verdict = format!(
                    "{} seeds, {} queries, {} faults injected: {} failed ({:.1} s, {:.0} seeds/s)\n",
                    summary.seeds,
                    summary.queries,
                    summary.faults_injected,
                    summary.failures.len(),
                    elapsed,
                    summary.seeds as f64 / elapsed.max(1e-9)
                );
                Ok((lines, verdict, summary.failures.is_empty()))
            }
        }
    });
    let (lines, verdict, passed) = match job.await {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => {
            let _ = writeln!(out, "switchyard-sim: {e}");
            return 2;
        }
        Err(e) => {
            let _ = writeln!(out, "switchyard-sim: the simulation crashed: {e}");
            return 2;
        }
    };
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = write!(out, "{verdict}");
    if passed {
        0
    } else {
        1
    }
}
