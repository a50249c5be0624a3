//! One retrieval: ranked lists → RRF → dedupe → threshold → fallback → rerank → answer.
//!
//! For each attempt of the fallback order, the question (and the planner's revised query,
//! when there is one) is searched with BM25 and/or the vector list, each list limited to the
//! requested years; the lists are fused with RRF (one entry per `chunk_id`); candidates below
//! the attempt's `min_score` are dropped. An attempt with fewer than `min_candidates` left is
//! recorded with its reason and the next one is tried. The accepted candidates are reranked:
//! the RRF score normalized to 0 – 1, blended with a recency score (1 for the newest year of
//! the corpus, fading to 0 over `recent_year_window` years) weighted `recency_boost`.

use super::index::{Hit, Index};
use super::rrf;
use super::terms::{distinct_terms, sentences, terms, trigram_overlap};

/// Trigram overlap a sentence sharing no term with the question needs to be quoted.
const MIN_SENTENCE_OVERLAP: f64 = 0.3;
use serde::Serialize;
use switchyard_model::manifest::{RetrievalMode, RetrieverSettings};

/// What is asked.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The user's question.
    pub question: String,
    /// The planner's rewrite for retrieval.
    pub revised_query: Option<String>,
    /// The RAG manager design's `requested_years`: when not empty (`year_mode: explicit`), only chunks of
    /// documents dated in these years are candidates.
    pub requested_years: Vec<i32>,
    /// The RAG manager design's `recent_year_window`, overriding the agent's.
    pub recent_year_window: Option<u32>,
}

/// A ranked chunk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// What citations point to.
    pub chunk_id: String,
    /// Its document.
    pub doc_id: String,
    /// The document's title.
    pub title: String,
    /// Where the document came from.
    pub source: String,
    /// The document's date.
    pub date: Option<String>,
    /// The chunk's text.
    pub text: String,
    /// Final score after the rerank (0 – 1).
    pub score: f64,
    /// RRF score.
    pub rrf: f64,
    /// The threshold measure of the accepted attempt.
    pub match_score: f64,
    /// Recency score (0 – 1).
    pub recency: f64,
}

/// One ranked list of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListReport {
    /// `bm25:question`, `vector:revised_query`, ….
    pub list: String,
    /// Chunks it contributed.
    pub hits: usize,
}

/// One attempt of the fallback order, as the event log shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    /// The setting's name.
    pub setting: String,
    /// Its mode.
    pub mode: &'static str,
    /// Its threshold.
    pub min_score: f64,
    /// Candidates it needed.
    pub min_candidates: usize,
    /// The lists fused.
    pub lists: Vec<ListReport>,
    /// Entries of all lists together, before the dedupe.
    pub listed: usize,
    /// Distinct chunks after RRF.
    pub fused: usize,
    /// Candidates at or above the threshold.
    pub passed: usize,
    /// Whether this attempt's candidates were used.
    pub accepted: bool,
    /// Why it was accepted or why the next one was tried.
    pub reason: String,
}

/// The result of a retrieval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Retrieval {
    /// `explicit` when years were requested, else `none`.
    pub year_mode: &'static str,
    /// Years requested.
    pub requested_years: Vec<i32>,
    /// Years of the recency fade.
    pub recent_year_window: u32,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// The merge: strategy, `k`, entries before and chunks after the dedupe.
    pub merge: Merge,
    /// The reranked candidates (at most `top_k`).
    pub candidates: Vec<Candidate>,
}

/// How the lists of the accepted attempt were merged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Merge {
    /// `rrf`.
    pub strategy: &'static str,
    /// The RRF constant.
    pub k: f64,
    /// Entries of all lists before the dedupe.
    pub listed: usize,
    /// Distinct chunks after fusion.
    pub deduped: usize,
    /// Weight of the recency boost in the rerank.
    pub recency_boost: f64,
}

/// Run the fallback order over `index`, the dense lists from its hashed vectors.
pub fn retrieve(index: &Index, req: &Request, s: &RetrieverSettings) -> Retrieval {
    retrieve_with(index, req, s, &[])
}

/// The texts [`retrieve_with`] searches, in order: the question, then the revised query when
/// there is one and it differs. An embedding provider embeds exactly these.
pub fn query_texts(req: &Request) -> Vec<String> {
    let mut out = vec![req.question.clone()];
    if let Some(r) = req.revised_query.as_deref().filter(|r| !r.trim().is_empty() && *r != req.question) {
        out.push(r.to_string());
    }
    out
}

/// Run the fallback order over `index`; `embedded` holds the model embeddings of
/// [`query_texts`] (empty: none), and where one is given the dense list ranks the index's
/// stored embeddings (`embedding:question`) instead of the hashed vectors.
pub fn retrieve_with(index: &Index, req: &Request, s: &RetrieverSettings, embedded: &[Vec<f32>]) -> Retrieval {
    let window = req.recent_year_window.unwrap_or(s.recent_year_window);
    let years = &req.requested_years;
    let keep = |chunk: usize| years.is_empty() || index.document(chunk).year.is_some_and(|y| years.contains(&y));
    let mut queries: Vec<(&str, &str)> = vec![("question", req.question.as_str())];
    if let Some(r) = req.revised_query.as_deref().filter(|r| !r.trim().is_empty() && *r != req.question) {
        queries.push(("revised_query", r));
    }
    let query_terms: Vec<Vec<String>> = queries.iter().map(|(_, q)| terms(q)).collect();
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut chosen: Option<(Vec<(usize, f64, f64)>, usize, usize)> = None;
    for (n, setting) in s.attempts.iter().enumerate() {
        let mut lists: Vec<Vec<String>> = Vec::new();
        let mut reports = Vec::new();
        for (qn, ((name, q), qt)) in queries.iter().zip(&query_terms).enumerate() {
            let mut add = |kind: &str, hits: Vec<Hit>| {
                let ids: Vec<String> =
                    hits.iter().take(s.candidates).map(|h| index.chunks()[h.chunk].chunk_id.clone()).collect();
                reports.push(ListReport { list: format!("{kind}:{name}"), hits: ids.len() });
                lists.push(ids);
            };
            if setting.mode != RetrievalMode::Dense {
                add("bm25", index.bm25(qt, &keep));
            }
            if setting.mode != RetrievalMode::Sparse {
                match embedded.get(qn).and_then(|v| index.dense_embedded(v, &keep)) {
                    Some(hits) => add("embedding", hits),
                    None => add("vector", index.dense(q, &keep)),
                }
            }
        }
        let listed: usize = lists.iter().map(Vec::len).sum();
        let fused = rrf::fuse(&lists, s.rrf_k);
        let position = |id: &str| index.chunks().iter().position(|c| c.chunk_id == id);
        let passed: Vec<(usize, f64, f64)> = fused
            .iter()
            .filter_map(|(id, score)| position(id).map(|c| (c, *score)))
            .map(|(c, score)| {
                let m = match setting.mode {
                    RetrievalMode::Dense => queries
                        .iter()
                        .enumerate()
                        .map(|(qn, (_, q))| match embedded.get(qn).filter(|_| index.embedding_model().is_some()) {
                            Some(v) => index.similarity_embedded(c, v),
                            None => index.similarity(c, q),
                        })
                        .fold(0.0, f64::max),
                    _ => query_terms.iter().map(|qt| index.coverage(c, qt)).fold(0.0, f64::max),
                };
                (c, score, m)
            })
            .filter(|(_, _, m)| *m >= setting.min_score)
            .collect();
        let enough = passed.len() >= setting.min_candidates.max(1);
        let last = n + 1 == s.attempts.len();
        let reason = if enough {
            format!(
                "{} of {} candidates reached {} {:.2} (needed {})",
                passed.len(),
                fused.len(),
                measure(setting.mode),
                setting.min_score,
                setting.min_candidates
            )
        } else if fused.is_empty() {
            if years.is_empty() {
                "no chunk matched the query".to_string()
            } else {
                format!("no chunk of the requested years {years:?} matched the query")
            }
        } else {
            format!(
                "only {} of {} candidates reached {} {:.2} (needed {})",
                passed.len(),
                fused.len(),
                measure(setting.mode),
                setting.min_score,
                setting.min_candidates
            )
        };
        attempts.push(Attempt {
            setting: setting.name.clone(),
            mode: setting.mode.as_str(),
            min_score: setting.min_score,
            min_candidates: setting.min_candidates,
            lists: reports,
            listed,
            fused: fused.len(),
            passed: passed.len(),
            accepted: enough,
            reason: if enough || last { reason } else { format!("{reason}; trying the next setting") },
        });
        if enough {
            chosen = Some((passed, listed, fused.len()));
            break;
        }
    }
    let (passed, listed, deduped) = chosen.unwrap_or_default();
    let newest = index.documents().iter().filter_map(|d| d.year).max();
    let recency = |chunk: usize| match (index.document(chunk).year, newest) {
        (Some(y), Some(newest)) if window > 0 => (1.0 - f64::from(newest - y) / f64::from(window)).max(0.0),
        _ => 0.0,
    };
    let top_rrf = passed.iter().map(|p| p.1).fold(0.0, f64::max);
    let boost = s.recency_boost.clamp(0.0, 1.0);
    let mut candidates: Vec<Candidate> = passed
        .iter()
        .map(|&(c, rrf, m)| {
            let chunk = &index.chunks()[c];
            let doc = index.document(c);
            let r = recency(c);
            let norm = if top_rrf > 0.0 { rrf / top_rrf } else { 0.0 };
            Candidate {
                chunk_id: chunk.chunk_id.clone(),
                doc_id: doc.doc_id.clone(),
                title: doc.title.clone(),
                source: doc.source.clone(),
                date: doc.date.clone(),
                text: chunk.text.clone(),
                score: (1.0 - boost) * norm + boost * r,
                rrf,
                match_score: m,
                recency: r,
            }
        })
        .collect();
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.chunk_id.cmp(&b.chunk_id)));
    candidates.truncate(s.top_k.max(1));
    Retrieval {
        year_mode: if years.is_empty() { "none" } else { "explicit" },
        requested_years: years.clone(),
        recent_year_window: window,
        attempts,
        merge: Merge { strategy: "rrf", k: s.rrf_k, listed, deduped, recency_boost: boost },
        candidates,
    }
}

fn measure(mode: RetrievalMode) -> &'static str {
    match mode {
        RetrievalMode::Dense => "similarity",
        _ => "term coverage",
    }
}

/// An extractive answer: the sentences of the candidates that share the most terms with the
/// question (and revised query), best candidate first, at most `max` of them and one per
/// chunk, each followed by its `[chunk_id]`.
pub fn compose(req: &Request, candidates: &[Candidate], max: usize) -> Option<String> {
    let mut wanted = distinct_terms(&req.question);
    if let Some(r) = &req.revised_query {
        wanted.extend(distinct_terms(r));
        wanted.sort();
        wanted.dedup();
    }
    let mut picked: Vec<String> = Vec::new();
    for c in candidates {
        if picked.len() >= max.max(1) {
            break;
        }
        // Shared terms first; a spelling-tolerant trigram overlap breaks ties and finds the
        // sentence when a misspelled question shares no term with it (the vector fallback).
        let best = sentences(&c.text)
            .into_iter()
            .map(|s| {
                (distinct_terms(s).iter().filter(|t| wanted.contains(t)).count(), trigram_overlap(&req.question, s), s)
            })
            .filter(|(n, tri, _)| *n > 0 || *tri >= MIN_SENTENCE_OVERLAP)
            .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(b.2.len().cmp(&a.2.len())));
        if let Some((_, _, s)) = best {
            let dated = match &c.date {
                Some(d) => format!("{s} [{}, {}]", c.chunk_id, &d[..4.min(d.len())]),
                None => format!("{s} [{}]", c.chunk_id),
            };
            if !picked.iter().any(|p| p.starts_with(s)) {
                picked.push(dated);
            }
        }
    }
    if picked.is_empty() {
        None
    } else {
        Some(picked.join(" "))
    }
}

/// Confidence of a retrieval: the mean threshold measure of the three best candidates, mapped
/// to 0.35 – 0.95, lowered by a tenth for each fallback needed.
pub fn confidence(r: &Retrieval) -> f64 {
    let top: Vec<f64> = r.candidates.iter().take(3).map(|c| c.match_score.min(1.0)).collect();
    if top.is_empty() {
        return 0.0;
    }
    let mean = top.iter().sum::<f64>() / top.len() as f64;
    let fallbacks = r.attempts.iter().filter(|a| !a.accepted).count() as f64;
    ((0.35 + 0.6 * mean) * 0.9f64.powf(fallbacks)).clamp(0.0, 0.95)
}
