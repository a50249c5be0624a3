use super::*;
use crate::classify::text::tokenize;

/// Thursday 2026-03-05, 10:00 UTC.
const NOW: &str = "2026-03-05T10:00:00Z";

/// (entity type, value) of `text` for types named by `kinds` (type index = position).
fn read_in(zone: &str, kinds: &[(EntityKind, &str)], text: &str) -> Vec<(usize, String)> {
    let declared: Vec<(EntityKind, usize, String)> =
        kinds.iter().enumerate().map(|(i, (k, d))| (*k, i, (*d).to_string())).collect();
    let zone: chrono_tz::Tz = zone.parse().expect("zone");
    let d = Declared::new(&declared, zone);
    let now: DateTime<Utc> = NOW.parse().expect("now");
    let tokens = tokenize(text, 64);
    let mut taken = vec![false; tokens.len()];
    let mut out: Vec<(usize, String)> = d.emails(text).into_iter().map(|(t, _, _, v)| (t, v)).collect();
    out.extend(d.find(text, &tokens, &mut taken, &Clock::new(now, zone)).into_iter().map(|m| (m.entity_type, m.value)));
    out
}

fn read(kind: EntityKind, text: &str) -> Vec<String> {
    read_in("UTC", &[(kind, "the value")], text).into_iter().map(|(_, v)| v).collect()
}

#[test]
fn absolute_dates_are_written_as_iso_days() {
    for (text, want) in [
        ("on 2026-03-14", "2026-03-14"),
        ("from 14 March", "2026-03-14"),
        ("the 14th of March 2027", "2027-03-14"),
        ("March 14th", "2026-03-14"),
        ("Feb 2", "2027-02-02"),
        ("15/03", "2026-03-15"),
        ("15/03/2026", "2026-03-15"),
        ("15.03.2026", "2026-03-15"),
    ] {
        assert_eq!(read(EntityKind::Date, text), [want], "{text}");
    }
}

#[test]
fn relative_dates_are_read_against_now_in_the_manifests_zone() {
    for (text, want) in [
        ("tomorrow", "2026-03-06"),
        ("today please", "2026-03-05"),
        ("the day after tomorrow", "2026-03-07"),
        ("this Friday", "2026-03-06"),
        ("on Friday", "2026-03-06"),
        ("next Friday", "2026-03-13"),
        ("on Thursday", "2026-03-12"),
        ("in two weeks", "2026-03-19"),
        ("in 3 days", "2026-03-08"),
        ("on the 22nd", "2026-03-22"),
        ("on the 2nd", "2026-04-02"),
    ] {
        assert_eq!(read(EntityKind::Date, text), [want], "{text}");
    }
    // 10:00 UTC is already the next day on Kiritimati (UTC+14).
    assert_eq!(read_in("Pacific/Kiritimati", &[(EntityKind::Date, "day")], "tomorrow")[0].1, "2026-03-07");
    // The Americas write the month first.
    assert_eq!(read_in("America/New_York", &[(EntityKind::Date, "day")], "3/15")[0].1, "2026-03-15");
}

#[test]
fn words_that_only_look_like_dates_are_not_dates() {
    assert!(read(EntityKind::Date, "may I book a table").is_empty());
    assert!(read(EntityKind::Date, "2.5 hours").is_empty());
}

#[test]
fn times_are_written_as_24_hour_clock() {
    for (text, want) in [
        ("at 14:30", "14:30"),
        ("3pm", "15:00"),
        ("at 7 pm", "19:00"),
        ("9:05 am", "09:05"),
        ("7.30pm", "19:30"),
        ("at noon", "12:00"),
        ("at 8 in the evening", "20:00"),
        ("12am", "00:00"),
        ("six pm", "18:00"),
        ("seven thirty pm", "19:30"),
        ("half past seven pm", "19:30"),
        ("quarter past 6 in the evening", "18:15"),
        ("quarter to 8 pm", "19:45"),
        ("6 in the evening", "18:00"),
        ("7 o'clock in the evening", "19:00"),
    ] {
        assert_eq!(read(EntityKind::Time, text), [want], "{text}");
    }
    assert!(read(EntityKind::Time, "for 4 people").is_empty());
    assert!(read(EntityKind::Time, "half past seven").is_empty(), "no bare hour without its part of the day");
}

#[test]
fn numbers_are_written_in_digits() {
    for (text, want) in [
        ("for 4 people", "4"),
        ("six of us", "6"),
        ("twenty five guests", "25"),
        ("1,200 units", "1200"),
        ("2.5", "2.5"),
        ("one hundred guests", "100"),
        ("two hundred and fifty boxes", "250"),
        ("three thousand", "3000"),
        ("twenty-two people", "22"),
        ("a dozen eggs", "12"),
    ] {
        assert_eq!(read(EntityKind::Number, text), [want], "{text}");
    }
    assert!(read(EntityKind::Number, "which one").is_empty());
}

#[test]
fn amounts_carry_two_decimals_and_their_currency() {
    for (text, want) in [
        ("$250", "250.00 USD"),
        ("€40.5", "40.50 EUR"),
        ("£1,200", "1200.00 GBP"),
        ("250 dollars", "250.00 USD"),
        ("40 euros", "40.00 EUR"),
        ("EUR 30", "30.00 EUR"),
        ("99 chf", "99.00 CHF"),
        ("75€", "75.00 EUR"),
    ] {
        assert_eq!(read(EntityKind::Money, text), [want], "{text}");
    }
    assert_eq!(read_in("Australia/Sydney", &[(EntityKind::Money, "price")], "$30")[0].1, "30.00 AUD");
    assert!(read(EntityKind::Money, "for 4 people").is_empty());
}

#[test]
fn durations_are_iso_8601() {
    for (text, want) in [
        ("for two weeks", "P2W"),
        ("3 nights", "P3D"),
        ("an hour", "PT1H"),
        ("half an hour", "PT30M"),
        ("1.5 hours", "PT1H30M"),
        ("45 minutes", "PT45M"),
        ("six months", "P6M"),
        ("a fortnight", "P2W"),
        ("half a day", "PT12H"),
        ("two and a half hours", "PT2H30M"),
        ("a day and a half", "P1DT12H"),
        ("2h", "PT2H"),
        ("30min", "PT30M"),
        ("a 3-day rental", "P3D"),
    ] {
        assert_eq!(read(EntityKind::Duration, text), [want], "{text}");
    }
}

#[test]
fn a_date_and_a_duration_share_words_by_their_preposition() {
    let both = [(EntityKind::Date, "the day"), (EntityKind::Duration, "how long")];
    assert_eq!(read_in("UTC", &both, "in two weeks for 3 days"), [(0, "2026-03-19".into()), (1, "P3D".into())]);
}

#[test]
fn email_addresses_are_lower_case() {
    assert_eq!(read(EntityKind::Email, "write to Anna.Berg@Example.COM, thanks."), ["anna.berg@example.com"]);
    assert!(read(EntityKind::Email, "meet @ noon").is_empty());
}

#[test]
fn two_types_of_one_kind_are_told_apart_by_the_words_before_the_value() {
    let kinds = [
        (EntityKind::Date, "pickup date the day you pick up the car"),
        (EntityKind::Date, "return date the day you return the car"),
    ];
    let got = read_in("UTC", &kinds, "returning on the 22nd, picking up tomorrow");
    assert_eq!(got, [(1, "2026-03-22".into()), (0, "2026-03-06".into())]);
    // Without a cue, in the order of the text.
    let got = read_in("UTC", &kinds, "from 14 March to 20 March");
    assert_eq!(got, [(0, "2026-03-14".into()), (1, "2026-03-20".into())]);
}
