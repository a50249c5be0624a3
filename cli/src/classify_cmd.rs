//! `switchyard classify`: the embedded classifier as JSON lines, and `switchyard bench
//! classify`'s timing table.
//!
//! The output of [`run`] is an interface used by evaluations; keep it stable. Each answer is
//! one JSON object per line with exactly the keys `intent`, `confidence`, `ambiguity_flag`,
//! `in_scope` (bool), `scope_score` (0.0 – 1.0), `entities` (E2I `ParsedEntity`: `type`, `value`, `text`, `confidence`, `source`) and
//! `alternatives` (`intent`, `score`; best first, the top intent included). A line may carry
//! `now` (RFC 3339): the question's relative dates are read at that time. A line that
//! carries `history` (earlier turns, oldest first: `question`, `intent`, optional `entities`)
//! is classified as the next turn of that conversation, and its answer adds `follow_up` (how
//! the conversation shaped it: the earlier intent, the intent the turn would have had alone,
//! the cues read, the entities carried).

use serde::Deserialize;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use switchyard_core::classify::{bench, bench_in_context, Classification, Classifier, PriorTurn};
use switchyard_model::contracts::ParsedEntity;
use switchyard_model::manifest::Manifest;

/// One input line of the batch mode.
#[derive(Deserialize)]
struct Request {
    query: String,
    /// Earlier turns of the conversation, oldest first (none: the question alone).
    #[serde(default)]
    history: Vec<Turn>,
    /// When the question is asked, RFC 3339: relative dates ("tomorrow", "the 14th") are read
    /// at it (the present when absent), so an evaluation is reproducible.
    #[serde(default)]
    now: Option<String>,
}

/// One earlier turn of a `history`.
#[derive(Deserialize)]
struct Turn {
    question: String,
    intent: String,
    #[serde(default)]
    entities: Vec<ParsedEntity>,
}

/// Classifies `query`, or else each `{"query": "..."}` line of `input`, writing one JSON line
/// per question to `out`.
///
/// Blank input lines are skipped. A line that is not such an object gets
/// `{"error": "line N: ..."}` (N counts from 1, blank lines included) and the next line is
/// read. Returns the exit code: 1 if any line was bad, else 0. Errors are I/O errors only.
pub fn run(
    manifest: &Manifest,
    query: Option<String>,
    input: impl BufRead,
    out: &mut impl Write,
) -> anyhow::Result<u8> {
    let classifier = Classifier::new(manifest);
    if let Some(query) = query {
        write_answer(out, &classifier.classify(&query))?;
        return Ok(0);
    }
    let mut code = 0;
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Request>(&line) {
            Ok(request) => {
                let now = match request.now.as_deref().map(switchyard_core::admission::parse_now) {
                    None => chrono::Utc::now(),
                    Some(Ok(at)) => at,
                    Some(Err(rule)) => {
                        code = 1;
                        writeln!(out, "{}", serde_json::json!({ "error": format!("line {}: now: {rule}", n + 1) }))?;
                        continue;
                    }
                };
                let history: Vec<PriorTurn> = request
                    .history
                    .into_iter()
                    .map(|t| PriorTurn { question: t.question, intent: t.intent, entities: t.entities })
                    .collect();
                write_answer(out, &classifier.classify_in_context_at(&request.query, &history, now))?
            }
            Err(error) => {
                code = 1;
                let message = serde_json::json!({ "error": format!("line {}: {error}", n + 1) });
                writeln!(out, "{message}")?;
            }
        }
    }
    out.flush()?;
    Ok(code)
}

fn write_answer(out: &mut impl Write, c: &Classification) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, c)?;
    writeln!(out)?;
    Ok(())
}

/// Where a fixture of `tests/fixtures/` lives: under the current directory, else in the source
/// tree this binary was built from.
fn fixture_path(name: &str) -> Option<PathBuf> {
    let relative = Path::new("tests/fixtures").join(name);
    if relative.is_file() {
        return Some(relative);
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name);
    built.is_file().then_some(built)
}

/// One labelled line of a fixture: a question and its intent (none for out-of-scope sets).
#[derive(Deserialize)]
struct Labelled {
    query: String,
    #[serde(default)]
    intent: Option<String>,
}

fn read_fixture(name: &str) -> Vec<Labelled> {
    fixture_path(name)
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|text| text.lines().filter_map(|l| serde_json::from_str::<Labelled>(l).ok()).collect())
        .unwrap_or_default()
}

/// In-scope sets never tuned on; the calibration table is measured on them.
const BLIND_SETS: [&str; 1] = ["blind11_questions.jsonl"];
/// Out-of-scope set never tuned on.
const OUT_OF_SCOPE_BLIND: &str = "out_of_scope_blind9.jsonl";
/// Width of a reliability bin.
const BINS: usize = 10;
/// Turns of conversation the in-context figure is timed with (the default history window).
const HISTORY_TURNS: usize = 12;

/// Times the classifier (`switchyard bench classify`) on the labelled questions when the
/// file is around, else on the manifest's own utterances, and renders a small table; when the
/// blind sets are around (a source checkout), adds the reliability table (confidence bins →
/// accuracy), the expected calibration error and the scope figures. The timing is also taken
/// with each question as the next turn of a 12-turn conversation (follow-up resolution).
pub fn run_bench(manifest: &Manifest) -> String {
    const ROUNDS: usize = 20;
    let classifier = Classifier::new(manifest);
    let labelled: Vec<String> = read_fixture("labelled_questions.jsonl").into_iter().map(|l| l.query).collect();
    let (source, queries) = if labelled.is_empty() {
        let utterances = manifest.intents.iter().flat_map(|i| i.utterances.iter().cloned()).collect();
        ("manifest utterances", utterances)
    } else {
        ("labelled questions", labelled)
    };
    let report = bench(&classifier, &queries, ROUNDS);
    // A 12-turn conversation (the context pipeline's default window) of the first questions,
    // each resolved with the turns before it, as a session stores them.
    let mut history: Vec<PriorTurn> = Vec::with_capacity(HISTORY_TURNS);
    for q in queries.iter().take(HISTORY_TURNS) {
        let c = classifier.classify_in_context(q, &history);
        history.push(PriorTurn { question: q.clone(), intent: c.intent, entities: c.entities });
    }
    let in_context = bench_in_context(&classifier, &queries, &history, ROUNDS);
    let mut out = format!(
        "classify benchmark ({source}, {ROUNDS} rounds)\n\
         {:<12} {:>10} {:>18}\n\
         {:<12} {:>10.1} {:>18.1}\n\
         {:<12} {:>10.1} {:>18.1}\n\
         {:<12} {:>10} {:>18}\n",
        "metric",
        "alone",
        format!("{}-turn history", history.len()),
        "median µs",
        report.median_us,
        in_context.median_us,
        "p99 µs",
        report.p99_us,
        in_context.p99_us,
        "n queries",
        report.n,
        in_context.n
    );
    let blind: Vec<Labelled> = BLIND_SETS.iter().flat_map(|f| read_fixture(f)).filter(|l| l.intent.is_some()).collect();
    if !blind.is_empty() {
        out.push_str(&calibration_table(&classifier, &blind));
    }
    let outside = read_fixture(OUT_OF_SCOPE_BLIND);
    if !outside.is_empty() && !blind.is_empty() {
        let rejected = outside.iter().filter(|l| !classifier.classify(&l.query).in_scope).count();
        let wrongly = blind.iter().filter(|l| !classifier.classify(&l.query).in_scope).count();
        out.push_str(&format!(
            "\nscope (threshold {:.2})\n\
             out-of-scope blind set rejected  {rejected}/{} = {:.1}%\n\
             in-scope blind sets rejected     {wrongly}/{} = {:.1}%\n",
            manifest.classifier.scope.threshold,
            outside.len(),
            percent(rejected, outside.len()),
            blind.len(),
            percent(wrongly, blind.len()),
        ));
    }
    out
}

fn percent(n: usize, of: usize) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

/// Reliability table and expected calibration error of the in-scope answers of `set`.
fn calibration_table(classifier: &Classifier, set: &[Labelled]) -> String {
    let answers: Vec<(f64, bool)> = set
        .iter()
        .map(|l| (classifier.classify(&l.query), l.intent.as_deref().unwrap_or_default()))
        .filter(|(c, _)| c.in_scope)
        .map(|(c, intent)| (c.confidence, c.intent == intent))
        .collect();
    let mut bins = vec![(0usize, 0usize, 0.0f64); BINS];
    for &(confidence, right) in &answers {
        let b = ((confidence * BINS as f64) as usize).min(BINS - 1);
        bins[b].0 += 1;
        bins[b].1 += usize::from(right);
        bins[b].2 += confidence;
    }
    let n = answers.len().max(1) as f64;
    let mut out = format!(
        "\ncalibration ({} in-scope answers of {} blind questions: {})\n{:<12} {:>5} {:>9} {:>10}\n",
        answers.len(),
        set.len(),
        BLIND_SETS.join(", "),
        "confidence",
        "n",
        "accuracy",
        "mean conf"
    );
    let mut ece = 0.0;
    for (b, &(count, right, sum)) in bins.iter().enumerate() {
        if count == 0 {
            continue;
        }
        let accuracy = right as f64 / count as f64;
        let mean = sum / count as f64;
        ece += count as f64 / n * (accuracy - mean).abs();
        let (lo, hi) = (b as f64 / BINS as f64, (b + 1) as f64 / BINS as f64);
        out.push_str(&format!(
            "{:<12} {count:>5} {:>8.1}% {mean:>10.3}\n",
            format!("{lo:.1}-{hi:.1}"),
            accuracy * 100.0
        ));
    }
    let sure: Vec<&(f64, bool)> = answers.iter().filter(|a| a.0 >= 0.9).collect();
    let sure_right = sure.iter().filter(|a| a.1).count();
    out.push_str(&format!(
        "ECE          {ece:.3}\nconfidence >= 0.9: {} answers ({:.1}% of the questions), {:.1}% correct\n",
        sure.len(),
        percent(sure.len(), set.len()),
        percent(sure_right, sure.len()),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest::embedded().expect("the shipped manifest loads")
    }

    fn lines(out: &[u8]) -> Vec<serde_json::Value> {
        String::from_utf8_lossy(out)
            .lines()
            .map(|l| serde_json::from_str(l).expect("every output line is JSON"))
            .collect()
    }

    #[test]
    fn a_single_query_writes_one_line_with_exactly_the_stable_keys() {
        let mut out = Vec::new();
        let code = run(&manifest(), Some("forecast Kisqali TRx for Q3 2025".into()), std::io::empty(), &mut out)
            .expect("runs");
        assert_eq!(code, 0);
        let answers = lines(&out);
        assert_eq!(answers.len(), 1);
        let answer = answers[0].as_object().expect("an object");
        let mut keys: Vec<&str> = answer.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "alternatives",
                "ambiguity_flag",
                "confidence",
                "entities",
                "in_scope",
                "intent",
                "router_margin",
                "scope_score"
            ]
        );
        assert_eq!(answer["in_scope"], true);
        assert!(answer["scope_score"].as_f64().is_some_and(|s| s >= 0.35), "{answer:?}");
        assert_eq!(answer["intent"], "prediction");
        assert_eq!(
            answer["entities"][0],
            serde_json::json!({"type": "brand", "value": "Kisqali", "text": "Kisqali", "confidence": 1.0, "source": "exact"})
        );
        let alternative = answer["alternatives"][0].as_object().expect("an object");
        assert_eq!(alternative.keys().collect::<Vec<_>>(), ["intent", "score"]);
    }

    #[test]
    fn batch_mode_answers_each_line_skips_blanks_and_reports_bad_lines() {
        let input =
            "{\"query\": \"deploy the churn model\"}\n\n not json\n{\"q\": 1}\n{\"query\": \"is the platform up?\"}\n";
        let mut out = Vec::new();
        let code = run(&manifest(), None, input.as_bytes(), &mut out).expect("runs");
        assert_eq!(code, 1);
        let answers = lines(&out);
        assert_eq!(answers.len(), 4);
        assert_eq!(answers[0]["intent"], "model_deploy");
        assert!(answers[1]["error"].as_str().is_some_and(|e| e.starts_with("line 3: ")), "{}", answers[1]);
        assert!(answers[2]["error"].as_str().is_some_and(|e| e.starts_with("line 4: ")), "{}", answers[2]);
        assert_eq!(answers[3]["intent"], "health_check");
    }

    #[test]
    fn a_line_with_now_reads_its_relative_dates_at_that_time_and_a_bad_now_is_named() {
        let manifest = Manifest::from_yaml(
            r#"
version: 1
name: desk
timezone: Europe/Vienna
tiers: [{tier: 2, timeout: 10s, max_retries: 0, fallback: none}]
agents: [{id: a, tier: 2, kind: builtin, builtin: {response: ok, confidence: 0.9}}]
intents: [{id: book, route: {primary: a}, utterances: [book a flight, fly to a city]}]
entities:
  departure_date: {description: the day you leave, kind: date}
"#,
            "desk.yaml",
        )
        .expect("valid manifest");
        // 23:30 UTC on Tuesday 10 March is already Wednesday 11 March in Vienna.
        let input = concat!(
            r#"{"query": "book a flight for tomorrow", "now": "2026-03-10T23:30:00Z"}"#,
            "
",
            r#"{"query": "book a flight for tomorrow", "now": "next tuesday"}"#,
            "
",
        );
        let mut out = Vec::new();
        let code = run(&manifest, None, input.as_bytes(), &mut out).expect("runs");
        assert_eq!(code, 1);
        let answers = lines(&out);
        assert_eq!(answers[0]["entities"][0]["type"], "departure_date", "{}", answers[0]);
        assert_eq!(answers[0]["entities"][0]["value"], "2026-03-12", "{}", answers[0]);
        assert_eq!(answers[0]["entities"][0]["text"], "tomorrow", "{}", answers[0]);
        let error = answers[1]["error"].as_str().unwrap_or_default();
        assert!(error.starts_with("line 2: now: must be an RFC 3339 time"), "{error}");
    }

    #[test]
    fn a_line_with_history_is_classified_as_the_next_turn_and_says_how() {
        let input = concat!(
            r#"{"query": "And for Leqvio?", "history": [{"question": "Forecast Kisqali TRx for Q3", "#,
            r#""intent": "prediction", "entities": [{"type": "kpi", "value": "trx"}]}]}"#,
            "\n",
            r#"{"query": "And for Leqvio?"}"#,
            "\n",
            r#"{"query": "And for Leqvio?", "history": [{"question": "no intent"}]}"#,
            "\n",
        );
        let mut out = Vec::new();
        let code = run(&manifest(), None, input.as_bytes(), &mut out).expect("runs");
        assert_eq!(code, 1, "the third line lacks the turn's intent");
        let answers = lines(&out);
        assert_eq!(answers[0]["intent"], "prediction", "{}", answers[0]);
        assert_eq!(answers[0]["follow_up"]["prior_intent"], "prediction", "{}", answers[0]);
        assert!(
            answers[0]["entities"].as_array().is_some_and(|e| e
                .iter()
                .any(|e| e["type"] == "kpi" && e["value"] == "trx" && e["source"] == "context")),
            "the KPI is carried over: {}",
            answers[0]
        );
        assert!(answers[1].get("follow_up").is_none(), "alone: {}", answers[1]);
        let error = answers[2]["error"].as_str().unwrap_or_default();
        assert!(error.starts_with("line 3: ") && error.contains("intent"), "{error}");
    }

    #[test]
    fn a_clean_batch_exits_zero() {
        let mut out = Vec::new();
        let code = run(&manifest(), None, "{\"query\": \"\"}\n".as_bytes(), &mut out).expect("runs");
        assert_eq!(code, 0);
        assert_eq!(lines(&out)[0]["confidence"], 0.0);
    }

    #[test]
    fn the_bench_table_names_median_p99_and_n() {
        let table = run_bench(&manifest());
        assert!(table.contains("median µs") && table.contains("p99 µs") && table.contains("n queries"), "{table}");
        assert!(table.contains("12-turn history"), "{table}");
    }

    #[test]
    fn the_bench_reports_a_reliability_table_the_calibration_error_and_the_scope_figures() {
        let table = run_bench(&manifest());
        for words in ["calibration (", "0.9-1.0", "ECE", "confidence >= 0.9", "out-of-scope blind set rejected"] {
            assert!(table.contains(words), "missing `{words}` in:\n{table}");
        }
    }

    #[test]
    fn an_everyday_question_is_reported_out_of_scope_with_its_score() {
        let mut out = Vec::new();
        run(&manifest(), Some("What's the weather in Paris tomorrow?".into()), std::io::empty(), &mut out)
            .expect("runs");
        let answer = &lines(&out)[0];
        assert_eq!(answer["in_scope"], false, "{answer}");
        assert!(answer["scope_score"].as_f64().is_some_and(|s| s < 0.35), "{answer}");
    }
}
