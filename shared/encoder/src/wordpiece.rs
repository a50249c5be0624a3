//! BERT's uncased tokenizer: clean the text, split it into words and punctuation, then each
//! word into the longest pieces the vocabulary knows (`##` marks a piece inside a word).

use std::collections::HashMap;
use unicode_normalization::UnicodeNormalization;

/// Longest word, in characters, that is split into pieces; a longer one is `[UNK]`.
const MAX_WORD_CHARS: usize = 100;

/// A WordPiece vocabulary (one piece per line of `vocab.txt`; the line number is the id).
#[derive(Debug, Clone)]
pub struct WordPiece {
    ids: HashMap<String, u32>,
    /// `[UNK]`'s id.
    pub unk: u32,
    /// `[CLS]`'s id.
    pub cls: u32,
    /// `[SEP]`'s id.
    pub sep: u32,
}

impl WordPiece {
    /// The vocabulary of `vocab.txt`'s text; `None` without the three special pieces.
    pub fn from_vocab(text: &str) -> Option<WordPiece> {
        let ids: HashMap<String, u32> =
            text.lines().enumerate().map(|(i, l)| (l.trim_end().to_string(), i as u32)).collect();
        let get = |piece: &str| ids.get(piece).copied();
        Some(WordPiece { unk: get("[UNK]")?, cls: get("[CLS]")?, sep: get("[SEP]")?, ids })
    }

    /// How many pieces the vocabulary has.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the vocabulary is empty (never, for one [`WordPiece::from_vocab`] accepted).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids of `text`'s pieces, without `[CLS]` and `[SEP]`; at most `limit`.
    pub fn encode(&self, text: &str, limit: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for word in words(text) {
            if out.len() >= limit {
                break;
            }
            self.pieces(&word, &mut out);
        }
        out.truncate(limit);
        out
    }

    /// Greedy longest-match-first pieces of one word, or `[UNK]` when some part matches nothing.
    fn pieces(&self, word: &str, out: &mut Vec<u32>) {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > MAX_WORD_CHARS {
            out.push(self.unk);
            return;
        }
        let mark = out.len();
        let mut start = 0;
        let mut piece = String::new();
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.extend(&chars[start..end]);
                if let Some(&id) = self.ids.get(&piece) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            let Some(id) = found else {
                out.truncate(mark);
                out.push(self.unk);
                return;
            };
            out.push(id);
            start = end;
        }
    }
}

/// The words and punctuation marks of `text`, lower-cased and without accents, as BERT's basic
/// tokenizer splits it: control characters dropped, whitespace splits, each punctuation mark and
/// each CJK ideograph is a word of its own.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            out.push(std::mem::take(word));
        }
    };
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            flush(&mut word, &mut out);
        } else if is_punctuation(c) || is_cjk(c) {
            flush(&mut word, &mut out);
            out.push(c.to_string());
        } else {
            for lower in c.to_lowercase() {
                // Accents go: decompose, drop the combining marks.
                word.extend(std::iter::once(lower).nfd().filter(|d| !is_combining_mark(*d)));
            }
        }
    }
    flush(&mut word, &mut out);
    out
}

/// BERT's punctuation: every ASCII non-alphanumeric printable character, and the Unicode
/// punctuation blocks.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c as u32,
            0x00A1..=0x00BF | 0x2010..=0x2027 | 0x2030..=0x205E | 0x3001..=0x3003 | 0x3008..=0x3011
            | 0x3014..=0x301F | 0xFE10..=0xFE19 | 0xFE30..=0xFE4F | 0xFF01..=0xFF0F | 0xFF1A..=0xFF20
            | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65)
            && !c.is_alphanumeric()
}

/// CJK ideographs, which BERT treats as one word each.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// Combining marks (Unicode category Mn) that accent decomposition leaves.
fn is_combining_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> WordPiece {
        let pieces = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "want", "##ed", "runn", "##ing", ",", "cafe",
            "?",
        ];
        WordPiece::from_vocab(&pieces.join("\n")).expect("special pieces")
    }

    #[test]
    fn words_split_on_space_and_punctuation_lowercased_without_accents() {
        assert_eq!(words("Unwanted, running?  CAFÉ\tx"), ["unwanted", ",", "running", "?", "cafe", "x"]);
        assert_eq!(words("a\u{0}b \u{7}"), ["ab"]);
        assert_eq!(words("你好"), ["你", "好"]);
        assert_eq!(words("“quoted”"), ["“", "quoted", "”"]);
    }

    #[test]
    fn pieces_are_the_longest_the_vocabulary_knows_and_unknown_words_are_unk() {
        let v = vocab();
        assert_eq!(v.encode("unaffable wanted", 10), [4, 5, 6, 7, 8]);
        assert_eq!(v.encode("Running, café?", 10), [9, 10, 11, 12, 13]);
        assert_eq!(v.encode("unxyz want", 10), [1, 7], "a word with an unknown part is one [UNK]");
        assert_eq!(v.encode(&"a".repeat(101), 10), [1]);
        assert_eq!(v.encode("want want want", 2), [7, 7]);
        assert!(WordPiece::from_vocab("a\nb").is_none());
    }
}
