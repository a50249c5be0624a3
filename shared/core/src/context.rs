//! Conversations: the session record and the context pipeline (pure; no port).
//!
//! A session ([`SessionRecord`]) keeps the latest turns raw, a rolling summary of the older
//! ones and salience notes. After each answer the synthesizer adds the turn
//! ([`append_turn`]): notes decay and are refreshed, and once the raw turns are too many or too
//! long the oldest are handed back to be compacted into the summary ([`merge_summary`]). Before
//! each question intake takes a [`Snapshot`]: the sanitized history view, the summary lines
//! most relevant to the question and the freshest notes, each piece counted in tokens. Every
//! stage then [`select`]s from the snapshot under its own token budget, in seed 003's order:
//! latest raw turns first, then summary snippets, then notes. docs/conversations.md has the
//! rules and the reasons.
//!
//! # Layout
//! - this module: records, turn recording, compaction, notes, snapshot and selection;
//! - [`tokens`]: counting with the cl100k BPE tokenizer, loaded on first use.

pub mod tokens;

use crate::classify::PriorTurn;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use switchyard_model::contracts::{OutputStatus, ParsedEntity};
use switchyard_model::manifest::ContextSettings;

/// Query ids of this many most recent turns are kept with a session: a redelivered synthesis
/// of one of them is recognised and records nothing.
pub const RECORDED_IDS: usize = 64;
/// Longest question kept with a turn, in characters (intake accepts longer ones; the turn keeps
/// the start).
pub const QUESTION_CHARS: usize = 1_000;
/// Longest line of an extractive summary, in characters per side.
const SUMMARY_SIDE_CHARS: usize = 200;

/// A conversation (`S#<session_id>#<user_id>` / `SESSION`): one item per caller and session id,
/// so the same id used by another caller is another session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The id the caller uses.
    pub session_id: String,
    /// The caller who owns it.
    pub user_id: String,
    /// Optimistic-concurrency version: 0 before the first write; every write bumps it.
    pub version: u64,
    /// Turns recorded so far (the number of the latest one).
    pub turn_count: u64,
    /// The latest turns, oldest first (older ones live on in `summary`).
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// The rolling summary of compacted turns.
    #[serde(default)]
    pub summary: Option<Summary>,
    /// Salience notes.
    #[serde(default)]
    pub notes: Vec<Note>,
    /// Query ids of the latest [`RECORDED_IDS`] recorded turns (newest last).
    #[serde(default)]
    pub recorded: Vec<String>,
    /// When the first turn was recorded.
    pub created_at: DateTime<Utc>,
    /// When the latest turn was recorded.
    pub updated_at: DateTime<Utc>,
    /// Epoch seconds TTL, renewed by every turn.
    pub expires_at: i64,
}

/// One completed turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// 1 for the first turn of the session.
    pub seq: u64,
    /// The query that asked it.
    pub query_id: String,
    /// The user's words (at most [`QUESTION_CHARS`]).
    pub question: String,
    /// The resolved intent.
    pub intent: String,
    /// The resolved entities (own and carried over).
    #[serde(default)]
    pub entities: Vec<ParsedEntity>,
    /// The final answer (at most `context.answer_chars`).
    pub answer: String,
    /// How the query ended.
    pub status: OutputStatus,
    /// True when the question was outside the manifest's domain (its intent is a placeholder,
    /// so it is never carried over).
    #[serde(default)]
    pub out_of_scope: bool,
    /// The required entity types the turn did not name (its answer asked for them): the next
    /// turn may supply them and go on with this turn's intent and entities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_entities: Vec<String>,
    /// When the answer was written.
    pub at: DateTime<Utc>,
}

/// The rolling summary: one line per compacted turn (or the summarizer agent's lines).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Oldest first.
    pub lines: Vec<String>,
    /// The latest turn it covers.
    pub through_turn: u64,
    /// `extractive`, or `agent:<id>` when the summarizer agent wrote the latest lines.
    pub method: String,
}

/// What a note records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// An entity the conversation is about (brand, region, KPI, period …).
    Fact,
    /// A caller preference sent with a question.
    Preference,
    /// A question that was not answered well (failed, partial or too unsure).
    OpenQuestion,
}

/// A salience note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    /// What it is about (`entity:brand`, `preference:years`, `open:<intent>`): a newer note with
    /// the same key replaces it.
    pub key: String,
    /// Kind.
    pub kind: NoteKind,
    /// The note as the stages see it.
    pub text: String,
    /// The turn that last mentioned it.
    pub last_seen_turn: u64,
    /// Freshness: 1 when mentioned, times `decay` for every turn since.
    pub score: f64,
}

impl SessionRecord {
    /// The slot filling the session's latest turn left open, if any.
    pub fn pending_slots(&self) -> Option<crate::slots::Pending<'_>> {
        let last = self.turns.last()?;
        (!last.missing_entities.is_empty() && !last.out_of_scope).then_some(crate::slots::Pending {
            intent: &last.intent,
            entities: &last.entities,
            missing: &last.missing_entities,
        })
    }

    /// A session with no turns (not yet stored: version 0).
    pub fn new(user_id: &str, session_id: &str, now: DateTime<Utc>, expires_at: i64) -> SessionRecord {
        SessionRecord {
            session_id: session_id.to_string(),
            user_id: user_id.to_string(),
            version: 0,
            turn_count: 0,
            turns: Vec::new(),
            summary: None,
            notes: Vec::new(),
            recorded: Vec::new(),
            created_at: now,
            updated_at: now,
            expires_at,
        }
    }

    /// Whether the turn of `query_id` is recorded.
    pub fn has_recorded(&self, query_id: &str) -> bool {
        self.recorded.iter().any(|id| id == query_id)
    }

    /// The turns the classifier resolves a follow-up against, oldest first (out-of-scope turns
    /// carry no intent and are left out).
    pub fn prior_turns(&self) -> Vec<PriorTurn> {
        self.turns
            .iter()
            .filter(|t| !t.out_of_scope)
            .map(|t| PriorTurn { question: t.question.clone(), intent: t.intent.clone(), entities: t.entities.clone() })
            .collect()
    }
}

/// What a finished query adds to its session.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnInput {
    /// The query.
    pub query_id: String,
    /// The user's words.
    pub question: String,
    /// Resolved intent.
    pub intent: String,
    /// Resolved entities.
    pub entities: Vec<ParsedEntity>,
    /// The final answer text.
    pub answer: String,
    /// How it ended.
    pub status: OutputStatus,
    /// Outside the domain.
    pub out_of_scope: bool,
    /// Required entity types the question did not name (the answer asked for them).
    pub missing_entities: Vec<String>,
    /// Whether the answer's confidence was too low to rely on.
    pub unsure: bool,
    /// Caller preferences sent with the question (an object), if any.
    pub preferences: Option<serde_json::Value>,
}

/// Cut `text` to at most `max` characters, at a word boundary when there is one.
pub fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    let cut = match cut.rfind(char::is_whitespace) {
        Some(i) if i > cut.len() / 2 => cut[..i].to_string(),
        _ => cut,
    };
    format!("{}…", cut.trim_end())
}

/// Add a finished turn to `session` (which must not have recorded it): the turn is appended
/// with the next number, notes decay and are refreshed, and when the raw turns pass
/// `history_turns` or `summary.threshold_tokens` the oldest are removed and returned, for the
/// caller to compact into the summary with [`merge_summary`].
pub fn append_turn(
    settings: &ContextSettings,
    session: &mut SessionRecord,
    input: TurnInput,
    now: DateTime<Utc>,
    expires_at: i64,
) -> Vec<Turn> {
    let seq = session.turn_count + 1;
    session.turn_count = seq;
    session.updated_at = now;
    session.expires_at = expires_at;
    session.recorded.push(input.query_id.clone());
    if session.recorded.len() > RECORDED_IDS {
        let excess = session.recorded.len() - RECORDED_IDS;
        session.recorded.drain(..excess);
    }
    update_notes(settings, session, &input, seq);
    session.turns.push(Turn {
        seq,
        query_id: input.query_id,
        question: clip(&input.question, QUESTION_CHARS),
        intent: input.intent,
        entities: input.entities,
        answer: clip(&input.answer, settings.answer_chars),
        status: input.status,
        out_of_scope: input.out_of_scope,
        missing_entities: input.missing_entities,
        at: now,
    });
    let too_many = session.turns.len() > settings.history_turns;
    // Every cl100k token is at least one byte, so turns of at most `threshold_tokens` bytes in
    // all are within the threshold without being tokenized (the common case: a short session).
    let too_long = || {
        let texts: Vec<String> = session.turns.iter().map(turn_text).collect();
        texts.iter().map(String::len).sum::<usize>() > settings.summary.threshold_tokens
            && texts.iter().map(|t| tokens::count(t)).sum::<usize>() > settings.summary.threshold_tokens
    };
    if !too_many && !too_long() {
        return Vec::new();
    }
    let keep = settings.summary.keep_turns.min(session.turns.len());
    let cut = session.turns.len() - keep;
    session.turns.drain(..cut).collect()
}

/// The extractive summary of `turns`: one line per turn, the question and the answer's first
/// sentence quoted (clipped), nothing paraphrased.
pub fn extractive_lines(turns: &[Turn]) -> Vec<String> {
    turns
        .iter()
        .map(|t| {
            let first_sentence = t.answer.split_inclusive(['.', '!', '?', '\n']).next().unwrap_or("").trim();
            format!(
                "[turn {} · {}] Q: {} → A: {}",
                t.seq,
                t.intent,
                clip(&t.question, SUMMARY_SIDE_CHARS),
                clip(first_sentence, SUMMARY_SIDE_CHARS)
            )
        })
        .collect()
}

/// Append `lines` (covering turns up to `through_turn`) to the session's summary, dropping its
/// oldest lines beyond `summary.max_tokens`.
pub fn merge_summary(
    settings: &ContextSettings,
    session: &mut SessionRecord,
    lines: Vec<String>,
    through_turn: u64,
    method: &str,
) {
    let mut all = session.summary.take().map(|s| s.lines).unwrap_or_default();
    all.extend(lines.into_iter().map(|l| clip(&l, 4 * SUMMARY_SIDE_CHARS)).filter(|l| !l.is_empty()));
    let mut total: usize = all.iter().map(|l| tokens::count(l) + 1).sum();
    while total > settings.summary.max_tokens && !all.is_empty() {
        total -= tokens::count(&all[0]) + 1;
        all.remove(0);
    }
    session.summary = Some(Summary { lines: all, through_turn, method: method.to_string() });
}

fn update_notes(settings: &ContextSettings, session: &mut SessionRecord, input: &TurnInput, seq: u64) {
    let n = &settings.notes;
    for note in &mut session.notes {
        note.score *= n.decay;
    }
    let mut fresh: Vec<(String, NoteKind, String)> = Vec::new();
    if !input.out_of_scope {
        for e in &input.entities {
            let kind = if e.entity_type.is_empty() { "entity" } else { e.entity_type.as_str() };
            fresh.push((format!("entity:{kind}"), NoteKind::Fact, format!("{kind}: {}", clip(&e.value, 100))));
        }
    }
    if let Some(serde_json::Value::Object(prefs)) = &input.preferences {
        for (k, v) in prefs.iter().take(8) {
            let value = match v {
                serde_json::Value::String(s) => clip(s, 80),
                other => clip(&other.to_string(), 80),
            };
            fresh.push((format!("preference:{}", clip(k, 40)), NoteKind::Preference, format!("prefers {k} = {value}")));
        }
    }
    let open_key = format!("open:{}", input.intent);
    let unanswered = matches!(input.status, OutputStatus::Failed | OutputStatus::Blocked) || input.unsure;
    if unanswered && !input.out_of_scope {
        fresh.push((open_key, NoteKind::OpenQuestion, format!("open question: {}", clip(&input.question, 160))));
    } else if !input.out_of_scope {
        // A good answer on the same intent closes the question left open before.
        session.notes.retain(|note| note.key != open_key);
    }
    for (key, kind, text) in fresh {
        session.notes.retain(|note| note.key != key);
        session.notes.push(Note { key, kind, text, last_seen_turn: seq, score: 1.0 });
    }
    session.notes.retain(|note| note.score >= n.min_score);
    // Freshest first; ties by recency.
    session.notes.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.last_seen_turn.cmp(&a.last_seen_turn)));
    session.notes.truncate(n.max_notes);
}

/// A turn as the history view renders it.
fn turn_text(t: &Turn) -> String {
    if t.answer.is_empty() {
        format!("User: {}\n", t.question)
    } else {
        format!("User: {}\nAssistant: {}\n", t.question, t.answer)
    }
}

/// One piece of context with its token count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Piece {
    /// Rendered text.
    pub text: String,
    /// Its cl100k tokens.
    pub tokens: usize,
}

impl Piece {
    fn new(text: String) -> Piece {
        let tokens = tokens::count(&text);
        Piece { text, tokens }
    }
}

/// What a question's stages may draw from: the sanitized history view, summary snippets
/// ranked by relevance to the question, notes by freshness; each piece counted. Stored with the
/// query (`parsed.context.conversation`), so every stage of the turn sees the same history.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// The session.
    pub session_id: String,
    /// This question's turn number.
    pub turn: u64,
    /// The latest turns, oldest first.
    pub turns: Vec<Piece>,
    /// Summary snippets, most relevant first.
    pub summary: Vec<Piece>,
    /// Notes, freshest first.
    pub notes: Vec<Piece>,
    /// Turns the session holds raw (before the `history_turns` limit).
    pub turns_available: usize,
    /// Answers left out as redundant echoes.
    pub echoes_dropped: usize,
    /// Pieces left out because even the largest stage budget could not hold them.
    pub over_budget: usize,
    /// `extractive` or `agent:<id>`: how the summary was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_method: Option<String>,
}

/// Words of a text, lower-cased, for relevance.
fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).map(str::to_lowercase).collect()
}

/// Whether `answer` only repeats an earlier answer or the question itself (an echo).
fn is_echo(answer: &str, question: &str, previous: Option<&str>) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    let a = norm(answer);
    !a.is_empty() && (previous.is_some_and(|p| norm(p) == a) || a == norm(question))
}

/// The snapshot of `session` for `question`, holding at most `budgets.largest()` tokens.
pub fn snapshot(settings: &ContextSettings, session: &SessionRecord, question: &str) -> Snapshot {
    let start = session.turns.len().saturating_sub(settings.history_turns);
    let mut echoes = 0;
    let mut turns = Vec::new();
    let mut previous: Option<&str> = start.checked_sub(1).map(|i| session.turns[i].answer.as_str());
    for t in &session.turns[start..] {
        let mut shown = t.clone();
        if is_echo(&t.answer, &t.question, previous) {
            shown.answer.clear();
            echoes += 1;
        }
        previous = Some(t.answer.as_str());
        turns.push(Piece::new(turn_text(&shown)));
    }
    let asked = words(question);
    let mut summary: Vec<(usize, usize, Piece)> = session
        .summary
        .iter()
        .flat_map(|s| s.lines.iter().enumerate())
        .map(|(i, l)| (words(l).intersection(&asked).count(), i, Piece::new(l.clone())))
        .collect();
    // Most words in common first; among equals the most recent.
    summary.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    let notes = session.notes.iter().take(settings.notes.top_k).map(|n| Piece::new(format!("- {}\n", n.text)));
    let mut snap = Snapshot {
        session_id: session.session_id.clone(),
        turn: session.turn_count + 1,
        turns,
        summary: summary.into_iter().map(|(_, _, p)| p).collect(),
        notes: notes.collect(),
        turns_available: session.turns.len(),
        echoes_dropped: echoes,
        over_budget: 0,
        summary_method: session.summary.as_ref().map(|s| s.method.clone()),
    };
    let (turns_kept, summary_kept, notes_kept) = fit(&snap, settings.budgets.largest());
    snap.over_budget =
        snap.turns.len() - turns_kept + snap.summary.len() - summary_kept.len() + snap.notes.len() - notes_kept.len();
    snap.turns.drain(..snap.turns.len() - turns_kept);
    snap.summary = keep_only(std::mem::take(&mut snap.summary), &summary_kept);
    snap.notes = keep_only(std::mem::take(&mut snap.notes), &notes_kept);
    snap
}

fn keep_only(pieces: Vec<Piece>, kept: &[usize]) -> Vec<Piece> {
    pieces.into_iter().enumerate().filter(|(i, _)| kept.contains(i)).map(|(_, p)| p).collect()
}

/// How many of the latest turns, and which summary snippets and notes, fit in `budget`.
fn fit(snapshot: &Snapshot, budget: usize) -> (usize, Vec<usize>, Vec<usize>) {
    let mut left = budget;
    let mut turns_kept = 0;
    for piece in snapshot.turns.iter().rev() {
        if piece.tokens > left {
            break;
        }
        left -= piece.tokens;
        turns_kept += 1;
    }
    let mut take = |pieces: &[Piece]| -> Vec<usize> {
        let mut kept = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            if p.tokens <= left {
                left -= p.tokens;
                kept.push(i);
            }
        }
        kept
    };
    let summary = take(&snapshot.summary);
    let notes = take(&snapshot.notes);
    (turns_kept, summary, notes)
}

/// What one stage receives.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Selection {
    /// `{history}`: the kept turns, oldest first.
    pub history: String,
    /// `{summary}`: the kept summary snippets.
    pub summary: String,
    /// `{notes}`: the kept notes.
    pub notes: String,
    /// What was kept and dropped.
    pub report: SelectionReport,
}

/// Counts of a selection (for the `context` event: no text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct SelectionReport {
    /// The budget.
    pub budget: usize,
    /// Tokens kept in all.
    pub tokens: usize,
    /// Turns kept / offered.
    pub turns_kept: usize,
    /// Turns offered.
    pub turns_offered: usize,
    /// Summary snippets kept.
    pub summary_kept: usize,
    /// Summary snippets offered.
    pub summary_offered: usize,
    /// Notes kept.
    pub notes_kept: usize,
    /// Notes offered.
    pub notes_offered: usize,
}

impl SelectionReport {
    /// Pieces offered and not kept.
    pub fn dropped(&self) -> usize {
        (self.turns_offered - self.turns_kept)
            + (self.summary_offered - self.summary_kept)
            + (self.notes_offered - self.notes_kept)
    }
}

/// Fill `budget` tokens in seed 003's order: the latest turns (newest first, stopping at the
/// first that does not fit, so the history has no holes), then summary snippets in their
/// order, then notes in theirs (each skipped when it does not fit).
pub fn select(snapshot: &Snapshot, budget: usize) -> Selection {
    let (turns_kept, summary, notes) = fit(snapshot, budget);
    let history: String = snapshot.turns[snapshot.turns.len() - turns_kept..].iter().map(|p| p.text.as_str()).collect();
    let summary_text = summary.iter().map(|&i| snapshot.summary[i].text.as_str()).collect::<Vec<_>>().join("\n");
    let notes_text: String = notes.iter().map(|&i| snapshot.notes[i].text.as_str()).collect();
    Selection {
        history,
        summary: summary_text,
        notes: notes_text,
        report: SelectionReport {
            budget,
            tokens: snapshot.turns[snapshot.turns.len() - turns_kept..].iter().map(|p| p.tokens).sum::<usize>()
                + summary.iter().map(|&i| snapshot.summary[i].tokens).sum::<usize>()
                + notes.iter().map(|&i| snapshot.notes[i].tokens).sum::<usize>(),
            turns_kept,
            turns_offered: snapshot.turns.len(),
            summary_kept: summary.len(),
            summary_offered: snapshot.summary.len(),
            notes_kept: notes.len(),
            notes_offered: snapshot.notes.len(),
        },
    }
}

#[cfg(test)]
mod tests;
