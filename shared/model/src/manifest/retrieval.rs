//! Settings of the `retriever` agent kind and of a route's `reflection` step (seeds 001 and
//! 003). What they do is described in `docs/retrieval.md`.

use serde::{Deserialize, Serialize};

/// A `retriever` agent: searches an embedded index and answers with ranked chunks as evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrieverSettings {
    /// Folder of documents, indexed when the process starts (relative paths are relative to
    /// the manifest's folder). One of `corpus` and `index`.
    #[serde(default)]
    pub corpus: Option<String>,
    /// Index file written by `switchyard index build`, loaded when the process starts.
    #[serde(default)]
    pub index: Option<String>,
    /// How `corpus` documents are cut into chunks.
    #[serde(default)]
    pub chunking: Chunking,
    /// Chunks in the answer's evidence.
    #[serde(default = "default_top_k")]
    pub top_k: usize,
    /// Chunks taken from each ranked list before fusion.
    #[serde(default = "default_candidates")]
    pub candidates: usize,
    /// RRF constant `k`.
    #[serde(default = "default_rrf_k")]
    pub rrf_k: f64,
    /// Weight of the recency boost in the rerank (0 – 1).
    #[serde(default = "default_recency_boost")]
    pub recency_boost: f64,
    /// Years over which the recency boost fades to nothing (the RAG manager design's `recent_year_window`);
    /// a request's `recent_year_window` overrides it.
    #[serde(default = "default_recent_year_window")]
    pub recent_year_window: u32,
    /// Retrieval settings tried in order until one finds enough candidates (the unified-chat design's
    /// fallback ordering).
    #[serde(default = "default_attempts")]
    pub attempts: Vec<RetrievalAttempt>,
    /// Sentences in the extractive answer.
    #[serde(default = "default_answer_sentences")]
    pub answer_sentences: usize,
    /// What the agent does: `search` its index (the default), or work on the `candidates` a
    /// route's merge hands it — `rerank` them (scores by term coverage) or `answer` from them.
    /// A `rerank` or `answer` retriever has no `corpus` or `index`.
    #[serde(default)]
    pub role: RetrieverRole,
    /// Dense list from model embeddings: the provider that embeds the query, matching the
    /// vectors stored in `index` by `switchyard index build --embeddings`.
    #[serde(default)]
    pub embeddings: Option<EmbeddingSettings>,
    /// Search an Amazon Bedrock knowledge base with `Retrieve` instead of an own index (one of
    /// `corpus`, `index`, `knowledge_base`).
    #[serde(default)]
    pub knowledge_base: Option<KnowledgeBaseSettings>,
}

/// An Amazon Bedrock knowledge base searched with `Retrieve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeBaseSettings {
    /// The knowledge base id (1 – 10 letters and digits).
    pub id: String,
    /// AWS region (default: the environment's).
    #[serde(default)]
    pub region: Option<String>,
    /// Endpoint override (default: `AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME`, `AWS_ENDPOINT_URL`,
    /// or the regional endpoint).
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// `hybrid` or `semantic` (default: the knowledge base's choice).
    #[serde(default)]
    pub search_type: Option<KbSearchType>,
}

/// `overrideSearchType` of `Retrieve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KbSearchType {
    /// Vector and keyword search.
    Hybrid,
    /// Vector search only.
    Semantic,
}

impl KbSearchType {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            KbSearchType::Hybrid => "HYBRID",
            KbSearchType::Semantic => "SEMANTIC",
        }
    }
}

/// Which embedding provider a retriever's dense list uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingSettings {
    /// A declared `openai` (`/embeddings`) or `bedrock` (Titan `InvokeModel`) provider.
    pub provider: String,
    /// The embedding model (default: the provider's `model`); must be the index's.
    #[serde(default)]
    pub model: Option<String>,
}

/// What a `retriever` agent does with a dispatch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetrieverRole {
    /// Search the agent's own index.
    #[default]
    Search,
    /// Score the dispatch's `candidates` (a route's reranker).
    Rerank,
    /// Answer extractively from the dispatch's `candidates` (a route's answering agent).
    Answer,
}

/// The only merge strategy: reciprocal rank fusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeStrategy {
    /// Reciprocal rank fusion.
    Rrf,
}

/// A route's `merge`: several retriever agents run in parallel, their ranked lists are fused
/// at fan-in with RRF (each `chunk_id` once), optionally reranked by a reranker agent and a
/// recency boost, and the best `top_k` are handed to the route's `primary` agent, which
/// answers from them and whose citations point to them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeSettings {
    /// `rrf`.
    pub strategy: MergeStrategy,
    /// RRF constant `k` (default 60).
    #[serde(default = "default_rrf_k")]
    pub k: f64,
    /// The retriever agents whose lists are fused (at least one; usually two, such as sparse
    /// and dense).
    pub retrievers: Vec<String>,
    /// An agent that scores the merged candidates (answers `scores`).
    #[serde(default)]
    pub reranker: Option<String>,
    /// Weight of the recency boost in the rerank (0 – 1; default 0).
    #[serde(default)]
    pub recency_boost: f64,
    /// Years over which the recency boost fades to nothing.
    #[serde(default = "default_recent_year_window")]
    pub recent_year_window: u32,
    /// Candidates handed to the answering agent.
    #[serde(default = "default_merge_top_k")]
    pub top_k: usize,
    /// Lazy hydration: the answering agent first gets summary-only references; when the
    /// route's critic rejects the answer, the revision gets the full chunks.
    #[serde(default)]
    pub lazy: bool,
}

fn default_merge_top_k() -> usize {
    6
}

fn default_top_k() -> usize {
    5
}
fn default_candidates() -> usize {
    20
}
fn default_rrf_k() -> f64 {
    DEFAULT_RRF_K
}
fn default_recency_boost() -> f64 {
    0.1
}
fn default_recent_year_window() -> u32 {
    3
}
fn default_answer_sentences() -> usize {
    3
}

/// The unified-chat design's order: hybrid with a high threshold, hybrid with a lower one, vector only.
pub fn default_attempts() -> Vec<RetrievalAttempt> {
    vec![
        RetrievalAttempt {
            name: "hybrid_strict".into(),
            mode: RetrievalMode::Hybrid,
            min_score: 0.75,
            min_candidates: 2,
        },
        RetrievalAttempt {
            name: "hybrid_relaxed".into(),
            mode: RetrievalMode::Hybrid,
            min_score: 0.4,
            min_candidates: 1,
        },
        RetrievalAttempt { name: "vector_only".into(), mode: RetrievalMode::Dense, min_score: 0.12, min_candidates: 1 },
    ]
}

/// Which ranked lists an attempt fuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetrievalMode {
    /// BM25 and vector lists, fused with RRF.
    Hybrid,
    /// BM25 lists only.
    Sparse,
    /// Vector lists only.
    Dense,
}

impl RetrievalMode {
    /// The name written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            RetrievalMode::Hybrid => "hybrid",
            RetrievalMode::Sparse => "sparse",
            RetrievalMode::Dense => "dense",
        }
    }
}

/// One retrieval setting of the fallback order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalAttempt {
    /// Name shown in the event log.
    pub name: String,
    /// Lists fused.
    pub mode: RetrievalMode,
    /// Threshold a candidate must reach (0 – 1): for `hybrid`/`sparse` the share of the query's
    /// terms the chunk contains, for `dense` the cosine similarity.
    pub min_score: f64,
    /// Candidates that must pass for the attempt to be accepted.
    #[serde(default = "one")]
    pub min_candidates: usize,
}

fn one() -> usize {
    1
}

/// The RAG manager design's reflection after synthesis: the answer is scored against the original question
/// and the planner's revised query, and the output gets `applicability_note` and
/// `uncertainty_note`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReflectionSettings {
    /// Weight of the original question (RAG manager: 0.70).
    #[serde(default = "default_original_weight")]
    pub original_weight: f64,
    /// Weight of the revised query (RAG manager: 0.30).
    #[serde(default = "default_revised_weight")]
    pub revised_weight: f64,
}

impl Default for ReflectionSettings {
    fn default() -> Self {
        ReflectionSettings { original_weight: default_original_weight(), revised_weight: default_revised_weight() }
    }
}

fn default_original_weight() -> f64 {
    0.7
}
fn default_revised_weight() -> f64 {
    0.3
}

/// Reciprocal rank fusion's `k` when a route leaves `rrf_k` unset (the RRF paper's 60).
pub const DEFAULT_RRF_K: f64 = 60.0;

/// How documents are cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chunking {
    /// Most words in a chunk.
    pub max_words: usize,
    /// Words of the previous chunk repeated at the start of the next, so a fact cut at a
    /// boundary is whole in one of them.
    pub overlap_words: usize,
}

impl Default for Chunking {
    fn default() -> Self {
        Chunking { max_words: 80, overlap_words: 20 }
    }
}

impl Chunking {
    /// The problem with these settings, if any.
    pub fn problem(&self) -> Option<String> {
        if self.max_words < 10 || self.max_words > 2_000 {
            Some(format!("chunk max_words must be 10 to 2000, got {}", self.max_words))
        } else if self.overlap_words >= self.max_words / 2 {
            Some(format!(
                "chunk overlap_words must be under half of max_words ({}), got {}",
                self.max_words / 2,
                self.overlap_words
            ))
        } else {
            None
        }
    }
}
