//! The `context:` section of `routing.yaml`: how much of a conversation each stage sees.
//!
//! Every field has a default, so a manifest without the section runs conversations with the
//! settings below; docs/conversations.md explains each one.

use super::Dur;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The conversation pipeline's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextSettings {
    /// The sanitized history view shows at most this many of the latest turns (seed 003: 12).
    pub history_turns: usize,
    /// Longest answer kept with a turn, in characters (the rest is cut at a word boundary).
    pub answer_chars: usize,
    /// How long a session lives after its last turn; defaults to `query.record_ttl`.
    pub session_ttl: Option<Dur>,
    /// The rolling summary.
    pub summary: SummarySettings,
    /// Salience notes.
    pub notes: NoteSettings,
    /// Token budgets per stage.
    pub budgets: BudgetSettings,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            history_turns: 12,
            answer_chars: 1_200,
            session_ttl: None,
            summary: SummarySettings::default(),
            notes: NoteSettings::default(),
            budgets: BudgetSettings::default(),
        }
    }
}

/// When and how older turns are compacted into the session's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SummarySettings {
    /// Once the stored turns' token count passes this (or their number passes
    /// `history_turns`), the oldest are compacted into the summary.
    pub threshold_tokens: usize,
    /// Turns kept raw after a compaction (the latest ones).
    pub keep_turns: usize,
    /// The summary's own ceiling: its oldest lines are dropped beyond it.
    pub max_tokens: usize,
    /// An agent (any kind) that writes the summary; without one the summary is extractive
    /// (one line per compacted turn, quoted from it: nothing is paraphrased or inferred).
    pub agent: Option<String>,
}

impl Default for SummarySettings {
    fn default() -> Self {
        SummarySettings { threshold_tokens: 2_000, keep_turns: 6, max_tokens: 600, agent: None }
    }
}

/// Key facts, preferences and open questions kept with a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NoteSettings {
    /// Notes a stage is offered, freshest first.
    pub top_k: usize,
    /// Most notes stored; the stalest go first.
    pub max_notes: usize,
    /// Each turn that does not mention a note multiplies its score by this (0 < decay ≤ 1).
    pub decay: f64,
    /// A note whose score falls below this is forgotten.
    pub min_score: f64,
}

impl Default for NoteSettings {
    fn default() -> Self {
        NoteSettings { top_k: 6, max_notes: 24, decay: 0.8, min_score: 0.05 }
    }
}

/// Token ceilings of the conversation context each stage receives (counted with the cl100k
/// BPE tokenizer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetSettings {
    /// The cascaded (LLM) classifier's `conversation_context`.
    pub classifier: usize,
    /// Every agent's `{history}` + `{summary}` + `{notes}`, unless `agents` names it.
    pub agent: usize,
    /// Per-agent ceilings.
    pub agents: BTreeMap<String, usize>,
}

impl Default for BudgetSettings {
    fn default() -> Self {
        BudgetSettings { classifier: 600, agent: 1_500, agents: BTreeMap::new() }
    }
}

impl BudgetSettings {
    /// The ceiling of `agent_id`'s prompt context.
    pub fn for_agent(&self, agent_id: &str) -> usize {
        self.agents.get(agent_id).copied().unwrap_or(self.agent)
    }

    /// The largest ceiling any stage has (what intake keeps for the stages to choose from).
    pub fn largest(&self) -> usize {
        self.agents.values().copied().chain([self.classifier, self.agent]).max().unwrap_or(0)
    }
}

/// Upper bounds the validator enforces (they keep a session item far under DynamoDB's 400 KB).
pub mod bounds {
    /// Most turns in the history view.
    pub const MAX_HISTORY_TURNS: usize = 50;
    /// Longest answer kept per turn.
    pub const MAX_ANSWER_CHARS: usize = 8_000;
    /// Largest summary.
    pub const MAX_SUMMARY_TOKENS: usize = 8_000;
    /// Largest compaction threshold.
    pub const MAX_THRESHOLD_TOKENS: usize = 50_000;
    /// Most stored notes.
    pub const MAX_NOTES: usize = 200;
    /// Largest budget of one stage.
    pub const MAX_BUDGET_TOKENS: usize = 100_000;
}
