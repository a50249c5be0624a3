//! Building the classifier from a manifest: term statistics, the nearest-utterance index,
//! the typo index, the entity gazetteers and patterns, and the calibration temperature.

use super::*;
use entities::EntityExtractor;
use std::sync::Arc;
use switchyard_intents::Router;
use switchyard_model::manifest::Manifest;
use text::{tokenize, trigrams};

impl Classifier {
    /// The classifier of `manifest` by its vocabulary alone, without a trained router.
    pub fn lexical(manifest: &Manifest) -> Classifier {
        Classifier::with_router(manifest, None)
    }

    /// Learns the classifier from the manifest: term statistics, the nearest-utterance index,
    /// the typo index, the entity gazetteers and patterns, and the calibration temperature;
    /// `router` (trained on this manifest's intents, in its order) decides scope and weighs the
    /// intents. A router of other intents is not used.
    pub fn with_router(manifest: &Manifest, router: Option<Arc<Router>>) -> Classifier {
        let settings = manifest.classifier.clone();
        let intents: Vec<String> = manifest.intents.iter().map(|i| i.id.clone()).collect();
        let k = intents.len();
        let fallback =
            manifest.query.fallback_intent.as_ref().and_then(|f| intents.iter().position(|i| i == f)).unwrap_or(0);

        let mut synonyms = Map::default();
        for (word, variants) in &settings.synonyms {
            let word = word.to_lowercase();
            for v in variants {
                synonyms.insert(v.to_lowercase(), word.clone());
            }
        }
        // Documents: (intent, text, is an utterance).
        let mut documents: Vec<(usize, String, bool)> = Vec::new();
        for (i, intent) in manifest.intents.iter().enumerate() {
            documents.push((i, intent.id.replace(['_', '-'], " "), false));
            if !intent.description.trim().is_empty() {
                documents.push((i, intent.description.clone(), false));
            }
            for keyword in &intent.keywords {
                documents.push((i, keyword.clone(), false));
            }
            for utterance in &intent.utterances {
                documents.push((i, utterance.clone(), true));
            }
        }
        // Words of the manifest's own text are never read as typos of an entity.
        let mut common_words: Set<String> = text::STOP_WORDS.iter().map(|w| (*w).to_string()).collect();
        for (_, text, _) in &documents {
            common_words.extend(tokenize(text, MAX_INTENT_TOKENS).into_iter().map(|t| t.text));
        }

        let mut classifier = Classifier {
            intents,
            settings,
            fallback,
            answer_intent: manifest
                .query
                .fallback_intent
                .as_ref()
                .and_then(|f| manifest.intents.iter().position(|i| i.id == *f)),
            cause_intent: None,
            vocab: Map::default(),
            is_bigram: Vec::new(),
            trigram_index: Map::default(),
            trigram_counts: Vec::new(),
            spellings: Vec::new(),
            deletions: Map::default(),
            counts: Vec::new(),
            totals: vec![0.0; k],
            idf: Vec::new(),
            curated: Vec::new(),
            examples: Vec::new(),
            postings: Vec::new(),
            temperature: 1.0,
            synonyms,
            domain_weight: Vec::new(),
            utterance_vectors: Vec::new(),
            negative_vectors: Vec::new(),
            vector_centre: [0.0; vectors::DIMS],
            known_word_vectors: Map::default(),
            refused_phrases: scope_score::RefusedPhrases::new(&manifest.classifier.scope.refuse),
            entities: EntityExtractor::new(manifest, common_words),
            continuation: None,
            cascade: None,
            router: None,
        };

        let mut example_terms: Vec<(usize, Vec<u32>, Option<u32>)> = Vec::new();
        let mut spellings: Map<String, String> = Map::default();
        for (intent, text, is_utterance) in &documents {
            let tokens = tokenize(text, MAX_INTENT_TOKENS);
            let (_, named) = classifier.entities.extract(text, &tokens);
            classifier.learn_word_vectors(&tokens);
            if *is_utterance {
                if let Some(v) = vectors::text_vector(&tokens) {
                    classifier.utterance_vectors.push((*intent, v));
                }
            }
            let terms = classifier.terms(&tokens, &named);
            for (word, unigram) in terms.words.iter().zip(&terms.unigrams) {
                spellings.entry(word.clone()).or_insert_with(|| unigram.clone());
                spellings.entry(unigram.clone()).or_insert_with(|| unigram.clone());
            }
            let first = terms.unigrams.first().filter(|_| terms.leading).map(|u| classifier.intern(u, false));
            let mut ids: Vec<u32> = Vec::with_capacity(terms.unigrams.len() + terms.bigrams.len());
            for u in &terms.unigrams {
                ids.push(classifier.intern(u, false));
            }
            for b in &terms.bigrams {
                ids.push(classifier.intern(b, true));
            }
            ids.sort_unstable();
            ids.dedup();
            for &id in &ids {
                classifier.counts[id as usize * k + intent] += 1.0;
                if !*is_utterance {
                    classifier.curated[id as usize] = true;
                }
            }
            classifier.totals[*intent] += 1.0;
            if *is_utterance {
                example_terms.push((*intent, ids, first));
            }
        }
        let terms = classifier.is_bigram.len();
        classifier.idf = (0..terms)
            .map(|t| {
                let used = classifier.counts[t * k..(t + 1) * k].iter().filter(|c| **c > 0.0).count();
                if used == 0 {
                    0.0
                } else {
                    (1.0 + k as f64 / used as f64).ln()
                }
            })
            .collect();
        classifier.postings = vec![Vec::new(); terms];
        for (intent, ids, first) in example_terms {
            let terms: Vec<(u32, f64)> = ids
                .iter()
                .map(|&id| {
                    let weight = if classifier.is_bigram[id as usize] {
                        BIGRAM_WEIGHT
                    } else if Some(id) == first {
                        FIRST_WORD_WEIGHT
                    } else {
                        1.0
                    };
                    (id, weight)
                })
                .collect();
            let norm = terms.iter().map(|&(id, w)| (w * classifier.idf[id as usize]).powi(2)).sum::<f64>().sqrt();
            let e = classifier.examples.len() as u32;
            for &(id, w) in &terms {
                classifier.postings[id as usize].push((e, w));
            }
            classifier.examples.push(Example { intent, terms, norm });
        }
        for (word, &id) in &classifier.vocab {
            if classifier.is_bigram[id as usize] || word.chars().count() < 4 {
                continue;
            }
            let grams = trigrams(word);
            classifier.trigram_counts[id as usize] = grams.len();
            for g in grams {
                classifier.trigram_index.entry(g).or_default().push(id);
            }
        }
        let mut spellings: Vec<(String, String)> = spellings.into_iter().collect();
        spellings.sort();
        for (word, unigram) in spellings {
            if word.chars().count() < MIN_FUZZY_CHARS - 1 || !word.chars().all(char::is_alphabetic) {
                continue;
            }
            let Some(&id) = classifier.vocab.get(&unigram) else { continue };
            let s = classifier.spellings.len() as u32;
            for key in deletions_of(&word) {
                let list = classifier.deletions.entry(key).or_default();
                if list.last() != Some(&s) {
                    list.push(s);
                }
            }
            classifier.spellings.push((word, id));
        }
        let mut negative_counts = vec![0.0; classifier.is_bigram.len()];
        let negatives = classifier.settings.scope.negative_examples.clone();
        for text in &negatives {
            let tokens = tokenize(text, MAX_INTENT_TOKENS);
            let (_, named) = classifier.entities.extract(text, &tokens);
            classifier.learn_word_vectors(&tokens);
            if let Some(v) = vectors::text_vector(&tokens) {
                classifier.negative_vectors.push(v);
            }
            let mut ids: Vec<u32> = classifier
                .terms(&tokens, &named)
                .unigrams
                .iter()
                .filter_map(|u| classifier.vocab.get(u))
                .copied()
                .collect();
            ids.sort_unstable();
            ids.dedup();
            for id in ids {
                negative_counts[id as usize] += 1.0;
            }
        }
        let mut named_words: Vec<u32> = Vec::new();
        for intent in &manifest.intents {
            let words = std::iter::once(intent.id.replace(['_', '-'], " "))
                .chain(intent.keywords.iter().filter(|k| !k.trim().contains(' ')).cloned());
            for text in words {
                let tokens = tokenize(&text, MAX_INTENT_TOKENS);
                let named = vec![false; tokens.len()];
                named_words
                    .extend(classifier.terms(&tokens, &named).unigrams.iter().filter_map(|u| classifier.vocab.get(u)));
            }
        }
        named_words.sort_unstable();
        named_words.dedup();
        let negative_total = negatives.len() as f64;
        classifier.centre_vectors();
        classifier.domain_weight =
            scope_score::domain_weights(&classifier, &named_words, &negative_counts, negative_total);
        classifier.temperature = classifier.fit_temperature();
        classifier.router = router.filter(|r| r.intents == classifier.intents);
        classifier.cause_intent = classifier.intent_for_causes();
        classifier
    }
}

impl Classifier {
    /// Leave-one-out over the utterances: the temperature minimising the negative
    /// log-likelihood of the true intents. 1.0 when there is nothing to fit on.
    fn fit_temperature(&self) -> f64 {
        if self.intents.len() < 2 {
            return 1.0;
        }
        // A fixed, evenly spread sample: the fit settles long before every utterance of a
        // large manifest is scored, and building the classifier stays bounded.
        let stride = self.examples.len().div_ceil(TEMPERATURE_SAMPLE).max(1);
        let held_out: Vec<(usize, Vec<f64>)> = (0..self.examples.len())
            .step_by(stride)
            .map(|e| {
                let features: Vec<(u32, f64)> = self.examples[e].terms.clone();
                (self.examples[e].intent, self.scores(&features, Some(e)))
            })
            .filter(|(_, s)| s.iter().any(|x| *x > 0.0))
            .collect();
        if held_out.is_empty() {
            return 1.0;
        }
        let mut best = (f64::INFINITY, 1.0);
        for step in 0..80 {
            let t = 0.02 * 1.08f64.powi(step);
            let nll: f64 = held_out
                .iter()
                .map(|(truth, s)| softmax(s, t).map(|p| -(p[*truth].max(1e-12)).ln()).unwrap_or(0.0))
                .sum();
            if nll < best.0 {
                best = (nll, t);
            }
        }
        best.1 * LOO_SHARPENING
    }
}
