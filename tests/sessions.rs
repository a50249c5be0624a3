//! Conversations on the embedded default, through intake's HTTP handler and the pollers:
//! follow-ups resolved with the session, ownership, TTL, the summary, budgets, redelivery and
//! concurrent turns, and hostile input. Virtual time throughout (`start_paused`).

use serde_json::{json, Value};
use std::time::Duration;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::ports::{EventKind, SessionRecord};
use switchyard_model::contracts::{ConfidenceBand, EntitySource, OrchestratorOutput};
use switchyard_model::manifest::Manifest;
use switchyard_tests::*;

const ANALYST: &str = "analyst-1";
const OTHER: &str = "analyst-2";

async fn post(h: &Harness, body: Value, user: &str) -> aws_lambda_events::apigw::ApiGatewayV2httpResponse {
    handle_http(&h.system.deps, api_request("POST", "/v1/queries", "", Some(&body.to_string()), user, "")).await
}

/// Ask `question` as `user` on `session` (a new one when `None`); the output once the turn is
/// recorded in the session.
async fn turn(h: &Harness, question: &str, session: Option<&str>, user: &str) -> OrchestratorOutput {
    let mut body = json!({ "query": question });
    if let Some(id) = session {
        body["session_id"] = json!(id);
    }
    let response = post(h, body, user).await;
    assert_eq!(response.status_code, 202, "intake answered {}", text_body(&response));
    let accepted = json_body(&response);
    let id = accepted["query_id"].as_str().expect("query id").to_string();
    if let Some(s) = session {
        assert_eq!(accepted["session_id"], json!(s));
    }
    let output = h.output(&id).await;
    for _ in 0..1_000 {
        if session_of(h, user, &output.session_id).await.is_some_and(|s| s.has_recorded(&id)) {
            return output;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("turn {id} was never recorded");
}

async fn session_of(h: &Harness, user: &str, session: &str) -> Option<SessionRecord> {
    h.system.deps.store.get_session(user, session).await.expect("store")
}

fn carried(output: &OrchestratorOutput) -> Vec<String> {
    output.entities.iter().filter(|e| e.source == EntitySource::Context).map(|e| e.value.clone()).collect()
}

async fn context_event(h: &Harness, query_id: &str) -> Option<Value> {
    let events = h.system.deps.store.list_events(query_id).await.expect("events");
    events.into_iter().find(|e| e.kind == EventKind::Context).map(|e| Value::clone(&e.detail))
}

#[tokio::test(start_paused = true)]
async fn a_follow_up_is_routed_with_the_conversation_and_names_its_session() {
    let h = Harness::start(shipped_manifest());
    // GIVEN a first question, which starts a session
    let first = turn(&h, "What is the market share of Kisqali in the Northeast?", None, ANALYST).await;
    assert!(!first.session_id.is_empty());
    assert!(first.entities.iter().any(|e| e.value == "Kisqali" && e.source != EntitySource::Context));
    assert!(context_event(&h, &first.query_id).await.is_none(), "a first turn has no context to assemble");
    // WHEN the follow-up names only a new brand
    let second = turn(&h, "And for Fabhalta?", Some(&first.session_id), ANALYST).await;
    // THEN the intent is carried over, the brand replaced and the rest carried
    assert_eq!(second.session_id, first.session_id);
    assert_eq!(second.intent, first.intent);
    assert!(second.entities.iter().any(|e| e.value == "Fabhalta" && e.source != EntitySource::Context));
    assert_eq!(carried(&second), vec!["market_share".to_string(), "Northeast".to_string()]);
    // AND the context event says what was kept, with token counts and no text
    let detail = context_event(&h, &second.query_id).await.expect("a context event");
    assert_eq!(detail["turn"], json!(2));
    assert_eq!(detail["agent"]["turns_kept"], json!(1));
    assert!(detail["agent"]["tokens"].as_u64().is_some_and(|t| t > 0));
    assert!(!detail.to_string().contains("Kisqali"), "no raw text in the log: {detail}");
    // AND the agents' payload carries the history for their {history} placeholder
    let query = h.system.deps.store.get_query(&second.query_id).await.expect("store").expect("query");
    let plan = query.plan.expect("a plan");
    let context = &plan.stages[0].dispatches[0].dispatch.payload.context;
    assert!(
        context["history"].as_str().is_some_and(|t| t.contains("User: What is the market share of Kisqali")),
        "{context}"
    );
    assert_eq!(context["conversation"]["turn"], json!(2));
    assert!(context["conversation"]["tokens"].as_u64().is_some_and(|t| t <= 1_500));
}

#[tokio::test(start_paused = true)]
async fn a_follow_up_with_no_word_of_its_own_is_answered_not_refused_as_out_of_scope() {
    let h = Harness::start(shipped_manifest());
    let first = turn(&h, "Forecast Kisqali TRx for next quarter in the Midwest.", None, ANALYST).await;
    assert_eq!(first.intent, "prediction");
    // "And in Q1?", "and for the full year?" score 0 alone (no content word): the classifier
    // keeps them in scope as follow-ups, and so must the pipeline.
    for text in ["And in Q1?", "what about H1?", "and for the full year?"] {
        let next = turn(&h, text, Some(&first.session_id), ANALYST).await;
        assert_ne!(next.final_reason, Some(ConfidenceBand::OutOfScope), "{text}: {next:?}");
        assert!(next.error.is_none(), "{text}: {:?}", next.error);
        assert_eq!(next.intent, "prediction", "{text}");
        assert_eq!(carried(&next), vec!["Kisqali".to_string(), "trx".to_string(), "Midwest".to_string()], "{text}");
    }
    // Alone, the same words are out of scope.
    let alone = turn(&h, "And in Q1?", None, ANALYST).await;
    assert_eq!(alone.final_reason, Some(ConfidenceBand::OutOfScope));
}

#[tokio::test(start_paused = true)]
async fn another_caller_using_the_same_session_id_gets_a_separate_session() {
    let h = Harness::start(shipped_manifest());
    let mine = turn(&h, "What is the market share of Kisqali in the Northeast?", Some("shared-id"), ANALYST).await;
    // WHEN another caller sends a follow-up on the same id
    let theirs = turn(&h, "And for Fabhalta?", Some("shared-id"), OTHER).await;
    // THEN nothing of the first caller's conversation reaches it
    assert!(carried(&theirs).is_empty(), "{:?}", theirs.entities);
    assert!(context_event(&h, &theirs.query_id).await.is_none());
    let query = h.system.deps.store.get_query(&theirs.query_id).await.expect("store").expect("query");
    assert!(!query.parsed.context.clone().unwrap_or_default().to_string().contains("Kisqali"));
    // AND each caller's session holds only their own turn
    let a = session_of(&h, ANALYST, "shared-id").await.expect("mine");
    let b = session_of(&h, OTHER, "shared-id").await.expect("theirs");
    assert_eq!((a.turn_count, b.turn_count), (1, 1));
    assert_eq!(a.turns[0].query_id, mine.query_id);
    assert_eq!(b.turns[0].query_id, theirs.query_id);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_session_id_starts_a_new_session_under_that_id() {
    let h = Harness::start(shipped_manifest());
    let out = turn(&h, "And for Fabhalta?", Some("never-seen-before"), ANALYST).await;
    assert_eq!(out.session_id, "never-seen-before");
    assert!(carried(&out).is_empty());
    let s = session_of(&h, ANALYST, "never-seen-before").await.expect("created");
    assert_eq!(s.turn_count, 1);
}

#[tokio::test(start_paused = true)]
async fn a_session_expires_after_its_ttl_and_the_next_turn_starts_afresh() {
    let mut m = shipped_manifest();
    m.context.session_ttl = Some("1h".parse().expect("duration"));
    let h = Harness::start(m);
    let first = turn(&h, "What is the market share of Kisqali in the Northeast?", Some("s-ttl"), ANALYST).await;
    assert!(session_of(&h, ANALYST, "s-ttl").await.is_some());
    // WHEN more than an hour passes
    tokio::time::sleep(Duration::from_secs(3_700)).await;
    // THEN the session reads as absent and a follow-up has no history
    assert!(session_of(&h, ANALYST, "s-ttl").await.is_none());
    let later = turn(&h, "And for Fabhalta?", Some("s-ttl"), ANALYST).await;
    assert!(carried(&later).is_empty());
    let s = session_of(&h, ANALYST, "s-ttl").await.expect("a new session");
    assert_eq!(s.turn_count, 1);
    assert_ne!(s.turns[0].query_id, first.query_id);
}

#[tokio::test(start_paused = true)]
async fn a_redelivered_synthesis_records_no_second_turn() {
    let h = Harness::start(shipped_manifest());
    let out = turn(&h, "What is the market share of Kisqali in the Northeast?", Some("s-redeliver"), ANALYST).await;
    for _ in 0..3 {
        switchyard_engine::synth::synthesize(&h.system.deps, &out.query_id).await.expect("a duplicate is harmless");
    }
    let s = session_of(&h, ANALYST, "s-redeliver").await.expect("session");
    assert_eq!(s.turn_count, 1);
    assert_eq!(s.turns.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn concurrent_turns_on_one_session_are_all_recorded_once_each() {
    let h = Harness::start(shipped_manifest());
    let first = turn(&h, "What is the market share of Kisqali in the Northeast?", Some("s-busy"), ANALYST).await;
    // WHEN five follow-ups arrive before any of them is answered
    let questions =
        ["And for Fabhalta?", "And in the Midwest?", "What about Q3?", "And for Scemblix?", "And the West?"];
    let mut ids = Vec::new();
    for q in questions {
        let response = post(&h, json!({ "query": q, "session_id": "s-busy" }), ANALYST).await;
        assert_eq!(response.status_code, 202);
        ids.push(json_body(&response)["query_id"].as_str().expect("id").to_string());
    }
    for id in &ids {
        h.output(id).await;
    }
    for _ in 0..1_000 {
        if session_of(&h, ANALYST, "s-busy").await.is_some_and(|s| s.turn_count == 6) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // THEN every turn is recorded exactly once, numbered 1..=6
    let s = session_of(&h, ANALYST, "s-busy").await.expect("session");
    assert_eq!(s.turn_count, 6);
    let mut recorded: Vec<&String> = s.recorded.iter().collect();
    recorded.sort();
    recorded.dedup();
    assert_eq!(recorded.len(), 6);
    assert_eq!(s.turns.iter().map(|t| t.seq).collect::<Vec<_>>(), (1..=6).collect::<Vec<u64>>());
    // AND each saw the same consistent history: the one turn completed before they arrived
    for id in &ids {
        let detail = context_event(&h, id).await.expect("context");
        assert_eq!(detail["turn"], json!(2), "{detail}");
        assert_eq!(detail["turns_available"], json!(1));
    }
    assert!(s.has_recorded(&first.query_id));
}

#[tokio::test(start_paused = true)]
async fn a_fifty_turn_conversation_stays_far_under_the_item_limit() {
    let h = Harness::start(shipped_manifest());
    let first = turn(&h, "What is the market share of Kisqali in the Northeast?", None, ANALYST).await;
    let follow_ups = ["And for Fabhalta?", "And in the Midwest?", "And for Scemblix?", "What about the West?"];
    for n in 0..49 {
        turn(&h, follow_ups[n % follow_ups.len()], Some(&first.session_id), ANALYST).await;
    }
    let s = session_of(&h, ANALYST, &first.session_id).await.expect("session");
    let bytes = serde_json::to_vec(&s).expect("json").len();
    println!(
        "50-turn session through the pipeline: {bytes} bytes, {} raw turns, {} summary lines ({}), {} notes",
        s.turns.len(),
        s.summary.as_ref().map_or(0, |x| x.lines.len()),
        s.summary.as_ref().map_or("none", |x| x.method.as_str()),
        s.notes.len()
    );
    assert_eq!(s.turn_count, 50);
    assert!(s.turns.len() <= 12);
    assert_eq!(s.summary.as_ref().map(|x| x.method.as_str()), Some("extractive"));
    assert!(bytes < 40 * 1024, "{bytes} bytes");
}

#[tokio::test(start_paused = true)]
async fn an_oversized_history_is_trimmed_to_the_stage_budget() {
    let mut m = shipped_manifest();
    m.context.budgets.agent = 60;
    m.context.budgets.classifier = 40;
    let h = Harness::start(m);
    let first = turn(&h, "What is the market share of Kisqali in the Northeast?", Some("s-big"), ANALYST).await;
    turn(&h, "And for Fabhalta?", Some("s-big"), ANALYST).await;
    let third = turn(&h, "And in the Midwest?", Some("s-big"), ANALYST).await;
    let detail = context_event(&h, &third.query_id).await.expect("context");
    assert!(detail["agent"]["tokens"].as_u64().expect("tokens") <= 60, "{detail}");
    assert!(detail["classifier"]["tokens"].as_u64().expect("tokens") <= 40, "{detail}");
    assert!(detail["over_budget"].as_u64().expect("count") > 0, "{detail}");
    assert!(first.session_id == "s-big");
}

#[tokio::test(start_paused = true)]
async fn hostile_session_input_is_refused_with_the_field_named() {
    let h = Harness::start(shipped_manifest());
    for (body, field) in [
        (json!({ "query": "Kisqali share?", "session_id": "../../etc/passwd" }), "session_id"),
        (json!({ "query": "Kisqali share?", "session_id": "x".repeat(129) }), "session_id"),
        (json!({ "query": "Kisqali share?", "session_id": "" }), "session_id"),
        (json!({ "query": "Kisqali share?", "session_id": 42 }), "session_id"),
        (
            json!({ "query": "Kisqali share?", "conversation_history": vec![json!({"role": "user"}); 51] }),
            "conversation_history",
        ),
    ] {
        let response = post(&h, body.clone(), ANALYST).await;
        assert_eq!(response.status_code, 400, "{body}");
        let errors = json_body(&response)["error"]["details"].to_string();
        assert!(errors.contains(field), "{field} not named in {errors}");
    }
    // An id with a separator another caller's key could use still names the caller's own session.
    let out = turn(&h, "What is the market share of Kisqali?", Some("a:b.c-d_e"), ANALYST).await;
    assert_eq!(out.session_id, "a:b.c-d_e");
}

#[test]
fn the_context_section_is_validated_with_the_path_named() {
    let base = switchyard_model::manifest::EMBEDDED_ROUTING_YAML;
    for (section, path) in [
        ("context:\n  history_turns: 0\n", "context.history_turns"),
        ("context:\n  history_turns: 4\n  summary:\n    keep_turns: 6\n", "context.summary.keep_turns"),
        ("context:\n  notes:\n    decay: 0\n", "context.notes.decay"),
        ("context:\n  summary:\n    agent: nobody\n", "context.summary.agent"),
        ("context:\n  budgets:\n    agents:\n      nobody: 10\n", "context.budgets.agents.nobody"),
        ("context:\n  session_ttl: 1m\n", "context.session_ttl"),
        ("context:\n  histroy_turns: 3\n", "context"),
    ] {
        let text = format!("{base}\n{section}");
        let err = Manifest::from_yaml(&text, "routing.yaml").expect_err(section).to_string();
        assert!(err.contains(path), "{section}: {err}");
    }
    let ok = format!("{base}\ncontext:\n  history_turns: 8\n  summary:\n    threshold_tokens: 900\n");
    let m = Manifest::from_yaml(&ok, "routing.yaml").expect("valid");
    assert_eq!((m.context.history_turns, m.context.summary.threshold_tokens, m.context.budgets.agent), (8, 900, 1_500));
}

#[tokio::test(start_paused = true)]
async fn past_the_threshold_older_turns_are_summarized_by_the_configured_agent() {
    // GIVEN a summarizer agent and a history of two raw turns at most
    let mut m = shipped_manifest();
    let summarizer = m.agents[0].id.clone();
    m.context.summary.agent = Some(summarizer.clone());
    m.context.history_turns = 2;
    m.context.summary.keep_turns = 1;
    let h = Harness::start(m);
    let first = turn(&h, "What is the market share of Kisqali in the Northeast?", None, ANALYST).await;
    turn(&h, "And for Fabhalta?", Some(&first.session_id), ANALYST).await;
    let s = session_of(&h, ANALYST, &first.session_id).await.expect("session");
    assert!(s.summary.is_none(), "two turns fit: nothing compacted");
    // WHEN a third turn passes the limit
    turn(&h, "And in the Midwest?", Some(&first.session_id), ANALYST).await;
    // THEN the two oldest are summarized by the agent and the latest stays raw
    let s = session_of(&h, ANALYST, &first.session_id).await.expect("session");
    assert_eq!(s.turns.iter().map(|t| t.seq).collect::<Vec<_>>(), vec![3]);
    let summary = s.summary.expect("a summary");
    assert_eq!(summary.method, format!("agent:{summarizer}"));
    assert_eq!(summary.through_turn, 2);
    assert!(!summary.lines.is_empty());
}
