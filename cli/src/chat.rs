//! `switchyard chat`: a conversation, one turn per line.
//!
//! Every line is a question on the same session, through the same intake handler as
//! `switchyard ask` and the HTTP API: the first answer names the session (or `--session`
//! names it) and every later turn continues it, so follow-ups ("And for Fabhalta?") are
//! resolved with the conversation. On a terminal it prompts and prints each answer as it is
//! ready; from a pipe it answers every line in order (with `--json`, one `OrchestratorOutput`
//! JSON line per turn, or the error object of a refused turn).

use crate::ask::print_live;
use crate::backend::{body_text, request, start_backend, Backend};
use clap::Args;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::EngineSettings;

/// Arguments of `switchyard chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Manifest to route with (default: the embedded routing.yaml).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Continue this session (default: the first turn starts a new one).
    #[arg(long)]
    pub session: Option<String>,
    /// Print one OrchestratorOutput JSON line per turn.
    #[arg(long)]
    pub json: bool,
    /// Caller roles, comma separated.
    #[arg(long, default_value = "")]
    pub roles: String,
    /// Caller id.
    #[arg(long, default_value = "local-user")]
    pub user: String,
    /// Where the queues and the state live.
    #[arg(long, value_enum, default_value_t = Backend::Memory)]
    pub backend: Backend,
}

/// Longest wait for one turn's answer.
const TURN_WAIT: Duration = Duration::from_secs(120);

/// Run the conversation; exit code 1 when some turn was refused or failed.
pub async fn chat(args: ChatArgs) -> anyhow::Result<u8> {
    let manifest = Arc::new(crate::load_manifest(args.manifest.as_ref())?);
    let (deps, _pollers) = start_backend(args.backend, manifest, EngineSettings::default()).await?;
    let interactive = std::io::stdin().is_terminal();
    // Lines are read on a thread of their own: a blocking read must not hold a runtime worker
    // that the pollers need.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(16);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let mut session = args.session.clone();
    let mut failed = false;
    if interactive {
        eprintln!("switchyard chat — one question per line; Ctrl-D to end.");
        prompt();
    }
    while let Some(line) = rx.recv().await {
        let question = line.trim();
        if question.is_empty() {
            if interactive {
                prompt();
            }
            continue;
        }
        let mut body = serde_json::json!({ "query": question });
        if let Some(id) = &session {
            body["session_id"] = serde_json::Value::String(id.clone());
        }
        let response =
            handle_http(&deps, request("POST", "/v1/queries", Some(body.to_string()), &args.user, &args.roles)?).await;
        let text = body_text(&response);
        if response.status_code >= 400 {
            failed = true;
            if args.json {
                println!("{}", compact(&text));
            } else {
                eprintln!("switchyard: the question was refused ({}): {}", response.status_code, text.trim());
            }
            if interactive {
                prompt();
            }
            continue;
        }
        let accepted: serde_json::Value = serde_json::from_str(&text)?;
        let query_id = accepted["query_id"].as_str().unwrap_or_default().to_string();
        if session.is_none() {
            session = accepted["session_id"].as_str().map(str::to_string);
        }
        let until = tokio::time::Instant::now() + TURN_WAIT;
        // On a terminal a streamed answer is printed as its token events reach the log, as
        // `switchyard ask` does.
        let live = !args.json && std::io::stdout().is_terminal();
        let mut view = crate::tokens_view::TokenView::default();
        let mut polls = 0u32;
        let output = loop {
            if let Some(output) = deps.store.get_output(&query_id).await? {
                break Some(output);
            }
            if tokio::time::Instant::now() >= until {
                break None;
            }
            polls += 1;
            if live && polls % 10 == 0 {
                print_live(&view.take(&deps.store.list_events(&query_id).await?));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let Some(output) = output else {
            failed = true;
            eprintln!("switchyard: no answer to query {query_id} within {} s", TURN_WAIT.as_secs());
            continue;
        };
        // The synthesizer records the turn just after it writes the output: wait for it, so the
        // next line is asked with this one in its history.
        wait_for_turn(&deps, &args.user, session.as_deref().unwrap_or_default(), &query_id).await;
        failed |= matches!(
            output.status,
            switchyard_model::contracts::OutputStatus::Failed | switchyard_model::contracts::OutputStatus::Blocked
        );
        let mut streamed = false;
        if live {
            let events = deps.store.list_events(&query_id).await?;
            print_live(&view.take(&events));
            let answer_stream = events
                .iter()
                .find(|e| e.kind == switchyard_engine::ports::EventKind::Synthesis)
                .and_then(|e| e.detail["answer_stream"].as_str());
            streamed = view.finish(answer_stream, &output.response_text);
            if view.printed_any() {
                println!();
                if !streamed {
                    println!("\n[the answer]");
                }
            }
        }
        if args.json {
            println!("{}", serde_json::to_string(&output)?);
        } else {
            if !streamed {
                println!("{}", output.response_text);
            }
            let carried: Vec<&str> = output
                .entities
                .iter()
                .filter(|e| e.source == switchyard_model::contracts::EntitySource::Context)
                .map(|e| e.value.as_str())
                .collect();
            let carried =
                if carried.is_empty() { String::new() } else { format!(", carried over: {}", carried.join(", ")) };
            println!("  [{} · confidence {:.2}{carried}]", output.intent, output.response_confidence);
            println!();
        }
        std::io::stdout().flush()?;
        if interactive {
            prompt();
        }
    }
    if interactive {
        if let Some(id) = &session {
            eprintln!("\nsession {id} (continue it with --session {id})");
        }
    }
    Ok(u8::from(failed))
}

fn prompt() {
    eprint!("you> ");
    let _ = std::io::stderr().flush();
}

/// A JSON body on one line.
fn compact(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text).map(|v| v.to_string()).unwrap_or_else(|_| text.trim().to_string())
}

/// Wait (briefly) until the session lists the query's turn.
async fn wait_for_turn(deps: &switchyard_engine::Deps, user: &str, session: &str, query_id: &str) {
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < until {
        if let Ok(Some(s)) = deps.store.get_session(user, session).await {
            if s.has_recorded(query_id) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
