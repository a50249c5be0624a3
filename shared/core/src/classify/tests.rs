use super::*;
use switchyard_model::contracts::EntitySource;
use switchyard_model::manifest::Manifest;

fn shipped() -> Classifier {
    let manifest = Manifest::embedded().expect("the shipped manifest loads");
    Classifier::new(&manifest)
}

const SUPPORT_MANIFEST: &str = r#"
version: 1
name: support
tiers:
  - {tier: 1, timeout: 2s, max_retries: 0, fallback: none}
agents:
  - {id: refunds, tier: 1, kind: builtin, builtin: {response: ok, confidence: 0.9}}
  - {id: billing, tier: 1, kind: builtin, builtin: {response: ok, confidence: 0.9}}
intents:
  - id: refund
    description: The customer wants their money back.
    route: {primary: refunds}
    keywords: [refund, money back, return]
    utterances:
      - I want a refund for my order
      - Can I get my money back?
      - How do I return this item and get reimbursed?
  - id: billing
    description: Questions about invoices and charges.
    route: {primary: billing}
    keywords: [invoice, charge, billing, payment]
    utterances:
      - Why was my card charged twice?
      - Where can I download my invoice?
      - Update the payment method on my account
entities:
  brand:
    description: the product
    intent_words: false
    gazetteer: [Acme Plus]
"#;

#[test]
fn an_unrelated_two_intent_manifest_classifies_its_own_questions() {
    // GIVEN a customer-support manifest that shares nothing with the shipped one
    let manifest = Manifest::from_yaml(SUPPORT_MANIFEST, "support.yaml").expect("valid manifest");
    let classifier = Classifier::new(&manifest);
    // WHEN questions nobody wrote into it are classified
    let refund = classifier.classify("please refund the shoes, they did not fit");
    let billing = classifier.classify("there is a strange charge on my invoice");
    // THEN each lands on its intent, and the brand comes from that manifest's gazetteer
    assert_eq!(refund.intent, "refund");
    assert_eq!(billing.intent, "billing");
    let plus = classifier.classify("My Acme Plus subscription was charged twice");
    assert_eq!(plus.intent, "billing");
    assert_eq!(plus.entities[0].value, "Acme Plus");
}

#[test]
fn one_edit_typos_reach_the_word_they_misspell() {
    // GIVEN the support manifest, whose words include "refund" and "invoice"
    let manifest = Manifest::from_yaml(SUPPORT_MANIFEST, "support.yaml").expect("valid manifest");
    let classifier = Classifier::new(&manifest);
    // WHEN they are misspelt by a transposition, a deletion and a substitution
    // THEN the intent is still found
    assert_eq!(classifier.classify("rfeund").intent, "refund");
    assert_eq!(classifier.classify("invoce").intent, "billing");
    assert_eq!(classifier.classify("refumd").intent, "refund");
}

#[test]
fn shipped_manifest_routes_plain_questions() {
    let c = shipped();
    for (q, want) in [
        ("forecast Kisqali TRx for Q3 2025", "prediction"),
        ("is the propensity model drifting?", "drift_check"),
        ("deploy the churn model to prod", "model_deploy"),
        ("what caused the drop in NRx last month", "causal_impact"),
    ] {
        assert_eq!(c.classify(q).intent, want, "{q}");
    }
}

#[test]
fn confidences_are_probabilities_and_alternatives_are_ranked_with_the_top_first() {
    let c = shipped().classify("Which HCP segments respond best to the speaker program?");
    assert!((0.0..=1.0).contains(&c.confidence));
    assert_eq!(c.alternatives[0].intent, c.intent);
    assert!(c.alternatives.len() <= 5);
    assert!(c.alternatives.windows(2).all(|w| w[0].score >= w[1].score));
    let total: f64 = c.alternatives.iter().map(|a| a.score).sum();
    assert!(total <= 1.0 + 1e-9);
}

#[test]
fn empty_and_odd_text_does_not_panic_and_is_flagged() {
    let c = shipped();
    for text in ["", "   \n\t", "?!?! ... ###", "🙂🙂🙂"] {
        let r = c.classify(text);
        assert_eq!(r.confidence, 0.0, "{text:?}");
        assert!(r.ambiguity_flag);
        assert!(c.needs_cascade(&r));
        assert_eq!(r.intent, "explanation", "the manifest's fallback intent");
    }
    let long = "Forecast Kisqali prescriptions in the Northeast ünïcödé 🚀 ".repeat(2_000);
    assert!(long.len() > 100_000);
    let r = c.classify(&long);
    assert_eq!(r.intent, "prediction");
    assert_eq!(c.classify("ПРОГНОЗ 予測 FORECAST kisqali").intent, "prediction");
}

#[test]
fn gazetteer_entities_are_exact_multi_word_and_typo_tolerant() {
    let c = shipped();
    let r = c.classify("Kisquali market share in the Pacific Northwest vs the mid-west");
    let got: Vec<(&str, &str, EntitySource)> =
        r.entities.iter().map(|e| (e.entity_type.as_str(), e.value.as_str(), e.source)).collect();
    assert_eq!(
        got,
        [
            ("brand", "Kisqali", EntitySource::Fuzzy),
            ("kpi", "market_share", EntitySource::Exact),
            ("region", "Northwest", EntitySource::Exact),
            ("region", "Midwest", EntitySource::Exact),
        ]
    );
    assert!(r.entities[0].confidence < 0.9);
    // Short and common words are never typos of an entity.
    let r = c.classify("what is the west coast share versus the rest");
    assert!(r.entities.iter().all(|e| e.source == EntitySource::Exact), "{:?}", r.entities);
    let r = c.classify("summarise the conversation with the doctor");
    assert!(r.entities.is_empty(), "{:?}", r.entities);
    let r = c.classify("Entrsto and Cosentix in the Nothwest");
    let got: Vec<&str> = r.entities.iter().map(|e| e.value.as_str()).collect();
    assert_eq!(got, ["Entresto", "Cosentyx", "Northwest"]);
    assert!(r.entities.iter().all(|e| e.source == EntitySource::Fuzzy));
}

#[test]
fn time_periods_are_normalised() {
    let c = shipped();
    let periods = |q: &str| -> Vec<(String, EntitySource)> {
        c.classify(q)
            .entities
            .into_iter()
            .filter(|e| e.entity_type == "time_period")
            .map(|e| (e.value, e.source))
            .collect()
    };
    use EntitySource::{Exact, Inferred};
    assert_eq!(
        periods("Q3 vs Q3 2025 vs 2024"),
        [("Q3".into(), Exact), ("Q3 2025".into(), Exact), ("2024".into(), Exact)]
    );
    assert_eq!(
        periods("last quarter and this year"),
        [("last_quarter".into(), Inferred), ("this_year".into(), Inferred)]
    );
    assert_eq!(
        periods("over the next 30 days, past 6 months"),
        [("next_30_days".into(), Inferred), ("last_6_months".into(), Inferred)]
    );
    assert_eq!(periods("YTD and year-to-date"), [("ytd".into(), Inferred)]);
    assert_eq!(periods("sales in March, and last month"), [("March".into(), Exact), ("last_month".into(), Inferred)]);
    assert_eq!(periods("we may see a lift"), []);
    assert_eq!(
        periods("FY25, H1 2025 and 2025 Q4"),
        [("FY2025".into(), Exact), ("H1 2025".into(), Exact), ("Q4 2025".into(), Exact)]
    );
    assert_eq!(
        periods("over the next three months, in the last 24 hours, previous quarter"),
        [("next_3_months".into(), Inferred), ("last_24_hours".into(), Inferred), ("last_quarter".into(), Inferred),]
    );
    assert_eq!(periods("since May 2024, in Sep, in mar"), [("May 2024".into(), Exact), ("September".into(), Exact)]);
    assert_eq!(
        periods("in the first half of 2024, the second quarter 2025"),
        [("H1 2024".into(), Exact), ("Q2 2025".into(), Exact)]
    );
    assert_eq!(periods("during the first half of this year"), [("H1 this_year".into(), Inferred)]);
    assert_eq!(
        periods("how about the quarter after that? the six months after instead, the year before"),
        [("quarter_after".into(), Inferred), ("6_months_after".into(), Inferred), ("year_before".into(), Inferred)]
    );
    assert_eq!(periods("the month after the campaign"), []);
    assert_eq!(periods("and for the second half?"), [("H2".into(), Exact)]);
    assert_eq!(periods("make it 12 weeks instead"), [("12_weeks".into(), Inferred)]);
    assert_eq!(periods("12 weeks of data from 3 regions"), []);
    // Without a year it says where a forecast looks, not when: the words stay the question's.
    assert_eq!(periods("the second half of the year, the third half of 2024"), [("2024".into(), Exact)]);
}

#[test]
fn identifiers_come_from_the_manifest_patterns() {
    let c = shipped();
    let r = c.classify("predict for HCP-123456, NPI 1234567890 and patient pt_98765 in 2025");
    let got: Vec<(&str, &str)> = r.entities.iter().map(|e| (e.entity_type.as_str(), e.value.as_str())).collect();
    assert_eq!(
        got,
        [("hcp_id", "HCP-123456"), ("hcp_id", "1234567890"), ("patient_id", "PT_98765"), ("time_period", "2025"),]
    );
}

#[test]
fn duplicates_are_reported_once() {
    let r = shipped().classify("Kisqali vs kisqali vs KISQALI");
    assert_eq!(r.entities.len(), 1);
}

#[test]
fn a_classifier_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Classifier>();
    shareable::<Classification>();
}

#[test]
fn bench_reports_a_median_and_p99() {
    let c = shipped();
    let report = bench(&c, &["forecast trx".to_string(), "deploy it".to_string()], 3);
    assert_eq!(report.n, 2);
    assert!(report.median_us <= report.p99_us);
}

#[test]
#[ignore = "debugging aid: prints per-term votes of CLASSIFY_DEBUG"]
fn print_term_votes() {
    let c = shipped();
    let text = std::env::var("CLASSIFY_DEBUG").unwrap_or_default();
    let tokens = tokenize(&text, 512);
    let (_, named) = c.entities.extract(&text, &tokens);
    let features = c.features(&tokens, &named);
    let k = c.intents.len();
    let names: HashMap<u32, &String> = c.vocab.iter().map(|(w, id)| (*id, w)).collect();
    for (id, w) in &features {
        let counts = &c.counts[*id as usize * k..(*id as usize + 1) * k];
        let row: Vec<String> = counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0.0)
            .map(|(j, x)| format!("{}:{x}", c.intents[j]))
            .collect();
        println!("{:<24} w={w:.2} idf={:.2} {}", names[id], c.idf[*id as usize], row.join(" "));
    }
    let scores = c.scores(&features, None);
    for (j, s) in scores.iter().enumerate() {
        println!("{:<20} {s:.3}", c.intents[j]);
    }
}

#[test]
#[ignore = "debugging aid: prints the leave-one-out misses on the shipped manifest"]
fn print_leave_one_out_misses() {
    let c = shipped();
    let manifest = Manifest::embedded().expect("loads");
    let utterances: Vec<&String> = manifest.intents.iter().flat_map(|i| i.utterances.iter()).collect();
    for (e, example) in c.examples.iter().enumerate() {
        let scores = c.scores(&example.terms, Some(e));
        let best = scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
        if best != example.intent {
            println!("LOO MISS {:<18} got {:<18} {}", c.intents[example.intent], c.intents[best], utterances[e]);
        }
    }
}

#[test]
#[ignore = "debugging aid: prints the words of CLASSIFY_OOV_FILE (JSON lines) the manifest never uses"]
fn print_unknown_words() {
    let c = shipped();
    let path = std::env::var("CLASSIFY_OOV_FILE").unwrap_or_default();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut unknown: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let q = v["query"].as_str().unwrap_or_default();
        let tokens = tokenize(q, 512);
        let (_, named) = c.entities.extract(q, &tokens);
        let terms = c.terms(&tokens, &named);
        for (u, w) in terms.unigrams.iter().zip(&terms.words) {
            if !c.vocab.contains_key(u) {
                let how = if c.misspelt_term(w).or_else(|| c.misspelt_term(u)).is_some() {
                    "typo"
                } else if c.nearest_term(u).is_some() {
                    "trigram"
                } else {
                    "none"
                };
                *unknown.entry(format!("{w}({how})")).or_default() += 1;
            }
        }
    }
    let words: Vec<String> = unknown.iter().map(|(w, n)| format!("{w}x{n}")).collect();
    println!("{} unknown: {}", words.len(), words.join(" "));
}

#[test]
fn a_follow_up_naming_only_a_brand_keeps_the_intent_and_replaces_the_brand() {
    let c = shipped();
    let first = c.classify("What was the causal impact of the speaker program on Kisqali TRx in the Northeast?");
    assert_eq!(first.intent, "causal_impact");
    let history = [PriorTurn { question: "q1".into(), intent: first.intent.clone(), entities: first.entities.clone() }];
    let alone = c.classify("And for Fabhalta?");
    let follow = c.classify_in_context("And for Fabhalta?", &history);
    assert_eq!(follow.intent, "causal_impact", "alone it was {} at {:.2}", alone.intent, alone.confidence);
    let brands: Vec<_> = follow.entities.iter().filter(|e| e.entity_type == "brand").collect();
    assert_eq!(brands.len(), 1);
    assert_eq!((brands[0].value.as_str(), brands[0].source), ("Fabhalta", EntitySource::Exact));
    let region = follow.entities.iter().find(|e| e.entity_type == "region").expect("region carried over");
    assert_eq!(region.source, EntitySource::Context);
    // No history: the same as classifying alone.
    assert_eq!(c.classify_in_context("And for Fabhalta?", &[]).intent, alone.intent);
}

/// The turn as a session stores it: its text, resolved intent and entities.
fn turn(text: &str, c: &Classification) -> PriorTurn {
    PriorTurn { question: text.into(), intent: c.intent.clone(), entities: c.entities.clone() }
}

/// `text` as the turn after `q1`: the first turn's intent alone, and the follow-up's
/// classification.
fn follow_up(c: &Classifier, q1: &str, text: &str) -> (String, Classification) {
    let first = c.classify(q1);
    (first.intent.clone(), c.classify_in_context(text, &[turn(q1, &first)]))
}

fn values<'a>(c: &'a Classification, t: &str) -> Vec<(&'a str, EntitySource)> {
    c.entities.iter().filter(|e| e.entity_type == t).map(|e| (e.value.as_str(), e.source)).collect()
}

#[test]
fn an_explicit_new_request_switches_the_intent_and_keeps_the_subject_it_points_back_to() {
    let c = shipped();
    let q1 = "Did the co-pay program drive the increase in Kisqali persistence?";
    let first = c.classify(q1);
    assert_eq!(first.intent, "causal_impact");
    let next = c.classify_in_context("Now design an A/B test to confirm that", &[turn(q1, &first)]);
    assert_eq!(next.intent, "experiment_design");
    assert_eq!(values(&next, "brand"), [("Kisqali", EntitySource::Context)]);
    let f = next.follow_up.as_ref().expect("resolved with the conversation");
    assert!(f.refers_back && f.alone_intent == "experiment_design" && f.prior_intent == "causal_impact");
}

#[test]
fn a_three_turn_chain_keeps_the_intent_and_replaces_one_entity_at_a_time() {
    let c = shipped();
    let mut history = Vec::new();
    let mut last = None;
    for text in [
        "Which HCPs respond best to digital outreach for Cosentyx in the Northeast?",
        "And for Entresto?",
        "What about in the Southeast?",
    ] {
        let r = c.classify_in_context(text, &history);
        history.push(turn(text, &r));
        last = Some(r);
    }
    let last = last.expect("three turns");
    assert_eq!(history.iter().map(|t| t.intent.as_str()).collect::<Vec<_>>(), ["heterogeneous"; 3]);
    assert_eq!(values(&last, "brand"), [("Entresto", EntitySource::Context)]);
    assert_eq!(values(&last, "region"), [("Southeast", EntitySource::Exact)]);
}

#[test]
fn a_turn_with_no_intent_evidence_takes_the_carry_prior_as_its_confidence() {
    // The rules alone (no learned model): the continuation prior.
    let mut c = shipped();
    c.set_continuation_model(ContinuationModel::default());
    let q1 = "What caused the drop in Fabhalta conversion rate in Q2 2026?";
    let first = c.classify(q1);
    let alone = c.classify("And in Q1?");
    assert!(!alone.in_scope && alone.confidence < 0.5, "alone it is nothing: {alone:?}");
    let next = c.classify_in_context("And in Q1?", &[turn(q1, &first)]);
    assert_eq!((next.intent.as_str(), next.in_scope), ("causal_impact", true));
    assert!((next.confidence - 0.97).abs() < 1e-9, "the continuation prior, got {}", next.confidence);
    assert_eq!(values(&next, "time_period").len(), 1, "the new period replaces the old one");
    assert_eq!(values(&next, "brand"), [("Fabhalta", EntitySource::Context)]);
    assert_eq!(values(&next, "kpi"), [("conversion_rate", EntitySource::Context)]);
    // The shipped model: its probability that the turn keeps the intent, high for "And in Q1?".
    let learned = shipped().classify_in_context("And in Q1?", &[turn(q1, &first)]);
    assert_eq!(learned.intent, "causal_impact");
    assert!(learned.confidence > 0.9 && learned.confidence < 1.0, "the learned prior, got {}", learned.confidence);
}

#[test]
fn off_domain_questions_in_a_conversation_stay_out_of_scope() {
    let c = shipped();
    let q1 = "What was the impact of the speaker program on Kisqali TRx in the Northeast?";
    let history = [turn(q1, &c.classify(q1))];
    for text in ["What about the weather tomorrow?", "Tell me a joke", "", "???", "the the the"] {
        let r = c.classify_in_context(text, &history);
        assert!(!r.in_scope, "{text:?} is out of scope: {r:?}");
        assert!(r.follow_up.is_none() && r.entities.iter().all(|e| e.source != EntitySource::Context), "{text:?}");
    }
    // A bare "why?" asks about the conversation.
    let why = c.classify_in_context("Why?", &history);
    assert!(why.in_scope && !c.classify("Why?").in_scope);
}

#[test]
fn every_entity_of_a_type_the_turn_does_not_name_is_carried_once() {
    let c = shipped();
    let q1 = "Compare Kisqali and Entresto market share in the West";
    let first = c.classify(q1);
    assert_eq!(values(&first, "brand").len(), 2);
    let mut history = vec![turn(q1, &first)];
    history[0].entities.extend(first.entities.clone());
    let next = c.classify_in_context("And in the Midwest?", &history);
    assert_eq!(values(&next, "brand").len(), 2, "both brands, once each: {:?}", next.entities);
    assert_eq!(values(&next, "region"), [("Midwest", EntitySource::Exact)]);
}

#[test]
fn hostile_histories_are_read_only_as_far_as_the_latest_few_turns_and_bounded() {
    let c = shipped();
    let known = PriorTurn { question: "q".into(), intent: "causal_impact".into(), entities: Vec::new() };
    let unknown = PriorTurn { question: "x".repeat(100_000), intent: "no_such_intent".into(), entities: Vec::new() };
    // The latest known turn is found behind an unknown one…
    let r = c.classify_in_context("And for Fabhalta?", &[known.clone(), unknown.clone()]);
    assert_eq!(r.intent, "causal_impact");
    assert_eq!(r.follow_up.as_ref().map(|f| f.turns_back), Some(2));
    // …but not behind 10 000 of them: an old conversation is not revived.
    let mut long = vec![known.clone()];
    long.extend(std::iter::repeat_n(unknown, 10_000));
    let r = c.classify_in_context("And for Fabhalta?", &long);
    assert!(r.follow_up.is_none());
    // Empty intent and entity values.
    let empty = PriorTurn { question: String::new(), intent: String::new(), entities: Vec::new() };
    assert!(c.classify_in_context("And for Fabhalta?", &[empty]).follow_up.is_none());
    // A turn stored with 10 000 entities carries at most 20.
    let mut flooded = known;
    flooded.entities = (0..10_000)
        .map(|n| ParsedEntity {
            entity_type: "hcp_id".into(),
            value: format!("HCP{n:06}"),
            text: String::new(),
            confidence: 1.0,
            source: EntitySource::Exact,
        })
        .collect();
    let r = c.classify_in_context("And for Fabhalta?", &[flooded]);
    assert_eq!(r.follow_up.as_ref().map(|f| f.carried_entities), Some(20));
    assert_eq!(r.entities.len(), 21);
}

#[test]
fn a_question_about_the_previous_answer_goes_to_the_fallback_intent_and_stays_in_scope() {
    let c = shipped();
    let q1 = "What was the impact of the speaker program on Kisqali TRx in the Northeast?";
    let history = [turn(q1, &c.classify(q1))];
    let r = c.classify_in_context("How did you get to that answer?", &history);
    assert_eq!((r.intent.as_str(), r.in_scope), ("explanation", true), "{r:?}");
    // Without "you" it is not about the answer: "that" alone is a plain back-reference.
    let r = c.classify_in_context("Is the platform healthy after that?", &history);
    assert_eq!(r.intent, "health_check");
}

#[test]
fn a_correction_drops_the_entity_it_negates_and_a_variation_keeps_the_intent() {
    let c = shipped();
    let q1 = "How should we split the West sampling budget to maximise Cosentyx market share?";
    let first = c.classify(q1);
    assert_eq!(first.intent, "resource_optimize");
    let next = c.classify_in_context("Sorry, I meant Leqvio, not Cosentyx.", &[turn(q1, &first)]);
    assert_eq!(next.intent, "resource_optimize");
    assert_eq!(values(&next, "brand"), vec![("Leqvio", EntitySource::Exact)]);
    assert_eq!(values(&next, "region"), vec![("West", EntitySource::Context)]);
    // The replaced entity is recognised however it is spelled: an alias ("remi"), a typo.
    for text in ["oops, I meant Leqvio not remi", "sorry, Leqvio rather than Cosentix"] {
        let brand = if text.contains("remi") { "Remibrutinib" } else { "Cosentyx" };
        let q = format!("How should we split the West sampling budget to maximise {brand} market share?");
        let before = c.classify(&q);
        let next = c.classify_in_context(text, &[turn(&q, &before)]);
        assert_eq!(values(&next, "brand"), vec![("Leqvio", EntitySource::Exact)], "{text}");
    }
    // Alone, "not Cosentyx" still names Cosentyx: only a follow-up reads it as a replacement.
    assert_eq!(c.classify("Leqvio, not Cosentyx").entities.len(), 2);
    // "… instead" marks a variation; the words that say so are not the turn's subject.
    let next = c.classify_in_context("and if the goal is conversions instead?", &[turn(q1, &first)]);
    assert_eq!(next.intent, "resource_optimize");
}

#[test]
fn breaking_an_answer_out_by_a_region_keeps_the_request() {
    let c = shipped();
    let q1 = "Predict Fabhalta TRx for Q4 nationally.";
    let first = c.classify(q1);
    assert_eq!(first.intent, "prediction");
    let next = c.classify_in_context("break that out for the Northeast", &[turn(q1, &first)]);
    assert_eq!(next.intent, "prediction", "{next:?}");
    assert_eq!(values(&next, "region"), vec![("Northeast", EntitySource::Exact)]);
    assert_eq!(values(&next, "brand"), vec![("Fabhalta", EntitySource::Context)]);
}

#[test]
fn swapping_in_another_brand_keeps_the_request() {
    let c = shipped();
    let q1 = "Which regions are furthest behind on Cosentyx conversion rate?";
    let first = c.classify(q1);
    assert_eq!(first.intent, "gap_analysis");
    let next = c.classify_in_context("now swap in Kisqali", &[turn(q1, &first)]);
    assert_eq!(next.intent, "gap_analysis", "{next:?}");
    assert_eq!(values(&next, "brand"), vec![("Kisqali", EntitySource::Exact)]);
}

#[test]
fn a_refused_phrase_puts_a_question_out_of_scope_at_the_start_of_a_word_only() {
    let yaml = SUPPORT_MANIFEST
        .replace("entities:\n", "classifier:\n  scope:\n    refuse: [chargeback, \"Side Effect\"]\nentities:\n");
    let manifest = Manifest::from_yaml(&yaml, "support.yaml").expect("valid manifest");
    let c = Classifier::new(&manifest);
    assert!(c.classify("Why was my card charged twice?").in_scope);
    for text in
        ["How do I file a CHARGEBACK for my refund?", "any side effects of the refund?", "Chargebacks: money back?"]
    {
        let r = c.classify(text);
        assert!(!r.in_scope && r.scope_score == 0.0, "{text:?} is refused: {r:?}");
    }
    // Inside a word the phrase does not match: "nochargeback" is one (unknown) word.
    assert!(c.classify("refund my money back nochargeback").in_scope);
    // A conversation does not bring a refused question back in scope.
    let q1 = "I want a refund for my order";
    let next = c.classify_in_context("and what about a chargeback?", &[turn(q1, &c.classify(q1))]);
    assert!(!next.in_scope && next.follow_up.is_none(), "{next:?}");
    // Refused phrases are policy: they refuse whatever the scope threshold.
    let off = yaml.replace("  scope:\n    refuse:", "  scope:\n    threshold: 0\n    refuse:");
    let c = Classifier::new(&Manifest::from_yaml(&off, "support.yaml").expect("valid manifest"));
    assert!(!c.classify("How do I file a chargeback for my refund?").in_scope);
}

#[test]
fn a_breakdown_or_another_measure_keeps_the_request_and_its_subject() {
    let c = shipped();
    let q1 = "Where are the biggest gaps to target for Fabhalta TRx?";
    let first = c.classify(q1);
    assert_eq!(first.intent, "gap_analysis");
    // "split" is a budget word alone; "split it by specialty" cuts the same answer finer.
    let split = c.classify_in_context("and split it by specialty", &[turn(q1, &first)]);
    assert_eq!(split.intent, "gap_analysis", "{split:?}");
    let q2 = "Forecast Kisqali NRx for next quarter in the Midwest.";
    let forecast = c.classify(q2);
    assert_eq!(forecast.intent, "prediction");
    let measure = c.classify_in_context("now as market share", &[turn(q2, &forecast)]);
    assert_eq!(measure.intent, "prediction", "{measure:?}");
    assert_eq!(values(&measure, "kpi"), vec![("market_share", EntitySource::Exact)]);
    assert_eq!(values(&measure, "brand"), vec![("Kisqali", EntitySource::Context)]);
    assert_eq!(values(&measure, "region"), vec![("Midwest", EntitySource::Context)]);
}

#[test]
fn narrowing_to_another_subject_or_the_full_year_keeps_the_request() {
    let c = shipped();
    let q1 = "Where is Kisqali furthest below benchmark on new patient starts?";
    let first = c.classify(q1);
    assert_eq!(first.intent, "gap_analysis");
    for text in ["now look at persistence", "focus on persistence"] {
        let next = c.classify_in_context(text, &[turn(q1, &first)]);
        assert_eq!(next.intent, "gap_analysis", "{text}: {next:?}");
        assert_eq!(values(&next, "brand"), vec![("Kisqali", EntitySource::Context)], "{text}");
    }
    let q2 = "How should we split the Fabhalta budget across regions to maximise ROI next quarter?";
    let budget = c.classify(q2);
    assert_eq!(budget.intent, "resource_optimize");
    let year = c.classify_in_context("and for the full year?", &[turn(q2, &budget)]);
    assert!(year.in_scope, "{year:?}");
    assert_eq!(year.intent, "resource_optimize", "{year:?}");
    assert_eq!(values(&year, "time_period"), vec![("full_year", EntitySource::Inferred)]);
}

#[test]
fn corrections_period_moves_and_short_continuations_keep_the_request() {
    let c = shipped();
    let q1 = "What effect did the new formulary listing have on Entresto market share in the West?";
    let first = c.classify(q1);
    assert_eq!(first.intent, "causal_impact");
    // A correction that asks nothing of its own is about the request: the negated KPI goes.
    let fix = c.classify_in_context("oops, not share, I meant NRx", &[turn(q1, &first)]);
    assert_eq!(fix.intent, "causal_impact", "{fix:?}");
    assert_eq!(values(&fix, "kpi"), vec![("nrx", EntitySource::Exact)]);
    // A continuation naming a period and one unknown word stays in scope.
    let stretch = c.classify_in_context("what about the same stretch last year", &[turn(q1, &first)]);
    assert!(stretch.in_scope && stretch.intent == "causal_impact", "{stretch:?}");
    let q2 = "Forecast Leqvio market share in the Southeast for Q2 next year.";
    let forecast = c.classify(q2);
    assert_eq!(forecast.intent, "prediction");
    for text in ["push that out to Q4", "ok now on NRx"] {
        let next = c.classify_in_context(text, &[turn(q2, &forecast)]);
        assert_eq!(next.intent, "prediction", "{text}: {next:?}");
    }
}

#[test]
fn restrictions_meaning_questions_and_other_openings_of_a_follow_up() {
    let c = shipped();
    let gap = "Where did Fabhalta fall short on new patient starts versus target in 2024?";
    for text in ["how did 2023 look?", "just the community oncologists, and only for Q4"] {
        let (first, next) = follow_up(&c, gap, text);
        assert_eq!((first.as_str(), next.intent.as_str()), ("gap_analysis", "gap_analysis"), "{text}: {next:?}");
    }
    let forecast = "Project Remibrutinib new patient starts in the Northeast for Q3.";
    for (text, kpi) in [("now do retention", "persistence"), ("Switch that to market share", "market_share")] {
        let (first, next) = follow_up(&c, forecast, text);
        assert_eq!((first.as_str(), next.intent.as_str()), ("prediction", "prediction"), "{text}: {next:?}");
        assert_eq!(values(&next, "kpi"), vec![(kpi, EntitySource::Exact)], "{text}");
        assert_eq!(values(&next, "brand"), vec![("Remibrutinib", EntitySource::Context)], "{text}");
    }
    // "What does X mean?" asks the explaining intent, however much X belongs to another, and
    // stays about the conversation's subject; "what does that mean for Q3?" is not such a question.
    let segments = "Which physician segments respond best to lunch-and-learns for Remibrutinib?";
    let (first, next) = follow_up(&c, segments, "what does conditional average treatment effect mean in that output?");
    assert_eq!((first.as_str(), next.intent.as_str()), ("heterogeneous", "explanation"), "{next:?}");
    assert_eq!(values(&next, "brand"), vec![("Remibrutinib", EntitySource::Context)]);
    let (_, next) = follow_up(&c, segments, "what does the range around it actually tell me?");
    assert_eq!(next.intent, "explanation", "{next:?}");
    // Words before the opening ("hmm") and the negation do not count as the turn's own request.
    let practice = "Among cardiologists, which practice types saw the biggest bump in Entresto adherence after the copay card relaunch?";
    let (first, next) = follow_up(&c, practice, "hmm, sorry, I meant Leqvio not Entresto");
    assert_eq!((first.as_str(), next.intent.as_str()), ("heterogeneous", "heterogeneous"), "{next:?}");
    assert_eq!(values(&next, "brand"), vec![("Leqvio", EntitySource::Exact)]);
    // A yes/no question pointing back with an entity asks the same thing there; an imperative
    // ("retrain it on …") asks something else. Verbs that repeat the request are not its words.
    let drift = "Has the model that scores Fabhalta conversion shifted since we last retrained it, especially for Southeast accounts?";
    for (q1, text, want) in [
        (drift, "any sign of that in the western region?", "drift_check"),
        ("Has the Leqvio TRx forecasting model drifted?", "ok, retrain it on the last 18 months then", "ml_training"),
        ("Forecast Leqvio TRx for the Northeast through the end of 2025.", "break that out by month", "prediction"),
        (
            "How should we split the Q3 sample budget across regions to maximize Entresto new patient starts?",
            "redo it with ROI as the goal",
            "resource_optimize",
        ),
    ] {
        let (_, next) = follow_up(&c, q1, text);
        assert!(next.in_scope && next.intent == want, "{text}: {next:?}");
    }
    // Outside a correction too, "rather than share" says which KPI is replaced.
    let (_, next) = follow_up(&c, forecast, "hmm, give me TRx rather than share for that one");
    assert_eq!(values(&next, "kpi"), vec![("trx", EntitySource::Exact)], "{next:?}");
    // A constraint right after the opening ("and only …", "ok and restrict to …", "and cap …")
    // narrows the request and stays in scope with it; a cut verb with "by" and no object
    // ("split by region pls", "broken out by month") breaks it down. A constraint without a
    // word of the domain is not kept in scope.
    let budget = "How should we divide the Leqvio call budget across the Midwest territories to lift NRx?";
    let quarterly = "Forecast Cosentyx TRx by quarter for 2025.";
    for (q1, text, want) in [
        (budget, "and cap the total at 2,000 calls a month", "resource_optimize"),
        (segments, "ok and restrict to patients who started in Q4 2024", "heterogeneous"),
        (gap, "and only HCPs that haven't written it yet in H1", "gap_analysis"),
        (quarterly, "split by region pls", "prediction"),
        (quarterly, "broken out by month through H2 if possible", "prediction"),
        (budget, "assume headcount stays flat, no new reps", "resource_optimize"),
        (budget, "assuming the total is capped at this year's level", "resource_optimize"),
        (
            "Can we promote the v3 NRx forecasting model for Cosentyx to production?",
            "do the same for the Entresto one when you get a sec",
            "model_deploy",
        ),
    ] {
        let (_, next) = follow_up(&c, q1, text);
        assert!(next.in_scope && next.intent == want, "{text}: {next:?}");
    }
    let (_, next) = follow_up(&c, gap, "and only tell me about the weather in Paris");
    assert!(!next.in_scope, "{next:?}");
}

#[test]
fn the_cascades_second_router_outweighs_a_sure_vocabulary_where_the_first_would_not() {
    let (vocabulary, router) = ([0.97, 0.03], [0.3f32, 0.7]);
    let first = blend(&vocabulary, &router, ROUTER_WEIGHT);
    let second = blend(&vocabulary, &router, cascade::ROUTER_WEIGHT);
    assert!(first[0] > first[1], "the first router's reading yields to the vocabulary: {first:?}");
    assert!(second[1] > second[0], "the second router's reading decides: {second:?}");
    for p in [&first, &second] {
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{p:?}");
    }
}
