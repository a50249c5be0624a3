//! Checks of `retriever` agents and of routes' `reflection` blocks.

use super::Check;
use crate::manifest::Agent;

/// Largest `top_k` and `candidates`: more chunks than any answer can use.
const MAX_CHUNKS: usize = 100;
/// Most retrieval settings in a fallback order.
const MAX_ATTEMPTS: usize = 5;

impl Check<'_> {
    /// A retriever names exactly one of `corpus` and `index`, sane sizes, and a fallback order
    /// with thresholds in 0 – 1.
    pub(super) fn retriever(&mut self, i: usize, agent: &Agent) {
        let Some(r) = &agent.retriever else { return };
        let at = |f: &str| format!("agents[{i}].retriever.{f}");
        match (&r.corpus, &r.index) {
            (Some(_), Some(_)) => self.report(at("index"), "set `corpus` or `index`, not both"),
            (None, None) => self.report(
                format!("agents[{i}].retriever"),
                "set `corpus` (a folder of documents) or `index` (a file from `switchyard index build`)",
            ),
            _ => {}
        }
        for (name, value) in [("corpus", &r.corpus), ("index", &r.index)] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                self.report(at(name), "is empty; name a path");
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
