use super::request::{field, invalid};
use super::*;

fn manifest() -> Manifest {
    Manifest::embedded().expect("the embedded manifest")
}

fn parse(body: Value) -> Result<ChatRequest, IntakeError> {
    parse_request(body.to_string().as_bytes(), &manifest())
}

fn model() -> String {
    model_id(&manifest()).to_string()
}

/// The fields a refusal names, in order.
fn fields(result: Result<ChatRequest, IntakeError>) -> Vec<String> {
    match result {
        Err(IntakeError::Invalid(v)) => v.errors.into_iter().map(|e| e.field).collect(),
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn messages_become_the_turn_and_the_earlier_exchanges() {
    let request = parse(json!({
        "model": model(),
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "assistant", "content": "Hi! Ask me about brands."},
            {"role": "user", "content": "What is Kisqali's market share in the Northeast?"},
            {"role": "assistant", "content": [{"type": "text", "text": "About 18%."}]},
            {"role": "user", "content": "  And for Fabhalta?  "}
        ],
        "temperature": 0.2,
        "max_tokens": 100,
        "stream": true,
        "stream_options": {"include_usage": true},
        "session_id": "s-1"
    }))
    .expect("a valid request");
    assert_eq!(request.turn, "And for Fabhalta?");
    assert_eq!(
        request.prior,
        vec![("What is Kisqali's market share in the Northeast?".to_string(), "About 18%.".to_string())],
        "the system message and the greeting before any question are no turn"
    );
    assert!(request.stream && request.include_usage);
    assert_eq!(request.ignored, vec!["max_tokens".to_string(), "temperature".to_string()]);
    assert_eq!(session_for(&request).as_deref(), Some("s-1"));
}

#[test]
fn a_conversation_without_an_id_is_named_after_its_first_exchange() {
    let body = |turn: &str| {
        json!({"model": model(), "messages": [
            {"role": "user", "content": "first"}, {"role": "assistant", "content": "answer"},
            {"role": "user", "content": turn}]})
    };
    let a = session_for(&parse(body("second")).expect("valid")).expect("an id");
    let b = session_for(&parse(body("something else")).expect("valid")).expect("an id");
    assert_eq!(a, b, "every turn of one conversation continues one session");
    assert!(a.starts_with("chat-"));
    let first_turn = parse(json!({"model": model(), "messages": [{"role": "user", "content": "first"}]}));
    assert_eq!(session_for(&first_turn.expect("valid")), None, "a first turn starts a new session");
}

#[test]
fn each_broken_rule_is_a_400_naming_its_field() {
    let m = model();
    let cases: Vec<(Value, &str)> = vec![
        (json!({"messages": [{"role": "user", "content": "hi"}]}), "model"),
        (json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}), "model"),
        (json!({"model": m}), "messages"),
        (json!({"model": m, "messages": []}), "messages"),
        (json!({"model": m, "messages": "hi"}), "messages"),
        (json!({"model": m, "messages": [{"role": "wizard", "content": "hi"}]}), "messages[0].role"),
        (json!({"model": m, "messages": [{"content": "hi"}]}), "messages[0].role"),
        (
            json!({"model": m, "messages": [{"role": "tool", "content": "x", "tool_call_id": "t"}]}),
            "messages[0].tool_call_id",
        ),
        (json!({"model": m, "messages": [{"role": "user", "content": "   "}]}), "messages[0].content"),
        (json!({"model": m, "messages": [{"role": "user", "content": null}]}), "messages[0].content"),
        (json!({"model": m, "messages": [{"role": "user", "content": 7}]}), "messages[0].content"),
        (
            json!({"model": m, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
            "messages[0].content[0].type",
        ),
        (
            json!({"model": m, "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}),
            "messages[1].role",
        ),
        (json!({"model": m, "messages": [{"role": "user", "content": "bell\u{7}"}]}), "messages[0].content"),
        (json!({"model": m, "messages": [{"role": "user", "content": "x".repeat(20_000)}]}), "messages[0].content"),
        (json!({"model": m, "messages": [{"role": "user", "content": "hi", "colour": 1}]}), "messages[0].colour"),
        (json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "n": 2}), "n"),
        (
            json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}),
            "tools",
        ),
        (json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "tool_choice": "auto"}), "tool_choice"),
        (json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "logprobs": true}), "logprobs"),
        (
            json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}}),
            "response_format",
        ),
        (json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}), "stream"),
        (
            json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}}),
            "stream_options",
        ),
        (json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "frobnicate": 1}), "frobnicate"),
        (json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "session_id": "a b"}), "session_id"),
        (
            json!({"model": m, "messages": [{"role": "user", "content": "hi"}], "switchyard": {"colour": 1}}),
            "switchyard.colour",
        ),
    ];
    for (body, expected) in cases {
        let got = fields(parse(body.clone()));
        assert!(got.iter().any(|f| f == expected), "{body}: expected a rule on `{expected}`, got {got:?}");
    }
    let many: Vec<Value> = (0..=MAX_MESSAGES).map(|_| json!({"role": "user", "content": "hi"})).collect();
    assert_eq!(fields(parse(json!({"model": m, "messages": many}))), vec!["messages".to_string()]);
}

#[test]
fn malformed_and_oversized_bodies_are_refused_before_parsing_fields() {
    let m = manifest();
    for body in [&b"not json"[..], b"[1,2]", b"\xff\xfe", b""] {
        assert!(matches!(parse_request(body, &m), Err(IntakeError::Invalid(_))), "{body:?}");
    }
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert!(matches!(parse_request(deep.as_bytes(), &m), Err(IntakeError::Invalid(_))));
    let huge = vec![b' '; MAX_CHAT_BODY_BYTES + 1];
    assert!(matches!(parse_request(&huge, &m), Err(IntakeError::TooLarge { .. })));
}

#[test]
fn the_lane_follows_the_manifest() {
    let m = manifest_from(include_str!("../../../../examples/unified-chat/routing.yaml"));
    assert_eq!(content_lane(&m, "policy_question"), ContentLane::AtTheEnd, "a critic may reject a draft");
    assert_eq!(content_lane(&m, "conversational"), ContentLane::SoleAgent);
    assert_eq!(content_lane(&m, "no_such_intent"), ContentLane::AtTheEnd);
}

fn manifest_from(yaml: &str) -> Manifest {
    Manifest::from_yaml(yaml, "examples/unified-chat/routing.yaml").expect("a valid manifest")
}

#[test]
fn a_relay_sends_pieces_in_order_whatever_order_they_arrive_in() {
    let mut relay = Relay::default();
    assert_eq!(relay.take(1, "b".into()), "");
    assert_eq!(relay.take(0, "a".into()), "ab");
    assert_eq!(relay.take(0, "a".into()), "", "a repeated piece is sent once");
    assert_eq!(relay.take(2, "c".into()), "c");
}

#[test]
fn openai_errors_carry_the_field_as_param_and_switchyards_code() {
    let e = invalid(vec![field("messages[0].role", "must be one of …")]);
    let body = error_body(400, "invalid_input", "messages[0].role: must be one of …", &e);
    assert_eq!(body["error"]["type"], json!("invalid_request_error"));
    assert_eq!(body["error"]["param"], json!("messages[0].role"));
    assert_eq!(body["error"]["code"], json!("invalid_input"));
    let e = IntakeError::Unauthenticated;
    let body = error_body(401, "unauthenticated", &e.to_string(), &e);
    assert_eq!(body["error"]["type"], json!("authentication_error"));
    assert_eq!(body["error"]["param"], Value::Null);
}
