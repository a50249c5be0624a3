//! The learning loop end to end on the local SQS + DynamoDB endpoint (moto, started by
//! scripts/test.sh), as a team runs it: questions go through the whole pipeline on the AWS
//! adapters; the misrouted ones get feedback naming the right intent (`switchyard feedback`,
//! the binary, and `POST /v1/queries/{id}/feedback`, the route); `switchyard signals export
//! --backend aws` reads the signals through the table's index; `switchyard refit` proposes a
//! manifest; and that manifest routes NEW paraphrases of the corrected questions
//! (`fixtures/signals/paraphrases_loop.jsonl`, written before this loop first ran, never given
//! to the re-fit) better than the shipped one, without routing the manifest's own utterances
//! worse, and `switchyard validate` accepts it. Fails (never skips) without the endpoint.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use switchyard_aws::sdk::ResourceUrls;
use switchyard_aws::AwsSystem;
use switchyard_core::classify::Classifier;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::EngineSettings;
use switchyard_engine::{pollers::start, pollers::PollerConfig};
use switchyard_model::manifest::Manifest;
use switchyard_tests::{api_request, endpoint, json_body, text_body, SIGNAL_FIELDS};

#[derive(serde::Deserialize)]
struct Correction {
    query: String,
    correct_intent: String,
}

#[derive(serde::Deserialize)]
struct Labelled {
    query: String,
    intent: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn lines<T: serde::de::DeserializeOwned>(rel: &str) -> Vec<T> {
    let text = std::fs::read_to_string(repo().join("tests/fixtures").join(rel)).expect("fixture exists");
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("fixture line")).collect()
}

/// Run `switchyard ARGS` with the resources' environment; (exit code, stdout, stderr).
fn switchyard(urls: &ResourceUrls, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .envs(&urls.env)
        .current_dir(repo())
        .output()
        .expect("switchyard runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Share of the manifest's own utterances `classifier` routes to their intent.
fn own_utterance_accuracy(manifest: &Manifest, classifier: &Classifier) -> f64 {
    let all: Vec<(&str, &str)> =
        manifest.intents.iter().flat_map(|i| i.utterances.iter().map(move |u| (u.as_str(), i.id.as_str()))).collect();
    let right = all.iter().filter(|(u, intent)| classifier.classify(u).intent == *intent).count();
    right as f64 / all.len() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_on_misrouted_questions_exported_from_aws_refits_a_manifest_that_routes_new_paraphrases_better() {
    // GIVEN the shipped manifest running on the AWS adapters against the local endpoint.
    let manifest_path = repo().join("routing.yaml");
    let manifest = Arc::new(Manifest::load(&manifest_path).expect("routing.yaml is valid"));
    let config = endpoint::config().await;
    let urls = endpoint::resources(&manifest, &config).await;
    let system = AwsSystem::with_resources(
        manifest.clone(),
        EngineSettings::default(),
        &config,
        &urls.table,
        urls.queues.clone(),
    );
    let _pollers = start(
        system.deps.clone(),
        &system.topology,
        PollerConfig { wait: Duration::from_secs(1), default_concurrency: 8 },
    );
    let deps = &system.deps;

    // WHEN three callers each ask the questions the fixture has corrections for (traffic
    // repeats questions; the re-fit holds out a third of the signals by a hash of their random
    // query ids, so one asking alone would leave it to chance whether a correction is learnt).
    let corrections: Vec<Correction> = lines("signals/corrections.jsonl");
    let mut ids = Vec::new();
    let mut asked = Vec::new();
    for user in ["loop-user-1", "loop-user-2", "loop-user-3"] {
        for (q, c) in corrections.iter().enumerate() {
            let body = json!({ "query": c.query }).to_string();
            let r = handle_http(deps, api_request("POST", "/v1/queries", "", Some(&body), user, "ml_engineer")).await;
            assert_eq!(r.status_code, 202, "{}", text_body(&r));
            ids.push(json_body(&r)["query_id"].as_str().expect("query id").to_string());
            asked.push((q, user));
        }
    }
    let mut routed = Vec::new();
    for id in &ids {
        let mut output = None;
        for _ in 0..600 {
            output = deps.store.get_output(id).await.expect("store");
            if output.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        routed.push(output.unwrap_or_else(|| panic!("query {id} did not finish within 60 s")).intent.clone());
    }

    // AND gives feedback: the misrouted ones with the right intent through the CLI, the rest a
    // good rating through the HTTP route.
    let mut misrouted = Vec::new();
    for (i, (&(q, user), intent)) in asked.iter().zip(&routed).enumerate() {
        let c = &corrections[q];
        if *intent != c.correct_intent {
            let (code, out, err) = switchyard(
                &urls,
                &["feedback", &ids[i], "--rating", "2", "--intent", &c.correct_intent, "--comment", "wrong desk"],
            );
            assert_eq!(code, 0, "{out}{err}");
            let answer: Value = serde_json::from_str(out.trim()).expect("feedback answers JSON");
            assert_eq!(answer["replaced"], false, "{answer}");
            misrouted.push(i);
        } else {
            let path = format!("/v1/queries/{}/feedback", ids[i]);
            let r = handle_http(deps, api_request("POST", &path, "", Some(r#"{"rating": 5}"#), user, "")).await;
            assert_eq!(r.status_code, 201, "{}", text_body(&r));
        }
    }
    println!("misrouted by the shipped manifest: {} of {} queries", misrouted.len(), ids.len());
    assert!(!misrouted.is_empty(), "premise: the shipped manifest misroutes some of the fixture's questions");

    // AND exports the signals from AWS (the index is eventually consistent: allow a moment).
    let mut exported: Vec<Value> = Vec::new();
    for _ in 0..50 {
        let (code, out, err) = switchyard(&urls, &["signals", "export", "--backend", "aws"]);
        assert_eq!(code, 0, "{err}");
        exported = out.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        let rated = exported.iter().filter(|s| !s["user_satisfaction"].is_null()).count();
        if exported.len() == ids.len() && rated == ids.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // THEN it prints one signal per query, with the seed's fields and a reward in [0, 1],
    // newest first, carrying the corrections.
    assert_eq!(exported.len(), ids.len(), "one signal per query");
    let mut exported_ids: Vec<&str> = exported.iter().map(|s| s["signal_id"].as_str().expect("id")).collect();
    for s in &exported {
        for field in SIGNAL_FIELDS {
            assert!(s.get(field).is_some(), "{field} missing in {s}");
        }
        let reward = s["reward"].as_f64().expect("reward");
        assert!((0.0..=1.0).contains(&reward), "reward {reward}");
    }
    let times: Vec<&str> = exported.iter().map(|s| s["recorded_at"].as_str().expect("time")).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first: {times:?}");
    for &i in &misrouted {
        let s = exported.iter().find(|s| s["signal_id"] == json!(ids[i])).expect("the misrouted query's signal");
        assert_eq!(s["correct_intent"], json!(corrections[asked[i].0].correct_intent));
        assert_eq!(s["was_rerouted"], true);
        assert!(s.get("comment").is_none(), "comments stay in the table");
    }
    exported_ids.sort_unstable();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(exported_ids, want);

    // WHEN the exported signals re-fit the manifest.
    let dir = std::env::temp_dir().join(format!("switchyard-loop-{}", endpoint::prefix()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let signals_file = dir.join("signals.jsonl");
    std::fs::write(&signals_file, exported.iter().map(|s| format!("{s}\n")).collect::<String>()).expect("write");
    let refitted = dir.join("routing.refit.yaml");
    // The re-fitted manifest names the same example file, relative to itself.
    for file in ["routing.examples.jsonl", "routing.dialogues.jsonl"] {
        std::fs::copy(repo().join(file), dir.join(file)).expect(file);
    }
    let (code, out, err) = switchyard(
        &urls,
        &[
            "refit",
            "--signals",
            signals_file.to_str().expect("path"),
            "--manifest",
            manifest_path.to_str().expect("path"),
            "--out",
            refitted.to_str().expect("path"),
        ],
    );
    println!("{out}");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("wrote "), "{out}");

    // THEN `switchyard validate` accepts the new manifest.
    let (code, out, err) = switchyard(&urls, &["validate", refitted.to_str().expect("path")]);
    assert_eq!(code, 0, "{out}{err}");

    // AND it routes new paraphrases of the corrected questions better, and the manifest's own
    // utterances no worse.
    let new = Manifest::load(&refitted).expect("the re-fitted manifest loads");
    let (before, after) = (Classifier::new(&manifest), Classifier::new(&new));
    let paraphrases: Vec<Labelled> = lines("signals/paraphrases_loop.jsonl");
    assert_eq!(paraphrases.len(), corrections.len(), "one new paraphrase per corrected question");
    let mut questions: Vec<usize> = misrouted.iter().map(|&i| asked[i].0).collect();
    questions.sort_unstable();
    questions.dedup();
    let blind: Vec<&Labelled> = questions.iter().map(|&q| &paraphrases[q]).collect();
    for (&q, p) in questions.iter().zip(&blind) {
        assert_eq!(p.intent, corrections[q].correct_intent, "line {q}: the paraphrase has the correction's intent");
    }
    let right =
        |c: &Classifier, set: &[&Labelled]| set.iter().filter(|p| c.classify(&p.query).intent == p.intent).count();
    let all: Vec<&Labelled> = paraphrases.iter().collect();
    let (b, a) = (right(&before, &blind), right(&after, &blind));
    println!("new paraphrases of the misrouted questions routed right: {b} -> {a} of {}", blind.len());
    println!("all new paraphrases routed right: {} -> {} of {}", right(&before, &all), right(&after, &all), all.len());
    // Better, unless the trained router already routes every one of them right.
    assert!(
        a > b || b == blind.len(),
        "the re-fit routes new paraphrases of the corrected questions better ({b} -> {a})"
    );
    assert!(right(&after, &all) >= right(&before, &all), "the re-fit routes no new paraphrase worse");
    let (own_before, own_after) =
        (own_utterance_accuracy(&manifest, &before), own_utterance_accuracy(&manifest, &after));
    println!("own-utterance accuracy: {:.1}% -> {:.1}%", own_before * 100.0, own_after * 100.0);
    assert!(own_after >= own_before, "own-utterance accuracy must not drop ({own_before} -> {own_after})");
    let _ = std::fs::remove_dir_all(&dir);
}
