//! A tool call under approval, for the embedded and the local-endpoint tests: a manifest
//! whose refund waits for an `approver`, and a model that asks for the refund until it sees a
//! result, then answers with it.
#![allow(dead_code)]

use async_trait::async_trait;
use serde_json::json;
use switchyard_agents::llm::{
    ModelProvider, ModelRequest, ModelResponse, ModelTurn, ProviderError, ToolOffer, ToolRequest, Turn,
};
use switchyard_model::manifest::Manifest;

/// A manifest with the MCP server at `mcp` whose `issue_refund` waits for an `approver` for
/// `approval_timeout`, its query deadline `deadline`.
pub fn manifest(mcp: &str, approval_timeout: &str, deadline: &str) -> Manifest {
    Manifest::from_yaml(&manifest_yaml(mcp, approval_timeout, deadline), "approvals.yaml").expect("manifest")
}

/// The YAML of [`manifest`].
pub fn manifest_yaml(mcp: &str, approval_timeout: &str, deadline: &str) -> String {
    format!(
        r#"
version: 1
name: approvals-test
tiers: [{{tier: 2, timeout: 5s, max_retries: 0, fallback: none}}]
providers: [{{id: m, kind: scripted, responses: {{answer: [{{reply: {{response: unused}}}}]}}}}]
tools:
  - id: orders
    mcp: {{url: "{mcp}"}}
    timeout: 2s
    effects: {{issue_refund: write}}
    approval: {{tools: [issue_refund], role: approver, timeout: {approval_timeout}}}
agents:
  - id: support
    tier: 2
    kind: llm
    llm: {{provider: m, system: "Help.", output_schema: {{name: answer, schema: {{type: object, required: [response], properties: {{response: {{type: string}}}}}}}}, tools: [orders]}}
intents: [{{id: ask, description: d, route: {{primary: support, deadline: {deadline}}}, utterances: [refund my order, I want my money back, refund order A-1], keywords: [refund]}}]
"#
    )
}

/// A model that asks for one tool call until it sees a result, then answers with that result
/// after `prefix`: the same answer however often an attempt runs again.
pub struct OneCallModel {
    pub tool: &'static str,
    pub arguments: serde_json::Value,
    pub prefix: &'static str,
}

impl OneCallModel {
    /// The refund of order A-1, answered as "Outcome: <result>".
    pub fn refund() -> OneCallModel {
        OneCallModel {
            tool: "orders__issue_refund",
            arguments: json!({"order_id": "A-1", "amount": 25}),
            prefix: "Outcome",
        }
    }
}

#[async_trait]
impl ModelProvider for OneCallModel {
    async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        Err(ProviderError::Config("the test model only converses".into()))
    }

    async fn converse(&self, _: &ModelRequest, turns: &[Turn], _: &[ToolOffer]) -> Result<ModelTurn, ProviderError> {
        let response = |text: String| ModelResponse {
            text,
            model: "test".into(),
            input_tokens: 10,
            output_tokens: 5,
            cache_hit: false,
        };
        let result = turns.iter().rev().find_map(|t| match t {
            Turn::Results(r) => r.first().map(|r| r.content.clone()),
            Turn::Calls { .. } => None,
        });
        Ok(match result {
            Some(text) => ModelTurn {
                response: response(
                    json!({"response": format!("{}: {text}", self.prefix), "confidence": 0.9}).to_string(),
                ),
                calls: vec![],
            },
            None => ModelTurn {
                response: response(String::new()),
                calls: vec![ToolRequest {
                    id: "c0".into(),
                    name: self.tool.into(),
                    raw_arguments: self.arguments.to_string(),
                    arguments: Ok(self.arguments.clone()),
                }],
            },
        })
    }
}

/// The agents of `manifest` with [`OneCallModel::refund`] as provider `m`.
pub fn agents(manifest: &Manifest) -> std::sync::Arc<switchyard_agents::Agents> {
    let http = switchyard_engine::http_client::HttpClient::new();
    let provider = manifest.provider("m").expect("provider").clone();
    let llm = switchyard_agents::llm::LlmAgents::new(manifest, &http).with_provider(
        "m",
        std::sync::Arc::new(OneCallModel::refund()),
        provider,
    );
    std::sync::Arc::new(switchyard_agents::Agents::new(manifest).with_llm(llm))
}
