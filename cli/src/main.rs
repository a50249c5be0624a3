//! `switchyard`: ask a question through the whole pipeline, serve the HTTP API locally,
//! classify, validate manifests.

mod ask;
mod serve;
mod sim_cmd;
mod validate_cmd;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Switchyard — a serverless multi-agent orchestrator.
#[derive(Debug, Parser)]
#[command(name = "switchyard", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ask a question: runs intake → router → agent workers → synthesizer in one process.
    Ask(ask::AskArgs),
    /// Serve the intake HTTP API on 127.0.0.1 with the workers running in-process.
    Serve(ask::ServeArgs),
    /// Check a manifest: a summary when valid, every problem (path, line, rule) when not.
    Validate {
        /// The manifest (default: ./routing.yaml).
        #[arg(default_value = "routing.yaml")]
        file: PathBuf,
    },
    /// Run the deterministic fault simulation: seeds 0..N, or replay one seed with its trace.
    Sim {
        /// How many seeds to run.
        #[arg(long, default_value_t = switchyard_sim::DEFAULT_SEEDS)]
        seeds: u64,
        /// Run only this seed and print its trace.
        #[arg(long)]
        seed: Option<u64>,
    },
}

/// Load the manifest from a file, or the embedded `routing.yaml`.
pub fn load_manifest(path: Option<&PathBuf>) -> anyhow::Result<shared::manifest::Manifest> {
    let manifest = match path {
        Some(p) => shared::manifest::Manifest::load(p),
        None => shared::manifest::Manifest::embedded(),
    };
    manifest.map_err(|e| anyhow::anyhow!("{e}"))
}

fn init_tracing(verbose: bool) {
    let filter = if verbose { "info" } else { "warn" };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| filter.into()))
        .with_writer(std::io::stderr)
        .try_init();
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ask(args) => {
            init_tracing(args.verbose);
            ask::ask(args).await
        }
        Command::Serve(args) => {
            init_tracing(true);
            ask::serve(args).await
        }
        Command::Validate { file } => Ok(validate_cmd::run(&file, &mut std::io::stdout().lock())),
        Command::Sim { seeds, seed } => Ok(sim_cmd::run(seeds, seed, &mut std::io::stdout()).await),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("switchyard: {e:#}");
            ExitCode::from(2)
        }
    }
}
