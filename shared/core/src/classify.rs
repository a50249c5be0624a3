//! The embedded intent classifier and entity extractor.
//!
//! [`Classifier::new`] learns everything from the manifest — intent ids, descriptions,
//! utterances and keywords, the `classifier.synonyms` table, the negative examples and the
//! entity gazetteers and patterns — and [`Classifier::classify`] then answers in tens of
//! microseconds, offline. The only file it reads is a compiled-in table of static word vectors
//! (`vectors`), generic English distilled from all-MiniLM-L6-v2, which gives meaning to words
//! the manifest never lists. Nothing about a particular intent, agent or entity is written in
//! Rust: the same code serves any manifest.
//!
//! # Algorithm
//!
//! 1. **Text to terms.** The text is split into lower-cased words; stop words, numbers and
//!    the words of brand and region names found by the gazetteers and the units and numbers
//!    of time periods (entities say *what* and *when*, not *which intent*; a period's direction,
//!    "next" or "last", is kept) are dropped; manifest synonyms are mapped to their key; a light stemmer conflates
//!    inflections ("drifting", "drifted" → "drift"). Terms are the stems plus the bigrams of
//!    adjacent stems ("sample size", "respond best").
//! 2. **Learning.** Every utterance, every keyword, the description and the id of an intent
//!    is one document of that intent. For each term and intent the model keeps the share
//!    `r(t, i)` of the intent's documents that contain the term.
//! 3. **Scoring.** Two signals per intent, added:
//!    - *vote*: each query term votes for the intents in proportion to
//!      `p(i | t) = r(t, i) / Σⱼ r(t, j)`, weighted by its inverse intent frequency
//!      `ln(1 + K / k_t)` (K intents, k_t of them use the term) and shrunk by its support
//!      `n / (n + 1)` (a term seen in one document is weak evidence). Bigrams count a quarter
//!      of a unigram, a term that only utterances use (no intent's id, description or
//!      keywords) 0.6 of one (utterances carry incidental objects, keywords are the curated
//!      vocabulary), and the first content word one and a half when only request words
//!      ("please", "can you") precede it (the verb of "refit the forecast model" says what is
//!      asked; the subject of "is specialty a predictor" does not); these weights were chosen
//!      on leave-one-out accuracy over the manifest's utterances;
//!    - *nearest utterance*: the cosine similarity (IDF-weighted) of the query with the
//!      intent's closest utterance, times a constant;
//!    - *meaning*: after the softmax temperature (below), plus `SEMANTIC_INTENT_WEIGHT` × the
//!      mean word-vector cosine of the query to the intent's two nearest utterances (vectors
//!      centred on the mean of the manifest's utterances and negative examples).
//!
//!    A query word the model has never seen is first matched to a known spelling one edit
//!    away (insertion, deletion, substitution or adjacent transposition, found through a
//!    symmetric-delete index: "drfit", "depoly", "trian"), else to the known stem with the
//!    most character trigrams in common, at a discount.
//! 4. **Calibration.** Confidences are a softmax over the scores at a temperature fitted, in
//!    [`Classifier::new`], by leave-one-out on the manifest's own utterances (each utterance is
//!    scored by the model without it, and the temperature minimising the negative
//!    log-likelihood of the true intents is kept). Leave-one-out scores look like scores of
//!    unseen questions, so the confidence reads as a probability of being right.
//! 5. **The trained router.** The manifest's trained router ([`crate::router`], a linear
//!    model over word and character n-grams learnt ahead from the manifest's texts, its
//!    example files and a background of off-domain questions) gives its own probabilities;
//!    the two are blended geometrically (`ROUTER_WEIGHT` on the router's, or
//!    [`cascade::ROUTER_WEIGHT`] where the cascade's second router decides). The router also
//!    decides scope (below). A manifest the trainer refuses (one intent) is classified by its
//!    vocabulary alone.
//! 6. **Ambiguity and cascade.** A query is ambiguous when the top two probabilities are
//!    within `classifier.ambiguity_margin` or the top one is below `classifier.min_confidence`.
//!    [`Classifier::needs_cascade`] is the seam where a slower classifier (an embedding model
//!    or an LLM) is consulted behind this one.
//!
//! Entities ([`switchyard_model::contracts::ParsedEntity`]) come from the gazetteers (case-insensitive,
//! multi-word, longest spelling first, typo-tolerant for words of 5+ characters that are not
//! common words), the manifest's regular expressions, and a built-in grammar of time periods.
//!
//! # Layout
//!
//! - `text`: tokeniser, stop words, stemmer, edit distance.
//! - `entities`: gazetteer, pattern and time-period extraction.
//! - `scope`: the scope score, and refusal of requests aimed at the router.
//! - `vectors`: the static word-vector table and text vectors.
//! - `cascade`: the second router, with a sentence encoder, for questions in doubt.
//! - `continuation`: the learned model of whether a follow-up keeps the earlier intent.
//! - `followup`: a turn classified with the conversation before it
//!   ([`Classifier::classify_in_context`], docs/conversations.md).

mod build;
pub mod cascade;
mod continuation;
mod entities;
mod followup;
mod kinds;
mod resume;
pub(crate) mod scope_score;
mod text;
mod vectors;

pub use continuation::{ContinuationModel, ContinuationTrainer, Features as ContinuationFeatures};
use entities::EntityExtractor;
pub use followup::{FollowUp, PriorTurn};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use switchyard_model::contracts::ParsedEntity;
use switchyard_model::manifest::ClassifierSettings;

/// Whether `keyword` names no subject: every word of it is a stop, question or request word
/// ("what is", "how", "can you"). Such a keyword matches nearly any question, so the router
/// learns the shape of a question as evidence for its intent and lets off-domain questions in;
/// `switchyard validate` warns about it.
pub fn names_no_subject(keyword: &str) -> bool {
    let tokens = text::tokenize(keyword, 64);
    !tokens.is_empty() && tokens.iter().all(|t| scope_score::names_nothing(&t.text))
}

/// The classifier's hash maps and sets. Their keys are the manifest's own words and ids, built
/// once; a question's words are only looked up (the few per-question maps hold ids and
/// gazetteer values, bounded by the token limit), so nothing an attacker writes can grow a
/// map, and the unkeyed FxHash is safe here. It hashes a short word in a fraction of SipHash's
/// time; map lookups were an eighth of a classification's instructions.
pub(crate) type Map<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;
/// See [`Map`].
pub(crate) type Set<K> = HashSet<K, rustc_hash::FxBuildHasher>;

use text::{is_stop_word, stem, tokenize, trigrams, Token};

/// The FxHash of a feature's text: how a continuation model's table keys its
/// rows, so a turn is scored without a string per feature.
fn text_hash(text: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    h.write(text.as_bytes());
    h.finish()
}

/// A turn's tokens and which of them an entity covers (what the continuation model reads).
type TurnWords = (Vec<Token>, Vec<bool>);

/// At most this many words of a query are read for its intent (entities read the whole text).
const MAX_INTENT_TOKENS: usize = 512;
/// At most this many words are read for entities (a 100 KB paste stays fast).
const MAX_ENTITY_TOKENS: usize = 20_000;
/// Weight of a bigram term relative to a unigram.
const BIGRAM_WEIGHT: f64 = 0.25;
/// Weight of the vote of a term only the utterances use (not an intent's id, description or
/// keywords): utterances mix what is asked with incidental objects ("the nurse educator
/// program"), keywords are the curated vocabulary of the intent. Chosen on leave-one-out.
const UTTERANCE_ONLY_WEIGHT: f64 = 0.6;
/// Weight of the nearest-utterance similarity relative to the votes.
const NEAREST_WEIGHT: f64 = 2.0;
/// The leave-one-out temperature times this. A held-out utterance is scored without itself,
/// by a model that lost one of its ~20 examples, so it looks harder than a real question does
/// to the full model: the fitted temperature is too soft for real questions (answers at
/// confidence 0.75–0.9 were right 99 % of the time). 0.85 was chosen on 936 labelled questions
/// (docs/scope.md#calibration): 88.6 % of them at confidence >= 0.9, 99.4 % of those right.
const LOO_SHARPENING: f64 = 0.85;
/// At most this many utterances are scored to fit the temperature (every one below it).
const TEMPERATURE_SAMPLE: usize = 1_000;
/// Pseudo-count shrinking the vote of rarely seen terms: a term seen in n documents votes
/// with weight n / (n + SUPPORT_PRIOR).
const SUPPORT_PRIOR: f64 = 1.0;
/// The same pseudo-count for a term an intent's keywords, description or id use: those words
/// were chosen to name the intent, so one occurrence is stronger evidence.
const CURATED_SUPPORT_PRIOR: f64 = 0.5;
/// Weight of the first content word: in "refit the forecast model" the verb says what is
/// asked, the later nouns what it is about.
const FIRST_WORD_WEIGHT: f64 = 1.5;
/// Discount of a term reached through a one-edit spelling match.
const TYPO_TERM_WEIGHT: f64 = 0.85;
/// Discount of a term reached through a typo-tolerant match.
const FUZZY_TERM_WEIGHT: f64 = 0.7;
/// Least trigram overlap (Dice) for a typo-tolerant term match.
const MIN_TRIGRAM_DICE: f64 = 0.6;
/// Words shorter than this are never matched with typos.
const MIN_FUZZY_CHARS: usize = 5;
/// How many alternatives a classification lists.
const MAX_ALTERNATIVES: usize = 5;
/// Weight of the word-vector similarity of a query to an intent's utterances, added to the
/// tempered lexical score (in log-probability units per unit of cosine). Chosen on the tuned
/// question sets (docs/scope.md#word-vectors).
const SEMANTIC_INTENT_WEIGHT: f64 = 8.0;
/// Weight of the trained router's probabilities against the vocabulary's in their geometric
/// blend ([`blend`]). Chosen among 0.3 – 0.7 on the shipped manifest's tuned question sets and
/// dialogues (docs/scope.md#the-trained-router).
const ROUTER_WEIGHT: f64 = 0.7;
/// At most this many bytes of a question are read by the trained router.
const ROUTER_TEXT_BYTES: usize = 4 * 1024;
/// How many of an intent's nearest utterances are averaged for its similarity.
const SEMANTIC_NEAREST: usize = 2;

/// The outcome of classifying one question.
#[derive(Debug, Clone, Serialize)]
pub struct Classification {
    /// The most likely intent (a manifest intent id).
    pub intent: String,
    /// Calibrated probability that `intent` is right, 0.0 – 1.0.
    pub confidence: f64,
    /// True when the top two intents are within `ambiguity_margin` or `confidence` is below
    /// `min_confidence`.
    pub ambiguity_flag: bool,
    /// Whether the question belongs to the manifest's domain: `scope_score` reaches
    /// `classifier.scope.threshold`. An out-of-scope question is not routed to any intent.
    pub in_scope: bool,
    /// How much of the question the manifest's vocabulary and entities account for, 0.0 – 1.0.
    pub scope_score: f64,
    /// Entities found in the text, deduplicated, in text order.
    pub entities: Vec<ParsedEntity>,
    /// The best intents, best first, **including the top one**; at most five.
    pub alternatives: Vec<Alternative>,
    /// How the conversation shaped this classification; `None` when it was classified alone
    /// ([`Classifier::classify`], or no earlier turn to follow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<FollowUp>,
    /// How far the trained router's scope margin (best intent over the background) is above
    /// the calibrated threshold; negative when the router refused. `None` without a router.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router_margin: Option<f64>,
}

/// One ranked intent of a classification.
#[derive(Debug, Clone, Serialize)]
pub struct Alternative {
    /// Intent id.
    pub intent: String,
    /// Calibrated probability, 0.0 – 1.0.
    pub score: f64,
}

/// Timing of [`Classifier::classify`] over a set of queries ([`bench`]).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Median time of one classification, microseconds.
    pub median_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Number of distinct queries timed (each is timed once per round).
    pub n: usize,
}

/// An utterance kept for the nearest-utterance signal.
#[derive(Debug)]
struct Example {
    intent: usize,
    /// (term id, weight), unique term ids.
    terms: Vec<(u32, f64)>,
    /// Euclidean norm of the IDF-weighted vector.
    norm: f64,
}

/// The intent classifier and entity extractor of one manifest. Build it once per process.
#[derive(Debug)]
pub struct Classifier {
    intents: Vec<String>,
    settings: ClassifierSettings,
    /// Intent answered when the text has no usable word.
    fallback: usize,
    /// The manifest's `query.fallback_intent`, when it names one: where a question about the
    /// previous answer goes ("how did you get that number?", follow-up resolution).
    answer_intent: Option<usize>,
    /// The intent a follow-up "why did that happen?" asks for: the one the manifest's
    /// vocabulary gives that question once `answer_intent` is set aside (follow-up resolution).
    cause_intent: Option<usize>,
    /// Unigram stems and "stem stem" bigrams → term id.
    vocab: Map<String, u32>,
    /// Per term, whether it is a bigram.
    is_bigram: Vec<bool>,
    /// Character trigram → unigram term ids containing it.
    trigram_index: Map<String, Vec<u32>>,
    /// Per unigram term id, its number of trigrams (0 for bigrams).
    trigram_counts: Vec<usize>,
    /// Known spellings (manifest words and unigram stems) with their term id.
    spellings: Vec<(String, u32)>,
    /// Each spelling and each one-character deletion of it → indices into `spellings`
    /// (a symmetric-delete index: one edit or one transposition apart share a key).
    deletions: Map<String, Vec<u32>>,
    /// Weighted document counts, `counts[term * K + intent]`.
    counts: Vec<f64>,
    /// Total document weight per intent.
    totals: Vec<f64>,
    /// Per term, ln(1 + K / intents using it).
    idf: Vec<f64>,
    /// Per term, whether an intent's id, description or keywords use it (curated intent
    /// vocabulary) rather than only its example utterances (where the objects of a question,
    /// "the nurse educator program", sit beside the words that say what is asked).
    curated: Vec<bool>,
    examples: Vec<Example>,
    /// Term → examples containing it.
    postings: Vec<Vec<(u32, f64)>>,
    /// Softmax temperature fitted by leave-one-out.
    temperature: f64,
    /// Synonym word → the word it stands for.
    synonyms: Map<String, String>,
    /// Per term, how strongly it marks the manifest's domain (the scope score's evidence).
    domain_weight: Vec<f64>,
    /// Word vectors of the utterances ([`vectors::DIMS`] each, unit length), with their intent.
    utterance_vectors: Vec<(usize, [f32; vectors::DIMS])>,
    /// Word vectors of `classifier.scope.negative_examples`.
    negative_vectors: Vec<[f32; vectors::DIMS]>,
    /// Mean of the utterances' and negative examples' vectors, taken off every vector before
    /// comparing (what all texts share says nothing about which is nearer).
    vector_centre: [f32; vectors::DIMS],
    /// Word vectors of the manifest's words (utterances, negative examples), so a question in
    /// the manifest's own words needs no table search.
    known_word_vectors: Map<String, [f32; vectors::DIMS]>,
    /// `classifier.scope.refuse`, compiled.
    refused_phrases: scope_score::RefusedPhrases,
    entities: EntityExtractor,
    /// The learned continuation model follow-ups are weighed with: the manifest's own (from its
    /// router artifact, `crate::router`) or one set by hand; `None`: the rules' priors.
    pub(crate) continuation: Option<std::sync::Arc<ContinuationModel>>,
    /// The cascade for questions the router is in doubt about (`classifier.encoder`).
    pub(crate) cascade: Option<std::sync::Arc<cascade::Cascade>>,
    /// The manifest's trained router ([`crate::router`]): it decides scope and its
    /// probabilities are blended with the vocabulary's.
    router: Option<std::sync::Arc<switchyard_intents::Router>>,
}

/// How close a question's word vector is to the manifest's utterances
/// ([`Classifier::utterance_similarity`]).
struct UtteranceSimilarity {
    /// Per intent (manifest order), the mean cosine to its nearest utterances.
    per_intent: Vec<f64>,
    /// The cosine to the nearest utterance of any intent.
    nearest: f64,
}

/// A term to be learnt from or scored, before it has an id.
struct Terms {
    unigrams: Vec<String>,
    /// The lower-cased word each unigram was read from (before synonyms and stemming).
    words: Vec<String>,
    bigrams: Vec<String>,
    /// Whether the first unigram opens the request ("refit the model", "can you refit the
    /// model"): only request words come before it, so it is most likely the verb of an
    /// imperative. In "is specialty a predictor" it is not.
    leading: bool,
}

impl Classifier {
    /// The intent that answers "why did that happen?" by the manifest's own vocabulary, the
    /// explaining intent (`answer_intent`) set aside; `None` when no other intent's words
    /// score for it.
    fn intent_for_causes(&self) -> Option<usize> {
        const QUESTION: &str = "why did that happen";
        let (_, probabilities, _, _) = self.classify_parts(QUESTION, false, chrono::Utc::now());
        let probabilities = probabilities?;
        let tokens = tokenize(QUESTION, MAX_INTENT_TOKENS);
        let scores = self.scores(&self.features(&tokens, &vec![false; tokens.len()]), None);
        probabilities
            .iter()
            .enumerate()
            .filter(|&(i, _)| Some(i) != self.answer_intent && scores[i] > 0.0)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i)
    }

    /// The intents this classifier chooses from, in manifest order.
    pub fn intents(&self) -> &[String] {
        &self.intents
    }

    /// The softmax temperature fitted on the manifest's utterances.
    pub fn temperature(&self) -> f64 {
        self.temperature
    }

    /// Classifies one question: intent, calibrated confidence, ambiguity, ranked alternatives
    /// and entities. Never panics: empty or symbol-only text answers the manifest's fallback
    /// intent (else the first) with confidence 0 and the ambiguity flag set.
    pub fn classify(&self, text: &str) -> Classification {
        self.classify_at(text, chrono::Utc::now())
    }

    /// [`Classifier::classify`] with relative dates ("tomorrow", "the 14th") read at `now` (in
    /// the manifest's `timezone`) instead of the present.
    pub fn classify_at(&self, text: &str, now: chrono::DateTime<chrono::Utc>) -> Classification {
        self.classify_parts(text, false, now).0
    }

    /// This classifier with another continuation model for follow-ups (one trained on other
    /// dialogues, or an empty one to weigh follow-ups by the rules alone).
    pub fn set_continuation_model(&mut self, model: ContinuationModel) {
        self.continuation = Some(std::sync::Arc::new(model));
    }

    /// The continuation model in use.
    fn continuation_model(&self) -> Option<&ContinuationModel> {
        self.continuation.as_deref().filter(|m| !m.is_empty())
    }

    /// [`Classifier::classify`], also returning the probability of every intent (manifest
    /// order; `None` when nothing in the text scored) and, when `cues`, the follow-up cues of
    /// the text, which [`Classifier::classify_in_context`] combines with the conversation, with
    /// its tokens and which of them entities cover.
    fn classify_parts(
        &self,
        text: &str,
        cues: bool,
        now: chrono::DateTime<chrono::Utc>,
    ) -> (Classification, Option<Vec<f64>>, followup::Cues, Option<TurnWords>) {
        let tokens = tokenize(text, MAX_ENTITY_TOKENS);
        let (entities, named, taken) = self.entities.extract_with_spans(text, &tokens, now);
        let n = tokens.len().min(MAX_INTENT_TOKENS);
        let terms = self.terms(&tokens[..n], &named[..n]);
        let features = self.features_of(&terms);
        let scores = self.scores(&features, None);
        let raw_vector = vectors::text_vector_with(&tokens[..n], &self.known_word_vectors);
        let query_vector = raw_vector.as_ref().map(|v| vectors::centred(v, &self.vector_centre));
        // One pass over the utterances' vectors serves both the intents and the scope.
        let similarity = query_vector.as_ref().and_then(|q| self.utterance_similarity(q));
        let mut scope = self.scope(&tokens[..n], &named[..n], &entities);
        if self.refuses(text) {
            scope = scope_score::Scope { score: 0.0, in_scope: false, refused: true, ..scope };
        }
        self.semantic_scope(&mut scope, query_vector.as_ref(), similarity.as_ref().map(|s| s.nearest));
        let want_cues = cues;
        let cues = if want_cues {
            followup::Cues::read(&tokens[..n], &named[..n], &taken[..n], scope.content_words)
        } else {
            followup::Cues::default()
        };
        let words = want_cues.then_some((tokens, taken));
        let lexical = self.probabilities(&scores, similarity.as_ref().map(|s| &s.per_intent[..]));
        let (routed, router_margin, router_weight) = match self.route(text, raw_vector.as_ref()) {
            Some((routed, threshold, by_cascade)) => {
                let margin = f64::from(routed.scope_margin - threshold);
                let weight = if by_cascade { cascade::ROUTER_WEIGHT } else { ROUTER_WEIGHT };
                (Some(routed), Some(margin), weight)
            }
            None => (None, None, ROUTER_WEIGHT),
        };
        if let Some(routed) = &routed {
            scope.in_scope = scope.in_scope && routed.in_scope;
        }
        let probabilities = match (lexical, &routed) {
            (Some(lexical), None) => Some(lexical),
            (Some(lexical), Some(routed)) => Some(blend(&lexical, &routed.probabilities, router_weight)),
            (None, Some(routed)) => Some(routed.probabilities.iter().map(|&p| f64::from(p)).collect()),
            (None, None) => None,
        };
        let Some(probabilities) = probabilities else {
            let intent = self.intents.get(self.fallback).cloned().unwrap_or_default();
            let c = Classification {
                alternatives: vec![Alternative { intent: intent.clone(), score: 0.0 }],
                intent,
                confidence: 0.0,
                ambiguity_flag: true,
                in_scope: false,
                scope_score: scope.score,
                entities,
                follow_up: None,
                router_margin,
            };
            return (c, None, cues, words);
        };
        let mut c = Classification {
            intent: String::new(),
            confidence: 0.0,
            ambiguity_flag: true,
            in_scope: scope.in_scope,
            scope_score: scope.score,
            entities,
            alternatives: Vec::new(),
            follow_up: None,
            router_margin,
        };
        self.rank(&mut c, &probabilities);
        (c, Some(probabilities), cues, words)
    }

    /// The trained router's reading of `text` (its first [`ROUTER_TEXT_BYTES`] bytes) with the
    /// text's word vector, read again by the cascade when the router is in doubt, with the
    /// deciding router's threshold and whether the cascade's second router decided; `None`
    /// without a router or when the text has no word.
    fn route(
        &self,
        text: &str,
        vector: Option<&[f32; vectors::DIMS]>,
    ) -> Option<(switchyard_intents::Routed, f32, bool)> {
        let router = self.router.as_ref()?;
        let mut end = text.len().min(ROUTER_TEXT_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let text = &text[..end];
        if !text.chars().any(char::is_alphanumeric) {
            return None;
        }
        let routed = router.route_with(text, vector.map(|v| &v[..]));
        let doubt = self.settings.encoder.as_ref().map(|e| e.doubt);
        if let Some(cascade) = self.cascade.as_ref().filter(|_| doubt.is_some_and(|d| cascade::in_doubt(&routed, d))) {
            if let Some(second) = cascade.route(text, vector.map(|v| &v[..])) {
                return Some((second, cascade.router.threshold, true));
            }
        }
        Some((routed, router.threshold, false))
    }

    /// Sets the intent, confidence, ambiguity flag and alternatives of `c` from the
    /// probability of every intent (manifest order).
    fn rank(&self, c: &mut Classification, probabilities: &[f64]) {
        let mut ranked: Vec<(usize, f64)> = probabilities.iter().copied().enumerate().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let Some(&(best, confidence)) = ranked.first() else { return };
        let runner_up = ranked.get(1).map(|r| r.1).unwrap_or(0.0);
        c.ambiguity_flag =
            confidence - runner_up < self.settings.ambiguity_margin || confidence < self.settings.min_confidence;
        c.intent = self.intents[best].clone();
        c.confidence = confidence;
        c.alternatives = ranked
            .iter()
            .take(MAX_ALTERNATIVES)
            .map(|&(i, p)| Alternative { intent: self.intents[i].clone(), score: p })
            .collect();
    }

    /// Whether a slower classifier should be consulted behind this one: the classification is
    /// ambiguous, or its confidence is below `classifier.cascade_below` (default
    /// `min_confidence`). This is the seam for the cascaded embedding-model or LLM classifier;
    /// until one is configured callers keep this classifier's answer and its ambiguity flag.
    pub fn needs_cascade(&self, c: &Classification) -> bool {
        let below = self.settings.cascade_below.unwrap_or(self.settings.min_confidence);
        c.ambiguity_flag || c.confidence < below || c.confidence < self.settings.min_confidence
    }

    /// Stems and bigrams of the words that can signal an intent.
    fn terms(&self, tokens: &[Token], named: &[bool]) -> Terms {
        let mut unigrams = Vec::with_capacity(tokens.len());
        let mut words = Vec::with_capacity(tokens.len());
        let mut leading = true;
        for (t, &named) in tokens.iter().zip(named) {
            if unigrams.is_empty() && !text::is_request_word(&t.text) && (named || is_stop_word(&t.text)) {
                leading = false;
            }
            if named || t.has_digit() || is_stop_word(&t.text) || t.text.chars().count() < 2 {
                continue;
            }
            let word = self.synonyms.get(&t.text).map(String::as_str).unwrap_or(&t.text);
            let stemmed = stem(word);
            let stemmed = match self.synonyms.get(&stemmed) {
                Some(s) => stem(s),
                None => stemmed,
            };
            unigrams.push(stemmed);
            words.push(t.text.clone());
        }
        let bigrams = unigrams.windows(2).map(|w| format!("{} {}", w[0], w[1])).collect();
        Terms { unigrams, words, bigrams, leading }
    }

    fn intern(&mut self, term: &str, bigram: bool) -> u32 {
        if let Some(&id) = self.vocab.get(term) {
            return id;
        }
        let id = self.is_bigram.len() as u32;
        self.vocab.insert(term.to_string(), id);
        self.is_bigram.push(bigram);
        self.trigram_counts.push(0);
        self.curated.push(false);
        self.counts.extend(std::iter::repeat_n(0.0, self.intents.len()));
        id
    }

    /// Known terms of a query with their weights; unknown words go through the typo index.
    fn features(&self, tokens: &[Token], named: &[bool]) -> Vec<(u32, f64)> {
        self.features_of(&self.terms(tokens, named))
    }

    /// [`Classifier::features`] of terms already read.
    fn features_of(&self, terms: &Terms) -> Vec<(u32, f64)> {
        let mut features: Vec<(u32, f64)> = Vec::with_capacity(terms.unigrams.len() * 2);
        for (position, (u, word)) in terms.unigrams.iter().zip(&terms.words).enumerate() {
            let weight = if position == 0 && terms.leading { FIRST_WORD_WEIGHT } else { 1.0 };
            match self.vocab.get(u) {
                Some(&id) => features.push((id, weight)),
                None => {
                    if let Some(id) = self.misspelt_term(word).or_else(|| self.misspelt_term(u)) {
                        features.push((id, weight * TYPO_TERM_WEIGHT));
                    } else if let Some((id, similarity)) = self.nearest_term(u) {
                        features.push((id, weight * FUZZY_TERM_WEIGHT * similarity));
                    }
                }
            }
        }
        for b in &terms.bigrams {
            if let Some(&id) = self.vocab.get(b) {
                features.push((id, BIGRAM_WEIGHT));
            }
        }
        features.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
        features.dedup_by_key(|f| f.0);
        features
    }

    /// The term of a known spelling one edit (insertion, deletion, substitution or adjacent
    /// transposition) away from `word` ("drfit", "depoly", "forcast"); among several, the
    /// best supported.
    fn misspelt_term(&self, word: &str) -> Option<u32> {
        if word.chars().count() < MIN_FUZZY_CHARS || !word.chars().all(char::is_alphabetic) {
            return None;
        }
        let k = self.intents.len();
        let mut best: Option<(f64, u32)> = None;
        for key in deletions_of(word) {
            let Some(list) = self.deletions.get(&key) else { continue };
            for &s in list {
                let (spelling, id) = &self.spellings[s as usize];
                if text::edit_distance(word, spelling, 1) > 1 {
                    continue;
                }
                let t = *id as usize;
                let support: f64 = self.counts[t * k..(t + 1) * k].iter().sum();
                if best.is_none_or(|(b, bid)| support > b || (support == b && *id < bid)) {
                    best = Some((support, *id));
                }
            }
        }
        best.map(|(_, id)| id)
    }

    /// The known unigram sharing the most character trigrams with `word` (Dice ≥ 0.6).
    fn nearest_term(&self, word: &str) -> Option<(u32, f64)> {
        if word.chars().count() < MIN_FUZZY_CHARS || !word.chars().all(char::is_alphabetic) {
            return None;
        }
        let grams = trigrams(word);
        let mut shared: Map<u32, usize> = Map::default();
        for g in &grams {
            if let Some(ids) = self.trigram_index.get(g) {
                for &id in ids {
                    *shared.entry(id).or_insert(0) += 1;
                }
            }
        }
        shared
            .into_iter()
            .map(|(id, n)| (id, 2.0 * n as f64 / (grams.len() + self.trigram_counts[id as usize]) as f64))
            .filter(|&(_, dice)| dice >= MIN_TRIGRAM_DICE)
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
    }

    /// Raw scores per intent. `held_out` is an utterance left out (leave-one-out calibration).
    fn scores(&self, features: &[(u32, f64)], held_out: Option<usize>) -> Vec<f64> {
        let k = self.intents.len();
        let mut scores = vec![0.0; k];
        if features.is_empty() || k == 0 {
            return scores;
        }
        let held = held_out.map(|e| &self.examples[e]);
        let mut totals = self.totals.clone();
        if let Some(e) = held {
            totals[e.intent] -= 1.0;
        }
        let mut shares = vec![0.0; k];
        for &(id, weight) in features {
            let t = id as usize;
            let counts = &self.counts[t * k..(t + 1) * k];
            let mut used = 0usize;
            let mut sum = 0.0;
            for j in 0..k {
                let mut c = counts[j];
                if let Some(e) = held {
                    if e.intent == j && e.terms.iter().any(|&(x, _)| x == id) {
                        c -= 1.0;
                    }
                }
                shares[j] = if c > 0.0 && totals[j] > 0.0 { c / totals[j] } else { 0.0 };
                if shares[j] > 0.0 {
                    used += 1;
                    sum += shares[j];
                }
            }
            if used == 0 {
                continue;
            }
            let idf = (1.0 + k as f64 / used as f64).ln();
            let support: f64 = counts.iter().sum::<f64>()
                - f64::from(u8::from(held.is_some_and(|e| e.terms.iter().any(|&(x, _)| x == id))));
            let prior = if self.curated[t] { CURATED_SUPPORT_PRIOR } else { SUPPORT_PRIOR };
            let shrink = support / (support + prior);
            let weight = if self.curated[t] { weight } else { weight * UTTERANCE_ONLY_WEIGHT };
            for j in 0..k {
                scores[j] += weight * idf * shrink * shares[j] / sum;
            }
        }
        // Nearest utterance per intent.
        let query_norm = features.iter().map(|&(id, w)| (w * self.idf[id as usize]).powi(2)).sum::<f64>().sqrt();
        if query_norm > 0.0 && !self.examples.is_empty() {
            // Dense over the examples (a few hundred), with the list of those touched: no
            // hashing in the loop.
            let mut dots = vec![0.0f64; self.examples.len()];
            let mut touched: Vec<u32> = Vec::new();
            for &(id, w) in features {
                let idf2 = self.idf[id as usize].powi(2);
                for &(e, example_weight) in &self.postings[id as usize] {
                    if Some(e as usize) != held_out {
                        if dots[e as usize] == 0.0 {
                            touched.push(e);
                        }
                        dots[e as usize] += w * example_weight * idf2;
                    }
                }
            }
            let mut nearest = vec![0.0f64; k];
            for e in touched {
                let dot = dots[e as usize];
                let example = &self.examples[e as usize];
                if example.norm > 0.0 {
                    let cos = dot / (example.norm * query_norm);
                    nearest[example.intent] = nearest[example.intent].max(cos);
                }
            }
            for j in 0..k {
                scores[j] += NEAREST_WEIGHT * nearest[j];
            }
        }
        scores
    }

    /// Softmax of the lexical scores at the fitted temperature plus, per intent,
    /// `SEMANTIC_INTENT_WEIGHT` × the mean word-vector similarity of the query to the intent's
    /// nearest utterances; `None` when nothing in the text scored lexically.
    fn probabilities(&self, scores: &[f64], similarity: Option<&[f64]>) -> Option<Vec<f64>> {
        if scores.is_empty() || scores.iter().all(|s| *s <= 0.0) {
            return None;
        }
        let Some(similarity) = similarity else {
            return softmax(scores, self.temperature);
        };
        let logits: Vec<f64> =
            scores.iter().zip(similarity).map(|(s, sim)| s / self.temperature + SEMANTIC_INTENT_WEIGHT * sim).collect();
        let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exps: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
        let sum: f64 = exps.iter().sum();
        Some(exps.into_iter().map(|e| e / sum).collect())
    }

    /// Whether the scope check refuses `text` outright, whatever words of the domain it
    /// borrows: it uses one of the manifest's refused phrases (`classifier.scope.refuse`), or
    /// it is a request aimed at the router, the latter only for a manifest that names what it
    /// does not answer (negative examples; a manifest without them may route such requests to
    /// its own guardrails).
    fn refuses(&self, text: &str) -> bool {
        let scope = &self.settings.scope;
        self.refused_phrases.find(text).is_some()
            || (!scope.negative_examples.is_empty() && scope_score::aimed_at_the_router(text))
    }

    /// Remembers the word vector of each word of a manifest text.
    fn learn_word_vectors(&mut self, tokens: &[Token]) {
        for t in tokens {
            if !self.known_word_vectors.contains_key(&t.text) {
                if let Some(v) = vectors::word_vector(&t.text) {
                    self.known_word_vectors.insert(t.text.clone(), v);
                }
            }
        }
    }

    /// Takes the mean of the utterance and negative-example vectors off each of them.
    fn centre_vectors(&mut self) {
        let all: Vec<&[f32; vectors::DIMS]> =
            self.utterance_vectors.iter().map(|(_, v)| v).chain(&self.negative_vectors).collect();
        if all.is_empty() {
            return;
        }
        let mut centre = [0f32; vectors::DIMS];
        for v in &all {
            centre.iter_mut().zip(v.iter()).for_each(|(c, x)| *c += x);
        }
        centre.iter_mut().for_each(|c| *c /= all.len() as f32);
        for (_, v) in &mut self.utterance_vectors {
            *v = vectors::centred(v, &centre);
        }
        for v in &mut self.negative_vectors {
            *v = vectors::centred(v, &centre);
        }
        self.vector_centre = centre;
    }

    /// The word-vector similarity of `query` to the utterances, in one pass: per intent
    /// (manifest order) the mean cosine to its `SEMANTIC_NEAREST` nearest utterances (0 for an
    /// intent with none), and the cosine to the nearest utterance of all. `None` when the
    /// manifest has no utterance with a vector.
    fn utterance_similarity(&self, query: &[f32; vectors::DIMS]) -> Option<UtteranceSimilarity> {
        if self.utterance_vectors.is_empty() {
            return None;
        }
        let mut best = vec![[f32::NEG_INFINITY; SEMANTIC_NEAREST]; self.intents.len()];
        let mut nearest = f32::NEG_INFINITY;
        for (intent, v) in &self.utterance_vectors {
            let s = vectors::cosine(query, v);
            nearest = nearest.max(s);
            let top = &mut best[*intent];
            if let Some(slot) = top.iter().position(|t| s > *t) {
                top[slot..].rotate_right(1);
                top[slot] = s;
            }
        }
        let per_intent = best
            .iter()
            .map(|top| {
                let (sum, n) =
                    top.iter().filter(|t| t.is_finite()).fold((0.0, 0), |(sum, n), t| (sum + f64::from(*t), n + 1));
                if n == 0 {
                    0.0
                } else {
                    sum / f64::from(n)
                }
            })
            .collect();
        Some(UtteranceSimilarity { per_intent, nearest: f64::from(nearest) })
    }

    /// Leave-one-out accuracy on the manifest's utterances: how well the manifest teaches
    /// itself (a quick check when editing utterances).
    pub fn self_check(&self) -> f64 {
        if self.examples.is_empty() {
            return 0.0;
        }
        let right = (0..self.examples.len())
            .filter(|&e| {
                let scores = self.scores(&self.examples[e].terms, Some(e));
                let best =
                    scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0))).map(|(i, _)| i);
                best == Some(self.examples[e].intent)
            })
            .count();
        right as f64 / self.examples.len() as f64
    }
}

/// `word` and every string made by deleting one of its characters.
fn deletions_of(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let mut keys = Vec::with_capacity(chars.len() + 1);
    keys.push(word.to_string());
    for i in 0..chars.len() {
        keys.push(chars[..i].iter().chain(&chars[i + 1..]).collect());
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The static word vector of `text` (unit length; `None` when no word has one): the trained
/// router's dense block ([`crate::router::WordVectors`]).
pub(crate) fn text_embedding(text: &str) -> Option<[f32; vectors::DIMS]> {
    vectors::text_vector(&tokenize(text, MAX_INTENT_TOKENS))
}

/// Dimensions of [`text_embedding`].
pub(crate) const EMBEDDING_DIMS: usize = vectors::DIMS;

/// The vocabulary's and the deciding router's probabilities (manifest order) combined:
/// `p ∝ lexical^(1 − w) · router^w`, `w` being [`ROUTER_WEIGHT`] for the trained router and
/// [`cascade::ROUTER_WEIGHT`] for the cascade's second router.
fn blend(lexical: &[f64], router: &[f32], w: f64) -> Vec<f64> {
    let logs: Vec<f64> = lexical
        .iter()
        .zip(router)
        .map(|(&l, &r)| (1.0 - w) * l.max(1e-12).ln() + w * f64::from(r).max(1e-12).ln())
        .collect();
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logs.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.into_iter().map(|e| e / sum).collect()
}

/// Softmax of `scores / temperature`; `None` when every score is zero (no evidence).
fn softmax(scores: &[f64], temperature: f64) -> Option<Vec<f64>> {
    if scores.is_empty() || scores.iter().all(|s| *s <= 0.0) {
        return None;
    }
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = scores.iter().map(|s| ((s - max) / temperature).exp()).collect();
    let sum: f64 = exps.iter().sum();
    Some(exps.into_iter().map(|e| e / sum).collect())
}

mod bench;
pub use bench::{bench, bench_in_context};

#[cfg(test)]
mod tests;
