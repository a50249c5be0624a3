//! `switchyard ask --json`: the answer, or the refusal's error object, is JSON on stdout.

use std::process::Command;

fn switchyard() -> Command {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
}

#[test]
fn a_refused_question_prints_the_error_object_as_json_on_stdout_and_exits_1() {
    // GIVEN a question longer than the shipped manifest's max_query_chars (4000)
    let question = "why ".repeat(1500);
    // WHEN it is asked with --json
    let out = switchyard().args(["ask", "--json", &question]).output().expect("switchyard runs");
    // THEN stdout is the error object naming the field and the rule, and the exit code is 1
    assert_eq!(out.status.code(), Some(1), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(body["error"]["code"], "invalid_input", "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.starts_with("query:")), "{body}");
    assert!(body["error"]["request_id"].as_str().is_some_and(|r| !r.is_empty()), "{body}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused (400)"));
}

#[test]
fn a_question_the_caller_may_not_ask_prints_a_403_error_object() {
    // GIVEN a training question (role ml_engineer) asked without roles
    let out = switchyard()
        .args(["ask", "--json", "train a new model to predict conversion for Kisqali"])
        .output()
        .expect("switchyard runs");
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(body["error"]["code"], "forbidden", "{body}");
}

#[test]
fn an_answered_question_prints_the_output_as_json() {
    let out = switchyard().args(["ask", "--json", "what drove the drop in Kisqali TRx"]).output().expect("runs");
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert!(body.get("error").is_none(), "{body}");
    assert!(body["query_id"].is_string(), "{body}");
}
