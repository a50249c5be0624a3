//! The built-in entity kinds: dates, times, numbers, amounts of money, durations and e-mail
//! addresses, each read from the tokens of a question and written in one normal form
//! (`2026-03-14`, `14:30`, `4`, `250.00 USD`, `P2W`, `name@example.com`).
//!
//! Relative dates ("tomorrow", "this Friday", "in two weeks", "the 22nd", "15/03") are resolved
//! against the request's time in the manifest's time zone ([`Clock`]). When several entity types
//! share a kind (a pick-up and a return date), a value goes to the type whose name or
//! description shares a word with the words just before it ("returning on the 14th"), else to
//! the first type of that kind the question has not filled yet.

use super::text::{is_stop_word, Token};
use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc, Weekday};
use switchyard_model::contracts::EntitySource;
use switchyard_model::manifest::EntityKind;

/// How many words before a value are searched for a word of an entity type's description.
const CUE_WINDOW: usize = 4;

/// The present, as the question's reader sees it: today's date in the manifest's zone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    today: NaiveDate,
}

impl Clock {
    /// The clock at `now`, read in `zone`.
    pub(crate) fn new(now: DateTime<Utc>, zone: chrono_tz::Tz) -> Clock {
        Clock { today: now.with_timezone(&zone).date_naive() }
    }
}

/// The kinds that are read from tokens, in the order they claim words: an amount's digits are
/// not a number, a date's are not a time, "in two weeks" is a date before it is a duration.
const TOKEN_KINDS: [EntityKind; 5] =
    [EntityKind::Money, EntityKind::Date, EntityKind::Time, EntityKind::Duration, EntityKind::Number];

/// One entity type that names a built-in kind.
#[derive(Debug)]
struct Slot {
    entity_type: usize,
    /// Words of its name and description that tell it from the other types of its kind.
    cues: Vec<String>,
}

/// The built-in kinds a manifest declares, each with the entity types that name it.
#[derive(Debug, Default)]
pub(crate) struct Declared {
    /// Per kind of [`TOKEN_KINDS`], its types.
    by_kind: [Vec<Slot>; 5],
    emails: Vec<Slot>,
    /// Read `3/4` as March 4th (the zone is in the Americas), else as 3 April.
    month_first: bool,
    /// The currency `$` and "dollars" stand for in the manifest's zone.
    dollar: &'static str,
}

/// A value of a built-in kind found in the tokens.
#[derive(Debug)]
pub(crate) struct KindMatch {
    /// First token.
    pub(crate) first: usize,
    /// Number of tokens.
    pub(crate) tokens: usize,
    /// Byte range when it reaches past its tokens (a currency sign before the digits).
    pub(crate) start: Option<usize>,
    pub(crate) end: Option<usize>,
    /// Index of the entity type.
    pub(crate) entity_type: usize,
    /// The normalized value.
    pub(crate) value: String,
    /// `exact` when written in full, `inferred` when resolved against the present.
    pub(crate) source: EntitySource,
}

/// A value before it has a type: (tokens used, value, source, start byte override).
type Read = (usize, String, EntitySource, Option<usize>);

impl Declared {
    /// The kinds of `declared` (kind, entity type index, its name and description), read in
    /// `zone`.
    pub(crate) fn new(declared: &[(EntityKind, usize, String)], zone: chrono_tz::Tz) -> Declared {
        let mut out = Declared::default();
        let name = zone.name();
        out.month_first = name.starts_with("America/") || name.starts_with("US/");
        out.dollar = if name.starts_with("Australia/") {
            "AUD"
        } else if name.starts_with("Pacific/Auckland") || name.starts_with("NZ") {
            "NZD"
        } else if ["America/Toronto", "America/Vancouver", "America/Edmonton", "America/Winnipeg", "America/Halifax"]
            .contains(&name)
            || name.starts_with("Canada/")
        {
            "CAD"
        } else {
            "USD"
        };
        for &(kind, entity_type, _) in declared {
            let slot = Slot { entity_type, cues: Vec::new() };
            match TOKEN_KINDS.iter().position(|k| *k == kind) {
                Some(k) => out.by_kind[k].push(slot),
                None if kind == EntityKind::Email => out.emails.push(slot),
                None => {}
            }
        }
        // Cue words: those of a type's description that no other type of its kind uses.
        let words_of = |entity_type: usize| -> Vec<String> {
            declared
                .iter()
                .filter(|(_, t, _)| *t == entity_type)
                .flat_map(|(_, _, d)| super::text::tokenize(d, 32))
                .map(|t| cue(&t.text))
                .filter(|w| w.len() > 2 && !is_stop_word(w))
                .collect()
        };
        for slots in out.by_kind.iter_mut().chain(std::iter::once(&mut out.emails)) {
            let all: Vec<Vec<String>> = slots.iter().map(|s| words_of(s.entity_type)).collect();
            for (i, slot) in slots.iter_mut().enumerate() {
                slot.cues = all[i]
                    .iter()
                    .filter(|w| all.iter().enumerate().all(|(j, other)| j == i || !other.contains(w)))
                    .cloned()
                    .collect();
            }
        }
        out
    }

    /// Whether a kind read from tokens is declared.
    pub(crate) fn any(&self) -> bool {
        self.by_kind.iter().any(|k| !k.is_empty())
    }

    /// Whether the entity type `entity_type` names one of these kinds.
    pub(crate) fn declares(&self, entity_type: usize) -> bool {
        self.by_kind.iter().chain(std::iter::once(&self.emails)).flatten().any(|s| s.entity_type == entity_type)
    }

    /// E-mail addresses of `text`: (entity type, start, end, address in lower case).
    pub(crate) fn emails(&self, text: &str) -> Vec<(usize, usize, usize, String)> {
        let Some(slot) = self.emails.first() else { return Vec::new() };
        let bytes = text.as_bytes();
        let local = |b: u8| b.is_ascii_alphanumeric() || b"._%+-".contains(&b);
        let domain = |b: u8| b.is_ascii_alphanumeric() || b".-".contains(&b);
        let mut out = Vec::new();
        for (at, _) in text.match_indices('@') {
            let mut start = at;
            while start > 0 && local(bytes[start - 1]) {
                start -= 1;
            }
            let mut end = at + 1;
            while end < bytes.len() && domain(bytes[end]) {
                end += 1;
            }
            while end > at + 1 && matches!(bytes[end - 1], b'.' | b'-') {
                end -= 1;
            }
            while start < at && bytes[start] == b'.' {
                start += 1;
            }
            let host = &text[at + 1..end];
            let tld_ok = host.rsplit_once('.').is_some_and(|(name, tld)| {
                !name.is_empty() && tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic())
            });
            if start < at && tld_ok && out.iter().all(|(_, _, e, _)| *e <= start) {
                out.push((slot.entity_type, start, end, text[start..end].to_ascii_lowercase()));
            }
        }
        out
    }

    /// Values of the declared kinds among the free tokens (`taken` marks the ones already
    /// read; the tokens of each value found are marked too), in text order.
    pub(crate) fn find(&self, text: &str, tokens: &[Token], taken: &mut [bool], clock: &Clock) -> Vec<KindMatch> {
        let mut reads: Vec<(usize, usize, Read)> = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            if taken[i] {
                i += 1;
                continue;
            }
            let reader = Reader { text, tokens, taken, declared: self, clock };
            let hit = TOKEN_KINDS
                .iter()
                .enumerate()
                .filter(|(k, _)| !self.by_kind[*k].is_empty())
                .find_map(|(k, kind)| reader.read(*kind, i).map(|r| (k, r)));
            match hit {
                Some((k, read)) => {
                    let n = read.0.max(1);
                    for t in taken.iter_mut().skip(i).take(n) {
                        *t = true;
                    }
                    reads.push((k, i, read));
                    i += n;
                }
                None => i += 1,
            }
        }
        // Types: a cue word just before the value, else the first type of the kind not yet used.
        let mut used: Vec<usize> = Vec::new();
        let mut out = Vec::new();
        for (k, first, (n, value, source, start)) in reads {
            let slots = &self.by_kind[k];
            let window = &tokens[first.saturating_sub(CUE_WINDOW)..first];
            let cued = slots.iter().find(|s| window.iter().any(|t| s.cues.contains(&cue(&t.text))));
            let slot = cued.or_else(|| slots.iter().find(|s| !used.contains(&s.entity_type))).or_else(|| slots.first());
            let Some(slot) = slot else { continue };
            used.push(slot.entity_type);
            out.push(KindMatch {
                first,
                tokens: n.max(1),
                start,
                end: None,
                entity_type: slot.entity_type,
                value,
                source,
            });
        }
        out
    }
}

/// The form of a word its cues are compared in: its first five letters.
fn cue(word: &str) -> String {
    word.chars().take(5).collect()
}

/// Reads one kind at one token.
struct Reader<'a> {
    text: &'a str,
    tokens: &'a [Token],
    taken: &'a [bool],
    declared: &'a Declared,
    clock: &'a Clock,
}

impl Reader<'_> {
    fn read(&self, kind: EntityKind, i: usize) -> Option<Read> {
        match kind {
            EntityKind::Money => self.money(i),
            EntityKind::Date => {
                self.date(i).map(|(n, date, source, start)| (n, date.format("%Y-%m-%d").to_string(), source, start))
            }
            EntityKind::Time => {
                self.time(i).map(|(n, (h, m))| (n, format!("{h:02}:{m:02}"), EntitySource::Exact, None))
            }
            EntityKind::Duration => self.duration(i).map(|(n, v)| (n, v, EntitySource::Exact, None)),
            EntityKind::Number => self.number(i).map(|(n, v)| (n, v, EntitySource::Exact, None)),
            EntityKind::Email | EntityKind::TimePeriod => None,
        }
    }

    /// The lower-cased word at `k`, when it is free.
    fn word(&self, k: usize) -> Option<&str> {
        (k < self.tokens.len() && !self.taken[k]).then(|| self.tokens[k].text.as_str())
    }

    /// The text between tokens `k` and `k + 1`.
    fn gap(&self, k: usize) -> &str {
        match (self.tokens.get(k), self.tokens.get(k + 1)) {
            (Some(a), Some(b)) => self.text.get(a.end..b.start).unwrap_or(" "),
            _ => " ",
        }
    }

    /// The text just before token `k` (since the previous token).
    fn before(&self, k: usize) -> (&str, usize) {
        let from = if k == 0 { 0 } else { self.tokens[k - 1].end };
        (self.text.get(from..self.tokens[k].start).unwrap_or(""), from)
    }

    /// The text just after token `k` (up to the next token).
    fn after(&self, k: usize) -> &str {
        let to = self.tokens.get(k + 1).map_or(self.text.len(), |t| t.start);
        self.text.get(self.tokens[k].end..to).unwrap_or("")
    }

    // ---- numbers ----

    /// A number at `k`: digits with thousands separators and decimals ("1,200.50"), or words
    /// ("twenty five"): (tokens used, value as digits).
    fn amount(&self, k: usize) -> Option<(usize, String)> {
        let w = self.word(k)?;
        if is_digits(w) {
            let mut n = 1;
            let mut whole = w.to_string();
            while self.gap(k + n - 1) == "," && self.word(k + n).is_some_and(|d| d.len() == 3 && is_digits(d)) {
                whole.push_str(&self.tokens[k + n].text);
                n += 1;
            }
            let whole = whole.trim_start_matches('0');
            let whole = if whole.is_empty() { "0" } else { whole };
            if self.gap(k + n - 1) == "." && self.word(k + n).is_some_and(|d| is_digits(d) && d.len() <= 3) {
                let fraction = self.tokens[k + n].text.clone();
                return Some((n + 1, format!("{whole}.{fraction}")));
            }
            return Some((n, whole.to_string()));
        }
        let (used, value) = self.number_words(k)?;
        Some((used, value.to_string()))
    }

    /// A number in words at `k` ("twenty five", "two hundred and fifty", "three thousand"):
    /// (tokens used, value).
    fn number_words(&self, k: usize) -> Option<(usize, u64)> {
        /// A word below a hundred: its value, and whether it is a ten ("twenty").
        fn small(w: &str) -> Option<(u64, bool)> {
            let n = number_word(w).filter(|_| w != "hundred" && w != "dozen")?;
            Some((u64::from(n), (20..=90).contains(&n) && n % 10 == 0))
        }
        let first = self.word(k)?;
        if first == "dozen" {
            return Some((1, 12));
        }
        if first == "hundred" {
            return None;
        }
        let (mut total, mut current, mut n) = (0u64, 0u64, 0usize);
        let mut last_was_ten = false;
        let mut any = false;
        loop {
            let Some(w) = self.word(k + n) else { break };
            if let Some((v, ten)) = small(w) {
                // "twenty five": a unit after a ten adds to it; two small numbers otherwise end it.
                if any && !(last_was_ten && v < 10 && current % 100 >= 20) && current % 100 != 0 {
                    break;
                }
                current += v;
                last_was_ten = ten;
            } else if w == "hundred" && any && current % 100 != 0 {
                current = current / 100 * 100 + (current % 100) * 100;
                last_was_ten = false;
            } else if w == "thousand" && any {
                total += current.max(1) * 1000;
                current = 0;
                last_was_ten = false;
            } else if w == "and"
                && any
                && self.word(k + n + 1).and_then(small).is_some()
                && (current >= 100 || total > 0)
            {
                // "two hundred and fifty"
            } else {
                break;
            }
            any = true;
            n += 1;
        }
        any.then_some((n, total + current))
    }

    fn number(&self, i: usize) -> Option<(usize, String)> {
        let w = self.word(i)?;
        // "one" is mostly a pronoun ("which one", "one of them").
        if w == "one" && self.word(i + 1).is_none_or(|n| is_stop_word(n) || n == "of") {
            return None;
        }
        self.amount(i)
    }

    // ---- money ----

    fn money(&self, i: usize) -> Option<Read> {
        let (before, from) = self.before(i);
        let sign = before.trim_end();
        let sign_code =
            sign.chars().next_back().and_then(|c| currency_sign(c.to_string().as_str(), self.declared.dollar));
        let sign_start = sign_code.map(|_| from + sign.len() - sign.chars().next_back().map_or(0, char::len_utf8));
        // "EUR 40", "USD 250".
        if sign_code.is_none() {
            if let Some(code) = self.word(i).and_then(currency_code) {
                if let Some((n, amount)) = self.amount(i + 1).filter(|_| self.word(i + 1).is_some_and(is_digits)) {
                    return Some((1 + n, format!("{} {code}", two_places(&amount)?), EntitySource::Exact, None));
                }
                return None;
            }
        }
        let w = self.word(i)?;
        if !is_digits(w) {
            return None;
        }
        let (n, amount) = self.amount(i)?;
        if let Some(code) = sign_code {
            return Some((n, format!("{} {code}", two_places(&amount)?), EntitySource::Exact, sign_start));
        }
        // "250 USD", "40 euros", "250€".
        let after = self.after(i + n - 1).trim();
        if let Some(code) = after.chars().next().and_then(|c| currency_sign(&c.to_string(), self.declared.dollar)) {
            return Some((n, format!("{} {code}", two_places(&amount)?), EntitySource::Exact, None));
        }
        let unit = self.word(i + n)?;
        let code = currency_code(unit).or_else(|| currency_word(unit, self.declared.dollar))?;
        Some((n + 1, format!("{} {code}", two_places(&amount)?), EntitySource::Exact, None))
    }

    // ---- dates ----

    fn date(&self, i: usize) -> Option<(usize, NaiveDate, EntitySource, Option<usize>)> {
        let today = self.clock.today;
        let w = self.word(i)?;
        let exact = |n: usize, d: NaiveDate| Some((n, d, EntitySource::Exact, None));
        let inferred = |n: usize, d: NaiveDate| Some((n, d, EntitySource::Inferred, None));
        // 2026-03-14
        if w.len() == 4 && is_digits(w) && self.gap(i) == "-" && self.gap(i + 1) == "-" {
            let (y, m, d) = (w.parse().ok()?, self.small(i + 1)?, self.small(i + 2)?);
            return exact(3, NaiveDate::from_ymd_opt(y, m, d)?);
        }
        // 15/03, 15/03/2026, 15.03.2026, 15-03-2026 (3/15 in the Americas).
        if is_digits(w) && w.len() <= 2 {
            let sep = self.gap(i);
            if matches!(sep, "/" | "." | "-") {
                if let Some(b) = self.small(i + 1) {
                    let a: u32 = w.parse().ok()?;
                    let with_year = self.gap(i + 1) == sep
                        && self.word(i + 2).is_some_and(|y| is_digits(y) && (y.len() == 2 || y.len() == 4));
                    if sep == "/" || with_year {
                        let (day, month) =
                            if (self.declared.month_first && b <= 31 && a <= 12) || b > 12 { (b, a) } else { (a, b) };
                        if with_year {
                            let y: i32 = self.tokens[i + 2].text.parse().ok()?;
                            let y = if y < 100 { 2000 + y } else { y };
                            return exact(3, NaiveDate::from_ymd_opt(y, month, day)?);
                        }
                        return exact(2, next_day_month(today, day, month)?);
                    }
                }
            }
        }
        // 14 March, 14th of March 2026.
        if let Some(day) = day_number(w) {
            let of = usize::from(self.word(i + 1) == Some("of"));
            if let Some(month) = self.word(i + 1 + of).and_then(|m| month_number(m, true)) {
                let n = 2 + of;
                return match self.year(i + n) {
                    Some(y) => exact(n + 1, NaiveDate::from_ymd_opt(y, month, day)?),
                    None => exact(n, next_day_month(today, day, month)?),
                };
            }
            // "the 22nd", "on the 14th": the next such day of a month.
            let ordinal = w.len() > 2 && !is_digits(w);
            let after_the = i > 0 && matches!(self.tokens[i - 1].text.as_str(), "the" | "on");
            if ordinal && after_the {
                return inferred(1, next_day(today, day)?);
            }
        }
        // March 14, Mar 14th, March 14, 2026.
        if let Some(month) = month_number(w, false) {
            if let Some(day) = self.word(i + 1).and_then(day_number) {
                let ordinal = !is_digits(&self.tokens[i + 1].text);
                if w != "may" || ordinal || self.year(i + 2).is_some() {
                    return match self.year(i + 2) {
                        Some(y) => exact(3, NaiveDate::from_ymd_opt(y, month, day)?),
                        None => exact(2, next_day_month(today, day, month)?),
                    };
                }
            }
        }
        match w {
            "today" | "tonight" => return inferred(1, today),
            "tomorrow" => return inferred(1, today.checked_add_days(Days::new(1))?),
            "yesterday" => return inferred(1, today.checked_sub_days(Days::new(1))?),
            "day" if self.word(i + 1) == Some("after") && self.word(i + 2) == Some("tomorrow") => {
                return inferred(3, today.checked_add_days(Days::new(2))?)
            }
            _ => {}
        }
        // Friday, this Friday, next Friday, Friday next week.
        let (modifier, at) = match w {
            "this" | "coming" | "next" => (Some(w), i + 1),
            _ => (None, i),
        };
        if let Some(weekday) = self.word(at).and_then(weekday) {
            let ahead = (7 + weekday.num_days_from_monday() as i64 - today.weekday().num_days_from_monday() as i64) % 7;
            let next_week_after = self.word(at + 1) == Some("next") && self.word(at + 2) == Some("week");
            let days = match modifier {
                Some("this") => ahead,
                Some("next") => {
                    // The one in the next calendar week.
                    let plain = if ahead == 0 { 7 } else { ahead };
                    let to_sunday = 6 - today.weekday().num_days_from_monday() as i64;
                    if plain <= to_sunday {
                        plain + 7
                    } else {
                        plain
                    }
                }
                _ if next_week_after => {
                    let to_next_monday = 7 - today.weekday().num_days_from_monday() as i64;
                    to_next_monday + weekday.num_days_from_monday() as i64
                }
                _ => {
                    if ahead == 0 {
                        7
                    } else {
                        ahead
                    }
                }
            };
            let n = (at - i) + 1 + if next_week_after && modifier.is_none() { 2 } else { 0 };
            return inferred(n, today.checked_add_days(Days::new(days as u64))?);
        }
        // in two weeks, in 3 days, in a month.
        if w == "in" {
            let (count, unit_at) = match self.word(i + 1) {
                Some("a" | "an") => (1, i + 2),
                Some(_) => {
                    let (n, value) = self.amount(i + 1)?;
                    (value.parse::<u32>().ok()?, i + 1 + n)
                }
                None => return None,
            };
            let date = shift(today, count, self.word(unit_at)?)?;
            return inferred(unit_at + 1 - i, date);
        }
        // two weeks from now, 3 days from today.
        if let Some((n, value)) = self.amount(i) {
            let count: u32 = value.parse().ok()?;
            if self.word(i + n + 1) == Some("from") && matches!(self.word(i + n + 2), Some("now" | "today")) {
                let date = shift(today, count, self.word(i + n)?)?;
                return inferred(n + 3, date);
            }
        }
        None
    }

    /// A month or day number (1–31) written in digits at `k`.
    fn small(&self, k: usize) -> Option<u32> {
        let w = self.word(k)?;
        (is_digits(w) && w.len() <= 2).then(|| w.parse().ok()).flatten().filter(|n| (1..=31).contains(n))
    }

    /// A four-digit year at `k`.
    fn year(&self, k: usize) -> Option<i32> {
        let w = self.word(k)?;
        (w.len() == 4 && is_digits(w)).then(|| w.parse().ok()).flatten().filter(|y| (1990..=2099).contains(y))
    }

    // ---- times ----

    fn time(&self, i: usize) -> Option<(usize, (u32, u32))> {
        let w = self.word(i)?;
        match w {
            "noon" | "midday" => return Some((1, (12, 0))),
            "midnight" => return Some((1, (0, 0))),
            _ => {}
        }
        // 3pm, 11am
        if let Some((hour, meridiem)) = split_meridiem(w) {
            return Some((1, (with_meridiem(hour, meridiem)?, 0)));
        }
        // half past seven pm, quarter past 6 in the evening, quarter to 8 pm
        if matches!(w, "half" | "quarter") && matches!(self.word(i + 1), Some("past" | "to")) {
            let (hour, used) = self.clock_hour(i + 2)?;
            let (pm, more) = self.day_part(i + 2 + used);
            let pm = pm?;
            let hour = with_meridiem(hour, pm)?;
            let (hour, minutes) = match (w, self.word(i + 1)) {
                ("half", Some("past")) => (hour, 30),
                ("quarter", Some("past")) => (hour, 15),
                ("quarter", Some("to")) => ((hour + 23) % 24, 45),
                _ => return None,
            };
            return Some((2 + used + more, (hour, minutes)));
        }
        // six pm, seven thirty pm, 6 in the evening, 7 o'clock in the evening
        if let Some((hour, used)) = self.clock_hour(i) {
            let minutes_word = self.word(i + used).and_then(number_word).filter(|m| (10..=59).contains(m));
            let (minutes, with_minutes) = match minutes_word {
                Some(m) => (m, 1),
                None => (0, 0),
            };
            let oclock = usize::from(
                with_minutes == 0 && self.word(i + used) == Some("o") && self.word(i + used + 1) == Some("clock"),
            ) * 2;
            let after = i + used + with_minutes + oclock;
            let (pm, more) = self.day_part(after);
            if let Some(pm) = pm {
                let digits = is_digits(w);
                // "6 pm" is read below; here words, or digits with a part of the day.
                if !digits || more > 1 {
                    return Some((after - i + more, (with_meridiem(hour, pm)?, minutes)));
                }
            }
        }
        let hour: u32 = if is_digits(w) && w.len() <= 2 { w.parse().ok()? } else { return None };
        // 14:30, 7.30pm, 9:05 am
        if matches!(self.gap(i), ":" | ".") && i + 1 < self.tokens.len() && !self.taken[i + 1] {
            let next = self.tokens[i + 1].text.as_str();
            let (minutes, meridiem, used) = match split_meridiem(next) {
                Some((m, mer)) if next.len() == 4 => (m, Some(mer), 2),
                _ if next.len() == 2 && is_digits(next) => {
                    let (mer, more) = self.meridiem_after(i + 2);
                    (next.parse().ok()?, mer, 2 + more)
                }
                _ => return None,
            };
            if minutes > 59 || (self.gap(i) == "." && meridiem.is_none()) {
                return None;
            }
            let hour = match meridiem {
                Some(m) => with_meridiem(hour, m)?,
                None if hour <= 23 => hour,
                None => return None,
            };
            return Some((used, (hour, minutes)));
        }
        // 3 pm, 3 p.m.
        let (meridiem, more) = self.meridiem_after(i + 1);
        if let Some(m) = meridiem {
            return Some((1 + more, (with_meridiem(hour, m)?, 0)));
        }
        // at 7 o'clock, at 7 in the evening, at 8 tonight
        let after_at = i > 0 && self.tokens[i - 1].text == "at";
        if after_at && (1..=12).contains(&hour) {
            if self.word(i + 1) == Some("o") && self.word(i + 2) == Some("clock") {
                return Some((3, (hour, 0)));
            }
            let later = match (self.word(i + 1), self.word(i + 2), self.word(i + 3)) {
                (Some("tonight"), _, _) => Some((2, true)),
                (Some("in"), Some("the"), Some("evening" | "afternoon")) => Some((4, true)),
                (Some("in"), Some("the"), Some("morning")) => Some((4, false)),
                _ => None,
            };
            if let Some((n, pm)) = later {
                let n = if n == 2 { 1 } else { n };
                return Some((n, (if pm && hour < 12 { hour + 12 } else { hour % 12 }, 0)));
            }
        }
        None
    }

    /// An hour of the clock (1-12) at `k`, in digits or a word: (hour, tokens used).
    fn clock_hour(&self, k: usize) -> Option<(u32, usize)> {
        let w = self.word(k)?;
        let hour = if is_digits(w) && w.len() <= 2 { w.parse().ok()? } else { number_word(w)? };
        (1..=12).contains(&hour).then_some((hour, 1))
    }

    /// The part of the day after a clock hour at `k`: "pm" / "am" / "a.m.", "in the evening",
    /// "in the morning", "tonight": (is pm, tokens used).
    fn day_part(&self, k: usize) -> (Option<bool>, usize) {
        let (meridiem, used) = self.meridiem_after(k);
        if meridiem.is_some() {
            return (meridiem, used);
        }
        match (self.word(k), self.word(k + 1), self.word(k + 2)) {
            (Some("tonight"), _, _) => (Some(true), 1),
            (Some("in"), Some("the"), Some("evening" | "afternoon")) => (Some(true), 3),
            (Some("in"), Some("the"), Some("morning")) => (Some(false), 3),
            _ => (None, 0),
        }
    }

    /// "am" / "pm" / "a.m." at `k`: (is pm, tokens used).
    fn meridiem_after(&self, k: usize) -> (Option<bool>, usize) {
        match (self.word(k), self.word(k + 1)) {
            (Some("am"), _) => (Some(false), 1),
            (Some("pm"), _) => (Some(true), 1),
            (Some("a"), Some("m")) if self.gap(k) == "." => (Some(false), 2),
            (Some("p"), Some("m")) if self.gap(k) == "." => (Some(true), 2),
            _ => (None, 0),
        }
    }

    // ---- durations ----

    fn duration(&self, i: usize) -> Option<(usize, String)> {
        let w = self.word(i)?;
        // half an hour, an hour and a half
        if w == "half" && matches!(self.word(i + 1), Some("an" | "a")) && self.word(i + 2).and_then(unit) == Some('h') {
            return Some((3, "PT30M".into()));
        }
        // half a day, half an hour
        if w == "half" && matches!(self.word(i + 1), Some("an" | "a")) {
            let u = unit(self.word(i + 2)?)?;
            return Some((3, iso_duration(0.5, u)?));
        }
        // 2h, 30min, 3hrs
        if let Some(split) = w.find(|c: char| !c.is_ascii_digit()).filter(|&at| at > 0) {
            let (digits, suffix) = w.split_at(split);
            let u = match suffix {
                "h" => Some('h'),
                "m" => None,
                other => unit(other),
            };
            if let (Some(u), Ok(amount)) = (u, digits.parse::<f64>()) {
                return Some((1, iso_duration(amount, u)?));
            }
        }
        let (n, count) = match w {
            "a" | "an" => (1, "1".to_string()),
            "fortnight" => return Some((1, "P2W".into())),
            _ => self.amount(i)?,
        };
        // two and a half hours
        if self.word(i + n) == Some("and") && self.word(i + n + 1) == Some("a") && self.word(i + n + 2) == Some("half")
        {
            let u = unit(self.word(i + n + 3)?)?;
            let amount: f64 = count.parse::<f64>().ok()? + 0.5;
            return Some((n + 4, iso_duration(amount, u)?));
        }
        let unit_word = self.word(i + n)?;
        if unit_word == "fortnight" || unit_word == "fortnights" {
            let weeks: f64 = count.parse::<f64>().ok()? * 2.0;
            return Some((n + 1, format!("P{}W", trim_number(weeks))));
        }
        let u = unit(unit_word)?;
        let mut used = n + 1;
        let mut amount: f64 = count.parse().ok()?;
        if self.word(used) == Some("and") && self.word(used + 1) == Some("a") && self.word(used + 2) == Some("half") {
            amount += 0.5;
            used += 3;
        }
        Some((used, iso_duration(amount, u)?))
    }
}

mod words;
use words::*;

#[cfg(test)]
mod tests;
