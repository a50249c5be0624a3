//! Text → hashed sparse features: word unigrams and bigrams, and character n-grams of each word
//! padded with spaces (typos and inflections share most of them). Each block is weighted by
//! `1 + ln(tf)`, scaled to unit length, then by its block weight, so a long question and a short
//! one weigh alike.

/// How a text is turned into features.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeatureSpec {
    /// Buckets: `1 << hash_bits`.
    pub hash_bits: u32,
    /// Shortest and longest character n-gram.
    pub char_range: (usize, usize),
    /// Weight of the character block next to the word block (1.0).
    pub char_weight: f32,
    /// Dimensions of the dense text vector appended after the hashed buckets (0: none).
    pub dense_dims: u32,
    /// Length of the dense block (the vector is unit length, then scaled by this).
    pub dense_weight: f32,
}

/// A dense text vector the caller supplies (a static sentence embedding): what turns a text
/// into it is named in the artifact, so a router is never read with another.
pub trait Embedder: Sync {
    /// Name and version of the embedding.
    fn name(&self) -> &str;
    /// Its dimensions.
    fn dims(&self) -> usize;
    /// The unit-length vector of `text`; `None` when no word of it has one.
    fn embed(&self, text: &str) -> Option<Vec<f32>>;
}

impl Default for FeatureSpec {
    fn default() -> Self {
        FeatureSpec { hash_bits: 18, char_range: (2, 5), char_weight: 1.0, dense_dims: 0, dense_weight: 0.0 }
    }
}

/// A sparse vector: bucket ids, sorted and distinct, with their values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sparse {
    /// Bucket ids, ascending.
    pub index: Vec<u32>,
    /// One value per bucket id.
    pub value: Vec<f32>,
}

impl Sparse {
    /// The dot product with a dense vector.
    pub fn dot(&self, dense: &[f32]) -> f32 {
        self.index.iter().zip(&self.value).map(|(&i, &v)| dense[i as usize] * v).sum()
    }

    /// The squared length.
    pub fn norm2(&self) -> f32 {
        self.value.iter().map(|v| v * v).sum()
    }
}

/// Lower-cased words: letters and digits; an apostrophe inside a word is dropped ("don't" →
/// "dont"), anything else separates words.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if (c == '\'' || c == '’') && !word.is_empty() {
            continue;
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// FNV-1a over the bytes of the parts, with a namespace byte first so a word and a character
/// n-gram with the same text land in different buckets.
fn hash(namespace: u8, parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(namespace);
    for (k, part) in parts.iter().enumerate() {
        if k > 0 {
            eat(0x1f);
        }
        for &b in *part {
            eat(b);
        }
    }
    // Final mix (the low bits are the bucket).
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

/// The features of `text` with its dense vector, when the spec has a dense block: the vector's
/// components follow the hashed buckets, at `1 << hash_bits` onwards.
pub fn featurize_with(text: &str, spec: &FeatureSpec, dense: Option<&[f32]>) -> Sparse {
    let mut out = featurize(text, spec);
    if let Some(v) = dense.filter(|v| spec.dense_dims > 0 && v.len() == spec.dense_dims as usize) {
        let base = 1u32 << spec.hash_bits;
        for (j, &x) in v.iter().enumerate() {
            if x != 0.0 {
                out.index.push(base + j as u32);
                out.value.push(spec.dense_weight * x);
            }
        }
    }
    out
}

/// The hashed n-gram features of `text`.
pub fn featurize(text: &str, spec: &FeatureSpec) -> Sparse {
    let mask = (1u64 << spec.hash_bits) - 1;
    let words = words(text);
    let mut word_counts: Vec<(u32, f32)> = Vec::with_capacity(words.len() * 2);
    for (i, w) in words.iter().enumerate() {
        word_counts.push(((hash(1, &[w.as_bytes()]) & mask) as u32, 1.0));
        if let Some(next) = words.get(i + 1) {
            word_counts.push(((hash(2, &[w.as_bytes(), next.as_bytes()]) & mask) as u32, 1.0));
        }
    }
    let mut char_counts: Vec<(u32, f32)> = Vec::new();
    let (lo, hi) = spec.char_range;
    for w in &words {
        let padded: Vec<char> = std::iter::once(' ').chain(w.chars()).chain(std::iter::once(' ')).collect();
        let mut buf = String::new();
        for n in lo..=hi {
            if n > padded.len() {
                break;
            }
            for start in 0..=padded.len() - n {
                buf.clear();
                buf.extend(&padded[start..start + n]);
                char_counts.push(((hash(3, &[buf.as_bytes()]) & mask) as u32, 1.0));
            }
        }
    }
    let words_block = block(word_counts, 1.0);
    let chars_block = block(char_counts, spec.char_weight);
    merge(words_block, chars_block)
}

/// Counts summed per bucket, `1 + ln(count)`, scaled to length `weight`.
fn block(mut counts: Vec<(u32, f32)>, weight: f32) -> Vec<(u32, f32)> {
    counts.sort_unstable_by_key(|&(i, _)| i);
    let mut out: Vec<(u32, f32)> = Vec::with_capacity(counts.len());
    for (i, c) in counts {
        match out.last_mut() {
            Some(last) if last.0 == i => last.1 += c,
            _ => out.push((i, c)),
        }
    }
    for v in &mut out {
        v.1 = 1.0 + v.1.ln();
    }
    let norm = out.iter().map(|v| v.1 * v.1).sum::<f32>().sqrt();
    if norm > 0.0 {
        for v in &mut out {
            v.1 *= weight / norm;
        }
    }
    out
}

fn merge(a: Vec<(u32, f32)>, b: Vec<(u32, f32)>) -> Sparse {
    let mut all = a;
    all.extend(b);
    all.sort_unstable_by_key(|&(i, _)| i);
    let mut out = Sparse::default();
    for (i, v) in all {
        if out.index.last() == Some(&i) {
            if let Some(last) = out.value.last_mut() {
                *last += v;
            }
        } else {
            out.index.push(i);
            out.value.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lower_cased_and_apostrophes_join_them() {
        assert_eq!(words("Don't BOOK a 2nd flight, ok?"), ["dont", "book", "a", "2nd", "flight", "ok"]);
        assert!(words("  ?! ").is_empty());
    }

    #[test]
    fn a_typo_shares_most_character_features_with_the_word() {
        let spec = FeatureSpec::default();
        let a = featurize("reservation", &spec);
        let b = featurize("resevration", &spec);
        let shared = a.index.iter().filter(|i| b.index.binary_search(i).is_ok()).count();
        assert!(shared * 2 > a.index.len(), "{shared} of {}", a.index.len());
    }

    #[test]
    fn features_are_sorted_distinct_and_of_bounded_length() {
        let spec = FeatureSpec::default();
        let f = featurize("book book a flight to paris and a flight back", &spec);
        assert!(f.index.windows(2).all(|w| w[0] < w[1]));
        let norm = f.norm2().sqrt();
        assert!((norm - 2f32.sqrt()).abs() < 0.05, "two unit blocks, nearly orthogonal: {norm}");
        assert_eq!(featurize("", &spec), Sparse::default());
    }
}
