//! Generic English text handling shared by the intent model and the entity extractor:
//! tokenisation with byte spans, a stop-word list, a light suffix-stripping stemmer and a
//! Damerau (optimal string alignment) edit distance. Nothing here knows any manifest.

/// One word of the input: its lower-cased text and where it sits in the original string.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    /// Lower-cased text.
    pub(crate) text: String,
    /// Byte offset of the first character in the original text.
    pub(crate) start: usize,
    /// Byte offset just past the last character.
    pub(crate) end: usize,
    /// Whether the original spelling started with an upper-case letter.
    pub(crate) capitalised: bool,
}

impl Token {
    pub(crate) fn has_digit(&self) -> bool {
        self.text.bytes().any(|b| b.is_ascii_digit())
    }

    pub(crate) fn is_number(&self) -> bool {
        !self.text.is_empty() && self.text.bytes().all(|b| b.is_ascii_digit())
    }
}

/// Splits text into maximal runs of alphanumeric characters (any script), lower-cased.
///
/// `a/b` (a single letter, a slash, a single letter) is kept as one token `ab`, so that
/// "A/B test" and "AB test" read the same. At most `max_tokens` tokens are returned.
pub(crate) fn tokenize(text: &str, max_tokens: usize) -> Vec<Token> {
    let mut tokens: Vec<Token> = Vec::new();
    let mut start: Option<usize> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() {
            if start.is_none() {
                start = Some(i);
            }
            let at_end = chars.peek().map(|&(_, n)| !n.is_alphanumeric()).unwrap_or(true);
            if at_end {
                let s = start.take().unwrap_or(i);
                let end = i + c.len_utf8();
                push_token(&mut tokens, text, s, end);
                if tokens.len() >= max_tokens {
                    break;
                }
            }
        }
    }
    tokens
}

fn push_token(tokens: &mut Vec<Token>, text: &str, start: usize, end: usize) {
    let raw = &text[start..end];
    let capitalised = raw.chars().next().map(char::is_uppercase).unwrap_or(false);
    let lower = raw.to_lowercase();
    // "a/b" → "ab": the previous token is one letter, separated from this one-letter token by '/'.
    if lower.chars().count() == 1 {
        if let Some(prev) = tokens.last_mut() {
            if prev.end + 1 == start && text.as_bytes().get(prev.end) == Some(&b'/') && prev.text.chars().count() == 1 {
                prev.text.push_str(&lower);
                prev.end = end;
                return;
            }
        }
    }
    tokens.push(Token { text: lower, start, end, capitalised });
}

/// Function words that carry no intent. Question words (`why`, `who`, `how`, `which`,
/// `where`, `will`) are deliberately absent: they often do signal an intent, and the learned
/// weights decide how much.
pub(crate) const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "across",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "being",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "done",
    "each",
    "for",
    "from",
    "further",
    "get",
    "give",
    "got",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "him",
    "his",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "kindly",
    "let",
    "me",
    "my",
    "myself",
    "need",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "out",
    "own",
    "please",
    "pls",
    "s",
    "same",
    "she",
    "should",
    "show",
    "so",
    "some",
    "such",
    "t",
    "tell",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "us",
    "very",
    "was",
    "we",
    "were",
    "what",
    "whats",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "i'd",
    "im",
    "ok",
    "okay",
    "hey",
    "hi",
    "now",
    "currently",
    "right",
    "via",
    "per",
    "one",
    "two",
    "three",
    "quick",
    "want",
    "like",
    "know",
    "see",
    "look",
    "thing",
    "things",
    "etc",
    "e",
    "g",
    "ie",
    "eg",
    "d",
    "ll",
    "re",
    "ve",
    "m",
];

/// Words that may open a request before its verb: "please", "can you", "I'd like to",
/// "let's", "go ahead and".
pub(crate) fn is_request_word(word: &str) -> bool {
    matches!(
        word,
        "please"
            | "pls"
            | "kindly"
            | "can"
            | "could"
            | "would"
            | "will"
            | "you"
            | "let"
            | "lets"
            | "let's"
            | "us"
            | "i"
            | "we"
            | "need"
            | "to"
            | "want"
            | "like"
            | "d"
            | "id"
            | "go"
            | "ahead"
            | "and"
            | "now"
            | "ok"
            | "okay"
            | "hey"
            | "hi"
            | "so"
            | "just"
            | "s"
    )
}

/// Whether a lower-cased word is a stop word.
pub(crate) fn is_stop_word(word: &str) -> bool {
    // A set rather than a scan of the list: every word of every question is checked, several
    // times (terms, scope, word vectors, follow-up cues).
    static SET: std::sync::LazyLock<super::Set<&'static str>> =
        std::sync::LazyLock::new(|| STOP_WORDS.iter().copied().collect());
    SET.contains(word)
}

/// A light English stemmer: one inflectional suffix, then one derivational suffix, then a final
/// silent `e`. It conflates "drifting/drifted/drifts", "deploy/deployment", "predict/
/// prediction/predictive", "optimise/optimize/optimization", "cause/causes/caused/causal" and
/// leaves short words and non-ASCII words alone. Both the manifest and the query go through
/// it, so its occasional over-stemming is consistent and harmless.
pub(crate) fn stem(word: &str) -> String {
    if word.len() <= 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_string();
    }
    let mut w = word.to_string();
    // British spellings and the -ysis family.
    for (from, to) in [("ysis", "yz"), ("yses", "yz"), ("yse", "yz"), ("ysed", "yzed"), ("ysing", "yzing")] {
        if w.ends_with(from) && w.len() > from.len() + 2 {
            w.truncate(w.len() - from.len());
            w.push_str(to);
            break;
        }
    }
    for (from, to) in [
        ("isation", "ization"),
        ("isations", "izations"),
        ("ise", "ize"),
        ("ised", "ized"),
        ("ises", "izes"),
        ("ising", "izing"),
    ] {
        if w.ends_with(from) && w.len() > from.len() + 3 {
            w.truncate(w.len() - from.len());
            w.push_str(to);
            break;
        }
    }
    // Plurals and third person.
    if w.ends_with("ies") && w.len() > 4 {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if w.ends_with("sses")
        || w.ends_with("ches")
        || w.ends_with("shes")
        || w.ends_with("xes")
        || w.ends_with("zes")
    {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") && w.len() > 3 {
        w.truncate(w.len() - 1);
    }
    // Inflections.
    let mut stripped = false;
    for suffix in ["ingly", "edly", "ing", "ed"] {
        if w.ends_with(suffix) && w.len() >= suffix.len() + 3 {
            w.truncate(w.len() - suffix.len());
            stripped = true;
            break;
        }
    }
    if stripped {
        let b = w.as_bytes();
        let n = b.len();
        if n >= 4 && b[n - 1] == b[n - 2] && !matches!(b[n - 1], b'l' | b's' | b'z' | b'e') && !is_vowel(b[n - 1]) {
            w.truncate(n - 1);
        } else if w.ends_with('i') {
            // "applied" → "appli" → "apply"
            w.pop();
            w.push('y');
        }
    } else if w.ends_with("ly") && w.len() >= 6 {
        w.truncate(w.len() - 2);
    }
    // Derivations.
    for (suffix, min_stem) in [
        ("ization", 3),
        ("ations", 3),
        ("ation", 3),
        ("itions", 3),
        ("ition", 3),
        ("tions", 3),
        ("tion", 3),
        ("sion", 3),
        ("ments", 4),
        ("ment", 4),
        ("ness", 3),
        ("ity", 4),
        ("ive", 4),
        ("er", 4),
        ("al", 4),
        ("ize", 3),
        ("iz", 3),
    ] {
        if w.ends_with(suffix) && w.len() >= suffix.len() + min_stem {
            w.truncate(w.len() - suffix.len());
            // "-tion"/"-sion" keep their t/s: "prediction" → "predict", "regression" → "regress".
            if suffix == "tion" || suffix == "tions" {
                w.push('t');
            } else if suffix == "sion" {
                w.push('s');
            }
            break;
        }
    }
    if w.ends_with('e') && w.len() > 4 {
        w.pop();
    }
    w
}

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions), on chars.
/// Stops early and returns `limit + 1` once every alignment exceeds `limit`.
pub(crate) fn edit_distance(a: &str, b: &str, limit: usize) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > limit {
        return limit + 1;
    }
    let width = b.len() + 1;
    let mut prev2 = vec![0usize; width];
    let mut prev: Vec<usize> = (0..width).collect();
    let mut cur = vec![0usize; width];
    for i in 1..=a.len() {
        cur[0] = i;
        let mut row_min = cur[0];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(prev2[j - 2] + 1);
            }
            cur[j] = d;
            row_min = row_min.min(d);
        }
        if row_min > limit {
            return limit + 1;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()].min(limit + 1)
}

/// The set of character trigrams of `" word "` (padded so that short words still have some).
pub(crate) fn trigrams(word: &str) -> Vec<String> {
    let padded: Vec<char> = std::iter::once(' ').chain(word.chars()).chain(std::iter::once(' ')).collect();
    let mut grams: Vec<String> = padded.windows(3).map(|w| w.iter().collect()).collect();
    grams.sort();
    grams.dedup();
    grams
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stemmer_conflates_common_inflections_and_derivations() {
        let same = |a: &str, b: &str| assert_eq!(stem(a), stem(b), "{a} vs {b}");
        same("drifting", "drift");
        same("drifted", "drifts");
        same("deployment", "deploy");
        same("prediction", "predict");
        same("predictive", "predicted");
        same("optimise", "optimize");
        same("optimization", "optimize");
        same("causes", "caused");
        same("analysis", "analyze");
        same("analyses", "analyse");
        same("planned", "plan");
        same("prescriber", "prescribe");
        same("randomised", "randomized");
    }

    #[test]
    fn tokenizer_keeps_spans_and_joins_a_slash_b() {
        let t = tokenize("Run an A/B test, Kisqali's Q3!", 100);
        let words: Vec<&str> = t.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(words, ["run", "an", "ab", "test", "kisqali", "s", "q3"]);
        assert_eq!(&"Run an A/B test, Kisqali's Q3!"[t[2].start..t[2].end], "A/B");
    }

    #[test]
    fn edit_distance_counts_transpositions_once() {
        assert_eq!(edit_distance("kisqali", "kisquali", 2), 1);
        assert_eq!(edit_distance("fabhalta", "fabhatla", 2), 1);
        assert_eq!(edit_distance("entresto", "leqvio", 2), 3);
    }
}
