//! Follow-up resolution: a turn classified with the conversation before it.
//!
//! "And for Fabhalta?" names a brand and nothing else: alone it is routed at random. With the
//! conversation it means "the previous question, with Fabhalta as the brand". The rules, in
//! full in docs/conversations.md:
//!
//! - **Intent.** The earlier turn's intent is a prior, the turn's own classification the
//!   evidence: `P(i | turn, history) ∝ P(i | turn) · prior(i)` with `prior(last) = ρ` and the
//!   rest `(1 − ρ) / (K − 1)`. `ρ` is the learned continuation model's probability that the
//!   turn keeps the earlier intent ([`super::continuation`]: naive Bayes over the turn's masked
//!   words and the cues below, trained on the labelled dialogues); without a model it is a
//!   hand-set rate, higher when the turn opens like a continuation ("and", "what about",
//!   "same …", "… instead"). A turn that only changes an entity, a period or a
//!   region has little intent evidence of its own, so the prior wins and the intent is carried
//!   over; an explicit new request ("Now design an A/B test to confirm that") is evidence
//!   strong enough to switch. The confidence is that posterior: calibrated when the
//!   classifier's probabilities are and `ρ` is the rate at which such turns keep the intent.
//!   A correction ("sorry, I meant NRx") and a breakdown ("ok now by specialty") are
//!   continuations that change one thing: the prior decides. A continuation that asks a new
//!   question of its own about the same subject ("and what will it be next quarter?") is
//!   weighed like any follow-up, so its own evidence can switch the intent. "Why did that
//!   happen?" (why, a word pointing back, a verb, and not about the assistant) asks for the
//!   cause of what the previous answer reported: the prior favours the manifest's intent for
//!   causes, the one its vocabulary gives "why did that happen" once the explaining intent is
//!   set aside.
//! - **Entities.** When the intent is kept, or the turn points back ("that", "it", "there"),
//!   opens like a continuation, or is a short request naming no brand, region or KPI of its own
//!   ("ok, design a test to check"), the earlier turn's entities are carried over for every
//!   type the turn does not name itself (a new brand replaces the old brand; the KPI stays);
//!   carried entities are marked [`EntitySource::Context`]. A turn that says it changes the
//!   subject ("unrelated, but …", "different question: …") carries nothing.
//! - **Scope.** A turn that alone is out of scope but reads as a follow-up (it points back,
//!   continues, names an entity, or only asks "why?") counts as in scope when its scope score
//!   reaches a share of the threshold: "How did you arrive at that number?" belongs to the
//!   conversation, "What about the weather tomorrow?" still does not.
//!
//! Only the latest few turns are read (the latest one whose intent the manifest knows), and
//! only their intent and entities: it runs inside the embedded classifier's microsecond budget.

use super::continuation::add_word_features;
use super::text::Token;
use super::{Classification, Classifier, ContinuationFeatures, ContinuationTrainer};
use serde::Serialize;
use switchyard_model::contracts::{EntitySource, ParsedEntity};

/// At most this many of the latest turns are searched for one whose intent the manifest knows
/// (an out-of-scope or unknown turn in between is skipped, an older conversation is not
/// revived).
const LOOKBACK: usize = 3;
/// Prior probability that a turn opening like a continuation ("and …", "what about …",
/// "same …", "… instead") keeps the earlier turn's intent, when the manifest has no
/// continuation model of its own (or an empty one: [`Classifier::set_continuation_model`]).
const CARRY_PRIOR_CONTINUATION: f64 = 0.97;
/// Prior probability that any other follow-up keeps the earlier turn's intent (without a
/// continuation model): a follow-up is most often about the same request ("can that be
/// waived?", "how long does that take?"), and only a turn whose own words clearly ask for
/// another intent switches. Chosen among 0.17 – 0.95 on the first-time manifests' first two
/// follow-up sets (docs/conversations.md).
const CARRY_PRIOR_PLAIN: f64 = 0.9;
/// Prior probability that a question about the previous answer ("how did you get that?")
/// asks for the manifest's fallback intent.
const ANSWER_PRIOR: f64 = 0.75;
/// A follow-up that is out of scope alone counts as in scope when its scope score reaches this
/// share of `classifier.scope.threshold`.
const FOLLOW_UP_SCOPE_SHARE: f64 = 0.7;
/// How far below its threshold the trained router's scope margin may be for a follow-up whose
/// words the manifest's vocabulary accounts for to count as in scope.
const CONVERSATION_ROUTER_SLACK: f64 = 0.5;
/// At most this many entities are carried over from an earlier turn.
const MAX_CARRIED_ENTITIES: usize = 20;
/// Prior probability that "why did that happen?" asks for the manifest's intent for causes.
const CAUSE_PRIOR: f64 = 0.75;
/// A request with at most this many content words and no brand, region or KPI of its own
/// ("ok, design a test to check") is about the conversation's subject: its entities carry.
const SHORT_REQUEST_WORDS: usize = 3;

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

/// How the conversation shaped a classification ([`Classification::follow_up`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FollowUp {
    /// Which earlier turn the classification follows: 1 is the latest.
    pub turns_back: usize,
    /// The intent of that turn.
    pub prior_intent: String,
    /// The intent the turn would have been given alone.
    pub alone_intent: String,
    /// The confidence it would have had alone.
    pub alone_confidence: f64,
    /// Whether it would have been in scope alone.
    pub alone_in_scope: bool,
    /// Whether the turn opens like a continuation ("and …", "what about …", "same …").
    pub continuation: bool,
    /// Whether the turn points back to the conversation ("that", "it", "there", "those").
    pub refers_back: bool,
    /// How many entities were carried over.
    pub carried_entities: usize,
}

/// What the words of a turn say about it being a follow-up.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Cues {
    /// It opens like a continuation, or says "instead", "too", "as well".
    continuation: bool,
    /// A word points back to the conversation.
    refers_back: bool,
    /// It asks (a question word) without any content word: "why?", "how so?".
    bare_question: bool,
    /// It asks the assistant about what it said: a question word, "you" and a word pointing
    /// back ("How did you get those figures?", "Why did you pick that method?").
    about_answer: bool,
    /// It has no content word at all, only entities, periods and function words ("And in Q1?").
    no_content: bool,
    /// At most one content word besides what it names ("And for the whole of 2027?"), not
    /// counting the words of a correction ("sorry", "meant").
    at_most_one_content_word: bool,
    /// It corrects the previous question: "sorry, I meant NRx", "actually, Leqvio".
    correction: bool,
    /// It asks for the same analysis broken down another way: "ok now by specialty".
    breakdown: bool,
    /// After its opening it asks a question of its own, with a verb: "and what will it be next
    /// quarter?" (not "and what about Leqvio?").
    own_question: bool,
    /// "Why did that happen?": why, a word pointing back and a verb, not about the assistant.
    why_it_happened: bool,
    /// It says it changes the subject: "unrelated, but …", "different question", "by the way".
    new_subject: bool,
    /// It narrows the previous request to a subset: "just the community oncologists", "only for
    /// Q4", "limit it to the South West", or constrains it after the opening ("and only HCPs
    /// that …", "and cap the total at …"). Its words name the subset or the constraint, not a
    /// request.
    restricts: bool,
    /// It asks what a term means ("what does conditional average treatment effect mean in that
    /// output?"): a request for an explanation whatever intent the term's own words belong to.
    asks_meaning: bool,
    /// Its number of content words (the scope score's count).
    content_words: usize,
}

/// First words that continue the previous question: "And for Fabhalta?", "Same for the West",
/// "I meant Leqvio", "now by specialty".
fn opens_continuation(first: &str, second: Option<&str>) -> bool {
    matches!(first, "and" | "also" | "plus" | "same" | "ditto" | "likewise" | "similarly" | "again" | "just" | "by")
        || matches!((first, second), ("what" | "how", Some("about")) | ("what", Some("of")))
        || matches!((first, second), ("now" | "then", Some("for" | "in" | "with" | "the" | "by")))
        || matches!((first, second), ("i", Some("meant" | "mean")))
        // "break that out for the Midwest", "split it by specialty": the same request, cut finer.
        || matches!((first, second), ("break" | "split" | "slice", Some("that" | "it" | "this" | "out" | "down")))
        // "split by region pls", "broken out by month through H2": the same, without the object.
        || matches!((first, second), ("break" | "split" | "slice", Some("by")) | ("broken", Some("out" | "down" | "by")))
        // "now swap in Leqvio", "switch to the West": the same request about another entity
        // ("swap" alone is a deployment word).
        || matches!((first, second), ("swap" | "switch", Some("in" | "to")) | ("now" | "then", Some("swap" | "switch")))
        // "switch that to market share", "change it to NRx", "redo it with ROI as the goal", "go
        // back to the same stretch in 2023".
        || matches!((first, second), ("redo" | "rerun" | "repeat", Some("it" | "that" | "this" | "the")) | ("go", Some("back")))
        || matches!((first, second), ("swap" | "switch" | "change", Some("that" | "it" | "this")))
        // "now as market share", "ok now on share": the same request in another measure.
        || matches!((first, second), ("now" | "then", Some("as" | "on")))
        // "push that out to Q4", "move it back a quarter": the same request, another period.
        || matches!((first, second), ("push" | "move" | "shift", Some("that" | "it" | "this")))
        // "now look at retention", "focus on conversion", "zoom in on the West": the same
        // request, narrowed to another subject.
        || matches!((first, second), ("now" | "then", Some("look" | "focus" | "zoom" | "narrow")))
        || matches!((first, second), ("look", Some("at")) | ("focus" | "zoom" | "narrow", Some("on" | "in" | "to")))
        // "now do retention", "do it for the West": the same request, run again on another entity.
        || matches!((first, second), ("now" | "then", Some("do")) | ("do", Some("it" | "that" | "this")))
        // "do the same for the Entresto one".
        || matches!((first, second), ("do", Some("the" | "same")))
}

/// Words that open a correction of the previous question ("sorry, I meant NRx", "actually,
/// Leqvio", "no, the Midwest"); they say nothing about the intent.
fn is_correction(word: &str) -> bool {
    matches!(word, "sorry" | "oops" | "actually" | "correction" | "no" | "nope" | "rather" | "meant" | "mean")
}

/// Auxiliaries and modals that make a question of its own: "what *will* it be", "why *did* …".
fn is_auxiliary(word: &str) -> bool {
    matches!(
        word,
        "will"
            | "would"
            | "did"
            | "does"
            | "do"
            | "is"
            | "are"
            | "was"
            | "were"
            | "can"
            | "could"
            | "should"
            | "has"
            | "have"
            | "had"
            | "shall"
            | "might"
            | "may"
    )
}

/// Openings that say the turn changes the subject: "unrelated, but …", "different question:
/// …", "by the way, …".
fn says_new_subject(words: &[&str]) -> bool {
    let opening = |n: usize| words.get(..n).unwrap_or(&[]);
    matches!(opening(1), ["unrelated" | "separately" | "btw" | "aside" | "switching" | "changing"])
        || matches!(opening(2), ["different" | "new" | "another" | "separate", "question" | "topic" | "subject"])
        || matches!(opening(2), ["side", "note"])
        || opening(3) == ["by", "the", "way"]
}

/// Words anywhere that mark a variation of the previous question: "Look at Leqvio instead".
fn marks_variation(word: &str) -> bool {
    matches!(word, "instead" | "too" | "same" | "likewise" | "only")
}

/// Words that constrain the previous request when they follow its opening: "and only HCPs
/// that haven't written it yet", "ok and restrict to patients who started in Q4 2024", "and cap
/// the total at 2,000 calls a month", "and assume the budget is flat".
fn constrains(word: &str) -> bool {
    matches!(
        word,
        "only" | "just" | "restrict" | "limit" | "cap" | "exclude" | "excluding" | "without" | "assume" | "assuming"
    )
}

/// Verbs of a breakdown: "split it by specialty", "break that out by region".
fn cuts_finer(word: &str) -> bool {
    matches!(word, "split" | "break" | "broken" | "slice" | "segment" | "cut")
}

/// Verbs (and their particles) that open a continuation by asking to run the request again,
/// moved or changed: "go back to 2023", "redo it with ROI", "push that out to Q4".
fn repeats_the_request(word: &str) -> bool {
    matches!(
        word,
        "go" | "back"
            | "redo"
            | "rerun"
            | "repeat"
            | "push"
            | "move"
            | "shift"
            | "out"
            | "swap"
            | "switch"
            | "change"
            | "look"
            | "focus"
            | "zoom"
            | "narrow"
            | "do"
    )
}

/// Words that point back to something said before.
fn points_back(word: &str) -> bool {
    matches!(word, "that" | "this" | "it" | "its" | "those" | "these" | "them" | "they" | "their" | "same" | "such")
}

/// Words before the opening that say nothing: "ok, and for Fabhalta?", "sorry, I meant NRx".
fn is_politeness(word: &str) -> bool {
    matches!(
        word,
        "please"
            | "pls"
            | "kindly"
            | "ok"
            | "okay"
            | "hey"
            | "hi"
            | "so"
            | "well"
            | "right"
            | "thanks"
            | "sorry"
            | "oops"
            | "actually"
            | "correction"
            | "no"
            | "nope"
            | "oh"
            | "ah"
            | "wait"
            | "hmm"
            | "great"
            | "cool"
            | "fine"
            | "good"
            | "perfect"
            | "interesting"
            | "ugh"
            | "but"
    )
}

fn is_be(word: &str) -> bool {
    matches!(word, "is" | "are" | "was" | "were" | "be" | "been" | "isn't" | "aren't")
}

fn is_question_word(word: &str) -> bool {
    matches!(word, "why" | "how" | "what" | "which" | "who" | "where" | "when")
}

/// Words after which a turn names what it replaces: "not Cosentyx", "instead of share".
const NEGATION_CUES: [&str; 3] = ["not ", "instead of ", "rather than "];
/// How far after a negation cue an entity is looked for (bytes of the text, up to a clause break).
const NEGATED_SPAN_BYTES: usize = 40;

impl Classifier {
    /// "Sorry, I meant Leqvio, not Cosentyx": in a follow-up, an entity the turn names right
    /// after "not" (or "instead of", "rather than") is the one being replaced,
    /// so it is dropped when the turn names another of the same type. What follows the cue is
    /// read by the entity extractor, so an alias ("not remi"), a KPI's short form ("not share")
    /// or a typo is recognised as the entity it spells.
    fn drop_negated(&self, text: &str, entities: &mut Vec<ParsedEntity>) {
        let lower = text.to_lowercase();
        let mut negated: Vec<(String, String)> = Vec::new();
        for cue in NEGATION_CUES {
            for (at, _) in lower.match_indices(cue) {
                let word_start = lower[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
                if !word_start {
                    continue;
                }
                let rest = &lower[at + cue.len()..];
                let end = rest
                    .char_indices()
                    .find(|&(i, c)| i >= NEGATED_SPAN_BYTES || matches!(c, ',' | '.' | ';' | '?' | '!' | ')'))
                    .map_or(rest.len(), |(i, _)| i);
                let span = &rest[..end];
                let tokens = super::text::tokenize(span, 16);
                let (found, _) = self.entities.extract(span, &tokens);
                negated.extend(found.into_iter().map(|e| (e.entity_type, e.value)));
            }
        }
        if negated.is_empty() {
            return;
        }
        let is_negated = |e: &ParsedEntity| negated.iter().any(|(t, v)| *t == e.entity_type && *v == e.value);
        let keep: Vec<bool> = entities
            .iter()
            .map(|e| !is_negated(e) || !entities.iter().any(|o| o.entity_type == e.entity_type && !is_negated(o)))
            .collect();
        let mut keep = keep.into_iter();
        entities.retain(|_| keep.next().unwrap_or(true));
    }
}

impl Cues {
    /// Reads the cues of a tokenised turn (`named`: the tokens entities took from the intent's
    /// evidence; `taken`: the tokens any entity covers; `content_words`: the scope score's
    /// count of content words).
    pub(super) fn read(tokens: &[Token], named: &[bool], taken: &[bool], content_words: usize) -> Cues {
        let words: Vec<&str> = tokens
            .iter()
            .zip(named)
            .filter(|(t, named)| !**named && t.text.chars().any(char::is_alphabetic))
            .map(|(t, _)| t.text.as_str())
            .collect();
        let skipped = words.iter().take_while(|w| is_politeness(w)).count();
        let mut opening = words[skipped..].iter().copied();
        let first = opening.next();
        let second = opening.next();
        let opens = first.is_some_and(|f| opens_continuation(f, second));
        let correction = words[..skipped].iter().any(|w| is_correction(w))
            || matches!((first, second), (Some("i"), Some("meant" | "mean")));
        // A correction that asks nothing of its own ("oops, not share, I meant NRx") is about
        // the previous request; "sorry, what does that mean?" is a question of its own.
        let corrects_the_request = correction && !words[skipped..].iter().any(|w| is_question_word(w));
        // "how does that look in the Northwest", "how did 2023 look?": the same request seen for
        // the entity or period the turn names.
        let names_an_entity = taken.iter().any(|&t| t);
        // So are "how does that picture change for the Entresto model?", "how does that compare
        // with the Entresto one?" (pointing back) and "can you look at it in terms of share?".
        let refers_back_early = words.iter().take(8).any(|w| points_back(w));
        let how_it_looks = words.get(skipped) == Some(&"how")
            && words[skipped..].iter().take(6).any(|w| {
                matches!(*w, "look" | "looks" | "looking")
                    || (refers_back_early && matches!(*w, "change" | "changes" | "compare" | "compares"))
            });
        let look_at_it = words.windows(3).any(|w| w[0] == "look" && w[1] == "at" && points_back(w[2]));
        let looks_for_an_entity = (how_it_looks || look_at_it) && names_an_entity;
        let restricts = matches!(
            (first, second),
            (Some("just" | "only"), Some("the" | "for" | "in" | "among" | "within"))
                | (Some("limit" | "restrict" | "filter" | "narrow"), Some("it" | "that" | "this" | "to" | "down"))
                | (Some("use" | "keep"), Some("only" | "just"))
                | (Some("keep"), Some("it" | "that" | "this"))
                // "assume headcount stays flat", "assuming the budget is capped": a premise
                // the previous request is to be answered under.
                | (Some("assume" | "assuming" | "suppose" | "supposing"), _)
        ) || (opens && second.is_some_and(constrains));
        let opens_or_restricts = opens
            || restricts
            || looks_for_an_entity
            || corrects_the_request
            || words.iter().any(|w| marks_variation(w))
            || words.windows(2).any(|w| w == ["as", "well"]);
        let breakdown = opens_or_restricts && words.windows(2).any(|w| w[0] == "by" && !is_auxiliary(w[1]));
        // "and what will it be …": after the opening word, a question word then an auxiliary.
        let rest = if opens && !matches!(second, Some("about" | "of")) { &words[skipped + 1..] } else { &[][..] };
        let own_question =
            rest.first().is_some_and(|w| is_question_word(w)) && rest.iter().skip(1).take(2).any(|w| is_auxiliary(w));
        let refers_back = words.iter().enumerate().any(|(i, w)| {
            points_back(w)
                // "there" points back unless it is existential: "is there", "there are".
                || (*w == "there"
                    && !(i > 0 && is_be(words[i - 1]))
                    && !words.get(i + 1).is_some_and(|next| is_be(next)))
        });
        // "… when you get a sec", "… when you can": courtesy, not a question.
        let asks = words.iter().enumerate().any(|(i, w)| {
            is_question_word(w)
                && !(*w == "when"
                    && words.get(i + 1) == Some(&"you")
                    && matches!(words.get(i + 2).copied(), Some("get" | "have" | "can")))
        });
        let bare_question = content_words == 0 && asks;
        // "How did you calculate the potential?": asking what the assistant did is asking
        // about its answer, even without a word pointing back.
        let did_you = words.windows(2).any(|w| w == ["did", "you"]);
        let about_answer = asks && (refers_back || did_you) && words.iter().any(|w| matches!(*w, "you" | "your"));
        // "what does X mean (here)?", "what is meant by X?", "how confident is that? what does
        // the range actually tell me?" (the "what" may open a later sentence): not "what does
        // that mean for Q3?", which asks about a consequence, nor "what is the mean TRx?", an
        // average.
        let asks_meaning = words.iter().enumerate().skip(skipped).any(|(m, w)| {
            let what = words[skipped..m].iter().rposition(|a| *a == "what").map(|p| skipped + p);
            let auxiliary_between =
                || what.is_some_and(|p| words[p + 1..m].iter().any(|a| matches!(*a, "does" | "do" | "did")));
            let next = words.get(m + 1).copied();
            match *w {
                "mean" => auxiliary_between() && !matches!(next, Some("for" | "to" | "if" | "when")),
                "tell" => auxiliary_between() && matches!(next, Some("me" | "us")),
                "meant" => what.is_some() && next == Some("by"),
                _ => false,
            }
        });
        let why_it_happened = words[skipped..].first() == Some(&"why")
            && refers_back
            && !about_answer
            && words[skipped..].iter().skip(1).take(2).any(|w| is_auxiliary(w));
        // Words of a correction, and the words of a KPI ("new patient starts"), that the scope
        // score counted as content words: they change what is asked about, not what is asked.
        let correction_words = if correction {
            words.iter().filter(|w| is_correction(w) && !super::text::is_stop_word(w)).count()
        } else {
            0
        };
        let entity_words = tokens
            .iter()
            .zip(named.iter().zip(taken))
            .filter(|(t, (&named, &taken))| {
                taken && !named && t.text.chars().count() >= 2 && !t.has_digit() && !super::text::is_stop_word(&t.text)
            })
            .count();
        // "… instead", "… too": the words that make the turn a variation are not its subject.
        let variation_words = words.iter().filter(|w| marks_variation(w) && !super::text::is_stop_word(w)).count();
        // "… and split it by specialty": the verb of a breakdown says how to cut the answer,
        // not what to ask (a budget "split" is another request, without "by").
        let breakdown_words = if breakdown { words.iter().filter(|w| cuts_finer(w)).count() } else { 0 };
        // "hmm, sorry, I meant Leqvio not Entresto": the words before the opening and the words
        // that negate the replaced entity say nothing about the intent either.
        let opening_words =
            words[..skipped].iter().filter(|w| !is_correction(w) && !super::text::is_stop_word(w)).count();
        let negation_words =
            words.iter().filter(|w| matches!(**w, "not" | "than") && !super::text::is_stop_word(w)).count();
        // "go back to the same stretch in 2023", "redo it with ROI": the verb that opens a
        // continuation says to repeat the request, not what the request is.
        let verb_words = if opens {
            [first, second]
                .into_iter()
                .flatten()
                .filter(|w| repeats_the_request(w) && !cuts_finer(w) && !super::text::is_stop_word(w))
                .count()
        } else {
            0
        };
        // "… if possible", "… pls": courtesy, not a request.
        let courtesy_words = words
            .iter()
            .enumerate()
            .skip(skipped)
            .filter(|&(i, w)| {
                (matches!(*w, "please" | "pls") || (*w == "possible" && i > 0 && words[i - 1] == "if"))
                    && !super::text::is_stop_word(w)
            })
            .count();
        let filler = courtesy_words
            + correction_words
            + entity_words
            + variation_words
            + breakdown_words
            + opening_words
            + negation_words
            + verb_words;
        let at_most_one_content_word = content_words.saturating_sub(filler) <= 1;
        // "does that hold in the Southwest?", "any sign of that in the western region?": a yes/no
        // question (or a bare phrase) that points back and names an entity with at most one word
        // of its own is the previous request about that entity ("retrain it on the last 18
        // months", an imperative, asks for something else).
        let yes_no = first.is_some_and(|f| is_auxiliary(f) || matches!(f, "any" | "anything" | "still"));
        let swaps_an_entity = yes_no && refers_back && !asks && names_an_entity && at_most_one_content_word;
        Cues {
            continuation: opens_or_restricts || swaps_an_entity,
            refers_back,
            bare_question,
            about_answer,
            no_content: content_words == 0,
            at_most_one_content_word,
            correction,
            breakdown,
            own_question,
            why_it_happened,
            new_subject: says_new_subject(&words),
            restricts,
            asks_meaning,
            content_words,
        }
    }
}

impl Classifier {
    /// Classifies `text` as the next turn after `history` (oldest first): the turn's own
    /// classification combined with the latest turn of the conversation whose intent the
    /// manifest knows (module docs). With no such turn this is [`Classifier::classify`].
    pub fn classify_in_context(&self, text: &str, history: &[PriorTurn]) -> Classification {
        self.classify_in_context_at(text, history, chrono::Utc::now())
    }

    /// [`Classifier::classify_in_context`] with relative dates read at `now`.
    pub fn classify_in_context_at(
        &self,
        text: &str,
        history: &[PriorTurn],
        now: chrono::DateTime<chrono::Utc>,
    ) -> Classification {
        if history.is_empty() {
            return self.classify_at(text, now);
        }
        let (mut c, probabilities, cues, words) = self.classify_parts(text, true, now);
        let Some((turns_back, last, last_index)) = history
            .iter()
            .rev()
            .take(LOOKBACK)
            .enumerate()
            .find_map(|(n, t)| self.intents.iter().position(|i| *i == t.intent).map(|i| (n + 1, t, i)))
        else {
            return c;
        };
        // In a conversation "not Entresto" says what the turn replaces, whatever its opening
        // ("give me TRx rather than share for that one").
        self.drop_negated(text, &mut c.entities);
        let alone_in_scope = c.in_scope;
        if !c.in_scope {
            // A request aimed at the router stays out of scope whatever came before it.
            if self.refuses(text) {
                return c;
            }
            // A turn the lexical gate keeps and the trained router refuses by a little is read
            // in the conversation's favour: after an in-scope turn, the next is likely in scope.
            let router_close = c.router_margin.is_some_and(|m| m >= -CONVERSATION_ROUTER_SLACK)
                && c.scope_score >= self.settings.scope.threshold;
            // Without a lexical gate (`classifier.scope.threshold` 0: scope is the router's
            // alone) the closeness tests below hold for every turn, so only the turn's own words
            // may say it follows: a margin near the threshold is no such sign there, since an
            // off-domain question after an in-scope turn ("get me a taxi to the airport") comes
            // as close as an elliptical follow-up does.
            let gated = self.settings.scope.threshold > 0.0;
            let follows = (router_close && gated)
                || cues.continuation
                || cues.refers_back
                || cues.bare_question
                || !c.entities.is_empty();
            // "what about the same stretch last year": a continuation that names an entity or
            // a period (or breaks the answer down, or corrects it: "break that out by month") and
            // at most one word besides is close whatever that word is.
            let close = cues.no_content
                || (cues.continuation
                    && cues.at_most_one_content_word
                    && (!c.entities.is_empty() || cues.breakdown || cues.correction))
                || ((cues.about_answer || cues.asks_meaning) && self.answer_intent.is_some())
                // A restriction or a breakdown of the previous request is as much in scope as
                // that request, once any word of it is the domain's ("and only tell me about
                // the weather" has none).
                || ((cues.restricts || cues.breakdown) && c.scope_score > 0.0)
                || router_close
                || c.scope_score >= self.settings.scope.threshold * FOLLOW_UP_SCOPE_SHARE;
            if !(follows && close) {
                return c;
            }
            c.in_scope = true;
        }
        let (alone_intent, alone_confidence) = (c.intent.clone(), c.confidence);
        // The learned model's probability that the turn keeps the earlier turn's intent (module
        // continuation), read only where that intent is the one favoured; without a model, the
        // rules' priors.
        let learned = || {
            let model = self.continuation_model()?;
            let mut features = ContinuationFeatures::new(false);
            let (words, intent) = (words.as_ref(), &alone_intent);
            let turn = Turn { words, cues: &cues, alone_intent: intent, alone_in_scope };
            self.add_continuation_features(&mut features, &turn, &last.intent);
            model.keep_probability(&features)
        };

        let k = self.intents.len();
        // The intent the prior favours: the earlier turn's, or for a question about the answer
        // the manifest's fallback intent (the one that explains).
        let (favoured, carry) =
            match (self.answer_intent.filter(|_| cues.about_answer || cues.asks_meaning), self.cause_intent) {
                (Some(answer), _) => (answer, ANSWER_PRIOR),
                (None, Some(cause)) if cues.why_it_happened => (cause, CAUSE_PRIOR),
                _ if cues.continuation && !cues.own_question => {
                    (last_index, learned().unwrap_or(CARRY_PRIOR_CONTINUATION))
                }
                _ => (last_index, learned().unwrap_or(CARRY_PRIOR_PLAIN)),
            };
        let other = if k > 1 { (1.0 - carry) / (k - 1) as f64 } else { 0.0 };
        let prior = |i: usize| if i == favoured { carry } else { other };
        // A continuation that names an entity, a period or a region and at most one word
        // besides ("And for the whole of 2027?") only changes that entity: its words are no
        // evidence about the intent (the classifier's probabilities for so short a text are
        // sharp and arbitrary), so the prior alone decides.
        // A restriction ("just the community oncologists, and only for Q4") names a subset,
        // however many words that takes.
        let only_changes_an_entity = cues.continuation
            && !cues.own_question
            && ((cues.at_most_one_content_word && (!c.entities.is_empty() || cues.breakdown || cues.correction))
                || cues.restricts);
        // "Why did that happen?" has no word of its own about the intent either.
        let only_asks_why = cues.why_it_happened && cues.at_most_one_content_word;
        // "What does conditional average treatment effect mean?": the term's words belong to the
        // intent that reported it; the question asks for its meaning.
        let only_asks_meaning = cues.asks_meaning && self.answer_intent.is_some();
        let mut posterior: Vec<f64> = match &probabilities {
            Some(p) if !only_changes_an_entity && !only_asks_why && !only_asks_meaning => {
                p.iter().enumerate().map(|(i, p)| p * prior(i)).collect()
            }
            _ => (0..k).map(prior).collect(),
        };
        let total: f64 = posterior.iter().sum();
        if total > 0.0 {
            posterior.iter_mut().for_each(|p| *p /= total);
            self.rank(&mut c, &posterior);
        }

        let mut carried = 0;
        let names_its_subject = c.entities.iter().any(|e| self.entities.names_a_subject(&e.entity_type));
        let short_request = cues.content_words <= SHORT_REQUEST_WORDS && !names_its_subject;
        // A question about what a figure means is about the conversation's subject too.
        let about_the_subject = c.intent == last.intent || cues.refers_back || cues.continuation || cues.asks_meaning;
        if !cues.new_subject && (about_the_subject || short_request) {
            let named: Vec<String> = c.entities.iter().map(|e| e.entity_type.clone()).collect();
            for e in &last.entities {
                if carried == MAX_CARRIED_ENTITIES {
                    break;
                }
                let duplicate = c.entities.iter().any(|m| m.entity_type == e.entity_type && m.value == e.value);
                if !named.contains(&e.entity_type) && !duplicate {
                    c.entities.push(ParsedEntity { source: EntitySource::Context, ..e.clone() });
                    carried += 1;
                }
            }
        }
        c.follow_up = Some(FollowUp {
            turns_back,
            prior_intent: last.intent.clone(),
            alone_intent,
            alone_confidence,
            alone_in_scope,
            continuation: cues.continuation,
            refers_back: cues.refers_back,
            carried_entities: carried,
        });
        c
    }
}

impl Classifier {
    /// The features the continuation model gets for a follow-up `text` after a turn resolved to
    /// `prior_intent`: what [`Classifier::classify_in_context`] gives the model, with each
    /// feature's text kept (training: [`ContinuationTrainer`]).
    pub fn continuation_features(&self, text: &str, prior_intent: &str) -> ContinuationFeatures {
        let (c, _, cues, words) = self.classify_parts(text, true, chrono::Utc::now());
        let mut features = ContinuationFeatures::new(true);
        let turn = Turn { words: words.as_ref(), cues: &cues, alone_intent: &c.intent, alone_in_scope: c.in_scope };
        self.add_continuation_features(&mut features, &turn, prior_intent);
        features
    }

    /// Teaches `trainer` labelled conversations of this classifier's manifest (each a list of
    /// `(text, intent)` turns in order): every later turn, whether a follow-up worded so keeps
    /// the earlier turn's intent.
    pub fn train_continuation(&self, conversations: &[Vec<(String, String)>], trainer: &mut ContinuationTrainer) {
        for pair in conversations.iter().flat_map(|turns| turns.windows(2)) {
            let features = self.continuation_features(&pair[1].0, &pair[0].1);
            trainer.add(&features, pair[1].1 == pair[0].1);
        }
    }

    /// The turn's words (entities masked), its cues, and how it is classified alone relative to
    /// the earlier turn's intent.
    fn add_continuation_features(&self, features: &mut ContinuationFeatures, turn: &Turn<'_>, prior_intent: &str) {
        if let Some((tokens, taken)) = turn.words {
            let words = tokens.iter().zip(taken).map(|(t, &taken)| (t.text.as_str(), taken));
            add_word_features(features, words);
        }
        turn.cues.add_features(features);
        features.add(if turn.alone_intent == prior_intent { "a:same" } else { "a:other" });
        if !turn.alone_in_scope {
            features.add("a:out");
        }
    }
}

/// A follow-up as the continuation model reads it.
struct Turn<'a> {
    words: Option<&'a super::TurnWords>,
    cues: &'a Cues,
    alone_intent: &'a str,
    alone_in_scope: bool,
}

impl Cues {
    /// One feature per cue that holds.
    fn add_features(&self, features: &mut ContinuationFeatures) {
        let flags = [
            (self.continuation, "c:continuation"),
            (self.refers_back, "c:refers-back"),
            (self.bare_question, "c:bare-question"),
            (self.about_answer, "c:about-answer"),
            (self.no_content, "c:no-content"),
            (self.at_most_one_content_word, "c:one-word"),
            (self.correction, "c:correction"),
            (self.breakdown, "c:breakdown"),
            (self.own_question, "c:own-question"),
            (self.why_it_happened, "c:why"),
            (self.new_subject, "c:new-subject"),
            (self.restricts, "c:restricts"),
            (self.asks_meaning, "c:asks-meaning"),
        ];
        for (holds, name) in flags {
            if holds {
                features.add(name);
            }
        }
    }
}
