//! The five example manifests under `examples/`, one per seed system, end to end on the
//! embedded default with no network: each test asks the question a user of that system would
//! ask and checks the seed's behaviour in the output and the event log. Virtual time, so the
//! timeouts, budgets and background steps are exact and instant.

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use switchyard_engine::ports::EventKind;
use switchyard_model::contracts::{ConfidenceBand, ErrorCategory, OrchestratorOutput, OutputStatus};
use switchyard_model::manifest::{AgentKind, Manifest, ScriptedSettings};
use switchyard_tests::*;

fn example(name: &str) -> Manifest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name).join("routing.yaml");
    Manifest::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

async fn ask_as(h: &Harness, question: &str, roles: &str) -> OrchestratorOutput {
    let response = h.post(question, "user-1", roles).await;
    assert_eq!(response.status_code, 202, "intake answered {}", text_body(&response));
    let id = json_body(&response)["query_id"].as_str().expect("query id").to_string();
    h.output(&id).await
}

async fn events(h: &Harness, output: &OrchestratorOutput) -> Vec<switchyard_engine::ports::Event> {
    h.system.deps.store.list_events(&output.query_id).await.expect("events")
}

fn orchestration<'a>(output: &'a OrchestratorOutput, key: &str) -> &'a Value {
    &output.orchestration.as_ref().unwrap_or_else(|| panic!("no orchestration block: {output:#?}"))[key]
}

#[tokio::test(start_paused = true)]
async fn every_example_answers_its_first_utterance_offline() {
    for name in ["e2i", "rag-manager", "negotiation", "unified-chat", "research-assistant"] {
        let manifest = example(name);
        let question = manifest.intents[0].utterances[0].clone();
        let h = Harness::start(manifest);
        let output = ask_as(&h, &question, "").await;
        assert_eq!(output.status, OutputStatus::Success, "{name}: {output:#?}");
        assert!(!output.response_text.is_empty(), "{name}: an answer");
    }
}

// ---- negotiation (docs/origins.md#negotiation) ----------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_orchestrator_re_consults_the_needs_expert_then_asks_the_supplier_for_the_missing_terms() {
    let h = Harness::start(example("negotiation"));
    let output = ask_as(&h, "Hi, we can do 500 units of HG-40-SS at $4.20 each.", "").await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    let deliberation = orchestration(&output, "deliberation");
    assert_eq!(deliberation["iterations"], 2);
    assert_eq!(deliberation["consultations"][0]["expert"], "needs_expert");
    assert_eq!(deliberation["action"], "clarify");
    assert_eq!(deliberation["escalated"], false);
    assert!(output.response_text.contains("lead time"), "{}", output.response_text);
    assert_eq!(
        output.agents_dispatched,
        [
            "extraction_expert",
            "escalation_expert",
            "negotiation_orchestrator",
            "needs_expert",
            "negotiation_orchestrator",
            "response_crafter"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_final_offer_that_never_settles_escalates_at_max_iterations() {
    let h = Harness::start(example("negotiation"));
    let output = ask_as(&h, "This is our final offer: $4.60 per unit for 500 units.", "").await;
    let deliberation = orchestration(&output, "deliberation");
    assert_eq!(deliberation["iterations"], 3, "max_iterations is 3: {deliberation:#}");
    assert_eq!(deliberation["consultations"].as_array().map(Vec::len), Some(2));
    assert_eq!(deliberation["escalated"], true);
    assert_eq!(deliberation["action"], "escalate");
    assert!(output.response_text.contains("manager"), "the crafter drafts the hand-over: {}", output.response_text);
    let log = events(&h, &output).await;
    let escalation =
        log.iter().find(|e| e.kind == EventKind::Step && e.detail["escalated"] == true).expect("an escalation event");
    assert_eq!(escalation.detail["iteration"], 3);
}

#[tokio::test(start_paused = true)]
async fn experts_never_see_fields_outside_their_input_lists() {
    let manifest = example("negotiation");
    let h = Harness::start(manifest.clone());
    let output = ask_as(&h, "Hi, we can do 500 units of HG-40-SS at $4.20 each.", "").await;
    let query = h.system.deps.store.get_query(&output.query_id).await.expect("store").expect("query");
    let plan = query.plan.expect("plan");
    let mut experts_seen = 0;
    for d in plan.all_dispatches() {
        let agent = manifest.agent(&d.dispatch.target_agent).expect("agent");
        if !["extraction_expert", "escalation_expert", "needs_expert"].contains(&agent.id.as_str()) {
            continue;
        }
        experts_seen += 1;
        let allowed: BTreeSet<&str> =
            agent.inputs.iter().flatten().map(String::as_str).chain(["additional_question"]).collect();
        let seen: BTreeSet<&str> =
            d.dispatch.payload.context.as_object().expect("object").keys().map(String::as_str).collect();
        assert!(seen.is_subset(&allowed), "{} saw {seen:?}, may see {allowed:?}", agent.id);
    }
    assert_eq!(experts_seen, 3);
    let extraction =
        plan.all_dispatches().find(|d| d.dispatch.target_agent == "extraction_expert").expect("extraction");
    for hidden in ["negotiation_rules", "order_context", "escalation_triggers"] {
        assert!(extraction.dispatch.payload.context.get(hidden).is_none(), "extraction saw {hidden}");
    }
    let orchestrator =
        plan.all_dispatches().find(|d| d.dispatch.target_agent == "negotiation_orchestrator").expect("orchestrator");
    assert_eq!(
        orchestrator.dispatch.payload.context["order_context"]["target_price"],
        json!(4.0),
        "the orchestrator sees everything"
    );
}

// ---- unified chat (docs/origins.md#unified-chat) --------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_critic_rejects_the_first_draft_then_accepts_the_revision() {
    let h = Harness::start(example("unified-chat"));
    let output = ask_as(&h, "How many vacation days can I carry over?", "").await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    assert!(output.response_text.contains("§4.2"), "the revised answer: {}", output.response_text);
    let critique = orchestration(&output, "critique");
    let verdicts: Vec<&str> =
        critique["rounds"].as_array().expect("rounds").iter().filter_map(|r| r["verdict"].as_str()).collect();
    assert_eq!(verdicts, ["reject", "accept"]);
    assert_eq!(critique["revisions"], 1);
    assert!(critique["summary"].as_str().is_some_and(|s| s.contains("one revision")), "{critique:#}");
    assert_eq!(output.agents_dispatched, ["policy_answerer", "answer_critic", "policy_answerer", "answer_critic"]);
    let log = events(&h, &output).await;
    let critiques: Vec<&Value> =
        log.iter().filter(|e| e.kind == EventKind::Critique).map(|e| &e.detail["verdict"]).collect();
    assert_eq!(critiques, [&json!("reject"), &json!("accept")]);
    let usage = output.agent_results.iter().find(|r| r.agent_id == "policy_answerer").expect("answerer");
    assert_eq!(usage.attempts, 1);
}

#[tokio::test(start_paused = true)]
async fn a_critic_that_fails_is_recorded_as_failed_with_a_caveat_and_the_draft_stands_unrevised() {
    // The critic's model has no answer for it: it fails, and the tier's template stands in.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/unified-chat/routing.yaml");
    let text =
        std::fs::read_to_string(&path).expect("example").replace("      evaluate_answer:\n", "      unused_schema:\n");
    let h = Harness::start(Manifest::from_yaml(&text, "<unified-chat without a critic model>").expect("manifest"));
    let output = ask_as(&h, "How many vacation days can I carry over?", "").await;
    let critique = orchestration(&output, "critique");
    assert_eq!(critique["rounds"][0]["verdict"], "failed", "{critique:#}");
    assert_eq!((critique["accepted"].as_bool(), critique["failed"].as_bool()), (Some(false), Some(true)));
    assert!(
        output.caveats.iter().any(|c| c.starts_with("The critic did not answer after 0 revision(s)")),
        "{:#?}",
        output.caveats
    );
    assert_eq!(output.agents_dispatched, ["policy_answerer", "answer_critic"], "a failed review revises nothing");
    let log = events(&h, &output).await;
    let verdicts: Vec<&Value> =
        log.iter().filter(|e| e.kind == EventKind::Critique).map(|e| &e.detail["verdict"]).collect();
    assert_eq!(verdicts, [&json!("failed")]);
}

// ---- rag manager (docs/origins.md#rag-manager) ----------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_question_asking_for_a_password_gets_the_guardrails_safe_reply_and_nothing_else_runs() {
    let h = Harness::start(example("rag-manager"));
    let output = ask_as(&h, "What is the admin password for the annual report portal?", "").await;
    assert_eq!(output.status, OutputStatus::Failed);
    assert_eq!(
        output.response_text,
        "I can't help with passwords or account access. Please contact the IT service desk."
    );
    assert_eq!(output.error.as_ref().map(|e| e.category), Some(ErrorCategory::GuardrailBlocked));
    assert_eq!(output.agents_dispatched, ["input_guard"]);
}

#[tokio::test(start_paused = true)]
async fn an_incoherent_question_fails_politely_without_calling_any_specialist() {
    let h = Harness::start(example("rag-manager"));
    let output = ask_as(&h, "purple revenue sideways the report of?", "").await;
    assert_eq!(output.status, OutputStatus::Failed);
    assert_eq!(output.error.as_ref().map(|e| e.category), Some(ErrorCategory::IncoherentQuery));
    assert!(
        output.response_text.starts_with("Sorry — I couldn't make sense of that question"),
        "{}",
        output.response_text
    );
    assert_eq!(output.agents_dispatched, ["input_guard", "query_planner"], "no retrieval, rerank or synthesis");
}

#[tokio::test(start_paused = true)]
async fn a_coherent_question_passes_both_guardrails_and_the_retriever_gets_the_revised_query() {
    let h = Harness::start(example("rag-manager"));
    let output = ask_as(&h, "How did revenue grow by segment?", "").await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    assert_eq!(
        output.agents_dispatched,
        [
            "input_guard",
            "query_planner",
            "hybrid_retriever",
            "dense_retriever",
            "relevance_reranker",
            "report_answerer",
            "output_guard"
        ]
    );
    assert_eq!(output.final_reason, Some(ConfidenceBand::ConfidenceHigh), "the best chunks cover every term");
    assert_eq!(orchestration(&output, "coherence")["revised_query"], "revenue growth by segment in the annual report");
    let query = h.system.deps.store.get_query(&output.query_id).await.expect("store").expect("query");
    let retriever = query
        .plan
        .expect("plan")
        .all_dispatches()
        .find(|d| d.dispatch.target_agent == "hybrid_retriever")
        .cloned()
        .expect("retriever");
    assert_eq!(retriever.dispatch.payload.context["revised_query"], "revenue growth by segment in the annual report");
}

/// The `retrieval` step event of one retriever.
fn retrieval_of<'a>(events: &'a [switchyard_engine::ports::Event], agent: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e.kind == EventKind::Step && e.detail["step"] == "retrieval" && e.detail["agent"] == agent)
        .map(|e| &e.detail["retrieval"])
        .unwrap_or_else(|| panic!("a retrieval step of {agent} in the event log"))
}

// ---- retrieval over the shipped corpus (docs/origins.md#rag-manager) ------------------------

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/rag-manager/corpus")
}

/// The body of a shipped document (after its header), words joined by single spaces.
fn document_words(doc_id: &str) -> String {
    let text = std::fs::read_to_string(corpus_dir().join(format!("{doc_id}.md")))
        .unwrap_or_else(|e| panic!("citation points to `{doc_id}`, which is not a shipped document: {e}"));
    let body = text.split_once("\n\n").map(|(_, b)| b).unwrap_or(&text);
    body.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The year in a shipped document's `date:` header.
fn document_year(doc_id: &str) -> String {
    let text = std::fs::read_to_string(corpus_dir().join(format!("{doc_id}.md"))).expect("document");
    text.lines().find_map(|l| l.strip_prefix("date: ")).map(|d| d[..4].to_string()).expect("dated")
}

async fn ask_with(h: &Harness, body: Value) -> OrchestratorOutput {
    let response = switchyard_engine::handlers::handle_http(
        &h.system.deps,
        api_request("POST", "/v1/queries", "", Some(&body.to_string()), "user-1", ""),
    )
    .await;
    assert_eq!(response.status_code, 202, "intake answered {}", text_body(&response));
    let id = json_body(&response)["query_id"].as_str().expect("query id").to_string();
    h.output(&id).await
}

fn cited_docs(output: &OrchestratorOutput) -> Vec<String> {
    output.citations.iter().map(|c| c.source_id.split('#').next().unwrap_or_default().to_string()).collect()
}

#[tokio::test(start_paused = true)]
async fn the_rag_manager_answers_from_the_shipped_corpus_citing_each_chunk_once_with_reflection_notes() {
    // GIVEN the example as shipped: its retriever indexes examples/rag-manager/corpus at start
    let h = Harness::start(example("rag-manager"));
    // WHEN a question the corpus answers is asked
    let output = ask_as(&h, "How did revenue grow by segment?", "").await;
    // THEN the answer quotes the 2024 annual report, with its chunk id and year
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    assert!(output.response_text.contains("Revenue grew 12% in 2024"), "{}", output.response_text);
    assert!(output.response_text.contains("[annual-report-2024-revenue#c1, 2024]"), "{}", output.response_text);
    // AND every citation is a chunk of a shipped document, each chunk id once
    assert!(output.citations.len() >= 2, "{:#?}", output.citations);
    let ids: BTreeSet<&str> = output.citations.iter().map(|c| c.source_id.as_str()).collect();
    assert_eq!(ids.len(), output.citations.len(), "each chunk_id once: {ids:?}");
    for c in &output.citations {
        let (doc, chunk) = c.source_id.split_once('#').expect("<doc>#c<n>");
        assert!(chunk.starts_with('c') && chunk[1..].parse::<u32>().is_ok(), "{}", c.source_id);
        let text = c.text.as_deref().expect("chunk text");
        assert!(document_words(doc).contains(text), "{} is not a chunk of {doc}.md: {text}", c.source_id);
        assert_eq!(c.source_type, switchyard_model::contracts::CitationSourceType::Document);
    }
    // AND reflection added the RAG manager design's UI notes as metadata, not to the answer text
    let reflection = output.reflection.as_ref().expect("reflection");
    assert_eq!((reflection.original_weight, reflection.revised_weight), (0.7, 0.3));
    assert!(reflection.applicability_note.starts_with("The answer addresses the question"), "{reflection:?}");
    assert!(reflection.uncertainty_note.contains("document(s) dated 2023–2024"), "{reflection:?}");
    assert!(!output.response_text.contains(&reflection.applicability_note));
    // AND the event log shows each retriever's attempts and own fusion
    let events = events(&h, &output).await;
    let retrieval = retrieval_of(&events, "hybrid_retriever");
    assert_eq!(retrieval["year_mode"], "none");
    assert_eq!(retrieval["attempts"][0]["setting"], "hybrid_strict");
    assert_eq!(retrieval["attempts"][0]["accepted"], true);
    assert_eq!(
        retrieval["attempts"][0]["lists"].as_array().map(Vec::len),
        Some(4),
        "bm25 + vector, question + revised"
    );
    assert_eq!(retrieval["merge"]["strategy"], "rrf");
    assert_eq!(retrieval["merge"]["k"], 60.0);
    let (listed, deduped) = (retrieval["merge"]["listed"].as_u64(), retrieval["merge"]["deduped"].as_u64());
    assert!(listed > deduped, "the lists overlap, fusion dedupes: {listed:?} → {deduped:?}");
    // AND at the fan-in the route's merge fused both retrievers' lists: RRF k = 60 over the
    // rankings the two handoffs report, recomputed here by hand, each chunk_id once
    let merge = events.iter().find(|e| e.detail["step"] == "merge").map(|e| &e.detail).expect("a merge event");
    assert_eq!((merge["strategy"].as_str(), merge["k"].as_f64()), (Some("rrf"), Some(60.0)));
    assert_eq!(merge["retrievers_answered"], json!(["hybrid_retriever", "dense_retriever"]));
    let handoffs = h.system.deps.store.list_handoffs(&output.query_id).await.expect("handoffs");
    let ranking = |agent: &str| -> Vec<String> {
        let h = handoffs.iter().find(|r| r.handoff.agent_id == agent).expect("handoff");
        h.handoff.result.primary_output["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .map(|c| c["chunk_id"].as_str().expect("chunk_id").to_string())
            .collect()
    };
    let (hybrid, dense) = (ranking("hybrid_retriever"), ranking("dense_retriever"));
    let mut by_hand: Vec<(String, f64)> = Vec::new();
    for list in [&hybrid, &dense] {
        for (rank, id) in list.iter().enumerate() {
            match by_hand.iter_mut().find(|(i, _)| i == id) {
                Some((_, s)) => *s += 1.0 / (60.0 + rank as f64 + 1.0),
                None => by_hand.push((id.clone(), 1.0 / (60.0 + rank as f64 + 1.0))),
            }
        }
    }
    by_hand.sort_by(|a, b| b.1.total_cmp(&a.1)); // stable: ties keep first-seen order
    let fused: Vec<(String, f64)> = merge["fused"]
        .as_array()
        .expect("fused")
        .iter()
        .map(|c| (c["chunk_id"].as_str().expect("id").to_string(), c["rrf"].as_f64().expect("rrf")))
        .collect();
    assert_eq!(merge["listed"].as_u64(), Some((hybrid.len() + dense.len()) as u64));
    assert_eq!(merge["deduped"].as_u64(), Some(by_hand.len() as u64));
    assert!(by_hand.len() < hybrid.len() + dense.len(), "the lists overlap");
    assert_eq!(fused.len(), by_hand.len().min(20));
    for ((got, g), (want, w)) in fused.iter().zip(&by_hand) {
        assert_eq!(got, want, "fused order {fused:?}");
        assert!((g - w).abs() < 1e-12, "{got}: {g} vs {w}");
    }
    // AND the reranker scored them; the answerer got the reranked top 4, and the citations
    // are exactly those chunks, in that order
    let rerank = events.iter().find(|e| e.detail["step"] == "rerank").map(|e| &e.detail).expect("a rerank event");
    assert_eq!(rerank["reranker_answered"], true);
    let top: Vec<&str> = rerank["top"].as_array().expect("top").iter().filter_map(|c| c["chunk_id"].as_str()).collect();
    assert_eq!(top.len(), 4);
    let cited: Vec<&str> = output.citations.iter().map(|c| c.source_id.as_str()).collect();
    assert_eq!(cited, top, "citations point to the merged list");
    assert!(!cited.iter().any(|c| !fused.iter().any(|(f, _)| f == c)), "every cited chunk came out of the merge");
}

#[tokio::test(start_paused = true)]
async fn requesting_2023_changes_the_answer_to_the_2023_report() {
    let h = Harness::start(example("rag-manager"));
    let question = "How did revenue grow by segment?";
    let any_year = ask_with(&h, json!({ "query": question })).await;
    let y2023 = ask_with(&h, json!({ "query": question, "preferences": { "requested_years": [2023] } })).await;
    assert_eq!(y2023.status, OutputStatus::Success, "{y2023:#?}");
    assert!(cited_docs(&any_year).iter().any(|d| document_year(d) == "2024"), "{:?}", cited_docs(&any_year));
    assert!(cited_docs(&y2023).iter().all(|d| document_year(d) == "2023"), "{:?}", cited_docs(&y2023));
    assert_ne!(any_year.response_text, y2023.response_text);
    assert!(!y2023.response_text.contains("12%"), "{}", y2023.response_text);
    assert!(y2023.response_text.contains("16%"), "{}", y2023.response_text);
    let reflection = y2023.reflection.as_ref().expect("reflection");
    assert!(reflection.uncertainty_note.contains("Limited to the requested years [2023]"), "{reflection:?}");
}

#[tokio::test(start_paused = true)]
async fn a_misspelled_question_falls_back_to_vector_only_and_the_event_log_says_why() {
    let h = Harness::start(example("rag-manager"));
    let output = ask_as(&h, "annual reveneu of the servces segmnt?", "").await;
    let events = events(&h, &output).await;
    let attempts = retrieval_of(&events, "hybrid_retriever")["attempts"].clone();
    let names: Vec<&str> = attempts.as_array().into_iter().flatten().filter_map(|a| a["setting"].as_str()).collect();
    assert_eq!(names, ["hybrid_strict", "hybrid_relaxed", "vector_only"]);
    assert_eq!(attempts[0]["accepted"], false);
    assert!(attempts[0]["reason"].as_str().is_some_and(|r| r.ends_with("trying the next setting")), "{attempts}");
    assert_eq!(attempts[2]["accepted"], true);
    assert!(!output.citations.is_empty(), "the fallback found chunks: {output:#?}");
    assert_eq!(
        output.final_reason,
        Some(ConfidenceBand::ConfidenceLowPartial),
        "the answerer's chunks hold few of the misspelled terms, so its confidence is low"
    );
    let reflection = output.reflection.as_ref().expect("reflection");
    assert!(reflection.uncertainty_note.contains("hybrid_strict, hybrid_relaxed"), "{reflection:?}");
}

#[tokio::test(start_paused = true)]
async fn malformed_requested_years_fail_the_retriever_with_the_field_named() {
    let h = Harness::start(example("rag-manager"));
    // The tier's template fallback answers instead; the caveat names the field and the rule.
    for (years, message) in [
        (json!("2023"), "`requested_years` must be a list of years, got text"),
        (json!([1066]), "`requested_years` must hold years 1900 – 2200, got 1066"),
        (json!([{"$gt": 0}]), "`requested_years` must hold years 1900 – 2200, got {\"$gt\":0}"),
    ] {
        let output = ask_with(
            &h,
            json!({ "query": "How did revenue grow by segment?", "preferences": { "requested_years": years } }),
        )
        .await;
        let retriever = output
            .agent_results
            .iter()
            .find(|r| r.agent_id == "hybrid_retriever")
            .unwrap_or_else(|| panic!("{output:#?}"));
        assert_eq!(retriever.attempts, 1, "bad input is not retried");
        assert_eq!(
            output.caveats.first().map(String::as_str),
            Some(format!("hybrid_retriever did not answer ({message}); a template response stands in").as_str()),
            "{output:#?}"
        );
        assert!(output.citations.is_empty(), "nothing was retrieved");
    }
}

/// The shipped rag-manager with `lazy: true` and a critic that accepts only an answer quoting a
/// sentence that is not the first of its chunk (so a summary-only answer cannot have it).
fn lazy_rag_manager() -> Manifest {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/rag-manager");
    let text = std::fs::read_to_string(dir.join("routing.yaml")).expect("manifest");
    let text = text
        .replace(
            "        top_k: 4\n      guardrails:",
            "        top_k: 4\n        lazy: true\n      critic: {agent: evidence_critic, max_retries: 1}\n      guardrails:",
        )
        .replace(
            "      check_output:",
            "      evaluate_evidence:\n        - when: fastest of any segment\n          reply: {verdict: accept, critique: the answer quotes the full passage}\n        - reply: {verdict: reject, critique: the answer rests on one-sentence summaries}\n      check_output:",
        )
        .replace(
            "  - id: output_guard",
            "  - id: evidence_critic\n    tier: 1\n    kind: llm\n    inputs: [question]\n    llm:\n      provider: offline\n      system: Reject answers that rest on summaries.\n      prompt: \"Question: {question}\\n\\nAnswer: {answer}\"\n      output_schema:\n        name: evaluate_evidence\n        schema: {type: object, required: [verdict]}\n  - id: output_guard",
        );
    let mut manifest = Manifest::from_yaml(&text, "lazy-rag-manager.yaml").unwrap_or_else(|e| panic!("{e}"));
    manifest.base_dir = Some(dir);
    manifest
}

#[tokio::test(start_paused = true)]
async fn lazy_hydration_answers_from_summaries_first_and_loads_full_chunks_when_the_critic_asks() {
    // GIVEN a merge route with `lazy: true` and a critic
    let h = Harness::start(lazy_rag_manager());
    // WHEN a question is asked
    let output = ask_as(&h, "How did revenue grow by segment?", "").await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    let query = h.system.deps.store.get_query(&output.query_id).await.expect("store").expect("query");
    let answers: Vec<Value> = query
        .plan
        .expect("plan")
        .all_dispatches()
        .filter(|d| d.dispatch.target_agent == "report_answerer")
        .map(|d| d.dispatch.payload.context.clone())
        .collect();
    // THEN the first answer got summary-only references: chunk ids and one sentence, no text
    assert_eq!(answers.len(), 2, "one answer, one revision");
    assert_eq!(answers[0]["hydrated"], false);
    let first = answers[0]["candidates"].as_array().expect("candidates");
    assert_eq!(first.len(), 4);
    assert!(first.iter().all(|c| c.get("text").is_none() && c["summary"].is_string()), "{first:?}");
    // AND after the critic's rejection the revision got the same chunks in full
    assert_eq!(answers[1]["hydrated"], true);
    let second = answers[1]["candidates"].as_array().expect("candidates");
    let ids = |l: &[Value]| l.iter().map(|c| c["chunk_id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(first), ids(second));
    for (s, f) in first.iter().zip(second) {
        let (summary, text) = (s["summary"].as_str().expect("summary"), f["text"].as_str().expect("text"));
        assert!(text.starts_with(summary) && text.len() > summary.len(), "{summary} / {text}");
    }
    // AND the hydrated answer quotes what only the full chunk says, and the critic accepted it
    assert!(output.response_text.contains("fastest of any segment"), "{}", output.response_text);
    let log = events(&h, &output).await;
    let verdicts: Vec<&Value> =
        log.iter().filter(|e| e.kind == EventKind::Critique).map(|e| &e.detail["verdict"]).collect();
    assert_eq!(verdicts, [&json!("reject"), &json!("accept")]);
    let hydrate = log.iter().find(|e| e.detail["step"] == "hydrate").map(|e| &e.detail).expect("a hydrate event");
    assert_eq!(hydrate["chunks"].as_array().map(Vec::len), Some(4));
    assert!(hydrate["full_chars"].as_u64() > hydrate["summary_chars"].as_u64(), "{hydrate}");
    // AND the citations are the merged chunks, each once
    let cited: Vec<Value> = output.citations.iter().map(|c| json!(c.source_id)).collect();
    assert_eq!(cited, ids(second));
}

#[test]
fn a_retriever_whose_corpus_or_index_is_missing_or_corrupt_is_reported_at_init_with_the_path() {
    let text =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/rag-manager/routing.yaml"))
            .expect("manifest");
    let dir = std::env::temp_dir().join(format!("switchyard-retriever-init-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("broken.json"), "{\"format\": 1, \"chunks\": [").expect("write");
    for (setting, expected) in [
        ("corpus: no-such-folder", format!("{}: cannot list the folder", dir.join("no-such-folder").display())),
        (
            "index: missing.json",
            format!("{}: cannot load the index: cannot read it", dir.join("missing.json").display()),
        ),
        (
            "index: broken.json",
            format!("{}: cannot load the index: not a Switchyard index", dir.join("broken.json").display()),
        ),
    ] {
        let path = dir.join("routing.yaml");
        std::fs::write(&path, text.replace("corpus: corpus", setting)).expect("write");
        let manifest = Manifest::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let problems = switchyard_agents::Agents::new(&manifest).problems();
        assert_eq!(problems.len(), 2, "both searching retrievers name the path: {problems:?}");
        assert!(problems[0].starts_with(&format!("retriever `dense_retriever`: {expected}")), "{problems:?}");
        assert!(problems[1].starts_with(&format!("retriever `hybrid_retriever`: {expected}")), "{problems:?}");
    }
}

// ---- research assistant (docs/origins.md#research-assistant) --------------------------------

#[tokio::test(start_paused = true)]
async fn the_planted_market_size_contradiction_is_flagged_and_memory_never_delays_the_answer() {
    let h = Harness::start(example("research-assistant"));
    let output = ask_as(&h, "How big is the solid-state battery market?", "").await;
    assert_eq!(output.status, OutputStatus::Success, "{output:#?}");
    let sources = orchestration(&output, "sources");
    assert_eq!(sources["retrieval_status"], "success");
    let contradictions = sources["contradictions"].as_array().expect("contradictions");
    assert_eq!(contradictions.len(), 1, "{sources:#}");
    let values: BTreeSet<u64> = [&contradictions[0]["a"]["value"], &contradictions[0]["b"]["value"]]
        .iter()
        .filter_map(|v| v.as_f64())
        .map(|v| v as u64)
        .collect();
    assert_eq!(values, BTreeSet::from([50, 100]));
    assert!(output.caveats.iter().any(|c| c.starts_with("Sources disagree")), "{:?}", output.caveats);
    assert!(output.response_text.contains("disagree"), "multi-perspective answer: {}", output.response_text);
    assert_eq!(sources["original_chunk_count"], 7);
    assert_eq!(sources["filtered_chunk_count"], 5, "the duplicate and the weak memory chunk are dropped: {sources:#}");
    assert_eq!(orchestration(&output, "memory")["dispatched"], true);
    assert!(
        output.total_latency_ms < 20_000,
        "the 20 s memory step did not delay the answer: {} ms",
        output.total_latency_ms
    );
    // The memory step still runs to completion after the answer.
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    let handoffs = h.system.deps.store.list_handoffs(&output.query_id).await.expect("handoffs");
    assert!(handoffs.iter().any(|r| r.handoff.agent_id == "memory_writer" && r.handoff.execution.status.is_usable()));
}

#[tokio::test(start_paused = true)]
async fn one_source_timing_out_makes_the_answer_partial() {
    let mut manifest = example("research-assistant");
    let arxiv = manifest.agents.iter_mut().find(|a| a.id == "arxiv_source").expect("arxiv");
    arxiv.kind = AgentKind::Scripted;
    arxiv.builtin = None;
    arxiv.scripted = Some(ScriptedSettings { hang_times: 1_000, ..ScriptedSettings::default() });
    let h = Harness::start(manifest);
    let output = ask_as(&h, "How big is the solid-state battery market?", "").await;
    assert_eq!(output.status, OutputStatus::Partial, "{output:#?}");
    let sources = orchestration(&output, "sources");
    assert_eq!(sources["sources_failed"], json!(["arxiv_source"]));
    assert_eq!(sources["retrieval_status"], "partial");
    assert!(output.caveats.iter().any(|c| c.contains("3 of 4 sources")), "{:?}", output.caveats);
    assert!(output.total_latency_ms < 30_000, "bounded by the 7 s per-source timeout: {} ms", output.total_latency_ms);
}

#[tokio::test(start_paused = true)]
async fn the_total_budget_ends_retrieval_even_when_a_source_may_take_longer() {
    let mut manifest = example("research-assistant");
    let web = manifest.agents.iter_mut().find(|a| a.id == "web_source").expect("web");
    web.kind = AgentKind::Scripted;
    web.builtin = None;
    web.timeout = Some("120s".parse().expect("duration"));
    web.scripted = Some(ScriptedSettings { hang_times: 1_000, ..ScriptedSettings::default() });
    let h = Harness::start(manifest);
    let output = ask_as(&h, "How big is the solid-state battery market?", "").await;
    assert_eq!(output.status, OutputStatus::Partial, "{output:#?}");
    assert_eq!(orchestration(&output, "sources")["sources_failed"], json!(["web_source"]));
    assert!(
        (30_000..60_000).contains(&output.total_latency_ms),
        "the 30 s budget, not the 120 s timeout: {} ms",
        output.total_latency_ms
    );
}

// ---- cascade classification (docs/origins.md#e2i) -------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_cascade_consults_the_llm_classifier_only_for_ambiguous_questions() {
    let h = Harness::start(example("e2i"));
    let clear = ask_as(&h, "What was the impact of the new speaker program on Kisqali prescriptions?", "").await;
    assert!(!clear.agents_dispatched.contains(&"intent_classifier".to_string()), "{:?}", clear.agents_dispatched);
    assert_eq!(orchestration(&clear, "classification")["decided_by"], "embedded");
    assert_eq!(clear.intent, "causal_impact");

    let vague = ask_as(&h, "Things got worse lately, no?", "").await;
    assert_eq!(vague.agents_dispatched.first().map(String::as_str), Some("intent_classifier"));
    let classification = orchestration(&vague, "classification");
    assert_eq!(classification["decided_by"], "llm");
    assert_eq!(classification["intent"], "causal_impact");
    assert_eq!(classification["confidence"], 0.78);
    assert_eq!(vague.intent, "causal_impact");
    assert_eq!(vague.status, OutputStatus::Success, "{vague:#?}");
    assert!(vague.agents_dispatched.contains(&"causal_impact".to_string()));
    let log = events(&h, &vague).await;
    let cascade = log
        .iter()
        .find(|e| e.kind == EventKind::Route && e.detail["stage"] == "llm")
        .expect("a route event from the cascade");
    assert_eq!(cascade.detail["confidence"], 0.78);
}

#[tokio::test(start_paused = true)]
async fn a_reclassified_intent_needing_a_role_the_caller_lacks_fails_before_any_of_its_agents_runs() {
    let h = Harness::start(example("e2i"));
    // The embedded classifier guesses `model_deploy` (which needs a role) but is unsure, so
    // intake defers the role check to the router, after the cascade decided.
    let output = ask_as(&h, "Can you redo the scoring thing?", "").await;
    assert_eq!(output.status, OutputStatus::Failed, "{output:#?}");
    assert_eq!(output.error.as_ref().map(|e| e.category), Some(ErrorCategory::PermissionDenied));
    assert_eq!(output.agents_dispatched, ["intent_classifier"]);
    let allowed = ask_as(&h, "Can you redo the scoring thing?", "ml_engineer").await;
    assert_eq!(allowed.intent, "ml_training");
    assert_eq!(allowed.status, OutputStatus::Success, "{allowed:#?}");
}

// ---- llm agents through the engine -----------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn an_llm_agents_handoff_records_its_model_and_token_counts() {
    let h = Harness::start(example("unified-chat"));
    let output = ask_as(&h, "How many vacation days can I carry over?", "").await;
    let handoffs = h.system.deps.store.list_handoffs(&output.query_id).await.expect("handoffs");
    let answers: Vec<_> = handoffs.iter().filter(|r| r.handoff.agent_id == "policy_answerer").collect();
    assert_eq!(answers.len(), 2, "the draft and the revision");
    for r in answers {
        assert_eq!(r.handoff.metadata.model_used, "scripted");
        assert!(r.handoff.metadata.tokens_consumed > 0, "{:?}", r.handoff.metadata);
        assert!(!r.handoff.metadata.cache_hit);
    }
}

#[tokio::test(start_paused = true)]
async fn a_model_answer_that_is_not_json_becomes_a_failed_handoff_with_the_raw_text() {
    let mut manifest = example("unified-chat");
    let offline = manifest.providers.iter_mut().find(|p| p.id == "offline").expect("offline provider");
    let prose: switchyard_model::manifest::ScriptedModelReply =
        serde_json::from_value(json!({ "text": "Sure! You can carry over five days." })).expect("reply");
    offline.responses.insert("answer_question".into(), vec![prose]);
    for tier in &mut manifest.tiers {
        tier.fallback = switchyard_model::manifest::Fallback::None;
    }
    let h = Harness::start(manifest);
    let output = ask_as(&h, "How many vacation days can I carry over?", "").await;
    assert_eq!(output.status, OutputStatus::Failed, "{output:#?}");
    let answerer = output.agent_results.iter().find(|r| r.agent_id == "policy_answerer").expect("answerer");
    assert_eq!(answerer.attempts, 2, "malformed answers are retried per the tier's policy");
    let error = answerer.error.clone().unwrap_or_default();
    assert!(error.contains("Sure! You can carry over five days."), "the raw text is in the error: {error}");
    assert!(!output.agents_dispatched.contains(&"answer_critic".to_string()), "nothing to criticise");
}

// ---- at-least-once delivery ------------------------------------------------------------------

/// An embedded system whose queues duplicate and reorder, with a store that counts effects.
fn faulty(
    manifest: Manifest,
    faults: switchyard_testkit::faults::QueueFaults,
    seed: u64,
) -> (Harness, std::sync::Arc<ObservedStore>) {
    use std::sync::Arc;
    use switchyard_engine::memory::{MemoryQueue, MemoryStore};
    use switchyard_testkit::faults::FaultyQueue;
    let agents = Arc::new(switchyard_agents::Agents::new(&manifest));
    let manifest = Arc::new(manifest);
    let clock = Arc::new(switchyard_engine::ports::TokioClock::new());
    let topology = switchyard_model::topology::Topology::for_manifest(&manifest);
    let store = Arc::new(MemoryStore::new(clock.clone()));
    let observed = Arc::new(observed_store(store.clone()));
    let queue = Arc::new(MemoryQueue::new(&topology));
    let port = Arc::new(FaultyQueue::new(queue.clone(), faults, seed));
    let deps = switchyard_engine::Deps::new(manifest, observed.clone(), port, clock, agents, Default::default())
        .with_seed(seed);
    let system = switchyard_engine::Embedded { deps: Arc::new(deps), store, queue, topology };
    (Harness::from_system(system), observed)
}

#[tokio::test(start_paused = true)]
async fn every_step_of_every_mode_is_taken_once_when_every_message_is_delivered_twice() {
    use std::sync::atomic::Ordering;
    let cases = [
        ("negotiation", "This is our final offer: $4.60 per unit for 500 units.", 8),
        ("unified-chat", "How many vacation days can I carry over?", 4),
        ("rag-manager", "How did revenue grow by segment?", 7),
        ("research-assistant", "How big is the solid-state battery market?", 6),
        ("e2i", "Things got worse lately, no?", 3),
    ];
    for (name, question, dispatches) in cases {
        let faults = switchyard_testkit::faults::QueueFaults {
            duplicate: 1.0,
            max_extra_delay: std::time::Duration::from_millis(500),
        };
        let (h, observed) = faulty(example(name), faults, 5);
        let output = ask_as(&h, question, "").await;
        tokio::time::sleep(std::time::Duration::from_secs(60)).await; // every duplicate arrives
        assert_eq!(observed.hooks().outputs_written.load(Ordering::SeqCst), 1, "{name}: one output");
        assert_eq!(observed.hooks().synth_claims.load(Ordering::SeqCst), 1, "{name}: one synthesis");
        let query = h.system.deps.store.get_query(&output.query_id).await.expect("store").expect("query");
        let plan = query.plan.expect("plan");
        assert_eq!(
            plan.all_dispatches().count(),
            dispatches,
            "{name}: each step planned once: {:?}",
            output.agents_dispatched
        );
        let handoffs = h.system.deps.store.list_handoffs(&output.query_id).await.expect("handoffs");
        assert_eq!(handoffs.len(), dispatches, "{name}: one handoff per dispatch");
        assert_eq!(h.system.deps.store.get_output(&output.query_id).await.expect("store").as_deref(), Some(&output));
    }
}
