//! Switchyard's MCP client against a real MCP server: the official Python SDK (`mcp`) serving
//! tests/mcp_server.py over Streamable HTTP on loopback. Its tools are listed with their
//! schemas; a read call's result and a tool error reach the model; a write under approval,
//! approved with every queue message delivered twice, reaches the server once, with its
//! idempotency key in `_meta`.
//!
//! scripts/test.sh starts the server (scripts/mcp.sh) and exports SWITCHYARD_MCP_URL; without
//! it every test fails and says so: these tests never skip.

#[path = "support/approvals.rs"]
mod approvals;

use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use switchyard_agents::llm::LlmAgents;
use switchyard_agents::tools::ToolBox;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::ports::AgentReply;
use switchyard_model::manifest::{Effect, Manifest};
use switchyard_tests::{api_request, json_body};

/// The running server's MCP endpoint.
fn server() -> String {
    std::env::var("SWITCHYARD_MCP_URL").unwrap_or_else(|_| {
        panic!(
            "SWITCHYARD_MCP_URL is not set: run these tests through scripts/test.sh, which starts the official Python SDK's MCP server (scripts/mcp.sh)"
        )
    })
}

async fn lookup(order: &'static str) -> Value {
    let m = approvals::manifest(&server(), "1h", "5s");
    let http = switchyard_engine::http_client::HttpClient::new();
    let provider = m.provider("m").expect("provider").clone();
    let agents = LlmAgents::new(&m, &http).with_provider(
        "m",
        Arc::new(approvals::OneCallModel {
            tool: "orders__lookup_order",
            arguments: json!({"order_id": order}),
            prefix: "Found",
        }),
        provider,
    );
    let agent = m.agent("support").expect("agent");
    let dispatch = switchyard_tests::agent_dispatch("support", "ask", json!({"question": "where is it?"}), 10_000);
    let reply = agents
        .run_with_tools(agent, agent.llm.as_ref().expect("llm"), &dispatch, 1, None, None)
        .await
        .expect("a reply");
    match reply {
        AgentReply::Answer(v) => v,
        other => panic!("not an answer: {other:?}"),
    }
}

#[tokio::test]
async fn the_python_sdk_server_lists_its_tools_with_their_schemas_and_effects() {
    let m = approvals::manifest(&server(), "1h", "5s");
    let http = switchyard_engine::http_client::HttpClient::new();
    let listed = ToolBox::new(&m, &http).list_all().await;
    let (source, specs) = &listed[0];
    let specs = specs.as_ref().unwrap_or_else(|e| panic!("{source}: {e}"));
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["orders.lookup_order", "orders.issue_refund", "orders.refunds_issued"]);
    assert_eq!(specs[0].parameters["required"], json!(["order_id"]), "{}", specs[0].parameters);
    assert_eq!(specs[1].parameters["properties"]["amount"]["type"], "number", "{}", specs[1].parameters);
    assert_eq!((specs[0].effect, specs[1].effect), (Effect::Read, Effect::Write));
    assert!(specs[1].needs_approval && specs[0].description.starts_with("Where an order is"));
}

#[tokio::test]
async fn a_read_call_reaches_the_python_server_and_its_result_and_its_errors_reach_the_model() {
    let found = lookup("A-1").await;
    assert_eq!(found["primary_output"]["response"], "Found: order A-1 shipped on 2026-11-30");
    assert_eq!(found["tool_calls"], 1);
    let missing = lookup("Z-9").await;
    let text = missing["primary_output"]["response"].as_str().expect("text");
    assert!(text.starts_with("Found: the tool reported an error:") && text.contains("no order Z-9"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_refund_reaches_the_python_server_once_with_its_idempotency_key() {
    // GIVEN the embedded system on the Python server, every queue message delivered twice
    let m: Manifest = approvals::manifest(&server(), "1h", "5s");
    let agents = approvals::agents(&m);
    let system = switchyard_engine::Embedded::with_queue(Arc::new(m.clone()), Default::default(), agents, |queue| {
        let faults = switchyard_testkit::faults::QueueFaults { duplicate: 1.0, max_extra_delay: Duration::ZERO };
        (Arc::new(switchyard_testkit::faults::FaultyQueue::new(queue, faults, 11)), Some(11))
    });
    let h = switchyard_tests::Harness::from_system(system);
    let deps = &h.system.deps;
    // WHEN the refund is asked for, waits, and is approved
    let accepted = h.post("refund order A-1", "u1", "").await;
    let id = json_body(&accepted)["query_id"].as_str().expect("id").to_string();
    let mut status = Value::Null;
    for _ in 0..500 {
        let r = handle_http(deps, api_request("GET", &format!("/v1/queries/{id}"), "", None, "u1", "")).await;
        status = json_body(&r)["status"].clone();
        if status == "awaiting_approval" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, "awaiting_approval");
    let approve = api_request(
        "POST",
        &format!("/v1/queries/{id}/approval"),
        "",
        Some(r#"{"decision": "approve"}"#),
        "u1",
        "approver",
    );
    assert_eq!(handle_http(deps, approve).await.status_code, 200);
    let output = h.output(&id).await;
    // THEN the answer has the server's result, and the server made the refund once
    assert_eq!(output.response_text, "Outcome: refund of 25 for order A-1 issued", "{output:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dispatch = &output.agent_results[0].dispatch_id;
    let http = switchyard_engine::http_client::HttpClient::new();
    let toolbox = ToolBox::new(&m, &http);
    let (specs, _) = toolbox.specs(&["orders.refunds_issued".to_string()]).await;
    let issued = toolbox.call(&specs[0], &json!({}), None, Duration::from_secs(5)).await.expect("refunds_issued");
    let key = format!("key={dispatch}-call-0");
    assert_eq!(issued.text.matches(&key).count(), 1, "{}", issued.text);
}
