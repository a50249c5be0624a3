//! `switchyard classify`: the embedded classifier as JSON lines, and `switchyard bench
//! classify`'s timing table.
//!
//! The output of [`run`] is an interface used by evaluations; keep it stable. Each answer is
//! one JSON object per line with exactly the keys `intent`, `confidence`, `ambiguity_flag`,
//! `entities` (seed 000 `ParsedEntity`: `type`, `value`, `confidence`, `source`) and
//! `alternatives` (`intent`, `score`; best first, the top intent included).

use serde::Deserialize;
use shared::classify::{bench, Classification, Classifier};
use shared::manifest::Manifest;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// One input line of the batch mode.
#[derive(Deserialize)]
struct Request {
    query: String,
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
            Ok(request) => write_answer(out, &classifier.classify(&request.query))?,
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

/// Where the labelled questions live: `tests/fixtures/labelled_questions.jsonl` under the
/// current directory, else in the source tree this binary was built from.
fn labelled_questions_path() -> Option<PathBuf> {
    let relative = Path::new("tests/fixtures/labelled_questions.jsonl");
    if relative.is_file() {
        return Some(relative.to_path_buf());
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/labelled_questions.jsonl");
    built.is_file().then_some(built)
}

/// Times the classifier (`switchyard bench classify`) on the labelled questions when the
/// file is around, else on the manifest's own utterances, and renders a small table.
pub fn run_bench(manifest: &Manifest) -> String {
    const ROUNDS: usize = 20;
    let classifier = Classifier::new(manifest);
    let labelled: Vec<String> = labelled_questions_path()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|text| text.lines().filter_map(|l| serde_json::from_str::<Request>(l).ok()).map(|r| r.query).collect())
        .unwrap_or_default();
    let (source, queries) = if labelled.is_empty() {
        let utterances = manifest.intents.iter().flat_map(|i| i.utterances.iter().cloned()).collect();
        ("manifest utterances", utterances)
    } else {
        ("labelled questions", labelled)
    };
    let report = bench(&classifier, &queries, ROUNDS);
    format!(
        "classify benchmark ({source}, {ROUNDS} rounds)\n\
         {:<12} {:>10}\n\
         {:<12} {:>10.1}\n\
         {:<12} {:>10.1}\n\
         {:<12} {:>10}\n",
        "metric", "value", "median µs", report.median_us, "p99 µs", report.p99_us, "n queries", report.n
    )
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
        assert_eq!(keys, ["alternatives", "ambiguity_flag", "confidence", "entities", "intent"]);
        assert_eq!(answer["intent"], "prediction");
        assert_eq!(
            answer["entities"][0],
            serde_json::json!({"type": "brand", "value": "Kisqali", "confidence": 1.0, "source": "exact"})
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
    }
}
