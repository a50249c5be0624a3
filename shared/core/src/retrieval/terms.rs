//! Text to search terms: lower-case words and numbers, English stop words dropped, each word
//! reduced to its Snowball (Porter 2) stem so "grew", "growth" and "growing" meet where they
//! can ("growth" and "growing" both stem to `grow`).

use rust_stemmers::{Algorithm, Stemmer};

/// Words too common to say anything about a chunk.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "did", "do", "does", "for", "from", "had",
    "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "of", "on", "or", "our", "so", "than",
    "that", "the", "their", "then", "there", "these", "this", "to", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "will", "with", "you", "your",
];

/// Irregular forms a stemmer cannot reach ("grew" is not a suffix away from "grow"), and
/// nouns that should meet their verb ("growth" → "grow"), for the words reports use most.
const LEMMAS: &[(&str, &str)] = &[
    ("grew", "grow"),
    ("grown", "grow"),
    ("growth", "grow"),
    ("rose", "rise"),
    ("risen", "rise"),
    ("fell", "fall"),
    ("fallen", "fall"),
    ("paid", "pay"),
    ("sold", "sell"),
    ("spent", "spend"),
    ("lost", "lose"),
    ("made", "make"),
    ("began", "begin"),
    ("begun", "begin"),
    ("kept", "keep"),
    ("led", "lead"),
];

/// The search terms of `text`, in order, repeats kept (term frequency counts them).
pub fn terms(text: &str) -> Vec<String> {
    let stemmer = Stemmer::create(Algorithm::English);
    words(text)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| match LEMMAS.iter().find(|(form, _)| *form == w) {
            Some((_, lemma)) => (*lemma).to_string(),
            None if w.chars().all(|c| c.is_ascii_digit()) => w,
            None => stemmer.stem(&w).into_owned(),
        })
        .collect()
}

/// The lower-cased words of `text` that are not stop words, unstemmed.
pub fn content_words(text: &str) -> impl Iterator<Item = String> + '_ {
    words(text).filter(|w| !STOP_WORDS.contains(&w.as_str()))
}

/// Share of the word trigrams of `query` (padded words that are not stop words) found in
/// `text`: a spelling-tolerant overlap (0 – 1).
pub fn trigram_overlap(query: &str, text: &str) -> f64 {
    let grams = |t: &str| -> std::collections::BTreeSet<String> {
        content_words(t)
            .flat_map(|w| {
                let padded: Vec<char> = std::iter::once('#').chain(w.chars()).chain(std::iter::once('#')).collect();
                padded.windows(3).map(|g| g.iter().collect::<String>()).collect::<Vec<_>>()
            })
            .collect()
    };
    let q = grams(query);
    if q.is_empty() {
        return 0.0;
    }
    let t = grams(text);
    q.iter().filter(|g| t.contains(*g)).count() as f64 / q.len() as f64
}

/// The distinct search terms of `text`, sorted.
pub fn distinct_terms(text: &str) -> Vec<String> {
    let mut t = terms(text);
    t.sort();
    t.dedup();
    t
}

/// Lower-cased runs of letters and digits.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// Split text into sentences at `.`, `!` or `?` followed by white space (a decimal point such
/// as "8.4" is not followed by a space, so it does not split).
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()) {
            let s = text[start..=i].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = i + 1;
        }
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_stop_words_and_share_stems() {
        assert_eq!(terms("How did revenue grow by segment?"), ["revenu", "grow", "segment"]);
        assert_eq!(terms("Revenue grew; growth by segments"), ["revenu", "grow", "grow", "segment"]);
        assert_eq!(terms("growing in 2024"), ["grow", "2024"]);
    }

    #[test]
    fn trigram_overlap_tolerates_misspellings() {
        // "segmnt": #se seg egm gmn mnt nt# ; "segment" has #se seg egm nt# → 4 of 6.
        assert!((trigram_overlap("segmnt", "the Services segment") - 4.0 / 6.0).abs() < 1e-9);
        assert_eq!(trigram_overlap("the", "anything"), 0.0);
    }

    #[test]
    fn sentences_split_at_full_stops_but_not_decimal_points() {
        assert_eq!(
            sentences("Revenue rose 12% to $8.4 billion. Services grew! Devices?"),
            ["Revenue rose 12% to $8.4 billion.", "Services grew!", "Devices?"]
        );
        assert_eq!(sentences("no stop at the end"), ["no stop at the end"]);
    }
}
