//! `routing.yaml`: the manifest that decides everything Switchyard does.
//!
//! A manifest declares tiers (timeouts, retries, fallbacks), agents (id, tier, kind and the
//! kind's settings), intents (route, required role, what the classifier learns from),
//! pipelines (sequential steps with QC gates) and entity gazetteers and patterns. It is parsed
//! into the typed structs below (`deny_unknown_fields` everywhere, so a misspelt key is an
//! error, not a silently ignored setting) and then checked by [`validate`], which reports every
//! problem at once with the YAML path of the offending field.
//!
//! Load it once per process with [`Manifest::load`] or [`Manifest::from_yaml`]; the returned
//! value is immutable and cheap to share behind an `Arc`.

mod context;
mod duration;
mod kinds;
mod modes;
mod refused;
mod retrieval;
mod tools;
mod validate;

pub use context::{bounds as context_bounds, BudgetSettings, ContextSettings, NoteSettings, SummarySettings};
pub use duration::Dur;
pub use kinds::{
    HttpSettings, LambdaSettings, LlmSettings, OutputSchema, Provider, ProviderKind, ScriptedModelReply,
    ScriptedToolCall, StructuredOutput, UNKNOWN_CONFIDENCE,
};
pub use modes::{
    CriticSettings, DeliberateSettings, Expert, GuardrailSettings, RouteMode, ScoreWeights, SourcesSettings,
};
pub use refused::{for_lower_case_phrases, RefusedPhrases};
pub use retrieval::{
    Chunking, EmbeddingSettings, KbSearchType, KnowledgeBaseSettings, MergeSettings, MergeStrategy, ReflectionSettings,
    RetrievalAttempt, RetrievalMode, RetrieverRole, RetrieverSettings, DEFAULT_RRF_K,
};
pub use tools::{
    env_references, expand_env, provider_name, ApprovalSettings, Effect, HttpToolSettings, McpSettings, ToolSource,
    DEFAULT_MAX_RESULT_BYTES, DEFAULT_MAX_TOOL_CALLS, DEFAULT_TOOL_TIMEOUT, PROVIDER_NAME_SEPARATOR,
};
pub use validate::{placeholders, validate, Problem, TEMPLATE_INPUTS};

use crate::contracts::{CitationSourceType, HandoffStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

mod settings;
pub use settings::{
    ClassifierSettings, EncoderSettings, OptimizationSettings, QuerySettings, ScopeSettings, SignalSettings,
    SynthesisSettings, TokenSettings, DEFAULT_DOUBT, DEFAULT_SCOPE_BORDERLINE, DEFAULT_SCOPE_THRESHOLD,
};

/// The manifest shipped with Switchyard (the E2I design's routing table), embedded in every binary so
/// that `switchyard ask` works with no files around it.
pub const EMBEDDED_ROUTING_YAML: &str = include_str!("../../../routing.yaml");

/// The same document as JSON, converted by `shared/model/build.rs` from the very file above at build
/// time (empty when that file is not valid YAML). JSON deserializes into a [`Manifest`] several
/// times faster than YAML, and this parse is most of every function's init.
const EMBEDDED_ROUTING_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/routing.json"));

/// How the embedded manifest names itself in errors.
const EMBEDDED_FILE: &str = "<embedded routing.yaml>";

/// A manifest that failed to load: the file, and every problem found in it.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {}", render_problems(.problems))]
pub struct ManifestError {
    /// File name (or `<embedded>` / `<string>`).
    pub file: String,
    /// Each problem with its YAML path.
    pub problems: Vec<Problem>,
}

fn render_problems(problems: &[Problem]) -> String {
    if problems.len() == 1 {
        return problems[0].to_string();
    }
    let mut out = format!("{} problems:", problems.len());
    for p in problems {
        out.push_str("\n  - ");
        out.push_str(&p.to_string());
    }
    out
}

/// A parsed and validated `routing.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Schema version; this build reads version 1.
    pub version: u32,
    /// Name of the system this manifest describes (`e2i`, `rag-manager`, …).
    pub name: String,
    /// What the system is for.
    #[serde(default)]
    pub description: String,
    /// The IANA time zone relative dates are read in ("tomorrow", "this Friday"); UTC when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// Limits and defaults for incoming queries.
    #[serde(default)]
    pub query: QuerySettings,
    /// Embedded classifier thresholds.
    #[serde(default)]
    pub classifier: ClassifierSettings,
    /// Per-tier timeouts, retries and fallbacks.
    pub tiers: Vec<Tier>,
    /// Model providers `llm` agents name.
    #[serde(default)]
    pub providers: Vec<Provider>,
    /// MCP servers and HTTP endpoints `llm` agents may call (docs/tools.md). Left out of the
    /// canonical JSON while empty, so existing fingerprints stay the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSource>,
    /// Every agent a route may dispatch.
    pub agents: Vec<Agent>,
    /// Every intent the system answers.
    pub intents: Vec<Intent>,
    /// Sequential agent pipelines (the E2I design's Tier 0 ML training).
    #[serde(default)]
    pub pipelines: Vec<Pipeline>,
    /// The manifest's entity types (lower snake_case names), each with its description and
    /// one source: a gazetteer, patterns or a built-in kind.
    #[serde(default)]
    pub entities: BTreeMap<String, EntitySpec>,
    /// Conversations: history view, rolling summary, salience notes, token budgets.
    #[serde(default)]
    pub context: ContextSettings,
    /// Training signals: who may read them over HTTP, whether they keep the question text, and
    /// when a falling reward raises an optimization request (docs/routing.md#training-signal).
    /// Left out of the canonical JSON while default, so existing fingerprints stay the same.
    #[serde(default, skip_serializing_if = "SignalSettings::is_default")]
    pub signals: SignalSettings,
    /// How streamed answers are written to the event log.
    #[serde(default)]
    pub tokens: TokenSettings,
    /// An optional model-written final answer (the synthesis agent).
    #[serde(default)]
    pub synthesis: Option<SynthesisSettings>,
    /// Folder of the file the manifest was loaded from; relative paths in it (a retriever's
    /// corpus or index) are resolved against it. Not part of the YAML.
    #[serde(skip)]
    pub base_dir: Option<std::path::PathBuf>,
    /// The file the manifest was loaded from (its trained router sits beside it, with the
    /// extension `.router`). Not part of the YAML.
    #[serde(skip)]
    pub source: Option<std::path::PathBuf>,
    /// Where the cascade's sentence encoder was shipped, when not where
    /// `classifier.encoder.model` says: a deployed function reads it from `SWITCHYARD_ENCODER`
    /// (the template's encoder layer). Not part of the YAML, nor of the manifest's hash: the
    /// encoder is checked against the one the router was trained with by its identity.
    #[serde(skip)]
    pub encoder_dir: Option<std::path::PathBuf>,
}

/// One tier of agents: its own queue, timeout, retries and fallback (the E2I design's timeout table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// 0 – 5; lower tier, higher priority.
    pub tier: u8,
    /// A short name for people and queue names.
    #[serde(default)]
    pub name: String,
    /// Per-attempt timeout, or `variable` (each agent of the tier sets its own).
    pub timeout: TierTimeout,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// What answers when retries are exhausted.
    pub fallback: Fallback,
    /// Delay between attempts.
    #[serde(default)]
    pub backoff: Backoff,
    /// Each retry after a timeout multiplies the timeout by this (E2I: "retry with
    /// extended timeout").
    #[serde(default = "default_timeout_extension")]
    pub timeout_extension: f64,
    /// Lambda reserved concurrency for this tier's worker (infra).
    #[serde(default)]
    pub reserved_concurrency: Option<u32>,
}

fn default_timeout_extension() -> f64 {
    1.5
}

/// A tier's timeout: fixed, or set per agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierTimeout {
    /// Each agent of the tier sets `timeout` (E2I Tier 0: "Variable").
    Variable,
    /// The same timeout for every agent of the tier.
    Fixed(Dur),
}

impl Serialize for TierTimeout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TierTimeout::Variable => s.serialize_str("variable"),
            TierTimeout::Fixed(d) => d.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for TierTimeout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text == "variable" {
            return Ok(TierTimeout::Variable);
        }
        text.parse::<Dur>().map(TierTimeout::Fixed).map_err(|e| serde::de::Error::custom(format!("{e}, or `variable`")))
    }
}

/// What answers when an agent's retries are exhausted. Written `none`, `{agent: ID}` or
/// `{template: TEXT}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// No fallback: the dispatch fails (E2I Tier 0).
    None,
    /// Dispatch this agent instead (E2I Tiers 2–4). A tier's fallback agent does not fall
    /// back to itself.
    Agent(String),
    /// Answer with this text as a `partial` handoff (E2I Tier 5's "template response").
    Template(String),
}

impl Serialize for Fallback {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Fallback::None => s.serialize_str("none"),
            Fallback::Agent(id) => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("agent", id)?;
                map.end()
            }
            Fallback::Template(text) => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("template", text)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Fallback {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FallbackVisitor;
        const EXPECTED: &str = "`none`, `{agent: ID}` or `{template: TEXT}`";
        impl<'de> serde::de::Visitor<'de> for FallbackVisitor {
            type Value = Fallback;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Fallback, E> {
                match v {
                    "none" => Ok(Fallback::None),
                    other => Err(E::custom(format!("`{other}` is not a fallback; write {EXPECTED}"))),
                }
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Fallback, E> {
                Ok(Fallback::None)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Fallback, A::Error> {
                let key: String = map
                    .next_key()?
                    .ok_or_else(|| serde::de::Error::custom(format!("empty fallback; write {EXPECTED}")))?;
                let value: String = map.next_value()?;
                let fallback = match key.as_str() {
                    "agent" => Fallback::Agent(value),
                    "template" => Fallback::Template(value),
                    other => {
                        return Err(serde::de::Error::custom(format!("unknown fallback `{other}`; write {EXPECTED}")))
                    }
                };
                if map.next_key::<String>()?.is_some() {
                    return Err(serde::de::Error::custom(format!("a fallback has one key; write {EXPECTED}")));
                }
                Ok(fallback)
            }
        }
        d.deserialize_any(FallbackVisitor)
    }
}

/// Delay between attempts: `base × 2^(attempt−1)`, at most `max`, with full jitter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Backoff {
    /// First delay.
    pub base: Dur,
    /// Largest delay.
    pub max: Dur,
    /// Randomise each delay in `[base/2, delay]` so retries of many queries spread out.
    pub jitter: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base: Dur::from_millis(1_000), max: Dur::from_millis(30_000), jitter: true }
    }
}

/// The ways an agent can be run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// Answers from a template in the manifest: offline, instant, deterministic.
    Builtin,
    /// Behaves as its settings script it (fail N times, hang, answer slowly, malformed output,
    /// fail the QC gate): for tests and demonstrations of failure handling.
    Scripted,
    /// Asks a model (Bedrock Converse or an OpenAI-compatible endpoint) for structured output.
    Llm,
    /// POSTs the dispatch to a URL and reads the handoff from the response.
    Http,
    /// Invokes the user's Lambda function with the dispatch and reads the handoff it returns.
    Lambda,
    /// Searches a document index and answers with ranked chunks as evidence.
    Retriever,
}

impl AgentKind {
    /// The name written in the manifest (and of the settings block).
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Builtin => "builtin",
            AgentKind::Scripted => "scripted",
            AgentKind::Llm => "llm",
            AgentKind::Http => "http",
            AgentKind::Lambda => "lambda",
            AgentKind::Retriever => "retriever",
        }
    }
}

/// An agent the routes can dispatch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// Unique id; the `target_agent` of its dispatches.
    pub id: String,
    /// Tier it runs on (its queue, timeout and retries).
    pub tier: u8,
    /// How it runs; the settings block of the same name must be present.
    pub kind: AgentKind,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Per-attempt timeout; required on a `variable` tier, overrides a fixed one otherwise.
    #[serde(default)]
    pub timeout: Option<Dur>,
    /// Overrides the tier's `max_retries`.
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// Overrides the tier's fallback.
    #[serde(default)]
    pub fallback: Option<Fallback>,
    /// Below this confidence the answer carries a caveat (E2I `required_confidence`).
    #[serde(default = "default_required_confidence")]
    pub required_confidence: f64,
    /// Kind of citation its evidence becomes.
    #[serde(default = "default_citation_source")]
    pub citation_source: CitationSourceType,
    /// Follow-up questions to suggest after it answered.
    #[serde(default)]
    pub follow_ups: Vec<String>,
    /// The only context fields its dispatches carry (the negotiation design's tailored inputs); every field
    /// when absent. Fields the engine adds for a mode (`additional_question`, `decision`, …)
    /// are named in the mode's docs.
    #[serde(default)]
    pub inputs: Option<Vec<String>>,
    /// Settings of a `builtin` agent.
    #[serde(default)]
    pub builtin: Option<BuiltinSettings>,
    /// Settings of a `scripted` agent.
    #[serde(default)]
    pub scripted: Option<ScriptedSettings>,
    /// Settings of an `llm` agent.
    #[serde(default)]
    pub llm: Option<LlmSettings>,
    /// Settings of an `http` agent.
    #[serde(default)]
    pub http: Option<HttpSettings>,
    /// Settings of a `lambda` agent.
    #[serde(default)]
    pub lambda: Option<LambdaSettings>,
    /// Settings of a `retriever` agent.
    #[serde(default)]
    pub retriever: Option<RetrieverSettings>,
}

fn default_required_confidence() -> f64 {
    0.7
}

fn default_citation_source() -> CitationSourceType {
    CitationSourceType::AgentActivity
}

/// A piece of evidence an agent cites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceSpec {
    /// The sentence (may use `{placeholders}`).
    pub text: String,
    /// Source id for the citation; defaults to `<agent>#<n>`.
    #[serde(default)]
    pub source_id: Option<String>,
    /// Overrides the agent's `citation_source`.
    #[serde(default)]
    pub source_type: Option<CitationSourceType>,
    /// 0.0 – 1.0.
    #[serde(default = "one")]
    pub relevance: f64,
}

fn one() -> f64 {
    1.0
}

/// A `builtin` agent: a response template filled from the query's entities.
///
/// Placeholders: `{question}`, `{intent}`, `{entities}` (all of them, comma separated) and one
/// per declared entity type (the first entity of that type, else the `defaults` entry). A
/// placeholder with neither is left out with the words of its `[optional segment]`, or, outside
/// one, with the connecting word before it (docs/routing.md#builtin-agents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinSettings {
    /// The answer text.
    pub response: String,
    /// Confidence of the answer.
    pub confidence: f64,
    /// Values for placeholders whose entity the query does not name.
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
    /// Evidence, turned into citations.
    #[serde(default)]
    pub evidence: Vec<EvidenceSpec>,
    /// Caveats attached to every answer.
    #[serde(default)]
    pub caveats: Vec<String>,
    /// Extra fields of `primary_output` (e.g. a QC report).
    #[serde(default)]
    pub output: BTreeMap<String, Value>,
}

/// A `scripted` agent: deterministic misbehaviour for tests, keyed by attempt number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ScriptedSettings {
    /// Fail the first N attempts with an agent error.
    pub fail_times: u32,
    /// Hang (never answer) on the first N attempts; `hang_times: 1000` hangs forever.
    pub hang_times: u32,
    /// Take this long to answer.
    pub delay: Option<Dur>,
    /// Return output that is not a valid handoff.
    pub malformed: bool,
    /// Panic inside the agent (a crash of the worker's handler).
    pub panic: bool,
    /// Status of the answer once it answers.
    pub status: Option<HandoffStatus>,
    /// Answer text.
    pub response: Option<String>,
    /// Confidence of the answer (default 0.9).
    pub confidence: Option<f64>,
    /// `primary_output` fields of the answer.
    pub output: BTreeMap<String, Value>,
    /// Error message of the failures.
    pub error: Option<String>,
    /// Whether failures are recoverable (retried) — default true.
    pub recoverable: Option<bool>,
}

/// An intent the system answers, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Unique id (the `intent` of parsed queries).
    pub id: String,
    /// What questions of this intent ask.
    #[serde(default)]
    pub description: String,
    /// Which agents answer it.
    pub route: Route,
    /// Role a caller needs (E2I pre-dispatch "user has permission").
    #[serde(default)]
    pub required_role: Option<String>,
    /// Entity types the question must name: while one is missing no agent runs, and the
    /// answer asks for it by its description (the slot is filled on the next turn).
    #[serde(default)]
    pub required_entities: Vec<String>,
    /// Example questions the embedded classifier learns from.
    #[serde(default)]
    pub utterances: Vec<String>,
    /// Words and phrases that signal the intent.
    #[serde(default)]
    pub keywords: Vec<String>,
}

/// Which agents answer an intent: a primary agent plus supporting agents, or a pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The agent that answers.
    #[serde(default)]
    pub primary: Option<String>,
    /// A pipeline that answers (instead of `primary`).
    #[serde(default)]
    pub pipeline: Option<String>,
    /// The primary agent's tier, as the seed's table states it; checked, not used.
    #[serde(default)]
    pub tier: Option<u8>,
    /// Agents dispatched in parallel with the primary.
    #[serde(default)]
    pub supporting: Vec<String>,
    /// Overall deadline; defaults to the slowest dispatch's worst case (for a route with
    /// modes, the sum of its steps' worst cases).
    #[serde(default)]
    pub deadline: Option<Dur>,
    /// Answer shape besides primary + supporting; its settings block must be present.
    #[serde(default)]
    pub mode: Option<RouteMode>,
    /// Default context fields of the query (a pre-parsed query's `context` overrides them).
    #[serde(default)]
    pub context: BTreeMap<String, Value>,
    /// `mode: deliberate` settings (negotiation).
    #[serde(default)]
    pub deliberate: Option<DeliberateSettings>,
    /// `mode: sources` settings (research-assistant).
    #[serde(default)]
    pub sources: Option<SourcesSettings>,
    /// Critic loop after the answer (unified-chat).
    #[serde(default)]
    pub critic: Option<CriticSettings>,
    /// Guardrails and coherence check (RAG manager).
    #[serde(default)]
    pub guardrails: Option<GuardrailSettings>,
    /// Reflection on the answer after synthesis (RAG manager).
    #[serde(default)]
    pub reflection: Option<ReflectionSettings>,
    /// Retrievers fused at fan-in before the primary answers (`merge: {strategy: rrf, …}`).
    #[serde(default)]
    pub merge: Option<MergeSettings>,
}

impl Route {
    /// Whether the route is carried out by the staged modes engine (any mode, critic,
    /// guardrail or merge).
    pub fn has_modes(&self) -> bool {
        self.mode.is_some() || self.critic.is_some() || self.guardrails.is_some() || self.merge.is_some()
    }
}

/// A sequence of agents run one after another (E2I Tier 0 ML training).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// Unique id.
    pub id: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Steps in order; each sees the previous step's output in its `context.previous`.
    pub steps: Vec<PipelineStep>,
}

/// One step of a pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineStep {
    /// The agent of this step.
    pub agent: String,
    /// A QC gate checked on this step's output before the pipeline continues.
    #[serde(default)]
    pub gate: Option<Gate>,
}

/// A QC gate: a numeric or boolean check on a step's `primary_output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    /// Gate name, for the report.
    pub name: String,
    /// Dotted path into `primary_output`, e.g. `qc_report.expectations_met`.
    pub field: String,
    /// The value must be at least this number.
    #[serde(default)]
    pub min: Option<f64>,
    /// The value must equal this.
    #[serde(default)]
    pub equals: Option<Value>,
    /// Dotted path of the QC report returned when the gate blocks.
    #[serde(default)]
    pub report: Option<String>,
}

/// One entity type: what it is, and where its values come from (exactly one of `gazetteer`,
/// `patterns` or `kind`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct EntitySpec {
    /// A short noun phrase naming it for a user ("the city you fly to"): the words a question
    /// asking for a missing value uses.
    pub description: String,
    /// Known values, matched exactly or with typos.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gazetteer: Option<Vec<GazetteerEntry>>,
    /// Regular expressions; the whole match (or group 1) is the value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patterns: Option<Vec<String>>,
    /// A built-in extractor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<EntityKind>,
    /// Allow typo-tolerant matches of the gazetteer (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fuzzy: Option<bool>,
    /// Whether its words also count among the words the classifier reads the intent from
    /// (default true). `false` for names that say *which* thing a question is about, never
    /// what it asks (a brand, a city).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intent_words: Option<bool>,
}

impl EntitySpec {
    /// The gazetteer's entries (none when the type has another source).
    pub fn gazetteer(&self) -> &[GazetteerEntry] {
        self.gazetteer.as_deref().unwrap_or(&[])
    }

    /// The patterns (none when the type has another source).
    pub fn patterns(&self) -> &[String] {
        self.patterns.as_deref().unwrap_or(&[])
    }
}

/// The built-in extractors an entity type may name as its `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    /// A calendar day, absolute or relative ("tomorrow", "the 14th"): `YYYY-MM-DD`.
    Date,
    /// A time of day ("3pm", "14:30"): `HH:MM`, 24-hour.
    Time,
    /// A number written in digits or words: its digits.
    Number,
    /// An amount with its currency ("$250", "40 euros"): `250.00 USD`.
    Money,
    /// A length of time ("two weeks", "3 nights"): ISO 8601 (`P2W`, `P3D`, `PT2H`).
    Duration,
    /// An e-mail address, in lower case.
    Email,
    /// A reporting period ("Q3 2025", "last quarter", "YTD"): the period grammar's names.
    TimePeriod,
}

impl EntityKind {
    /// The name written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Date => "date",
            EntityKind::Time => "time",
            EntityKind::Number => "number",
            EntityKind::Money => "money",
            EntityKind::Duration => "duration",
            EntityKind::Email => "email",
            EntityKind::TimePeriod => "time_period",
        }
    }
}

/// A known entity value with its other spellings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GazetteerEntry {
    /// Just the value.
    Value(String),
    /// The value and its aliases.
    WithAliases {
        /// Canonical spelling.
        value: String,
        /// Other spellings that map to it.
        #[serde(default)]
        aliases: Vec<String>,
    },
}

impl GazetteerEntry {
    /// The canonical spelling.
    pub fn value(&self) -> &str {
        match self {
            GazetteerEntry::Value(v) | GazetteerEntry::WithAliases { value: v, .. } => v,
        }
    }

    /// Other spellings.
    pub fn aliases(&self) -> &[String] {
        match self {
            GazetteerEntry::Value(_) => &[],
            GazetteerEntry::WithAliases { aliases, .. } => aliases,
        }
    }
}

impl Manifest {
    /// Parse and validate a manifest; `file` names it in errors.
    pub fn from_yaml(text: &str, file: &str) -> Result<Manifest, ManifestError> {
        let de = serde_yaml::Deserializer::from_str(text);
        let manifest: Manifest = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let line = inner.location().map(|l| l.line());
            let path = if path == "." { String::new() } else { path };
            let message = strip_location(&inner.to_string());
            let message = message.strip_prefix(&format!("{path}: ")).map(str::to_string).unwrap_or(message);
            ManifestError { file: file.to_string(), problems: vec![Problem { path, line, message }] }
        })?;
        Manifest::validated(manifest, file)
    }

    /// `manifest` when [`validate`] finds nothing wrong with it.
    fn validated(manifest: Manifest, file: &str) -> Result<Manifest, ManifestError> {
        let problems = validate(&manifest);
        if problems.is_empty() {
            Ok(manifest)
        } else {
            Err(ManifestError { file: file.to_string(), problems })
        }
    }

    /// Read, parse and validate a manifest file.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        Manifest::from_file_text(path, &Manifest::read_text(path)?, None)
    }

    /// The text of the manifest file `path` (the error names the file).
    pub fn read_text(path: &Path) -> Result<String, ManifestError> {
        std::fs::read_to_string(path).map_err(|e| ManifestError {
            file: path.display().to_string(),
            problems: vec![Problem { path: String::new(), line: None, message: format!("cannot read the file: {e}") }],
        })
    }

    /// The manifest the file `path` holds, `yaml` being its text: read from `prepared`, a JSON
    /// form of that very text (the one `switchyard train` stores beside the router), when given
    /// and it deserializes, else parsed from the YAML; validated either way.
    pub fn from_file_text(path: &Path, yaml: &str, prepared: Option<&str>) -> Result<Manifest, ManifestError> {
        let file = path.display().to_string();
        let mut manifest = match prepared {
            Some(json) => Manifest::from_prepared(json, yaml, &file)?,
            None => Manifest::from_yaml(yaml, &file)?,
        };
        manifest.source = Some(path.to_path_buf());
        manifest.base_dir =
            path.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p }.to_path_buf());
        Ok(manifest)
    }

    /// `path` resolved against the manifest's folder (as is when absolute, or when the
    /// manifest was not loaded from a file).
    pub fn resolve(&self, path: &str) -> std::path::PathBuf {
        let p = Path::new(path);
        match &self.base_dir {
            Some(base) if p.is_relative() => base.join(p),
            _ => p.to_path_buf(),
        }
    }

    /// The folder of the cascade's sentence encoder, when the manifest names one: where it was
    /// shipped ([`Manifest::encoder_dir`]), else `classifier.encoder.model` resolved.
    pub fn encoder_folder(&self) -> Option<std::path::PathBuf> {
        let encoder = self.classifier.encoder.as_ref()?;
        Some(self.encoder_dir.clone().unwrap_or_else(|| self.resolve(&encoder.model)))
    }

    /// The manifest embedded in the binary ([`EMBEDDED_ROUTING_YAML`]), read from its JSON form
    /// prepared at build time and validated like any other. Should that form not deserialize
    /// (the YAML is broken, or uses something JSON cannot carry), the YAML is parsed instead, so
    /// the result and every error (with its line) are exactly those of [`Manifest::from_yaml`].
    pub fn embedded() -> Result<Manifest, ManifestError> {
        Manifest::from_prepared(EMBEDDED_ROUTING_JSON, EMBEDDED_ROUTING_YAML, EMBEDDED_FILE)
    }

    /// The manifest `yaml`, read from `json` (its build-time JSON form) when that deserializes.
    fn from_prepared(json: &str, yaml: &str, file: &str) -> Result<Manifest, ManifestError> {
        match serde_json::from_str::<Manifest>(json) {
            Ok(manifest) => Manifest::validated(manifest, file),
            Err(_) => Manifest::from_yaml(yaml, file),
        }
    }

    /// The agent with this id.
    pub fn agent(&self, id: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// The tier with this number.
    pub fn tier(&self, tier: u8) -> Option<&Tier> {
        self.tiers.iter().find(|t| t.tier == tier)
    }

    /// The intent with this id.
    pub fn intent(&self, id: &str) -> Option<&Intent> {
        self.intents.iter().find(|i| i.id == id)
    }

    /// The tool source with this id.
    pub fn tool_source(&self, id: &str) -> Option<&ToolSource> {
        self.tools.iter().find(|t| t.id == id)
    }

    /// The model provider with this id.
    pub fn provider(&self, id: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.id == id)
    }

    /// The pipeline with this id.
    pub fn pipeline(&self, id: &str) -> Option<&Pipeline> {
        self.pipelines.iter().find(|p| p.id == id)
    }

    /// An agent's per-attempt timeout: its own, else its tier's fixed timeout.
    pub fn agent_timeout(&self, agent: &Agent) -> Option<Dur> {
        agent.timeout.or_else(|| match self.tier(agent.tier)?.timeout {
            TierTimeout::Fixed(d) => Some(d),
            TierTimeout::Variable => None,
        })
    }

    /// An agent's retries after the first attempt: its own, else its tier's.
    pub fn agent_max_retries(&self, agent: &Agent) -> u32 {
        agent.max_retries.or_else(|| self.tier(agent.tier).map(|t| t.max_retries)).unwrap_or(0)
    }

    /// What answers when the agent's retries are exhausted. A tier's fallback agent does not
    /// fall back to itself.
    pub fn agent_fallback(&self, agent: &Agent) -> Fallback {
        let fallback = agent
            .fallback
            .clone()
            .or_else(|| self.tier(agent.tier).map(|t| t.fallback.clone()))
            .unwrap_or(Fallback::None);
        match fallback {
            Fallback::Agent(ref id) if *id == agent.id && agent.fallback.is_none() => Fallback::None,
            other => other,
        }
    }

    /// A stable fingerprint of the manifest's content, recorded with each query so a query
    /// finishes on the manifest version it started with.
    pub fn fingerprint(&self) -> String {
        // FNV-1a over the canonical JSON: stable across processes and builds. The JSON is
        // hashed as it is written, never held (every function computes this in its init).
        let mut hash = Fnv1a(0xcbf2_9ce4_8422_2325);
        if serde_json::to_writer(&mut hash, self).is_err() {
            hash = Fnv1a(0xcbf2_9ce4_8422_2325);
        }
        format!("{:016x}", hash.0)
    }
}

/// FNV-1a as an `io::Write`: the hash of everything written to it.
struct Fnv1a(u64);

impl std::io::Write for Fnv1a {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// serde_yaml appends " at line L column C" to its messages; the line is reported separately.
fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests;
