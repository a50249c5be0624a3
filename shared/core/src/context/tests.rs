use super::*;
use chrono::TimeZone;
use switchyard_model::contracts::EntitySource;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).single().unwrap_or_default()
}

fn brand(value: &str) -> ParsedEntity {
    ParsedEntity {
        entity_type: "brand".into(),
        value: value.into(),
        text: value.into(),
        confidence: 1.0,
        source: EntitySource::Exact,
    }
}

fn input(n: usize, answer: &str) -> TurnInput {
    TurnInput {
        query_id: format!("q-{n}"),
        question: format!("What is the market share of Kisqali in the Northeast for quarter {n}?"),
        intent: "kpi_lookup".into(),
        entities: vec![brand("Kisqali")],
        answer: answer.into(),
        status: OutputStatus::Success,
        out_of_scope: false,
        missing_entities: vec![],
        unsure: false,
        preferences: None,
    }
}

/// Record `turns` turns the way the synthesizer does (extractive compaction).
fn conversation(settings: &ContextSettings, turns: usize, answer: &str) -> SessionRecord {
    let mut s = SessionRecord::new("u-1", "s-1", now(), 0);
    for n in 1..=turns {
        let old = append_turn(settings, &mut s, input(n, answer), now(), 100);
        if let Some(last) = old.last() {
            let through = last.seq;
            merge_summary(settings, &mut s, extractive_lines(&old), through, "extractive");
        }
    }
    s
}

#[test]
fn turns_are_numbered_and_recorded_once_by_query_id() {
    let settings = ContextSettings::default();
    let s = conversation(&settings, 3, "Share was 12%.");
    assert_eq!(s.turn_count, 3);
    assert_eq!(s.turns.iter().map(|t| t.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(s.has_recorded("q-2"));
    assert!(!s.has_recorded("q-4"));
    assert_eq!(s.prior_turns().len(), 3);
}

#[test]
fn below_the_summary_threshold_nothing_is_compacted_and_above_it_the_oldest_turns_are() {
    // GIVEN a threshold that three of these turns fit under and four do not
    let mut settings = ContextSettings::default();
    let one = tokens::count(&turn_text(&Turn {
        seq: 1,
        query_id: "q-1".into(),
        question: input(1, "").question,
        intent: "kpi_lookup".into(),
        entities: vec![],
        answer: "Share was 12%.".into(),
        status: OutputStatus::Success,
        out_of_scope: false,
        missing_entities: vec![],
        at: now(),
    }));
    settings.summary.threshold_tokens = one * 3 + one / 2;
    settings.summary.keep_turns = 1;
    // WHEN three turns are recorded THEN all stay raw
    let s = conversation(&settings, 3, "Share was 12%.");
    assert_eq!(s.turns.len(), 3);
    assert!(s.summary.is_none());
    // WHEN a fourth is recorded THEN the three oldest are compacted, extractively
    let s = conversation(&settings, 4, "Share was 12%.");
    assert_eq!(s.turns.iter().map(|t| t.seq).collect::<Vec<_>>(), vec![4]);
    let summary = s.summary.as_ref().expect("a summary");
    assert_eq!(summary.lines.len(), 3);
    assert_eq!(summary.through_turn, 3);
    assert_eq!(summary.method, "extractive");
    assert!(summary.lines[0].starts_with("[turn 1 · kpi_lookup] Q: What is the market share"), "{}", summary.lines[0]);
    assert!(summary.lines[0].ends_with("A: Share was 12%."), "{}", summary.lines[0]);
}

#[test]
fn more_turns_than_the_history_view_holds_are_compacted_even_when_short() {
    let mut settings = ContextSettings::default();
    settings.history_turns = 4;
    settings.summary.keep_turns = 2;
    let s = conversation(&settings, 5, "ok");
    assert_eq!(s.turns.len(), 2);
    assert_eq!(s.summary.as_ref().map(|x| x.lines.len()), Some(3));
}

#[test]
fn a_fifty_turn_session_stays_bounded() {
    let settings = ContextSettings::default();
    let long_answer = "Kisqali held 31% of new patient starts in the Northeast in Q3, up two points. ".repeat(40);
    let s = conversation(&settings, 50, &long_answer);
    let bytes = serde_json::to_vec(&s).map(|v| v.len()).unwrap_or(usize::MAX);
    println!(
        "50-turn session: {bytes} bytes stored, {} raw turns, {} summary lines",
        s.turns.len(),
        s.summary.as_ref().map_or(0, |x| x.lines.len())
    );
    assert!(bytes < 64 * 1024, "{bytes} bytes");
    assert!(s.turns.len() <= settings.history_turns);
    let summary_tokens: usize = s.summary.iter().flat_map(|x| x.lines.iter()).map(|l| tokens::count(l) + 1).sum();
    assert!(summary_tokens <= settings.summary.max_tokens, "{summary_tokens}");
    assert_eq!(s.recorded.len(), 50.min(RECORDED_IDS));
}

#[test]
fn notes_decay_each_turn_they_are_not_mentioned_and_refresh_when_they_are() {
    let settings = ContextSettings::default();
    let mut s = SessionRecord::new("u", "s", now(), 0);
    append_turn(&settings, &mut s, input(1, "a"), now(), 0);
    let mut other = input(2, "b");
    other.entities = vec![ParsedEntity { entity_type: "region".into(), ..brand("Northeast") }];
    append_turn(&settings, &mut s, other, now(), 0);
    let brand_note = s.notes.iter().find(|n| n.key == "entity:brand").expect("brand note");
    assert!((brand_note.score - 0.8).abs() < 1e-9);
    assert_eq!(brand_note.last_seen_turn, 1);
    assert_eq!(s.notes[0].key, "entity:region", "freshest first");
    append_turn(&settings, &mut s, input(3, "c"), now(), 0);
    let brand_note = s.notes.iter().find(|n| n.key == "entity:brand").expect("brand note");
    assert_eq!((brand_note.score, brand_note.last_seen_turn), (1.0, 3));
}

#[test]
fn an_unanswered_question_stays_open_until_its_intent_is_answered() {
    let settings = ContextSettings::default();
    let mut s = SessionRecord::new("u", "s", now(), 0);
    let mut failed = input(1, "");
    failed.status = OutputStatus::Failed;
    append_turn(&settings, &mut s, failed, now(), 0);
    assert!(s.notes.iter().any(|n| n.kind == NoteKind::OpenQuestion));
    append_turn(&settings, &mut s, input(2, "answered"), now(), 0);
    assert!(!s.notes.iter().any(|n| n.kind == NoteKind::OpenQuestion));
}

#[test]
fn notes_below_the_minimum_score_are_forgotten() {
    let mut settings = ContextSettings::default();
    settings.notes.decay = 0.5;
    settings.notes.min_score = 0.3;
    let mut s = SessionRecord::new("u", "s", now(), 0);
    append_turn(&settings, &mut s, input(1, "a"), now(), 0);
    for n in 2..=3 {
        let mut x = input(n, "b");
        x.entities.clear();
        append_turn(&settings, &mut s, x, now(), 0);
    }
    assert!(s.notes.is_empty(), "{:?}", s.notes);
}

#[test]
fn the_budget_keeps_the_latest_turns_exactly_at_the_boundary() {
    let settings = ContextSettings::default();
    let s = conversation(&settings, 4, "Share was 12%.");
    let snap = snapshot(&settings, &s, "And for Fabhalta?");
    let per_turn: Vec<usize> = snap.turns.iter().map(|p| p.tokens).collect();
    let last_two: usize = per_turn[2..].iter().sum();
    // Exactly the two latest turns' tokens: both kept, nothing else fits.
    let at = select(&snap, last_two);
    assert_eq!(at.report.turns_kept, 2);
    assert_eq!(at.report.tokens, last_two);
    assert!(at.history.contains("quarter 3") && at.history.contains("quarter 4"));
    assert!(!at.history.contains("quarter 2"));
    // One token less: only the latest.
    let below = select(&snap, last_two - 1);
    assert_eq!(below.report.turns_kept, 1);
    assert!(below.history.contains("quarter 4") && !below.history.contains("quarter 3"));
    // Zero: nothing at all.
    let none = select(&snap, 0);
    assert_eq!((none.report.turns_kept, none.report.notes_kept, none.history.as_str()), (0, 0, ""));
}

#[test]
fn turns_come_first_then_summary_snippets_then_notes() {
    let mut settings = ContextSettings::default();
    settings.history_turns = 3;
    settings.summary.keep_turns = 2;
    let s = conversation(&settings, 4, "Share was 12%.");
    let snap = snapshot(&settings, &s, "share of Kisqali in quarter 2");
    assert!(!snap.summary.is_empty() && !snap.notes.is_empty());
    let turns: usize = snap.turns.iter().map(|p| p.tokens).sum();
    let with_summary = turns + snap.summary[0].tokens;
    let sel = select(&snap, with_summary);
    assert_eq!((sel.report.turns_kept, sel.report.summary_kept, sel.report.notes_kept), (2, 1, 0));
    let all = select(&snap, 100_000);
    assert_eq!(all.report.dropped(), 0);
    assert!(all.notes.contains("brand: Kisqali"));
}

#[test]
fn summary_snippets_most_relevant_to_the_question_come_first() {
    let mut settings = ContextSettings::default();
    settings.history_turns = 1;
    settings.summary.keep_turns = 1;
    let mut s = conversation(&settings, 3, "ok");
    s.summary = Some(Summary {
        lines: vec!["Fabhalta launch timeline".into(), "Kisqali Northeast share".into(), "Scemblix pricing".into()],
        through_turn: 2,
        method: "extractive".into(),
    });
    let snap = snapshot(&settings, &s, "What about Scemblix pricing?");
    assert_eq!(snap.summary[0].text, "Scemblix pricing");
}

#[test]
fn a_repeated_answer_is_dropped_from_the_view_as_an_echo() {
    let settings = ContextSettings::default();
    let s = conversation(&settings, 3, "Share was 12%.");
    let snap = snapshot(&settings, &s, "next");
    assert_eq!(snap.echoes_dropped, 2);
    assert!(snap.turns[0].text.contains("Assistant: Share was 12%."));
    assert!(!snap.turns[1].text.contains("Assistant:"));
}

#[test]
fn an_oversized_history_is_trimmed_to_the_largest_budget_in_the_snapshot() {
    let mut settings = ContextSettings::default();
    settings.answer_chars = 8_000;
    settings.summary.threshold_tokens = 50_000;
    let mut s = SessionRecord::new("u", "s", now(), 0);
    for n in 1..=12 {
        append_turn(
            &settings,
            &mut s,
            input(n, &format!("{n}: {}", "numbers and more numbers ".repeat(300))),
            now(),
            0,
        );
    }
    assert_eq!(s.turns.len(), 12);
    let snap = snapshot(&settings, &s, "q");
    let total: usize = snap.turns.iter().chain(&snap.summary).chain(&snap.notes).map(|p| p.tokens).sum();
    assert!(total <= settings.budgets.largest(), "{total}");
    assert!(snap.over_budget > 0);
}

#[test]
fn out_of_scope_turns_are_not_offered_to_the_classifier() {
    let settings = ContextSettings::default();
    let mut s = SessionRecord::new("u", "s", now(), 0);
    append_turn(&settings, &mut s, input(1, "a"), now(), 0);
    let mut off = input(2, "I can help with …");
    off.out_of_scope = true;
    append_turn(&settings, &mut s, off, now(), 0);
    assert_eq!(s.prior_turns().len(), 1);
}
