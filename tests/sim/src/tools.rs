//! The simulation's tools and the model that calls them.
//!
//! - [`Desk`]: the manifest's `orders` source served in the process (a
//!   [`ToolServer`], so calls run on the virtual clock with no socket). It counts every call of
//!   a write tool per idempotency key — one key is one logical call — and injects the tool
//!   faults: a crash (panic) before the call is made, a crash after it was made and before the
//!   engine records it, an error, and a slow answer past the call's timeout.
//! - [`ClerkModel`]: a scripted model that looks the order up (a read), notes the request (a
//!   write), asks for the refund (a write under approval), then answers with the last result:
//!   the same calls, with the same arguments, however often an attempt runs again.

use crate::chaos::{crash, Chaos};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_agents::llm::{
    ModelProvider, ModelRequest, ModelResponse, ModelTurn, ProviderError, ToolOffer, ToolRequest, Turn,
};
use switchyard_agents::tools::mcp::McpTool;
use switchyard_agents::tools::{ToolError, ToolOutput, ToolServer};

/// The tool source the desk serves (its id in the simulation's manifest).
pub const SOURCE: &str = "orders";

/// The provider the clerk model stands in for.
pub const PROVIDER: &str = "sim";

/// The desk's write tools.
const WRITES: [&str; 2] = ["note", "refund"];

/// Longest injected tool latency: past the source's 500 ms call timeout.
const MAX_TOOL_LATENCY: Duration = Duration::from_millis(1_000);

/// What the desk saw.
#[derive(Debug, Default, Clone)]
pub struct DeskLog {
    /// Write calls made, per idempotency key: the tool and how often it was made.
    pub writes: BTreeMap<String, (String, u32)>,
    /// Write calls that came without an idempotency key.
    pub unkeyed: Vec<String>,
    /// Read calls made.
    pub reads: u32,
}

/// The order desk: counts calls, injects tool faults.
pub struct Desk {
    chaos: Arc<Chaos>,
    log: Mutex<DeskLog>,
}

impl Desk {
    /// A desk whose faults come from `chaos`.
    pub fn new(chaos: Arc<Chaos>) -> Desk {
        Desk { chaos, log: Mutex::new(DeskLog::default()) }
    }

    /// What it saw so far.
    pub fn log(&self) -> DeskLog {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> McpTool {
    McpTool {
        name: name.into(),
        description: description.into(),
        input_schema: json!({"type": "object", "properties": properties, "required": required}),
    }
}

#[async_trait]
impl ToolServer for Desk {
    async fn tools(&self) -> Result<Vec<McpTool>, ToolError> {
        Ok(vec![
            tool("lookup", "Look an order up.", json!({"order_id": {"type": "string"}}), &["order_id"]),
            tool(
                "note",
                "Note a request on an order.",
                json!({"order_id": {"type": "string"}, "text": {"type": "string"}}),
                &["order_id", "text"],
            ),
            tool(
                "refund",
                "Refund an order.",
                json!({"order_id": {"type": "string"}, "amount": {"type": "number"}}),
                &["order_id", "amount"],
            ),
        ])
    }

    async fn call(&self, tool: &str, arguments: &Value, key: Option<&str>) -> Result<ToolOutput, ToolError> {
        let f = &self.chaos.faults;
        let write = WRITES.contains(&tool);
        if write && self.chaos.roll(f.tool_crash, &format!("crash before the {tool} call is made")) {
            crash(&format!("before the {tool} call"));
        }
        if self.chaos.roll(f.tool_error, &format!("the {tool} call errs")) {
            return Ok(ToolOutput { text: "the desk is closed".into(), is_error: true });
        }
        if let Ok(mut log) = self.log.lock() {
            match (write, key) {
                (false, _) => log.reads += 1,
                (true, Some(key)) => log.writes.entry(key.to_string()).or_insert_with(|| (tool.to_string(), 0)).1 += 1,
                (true, None) => log.unkeyed.push(tool.to_string()),
            }
        }
        if write && self.chaos.roll(f.tool_crash, &format!("crash after the {tool} call is made, before its record")) {
            crash(&format!("after the {tool} call"));
        }
        if self.chaos.roll(f.tool_slow, &format!("the {tool} call is slow")) {
            tokio::time::sleep(MAX_TOOL_LATENCY.mul_f64(self.chaos.fraction())).await;
        }
        let order = arguments["order_id"].as_str().unwrap_or("?");
        let text = match tool {
            "lookup" => format!("order {order}: 25.00 USD, delivered"),
            "note" => format!("noted on {order}"),
            _ => format!("refunded {} USD on {order}", arguments["amount"]),
        };
        Ok(ToolOutput { text, is_error: false })
    }
}

/// The calls the clerk makes, in order: (provider name, arguments).
fn script() -> [(&'static str, Value); 3] {
    [
        ("orders__lookup", json!({"order_id": "A-1"})),
        ("orders__note", json!({"order_id": "A-1", "text": "refund asked"})),
        ("orders__refund", json!({"order_id": "A-1", "amount": 25})),
    ]
}

/// A model that makes the `script`'s calls one turn at a time, then answers with the last
/// result.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClerkModel;

#[async_trait]
impl ModelProvider for ClerkModel {
    async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        Err(ProviderError::Config("the clerk model only converses".into()))
    }

    async fn converse(&self, _: &ModelRequest, turns: &[Turn], _: &[ToolOffer]) -> Result<ModelTurn, ProviderError> {
        let response = |text: String| ModelResponse {
            text,
            model: "sim-clerk".into(),
            input_tokens: 10,
            output_tokens: 5,
            cache_hit: false,
        };
        let results: Vec<&str> = turns
            .iter()
            .filter_map(|t| match t {
                Turn::Results(r) => r.first().map(|r| r.content.as_str()),
                Turn::Calls { .. } => None,
            })
            .collect();
        let script = script();
        Ok(match script.get(results.len()) {
            Some((name, arguments)) => ModelTurn {
                response: response(String::new()),
                calls: vec![ToolRequest {
                    id: format!("c{}", results.len()),
                    name: (*name).into(),
                    raw_arguments: arguments.to_string(),
                    arguments: Ok(arguments.clone()),
                }],
            },
            None => {
                let last = results.last().copied().unwrap_or_default();
                ModelTurn {
                    response: response(json!({"response": format!("Refund: {last}"), "confidence": 0.9}).to_string()),
                    calls: vec![],
                }
            }
        })
    }
}
