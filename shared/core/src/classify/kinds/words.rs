//! Words and numbers the kinds read: digits, number words, days, months, units, currencies.

use super::*;

pub(super) fn is_digits(w: &str) -> bool {
    !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn number_word(w: &str) -> Option<u32> {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    const TENS: [&str; 7] = ["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
    if let Some(p) = WORDS.iter().position(|x| *x == w) {
        return Some(p as u32);
    }
    if let Some(p) = TENS.iter().position(|x| *x == w) {
        return Some(30 + 10 * p as u32);
    }
    match w {
        "dozen" => Some(12),
        "hundred" => Some(100),
        _ => None,
    }
}

/// A day of the month: `14`, `14th`, `1st`, `22nd`, `3rd`.
pub(super) fn day_number(w: &str) -> Option<u32> {
    let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &w[digits.len()..];
    if !is_digits(digits) || digits.len() > 2 || !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// A month's number from its name or (unless `full_only` for "may") its abbreviation.
pub(super) fn month_number(w: &str, after_day: bool) -> Option<u32> {
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
    if let Some(p) = MONTHS.iter().position(|m| *m == w) {
        return Some(p as u32 + 1);
    }
    let short = if w == "sept" { "sep" } else { w };
    if short.len() == 3 && (after_day || short != "mar") {
        return MONTHS.iter().position(|m| m.starts_with(short)).map(|p| p as u32 + 1);
    }
    None
}

pub(super) fn weekday(w: &str) -> Option<Weekday> {
    Some(match w {
        "monday" => Weekday::Mon,
        "tuesday" => Weekday::Tue,
        "wednesday" => Weekday::Wed,
        "thursday" => Weekday::Thu,
        "friday" => Weekday::Fri,
        "saturday" => Weekday::Sat,
        "sunday" => Weekday::Sun,
        _ => return None,
    })
}

/// The next `day` of `month` on or after `today`.
pub(super) fn next_day_month(today: NaiveDate, day: u32, month: u32) -> Option<NaiveDate> {
    let this_year = NaiveDate::from_ymd_opt(today.year(), month, day);
    match this_year {
        Some(d) if d >= today => Some(d),
        _ => NaiveDate::from_ymd_opt(today.year() + 1, month, day),
    }
}

/// The next `day` of a month on or after `today`.
pub(super) fn next_day(today: NaiveDate, day: u32) -> Option<NaiveDate> {
    let mut month_start = today.with_day(1)?;
    for _ in 0..3 {
        if let Some(d) = month_start.with_day(day) {
            if d >= today {
                return Some(d);
            }
        }
        month_start = month_start.checked_add_months(Months::new(1))?;
    }
    None
}

/// `today` moved on by `count` units (`days`, `weeks`, `months`, `years`).
pub(super) fn shift(today: NaiveDate, count: u32, unit_word: &str) -> Option<NaiveDate> {
    match unit_word {
        "day" | "days" => today.checked_add_days(Days::new(u64::from(count))),
        "week" | "weeks" => today.checked_add_days(Days::new(7 * u64::from(count))),
        "fortnight" | "fortnights" => today.checked_add_days(Days::new(14 * u64::from(count))),
        "month" | "months" => today.checked_add_months(Months::new(count)),
        "year" | "years" => today.checked_add_months(Months::new(12 * count)),
        _ => None,
    }
}

/// `3pm` → (3, true).
pub(super) fn split_meridiem(w: &str) -> Option<(u32, bool)> {
    let (digits, pm) = if let Some(d) = w.strip_suffix("pm") { (d, true) } else { (w.strip_suffix("am")?, false) };
    (is_digits(digits) && digits.len() <= 2).then(|| digits.parse().ok().map(|h| (h, pm))).flatten()
}

pub(super) fn with_meridiem(hour: u32, pm: bool) -> Option<u32> {
    match (hour, pm) {
        (1..=11, true) => Some(hour + 12),
        (12, true) => Some(12),
        (12, false) => Some(0),
        (1..=11, false) => Some(hour),
        _ => None,
    }
}

/// A duration unit: `Y`ears, `M`onths, `W`eeks, `D`ays, `h`ours, `m`inutes.
pub(super) fn unit(w: &str) -> Option<char> {
    Some(match w {
        "year" | "years" | "yr" | "yrs" => 'Y',
        "month" | "months" => 'M',
        "week" | "weeks" | "wk" | "wks" => 'W',
        "day" | "days" | "night" | "nights" => 'D',
        "hour" | "hours" | "hr" | "hrs" => 'h',
        "minute" | "minutes" | "min" | "mins" => 'm',
        _ => return None,
    })
}

/// ISO 8601 for `amount` of `unit` (fractions of hours and days carried into the next unit).
pub(super) fn iso_duration(amount: f64, unit: char) -> Option<String> {
    if !(amount > 0.0 && amount.is_finite()) {
        return None;
    }
    Some(match unit {
        'h' if amount.fract() != 0.0 => {
            let minutes = (amount * 60.0).round() as u64;
            match (minutes / 60, minutes % 60) {
                (0, m) => format!("PT{m}M"),
                (h, m) => format!("PT{h}H{m}M"),
            }
        }
        'D' if amount.fract() != 0.0 => {
            let hours = (amount * 24.0).round() as u64;
            match (hours / 24, hours % 24) {
                (0, h) => format!("PT{h}H"),
                (d, h) => format!("P{d}DT{h}H"),
            }
        }
        'h' => format!("PT{}H", trim_number(amount)),
        'm' => format!("PT{}M", trim_number(amount)),
        other => format!("P{}{other}", trim_number(amount)),
    })
}

pub(super) fn trim_number(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{}", n as u64)
    } else {
        format!("{n}")
    }
}

/// `250` → `250.00`; `1200.5` → `1200.50`.
pub(super) fn two_places(amount: &str) -> Option<String> {
    let value: f64 = amount.parse().ok()?;
    Some(format!("{value:.2}"))
}

pub(super) fn currency_sign(sign: &str, dollar: &'static str) -> Option<&'static str> {
    Some(match sign {
        "$" => dollar,
        "€" => "EUR",
        "£" => "GBP",
        "¥" => "JPY",
        "₹" => "INR",
        _ => return None,
    })
}

pub(super) fn currency_code(w: &str) -> Option<&'static str> {
    const CODES: [&str; 12] = ["usd", "eur", "gbp", "aud", "cad", "nzd", "chf", "jpy", "sek", "nok", "dkk", "inr"];
    const UPPER: [&str; 12] = ["USD", "EUR", "GBP", "AUD", "CAD", "NZD", "CHF", "JPY", "SEK", "NOK", "DKK", "INR"];
    CODES.iter().position(|c| *c == w).map(|p| UPPER[p])
}

pub(super) fn currency_word(w: &str, dollar: &'static str) -> Option<&'static str> {
    Some(match w {
        "dollar" | "dollars" | "bucks" => dollar,
        "euro" | "euros" => "EUR",
        "pound" | "pounds" | "quid" => "GBP",
        "franc" | "francs" => "CHF",
        "yen" => "JPY",
        _ => return None,
    })
}
