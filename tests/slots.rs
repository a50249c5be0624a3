//! Required entities and slot filling on the embedded default, through intake's HTTP handler
//! and the pollers, with the travel desk example (`examples/travel-desk`): a booking that lacks
//! the city or the day runs no agent and asks for them in the manifest's words; the next turn
//! of the session that names them dispatches with everything gathered; a turn that asks for
//! something else leaves the slot filling behind. Virtual time throughout (`start_paused`).

use chrono::{Datelike, NaiveDate};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use switchyard_engine::handlers::handle_http;
use switchyard_model::contracts::{ConfidenceBand, EntitySource, OrchestratorOutput, OutputStatus};
use switchyard_model::manifest::Manifest;
use switchyard_tests::*;

const USER: &str = "traveller-1";

fn travel_desk() -> Manifest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/travel-desk/routing.yaml");
    Manifest::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

async fn post(h: &Harness, body: Value) -> aws_lambda_events::apigw::ApiGatewayV2httpResponse {
    handle_http(&h.system.deps, api_request("POST", "/v1/queries", "", Some(&body.to_string()), USER, "")).await
}

/// Ask `body` (a query, maybe with `session_id` and `now`); the output once its turn is in
/// the session.
async fn ask(h: &Harness, body: Value) -> OrchestratorOutput {
    let response = post(h, body).await;
    assert_eq!(response.status_code, 202, "intake answered {}", text_body(&response));
    let id = json_body(&response)["query_id"].as_str().expect("query id").to_string();
    let output = h.output(&id).await;
    for _ in 0..1_000 {
        let session = h.system.deps.store.get_session(USER, &output.session_id).await.expect("store");
        if session.is_some_and(|s| s.has_recorded(&id)) {
            return output;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("turn {id} was never recorded");
}

async fn turn(h: &Harness, question: &str, session: Option<&str>) -> OrchestratorOutput {
    let mut body = json!({ "query": question });
    if let Some(id) = session {
        body["session_id"] = json!(id);
    }
    ask(h, body).await
}

fn value<'a>(output: &'a OrchestratorOutput, entity_type: &str) -> Option<&'a str> {
    output.entities.iter().find(|e| e.entity_type == entity_type).map(|e| e.value.as_str())
}

/// The next 14th on or after today (the test's clock is the real date, paused).
fn next_14th() -> NaiveDate {
    let today = chrono::Utc::now().with_timezone(&chrono_tz::Europe::Vienna).date_naive();
    let this_month = today.with_day(14).expect("a 14th");
    if this_month >= today {
        this_month
    } else {
        this_month.checked_add_months(chrono::Months::new(1)).expect("next month")
    }
}

#[test]
fn the_travel_desk_validates_with_its_own_entity_types() {
    let manifest = travel_desk();
    let types: Vec<&str> = manifest.entities.keys().map(String::as_str).collect();
    assert_eq!(types, ["booking_ref", "budget", "city", "contact_email", "departure_date", "passengers"]);
    let book = manifest.intent("book_flight").expect("book_flight");
    assert_eq!(book.required_entities, ["city", "departure_date"]);
}

#[tokio::test(start_paused = true)]
async fn a_booking_without_city_or_day_asks_for_both_and_the_next_turn_dispatches_with_them() {
    let h = Harness::start(travel_desk());
    // GIVEN a request that names neither the city nor the day
    let first = turn(&h, "book a flight", None).await;
    // THEN no agent ran, and the answer asks for both in the manifest's words
    assert_eq!(first.intent, "book_flight");
    assert_eq!(first.final_reason, Some(ConfidenceBand::MissingEntities), "{first:#?}");
    assert_eq!(first.status, OutputStatus::Partial);
    assert_eq!(first.missing_entities, ["city", "departure_date"]);
    assert!(first.agents_dispatched.is_empty(), "{:?}", first.agents_dispatched);
    assert_eq!(first.response_text, "What is the city you fly to, and the day you leave?");
    let wire = serde_json::to_value(&first).expect("json");
    assert_eq!(wire["final_reason"], "missing_entities");
    assert_eq!(wire["missing_entities"], json!(["city", "departure_date"]));
    // WHEN the next turn of the session names both
    let second = turn(&h, "Vienna on the 14th", Some(&first.session_id)).await;
    // THEN book_flight is dispatched with city=Vienna and the day as an ISO date
    assert_eq!(second.intent, "book_flight", "{second:#?}");
    assert_eq!(second.agents_dispatched, ["flight_booker"]);
    assert_eq!(second.status, OutputStatus::Success, "{second:#?}");
    assert!(second.missing_entities.is_empty());
    assert_eq!(value(&second, "city"), Some("Vienna"));
    let day = next_14th().format("%Y-%m-%d").to_string();
    assert_eq!(value(&second, "departure_date"), Some(day.as_str()));
    let query = h.system.deps.store.get_query(&second.query_id).await.expect("store").expect("query");
    let plan = query.plan.expect("a plan");
    let dispatch = &plan.stages[0].dispatches[0].dispatch;
    assert_eq!(dispatch.target_agent, "flight_booker");
    let sent: Vec<(&str, &str)> =
        dispatch.payload.entities.iter().map(|e| (e.entity_type.as_str(), e.value.as_str())).collect();
    assert!(sent.contains(&("city", "Vienna")) && sent.contains(&("departure_date", day.as_str())), "{sent:?}");
    // AND the template is filled with the values; the optional segments without one are left out
    assert!(
        second.response_text.starts_with(&format!("Flights to Vienna on {day}: three options")),
        "{}",
        second.response_text
    );
    assert!(!second.response_text.contains("all"), "{}", second.response_text);
}

#[tokio::test(start_paused = true)]
async fn slots_are_filled_one_turn_at_a_time_with_what_was_gathered_kept() {
    let h = Harness::start(travel_desk());
    let first = turn(&h, "I need a plane ticket to Paris", None).await;
    assert_eq!(first.missing_entities, ["departure_date"], "{first:#?}");
    assert_eq!(first.response_text, "What is the day you leave?");
    let second = turn(&h, "tomorrow please", Some(&first.session_id)).await;
    assert_eq!(second.agents_dispatched, ["flight_booker"], "{second:#?}");
    assert_eq!(value(&second, "city"), Some("Paris"));
    let carried = second.entities.iter().find(|e| e.entity_type == "city").expect("city");
    assert_eq!(carried.source, EntitySource::Context, "gathered on the first turn");
    let date = value(&second, "departure_date").expect("a date");
    assert!(NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok(), "{date}");
}

#[tokio::test(start_paused = true)]
async fn a_turn_asking_for_something_else_leaves_the_slot_filling() {
    let h = Harness::start(travel_desk());
    let first = turn(&h, "book a flight", None).await;
    assert_eq!(first.final_reason, Some(ConfidenceBand::MissingEntities));
    let other = turn(&h, "what is the status of my booking ABC-12345", Some(&first.session_id)).await;
    assert_eq!(other.intent, "booking_status", "{other:#?}");
    assert_eq!(other.agents_dispatched, ["booking_lookup"]);
    assert_eq!(value(&other, "booking_ref"), Some("ABC-12345"));
    assert!(other.entities.iter().all(|e| e.entity_type != "city"));
    assert_eq!(other.response_text, "Booking ABC-12345 is confirmed.");
}

#[tokio::test(start_paused = true)]
async fn a_request_sets_the_time_its_relative_dates_are_read_at_and_a_bad_one_is_a_400() {
    let h = Harness::start(travel_desk());
    // 23:30 UTC on Tuesday 10 March 2026 is Wednesday 11 March in Vienna, the manifest's zone.
    let output = ask(&h, json!({"query": "fly me to Rome tomorrow", "now": "2026-03-10T23:30:00Z"})).await;
    assert_eq!(value(&output, "departure_date"), Some("2026-03-12"), "{output:#?}");
    let friday = ask(&h, json!({"query": "a flight to Rome this Friday", "now": "2026-03-10T09:00:00+01:00"})).await;
    assert_eq!(value(&friday, "departure_date"), Some("2026-03-13"), "{friday:#?}");
    let response = post(&h, json!({"query": "fly me to Rome tomorrow", "now": "tomorrow at noon"})).await;
    assert_eq!(response.status_code, 400, "{}", text_body(&response));
    let body = json_body(&response);
    assert_eq!(body["error"]["details"][0]["field"], "now", "{body}");
    assert!(body["error"]["details"][0]["rule"].as_str().is_some_and(|r| r.contains("RFC 3339")), "{body}");
}

#[tokio::test(start_paused = true)]
async fn a_question_with_fifty_dates_keeps_max_entities_of_them_with_a_warning() {
    let h = Harness::start(travel_desk());
    let days: Vec<String> = (1..=50).map(|d| format!("{} {}", (d - 1) % 28 + 1, ["March", "April"][d / 29])).collect();
    let question = format!("fly to Vienna on {}", days.join(", "));
    let output = ask(&h, json!({ "query": question, "now": "2026-01-05T09:00:00Z" })).await;
    let max = travel_desk().query.max_entities;
    assert_eq!(output.entities.len(), max, "{:?}", output.entities);
    assert!(output.warnings.iter().any(|w| w.contains(&format!("kept the first {max}"))), "{:?}", output.warnings);
}

// ---- builtin templates: a missing value is never "all" (docs/routing.md#builtin-agents) ----

fn dispatch_with(entities: &[(&str, &str)]) -> switchyard_model::contracts::AgentDispatch {
    let mut d = agent_dispatch("flight_booker", "book_flight", json!({"question": "q"}), 1_000);
    d.payload.entities = entities
        .iter()
        .map(|(t, v)| switchyard_model::contracts::ParsedEntity {
            entity_type: (*t).into(),
            value: (*v).into(),
            text: (*v).into(),
            confidence: 1.0,
            source: EntitySource::Exact,
        })
        .collect();
    d
}

#[test]
fn a_missing_value_leaves_out_its_segment_or_its_connecting_word_and_never_reads_all() {
    use std::collections::BTreeMap;
    use switchyard_agents::render;
    let none = BTreeMap::new();
    let both = dispatch_with(&[("city", "Vienna"), ("departure_date", "2026-03-14")]);
    let city = dispatch_with(&[("city", "Vienna")]);
    let template = "Flights to {city}[ on {departure_date}]: three options.";
    assert_eq!(render(template, &both, &none), "Flights to Vienna on 2026-03-14: three options.");
    assert_eq!(render(template, &city, &none), "Flights to Vienna: three options.");
    // Outside a segment: the placeholder goes with its connecting word.
    assert_eq!(render("Flights to {city} on {departure_date}.", &city, &none), "Flights to Vienna.");
    assert_eq!(render("Flights to {city} on {departure_date}.", &dispatch_with(&[]), &none), "Flights.");
    // A default stands in for a missing value.
    let defaults = BTreeMap::from([("departure_date".to_string(), "the next free day".to_string())]);
    assert_eq!(render(template, &city, &defaults), "Flights to Vienna on the next free day: three options.");
    // Brackets without a placeholder are text.
    assert_eq!(render("Fares [in EUR] to {city}.", &city, &none), "Fares [in EUR] to Vienna.");
    for t in [template, "Flights to {city} on {departure_date}.", "{entities} for {city}"] {
        assert!(!render(t, &dispatch_with(&[]), &none).contains("all"), "{t}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_openai_compatible_endpoint_fills_slots_from_the_messages_a_stateless_client_sends() {
    let h = Harness::start(travel_desk());
    let complete = |messages: Value| {
        let body = json!({ "model": "travel-desk", "messages": messages });
        handle_http(&h.system.deps, api_request("POST", "/v1/chat/completions", "", Some(&body.to_string()), USER, ""))
    };
    let first = complete(json!([{"role": "user", "content": "book a flight"}])).await;
    assert_eq!(first.status_code, 200, "{}", text_body(&first));
    let first = json_body(&first);
    let asked = first["choices"][0]["message"]["content"].as_str().expect("content").to_string();
    assert_eq!(asked, "What is the city you fly to, and the day you leave?");
    assert_eq!(first["switchyard"]["confidence_band"], "missing_entities");
    // The client sends the whole conversation again, with no session id.
    let second = complete(json!([
        {"role": "user", "content": "book a flight"},
        {"role": "assistant", "content": asked},
        {"role": "user", "content": "Vienna on the 14th"}
    ]))
    .await;
    assert_eq!(second.status_code, 200, "{}", text_body(&second));
    let second = json_body(&second);
    let day = next_14th().format("%Y-%m-%d").to_string();
    let text = second["choices"][0]["message"]["content"].as_str().expect("content");
    assert!(text.starts_with(&format!("Flights to Vienna on {day}")), "{second}");
    assert_eq!(second["switchyard"]["intent"], "book_flight");
}

#[tokio::test(start_paused = true)]
async fn an_intent_the_cascaded_classifier_decides_is_held_for_its_missing_entities_too() {
    // GIVEN the travel desk with a cascaded classifier consulted for every question
    let mut manifest = travel_desk();
    let judge: switchyard_model::manifest::Agent = serde_yaml::from_str(
        "{id: cascade_judge, tier: 2, kind: builtin, description: Decides the questions the embedded classifier is unsure of., \
         builtin: {response: decided, confidence: 0.99, output: {intent: book_flight, confidence: 1.0}}}",
    )
    .expect("agent");
    manifest.agents.push(judge);
    manifest.classifier.llm = Some("cascade_judge".into());
    manifest.classifier.cascade_below = Some(1.0);
    let h = Harness::start(manifest);
    // WHEN it decides book_flight for a question naming neither the city nor the day
    let first = turn(&h, "book a flight", None).await;
    // THEN only the classifier ran, and the answer asks for both
    assert_eq!(first.agents_dispatched, ["cascade_judge"], "{first:#?}");
    assert_eq!(first.intent, "book_flight");
    assert_eq!(first.final_reason, Some(ConfidenceBand::MissingEntities), "{first:#?}");
    assert_eq!(first.missing_entities, ["city", "departure_date"]);
    assert_eq!(first.response_text, "What is the city you fly to, and the day you leave?");
    let decided = &first.orchestration.as_ref().expect("the cascade's decision")["classification"];
    assert_eq!(decided["decided_by"], "llm");
    // AND the next turn that names them dispatches the booking
    let second = turn(&h, "Vienna on the 14th", Some(&first.session_id)).await;
    assert_eq!(second.intent, "book_flight", "{second:#?}");
    assert!(second.agents_dispatched.contains(&"flight_booker".to_string()), "{:?}", second.agents_dispatched);
    assert_eq!(value(&second, "city"), Some("Vienna"));
}
