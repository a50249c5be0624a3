//! Follow-up resolution: a turn classified with the conversation before it.
//!
//! "And for Fabhalta?" names a brand and nothing else: alone it is routed at random. With the
//! conversation it means "the previous question, with Fabhalta as the brand". The rules
//! (docs/conversations.md):
//!
//! - a turn the classifier is sure of, and that is in scope, keeps its own intent — an explicit
//!   new request switches intent;
//! - otherwise (ambiguous, low confidence or out of scope alone) and when an earlier turn
//!   exists, the intent of the latest turn is carried over;
//! - entities of the latest turn are carried over unless the turn names an entity of the same
//!   type (a new brand replaces the old brand; the KPI stays); carried entities are marked
//!   [`EntitySource::Context`].
//!
//! Pure and allocation-light: it runs inside the embedded classifier's microsecond budget.

use super::{Classification, Classifier};
use crate::contracts::{EntitySource, ParsedEntity};

/// One completed turn of a conversation, as the classifier needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorTurn {
    /// The user's words.
    pub question: String,
    /// The intent the turn was resolved to.
    pub intent: String,
    /// The entities the turn was resolved with (its own and any carried over).
    pub entities: Vec<ParsedEntity>,
}

impl Classifier {
    /// Classifies `text` as the next turn after `history` (oldest first). With no history this
    /// is [`Classifier::classify`].
    pub fn classify_in_context(&self, text: &str, history: &[PriorTurn]) -> Classification {
        let mut own = self.classify(text);
        let Some(last) = history.last() else { return own };
        if self.intents().iter().all(|i| *i != last.intent) {
            return own;
        }
        let alone_is_unsure = self.needs_cascade(&own) || !own.in_scope;
        if alone_is_unsure {
            own.intent = last.intent.clone();
            own.in_scope = true;
            own.ambiguity_flag = false;
        }
        if own.intent == last.intent {
            for e in &last.entities {
                if own.entities.iter().all(|mine| mine.entity_type != e.entity_type) {
                    own.entities.push(ParsedEntity { source: EntitySource::Context, ..e.clone() });
                }
            }
        }
        own
    }
}
