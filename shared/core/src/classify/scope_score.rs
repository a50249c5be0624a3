//! The scope score: how much of a question the manifest's own vocabulary accounts for.
//!
//! An intent classifier always names its best intent, even for "what's the weather in Paris
//! tomorrow?". The scope score asks the question before that one: does this text belong to the
//! manifest's domain at all? It is learned from the same manifest text as the intents — ids,
//! descriptions, keywords, utterances, synonyms and entity gazetteers — plus the optional
//! `classifier.scope.negative_examples`.
//!
//! Each content word of the question (not a stop word, a number or a time period) is evidence:
//! - a brand, region, KPI or identifier the gazetteers or patterns know counts fully;
//! - a word the intents use counts by its *domain weight*: 1 for the curated vocabulary (ids,
//!   descriptions, keywords), less for a word only the utterances use (utterances carry
//!   incidental everyday words), scaled down by how often the negative examples use it;
//! - a word one edit from a known spelling counts at a discount; an unknown word counts 0.
//!
//! The score is the evidence over the number of content words, so a question scores high when
//! nearly every word it uses is the manifest's, whatever the intent. A question with no
//! content word at all ("the the the", "???") scores 0.

use super::text::{self, is_stop_word, Token};
use super::vectors;
use super::Classifier;
use aho_corasick::AhoCorasick;
use std::sync::LazyLock;
use switchyard_model::contracts::ParsedEntity;
use switchyard_model::manifest::for_lower_case_phrases;
pub(crate) use switchyard_model::manifest::RefusedPhrases;

/// Most domain weight of a word no id or one-word keyword names.
const UTTERANCE_WORD_WEIGHT: f64 = 0.8;
/// Pseudo-count of the support weighting: a word in n documents weighs n / (n + 3).
const SUPPORT_PRIOR: f64 = 3.0;
/// Evidence of one brand, region, KPI or identifier the manifest knows, in words: a named
/// thing of the domain says more than any single word.
const ENTITY_WEIGHT: f64 = 2.0;
/// Discount of a word reached through a one-edit spelling match.
const TYPO_WEIGHT: f64 = 0.85;
/// Weight of the word-vector margin (similarity to the nearest utterance minus similarity to
/// the nearest negative example) added to the lexical score. Chosen on the tuned sets.
const SEMANTIC_WEIGHT: f64 = 0.5;
/// The margin that adds nothing: a question as close to an utterance as to a negative example
/// loses `SEMANTIC_WEIGHT × SEMANTIC_OFFSET`.
const SEMANTIC_OFFSET: f64 = 0.10;

/// Requests aimed at the router itself rather than at the manifest's domain: overriding its
/// instructions, revealing its prompt, configuration or secrets, changing roles, reading other
/// users' data. Such a question is out of scope whatever words of the domain it borrows ("skip
/// the role check and deploy the model"). Generic English about an assistant, not about any
/// manifest, matched as lower-case phrases; checked against every in-scope question, utterance
/// and dialogue turn of the shipped sets (none matches).
const AIMED_AT_THE_ROUTER: &[&str] = &[
    "ignore all previous",
    "ignore previous",
    "ignore the above",
    "ignore your",
    "ignore all instructions",
    "ignore all prior",
    "ignore prior",
    "disregard your",
    "disregard the above",
    "disregard all",
    "disregard previous",
    "forget your rules",
    "forget your instructions",
    "forget all previous",
    "forget previous instructions",
    "override your",
    "system prompt",
    "system message",
    "system override",
    "hidden prompt",
    "hidden instructions",
    "hidden configuration",
    "hidden config",
    "hidden system message",
    "secret instructions",
    "internal instructions",
    "internal prompt",
    "developer mode",
    "you are now",
    "pretend you are",
    "pretend you're",
    "pretend to be",
    "no restrictions",
    "without restrictions",
    "without any restrictions",
    "environment variable",
    "api key",
    "api token",
    "password",
    "credentials",
    "secrets file",
    "role check",
    "admin rights",
    "admin access",
    "administrator rights",
    "administrator access",
    "root access",
    "admin privileges",
    "<system",
    "</system",
    "<user",
    "</user",
    "jailbreak",
    "other users",
    "unfiltered",
    "unrestricted",
    "grant me ",
    "give my account",
    "without review",
    "without any review",
    "without approval",
    "skip validation",
    "skip the validation",
    "skip approval",
    "skip the approval",
    "skip the review",
    "rm -rf",
    "drop table",
    "every user's",
    "all users'",
    "everyone's conversation",
    "everyone's history",
    "ignore the classifier",
    "ignore the router",
    "label this as",
    "registry entries",
    "delete the model registry",
    "delete last month's",
    "so the audit",
    "audit doesn't see",
    "auditors don't see",
    "looks like it comes from",
    "looks like it came from",
    "impersonat",
    "admin override",
    "authorise you to",
    "authorize you to",
    "</query",
    "<query",
    "\"intent\":",
    "system:",
];

/// Whether `text` is a request aimed at the router ([`AIMED_AT_THE_ROUTER`]).
pub(super) fn aimed_at_the_router(text: &str) -> bool {
    static PHRASES: LazyLock<AhoCorasick> = LazyLock::new(|| {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(AIMED_AT_THE_ROUTER)
            .expect("the refusal phrases are plain literals")
    });
    PHRASES.is_match(&*for_lower_case_phrases(text))
}

/// The scope part of a classification.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scope {
    /// 0.0 – 1.0.
    pub(crate) score: f64,
    /// `score >= classifier.scope.threshold`.
    pub(crate) in_scope: bool,
    /// How many content words the score was read from (not stop, question or request words,
    /// numbers or entity words).
    pub(crate) content_words: usize,
    /// The text is a request aimed at the router ([`aimed_at_the_router`]): score 0, and no
    /// conversation brings it back in scope.
    pub(crate) refused: bool,
}

/// Per unigram term, its domain weight (0.0 – 1.0); bigrams carry 0 and are not read.
///
/// A word an intent's id or a one-word keyword names is the manifest's own vocabulary (1.0).
/// Any other word (in a description, a phrase keyword or an utterance) weighs by how many of
/// the manifest's documents use it, `n / (n + SUPPORT_PRIOR)` capped at
/// `UTTERANCE_WORD_WEIGHT`: "model" or "territory" recur, "make" or "year" come up once in a
/// phrase. Such a word is then scaled down by its share of the negative examples; a word the
/// manifest names as an id or keyword is not.
pub(super) fn domain_weights(
    classifier: &Classifier,
    named_words: &[u32],
    negative_counts: &[f64],
    negative_total: f64,
) -> Vec<f64> {
    let k = classifier.intents.len();
    let total_docs: f64 = classifier.totals.iter().sum::<f64>().max(1.0);
    (0..classifier.is_bigram.len())
        .map(|t| {
            if classifier.is_bigram[t] {
                return 0.0;
            }
            let support: f64 = classifier.counts[t * k..(t + 1) * k].iter().sum();
            if named_words.binary_search(&(t as u32)).is_ok() {
                return 1.0;
            }
            let base = (support / (support + SUPPORT_PRIOR)).min(UTTERANCE_WORD_WEIGHT);
            let negative = negative_counts.get(t).copied().unwrap_or(0.0);
            if negative > 0.0 && negative_total > 0.0 {
                let domain_share = support / total_docs;
                let negative_share = negative / negative_total;
                base * domain_share / (domain_share + negative_share)
            } else {
                base
            }
        })
        .collect()
}

/// Words that say nothing of what a question is about: stop, question and request words.
pub(crate) fn names_nothing(word: &str) -> bool {
    is_stop_word(word) || is_question_word(word) || text::is_request_word(word)
}

/// Words that ask rather than say what about: they are evidence of nothing.
fn is_question_word(word: &str) -> bool {
    matches!(
        word,
        "how" | "who" | "whom" | "whose" | "which" | "where" | "why" | "what" | "when" | "whether" | "many" | "much"
    )
}

impl Classifier {
    /// The scope score of a tokenised question (`named`: the tokens the entity extractor took
    /// as brand, region or time-period words).
    pub(super) fn scope(&self, tokens: &[Token], named: &[bool], entities: &[ParsedEntity]) -> Scope {
        let settings = &self.settings.scope;
        let entity_evidence: f64 = entities
            .iter()
            .filter(|e| !self.entities.is_built_in(&e.entity_type))
            .map(|e| ENTITY_WEIGHT * e.confidence.clamp(0.0, 1.0))
            .sum();
        let mut words = 0.0;
        let mut evidence = 0.0;
        for (t, &named) in tokens.iter().zip(named) {
            if named || t.has_digit() || names_nothing(&t.text) || t.text.chars().count() < 2 {
                continue;
            }
            words += 1.0;
            let word = self.synonyms.get(&t.text).map(String::as_str).unwrap_or(&t.text);
            let stemmed = text::stem(word);
            let stemmed = match self.synonyms.get(&stemmed) {
                Some(s) => text::stem(s),
                None => stemmed,
            };
            let e = match self.vocab.get(&stemmed) {
                Some(&id) => self.domain_weight[id as usize],
                None => {
                    self.misspelt_term(&t.text).map(|id| TYPO_WEIGHT * self.domain_weight[id as usize]).unwrap_or(0.0)
                }
            };
            evidence += e;
        }
        let denominator = words + entity_evidence;
        let score = if denominator > 0.0 { ((evidence + entity_evidence) / denominator).clamp(0.0, 1.0) } else { 0.0 };
        let score = (score * 1_000.0).round() / 1_000.0;
        Scope { score, in_scope: score >= settings.threshold, content_words: words as usize, refused: false }
    }

    /// Adds the word-vector evidence to a lexical scope: how much closer the question is to
    /// the nearest utterance than to the nearest negative example, in meaning rather than in
    /// shared words ("is any part of the platform offline?" near "is the service down?").
    /// Only with negative examples to compare against: without them nothing changes.
    /// `nearest_utterance` is the query's cosine to the nearest utterance, computed once with
    /// the intents' similarities.
    pub(super) fn semantic_scope(
        &self,
        scope: &mut Scope,
        query: Option<&[f32; vectors::DIMS]>,
        nearest_utterance: Option<f64>,
    ) {
        if scope.refused || self.negative_vectors.is_empty() || self.utterance_vectors.is_empty() {
            return;
        }
        let margin = match (query, nearest_utterance) {
            (Some(q), Some(domain)) => {
                let negative = self
                    .negative_vectors
                    .iter()
                    .map(|v| f64::from(vectors::cosine(q, v)))
                    .fold(f64::NEG_INFINITY, f64::max);
                domain - negative
            }
            _ => 0.0,
        };
        let score = (scope.score + SEMANTIC_WEIGHT * (margin - SEMANTIC_OFFSET)).clamp(0.0, 1.0);
        scope.score = (score * 1_000.0).round() / 1_000.0;
        scope.in_scope = scope.score >= self.settings.scope.threshold;
    }
}
