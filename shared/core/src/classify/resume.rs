//! The turn after a question for missing entities ([`crate::slots`]): does it supply them and
//! go on with the open request, or ask for something else?

use super::text::{is_stop_word, tokenize};
use super::{Classification, Classifier, PriorTurn, MAX_ENTITY_TOKENS};
use crate::slots::Pending;
use chrono::{DateTime, Utc};
use switchyard_model::contracts::{EntitySource, ParsedEntity};

/// Most words besides entity values and stop words an answer to "What is the city you fly
/// to?" may have and still be only that answer ("Vienna, please", "I'd say Vienna").
const ANSWER_WORDS: usize = 2;
/// Confidence of a turn that supplies what the open request lacked: the request's intent was
/// asked about, and the turn answered.
const RESUMED_CONFIDENCE: f64 = 0.9;

impl Classifier {
    /// Classifies `text` as the next turn after `history` (as
    /// [`Classifier::classify_in_context_at`]) when the latest turn left `pending` slots open.
    ///
    /// The turn goes on with the pending intent when it names an entity of a missing type and
    /// either the conversation already keeps the intent or the turn has at most a couple of
    /// words besides its values ("Vienna on the 14th"); its entities then are its own plus the
    /// ones gathered so far (`source: context`). Otherwise (another request, or nothing of what
    /// was missing) it is classified as any next turn.
    pub fn resume(
        &self,
        text: &str,
        history: &[PriorTurn],
        pending: Option<Pending<'_>>,
        now: DateTime<Utc>,
    ) -> Classification {
        let mut c = self.classify_in_context_at(text, history, now);
        let Some(pending) = pending else { return c };
        if !self.intents.iter().any(|i| i == pending.intent) {
            return c;
        }
        let own: Vec<ParsedEntity> = c.entities.iter().filter(|e| e.source != EntitySource::Context).cloned().collect();
        let supplies = own.iter().any(|e| pending.missing.contains(&e.entity_type));
        if !supplies {
            return c;
        }
        let keeps_intent = c.intent == pending.intent && c.in_scope;
        if !keeps_intent && self.words_besides_entities(text, now) > ANSWER_WORDS {
            return c;
        }
        let mut entities = own;
        for e in pending.entities {
            let named = entities.iter().any(|m| m.entity_type == e.entity_type);
            if !named {
                entities.push(ParsedEntity { source: EntitySource::Context, ..e.clone() });
            }
        }
        c.intent = pending.intent.to_string();
        c.confidence = c.confidence.max(RESUMED_CONFIDENCE);
        c.ambiguity_flag = false;
        c.in_scope = true;
        c.scope_score = c.scope_score.max(self.settings.scope.threshold);
        c.entities = entities;
        c
    }

    /// Words of `text` that are neither an entity's nor stop words.
    fn words_besides_entities(&self, text: &str, now: DateTime<Utc>) -> usize {
        let tokens = tokenize(text, MAX_ENTITY_TOKENS);
        let (_, _, taken) = self.entities.extract_with_spans(text, &tokens, now);
        tokens.iter().zip(&taken).filter(|(t, taken)| !**taken && !is_stop_word(&t.text)).count()
    }
}
