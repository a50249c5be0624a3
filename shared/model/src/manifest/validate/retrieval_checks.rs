//! Checks of `retriever` agents and of routes' `reflection` blocks.

use super::Check;
use crate::manifest::{Agent, AgentKind, ProviderKind, RetrieverRole};

/// Largest `top_k` and `candidates`: more chunks than any answer can use.
const MAX_CHUNKS: usize = 100;
/// Most retrieval settings in a fallback order.
const MAX_ATTEMPTS: usize = 5;
/// Most retrievers fused by one merge.
const MAX_MERGED: usize = 8;
/// Most candidates handed to the answering agent.
const MAX_MERGED_TOP_K: usize = 50;

impl Check<'_> {
    /// A retriever names exactly one of `corpus` and `index`, sane sizes, and a fallback order
    /// with thresholds in 0 – 1.
    pub(super) fn retriever(&mut self, i: usize, agent: &Agent) {
        let Some(r) = &agent.retriever else { return };
        let at = |f: &str| format!("agents[{i}].retriever.{f}");
        let sources =
            [r.corpus.is_some(), r.index.is_some(), r.knowledge_base.is_some()].iter().filter(|x| **x).count();
        if r.role != RetrieverRole::Search {
            if sources > 0 {
                self.report(
                    at("role"),
                    format!(
                        "a `{}` retriever works on the candidates a route's merge hands it; remove `corpus`/`index`/`knowledge_base`",
                        if r.role == RetrieverRole::Rerank { "rerank" } else { "answer" }
                    ),
                );
            }
        } else if sources > 1 {
            self.report(at("index"), "set one of `corpus`, `index` and `knowledge_base`, not several");
        } else if sources == 0 {
            self.report(
                format!("agents[{i}].retriever"),
                "set `corpus` (a folder of documents), `index` (a file from `switchyard index build`) or `knowledge_base`",
            );
        }
        if let Some(kb) = &r.knowledge_base {
            if kb.id.is_empty() || kb.id.len() > 10 || !kb.id.chars().all(|c| c.is_ascii_alphanumeric()) {
                self.report(
                    at("knowledge_base.id"),
                    format!("`{}` is not a knowledge base id (1 – 10 letters and digits)", kb.id),
                );
            }
            if r.embeddings.is_some() {
                self.report(at("embeddings"), "a knowledge base embeds on AWS; remove `embeddings`");
            }
        }
        for (name, value) in [("corpus", &r.corpus), ("index", &r.index)] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                self.report(at(name), "is empty; name a path");
            }
        }
        if let Some(e) = &r.embeddings {
            match self.m.providers.iter().find(|p| p.id == e.provider) {
                None => self.report(
                    at("embeddings.provider"),
                    format!("provider `{}` is not declared in `providers`", e.provider),
                ),
                Some(p) if p.kind == ProviderKind::Scripted => self.report(
                    at("embeddings.provider"),
                    format!("provider `{}` is `scripted`; embeddings need an `openai` or `bedrock` provider", p.id),
                ),
                Some(p) if p.model.is_none() && e.model.is_none() => {
                    self.report(at("embeddings.model"), "name the embedding model (here or on the provider)")
                }
                Some(_) => {}
            }
            if r.index.is_none() || r.role != RetrieverRole::Search {
                self.report(
                    at("embeddings"),
                    "model embeddings are stored in an `index` built with `switchyard index build --embeddings`; set `index`",
                );
            }
        }
        if let Some(p) = r.chunking.problem() {
            self.report(at("chunking"), p);
        }
        for (name, n) in [("top_k", r.top_k), ("candidates", r.candidates)] {
            if n == 0 || n > MAX_CHUNKS {
                self.report(at(name), format!("{n} is outside 1 – {MAX_CHUNKS}"));
            }
        }
        if r.answer_sentences == 0 || r.answer_sentences > 20 {
            self.report(at("answer_sentences"), format!("{} is outside 1 – 20", r.answer_sentences));
        }
        if !(r.rrf_k > 0.0 && r.rrf_k <= 1_000.0) {
            self.report(at("rrf_k"), format!("{} is outside (0, 1000]; 60 is the usual constant", r.rrf_k));
        }
        self.unit_interval(at("recency_boost"), "recency boost", r.recency_boost);
        if r.attempts.is_empty() || r.attempts.len() > MAX_ATTEMPTS {
            self.report(at("attempts"), format!("{} settings; give 1 – {MAX_ATTEMPTS}", r.attempts.len()));
        }
        for (j, a) in r.attempts.iter().enumerate() {
            self.unit_interval(at(&format!("attempts[{j}].min_score")), "min_score", a.min_score);
            if a.min_candidates == 0 || a.min_candidates > MAX_CHUNKS {
                self.report(
                    at(&format!("attempts[{j}].min_candidates")),
                    format!("{} is outside 1 – {MAX_CHUNKS}", a.min_candidates),
                );
            }
            if r.attempts[..j].iter().any(|b| b.name == a.name) {
                self.report(
                    at(&format!("attempts[{j}].name")),
                    format!("`{}` is used twice; names tell attempts apart in the event log", a.name),
                );
            }
        }
    }

    /// A route's `merge`: `rrf` with a sane `k`, declared retrievers (each once, not the primary,
    /// searching ones when they are `retriever` agents), a declared reranker, a primary to
    /// answer, `recency_boost` in 0 – 1, `top_k` 1 – 50, and no other body (`mode`, `pipeline`).
    pub(super) fn merges(&mut self) {
        for (i, intent) in self.m.intents.iter().enumerate() {
            let route = &intent.route;
            let Some(m) = &route.merge else { continue };
            let at = |f: &str| format!("intents[{i}].route.merge.{f}");
            if !(m.k > 0.0 && m.k <= 1_000.0) {
                self.report(at("k"), format!("{} is outside (0, 1000]; 60 is the usual constant", m.k));
            }
            if m.retrievers.is_empty() || m.retrievers.len() > MAX_MERGED {
                self.report(
                    at("retrievers"),
                    format!(
                        "{} retrievers; list 1 – {MAX_MERGED} agents whose ranked lists are fused",
                        m.retrievers.len()
                    ),
                );
            }
            for (j, id) in m.retrievers.iter().enumerate() {
                let path = at(&format!("retrievers[{j}]"));
                if m.retrievers[..j].contains(id) {
                    self.report(path, format!("`{id}` is listed twice; a list fused twice counts double"));
                } else if route.primary.as_deref() == Some(id.as_str()) {
                    self.report(path, format!("`{id}` is the primary agent, which answers from the merged list"));
                } else if self.known_agent(path.clone(), id) {
                    if let Some(role) = self.m.agent(id).and_then(|a| a.retriever.as_ref()).map(|r| r.role) {
                        if role != RetrieverRole::Search {
                            self.report(
                                path,
                                format!("`{id}` is a retriever with a non-search `role`; it has no index"),
                            );
                        }
                    }
                }
            }
            if let Some(r) = &m.reranker {
                if m.retrievers.contains(r) || route.primary.as_deref() == Some(r.as_str()) {
                    self.report(
                        at("reranker"),
                        format!("`{r}` already has another part in this route; name a separate agent"),
                    );
                } else {
                    self.known_agent(at("reranker"), r);
                }
            }
            if let Some(p) = route.primary.as_deref().and_then(|p| self.m.agent(p)) {
                if p.kind == AgentKind::Retriever
                    && p.retriever.as_ref().is_some_and(|r| r.role != RetrieverRole::Answer)
                {
                    self.report(
                        format!("intents[{i}].route.primary"),
                        format!(
                            "`{}` answers from the merged list; give it `role: answer` (or use an llm agent)",
                            p.id
                        ),
                    );
                }
            }
            if route.primary.is_none() {
                self.report(at("retrievers"), "a merge needs a `primary` agent to answer from the merged list");
            }
            if route.mode.is_some() || route.pipeline.is_some() {
                self.report(
                    format!("intents[{i}].route.merge"),
                    "a merge cannot be combined with `mode` or `pipeline`",
                );
            }
            if !route.supporting.is_empty() {
                self.report(
                    format!("intents[{i}].route.supporting"),
                    "a merge route's retrievers go in `merge.retrievers`",
                );
            }
            self.unit_interval(at("recency_boost"), "recency boost", m.recency_boost);
            if m.top_k == 0 || m.top_k > MAX_MERGED_TOP_K {
                self.report(at("top_k"), format!("{} is outside 1 – {MAX_MERGED_TOP_K}", m.top_k));
            }
            if m.recent_year_window > 50 {
                self.report(at("recent_year_window"), format!("{} is outside 0 – 50 years", m.recent_year_window));
            }
            if m.lazy && route.critic.is_none() {
                self.report(at("lazy"), "lazy hydration loads full chunks when the critic asks; add a `critic`");
            }
        }
    }

    /// Reflection weights lie in 0 – 1 and do not both vanish.
    pub(super) fn reflections(&mut self) {
        for (i, intent) in self.m.intents.iter().enumerate() {
            let Some(r) = &intent.route.reflection else { continue };
            let at = |f: &str| format!("intents[{i}].route.reflection.{f}");
            self.unit_interval(at("original_weight"), "weight", r.original_weight);
            self.unit_interval(at("revised_weight"), "weight", r.revised_weight);
            if r.original_weight + r.revised_weight <= 0.0 {
                self.report(at("original_weight"), "both weights are 0; RAG manager uses 0.7 and 0.3");
            }
        }
    }
}
