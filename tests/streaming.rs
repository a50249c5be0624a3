//! Answers that stream: `token` events in the query's event log while a model writes, on the
//! embedded system with the scripted model writing one word every `pace` (virtual time, so the
//! timing is exact). Checked as a reader of the log sees it: token events appear before the
//! output exists, each draft is its own stream, and the stream the `synthesis` event names
//! spells the output's `response_text` exactly.

use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use switchyard_engine::ports::{Event, EventKind};
use switchyard_model::contracts::{OrchestratorOutput, OutputStatus};
use switchyard_model::manifest::Manifest;
use switchyard_tests::*;

fn example(name: &str) -> Manifest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name).join("routing.yaml");
    Manifest::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

async fn submit(h: &Harness, question: &str) -> String {
    let response = h.post(question, "user-1", "").await;
    assert_eq!(response.status_code, 202, "intake answered {}", text_body(&response));
    json_body(&response)["query_id"].as_str().expect("query id").to_string()
}

/// Follow the log the way the events endpoint does (poll every 10 ms of virtual time) until
/// the final event: the events, and how many token events were in the log while the query had
/// no output yet.
async fn follow(h: &Harness, query_id: &str) -> (Vec<Event>, usize, OrchestratorOutput) {
    let store = &h.system.deps.store;
    let mut tokens_before_output = 0;
    for _ in 0..100_000 {
        let events = store.list_events(query_id).await.expect("events");
        if events.iter().any(|e| e.kind == EventKind::Final) {
            let output = store.get_output(query_id).await.expect("store").expect("output after the final event");
            return (events, tokens_before_output, std::sync::Arc::unwrap_or_clone(output));
        }
        if store.get_output(query_id).await.expect("store").is_none() {
            tokens_before_output = events.iter().filter(|e| e.kind == EventKind::Token).count();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("query {query_id} never ended");
}

/// The text of one stream's token events, in `seq` order.
fn stream_text(events: &[Event], stream: &str) -> String {
    let mut batches: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e.kind == EventKind::Token && e.detail["stream"] == stream)
        .map(|e| (e.detail["seq"].as_u64().expect("seq"), e.detail["text"].as_str().expect("text")))
        .collect();
    batches.sort();
    batches.into_iter().map(|(_, t)| t).collect()
}

fn streams(events: &[Event]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for e in events.iter().filter(|e| e.kind == EventKind::Token) {
        let id = e.detail["stream"].as_str().expect("stream").to_string();
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

fn answer_stream(events: &[Event]) -> Option<String> {
    events
        .iter()
        .find(|e| e.kind == EventKind::Synthesis)
        .and_then(|e| e.detail["answer_stream"].as_str())
        .map(String::from)
}

#[tokio::test(start_paused = true)]
async fn unified_chat_streams_the_draft_the_critic_rejects_then_the_revision_that_becomes_the_answer() {
    let h = Harness::start(example("unified-chat"));
    let id = submit(&h, "How many vacation days can I carry over?").await;
    let (events, tokens_before_output, output) = follow(&h, &id).await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    assert!(tokens_before_output > 0, "a reader of the log saw token events before the output existed");

    // Two drafts, each its own stream, in two stages; the critique between them rejects the first.
    let drafts = streams(&events);
    assert_eq!(drafts.len(), 2, "{drafts:?}");
    let first = stream_text(&events, &drafts[0]);
    assert_eq!(first, "Employees may carry over some unused vacation days into the next year.");
    let winner = answer_stream(&events).expect("the synthesis event names the answer's stream");
    assert_eq!(winner, drafts[1], "the revision won, not the rejected draft");
    assert_eq!(stream_text(&events, &winner), output.response_text, "tokens spell the answer exactly");
    let stage_of = |stream: &str| {
        events
            .iter()
            .find(|e| e.kind == EventKind::Token && e.detail["stream"] == stream)
            .and_then(|e| e.detail["draft"].as_u64())
    };
    assert!(stage_of(&drafts[0]) < stage_of(&drafts[1]));
    let keys: Vec<&str> = events.iter().map(|e| e.key.as_str()).collect();
    let first_critique = events.iter().position(|e| e.kind == EventKind::Critique).expect("critique");
    assert_eq!(events[first_critique].detail["verdict"], "reject");
    let last_first_draft =
        events.iter().rposition(|e| e.detail["stream"] == drafts[0].as_str()).expect("first draft tokens");
    let first_revision = events.iter().position(|e| e.detail["stream"] == drafts[1].as_str()).expect("revision");
    assert!(last_first_draft < first_critique && first_critique < first_revision, "{keys:#?}");

    // Batched: far fewer events than words (one word every 30 ms, flushed every 100 ms).
    let words = output.response_text.split_whitespace().count();
    let batches = events.iter().filter(|e| e.detail["stream"] == winner.as_str()).count();
    assert!(batches >= 2 && batches * 2 <= words, "{batches} token events for {words} words");
}

#[tokio::test(start_paused = true)]
async fn the_first_token_is_in_the_log_within_the_pace_and_flush_interval_of_the_model_starting() {
    let h = Harness::start(example("unified-chat"));
    let id = submit(&h, "How many vacation days can I carry over?").await;
    let (events, _, _) = follow(&h, &id).await;
    let dispatch_at = events.iter().find(|e| e.kind == EventKind::Dispatch).expect("dispatch").at;
    let first_token_at = events.iter().find(|e| e.kind == EventKind::Token).expect("token").at;
    let waited = (first_token_at - dispatch_at).num_milliseconds();
    // The answer field opens with the model's first word (one 30 ms pace), written at once;
    // the rest is batched per the 100 ms flush interval.
    assert!((30..=45).contains(&waited), "first token {waited} ms after the dispatch");
}

// ---- the synthesis agent --------------------------------------------------------------------

fn with_synthesis(reply_yaml: &str, pace: &str, timeout: &str) -> Manifest {
    let top =
        format!("tokens: {{flush_interval: 50ms, flush_chars: 40}}\nsynthesis: {{agent: writer, timeout: {timeout}}}");
    Manifest::from_yaml(&manifest_yaml(reply_yaml, pace, &top), "<synthesis>").unwrap_or_else(|e| panic!("{e}"))
}

/// A manifest with one builtin agent citing the handbook and the `writer` synthesis agent;
/// `top` holds the `tokens` and `synthesis` sections.
fn manifest_yaml(reply_yaml: &str, pace: &str, top: &str) -> String {
    format!(
        r#"
version: 1
name: synthesis
tiers:
  - {{tier: 1, timeout: 5s, max_retries: 0, fallback: none}}
{top}
providers:
  - id: offline
    kind: scripted
    pace: {pace}
    responses:
      write_answer:
        - reply: {reply_yaml}
agents:
  - id: facts
    tier: 1
    kind: builtin
    builtin:
      response: Up to five unused days carry over and expire on March 31.
      confidence: 0.9
      evidence:
        - {{source_type: document, source_id: "handbook#4.2", text: Up to five days carry over.}}
  - id: writer
    tier: 1
    kind: llm
    llm:
      provider: offline
      system: Write the final answer from the agents' answers, citing source ids in brackets.
      prompt: "Question: {{question}}\nAnswers: {{handoffs}}\nSources: {{citations}}"
      stream: answer
      output_schema:
        name: write_answer
        schema: {{type: object, required: [answer], properties: {{answer: {{type: string}}}}}}
intents:
  - id: policy_question
    keywords: [vacation, carry]
    utterances: ["How many vacation days can I carry over?"]
    route: {{primary: facts}}
"#
    )
}

fn synthesis_block(output: &OrchestratorOutput) -> &Value {
    &output.orchestration.as_ref().unwrap_or_else(|| panic!("no orchestration: {output:#?}"))["synthesis"]
}

#[tokio::test(start_paused = true)]
async fn the_synthesis_agent_writes_and_streams_the_answer_keeping_citations_band_and_caveats() {
    let manifest = with_synthesis(
        r#"{answer: "You can carry over up to five unused days; they expire on March 31 [handbook#4.2]."}"#,
        "20ms",
        "5s",
    );
    let h = Harness::start(manifest);
    let id = submit(&h, "How many vacation days can I carry over?").await;
    let (events, tokens_before_output, output) = follow(&h, &id).await;
    assert_eq!(
        output.response_text,
        "You can carry over up to five unused days; they expire on March 31 [handbook#4.2]."
    );
    assert_eq!(synthesis_block(&output)["answered_by"], "synthesis_agent");
    let spent = |key: &str| synthesis_block(&output)[key].as_u64().unwrap_or(0);
    assert!(spent("input_tokens") > 0 && spent("output_tokens") > 0, "the synthesis agent's tokens are kept");
    assert_eq!(output.citations.len(), 1, "the handoff's citation is kept");
    assert!(output.final_reason.is_some(), "the band still applies");
    let winner = answer_stream(&events).expect("answer stream");
    assert!(winner.starts_with("synthesis-v"), "{winner}");
    assert_eq!(stream_text(&events, &winner), output.response_text);
    assert!(tokens_before_output > 0);
    // Synthesis tokens list after every stage and before the synthesis event.
    let token_at = events.iter().position(|e| e.detail["stream"] == winner.as_str()).expect("token");
    let synthesis_at = events.iter().position(|e| e.kind == EventKind::Synthesis).expect("synthesis");
    assert!(token_at < synthesis_at);
}

#[tokio::test(start_paused = true)]
async fn a_synthesis_agent_that_runs_out_of_time_leaves_the_deterministic_answer_and_says_so() {
    // 16 words at 1 s each never finish within the 2 s synthesis timeout.
    let manifest = with_synthesis(
        r#"{answer: "You can carry over up to five unused days; they expire on March 31 [handbook#4.2]."}"#,
        "1s",
        "2s",
    );
    let h = Harness::start(manifest);
    let id = submit(&h, "How many vacation days can I carry over?").await;
    let (events, _, output) = follow(&h, &id).await;
    assert_eq!(output.status, OutputStatus::Success);
    assert_eq!(output.response_text, "Up to five unused days carry over and expire on March 31.");
    let block = synthesis_block(&output);
    assert_eq!(block["answered_by"], "deterministic");
    assert!(block["fallback_reason"].as_str().is_some_and(|r| r.contains("no answer within 2000 ms")), "{block}");
    let error = output.error.as_ref().expect("the synthesis agent's failure is named");
    assert_eq!(error.category, switchyard_model::contracts::ErrorCategory::SynthesisFailed);
    assert!(error.message.contains("no answer within 2000 ms"), "{}", error.message);
    // The cut-off synthesis stream is in the log, but it is not the answer's.
    assert!(streams(&events).iter().any(|s| s.starts_with("synthesis-v")));
    assert_eq!(answer_stream(&events), None, "a builtin answer is not streamed");
}

#[tokio::test(start_paused = true)]
async fn a_synthesis_answer_that_drops_every_citation_is_refused_for_the_deterministic_one() {
    let manifest = with_synthesis(r#"{answer: "Five days, I think."}"#, "0ms", "5s");
    let h = Harness::start(manifest);
    let id = submit(&h, "How many vacation days can I carry over?").await;
    let (_, _, output) = follow(&h, &id).await;
    assert_eq!(output.response_text, "Up to five unused days carry over and expire on March 31.");
    let block = synthesis_block(&output);
    assert_eq!(block["answered_by"], "deterministic");
    assert!(block["fallback_reason"].as_str().is_some_and(|r| r.contains("cites none of the 1 sources")), "{block}");
}

#[tokio::test(start_paused = true)]
async fn a_synthesis_agent_whose_answer_breaks_its_schema_leaves_the_deterministic_answer() {
    let manifest = with_synthesis(r#"{text: "no answer field"}"#, "0ms", "5s");
    let h = Harness::start(manifest);
    let id = submit(&h, "How many vacation days can I carry over?").await;
    let (_, _, output) = follow(&h, &id).await;
    assert_eq!(output.response_text, "Up to five unused days carry over and expire on March 31.");
    assert_eq!(synthesis_block(&output)["answered_by"], "deterministic");
    assert!(synthesis_block(&output)["fallback_reason"].as_str().is_some_and(|r| r.contains("schema")));
}

#[tokio::test(start_paused = true)]
async fn a_synthesis_agent_never_rewrites_an_answer_that_only_a_fallback_template_gave() {
    let template = "The handbook is unavailable right now; please try again later.";
    let yaml = manifest_yaml(r#"{answer: "Five days [handbook#4.2]."}"#, "0ms", "synthesis: {agent: writer, timeout: 5s}")
        .replace("fallback: none}", &format!("fallback: {{template: \"{template}\"}}}}"))
        .replace(
            "    kind: builtin\n    builtin:\n      response: Up to five unused days carry over and expire on March 31.\n      confidence: 0.9\n      evidence:\n        - {source_type: document, source_id: \"handbook#4.2\", text: Up to five days carry over.}\n",
            "    kind: scripted\n    scripted: {fail_times: 9, recoverable: false}\n",
        );
    let h = Harness::start(Manifest::from_yaml(&yaml, "<template only>").unwrap_or_else(|e| panic!("{e}")));
    let id = submit(&h, "How many vacation days can I carry over?").await;
    let (_, _, output) = follow(&h, &id).await;
    assert_eq!(output.response_text, template, "{output:#?}");
    let block = synthesis_block(&output);
    assert_eq!(block["answered_by"], "deterministic");
    assert!(
        block["fallback_reason"].as_str().is_some_and(|r| r.contains("only fallback templates answered")),
        "{block}"
    );
}

// ---- manifest checks --------------------------------------------------------------------------

fn problems(top: &str) -> String {
    match Manifest::from_yaml(&manifest_yaml(r#"{answer: "x [handbook#4.2]"}"#, "0ms", top), "<patched>") {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn streaming_settings_that_cannot_work_are_refused_naming_the_field_and_the_rule() {
    assert_eq!(problems("synthesis: {agent: writer}"), "", "the base manifest is valid");
    let cases = [
        ("tokens: {flush_interval: 0ms, flush_chars: 10}", "tokens.flush_interval"),
        ("tokens: {flush_interval: 1m, flush_chars: 10}", "between 1ms and 5s"),
        ("tokens: {flush_interval: 10ms, flush_chars: 0}", "tokens.flush_chars"),
        ("tokens: {flush_interval: 10ms, flush_chars: 100000000}", "between 1 and 16000"),
        ("tokens: {flush_every: 10ms}", "flush_every"),
        ("synthesis: {agent: nobody}", "synthesis.agent"),
        ("synthesis: {agent: facts}", "must be `kind: llm`"),
        ("synthesis: {agent: writer, timeout: 10m}", "synthesis.timeout"),
        ("synthesis: {agent: writer, intents: [weather]}", "synthesis.intents[0]"),
        ("synthesis: {timeout: 1s}", "agent"),
    ];
    for (patch, expected) in cases {
        let got = problems(patch);
        assert!(got.contains(expected), "{patch}: expected `{expected}` in {got:?}");
    }
}

#[test]
fn a_streamed_field_must_be_a_string_of_the_output_schema() {
    let yaml = manifest_yaml(r#"{answer: "x"}"#, "0ms", "");
    for field in ["confidence", "missing"] {
        let bad = yaml.replace("stream: answer", &format!("stream: {field}")).replace(
            "properties: {answer: {type: string}}",
            "properties: {answer: {type: string}, confidence: {type: number}}",
        );
        assert_ne!(bad, yaml);
        let err = Manifest::from_yaml(&bad, "<bad>").expect_err("refused").to_string();
        assert!(err.contains("agents[1].llm.stream") && err.contains("type: string"), "{field}: {err}");
    }
}
