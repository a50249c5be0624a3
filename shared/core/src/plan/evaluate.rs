//! The research-assistant design's evaluator: score the chunks the sources returned, penalise near-duplicates,
//! drop what falls below the quality threshold and record numeric contradictions, before the
//! synthesizer sees anything.
//!
//! `score = w_source × reputation(source) + w_recency × recency(date) + w_relevance × relevance`,
//! halved for a chunk whose words overlap an earlier chunk's by at least
//! `duplicate_similarity` (Jaccard), clamped to [0, 1]. Two claims contradict when they state
//! different numbers (more than 10 % apart, same unit) about the same subject — the content
//! words just before each number overlapping by half or more.

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use switchyard_model::manifest::SourcesSettings;

/// A chunk of context a source returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// The text.
    pub text: String,
    /// Source kind (`rag`, `web`, `arxiv`, `memory`, …) for the reputation table.
    pub source: String,
    /// Publication date, `YYYY-MM-DD` or `YYYY`.
    #[serde(default)]
    pub date: Option<String>,
    /// Relevance to the question, 0 – 1.
    #[serde(default = "half")]
    pub relevance: f64,
    /// The source agent that returned it.
    #[serde(default)]
    pub agent: String,
}

fn half() -> f64 {
    0.5
}

/// A chunk with its score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredChunk {
    /// The chunk.
    #[serde(flatten)]
    pub chunk: Chunk,
    /// Quality score, 0 – 1.
    pub score: f64,
    /// Index of the earlier chunk it nearly duplicates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<usize>,
    /// Whether it passed the quality threshold.
    pub kept: bool,
}

/// One side of a contradiction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// The source.
    pub source: String,
    /// The number stated.
    pub value: f64,
    /// The sentence stating it.
    pub text: String,
}

/// Two sources stating different numbers about the same subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contradiction {
    /// The subject words.
    pub subject: String,
    /// One claim.
    pub a: Claim,
    /// The other.
    pub b: Claim,
}

/// What the evaluator found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Evaluation {
    /// Every chunk, scored, in source order.
    pub chunks: Vec<ScoredChunk>,
    /// Chunks before filtering.
    pub original_chunk_count: usize,
    /// Chunks kept.
    pub filtered_chunk_count: usize,
    /// Mean score of all chunks.
    pub average_quality_score: f64,
    /// Numeric contradictions between kept chunks.
    pub contradictions: Vec<Contradiction>,
}

impl Evaluation {
    /// The kept chunks.
    pub fn kept(&self) -> impl Iterator<Item = &ScoredChunk> {
        self.chunks.iter().filter(|c| c.kept)
    }
}

/// Chunks from a source's `primary_output.chunks`.
pub fn chunks_of(agent: &str, output: &Value) -> Vec<Chunk> {
    output
        .get("chunks")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|c| {
                    let mut chunk: Chunk = serde_json::from_value(c.clone()).ok()?;
                    chunk.agent = agent.to_string();
                    Some(chunk)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Score, de-duplicate, filter and check `chunks`.
pub fn evaluate(settings: &SourcesSettings, chunks: Vec<Chunk>, now: DateTime<Utc>) -> Evaluation {
    let words: Vec<BTreeSet<String>> = chunks.iter().map(|c| word_set(&c.text)).collect();
    let mut scored = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.into_iter().enumerate() {
        let reputation = settings.reputation.get(&chunk.source).copied().unwrap_or(0.5);
        let recency = recency(chunk.date.as_deref(), now, settings.recency_horizon_years);
        let w = settings.weights;
        let mut score = w.source * reputation + w.recency * recency + w.relevance * chunk.relevance.clamp(0.0, 1.0);
        let duplicate_of = (0..i).find(|&j| jaccard(&words[i], &words[j]) >= settings.duplicate_similarity);
        if duplicate_of.is_some() {
            score *= 0.5;
        }
        let score = (score.clamp(0.0, 1.0) * 1_000.0).round() / 1_000.0;
        scored.push(ScoredChunk {
            kept: score >= settings.quality_threshold && duplicate_of.is_none(),
            chunk,
            score,
            duplicate_of,
        });
    }
    let average =
        if scored.is_empty() { 0.0 } else { scored.iter().map(|c| c.score).sum::<f64>() / scored.len() as f64 };
    let kept: Vec<&ScoredChunk> = scored.iter().filter(|c| c.kept).collect();
    let contradictions = contradictions(&kept);
    Evaluation {
        original_chunk_count: scored.len(),
        filtered_chunk_count: kept.len(),
        average_quality_score: (average * 1_000.0).round() / 1_000.0,
        contradictions,
        chunks: scored,
    }
}

fn recency(date: Option<&str>, now: DateTime<Utc>, horizon: f64) -> f64 {
    let Some(date) = date else { return 0.5 };
    let mut parts = date.split('-');
    let Some(year) = parts.next().and_then(|y| y.trim().parse::<i32>().ok()) else { return 0.5 };
    let month = parts.next().and_then(|m| m.parse::<u32>().ok()).unwrap_or(6);
    let age = f64::from(now.year() - year) + (f64::from(now.month()) - f64::from(month)) / 12.0;
    (1.0 - age.max(0.0) / horizon).clamp(0.0, 1.0)
}

const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "is",
    "was",
    "were",
    "are",
    "be",
    "been",
    "of",
    "at",
    "to",
    "in",
    "on",
    "for",
    "by",
    "and",
    "or",
    "as",
    "about",
    "around",
    "approximately",
    "roughly",
    "nearly",
    "worth",
    "reached",
    "reach",
    "valued",
    "with",
    "its",
    "it",
    "that",
    "this",
    "than",
    "from",
    "into",
    "over",
    "under",
    "some",
    "put",
    "puts",
    "estimated",
    "estimate",
    "estimates",
    "says",
    "said",
];

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '.' || c == ','))
        .map(|t| t.trim_matches(|c: char| c == '.' || c == ',').to_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

fn word_set(text: &str) -> BTreeSet<String> {
    tokens(text).into_iter().filter(|t| !STOPWORDS.contains(&t.as_str())).collect()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

const UNITS: &[&str] = &["%", "percent", "billion", "million", "thousand", "trillion", "k"];

/// A number stated about a subject: subject words in sentence order, as a set, the number,
/// its unit and the sentence.
type Stated = (Vec<String>, BTreeSet<String>, f64, String, String);

/// Every number stated in a chunk, with its subject.
fn claims(text: &str) -> Vec<Stated> {
    let mut out = Vec::new();
    // Sentences end at ". ", ";" or a line break, so decimal points stay inside numbers.
    for sentence in text.split([';', '\n']).flat_map(|s| s.split(". ")).filter(|s| !s.trim().is_empty()) {
        let toks = tokens(sentence);
        for (i, tok) in toks.iter().enumerate() {
            let cleaned = tok.trim_end_matches('%').replace(',', "");
            let Ok(value) = cleaned.parse::<f64>() else { continue };
            let unit = if tok.ends_with('%') {
                "%".to_string()
            } else {
                toks.get(i + 1).filter(|u| UNITS.contains(&u.as_str())).cloned().unwrap_or_default()
            };
            if unit.is_empty() && value.fract() == 0.0 && (1900.0..=2100.0).contains(&value) {
                continue; // a year, not a quantity
            }
            let mut subject: Vec<String> = toks[..i]
                .iter()
                .filter(|t| !STOPWORDS.contains(&t.as_str()) && t.parse::<f64>().is_err())
                .rev()
                .take(4)
                .cloned()
                .collect();
            subject.reverse();
            if subject.len() >= 2 {
                let set = subject.iter().cloned().collect();
                out.push((subject, set, value, unit, sentence.trim().to_string()));
            }
        }
    }
    out
}

fn contradictions(kept: &[&ScoredChunk]) -> Vec<Contradiction> {
    let per_chunk: Vec<_> = kept.iter().map(|c| claims(&c.chunk.text)).collect();
    let mut found: Vec<Contradiction> = Vec::new();
    for i in 0..kept.len() {
        for j in i + 1..kept.len() {
            for (words, sa, va, ua, ta) in &per_chunk[i] {
                for (_, sb, vb, ub, tb) in &per_chunk[j] {
                    let differ = (va - vb).abs() > 0.1 * va.abs().max(vb.abs());
                    if ua == ub && differ && jaccard(sa, sb) >= 0.5 {
                        let subject: Vec<&str> = words.iter().filter(|w| sb.contains(*w)).map(String::as_str).collect();
                        let subject = subject.join(" ");
                        if found.iter().any(|c| c.subject == subject) {
                            continue;
                        }
                        found.push(Contradiction {
                            subject,
                            a: Claim { source: kept[i].chunk.source.clone(), value: *va, text: ta.clone() },
                            b: Claim { source: kept[j].chunk.source.clone(), value: *vb, text: tb.clone() },
                        });
                    }
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_model::manifest::{Dur, ScoreWeights};

    fn settings() -> SourcesSettings {
        SourcesSettings {
            agents: vec![],
            budget: Dur::from_millis(30_000),
            synthesizer: "s".into(),
            memory: None,
            quality_threshold: 0.3,
            weights: ScoreWeights::default(),
            reputation: [("arxiv".to_string(), 0.9), ("web".to_string(), 0.5)].into_iter().collect(),
            duplicate_similarity: 0.8,
            recency_horizon_years: 5.0,
        }
    }

    fn chunk(text: &str, source: &str) -> Chunk {
        Chunk {
            text: text.into(),
            source: source.into(),
            date: Some("2025-06-01".into()),
            relevance: 0.8,
            agent: source.into(),
        }
    }

    #[test]
    fn two_sources_stating_different_market_sizes_are_a_contradiction() {
        let now = "2026-01-01T00:00:00Z".parse().expect("date");
        let e = evaluate(
            &settings(),
            vec![
                chunk("The global solid-state battery market was worth 100 billion dollars in 2025.", "arxiv"),
                chunk("Analysts put the global solid-state battery market at 50 billion dollars.", "web"),
            ],
            now,
        );
        assert_eq!(e.contradictions.len(), 1, "{e:#?}");
        assert_eq!((e.contradictions[0].a.value, e.contradictions[0].b.value), (100.0, 50.0));
    }

    #[test]
    fn a_near_duplicate_has_its_score_halved_and_is_dropped() {
        let now = "2026-01-01T00:00:00Z".parse().expect("date");
        let text = "Solid-state cells use a ceramic electrolyte instead of a liquid one.";
        let e = evaluate(&settings(), vec![chunk(text, "arxiv"), chunk(text, "web")], now);
        assert_eq!(e.chunks[1].duplicate_of, Some(0));
        assert!(e.chunks[1].score < e.chunks[0].score / 2.0 + 0.2);
        assert!(!e.chunks[1].kept && e.filtered_chunk_count == 1);
    }
}
