//! Retrieval end to end on small corpora written to a temporary folder.

use super::search::{compose, retrieve, Request};
use super::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use switchyard_model::manifest::{RetrievalAttempt, RetrievalMode, RetrieverSettings};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A fresh folder holding `files` (name, bytes).
fn folder(files: &[(&str, &[u8])]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "switchyard-retrieval-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).expect("write");
    }
    dir
}

fn settings(attempts: Vec<RetrievalAttempt>) -> RetrieverSettings {
    let mut s: RetrieverSettings = serde_yaml::from_str("{}").expect("defaults");
    if !attempts.is_empty() {
        s.attempts = attempts;
    }
    s
}

fn attempt(name: &str, mode: RetrievalMode, min_score: f64, min_candidates: usize) -> RetrievalAttempt {
    RetrievalAttempt { name: name.into(), mode, min_score, min_candidates }
}

const REPORTS: &[(&str, &[u8])] = &[
    (
        "ar-2023.md",
        b"title: Annual report 2023\ndate: 2023-02-10\n\nRevenue grew 9% in 2023, led by the Devices segment. Services revenue rose 4%.",
    ),
    (
        "ar-2024.md",
        b"title: Annual report 2024\ndate: 2024-02-12\n\nRevenue grew 12% in 2024, led by the Services segment. Devices revenue was flat.",
    ),
    ("hr-2024.md", b"title: Staff handbook\ndate: 2024-01-01\n\nEmployees may carry over five vacation days."),
];

fn index() -> Index {
    Index::from_folder(&folder(REPORTS), Chunking::default()).expect("index")
}

#[test]
fn with_no_years_requested_the_newer_report_ranks_first_and_a_year_filter_changes_the_answer() {
    // GIVEN two annual reports that answer the same question differently
    let index = index();
    let s = settings(vec![]);
    let mut req = Request { question: "How did revenue grow by segment?".into(), ..Default::default() };
    // WHEN no years are requested THEN the recency boost puts 2024 first
    let all = retrieve(&index, &req, &s);
    assert_eq!(all.year_mode, "none");
    assert_eq!(all.candidates[0].chunk_id, "ar-2024#c1", "{:#?}", all.candidates);
    let answer = compose(&req, &all.candidates, 1).expect("answer");
    assert!(answer.contains("12%"), "{answer}");
    // WHEN the caller asks for 2023 THEN only the 2023 report is a candidate and the answer changes
    req.requested_years = vec![2023];
    let y2023 = retrieve(&index, &req, &s);
    assert_eq!(y2023.year_mode, "explicit");
    assert_eq!(y2023.candidates.iter().map(|c| c.chunk_id.as_str()).collect::<Vec<_>>(), ["ar-2023#c1"]);
    let answer = compose(&req, &y2023.candidates, 3).expect("answer");
    assert!(answer.contains("9%") && !answer.contains("12%"), "{answer}");
    assert!(answer.contains("[ar-2023#c1, 2023]"), "{answer}");
}

#[test]
fn a_year_nobody_wrote_about_finds_nothing_and_says_why() {
    let index = index();
    let req = Request { question: "revenue".into(), requested_years: vec![1999], ..Default::default() };
    let r = retrieve(&index, &req, &settings(vec![]));
    assert!(r.candidates.is_empty());
    assert_eq!(r.attempts.len(), 3, "every setting was tried");
    assert!(r.attempts.iter().all(|a| !a.accepted));
    assert!(r.attempts[2].reason.contains("requested years [1999]"), "{}", r.attempts[2].reason);
}

#[test]
fn when_the_strict_setting_finds_too_little_the_relaxed_one_finds_it_and_both_attempts_are_recorded() {
    let index = index();
    let s = settings(vec![
        attempt("hybrid_strict", RetrievalMode::Hybrid, 1.0, 2),
        attempt("hybrid_relaxed", RetrievalMode::Hybrid, 0.5, 2),
    ]);
    // question terms: servic, revenu, segment, 2024 — only the 2024 report holds all four;
    // the 2023 report holds three (0.75).
    let req = Request { question: "services revenue segment 2024".into(), ..Default::default() };
    let r = retrieve(&index, &req, &s);
    assert_eq!(r.attempts.len(), 2);
    assert!(!r.attempts[0].accepted);
    assert_eq!(r.attempts[0].passed, 1);
    assert!(
        r.attempts[0].reason.starts_with("only 1 of") && r.attempts[0].reason.ends_with("trying the next setting"),
        "{}",
        r.attempts[0].reason
    );
    assert!(r.attempts[1].accepted, "{:#?}", r.attempts);
    let ids: Vec<&str> = r.candidates.iter().map(|c| c.chunk_id.as_str()).collect();
    assert!(ids.contains(&"ar-2023#c1") && ids.contains(&"ar-2024#c1"), "{ids:?}");
}

#[test]
fn misspelled_words_miss_bm25_but_the_vector_only_fallback_finds_the_report() {
    let index = index();
    let s = settings(vec![
        attempt("hybrid_strict", RetrievalMode::Hybrid, 0.75, 1),
        attempt("vector_only", RetrievalMode::Dense, 0.15, 1),
    ]);
    let req = Request { question: "revenues servces segmnt".into(), ..Default::default() };
    let r = retrieve(&index, &req, &s);
    assert!(!r.attempts[0].accepted, "{:#?}", r.attempts);
    assert!(r.attempts[1].accepted, "{:#?}", r.attempts);
    assert!(r.candidates[0].doc_id.starts_with("ar-"), "{:#?}", r.candidates);
    assert_eq!(r.attempts[1].lists[0].list, "vector:question");
}

#[test]
fn the_question_and_the_revised_query_are_fused_and_each_chunk_comes_out_once() {
    let index = index();
    let req = Request {
        question: "How did revenue grow by segment?".into(),
        revised_query: Some("revenue growth by segment in the annual report".into()),
        ..Default::default()
    };
    let r = retrieve(&index, &req, &settings(vec![]));
    let accepted = r.attempts.iter().find(|a| a.accepted).expect("accepted");
    assert_eq!(accepted.lists.len(), 4, "bm25 and vector, for the question and the revised query");
    assert!(r.merge.listed > r.merge.deduped, "the lists overlapped: {:?}", r.merge);
    let mut ids: Vec<&str> = r.candidates.iter().map(|c| c.chunk_id.as_str()).collect();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n);
}

#[test]
fn an_index_written_and_loaded_back_answers_exactly_like_the_one_built_in_memory() {
    let dir = folder(REPORTS);
    let file = IndexFile::build(&dir, Chunking::default()).expect("build");
    let out = dir.join("index.json");
    file.write(&out).expect("write");
    let loaded = Index::load(&out).expect("load");
    let built = Index::new(file).expect("new");
    let req = Request { question: "vacation days".into(), ..Default::default() };
    let s = settings(vec![]);
    assert_eq!(retrieve(&loaded, &req, &s), retrieve(&built, &req, &s));
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "the temporary file was renamed away");
}

#[test]
fn an_empty_folder_a_non_utf8_file_a_duplicate_and_an_oversized_file_are_named() {
    let empty = folder(&[("notes.csv", b"a,b")]);
    let e = IndexFile::build(&empty, Chunking::default()).expect_err("empty");
    assert!(e.to_string().contains("holds no .md or .txt documents"), "{e}");
    assert!(e.to_string().starts_with(&empty.display().to_string()), "{e}");

    let binary = folder(&[("ok.md", b"Fine text."), ("bad.md", &[0x66, 0x6f, 0xff, 0xfe, 0x00])]);
    let e = IndexFile::build(&binary, Chunking::default()).expect_err("non-utf8");
    assert_eq!(
        e.to_string(),
        format!("{}: not UTF-8 text (invalid byte at offset 2)", binary.join("bad.md").display())
    );

    let dup = folder(&[("a.md", b"date: 2024\n\nSame   text."), ("b.md", b"Same text.")]);
    let e = IndexFile::build(&dup, Chunking::default()).expect_err("duplicate");
    assert!(e.to_string().starts_with(&dup.join("b.md").display().to_string()), "{e}");
    assert!(e.to_string().contains("same text as") && e.to_string().contains("a.md"), "{e}");

    let big = vec![b'a'; (corpus::MAX_DOCUMENT_BYTES + 1) as usize];
    let huge = folder(&[("huge.txt", &big)]);
    let e = IndexFile::build(&huge, Chunking::default()).expect_err("too big");
    assert!(e.to_string().contains("huge.txt") && e.to_string().contains("limit of a document"), "{e}");

    let bad_chunking = Chunking { max_words: 20, overlap_words: 15 };
    let e = IndexFile::build(&folder(REPORTS), bad_chunking).expect_err("overlap");
    assert!(e.to_string().contains("overlap_words must be under half of max_words"), "{e}");
}

#[test]
fn a_document_far_larger_than_a_chunk_is_cut_into_overlapping_chunks_with_unique_ids() {
    let long: String = (0..400).map(|n| format!("Sentence number {n} about revenue. ")).collect();
    let dir = folder(&[("long.md", long.as_bytes())]);
    // 5-word sentences: 8 fill a 40-word chunk; the next chunk repeats the last 10 words.
    let c = Chunking { max_words: 40, overlap_words: 10 };
    let index = Index::from_folder(&dir, c).expect("index");
    assert!(index.chunks().len() > 30, "{}", index.chunks().len());
    assert!(index.chunks().iter().all(|c| c.text.split_whitespace().count() <= 40));
    let mut ids: Vec<&str> = index.chunks().iter().map(|c| c.chunk_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), index.chunks().len());
    assert!(index.chunks()[1].text.starts_with("Sentence number 6 about revenue."), "{}", index.chunks()[1].text);
}

#[test]
fn a_missing_or_corrupt_index_file_is_an_error_naming_the_path() {
    let dir = folder(&[("broken.json", b"{\"format\": 1, \"chunks\": ")]);
    let e = Index::load(&dir.join("missing.json")).expect_err("missing");
    assert!(e.to_string().starts_with(&dir.join("missing.json").display().to_string()), "{e}");
    let e = Index::load(&dir.join("broken.json")).expect_err("corrupt");
    assert!(e.to_string().contains("broken.json: cannot load the index: not a Switchyard index"), "{e}");
    let file =
        IndexFile { format: 9, chunking: Chunking::default(), documents: vec![], chunks: vec![], embeddings: None };
    file.write(&dir.join("future.json")).expect("write");
    let e = Index::load(&dir.join("future.json")).expect_err("format");
    assert!(e.to_string().contains("index format 9 is not the supported 1"), "{e}");
}

#[test]
fn writing_into_a_missing_folder_fails_and_leaves_nothing_behind() {
    let dir = folder(&[]);
    let out = dir.join("no-such-folder").join("index.json");
    let file = IndexFile::build(&folder(REPORTS), Chunking::default()).expect("build");
    let e = file.write(&out).expect_err("no folder");
    assert!(e.to_string().contains("cannot write the index"), "{e}");
    assert!(!Path::new(&out).exists());
}
