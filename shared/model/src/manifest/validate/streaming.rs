//! Checks of streamed answers: an `llm` agent's `stream` field, the `tokens` flush settings
//! and the synthesis agent.

use super::Check;
use crate::manifest::{AgentKind, Dur, LlmSettings};
use serde_json::Value;

/// Longest `tokens.flush_interval`: a reader waits at most this long for text already written.
const MAX_FLUSH_INTERVAL: Dur = Dur::from_millis(5_000);
/// Largest `tokens.flush_chars` (an event stays a small item).
const MAX_FLUSH_CHARS: usize = 16_000;
/// Longest `synthesis.timeout`: it runs inside the synthesizer's 60 s claim on the query and
/// must end well before another synthesizer may take the claim over.
const MAX_SYNTHESIS_TIMEOUT: Dur = Dur::from_millis(45_000);

/// Whether `field` is a string property of the output schema.
fn streams_a_string(llm: &LlmSettings, field: &str) -> bool {
    llm.output_schema.schema.pointer(&format!("/properties/{field}/type")).and_then(Value::as_str) == Some("string")
}

impl Check<'_> {
    /// `tokens`, every agent's `llm.stream`, and `synthesis`.
    pub(super) fn streaming(&mut self) {
        let t = &self.m.tokens;
        if t.flush_interval.as_millis() == 0 || t.flush_interval > MAX_FLUSH_INTERVAL {
            self.report(
                "tokens.flush_interval",
                format!("flush_interval {} must be between 1ms and 5s", t.flush_interval),
            );
        }
        if t.flush_chars == 0 || t.flush_chars > MAX_FLUSH_CHARS {
            self.report(
                "tokens.flush_chars",
                format!("flush_chars {} must be between 1 and {MAX_FLUSH_CHARS}", t.flush_chars),
            );
        }
        for (i, agent) in self.m.agents.iter().enumerate() {
            let Some(llm) = &agent.llm else { continue };
            let Some(field) = &llm.stream else { continue };
            if !streams_a_string(llm, field) {
                self.report(
                    format!("agents[{i}].llm.stream"),
                    format!(
                        "`stream: {field}` must name a property of `output_schema.schema` declared `type: string` (the text that is streamed)"
                    ),
                );
            }
        }
        let Some(s) = &self.m.synthesis else { return };
        match self.m.agent(&s.agent) {
            None => {
                self.known_agent("synthesis.agent".into(), &s.agent);
            }
            Some(agent) => match (&agent.kind, &agent.llm) {
                (AgentKind::Llm, Some(llm)) if llm.stream.is_some() => {}
                _ => self.report(
                    "synthesis.agent",
                    format!(
                        "the synthesis agent `{}` must be `kind: llm` with `llm.stream` naming its answer field",
                        s.agent
                    ),
                ),
            },
        }
        if s.timeout.as_millis() == 0 || s.timeout > MAX_SYNTHESIS_TIMEOUT {
            self.report(
                "synthesis.timeout",
                format!("timeout {} must be between 1ms and 45s (it runs inside the synthesizer's claim)", s.timeout),
            );
        }
        for (j, intent) in s.intents.iter().enumerate() {
            if self.m.intent(intent).is_none() {
                self.report(
                    format!("synthesis.intents[{j}]"),
                    format!("intent `{intent}` is not declared in `intents`"),
                );
            }
        }
    }
}
