//! The `retriever` agent kind: searches its index and answers with the ranked chunks as
//! evidence (each cited by `chunk_id`), an extractive answer built from them, and the
//! retrieval's attempts and merge in `primary_output.retrieval` (the worker copies that into
//! the event log).
//!
//! Each retriever's index is built (from `corpus`) or loaded (from `index`) once, when the
//! runtime is built — at function init — so a missing or corrupt index is reported then, with
//! its path, through [`RetrieverAgents::problems`], never at the first query.

use super::embeddings::Embedder;
use super::knowledge_base;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use switchyard_core::retrieval::search::Candidate;
use switchyard_core::retrieval::search::{compose, confidence, query_texts, retrieve_with, Request};
use switchyard_core::retrieval::Index;
use switchyard_engine::http_client::HttpClient;
use switchyard_engine::ports::{AgentError, AgentReply};
use switchyard_model::contracts::AgentDispatch;
use switchyard_model::manifest::{Agent, Manifest, RetrieverRole, RetrieverSettings};

/// Longest question searched, in characters (intake already bounds queries; this bounds a
/// revised query coming from a model).
const MAX_QUERY_CHARS: usize = 2_000;
/// Longest candidate text a merge may hand over (a merged chunk is cut at 4 000).
const MAX_CANDIDATE_CHARS: usize = 8_000;
/// Most years a request may ask for.
const MAX_REQUESTED_YEARS: usize = 20;

/// The indexes (and embedding providers) of every `retriever` agent of a manifest.
#[derive(Debug, Clone, Default)]
pub struct RetrieverAgents {
    indexes: HashMap<String, Result<Arc<Index>, String>>,
    embedders: HashMap<String, Arc<Embedder>>,
    http: HttpClient,
    /// AWS configuration for knowledge bases, loaded from the environment on first use.
    aws: Arc<tokio::sync::OnceCell<aws_config::SdkConfig>>,
}

impl RetrieverAgents {
    /// Build or load each retriever's index.
    pub fn new(manifest: &Manifest) -> RetrieverAgents {
        RetrieverAgents::with_http(manifest, &HttpClient::new())
    }

    /// Build or load each retriever's index; embedding providers share `http`. A retriever
    /// whose provider cannot be built, or whose index holds no embeddings of the provider's
    /// model, is a problem at init.
    pub fn with_http(manifest: &Manifest, http: &HttpClient) -> RetrieverAgents {
        let mut agents = RetrieverAgents::indexes_only(manifest);
        agents.http = http.clone();
        for agent in &manifest.agents {
            let Some(e) = agent.retriever.as_ref().and_then(|s| s.embeddings.as_ref()) else { continue };
            let Some(Ok(index)) = agents.indexes.get(&agent.id) else { continue };
            let built = manifest
                .providers
                .iter()
                .find(|p| p.id == e.provider)
                .ok_or_else(|| format!("provider `{}` is not declared", e.provider))
                .and_then(|p| Embedder::from_provider(p, e.model.as_deref(), http));
            let checked = built.and_then(|embedder| match index.embedding_model() {
                None => Err("its index holds no embeddings; build it with `switchyard index build --embeddings`".to_string()),
                Some((provider, model, _)) if provider != embedder.provider() || model != embedder.model() => Err(format!(
                    "its index holds `{provider}` embeddings of `{model}`, but the retriever embeds queries with `{}` `{}`",
                    embedder.provider(),
                    embedder.model()
                )),
                Some(_) => Ok(embedder),
            });
            match checked {
                Ok(embedder) => {
                    agents.embedders.insert(agent.id.clone(), Arc::new(embedder));
                }
                Err(e) => {
                    agents.indexes.insert(agent.id.clone(), Err(e));
                }
            }
        }
        agents
    }

    /// Use `config` for knowledge bases instead of the environment's (tests: static
    /// credentials for a loopback endpoint).
    pub fn with_aws_config(mut self, config: aws_config::SdkConfig) -> RetrieverAgents {
        self.aws = Arc::new(tokio::sync::OnceCell::new_with(Some(config)));
        self
    }

    /// Replace retriever `id`'s embedding provider (tests: a client aimed at loopback).
    pub fn with_embedder(mut self, id: &str, embedder: Embedder) -> RetrieverAgents {
        self.embedders.insert(id.to_string(), Arc::new(embedder));
        self
    }

    fn indexes_only(manifest: &Manifest) -> RetrieverAgents {
        let mut indexes = HashMap::new();
        for agent in &manifest.agents {
            let Some(s) =
                agent.retriever.as_ref().filter(|s| s.role == RetrieverRole::Search && s.knowledge_base.is_none())
            else {
                continue;
            };
            let index = match (&s.corpus, &s.index) {
                (Some(dir), _) => Index::from_folder(&manifest.resolve(dir), s.chunking),
                (None, Some(file)) => Index::load(&manifest.resolve(file)),
                (None, None) => {
                    indexes.insert(agent.id.clone(), Err("no `corpus` or `index` is set".to_string()));
                    continue;
                }
            };
            indexes.insert(agent.id.clone(), index.map(Arc::new).map_err(|e| e.to_string()));
        }
        RetrieverAgents { indexes, embedders: HashMap::new(), http: HttpClient::new(), aws: Default::default() }
    }

    /// One line per retriever whose index could not be built or loaded.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .indexes
            .iter()
            .filter_map(|(id, r)| r.as_ref().err().map(|e| format!("retriever `{id}`: {e}")))
            .collect();
        out.sort();
        out
    }

    /// The index of retriever `id`, once built.
    pub fn index(&self, id: &str) -> Option<&Arc<Index>> {
        self.indexes.get(id).and_then(|r| r.as_ref().ok())
    }

    /// Search and answer.
    pub async fn run(
        &self,
        agent: &Agent,
        s: &RetrieverSettings,
        dispatch: &AgentDispatch,
    ) -> Result<AgentReply, AgentError> {
        match s.role {
            RetrieverRole::Search => {}
            RetrieverRole::Rerank => return given::rerank(dispatch),
            RetrieverRole::Answer => return given::answer(agent, s, dispatch),
        }
        if let Some(kb) = &s.knowledge_base {
            return self.run_knowledge_base(agent, s, kb, dispatch).await;
        }
        let index = match self.indexes.get(&agent.id) {
            Some(Ok(index)) => index,
            Some(Err(e)) => return Err(AgentError { message: e.clone(), recoverable: false }),
            None => {
                return Err(AgentError {
                    message: format!("retriever `{}` has no index in this runtime", agent.id),
                    recoverable: false,
                })
            }
        };
        let req = request(&dispatch.payload.context).map_err(|message| AgentError { message, recoverable: false })?;
        let embedded = match self.embedders.get(&agent.id) {
            None => Vec::new(),
            Some(embedder) => embedder.embed(&query_texts(&req)).await.map_err(|e| AgentError {
                message: format!("embedding the query with `{}`: {e}", embedder.model()),
                recoverable: e.is_retryable(),
            })?,
        };
        if let (Some(v), Some((_, model, dims))) = (embedded.first(), index.embedding_model()) {
            if v.len() != dims {
                return Err(AgentError {
                    message: format!(
                        "embedding the query with `{model}`: the query embedding has {} dimensions and the index's \
                         embeddings {dims}: its dimensions differ",
                        v.len()
                    ),
                    recoverable: false,
                });
            }
        }
        let found = retrieve_with(index, &req, s, &embedded);
        let conf = confidence(&found);
        let answer = compose(&req, &found.candidates, s.answer_sentences);
        let (status, response) = match answer {
            Some(text) => ("success", text),
            None => (
                "partial",
                if req.requested_years.is_empty() {
                    "The documents hold nothing that answers this question.".to_string()
                } else {
                    format!(
                        "The documents of {} hold nothing that answers this question.",
                        years_text(&req.requested_years)
                    )
                },
            ),
        };
        let evidence = evidence(agent, &found.candidates);
        let candidates: Vec<Value> = found
            .candidates
            .iter()
            .map(|c| {
                json!({
                    "chunk_id": c.chunk_id, "score": c.score, "source": c.source, "date": c.date,
                    "title": c.title, "rrf": c.rrf, "match_score": c.match_score, "recency": c.recency,
                    "text": c.text,
                })
            })
            .collect();
        let caveats: Vec<String> = found
            .attempts
            .iter()
            .filter(|a| !a.accepted)
            .map(|a| format!("retrieval setting `{}`: {}", a.setting, a.reason))
            .collect();
        Ok(AgentReply::Answer(json!({
            "status": status,
            "primary_output": {
                "response": response,
                "candidates": candidates,
                "retrieval": {
                    "year_mode": found.year_mode,
                    "requested_years": found.requested_years,
                    "recent_year_window": found.recent_year_window,
                    "attempts": found.attempts,
                    "merge": found.merge,
                },
            },
            "confidence": conf,
            "evidence": evidence,
            "caveats": caveats,
            "model_used": "retriever",
        })))
    }
}

/// The handoff's `evidence`: each candidate cited by its chunk id, with its score.
fn evidence(agent: &Agent, candidates: &[Candidate]) -> Vec<Value> {
    candidates
        .iter()
        .map(|c| {
            json!({
                "source_type": agent.citation_source,
                "source_id": c.chunk_id,
                "text": c.text,
                "relevance": (c.score * 1000.0).round() / 1000.0,
            })
        })
        .collect()
}

/// The `rerank` and `answer` roles: work on the `candidates` a route's merge put in the
/// dispatch, without an index.
mod given {
    use super::*;
    use switchyard_core::retrieval::merge::{term_coverage, MAX_LIST};
    use switchyard_core::retrieval::search::Candidate;
    use switchyard_core::retrieval::terms::trigram_overlap;

    /// The dispatch's candidates, each with a `chunk_id` and a `text` or `summary`.
    fn candidates(dispatch: &AgentDispatch) -> Result<Vec<Candidate>, AgentError> {
        candidates_in(&dispatch.payload.context).map_err(|message| AgentError { message, recoverable: false })
    }

    /// The `candidates` of a dispatch context.
    pub(super) fn candidates_in(context: &Value) -> Result<Vec<Candidate>, String> {
        let items = match context.get("candidates") {
            Some(Value::Array(items)) => items,
            None | Some(Value::Null) => {
                return Err("the dispatch has no `candidates` (a route's merge hands them over)".into())
            }
            Some(other) => return Err(format!("`candidates` must be a list, got {}", kind(other))),
        };
        if items.len() > MAX_LIST {
            return Err(format!("`candidates` lists {} chunks; at most {MAX_LIST}", items.len()));
        }
        let mut out = Vec::with_capacity(items.len());
        for (n, item) in items.iter().enumerate() {
            let field = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
            let Some(chunk_id) = field("chunk_id").filter(|c| !c.trim().is_empty()) else {
                return Err(format!("`candidates[{n}].chunk_id` is missing or empty"));
            };
            let Some(text) = field("text").or_else(|| field("summary")) else {
                return Err(format!("`candidates[{n}]` has neither `text` nor `summary`"));
            };
            if text.chars().count() > MAX_CANDIDATE_CHARS {
                return Err(format!("`candidates[{n}].text` is longer than {MAX_CANDIDATE_CHARS} characters"));
            }
            out.push(Candidate {
                chunk_id,
                doc_id: String::new(),
                title: field("title").unwrap_or_default(),
                source: field("source").unwrap_or_default(),
                date: field("date"),
                text,
                score: item.get("score").and_then(Value::as_f64).unwrap_or(0.0),
                rrf: 0.0,
                match_score: 0.0,
                recency: 0.0,
            });
        }
        Ok(out)
    }

    fn queries(req: &Request) -> Vec<&str> {
        std::iter::once(req.question.as_str()).chain(req.revised_query.as_deref()).collect()
    }

    /// Score each candidate: the better of the share of the question's (or revised query's)
    /// terms it holds and its spelling-tolerant trigram overlap with the question (so a
    /// misspelled question still ranks the chunks that match it).
    pub(super) fn rerank(dispatch: &AgentDispatch) -> Result<AgentReply, AgentError> {
        let req = request(&dispatch.payload.context).map_err(|message| AgentError { message, recoverable: false })?;
        let given = candidates(dispatch)?;
        let q = queries(&req);
        let scores: Vec<Value> = given
            .iter()
            .map(|c| {
                let score = term_coverage(&q, &c.text).max(trigram_overlap(&req.question, &c.text));
                json!({ "chunk_id": c.chunk_id, "score": (score * 1000.0).round() / 1000.0 })
            })
            .collect();
        Ok(AgentReply::Answer(json!({
            "status": "success",
            "primary_output": { "scores": scores, "method": "term coverage and trigram overlap with the question" },
            "confidence": if given.is_empty() { 0.0 } else { 0.9 },
            "model_used": "retriever:rerank",
        })))
    }

    /// Answer extractively from the candidates, citing each one used by its `chunk_id`.
    pub(super) fn answer(
        agent: &Agent,
        s: &RetrieverSettings,
        dispatch: &AgentDispatch,
    ) -> Result<AgentReply, AgentError> {
        let req = request(&dispatch.payload.context).map_err(|message| AgentError { message, recoverable: false })?;
        let given = candidates(dispatch)?;
        let hydrated = dispatch.payload.context.get("hydrated").and_then(Value::as_bool).unwrap_or(true);
        let q = queries(&req);
        let coverage: Vec<f64> = given.iter().take(3).map(|c| term_coverage(&q, &c.text)).collect();
        let text = compose(&req, &given, s.answer_sentences);
        let (status, response, confidence) = match text {
            Some(t) => {
                let mean = coverage.iter().sum::<f64>() / coverage.len().max(1) as f64;
                ("success", t, ((0.35 + 0.6 * mean) * if hydrated { 1.0 } else { 0.9 }).clamp(0.0, 0.95))
            }
            None => ("partial", "The retrieved documents hold nothing that answers this question.".to_string(), 0.2),
        };
        let evidence = evidence(agent, &given);
        Ok(AgentReply::Answer(json!({
            "status": status,
            "primary_output": {
                "response": response,
                "candidates_used": given.len(),
                "hydrated": hydrated,
            },
            "confidence": (confidence * 1000.0).round() / 1000.0,
            "evidence": evidence,
            "model_used": "retriever:answer",
        })))
    }
}

impl RetrieverAgents {
    /// Search a Bedrock knowledge base with `Retrieve` (the question, and the revised query
    /// when there is one, fused with RRF), filter by the requested years, answer extractively.
    async fn run_knowledge_base(
        &self,
        agent: &Agent,
        s: &RetrieverSettings,
        kb: &switchyard_model::manifest::KnowledgeBaseSettings,
        dispatch: &AgentDispatch,
    ) -> Result<AgentReply, AgentError> {
        let req = request(&dispatch.payload.context).map_err(|message| AgentError { message, recoverable: false })?;
        let timeout = std::time::Duration::from_millis(dispatch.routing.timeout_ms.clamp(1_000, 60_000));
        let mut lists = Vec::new();
        let mut found: Vec<knowledge_base::KbResult> = Vec::new();
        let mut reports = Vec::new();
        for (name, text) in ["question", "revised_query"].into_iter().zip(query_texts(&req)) {
            let aws = self.aws.get_or_init(|| aws_config::defaults(aws_config::BehaviorVersion::latest()).load()).await;
            let results = knowledge_base::retrieve(&self.http, aws, kb, &text, s.candidates, timeout)
                .await
                .map_err(|e| AgentError { message: e.message, recoverable: e.retryable })?;
            reports.push(json!({ "list": format!("knowledge_base:{name}"), "hits": results.len() }));
            lists.push(results.iter().map(|r| r.chunk_id.clone()).collect::<Vec<_>>());
            for r in results {
                if !found.iter().any(|f| f.chunk_id == r.chunk_id) {
                    found.push(r);
                }
            }
        }
        let listed: usize = lists.iter().map(Vec::len).sum();
        let fused = switchyard_core::retrieval::rrf::fuse(&lists, s.rrf_k);
        let years = &req.requested_years;
        let year_of = |r: &knowledge_base::KbResult| {
            r.date.as_deref().and_then(|d| d.get(..4)).and_then(|y| y.parse::<i32>().ok())
        };
        let mut candidates: Vec<Candidate> = fused
            .iter()
            .filter_map(|(id, rrf)| found.iter().find(|r| &r.chunk_id == id).map(|r| (r, *rrf)))
            .filter(|(r, _)| years.is_empty() || year_of(r).is_some_and(|y| years.contains(&y)))
            .map(|(r, rrf)| Candidate {
                chunk_id: r.chunk_id.clone(),
                doc_id: r.source.clone(),
                title: r.title.clone(),
                source: r.source.clone(),
                date: r.date.clone(),
                text: r.text.clone(),
                score: r.score,
                rrf,
                match_score: r.score,
                recency: 0.0,
            })
            .collect();
        let passed = candidates.len();
        candidates.truncate(s.top_k.max(1));
        let top: Vec<f64> = candidates.iter().take(3).map(|c| c.score.clamp(0.0, 1.0)).collect();
        let conf =
            if top.is_empty() { 0.0 } else { (0.35 + 0.6 * top.iter().sum::<f64>() / top.len() as f64).min(0.95) };
        let reason = if passed == 0 {
            "the knowledge base returned nothing for the requested years".to_string()
        } else {
            format!("{passed} of {} results kept", fused.len())
        };
        let (status, response) = match compose(&req, &candidates, s.answer_sentences) {
            Some(text) => ("success", text),
            None => ("partial", "The knowledge base holds nothing that answers this question.".to_string()),
        };
        let evidence: Vec<Value> = candidates
            .iter()
            .map(|c| json!({ "source_type": agent.citation_source, "source_id": c.chunk_id, "text": c.text, "relevance": (c.score * 1000.0).round() / 1000.0 }))
            .collect();
        let listed_candidates: Vec<Value> = candidates
            .iter()
            .map(|c| json!({ "chunk_id": c.chunk_id, "score": c.score, "source": c.source, "date": c.date, "title": c.title, "rrf": c.rrf, "text": c.text }))
            .collect();
        Ok(AgentReply::Answer(json!({
            "status": status,
            "primary_output": {
                "response": response,
                "candidates": listed_candidates,
                "retrieval": {
                    "year_mode": if years.is_empty() { "none" } else { "explicit" },
                    "requested_years": years,
                    "attempts": [{
                        "setting": "knowledge_base",
                        "mode": kb.search_type.map(|t| t.as_str()).unwrap_or("default"),
                        "lists": reports,
                        "listed": listed,
                        "fused": fused.len(),
                        "passed": passed,
                        "accepted": passed > 0,
                        "reason": reason,
                    }],
                    "merge": { "strategy": "rrf", "k": s.rrf_k, "listed": listed, "deduped": fused.len() },
                },
            },
            "confidence": (conf * 1000.0).round() / 1000.0,
            "evidence": evidence,
            "model_used": "bedrock-knowledge-base",
        })))
    }
}

fn years_text(years: &[i32]) -> String {
    years.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
}

/// The request in a dispatch's context: `question`, `revised_query`, and the RAG manager design's
/// `requested_years` / `recent_year_window` (top level or under `preferences`).
pub fn request(context: &Value) -> Result<Request, String> {
    let question = context.get("question").and_then(Value::as_str).unwrap_or("").trim().to_string();
    if question.is_empty() {
        return Err("the dispatch has no `question` to search for".into());
    }
    let revised = match context.get("revised_query") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(other) => return Err(format!("`revised_query` must be text, got {}", kind(other))),
    };
    for (name, text) in [("question", Some(&question)), ("revised_query", revised.as_ref())] {
        if let Some(t) = text {
            if t.chars().count() > MAX_QUERY_CHARS {
                return Err(format!("`{name}` is longer than {MAX_QUERY_CHARS} characters"));
            }
        }
    }
    let pref = |key: &str| {
        context.get("preferences").and_then(|p| p.get(key)).or_else(|| context.get(key)).filter(|v| !v.is_null())
    };
    let requested_years = match pref("requested_years") {
        None => vec![],
        Some(Value::Array(items)) => {
            if items.len() > MAX_REQUESTED_YEARS {
                return Err(format!("`requested_years` lists {} years; at most {MAX_REQUESTED_YEARS}", items.len()));
            }
            let mut years = Vec::with_capacity(items.len());
            for item in items {
                let year = match item {
                    Value::Number(n) => n.as_i64(),
                    Value::String(s) => s.trim().parse::<i64>().ok(),
                    _ => None,
                };
                match year.filter(|y| (1900..=2200).contains(y)) {
                    Some(y) => years.push(y as i32),
                    None => return Err(format!("`requested_years` must hold years 1900 – 2200, got {item}")),
                }
            }
            years.sort();
            years.dedup();
            years
        }
        Some(other) => return Err(format!("`requested_years` must be a list of years, got {}", kind(other))),
    };
    let recent_year_window = match pref("recent_year_window") {
        None => None,
        Some(v) => match v.as_u64().filter(|n| *n <= 50) {
            Some(n) => Some(n as u32),
            None => return Err(format!("`recent_year_window` must be a whole number of years 0 – 50, got {v}")),
        },
    };
    Ok(Request { question, revised_query: revised, requested_years, recent_year_window })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_candidates_that_are_missing_malformed_or_oversized_are_refused_with_the_field_named() {
        let ok = given::candidates_in(&json!({"candidates": [{"chunk_id": "a#c1", "summary": "S.", "date": "2024"}]}))
            .expect("ok");
        assert_eq!((ok[0].chunk_id.as_str(), ok[0].text.as_str()), ("a#c1", "S."));
        let huge = "x".repeat(MAX_CANDIDATE_CHARS + 1);
        let many: Vec<Value> = (0..101).map(|n| json!({"chunk_id": format!("c{n}"), "text": "t"})).collect();
        for (ctx, message) in [
            (json!({}), "the dispatch has no `candidates` (a route's merge hands them over)".to_string()),
            (json!({"candidates": "a#c1"}), "`candidates` must be a list, got text".to_string()),
            (json!({"candidates": [{"text": "t"}]}), "`candidates[0].chunk_id` is missing or empty".to_string()),
            (
                json!({"candidates": [{"chunk_id": " ", "text": "t"}]}),
                "`candidates[0].chunk_id` is missing or empty".to_string(),
            ),
            (json!({"candidates": [7]}), "`candidates[0].chunk_id` is missing or empty".to_string()),
            (
                json!({"candidates": [{"chunk_id": "a"}]}),
                "`candidates[0]` has neither `text` nor `summary`".to_string(),
            ),
            (
                json!({"candidates": [{"chunk_id": "a", "text": huge}]}),
                format!("`candidates[0].text` is longer than {MAX_CANDIDATE_CHARS} characters"),
            ),
            (json!({ "candidates": many }), "`candidates` lists 101 chunks; at most 100".to_string()),
        ] {
            assert_eq!(given::candidates_in(&ctx).expect_err("bad"), message, "{ctx}");
        }
    }

    #[test]
    fn years_come_from_preferences_or_the_top_level_and_bad_ones_name_the_field() {
        let r =
            request(&json!({"question": "q", "preferences": {"requested_years": [2024, "2023", 2024]}})).expect("ok");
        assert_eq!(r.requested_years, [2023, 2024]);
        let r = request(&json!({"question": "q", "requested_years": [], "recent_year_window": 2})).expect("ok");
        assert!(r.requested_years.is_empty());
        assert_eq!(r.recent_year_window, Some(2));
        for (ctx, message) in [
            (
                json!({"question": "q", "requested_years": "2024"}),
                "`requested_years` must be a list of years, got text",
            ),
            (
                json!({"question": "q", "requested_years": [1066]}),
                "`requested_years` must hold years 1900 – 2200, got 1066",
            ),
            (
                json!({"question": "q", "requested_years": [true]}),
                "`requested_years` must hold years 1900 – 2200, got true",
            ),
            (
                json!({"question": "q", "recent_year_window": -1}),
                "`recent_year_window` must be a whole number of years 0 – 50, got -1",
            ),
            (json!({"question": "q", "revised_query": 7}), "`revised_query` must be text, got a number"),
            (json!({"question": "  "}), "the dispatch has no `question` to search for"),
            (json!({}), "the dispatch has no `question` to search for"),
        ] {
            assert_eq!(request(&ctx).expect_err("bad"), message, "{ctx}");
        }
        let many: Vec<i32> = (2000..2030).collect();
        let e = request(&json!({"question": "q", "requested_years": many})).expect_err("too many");
        assert!(e.contains("at most 20"), "{e}");
        let long = "x".repeat(MAX_QUERY_CHARS + 1);
        let e = request(&json!({"question": long})).expect_err("too long");
        assert_eq!(e, format!("`question` is longer than {MAX_QUERY_CHARS} characters"));
    }
}
