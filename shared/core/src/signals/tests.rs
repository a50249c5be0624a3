use super::refit::{insert_utterances, is_check, refit, RefitOptions, RefitOutcome};
use super::*;
use chrono::TimeZone;
use switchyard_model::contracts::RoutingTrainingSignal;
use switchyard_model::manifest::Manifest;
use switchyard_model::manifest::EMBEDDED_ROUTING_YAML;

fn manifest() -> Manifest {
    Manifest::embedded().expect("embedded manifest")
}

fn signal(id: &str, query: &str, intent: &str) -> RoutingTrainingSignal {
    RoutingTrainingSignal {
        signal_id: id.into(),
        session_id: "sess".into(),
        query: query.into(),
        query_pattern: intent.into(),
        intent: intent.into(),
        entities_extracted: vec![],
        agents_selected: vec![intent.into()],
        routing_confidence: 0.6,
        routing_rationale: "embedded".into(),
        agents_succeeded: 1,
        agents_failed: 0,
        total_latency_ms: 1_500.0,
        user_satisfaction: None,
        answer_quality: None,
        was_rerouted: false,
    }
}

fn at(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 12, minute, 0).single().expect("time")
}

fn parse(body: &str) -> Result<Feedback, FieldError> {
    Feedback::parse(body.as_bytes(), &manifest())
}

#[test]
fn feedback_accepts_a_rating_with_a_known_intent_and_a_comment() {
    let f = parse(r#"{"rating": 2, "correct_intent": "gap_analysis", "comment": "wrong agent"}"#).expect("valid");
    assert_eq!(f.rating, 2);
    assert_eq!(f.correct_intent.as_deref(), Some("gap_analysis"));
}

#[test]
fn feedback_refuses_ratings_outside_one_to_five_and_non_integers() {
    for body in
        [r#"{"rating": 0}"#, r#"{"rating": 6}"#, r#"{"rating": -1}"#, r#"{"rating": 2.5}"#, r#"{"rating": "5"}"#]
    {
        let err = parse(body).expect_err(body);
        assert_eq!(err.field, "rating", "{body}: {err}");
        assert!(err.rule.contains("1 to 5"), "{err}");
    }
}

#[test]
fn feedback_refuses_an_intent_the_manifest_does_not_declare_without_echoing_it() {
    let err = parse(r#"{"rating": 3, "correct_intent": "<script>drop_tables</script>"}"#).expect_err("unknown");
    assert_eq!(err.field, "correct_intent");
    assert!(err.rule.contains("causal_impact"), "lists the allowed intents: {err}");
    assert!(!err.rule.contains("script"), "does not echo caller text: {err}");
}

#[test]
fn feedback_refuses_oversized_comments_and_bodies_missing_rating_and_unknown_fields() {
    let long = "x".repeat(MAX_COMMENT_CHARS + 1);
    let err = parse(&format!(r#"{{"rating": 4, "comment": "{long}"}}"#)).expect_err("long comment");
    assert_eq!(err.field, "comment");
    let exact = "é".repeat(MAX_COMMENT_CHARS);
    assert!(parse(&format!(r#"{{"rating": 4, "comment": "{exact}"}}"#)).is_ok(), "the limit counts characters");
    let huge = format!(r#"{{"rating": 4, "pad": "{}"}}"#, "y".repeat(MAX_FEEDBACK_BYTES));
    assert_eq!(parse(&huge).expect_err("huge").field, "body");
    assert_eq!(parse(r#"{"comment": "hi"}"#).expect_err("missing").field, "rating");
    assert_eq!(parse(r#"{"rating": 4, "admin": true}"#).expect_err("unknown").field, "body");
    assert_eq!(parse("not json").expect_err("garbage").field, "body");
    assert_eq!(parse("").expect_err("empty").field, "body");
    assert_eq!(parse(r#"{"rating": 4, "comment": "a\u0000b"}"#).expect_err("control").field, "comment");
}

#[test]
fn feedback_sets_satisfaction_and_marks_a_correction_as_a_reroute() {
    let mut s = signal("a", "q", "causal_impact");
    let before = s.compute_reward();
    parse(r#"{"rating": 1, "correct_intent": "gap_analysis"}"#).expect("valid").apply(&mut s);
    assert_eq!(s.user_satisfaction, Some(1.0));
    assert!(s.was_rerouted);
    assert!(s.compute_reward() < before);
    let mut same = signal("b", "q", "causal_impact");
    parse(r#"{"rating": 5, "correct_intent": "causal_impact"}"#).expect("valid").apply(&mut same);
    assert!(!same.was_rerouted, "confirming the routed intent is not a re-route");
}

#[test]
fn reward_edges_stay_in_zero_to_one() {
    let mut s = signal("a", "q", "x");
    s.agents_selected.clear();
    s.agents_succeeded = 0;
    s.total_latency_ms = 1e12;
    s.was_rerouted = true;
    s.user_satisfaction = Some(1.0);
    assert!(s.compute_reward().abs() < 1e-9, "nothing good: 0");
    s.user_satisfaction = Some(9.0);
    assert!((s.compute_reward() - 0.20).abs() < 1e-9, "satisfaction clamps to 1");
    s.total_latency_ms = 61_000.0;
    s.user_satisfaction = None;
    assert!((s.compute_reward() - 0.25 * 0.5 / 0.8).abs() < 1e-9, "half efficiency, renormalized");
}

#[test]
fn export_keeps_newest_first_and_applies_since_and_min_reward() {
    let mut slow = signal("slow", "q", "x");
    slow.agents_succeeded = 0;
    let records = vec![
        SignalRecord::new(signal("old", "q", "x"), None, at(1)),
        SignalRecord::new(signal("new", "q", "x"), None, at(9)),
        SignalRecord::new(slow, None, at(5)),
    ];
    let all = ExportFilter::default().apply(records.clone());
    let ids: Vec<&str> = all.iter().map(|r| r.signal.signal_id.as_str()).collect();
    assert_eq!(ids, ["new", "slow", "old"]);
    let recent = ExportFilter { since: Some(at(5)), min_reward: None }.apply(records.clone());
    assert_eq!(recent.len(), 2);
    let good = ExportFilter { since: None, min_reward: Some(0.9) }.apply(records);
    assert!(good.iter().all(|r| r.signal.signal_id != "slow"));
    assert_eq!(good.len(), 2);
}

#[test]
fn export_lines_carry_the_seed_fields_and_the_reward_and_read_back() {
    let record = SignalRecord::new(signal("a", "q", "causal_impact"), Some("gap_analysis".into()), at(3));
    let line = serde_json::to_string(&record).expect("json");
    let v: serde_json::Value = serde_json::from_str(&line).expect("object");
    for field in [
        "signal_id",
        "session_id",
        "query",
        "query_pattern",
        "intent",
        "entities_extracted",
        "agents_selected",
        "routing_confidence",
        "routing_rationale",
        "agents_succeeded",
        "agents_failed",
        "total_latency_ms",
        "user_satisfaction",
        "answer_quality",
        "was_rerouted",
        "reward",
    ] {
        assert!(v.get(field).is_some(), "missing {field}");
    }
    let back = read_jsonl(&format!("{line}\n\n{line}\n")).expect("reads");
    assert_eq!(back, vec![record.clone(), record]);
    let err = read_jsonl("{\"signal_id\": 1}").expect_err("bad line");
    assert!(err.rule.contains("line 1"), "{err}");
}

#[test]
fn export_flags_are_checked() {
    assert!(parse_min_reward("0.5").is_ok());
    assert_eq!(parse_min_reward("1.5").expect_err("range").field, "min-reward");
    assert_eq!(parse_min_reward("NaN").expect_err("nan").field, "min-reward");
    assert!(parse_since("2026-11-22T20:00:00Z").is_ok());
    assert_eq!(parse_since("yesterday").expect_err("since").field, "since");
}

#[test]
fn optimization_is_requested_for_targets_whose_mean_reward_falls_below_the_threshold() {
    let mut records = Vec::new();
    for n in 0..6 {
        let mut bad = signal(&format!("b{n}"), "q", "gap_analysis");
        bad.agents_succeeded = 0;
        bad.was_rerouted = true;
        records.push(SignalRecord::new(bad, None, at(n)));
        records.push(SignalRecord::new(signal(&format!("g{n}"), "q", "causal_impact"), None, at(n)));
    }
    let requests = optimization_requests(&records, 100, 0.6, 3);
    let targets: Vec<&str> = requests.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(targets, ["gap_analysis"], "the router's mean is above 0.6, causal_impact is perfect");
    assert!(requests.iter().all(|r| r.status == "pending" && r.mean_reward < 0.6));
    assert!(optimization_requests(&records, 100, 0.6, 7).is_empty(), "too few signals per target");
}

#[test]
fn the_line_edit_keeps_every_other_line_and_quotes_hostile_text() {
    let hostile = "What is the effect: of #x on \"y\"?\n- id: evil";
    let (yaml, diff) =
        insert_utterances(EMBEDDED_ROUTING_YAML, &[("gap_analysis".into(), hostile.into())]).expect("edits");
    let old: Vec<&str> = EMBEDDED_ROUTING_YAML.lines().collect();
    let new: Vec<&str> = yaml.lines().collect();
    assert_eq!(new.len(), old.len() + 1);
    let mut m = manifest();
    m.intents.iter_mut().find(|i| i.id == "gap_analysis").expect("intent").utterances.push(hostile.into());
    assert_eq!(Manifest::from_yaml(&yaml, "t").expect("valid"), m, "only that utterance changed");
    assert!(diff.contains("intent gap_analysis"), "{diff}");
    assert!(insert_utterances(EMBEDDED_ROUTING_YAML, &[("nope".into(), "q".into())]).is_err());
}

/// Signal ids that fall in the check set (`check`) or the fit set.
fn ids(check: bool, count: usize) -> Vec<String> {
    (0..).map(|n| format!("sig-{n}")).filter(|id| is_check(id, 3) == check).take(count).collect()
}

#[test]
fn a_refit_that_would_hurt_the_held_out_signals_is_refused() {
    let m = manifest();
    let c = crate::classify::Classifier::new(&m);
    let fit_q = "Which hospitals in Ohio have room to grow for Fabhalta uptake?";
    let check_q = "Which hospitals in Ohio have room to grow for Fabhalta adoption?";
    let routed = c.classify(check_q).intent;
    assert_ne!(routed, "causal_impact", "premise: the check question is not causal");
    // Fit: someone "corrects" the question to causal_impact; check: the same question,
    // confirmed with a top rating at its routed intent.
    let fit_id = &ids(false, 1)[0];
    let check_id = &ids(true, 1)[0];
    let mut wrong = SignalRecord::new(signal(fit_id, fit_q, &routed), Some("causal_impact".into()), at(1));
    wrong.signal.user_satisfaction = Some(1.0);
    let mut right = SignalRecord::new(signal(check_id, check_q, &routed), None, at(2));
    right.signal.user_satisfaction = Some(5.0);
    let outcome =
        refit(EMBEDDED_ROUTING_YAML, "routing.yaml", &[wrong, right], &RefitOptions::default()).expect("runs");
    match outcome {
        RefitOutcome::Refused { report, reason } => {
            assert!(reason.contains("check set"), "{reason}");
            assert_eq!(report.check_before, Some(1.0));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_refit_from_corrections_routes_paraphrases_better_and_keeps_the_manifest_valid() {
    let m = manifest();
    let c = crate::classify::Classifier::new(&m);
    // Questions about ML pipelines phrased like causal questions; the test first finds which of
    // them the shipped manifest misroutes, so it holds whatever the classifier's current state.
    let pairs = [
        ("Did retraining the churn model drive better recall?", "Did retraining the churn model improve its recall?"),
        ("Build a model to predict which HCPs will prescribe next", "Train a model that predicts the next prescribers"),
        ("What drove the drop in the model's precision?", "Why did the model's precision fall?"),
    ];
    let target = "ml_training";
    assert!(m.intent(target).is_some(), "premise: the manifest has {target}");
    let fit_ids = ids(false, pairs.len());
    let mut records = Vec::new();
    for ((q, _), id) in pairs.iter().zip(&fit_ids) {
        let routed = c.classify(q).intent;
        let fix = if routed == target { None } else { Some(target.to_string()) };
        records.push(SignalRecord::new(signal(id, q, &routed), fix, at(1)));
    }
    let misrouted = records.iter().filter(|r| r.correct_intent.is_some()).count();
    let paraphrase_right =
        |c: &crate::classify::Classifier| pairs.iter().filter(|(_, p)| c.classify(p).intent == target).count();
    let outcome = refit(EMBEDDED_ROUTING_YAML, "routing.yaml", &records, &RefitOptions::default()).expect("runs");
    match outcome {
        RefitOutcome::Proposed { yaml, report, .. } => {
            assert!(misrouted > 0);
            let new = Manifest::from_yaml(&yaml, "new").expect("valid");
            assert!(report.own_after >= report.own_before);
            let after = crate::classify::Classifier::new(&new);
            assert!(paraphrase_right(&after) >= paraphrase_right(&c));
            assert!(!report.added.is_empty());
        }
        RefitOutcome::Unchanged { report } => {
            assert!(misrouted == 0 || report.dropped.len() == misrouted, "{report:?}")
        }
        RefitOutcome::Refused { reason, .. } => panic!("refused: {reason}"),
    }
}

#[test]
fn a_stored_signal_exports_with_only_its_latest_feedback_applied() {
    let mut stored = collect::StoredSignal {
        signal: signal("q1", "why did trx drop", "causal_impact"),
        recorded_at: at(1),
        outcome_at: Some(at(2)),
        feedback: Some(Feedback { rating: 1, correct_intent: Some("explanation".into()), comment: None }),
        feedback_at: Some(at(3)),
    };
    let first = stored.record();
    assert!(first.signal.was_rerouted);
    assert_eq!(first.correct_intent.as_deref(), Some("explanation"));
    // A second feedback that agrees with the routing replaces the first: no re-route remains.
    stored.feedback = Some(Feedback { rating: 5, correct_intent: None, comment: Some("thanks".into()) });
    let second = stored.record();
    assert!(!second.signal.was_rerouted, "the first feedback's correction is gone");
    assert_eq!(second.signal.user_satisfaction, Some(5.0));
    assert_eq!(second.correct_intent, None);
    assert!(second.reward > first.reward);
    assert!(!serde_json::to_string(&second).unwrap_or_default().contains("thanks"), "comments are not exported");
}

#[test]
fn sort_keys_order_by_time_as_text_and_malformed_cursors_are_refused() {
    let early = sort_key(&at(1), "b");
    let late = sort_key(&(at(1) + chrono::Duration::microseconds(1)), "a");
    assert!(early < late, "{early} < {late}");
    assert_eq!(sort_key_time(&late), Some(at(1) + chrono::Duration::microseconds(1)));
    for bad in ["", "#id", "yesterday#id", "2026-11-22T12:01:00.000000Z#", "2026-11-22T12:01:00.000000Z"] {
        assert_eq!(sort_key_time(bad), None, "{bad:?}");
    }
}
