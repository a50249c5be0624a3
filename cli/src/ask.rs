//! `switchyard ask` and `switchyard serve`: the whole pipeline in one process.
//!
//! Both build the embedded system (in-memory store and queues with SQS/DynamoDB semantics),
//! start pollers that invoke the same function handlers Lambda runs, and talk to the intake
//! handler with API Gateway HTTP API events — so what runs here is what runs on AWS.

use crate::backend::{body_text, request, start_backend, Backend};
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_engine::handlers::handle_http;
use switchyard_engine::ports::EventKind;
use switchyard_engine::EngineSettings;

use switchyard_model::contracts::{OrchestratorOutput, OutputStatus};

/// Arguments of `switchyard ask`.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// The question.
    pub question: String,
    /// Print the OrchestratorOutput as JSON (or, when the question is refused, the error object).
    #[arg(long)]
    pub json: bool,
    /// Manifest to route with (default: the embedded routing.yaml).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Caller id.
    #[arg(long, default_value = "local-user")]
    pub user: String,
    /// Caller roles, comma separated (e.g. ml_engineer for training and deployment intents).
    #[arg(long, default_value = "")]
    pub roles: String,
    /// Log every step to stderr.
    #[arg(long, short)]
    pub verbose: bool,
    /// Where the queues and the state live.
    #[arg(long, value_enum, default_value_t = Backend::Memory)]
    pub backend: Backend,
    /// Also print the query's event log (JSON, one event a line) on stderr.
    #[arg(long)]
    pub events: bool,
    /// Years to retrieve from, comma separated (sent as `preferences.requested_years`; a
    /// `retriever` agent then only considers documents of those years).
    #[arg(long, value_delimiter = ',')]
    pub years: Vec<u16>,
    /// Continue this conversation (the `session_id` of an earlier answer; on `--backend aws`
    /// the session lives in the DynamoDB table, so it carries across runs).
    #[arg(long)]
    pub session: Option<String>,
}

/// Arguments of `switchyard serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. An address other than loopback needs `--auth jwt`, or
    /// `--dev-auth` to keep the dev identity headers there.
    #[arg(long, env = "SWITCHYARD_SERVE_BIND", default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Port (0 picks a free one).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Manifest to route with (default: the embedded routing.yaml).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Where the queues and the state live.
    #[arg(long, value_enum, default_value_t = Backend::Memory)]
    pub backend: Backend,
    /// Connection limits (docs/serve.md#connections).
    #[command(flatten)]
    pub limits: crate::serve::Limits,
    /// The per-caller rate and the embedded store's bounds (docs/serve.md#quotas).
    #[command(flatten)]
    pub quotas: crate::serve::Quotas,
    /// A `Host` name answered besides the loopback names and the bind address (repeat the
    /// flag; comma separated in the variable). Any other Host is answered 421.
    #[arg(long = "allow-host", env = "SWITCHYARD_SERVE_ALLOW_HOSTS", value_delimiter = ',')]
    pub allow_hosts: Vec<String>,
    /// Who the caller is: `dev` trusts the x-switchyard-user / x-switchyard-roles headers (or
    /// `Bearer dev:<user>`); `jwt` verifies a bearer JWT as the deployed functions do.
    #[arg(long, value_enum, env = "SWITCHYARD_SERVE_AUTH", default_value_t = ServeAuth::Dev)]
    pub auth: ServeAuth,
    /// Keep the dev identity headers on a non-loopback address: whoever reaches the port can
    /// then act as any user.
    #[arg(long)]
    pub dev_auth: bool,
    /// The token checks of `--auth jwt`.
    #[command(flatten)]
    pub jwt: JwtArgs,
}

/// How `switchyard serve` knows its callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeAuth {
    /// The dev identity headers.
    Dev,
    /// Verified bearer JWTs.
    Jwt,
}

/// The settings of `serve --auth jwt`: the same variables the `events-stream` function reads
/// (switchyard_engine::jwt), or flags.
#[derive(Debug, Clone, Args)]
pub struct JwtArgs {
    /// The issuer (`iss`) tokens must carry.
    #[arg(long = "jwt-issuer", env = "SWITCHYARD_JWT_ISSUER")]
    pub issuer: Option<String>,
    /// An accepted audience (`aud`, or `client_id`); repeat, or comma separated.
    #[arg(long = "jwt-audience", env = "SWITCHYARD_JWT_AUDIENCE", value_delimiter = ',')]
    pub audiences: Vec<String>,
    /// The issuer's JWKS document (JSON), fixed for the process's life.
    #[arg(long = "jwt-jwks", env = "SWITCHYARD_JWT_JWKS")]
    pub jwks: Option<String>,
    /// Where the issuer publishes its JWKS: fetched at start, and again for an unknown `kid`
    /// (at most once a minute).
    #[arg(long = "jwt-jwks-url", env = "SWITCHYARD_JWT_JWKS_URL")]
    pub jwks_url: Option<String>,
}

impl JwtArgs {
    /// The verifier these settings describe (fetching the JWKS when given a URL).
    pub async fn verifier(&self) -> anyhow::Result<switchyard_engine::jwt::JwtVerifier> {
        use switchyard_engine::jwt::{JwtConfigError, JwtVerifier, ENV_JWT_JWKS_URL};
        let issuer = self.issuer.as_deref().unwrap_or("");
        let verifier = match (&self.jwks, &self.jwks_url) {
            (Some(document), None) => JwtVerifier::new(issuer, &self.audiences, document)?,
            (None, Some(url)) => {
                JwtVerifier::from_jwks_url(issuer, &self.audiences, url, switchyard_engine::http_client::HttpClient::new())
                    .await?
            }
            (Some(_), Some(_)) => anyhow::bail!(
                "--jwt-jwks (SWITCHYARD_JWT_JWKS) and --jwt-jwks-url (SWITCHYARD_JWT_JWKS_URL) are both set: give the issuer's keys one way"
            ),
            (None, None) => {
                // Name the first setting missing, in the order the checks read them.
                let missing = if issuer.trim().is_empty() {
                    switchyard_engine::jwt::ENV_JWT_ISSUER
                } else if self.audiences.iter().all(|a| a.trim().is_empty()) {
                    switchyard_engine::jwt::ENV_JWT_AUDIENCE
                } else {
                    ENV_JWT_JWKS_URL
                };
                return Err(JwtConfigError::Missing(missing).into());
            }
        };
        Ok(verifier)
    }
}

/// Run one question through the pipeline and print the answer.
pub async fn ask(args: AskArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let manifest = Arc::new(crate::load_manifest(args.manifest.as_ref())?);
    let (deps, _pollers) = start_backend(args.backend, manifest, EngineSettings::default()).await?;
    let mut body = serde_json::json!({ "query": args.question });
    if !args.years.is_empty() {
        body["preferences"] = serde_json::json!({ "requested_years": args.years });
    }
    if let Some(session) = &args.session {
        body["session_id"] = serde_json::Value::String(session.clone());
    }
    let body = body.to_string();
    let response = handle_http(&deps, request("POST", "/v1/queries", Some(body), &args.user, &args.roles)?).await;
    let text = body_text(&response);
    if response.status_code >= 400 {
        if args.json {
            // The error object (`{"error": {code, message, details, request_id}}`) is the JSON
            // answer a script reads: it goes to stdout like an answer would.
            println!("{}", text.trim_end());
            eprintln!("switchyard: the question was refused ({})", response.status_code);
        } else {
            eprintln!("switchyard: the question was refused ({}):\n{text}", response.status_code);
        }
        return Ok(1);
    }
    let accepted: serde_json::Value = serde_json::from_str(&text)?;
    let query_id = accepted["query_id"].as_str().unwrap_or_default().to_string();
    // On a terminal, a streamed answer is printed as its token events reach the log.
    let live = !args.json && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut view = crate::tokens_view::TokenView::default();
    let mut polls = 0u32;
    let output = loop {
        if let Some(output) = deps.store.get_output(&query_id).await? {
            break output;
        }
        polls += 1;
        if live && polls % 10 == 0 {
            print_live(&view.take(&deps.store.list_events(&query_id).await?));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let events = deps.store.list_events(&query_id).await?;
    let mut streamed = false;
    if live {
        print_live(&view.take(&events));
        let answer_stream =
            events.iter().find(|e| e.kind == EventKind::Synthesis).and_then(|e| e.detail["answer_stream"].as_str());
        streamed = view.finish(answer_stream, &output.response_text);
        if view.printed_any() {
            println!();
            if !streamed {
                println!("\n[the answer]");
            }
        }
    }
    // The synthesizer's span closes just after it writes the output: give it a moment, then
    // send the spans before the process exits (a no-op unless OTLP export is on).
    tokio::time::sleep(Duration::from_millis(50)).await;
    switchyard_engine::telemetry::otlp::flush(Duration::from_secs(3)).await;
    if args.events {
        for e in &events {
            eprintln!("{}", serde_json::json!({ "kind": e.kind, "key": e.key, "detail": e.detail }));
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        print_answer(&output, &accepted, &events, started.elapsed(), streamed);
    }
    Ok(match output.status {
        OutputStatus::Success | OutputStatus::Partial => 0,
        OutputStatus::Failed | OutputStatus::Blocked => 1,
    })
}

/// Print streamed text as it comes (flushed: stdout is line-buffered).
pub(crate) fn print_live(text: &str) {
    if !text.is_empty() {
        use std::io::Write;
        print!("{text}");
        let _ = std::io::stdout().flush();
    }
}

/// Print the answer and its summary (`streamed`: the answer's text is already on the screen).
fn print_answer(
    output: &OrchestratorOutput,
    accepted: &serde_json::Value,
    events: &[switchyard_engine::ports::Event],
    wall: Duration,
    streamed: bool,
) {
    let band =
        output.final_reason.and_then(|b| serde_json::to_value(b).ok()).and_then(|v| v.as_str().map(str::to_string));
    if !streamed {
        println!("{}", output.response_text);
    }
    println!();
    println!(
        "status      {}",
        serde_json::to_value(output.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    );
    println!("confidence  {:.2}{}", output.response_confidence, band.map(|b| format!("  ({b})")).unwrap_or_default());
    let ambiguous = accepted["warnings"].as_array().map(|w| w.len()).unwrap_or(0);
    println!(
        "intent      {} (classifier confidence {:.2}){}",
        output.intent,
        accepted["confidence"].as_f64().unwrap_or(0.0),
        if ambiguous > 0 { format!(", {ambiguous} warning(s)") } else { String::new() }
    );
    let route: Vec<String> = events
        .iter()
        .filter(|e| e.kind == EventKind::Dispatch)
        .map(|e| {
            format!(
                "{} [tier {}, {}]",
                e.detail["agent"].as_str().unwrap_or("?"),
                e.detail["tier"],
                e.detail["role"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if let Some(c) = output.orchestration.as_ref().map(|o| &o["classification"]).filter(|c| !c.is_null()) {
        println!(
            "classified  by the {} classifier at {:.2}{}",
            c["decided_by"].as_str().unwrap_or("?"),
            c["confidence"].as_f64().unwrap_or(0.0),
            c["llm_intent"]
                .as_str()
                .map(|i| format!(
                    " (cascade: embedded said {} at {:.2}, LLM said {i})",
                    c["embedded_intent"].as_str().unwrap_or("?"),
                    c["embedded_confidence"].as_f64().unwrap_or(0.0)
                ))
                .unwrap_or_default()
        );
    }
    if output.missing_entities.is_empty() {
        println!("route       {}", route.join(" → "));
    } else {
        println!(
            "missing     {} (no agent ran; the next turn of the session may name them)",
            output.missing_entities.join(", ")
        );
    }
    if !output.entities.is_empty() {
        let entities: Vec<String> = output
            .entities
            .iter()
            .map(|e| {
                let kind = &e.entity_type;
                let carried =
                    if e.source == switchyard_model::contracts::EntitySource::Context { " (from context)" } else { "" };
                format!("{kind}={}{carried}", e.value)
            })
            .collect();
        println!("entities    {}", entities.join(", "));
    }
    println!("session     {} (ask a follow-up with --session {})", output.session_id, output.session_id);
    for e in events.iter().filter(|e| e.kind == EventKind::Step && e.detail["step"] == "retrieval") {
        print_retrieval(&e.detail);
    }
    for e in events.iter().filter(|e| e.kind == EventKind::Step) {
        let d = &e.detail;
        match d["step"].as_str() {
            Some("merge") => println!(
                "merge       {} k={} over {} : {} list entries → {} distinct chunks",
                d["strategy"].as_str().unwrap_or("?"),
                d["k"],
                d["retrievers_answered"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|r| r.as_str()).collect::<Vec<_>>().join(" + "))
                    .unwrap_or_default(),
                d["listed"],
                d["deduped"]
            ),
            Some("rerank") => println!(
                "rerank      {} (recency boost {}): {}",
                d["reranker"].as_str().unwrap_or("RRF order"),
                d["recency_boost"],
                d["top"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|c| c["chunk_id"].as_str()).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default()
            ),
            Some("hydrate") => println!(
                "hydrate     {} full chunks after the critic asked ({} → {} characters)",
                d["chunks"].as_array().map(Vec::len).unwrap_or(0),
                d["summary_chars"],
                d["full_chars"]
            ),
            _ => {}
        }
    }
    if let Some(o) = &output.orchestration {
        print_orchestration(o);
    }
    println!("agents");
    for r in &output.agent_results {
        let status =
            serde_json::to_value(r.status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        println!(
            "  {:<26} tier {}  {:<8} {} attempt{}  {:>6} ms  confidence {:.2}{}",
            r.agent_id,
            r.agent_tier,
            status,
            r.attempts,
            if r.attempts == 1 { " " } else { "s" },
            r.latency_ms,
            r.confidence,
            r.fallback_for.as_ref().map(|f| format!("  (fallback for {f})")).unwrap_or_default()
        );
    }
    if let Some(r) = &output.reflection {
        println!(
            "reflection  score {:.2} (question {:.2} × {}, revised query {:.2} × {})",
            r.score, r.original_score, r.original_weight, r.revised_score, r.revised_weight
        );
        println!("  applicability: {}", r.applicability_note);
        println!("  uncertainty:   {}", r.uncertainty_note);
    }
    if !output.caveats.is_empty() {
        println!("caveats");
        for c in &output.caveats {
            println!("  - {c}");
        }
    }
    if !output.citations.is_empty() {
        println!("citations");
        for (i, c) in output.citations.iter().enumerate() {
            let kind = serde_json::to_value(c.source_type)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            println!("  [{}] {kind} {} — {}", i + 1, c.source_id, c.text.clone().unwrap_or_default());
        }
    }
    if !output.follow_up_suggestions.is_empty() {
        println!("follow-ups");
        for f in &output.follow_up_suggestions {
            println!("  - {f}");
        }
    }
    println!("total       {} ms in the pipeline, {} ms wall", output.total_latency_ms, wall.as_millis());
}

/// One line per orchestration mode that ran (deliberation, critique, sources, guardrails).
fn print_orchestration(o: &serde_json::Value) {
    let d = &o["deliberation"];
    if d.is_object() {
        println!(
            "deliberate  {} orchestrator round(s), {} re-consultation(s), action {}{}",
            d["iterations"],
            d["consultations"].as_array().map_or(0, Vec::len),
            d["action"].as_str().unwrap_or("?"),
            if d["escalated"] == true { " (escalated at max_iterations)" } else { "" }
        );
    }
    let c = &o["critique"];
    if c.is_object() {
        let verdicts: Vec<&str> = c["rounds"]
            .as_array()
            .map(|r| r.iter().filter_map(|v| v["verdict"].as_str()).collect())
            .unwrap_or_default();
        println!("critic      {} — {}", verdicts.join(" → "), c["summary"].as_str().unwrap_or(""));
    }
    let s = &o["sources"];
    if s.is_object() {
        println!(
            "sources     {} ({} answered, {} failed), {} of {} chunks kept, {} contradiction(s)",
            s["retrieval_status"].as_str().unwrap_or("?"),
            s["sources_used"].as_array().map_or(0, Vec::len),
            s["sources_failed"].as_array().map_or(0, Vec::len),
            s["filtered_chunk_count"],
            s["original_chunk_count"],
            s["contradictions"].as_array().map_or(0, Vec::len)
        );
    }
    for (key, label) in [("guardrail_input", "input"), ("guardrail_output", "output")] {
        if o[key].is_object() {
            println!("guardrail   {label}: {}", if o[key]["allowed"] == true { "allowed" } else { "blocked" });
        }
    }
    if o["coherence"].is_object() {
        println!("coherence   {}", o["coherence"]["coherence"].as_str().unwrap_or("?"));
    }
}

/// Why `serve` will not start: dev identity headers on an address others can reach.
fn refuse_dev_auth_off_loopback(args: &ServeArgs) -> anyhow::Result<()> {
    if args.auth == ServeAuth::Dev && !args.bind.is_loopback() && !args.dev_auth {
        anyhow::bail!(
            "refusing to serve on {} with the dev identity headers: whoever reaches that address could act as any user. \
             Verify tokens with --auth jwt (--jwt-issuer, --jwt-audience, --jwt-jwks-url), or pass --dev-auth to accept the headers there",
            args.bind
        );
    }
    Ok(())
}

/// Serve the intake API with workers in-process.
pub async fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    refuse_dev_auth_off_loopback(&args)?;
    let verifier = match args.auth {
        ServeAuth::Jwt => Some(Arc::new(args.jwt.verifier().await?)),
        ServeAuth::Dev => None,
    };
    let manifest = Arc::new(crate::load_manifest(args.manifest.as_ref())?);
    let settings = EngineSettings {
        dev_identity_headers: args.auth == ServeAuth::Dev,
        memory_quota: args.quotas.store_quota(),
        ..EngineSettings::default()
    };
    let (deps, _pollers) = start_backend(args.backend, manifest, settings).await?;
    let listener = tokio::net::TcpListener::bind((args.bind, args.port)).await?;
    let addr = listener.local_addr()?;
    eprintln!(
        "switchyard: serving the intake API on http://{addr} (manifest `{}`, backend {:?})",
        deps.manifest.name, args.backend
    );
    match args.auth {
        ServeAuth::Dev => {
            eprintln!("switchyard: caller from the x-switchyard-user / x-switchyard-roles headers (dev only)")
        }
        ServeAuth::Jwt => eprintln!("switchyard: caller from a verified bearer JWT"),
    }
    println!("listening on http://{addr}");
    let access =
        crate::serve::Access { hosts: crate::serve::HostAllowlist::new(args.bind, &args.allow_hosts), verifier };
    crate::serve::run(listener, deps, args.limits, access, args.quotas).await?;
    Ok(0)
}

/// A retriever's attempts and merge, from its `retrieval` step event.
fn print_retrieval(detail: &serde_json::Value) {
    let r = &detail["retrieval"];
    println!(
        "retrieval   {} (year_mode {}{})",
        detail["agent"].as_str().unwrap_or("?"),
        r["year_mode"].as_str().unwrap_or("?"),
        r["requested_years"]
            .as_array()
            .filter(|y| !y.is_empty())
            .map(|y| format!(", years {}", y.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")))
            .unwrap_or_default()
    );
    for a in r["attempts"].as_array().into_iter().flatten() {
        println!(
            "  {} {:<16} {}",
            if a["accepted"].as_bool() == Some(true) { "✓" } else { "✗" },
            a["setting"].as_str().unwrap_or("?"),
            a["reason"].as_str().unwrap_or("")
        );
    }
    let m = &r["merge"];
    println!(
        "  merge {} k={} : {} list entries → {} distinct chunks, recency boost {}",
        m["strategy"].as_str().unwrap_or("?"),
        m["k"],
        m["listed"],
        m["deduped"],
        m["recency_boost"]
    );
}
