//! Merging at a route's fan-in (`merge: rrf`): the ranked candidate lists of several
//! retriever agents → one list, fused with reciprocal rank fusion (each `chunk_id` once),
//! optionally reranked with a reranker agent's scores, blended with a normalized recency
//! boost, cut to `top_k`. This list is what the answering agent receives (in full, or as
//! summary-only references when the route hydrates lazily) and what the answer cites.
//!
//! Everything here is a pure function of the retrievers' handoffs, so the plan can recompute
//! the merged list at any later step (the rerank, a lazy hydration) instead of storing it.

use super::rrf;
use super::terms::{distinct_terms, sentences};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Most candidates read from one retriever's handoff.
pub const MAX_LIST: usize = 100;
/// Longest chunk text carried into a merged candidate, in characters.
pub const MAX_TEXT_CHARS: usize = 4_000;
/// Longest summary of a summary-only reference, in characters.
pub const SUMMARY_CHARS: usize = 200;

/// One entry of a retriever's ranked list, as its handoff reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// What citations point to.
    pub chunk_id: String,
    /// The chunk's text.
    pub text: String,
    /// The document's title.
    pub title: String,
    /// Where the document came from.
    pub source: String,
    /// The document's date (`YYYY` or `YYYY-MM-DD`).
    pub date: Option<String>,
}

impl Ranked {
    /// The year of the document's date.
    pub fn year(&self) -> Option<i32> {
        self.date.as_deref().and_then(|d| d.get(..4)).and_then(|y| y.parse().ok())
    }
}

/// A candidate of the merged list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Merged {
    /// The chunk.
    #[serde(flatten)]
    pub chunk: Ranked,
    /// RRF score over the retrievers' lists.
    pub rrf: f64,
    /// `retriever:rank` for every list that had the chunk (rank from 1).
    pub found_by: Vec<String>,
    /// The reranker's score, normalized to 0 – 1 (when a reranker answered).
    pub rerank: Option<f64>,
    /// Recency (0 – 1): 1 for the newest year among the candidates, fading over the window.
    pub recency: f64,
    /// Final score (0 – 1): `(1 − recency_boost) · relevance + recency_boost · recency`, where
    /// relevance is the normalized rerank score, or the RRF score divided by the best one.
    pub score: f64,
}

/// One retriever's contribution, for the event log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contribution {
    /// The retriever agent.
    pub retriever: String,
    /// Entries it listed.
    pub listed: usize,
    /// Entries of its handoff that were not usable candidates (no `chunk_id`).
    pub skipped: usize,
}

/// What the merge did, for the event log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MergeReport {
    /// Always `rrf`.
    pub strategy: &'static str,
    /// RRF constant.
    pub k: f64,
    /// The lists fused, in the route's order of retrievers.
    pub lists: Vec<Contribution>,
    /// Entries before the dedupe.
    pub listed: usize,
    /// Distinct chunks after it.
    pub deduped: usize,
}

/// Read the ranked list of a retriever's `primary_output` (its `candidates`, best first).
/// Returns the list and how many entries were skipped for lacking a `chunk_id`.
pub fn ranked_list(output: &Value) -> (Vec<Ranked>, usize) {
    let Some(items) = output.get("candidates").and_then(Value::as_array) else { return (Vec::new(), 0) };
    let mut out = Vec::new();
    let mut skipped = 0;
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    for item in items.iter().take(MAX_LIST) {
        let id = text(item, "chunk_id");
        if id.trim().is_empty() || id.len() > 512 {
            skipped += 1;
            continue;
        }
        out.push(Ranked {
            chunk_id: id,
            text: text(item, "text").chars().take(MAX_TEXT_CHARS).collect(),
            title: text(item, "title"),
            source: text(item, "source"),
            date: item.get("date").and_then(Value::as_str).map(str::to_string),
        });
    }
    (out, skipped + items.len().saturating_sub(MAX_LIST))
}

/// Fuse the retrievers' lists (`(retriever, list, skipped)`, in the route's order) with RRF
/// constant `k`. Each chunk keeps the text of the first list that had it.
pub fn fuse_lists(lists: &[(String, Vec<Ranked>, usize)], k: f64) -> (Vec<Merged>, MergeReport) {
    let ids: Vec<Vec<&str>> = lists.iter().map(|(_, l, _)| l.iter().map(|r| r.chunk_id.as_str()).collect()).collect();
    let fused = rrf::fuse(&ids, k);
    let mut merged = Vec::with_capacity(fused.len());
    for (id, score) in &fused {
        let mut chunk = None;
        let mut found_by = Vec::new();
        for (retriever, list, _) in lists {
            if let Some(pos) = list.iter().position(|r| &r.chunk_id == id) {
                found_by.push(format!("{retriever}:{}", pos + 1));
                if chunk.is_none() {
                    chunk = Some(list[pos].clone());
                }
            }
        }
        if let Some(chunk) = chunk {
            merged.push(Merged { chunk, rrf: *score, found_by, rerank: None, recency: 0.0, score: 0.0 });
        }
    }
    let report = MergeReport {
        strategy: "rrf",
        k,
        lists: lists
            .iter()
            .map(|(r, l, skipped)| Contribution { retriever: r.clone(), listed: l.len(), skipped: *skipped })
            .collect(),
        listed: lists.iter().map(|(_, l, _)| l.len()).sum(),
        deduped: merged.len(),
    };
    (merged, report)
}

/// A reranker's scores by `chunk_id`, from its `primary_output`: `scores` as a map
/// `{chunk_id: score}` or a list of `{chunk_id, score}`. Non-finite scores are dropped.
pub fn reranker_scores(output: &Value) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    match output.get("scores") {
        Some(Value::Object(map)) => {
            for (id, s) in map {
                if let Some(s) = s.as_f64().filter(|s| s.is_finite()) {
                    out.insert(id.clone(), s);
                }
            }
        }
        Some(Value::Array(items)) => {
            for item in items {
                let id = item.get("chunk_id").and_then(Value::as_str);
                let s = item.get("score").and_then(Value::as_f64).filter(|s| s.is_finite());
                if let (Some(id), Some(s)) = (id, s) {
                    out.insert(id.to_string(), s);
                }
            }
        }
        _ => {}
    }
    out
}

/// Rerank the merged list and keep the best `top_k`.
///
/// Relevance is the reranker's score min–max normalized over the candidates it scored (a
/// candidate it did not score counts 0), or, with no reranker scores, the RRF score divided
/// by the best one. Recency is 1 for the newest year among the candidates, fading linearly to
/// 0 over `window` years (undated: 0). `score = (1 − boost) · relevance + boost · recency`.
pub fn rerank(
    mut merged: Vec<Merged>,
    scores: &HashMap<String, f64>,
    boost: f64,
    window: u32,
    top_k: usize,
) -> Vec<Merged> {
    let boost = boost.clamp(0.0, 1.0);
    let scored: Vec<f64> = merged.iter().filter_map(|m| scores.get(&m.chunk.chunk_id).copied()).collect();
    let (lo, hi) = scored.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    let top_rrf = merged.iter().map(|m| m.rrf).fold(0.0, f64::max);
    let newest = merged.iter().filter_map(|m| m.chunk.year()).max();
    for m in &mut merged {
        m.rerank = if scored.is_empty() {
            None
        } else {
            Some(match scores.get(&m.chunk.chunk_id) {
                Some(s) if hi > lo => (s - lo) / (hi - lo),
                Some(_) => 1.0,
                None => 0.0,
            })
        };
        m.recency = match (m.chunk.year(), newest) {
            (Some(y), Some(n)) if window > 0 => (1.0 - f64::from(n - y) / f64::from(window)).max(0.0),
            _ => 0.0,
        };
        let relevance = m.rerank.unwrap_or(if top_rrf > 0.0 { m.rrf / top_rrf } else { 0.0 });
        m.score = (1.0 - boost) * relevance + boost * m.recency;
    }
    merged.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then(b.rrf.total_cmp(&a.rrf)).then(a.chunk.chunk_id.cmp(&b.chunk.chunk_id))
    });
    merged.truncate(top_k.max(1));
    merged
}

/// The first sentence of `text`, at most [`SUMMARY_CHARS`] characters: what a summary-only
/// reference carries.
pub fn summary(text: &str) -> String {
    let first = sentences(text).into_iter().next().unwrap_or_default();
    if first.chars().count() <= SUMMARY_CHARS {
        first.to_string()
    } else {
        let cut: String = first.chars().take(SUMMARY_CHARS).collect();
        format!("{}…", cut.trim_end())
    }
}

/// The candidates as the answering agent receives them: full chunks, or (`hydrated` false)
/// summary-only references — `chunk_id`, title, date, source and a one-sentence `summary`.
pub fn for_answer(merged: &[Merged], hydrated: bool) -> Value {
    Value::Array(
        merged
            .iter()
            .map(|m| {
                let c = &m.chunk;
                let mut v = json!({
                    "chunk_id": c.chunk_id, "title": c.title, "source": c.source, "date": c.date,
                    "score": (m.score * 1000.0).round() / 1000.0, "found_by": m.found_by,
                });
                if hydrated {
                    v["text"] = Value::String(c.text.clone());
                } else {
                    v["summary"] = Value::String(summary(&c.text));
                }
                v
            })
            .collect(),
    )
}

/// The lexical relevance a reranker without a model gives a chunk: the best, over the
/// question and the revised query, of the share of the query's distinct terms the text holds.
pub fn term_coverage(queries: &[&str], text: &str) -> f64 {
    let have = distinct_terms(text);
    queries
        .iter()
        .map(|q| {
            let want = distinct_terms(q);
            if want.is_empty() {
                0.0
            } else {
                want.iter().filter(|t| have.binary_search(t).is_ok()).count() as f64 / want.len() as f64
            }
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(id: &str, date: &str) -> Ranked {
        Ranked {
            chunk_id: id.into(),
            text: format!("Text of {id}. More."),
            title: String::new(),
            source: String::new(),
            date: Some(date.into()),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn two_retrievers_lists_fuse_by_hand_computed_rrf_with_each_chunk_once() {
        // sparse: a b c ; dense: c d a ; k = 60
        // a = 1/61 + 1/63 ; c = 1/63 + 1/61 (tie with a; a was seen first) ; b = 1/62 ; d = 1/62
        let lists = vec![
            ("sparse".to_string(), vec![r("a", "2024"), r("b", "2023"), r("c", "2022")], 0),
            ("dense".to_string(), vec![r("c", "2022"), r("d", "2024"), r("a", "2024")], 1),
        ];
        let (merged, report) = fuse_lists(&lists, 60.0);
        let ids: Vec<&str> = merged.iter().map(|m| m.chunk.chunk_id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b", "d"]);
        assert!(close(merged[0].rrf, 1.0 / 61.0 + 1.0 / 63.0));
        assert!(close(merged[2].rrf, 1.0 / 62.0));
        assert_eq!(merged[0].found_by, ["sparse:1", "dense:3"]);
        assert_eq!(merged[1].found_by, ["sparse:3", "dense:1"]);
        assert_eq!((report.listed, report.deduped), (6, 4));
        assert_eq!(report.lists[1].skipped, 1);
    }

    #[test]
    fn rerank_normalizes_reranker_scores_and_adds_the_recency_boost() {
        // Reranker: a 2.0, b 6.0, c 4.0 → normalized a 0, b 1, c 0.5.
        // Years: a 2024 (recency 1), b 2022 (1 − 2/4 = 0.5), c 2023 (0.75); boost 0.2:
        // a = 0.8·0 + 0.2·1 = 0.2 ; b = 0.8·1 + 0.2·0.5 = 0.9 ; c = 0.8·0.5 + 0.2·0.75 = 0.55.
        let lists = vec![("s".to_string(), vec![r("a", "2024"), r("b", "2022"), r("c", "2023")], 0)];
        let (merged, _) = fuse_lists(&lists, 60.0);
        let scores: HashMap<String, f64> = [("a", 2.0), ("b", 6.0), ("c", 4.0)].map(|(k, v)| (k.to_string(), v)).into();
        let out = rerank(merged.clone(), &scores, 0.2, 4, 10);
        let got: Vec<(&str, f64)> = out.iter().map(|m| (m.chunk.chunk_id.as_str(), m.score)).collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), ["b", "c", "a"]);
        assert!(close(got[0].1, 0.9) && close(got[1].1, 0.55) && close(got[2].1, 0.2), "{got:?}");
        // Without reranker scores the RRF order stands when the boost is 0, and top_k cuts.
        let plain = rerank(merged, &HashMap::new(), 0.0, 4, 2);
        assert_eq!(plain.iter().map(|m| m.chunk.chunk_id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert!(close(plain[0].score, 1.0) && plain[0].rerank.is_none());
    }

    #[test]
    fn a_strong_recency_boost_lets_a_newer_chunk_overtake_the_rrf_leader() {
        // a (2021) first in both lists, b (2024) second in both. Boost 0.5, window 3:
        // a = 0.5·1 + 0.5·0 = 0.5 ; b = 0.5·(2/62)/(2/61) + 0.5·1 = 0.5·0.98387 + 0.5 = 0.99194.
        let lists = vec![
            ("s".to_string(), vec![r("a", "2021"), r("b", "2024")], 0),
            ("d".to_string(), vec![r("a", "2021"), r("b", "2024")], 0),
        ];
        let (merged, _) = fuse_lists(&lists, 60.0);
        let out = rerank(merged, &HashMap::new(), 0.5, 3, 5);
        assert_eq!(out[0].chunk.chunk_id, "b");
        assert!(close(out[0].score, 0.5 * (61.0 / 62.0) + 0.5));
    }

    #[test]
    fn malformed_handoff_entries_are_skipped_and_counted_and_scores_read_in_both_shapes() {
        let out = json!({"candidates": [{"chunk_id": "x", "text": "t", "date": "2024"}, {"text": "no id"}, 7, {"chunk_id": ""}]});
        let (list, skipped) = ranked_list(&out);
        assert_eq!((list.len(), skipped), (1, 3));
        assert_eq!(list[0].year(), Some(2024));
        assert!(ranked_list(&json!({"candidates": "nope"})).0.is_empty());
        let many: Vec<Value> = (0..150).map(|n| json!({"chunk_id": format!("c{n}")})).collect();
        let (list, skipped) = ranked_list(&json!({ "candidates": many }));
        assert_eq!((list.len(), skipped), (MAX_LIST, 50));
        let m = reranker_scores(&json!({"scores": {"a": 0.5, "b": "high"}}));
        assert_eq!(m.len(), 1);
        let l = reranker_scores(&json!({"scores": [{"chunk_id": "a", "score": 1}, {"chunk_id": "b"}]}));
        assert_eq!(l.get("a"), Some(&1.0));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn summary_only_references_carry_the_first_sentence_and_no_text() {
        let lists = vec![("s".to_string(), vec![r("a", "2024")], 0)];
        let (merged, _) = fuse_lists(&lists, 60.0);
        let lazy = for_answer(&merged, false);
        assert_eq!(lazy[0]["summary"], "Text of a.");
        assert!(lazy[0].get("text").is_none());
        let full = for_answer(&merged, true);
        assert_eq!(full[0]["text"], "Text of a. More.");
        let long = "word ".repeat(100);
        assert!(summary(&long).chars().count() <= SUMMARY_CHARS + 1);
    }

    #[test]
    fn term_coverage_takes_the_better_query() {
        let t = "Cloud revenue grew 18% in 2024.";
        assert!(close(term_coverage(&["cloud revenue growth", "headcount"], t), 1.0));
        assert!(close(term_coverage(&["cloud headcount"], t), 0.5));
        assert_eq!(term_coverage(&["the"], t), 0.0);
    }
}
