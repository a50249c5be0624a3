//! Reading a folder of documents and cutting them into overlapping chunks.
//!
//! A document is a UTF-8 text file (`.md` or `.txt`). It may open with a header of
//! `key: value` lines ended by a blank line; `title`, `date` (`YYYY` or `YYYY-MM-DD`) and
//! `source` are read from it, other keys are ignored. The document id is the file name without
//! its extension.
//!
//! Every problem names the file: an empty folder, an unreadable or non-UTF-8 file, a file over
//! [`MAX_DOCUMENT_BYTES`], a bad date, a document with no text, and two files with the same
//! text (a duplicate would count twice in every ranking).

use super::terms::sentences;
use super::IndexError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
pub use switchyard_model::manifest::Chunking;

/// Largest document accepted (1 MiB): far more than a report section, small enough that a
/// stray binary or log file is refused rather than indexed.
pub const MAX_DOCUMENT_BYTES: u64 = 1 << 20;
/// Most documents in one folder.
pub const MAX_DOCUMENTS: usize = 10_000;

/// One document of the corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// File name without extension.
    pub doc_id: String,
    /// From the header, else the document id.
    pub title: String,
    /// From the header (`YYYY` or `YYYY-MM-DD`).
    pub date: Option<String>,
    /// Year of `date`.
    pub year: Option<i32>,
    /// Where it came from: the header's `source`, else the file's path relative to the folder.
    pub source: String,
    /// The text after the header.
    pub body: String,
}

/// A document parsed from `text`; `file` names it in errors.
pub fn parse_document(file: &Path, rel: &str, text: &str) -> Result<Document, IndexError> {
    let bad = |message: String| IndexError::Document { file: file.to_path_buf(), message };
    let doc_id = Path::new(rel).file_stem().and_then(|s| s.to_str()).unwrap_or(rel).to_string();
    let mut header: BTreeMap<String, String> = BTreeMap::new();
    let mut body = text;
    let first_blank = text.find("\n\n").or_else(|| text.find("\r\n\r\n"));
    if let Some(end) = first_blank {
        let head = &text[..end];
        let is_header = !head.trim().is_empty()
            && head.lines().all(|l| {
                l.split_once(':')
                    .is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            });
        if is_header {
            for line in head.lines() {
                if let Some((k, v)) = line.split_once(':') {
                    header.insert(k.to_string(), v.trim().to_string());
                }
            }
            body = &text[end..];
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return Err(bad("the document has no text after its header".into()));
    }
    let date = header.get("date").cloned().filter(|d| !d.is_empty());
    let year = match &date {
        Some(d) => Some(parse_year(d).ok_or_else(|| bad(format!("`date: {d}` is not YYYY or YYYY-MM-DD")))?),
        None => None,
    };
    Ok(Document {
        title: header.get("title").cloned().unwrap_or_else(|| doc_id.clone()),
        source: header.get("source").cloned().unwrap_or_else(|| rel.to_string()),
        doc_id,
        date,
        year,
        body: body.to_string(),
    })
}

fn parse_year(date: &str) -> Option<i32> {
    let ok = match date.len() {
        4 => date.chars().all(|c| c.is_ascii_digit()),
        10 => chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok(),
        _ => false,
    };
    if ok {
        date[..4].parse().ok().filter(|y| (1900..=2200).contains(y))
    } else {
        None
    }
}

/// Every document under `dir` (recursively, `.md` and `.txt`, in path order).
pub fn read_folder(dir: &Path) -> Result<Vec<Document>, IndexError> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    if files.is_empty() {
        return Err(IndexError::Document {
            file: dir.to_path_buf(),
            message: "the folder holds no .md or .txt documents".into(),
        });
    }
    if files.len() > MAX_DOCUMENTS {
        return Err(IndexError::Document {
            file: dir.to_path_buf(),
            message: format!("the folder holds {} documents, more than {MAX_DOCUMENTS}", files.len()),
        });
    }
    let mut docs: Vec<Document> = Vec::with_capacity(files.len());
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for file in files {
        let bad = |message: String| IndexError::Document { file: file.clone(), message };
        let size = std::fs::metadata(&file).map_err(|e| bad(format!("cannot read it: {e}")))?.len();
        if size > MAX_DOCUMENT_BYTES {
            return Err(bad(format!("{size} bytes, more than the {MAX_DOCUMENT_BYTES}-byte limit of a document")));
        }
        let bytes = std::fs::read(&file).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| bad(format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to())))?;
        let rel = file.strip_prefix(dir).unwrap_or(&file).to_string_lossy().replace('\\', "/");
        let doc = parse_document(&file, &rel, &text)?;
        let key: String = doc.body.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
        if let Some(first) = seen.get(&key) {
            return Err(bad(format!("same text as {}: remove one of the two", first.display())));
        }
        if let Some(other) = docs.iter().find(|d| d.doc_id == doc.doc_id) {
            return Err(bad(format!("document id `{}` is used by another file ({})", doc.doc_id, other.source)));
        }
        seen.insert(key, file.clone());
        docs.push(doc);
    }
    Ok(docs)
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), IndexError> {
    let entries = std::fs::read_dir(dir).map_err(|e| IndexError::Document {
        file: dir.to_path_buf(),
        message: format!("cannot list the folder: {e}"),
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| IndexError::Document {
            file: dir.to_path_buf(),
            message: format!("cannot list the folder: {e}"),
        })?;
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("md" | "txt")) {
            out.push(path);
        }
    }
    Ok(())
}

/// Cut `body` into chunks of at most `max_words` words, sentence by sentence; each chunk after
/// the first starts with the last `overlap_words` words of the previous one. A sentence longer
/// than a chunk is cut by words.
pub fn chunk(body: &str, c: Chunking) -> Vec<String> {
    let mut pieces: Vec<Vec<&str>> = Vec::new();
    for s in sentences(body) {
        let words: Vec<&str> = s.split_whitespace().collect();
        for part in words.chunks(c.max_words.max(1)) {
            pieces.push(part.to_vec());
        }
    }
    let mut chunks: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut fresh = 0; // words in `current` that are not overlap
    for piece in pieces {
        if fresh > 0 && current.len() + piece.len() > c.max_words {
            let tail: Vec<&str> = current[current.len().saturating_sub(c.overlap_words)..].to_vec();
            chunks.push(std::mem::replace(&mut current, tail));
            fresh = 0;
            while current.len() + piece.len() > c.max_words && !current.is_empty() {
                current.remove(0);
            }
        }
        fresh += piece.len();
        current.extend(piece);
    }
    if fresh > 0 {
        chunks.push(current);
    }
    chunks.into_iter().map(|w| w.join(" ")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_gives_title_date_and_year() {
        let d = parse_document(
            Path::new("x/ar-2024.md"),
            "ar-2024.md",
            "title: Annual report 2024\ndate: 2024-02-15\n\nRevenue grew.",
        )
        .expect("parses");
        assert_eq!((d.doc_id.as_str(), d.title.as_str(), d.year), ("ar-2024", "Annual report 2024", Some(2024)));
        assert_eq!(d.body, "Revenue grew.");
        assert_eq!(d.source, "ar-2024.md");
    }

    #[test]
    fn a_bad_date_or_an_empty_body_names_the_file() {
        let e = parse_document(Path::new("c/a.md"), "a.md", "date: last year\n\nText.").expect_err("bad date");
        assert_eq!(e.to_string(), "c/a.md: `date: last year` is not YYYY or YYYY-MM-DD");
        let e = parse_document(Path::new("c/b.md"), "b.md", "title: t\n\n   ").expect_err("empty");
        assert!(e.to_string().starts_with("c/b.md: the document has no text"), "{e}");
    }

    #[test]
    fn chunks_overlap_and_a_long_sentence_is_cut_by_words() {
        let c = Chunking { max_words: 10, overlap_words: 3 };
        let body = "one two three four five six. seven eight nine ten eleven twelve. thirteen fourteen.";
        let chunks = chunk(body, c);
        assert_eq!(chunks[0], "one two three four five six.");
        assert_eq!(chunks[1], "four five six. seven eight nine ten eleven twelve.");
        assert_eq!(chunks[2], "ten eleven twelve. thirteen fourteen.");
        let long = (0..35).map(|n| format!("w{n}")).collect::<Vec<_>>().join(" ");
        let chunks = chunk(&long, c);
        assert!(chunks.iter().all(|c| c.split_whitespace().count() <= 10), "{chunks:?}");
        let all: String = chunks.join(" ");
        assert!((0..35).all(|n| all.contains(&format!("w{n}"))), "no word lost");
    }
}
