//! Entity extraction: gazetteer look-up (exact and typo-tolerant), the manifest's regular
//! expressions, and the built-in kinds (dates, times, numbers, amounts, durations, e-mail
//! addresses and the time-period grammar).

use super::kinds::{self, Clock};
use super::text::{edit_distance, is_stop_word, Token};
use super::{Map, Set};
use chrono::{DateTime, Utc};
use regex::{Regex, RegexBuilder};
use switchyard_model::contracts::{EntitySource, ParsedEntity};
use switchyard_model::manifest::{EntityKind, Manifest};

/// Confidence of a relative time period resolved by the grammar (`last quarter`, `YTD`).
const INFERRED_CONFIDENCE: f64 = 0.9;
/// Shortest word (in characters) that may be matched with a typo.
const MIN_FUZZY_CHARS: usize = 5;

/// One spelling of a gazetteer value.
#[derive(Debug, Clone)]
struct Spelling {
    words: Vec<String>,
    value: String,
    /// Index into [`EntityExtractor::types`].
    entity_type: usize,
    fuzzy: bool,
    /// Its words are left out of the intent's words (`intent_words: false`).
    masked: bool,
}

/// An entity found in the text, with the byte offset it starts at (for ordering).
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) entity: ParsedEntity,
}

/// Everything needed to extract entities, built once from the manifest.
#[derive(Debug)]
pub(crate) struct EntityExtractor {
    /// The declared entity types, in the manifest's (sorted) order.
    types: Vec<String>,
    /// Per type, whether a gazetteer is its source (it names what a question is about).
    gazetteer_types: Vec<bool>,
    spellings: Vec<Spelling>,
    /// First word of a spelling → indices into `spellings`, longest spelling first.
    by_first_word: Map<String, Vec<usize>>,
    /// Single-word spellings long enough to be matched with a typo.
    fuzzy_candidates: Vec<usize>,
    /// Words that are never typos of an entity (stop words, the manifest's own vocabulary).
    common_words: Set<String>,
    patterns: Vec<(usize, Regex)>,
    /// The built-in kinds declared, each with the types that name it.
    kinds: kinds::Declared,
    /// The types whose kind is the time-period grammar.
    time_period_types: Vec<usize>,
    /// Where relative dates are read (the manifest's `timezone`).
    zone: chrono_tz::Tz,
}

impl EntityExtractor {
    /// Builds the gazetteer index and compiles the patterns. A pattern that does not compile is
    /// skipped with a warning (the manifest validator reports it).
    pub(crate) fn new(manifest: &Manifest, common_words: Set<String>) -> Self {
        let mut spellings = Vec::new();
        let mut patterns = Vec::new();
        let mut types = Vec::new();
        let mut gazetteer_types = Vec::new();
        let mut declared_kinds: Vec<(EntityKind, usize, String)> = Vec::new();
        for (entity_type, (name, spec)) in manifest.entities.iter().enumerate() {
            types.push(name.clone());
            gazetteer_types.push(spec.gazetteer.is_some());
            let fuzzy = spec.fuzzy.unwrap_or(true);
            let masked = spec.intent_words == Some(false);
            for entry in spec.gazetteer() {
                for spelling in std::iter::once(entry.value()).chain(entry.aliases().iter().map(String::as_str)) {
                    let words: Vec<String> = super::text::tokenize(spelling, 16).into_iter().map(|t| t.text).collect();
                    if words.is_empty() {
                        continue;
                    }
                    spellings.push(Spelling { words, value: entry.value().to_string(), entity_type, fuzzy, masked });
                }
            }
            for pattern in spec.patterns() {
                match RegexBuilder::new(pattern).case_insensitive(true).build() {
                    Ok(re) => patterns.push((entity_type, re)),
                    Err(error) => tracing::warn!(%error, pattern, "skipping an entity pattern that does not compile"),
                }
            }
            if let Some(kind) = spec.kind {
                declared_kinds.push((kind, entity_type, format!("{} {}", name.replace('_', " "), spec.description)));
            }
        }
        let mut by_first_word: Map<String, Vec<usize>> = Map::default();
        for (i, s) in spellings.iter().enumerate() {
            by_first_word.entry(s.words[0].clone()).or_default().push(i);
        }
        for list in by_first_word.values_mut() {
            list.sort_by_key(|&i| std::cmp::Reverse(spellings[i].words.len()));
        }
        let gazetteer_words: Set<&str> = spellings.iter().flat_map(|s| s.words.iter().map(String::as_str)).collect();
        let common_words: Set<String> =
            common_words.into_iter().filter(|w| !gazetteer_words.contains(w.as_str())).collect();
        let fuzzy_candidates = spellings
            .iter()
            .enumerate()
            .filter(|(_, s)| s.fuzzy && s.words.len() == 1 && s.words[0].chars().count() >= MIN_FUZZY_CHARS)
            .map(|(i, _)| i)
            .collect();
        let time_period_types =
            declared_kinds.iter().filter(|(k, _, _)| *k == EntityKind::TimePeriod).map(|(_, t, _)| *t).collect();
        let zone = manifest.timezone.as_deref().and_then(|z| z.parse().ok()).unwrap_or(chrono_tz::UTC);
        EntityExtractor {
            types,
            gazetteer_types,
            spellings,
            by_first_word,
            fuzzy_candidates,
            common_words,
            patterns,
            kinds: kinds::Declared::new(&declared_kinds, zone),
            time_period_types,
            zone,
        }
    }

    /// Whether entities of this type come from a gazetteer: known names of what a question is
    /// about (a brand, a city), as opposed to a date, an amount or an identifier.
    pub(crate) fn names_a_subject(&self, entity_type: &str) -> bool {
        self.types.iter().position(|t| t == entity_type).is_some_and(|i| self.gazetteer_types[i])
    }

    /// Whether entities of this type come from a built-in kind (a date, an amount, a period):
    /// they say when or how much, not what a question is about.
    pub(crate) fn is_built_in(&self, entity_type: &str) -> bool {
        self.types
            .iter()
            .position(|t| t == entity_type)
            .is_some_and(|i| self.kinds.declares(i) || self.time_period_types.contains(&i))
    }

    /// Entities of `text` (already tokenised as `tokens`), deduplicated, in text order, and
    /// per token whether a gazetteer spelling covers it (such words name *what* a question is
    /// about, not *which* intent it is). Relative dates are read against the present.
    pub(crate) fn extract(&self, text: &str, tokens: &[Token]) -> (Vec<ParsedEntity>, Vec<bool>) {
        let (entities, named, _) = self.extract_with_spans(text, tokens, Utc::now());
        (entities, named)
    }

    /// [`EntityExtractor::extract`] at the time `now`, also returning per token whether any
    /// entity covers it (a KPI's words too, which `named` leaves to the intent: "new patient
    /// starts").
    pub(crate) fn extract_with_spans(
        &self,
        text: &str,
        tokens: &[Token],
        now: DateTime<Utc>,
    ) -> (Vec<ParsedEntity>, Vec<bool>, Vec<bool>) {
        let mut found: Vec<Found> = Vec::new();
        let source_text = |start: usize, end: usize| text.get(start..end).unwrap_or("").to_string();
        // 1. Identifiers by pattern, first: their digits must not be read as years.
        for (entity_type, re) in &self.patterns {
            for caps in re.captures_iter(text) {
                let Some(whole) = caps.get(0) else { continue };
                let value = caps.get(1).unwrap_or(whole).as_str().to_uppercase();
                found.push(Found {
                    start: whole.start(),
                    end: whole.end(),
                    entity: self.entity(
                        *entity_type,
                        value,
                        source_text(whole.start(), whole.end()),
                        1.0,
                        EntitySource::Exact,
                    ),
                });
            }
        }
        // E-mail addresses next: their words are no one's names.
        for (entity_type, start, end, value) in self.kinds.emails(text) {
            if !found.iter().any(|f| start < f.end && f.start < end) {
                found.push(Found {
                    start,
                    end,
                    entity: self.entity(entity_type, value, source_text(start, end), 1.0, EntitySource::Exact),
                });
            }
        }
        let inside_id = |t: &Token| found.iter().any(|f| t.start < f.end && f.start < t.end);
        let free: Vec<bool> = tokens.iter().map(|t| !inside_id(t)).collect();
        let mut taken = free.iter().map(|f| !f).collect::<Vec<bool>>();
        // 2. Gazetteer, longest exact spelling first, then typos of single long words.
        let mut named = vec![false; tokens.len()];
        let mut i = 0;
        while i < tokens.len() {
            if taken[i] {
                i += 1;
                continue;
            }
            let mut matched = 0;
            let mut masked = false;
            if let Some(candidates) = self.by_first_word.get(&tokens[i].text) {
                for &c in candidates {
                    let s = &self.spellings[c];
                    let n = s.words.len();
                    if i + n <= tokens.len() && (0..n).all(|k| !taken[i + k] && tokens[i + k].text == s.words[k]) {
                        let (start, end) = (tokens[i].start, tokens[i + n - 1].end);
                        found.push(Found {
                            start,
                            end,
                            entity: self.entity(
                                s.entity_type,
                                s.value.clone(),
                                source_text(start, end),
                                1.0,
                                EntitySource::Exact,
                            ),
                        });
                        masked = s.masked;
                        matched = n;
                        break;
                    }
                }
            }
            if matched == 0 {
                if let Some((c, confidence)) = self.fuzzy_match(&tokens[i]) {
                    let s = &self.spellings[c];
                    let (start, end) = (tokens[i].start, tokens[i].end);
                    found.push(Found {
                        start,
                        end,
                        entity: self.entity(
                            s.entity_type,
                            s.value.clone(),
                            source_text(start, end),
                            confidence,
                            EntitySource::Fuzzy,
                        ),
                    });
                    masked = s.masked;
                    matched = 1;
                }
            }
            for k in 0..matched {
                taken[i + k] = true;
                named[i + k] = masked;
            }
            i += matched.max(1);
        }
        // 3. The built-in kinds other than periods: amounts, dates, times, durations, numbers.
        if self.kinds.any() {
            let clock = Clock::new(now, self.zone);
            for m in self.kinds.find(text, tokens, &mut taken, &clock) {
                for k in m.first..m.first + m.tokens {
                    named[k] = true;
                }
                let (start, end) = (tokens[m.first].start, tokens[m.first + m.tokens - 1].end);
                let (start, end) = (m.start.unwrap_or(start), m.end.unwrap_or(end));
                let confidence = if m.source == EntitySource::Inferred { INFERRED_CONFIDENCE } else { 1.0 };
                found.push(Found {
                    start,
                    end,
                    entity: self.entity(m.entity_type, m.value, source_text(start, end), confidence, m.source),
                });
            }
        }
        // 4. Time periods.
        for &period_type in self.time_period_types.iter().take(1) {
            let mut i = 0;
            while i < tokens.len() {
                if taken[i] {
                    i += 1;
                    continue;
                }
                match time_period(tokens, i, &taken) {
                    Some((n, value, source)) => {
                        let confidence = if source == EntitySource::Inferred { INFERRED_CONFIDENCE } else { 1.0 };
                        let (start, end) = (tokens[i].start, tokens[i + n - 1].end);
                        found.push(Found {
                            start,
                            end,
                            entity: self.entity(period_type, value, source_text(start, end), confidence, source),
                        });
                        for k in 0..n {
                            taken[i + k] = true;
                            // The unit and the number of a period say *when*, not what is
                            // asked; its direction ("next quarter", "last month") may.
                            named[i + k] = !is_direction_word(&tokens[i + k].text);
                        }
                        i += n;
                    }
                    None => i += 1,
                }
            }
        }
        found.sort_by_key(|f| f.start);
        let mut out: Vec<ParsedEntity> = Vec::new();
        let mut seen: Map<(String, String), usize> = Map::default();
        for f in found {
            match seen.get(&(f.entity.entity_type.clone(), f.entity.value.clone())) {
                Some(&at) => {
                    let existing = &mut out[at];
                    if f.entity.confidence > existing.confidence {
                        existing.confidence = f.entity.confidence;
                        existing.source = f.entity.source;
                    }
                }
                None => {
                    seen.insert((f.entity.entity_type.clone(), f.entity.value.clone()), out.len());
                    out.push(f.entity);
                }
            }
        }
        (out, named, taken)
    }

    fn entity(
        &self,
        entity_type: usize,
        value: String,
        text: String,
        confidence: f64,
        source: EntitySource,
    ) -> ParsedEntity {
        let entity_type = self.types.get(entity_type).cloned().unwrap_or_default();
        ParsedEntity { entity_type, value, text, confidence, source }
    }

    /// The closest single-word spelling within 1 edit (2 for words of 8+ characters), with a
    /// confidence that falls with the distance.
    fn fuzzy_match(&self, token: &Token) -> Option<(usize, f64)> {
        let len = token.text.chars().count();
        if len < MIN_FUZZY_CHARS
            || token.has_digit()
            || is_stop_word(&token.text)
            || self.common_words.contains(&token.text)
        {
            return None;
        }
        let limit = if len >= 8 { 2 } else { 1 };
        let first = token.text.chars().next();
        let mut best: Option<(usize, usize)> = None;
        for &c in &self.fuzzy_candidates {
            let spelling = &self.spellings[c].words[0];
            // Typos rarely hit the first letter; two edits only between words of about the
            // same length ("conversation" is not a typo of "conversion").
            if spelling.chars().next() != first {
                continue;
            }
            let d = edit_distance(&token.text, spelling, limit);
            if d == 2 && spelling.chars().count().abs_diff(len) > 1 {
                continue;
            }
            if d <= limit && best.map(|(_, bd)| d < bd).unwrap_or(true) {
                best = Some((c, d));
            }
        }
        let (c, d) = best?;
        let target_len = self.spellings[c].words[0].chars().count().max(len) as f64;
        Some((c, (0.9 * (1.0 - d as f64 / target_len)).clamp(0.5, 0.9)))
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const MONTH_ABBREVIATIONS: [&str; 12] =
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const TIME_PREPOSITIONS: [&str; 9] = ["in", "since", "during", "through", "until", "from", "for", "of", "by"];

fn year(t: &Token) -> Option<u32> {
    if t.text.len() == 4 && t.is_number() {
        let y: u32 = t.text.parse().ok()?;
        return (1990..=2099).contains(&y).then_some(y);
    }
    None
}

/// `fy25`, `fy2025` → 2025.
fn fiscal_year(text: &str) -> Option<u32> {
    let digits = text.strip_prefix("fy")?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match digits.len() {
        2 => digits.parse::<u32>().ok().map(|y| 2000 + y),
        4 => digits.parse::<u32>().ok().filter(|y| (1990..=2099).contains(y)),
        _ => None,
    }
}

fn month(tokens: &[Token], i: usize) -> Option<usize> {
    let t = &tokens[i];
    let next_is_year = tokens.get(i + 1).and_then(year).is_some();
    let after_preposition = i > 0 && TIME_PREPOSITIONS.contains(&tokens[i - 1].text.as_str());
    if let Some(m) = MONTHS.iter().position(|m| *m == t.text) {
        // "may" is mostly a verb: only as a month with a year or after a preposition.
        if t.text != "may" || next_is_year || (after_preposition && t.capitalised) {
            return Some(m);
        }
        return None;
    }
    let abbreviation = if t.text == "sept" { "sep" } else { t.text.as_str() };
    let m = MONTH_ABBREVIATIONS.iter().position(|m| *m == abbreviation)?;
    (next_is_year || (after_preposition && t.capitalised)).then_some(m)
}

fn number_word(text: &str) -> Option<u32> {
    const WORDS: [&str; 12] =
        ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    if let Some(p) = WORDS.iter().position(|w| *w == text) {
        return Some(p as u32 + 1);
    }
    if text.len() <= 3 && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok().filter(|n| *n > 0);
    }
    None
}

fn unit(text: &str) -> Option<&'static str> {
    Some(match text {
        "day" | "days" => "day",
        "week" | "weeks" | "wk" | "wks" => "week",
        "month" | "months" | "mo" | "mos" | "mth" | "mths" => "month",
        "quarter" | "quarters" | "qtr" | "qtrs" => "quarter",
        "year" | "years" | "yr" | "yrs" => "year",
        "hour" | "hours" | "hr" | "hrs" => "hour",
        _ => return None,
    })
}

/// A time period starting at token `i`: (tokens used, canonical value, source).
///
/// Canonical values: `Q3`, `Q3 2025`, `H1 2025`, `FY2025`, `2024`, `March`, `March 2025`;
/// relative ones (`inferred`): `last_quarter`, `this_year`, `next_30_days`, `last_6_months`,
/// `H1 this_year`, `quarter_after` / `6_months_after` / `year_before` (relative to the period the
/// conversation was about),
/// `full_year` (the whole of the current one), `ytd`, `qtd`, `mtd`, `today`, `yesterday`.
fn time_period(tokens: &[Token], i: usize, taken: &[bool]) -> Option<(usize, String, EntitySource)> {
    let free = |k: usize| k < tokens.len() && !taken[k];
    // Whether the period's words end at token `k`: the text ends, or "instead" / "too" follows.
    let closes = |k: usize| k >= tokens.len() || (free(k) && matches!(tokens[k].text.as_str(), "instead" | "too"));
    let t = tokens[i].text.as_str();
    let next_year = if free(i + 1) { tokens.get(i + 1).and_then(year) } else { None };
    // Quarters and halves: q3, q3 2025, h1 2025.
    if t.len() == 2 {
        let b = t.as_bytes();
        let half_or_quarter = match (b[0], b[1]) {
            (b'q', b'1'..=b'4') => Some('Q'),
            (b'h', b'1'..=b'2') => Some('H'),
            _ => None,
        };
        if let Some(letter) = half_or_quarter {
            let n = b[1] as char;
            return Some(match next_year {
                Some(y) => (2, format!("{letter}{n} {y}"), EntitySource::Exact),
                None => (1, format!("{letter}{n}"), EntitySource::Exact),
            });
        }
    }
    // "the first half of 2024", "second quarter 2025": a half or quarter of a named year (not
    // "the second half of the year", which says where a forecast looks).
    let ordinal = match t {
        "first" | "1st" => Some(b'1'),
        "second" | "2nd" => Some(b'2'),
        "third" | "3rd" => Some(b'3'),
        "fourth" | "4th" => Some(b'4'),
        _ => None,
    };
    if let Some(n) = ordinal.filter(|_| free(i + 1)) {
        let letter = match tokens[i + 1].text.as_str() {
            "half" if n <= b'2' => Some('H'),
            "quarter" => Some('Q'),
            _ => None,
        };
        let of = usize::from(free(i + 2) && tokens[i + 2].text == "of");
        let year_at = i + 2 + of;
        let y = if free(year_at) { tokens.get(year_at).and_then(year) } else { None };
        if let (Some(letter), Some(y)) = (letter, y) {
            return Some((3 + of, format!("{letter}{} {y}", n as char), EntitySource::Exact));
        }
        // "and for the second half?", "the third quarter instead": the half or quarter of the
        // year the conversation is about.
        if let Some(letter) = letter.filter(|_| closes(i + 2)) {
            return Some((2, format!("{letter}{}", n as char), EntitySource::Exact));
        }
        // "the first half of this year", "the second quarter of last year".
        if let Some(letter) = letter.filter(|_| of == 1 && free(year_at + 1)) {
            let relative = match tokens[year_at].text.as_str() {
                "this" | "current" => Some("this"),
                "last" | "previous" | "prior" => Some("last"),
                "next" | "coming" => Some("next"),
                _ => None,
            };
            if let Some(relative) = relative.filter(|_| unit(&tokens[year_at + 1].text) == Some("year")) {
                return Some((5, format!("{letter}{} {relative}_year", n as char), EntitySource::Inferred));
            }
        }
    }
    // "make it 12 weeks instead", "over 18 months": a span the turn ends with.
    if let Some(n) = number_word(t).filter(|n| *n > 1 && free(i + 1)) {
        if let Some(u) = unit(&tokens[i + 1].text) {
            if closes(i + 2) {
                return Some((2, format!("{n}_{u}s"), EntitySource::Inferred));
            }
        }
    }
    // "the quarter after that", "the six months after", "the year before": a period placed
    // relative to the one the conversation was about.
    {
        let (count, unit_at) = match number_word(t) {
            Some(n) if free(i + 1) && unit(&tokens[i + 1].text).is_some() => (Some(n), i + 1),
            _ => (None, i),
        };
        if let Some(u) = unit(&tokens[unit_at].text) {
            let side = if free(unit_at + 1) {
                match tokens[unit_at + 1].text.as_str() {
                    "after" | "later" => Some("after"),
                    "before" | "earlier" => Some("before"),
                    _ => None,
                }
            } else {
                None
            };
            if let Some(side) = side {
                let at = unit_at + 2;
                let points_back = free(at) && matches!(tokens[at].text.as_str(), "that" | "this" | "it" | "then");
                let named = match count {
                    Some(n) if n > 1 => format!("{n}_{u}s_{side}"),
                    _ => format!("{u}_{side}"),
                };
                if points_back {
                    return Some((at + 1 - i, named, EntitySource::Inferred));
                }
                if closes(at) || (free(at) && matches!(tokens[at].text.as_str(), "as" | "please")) {
                    return Some((at - i, named, EntitySource::Inferred));
                }
            }
        }
    }
    if let Some(y) = fiscal_year(t) {
        return Some((1, format!("FY{y}"), EntitySource::Exact));
    }
    if t == "fy" {
        if let Some(y) = next_year {
            return Some((2, format!("FY{y}"), EntitySource::Exact));
        }
    }
    if let Some(y) = year(&tokens[i]) {
        // "2025 Q3" → "Q3 2025".
        if free(i + 1) {
            let next = tokens[i + 1].text.as_bytes();
            if next.len() == 2
                && ((next[0] == b'q' && (b'1'..=b'4').contains(&next[1]))
                    || (next[0] == b'h' && (b'1'..=b'2').contains(&next[1])))
            {
                return Some((
                    2,
                    format!("{}{} {y}", (next[0] as char).to_ascii_uppercase(), next[1] as char),
                    EntitySource::Exact,
                ));
            }
        }
        return Some((1, y.to_string(), EntitySource::Exact));
    }
    if let Some(m) = month(tokens, i) {
        let mut name = MONTHS[m].to_string();
        if let Some(first) = name.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        return Some(match next_year {
            Some(y) => (2, format!("{name} {y}"), EntitySource::Exact),
            None => (1, name, EntitySource::Exact),
        });
    }
    match t {
        "ytd" | "qtd" | "mtd" => return Some((1, t.to_string(), EntitySource::Inferred)),
        "today" | "yesterday" => return Some((1, t.to_string(), EntitySource::Inferred)),
        _ => {}
    }
    // "year to date", "quarter-to-date", "month to date".
    if free(i + 2) && tokens[i + 1].text == "to" && tokens[i + 2].text == "date" {
        let short = match t {
            "year" => Some("ytd"),
            "quarter" => Some("qtd"),
            "month" => Some("mtd"),
            _ => None,
        };
        if let Some(short) = short {
            return Some((3, short.to_string(), EntitySource::Inferred));
        }
    }
    // "the full year", "whole quarter", "entire month": the whole of the current one.
    if matches!(t, "full" | "whole" | "entire") && free(i + 1) {
        if let Some(u) = unit(&tokens[i + 1].text) {
            return Some((2, format!("full_{u}"), EntitySource::Inferred));
        }
    }
    // last / past / previous / prior / trailing / this / current / next / coming [N] unit.
    let direction = match t {
        "last" | "past" | "previous" | "prior" | "trailing" | "preceding" => "last",
        "this" | "current" => "this",
        "next" | "coming" | "upcoming" | "following" => "next",
        _ => return None,
    };
    if !free(i + 1) {
        return None;
    }
    if let Some(u) = unit(&tokens[i + 1].text) {
        return Some((2, format!("{direction}_{u}"), EntitySource::Inferred));
    }
    if direction != "this" && free(i + 2) {
        if let (Some(n), Some(u)) = (number_word(&tokens[i + 1].text), unit(&tokens[i + 2].text)) {
            let value = if n == 1 { format!("{direction}_{u}") } else { format!("{direction}_{n}_{u}s") };
            return Some((3, value, EntitySource::Inferred));
        }
    }
    None
}

/// Words of a time period that say which way it points from now.
fn is_direction_word(word: &str) -> bool {
    matches!(
        word,
        "next"
            | "last"
            | "past"
            | "previous"
            | "prior"
            | "coming"
            | "upcoming"
            | "following"
            | "recent"
            | "ago"
            | "since"
    )
}
