//! Token counts with a real BPE tokenizer (cl100k_base, tiktoken-compatible, from the
//! `tiktoken-rs` crate).
//!
//! The tokenizer's tables are parsed on first use (a one-off cost per process: 1.4 s in a debug
//! build; `switchyard bench context` prints it for the build at hand), never at function init:
//! a process that never sees a conversation with history never pays it.

use std::sync::OnceLock;

static LOADED: OnceLock<()> = OnceLock::new();

/// Tokens of `text` in cl100k_base (special tokens counted as ordinary text).
pub fn count(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    let bpe = tiktoken_rs::cl100k_base_singleton();
    let _ = LOADED.set(());
    bpe.encode_ordinary(text).len()
}

/// Whether the tokenizer's tables have been loaded in this process.
pub fn loaded() -> bool {
    LOADED.get().is_some()
}

/// The longest prefix of `text` (cut at a word boundary) of at most `max_tokens` tokens.
pub fn truncate(text: &str, max_tokens: usize) -> String {
    if count(text) <= max_tokens {
        return text.to_string();
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    // Binary search on the number of words kept.
    let (mut lo, mut hi) = (0usize, words.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if count(&format!("{} …", words[..mid].join(" "))) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    if lo == 0 {
        return String::new();
    }
    format!("{} …", words[..lo].join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_cl100k_encoding() {
        // "hello world" is two tokens in cl100k_base; the empty string none.
        assert_eq!(count("hello world"), 2);
        assert_eq!(count(""), 0);
        assert!(loaded());
    }

    #[test]
    fn truncation_stays_within_the_ceiling_and_cuts_at_words() {
        let text = "Kisqali market share in the Northeast rose in Q3 while Fabhalta stayed flat".repeat(5);
        let cut = truncate(&text, 12);
        assert!(count(&cut) <= 12, "{cut}");
        assert!(cut.ends_with('…'));
        assert_eq!(truncate("short", 12), "short");
        assert_eq!(truncate(&text, 0), "");
    }
}
