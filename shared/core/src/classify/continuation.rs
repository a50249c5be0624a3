//! The learned continuation model: how likely a follow-up keeps the earlier turn's intent.
//!
//! The hand-set rules of [`super::followup`] read the phrasings they were written for ("and
//! for …", "what about …", "why did that happen?") and weigh every other follow-up with one
//! prior. A manifest that has labelled conversations learns the decision, "does this turn
//! continue the request or ask another one?", from them: a naive Bayes classifier over the
//! turn's words (entities and numbers masked, so "and for Leqvio?" and "and for the West?" are
//! one pattern), its word pairs, its first word, its length, the follow-up cues the rules read,
//! and whether the turn alone is classified to the earlier turn's intent.
//!
//! `switchyard train` trains it from the conversations `classifier.dialogues` names and stores
//! it in the manifest's router artifact (`crate::router`), which the classifier loads with the
//! router. A manifest without conversations has no model: the rules' priors decide (a model
//! trained on one domain's conversations, or on their language words alone, routed other
//! domains' follow-ups worse than the rules, docs/conversations.md).
//!
//! A model is a table of counts: a header line with the number of keeping and switching
//! follow-ups it was trained on, then one line per feature with the number of keeping and of
//! switching follow-ups that had it. Features are hashed (FxHash of the feature's text) so a
//! follow-up is scored without allocating one string per feature; the table keeps the texts so
//! it can be read and diffed.

use super::{text_hash as hash, Map};

/// Features seen in fewer training follow-ups than this are left out of the table: a word
/// seen once says more about its writer than about follow-ups.
pub const MIN_FEATURE_COUNT: u32 = 2;
/// At most this many words of a turn are read (a follow-up is short; a pasted page is not one).
const MAX_WORDS: usize = 32;
/// Naive Bayes counts correlated features (a word, the pair it starts, the cue it makes) as
/// independent evidence, so its log odds are too sharp: they are scaled by this before they
/// become a probability, which then meets the turn's own classification as a prior. Chosen by
/// leave-one-half-out over the training halves (1.0, 0.5, 0.3 and 0.15 tried; 0.5 kept).
const LOGIT_SCALE: f64 = 0.5;
/// The header's first field.
const HEADER: &str = "#switchyard-continuation-model";

/// Keep/switch counts per feature, and the number of training follow-ups of each kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContinuationModel {
    keep: u32,
    switch: u32,
    counts: Map<u64, (u32, u32)>,
}

impl ContinuationModel {
    /// Reads a table written by [`ContinuationTrainer::to_table`].
    pub fn parse(table: &str) -> Result<ContinuationModel, String> {
        let mut lines = table.lines();
        let header = lines.next().ok_or("continuation model: empty table")?;
        let mut fields = header.split('\t');
        if fields.next() != Some(HEADER) {
            return Err(format!("continuation model: the first line must start with {HEADER}"));
        }
        let number = |field: Option<&str>, what: &str| -> Result<u32, String> {
            field
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("continuation model: {what} must be a whole number"))
        };
        let keep = number(fields.next(), "the header's keep count")?;
        let switch = number(fields.next(), "the header's switch count")?;
        let mut counts = Map::default();
        for (n, line) in lines.enumerate() {
            let mut fields = line.split('\t');
            let feature = fields.next().filter(|f| !f.is_empty());
            let feature = feature.ok_or_else(|| format!("continuation model line {}: no feature", n + 2))?;
            let k = number(fields.next(), &format!("line {}'s keep count", n + 2))?;
            let s = number(fields.next(), &format!("line {}'s switch count", n + 2))?;
            if k > keep || s > switch {
                return Err(format!("continuation model line {}: a count above the header's", n + 2));
            }
            counts.insert(hash(feature), (k, s));
        }
        Ok(ContinuationModel { keep, switch, counts })
    }

    /// How many features the model knows.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether the model was trained on anything.
    pub fn is_empty(&self) -> bool {
        self.keep == 0 || self.switch == 0
    }

    /// The probability that a follow-up with these features keeps the earlier turn's intent
    /// (`None` for an empty model). Naive Bayes over the features present: each adds the log
    /// ratio of its smoothed rate among keeping and switching follow-ups.
    pub(super) fn keep_probability(&self, features: &Features) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let (nk, ns) = (f64::from(self.keep), f64::from(self.switch));
        let mut logit = (nk / ns).ln();
        for h in &features.hashes {
            if let Some(&(k, s)) = self.counts.get(h) {
                let (k, s) = (f64::from(k), f64::from(s));
                let keep = ((k + 1.0) / (nk + 2.0)).ln() - ((nk - k + 1.0) / (nk + 2.0)).ln();
                let switch = ((s + 1.0) / (ns + 2.0)).ln() - ((ns - s + 1.0) / (ns + 2.0)).ln();
                logit += keep - switch;
            }
        }
        Some(1.0 / (1.0 + (-logit * LOGIT_SCALE).exp()))
    }
}

/// The features of one follow-up: hashes for scoring, and their texts when training.
#[derive(Debug, Default)]
pub struct Features {
    hashes: Vec<u64>,
    texts: Option<Vec<String>>,
}

impl Features {
    /// An empty set; `keep_texts` keeps each feature's text (training).
    pub(super) fn new(keep_texts: bool) -> Features {
        Features { hashes: Vec::with_capacity(64), texts: keep_texts.then(Vec::new) }
    }

    /// Adds a feature (once: a repeated word counts once, as in the training counts).
    pub(super) fn add(&mut self, feature: &str) {
        let h = hash(feature);
        if self.hashes.contains(&h) {
            return;
        }
        self.hashes.push(h);
        if let Some(texts) = &mut self.texts {
            texts.push(feature.to_string());
        }
    }

    /// The features' texts (empty unless made for training).
    pub fn texts(&self) -> &[String] {
        self.texts.as_deref().unwrap_or(&[])
    }
}

/// What a follow-up's words give the model: each word (an entity as `#e`, a number as `#n`),
/// each pair of neighbouring words, the first word and the length in words (in steps of three).
/// `words` yields the turn's words in order with whether an entity covers them.
pub(super) fn add_word_features<'a>(features: &mut Features, words: impl Iterator<Item = (&'a str, bool)>) {
    let mut buffer = String::with_capacity(48);
    let mut previous: Option<&str> = None;
    let mut count = 0usize;
    for (word, entity) in words.take(MAX_WORDS) {
        let word = if entity {
            "#e"
        } else if word.bytes().any(|b| b.is_ascii_digit()) {
            "#n"
        } else {
            word
        };
        // Runs of one entity's words ("the Pacific Northwest") read as one mask.
        if previous == Some("#e") && word == "#e" {
            continue;
        }
        buffer.clear();
        buffer.push_str("w:");
        buffer.push_str(word);
        features.add(&buffer);
        if let Some(p) = previous {
            buffer.clear();
            buffer.push_str("b:");
            buffer.push_str(p);
            buffer.push(' ');
            buffer.push_str(word);
            features.add(&buffer);
        } else {
            buffer.clear();
            buffer.push_str("f:");
            buffer.push_str(word);
            features.add(&buffer);
        }
        previous = Some(word);
        count += 1;
    }
    if count == 0 {
        features.add("f:");
    }
    buffer.clear();
    buffer.push_str("l:");
    buffer.push(char::from(b'0' + (count / 3).min(5) as u8));
    features.add(&buffer);
}

/// Counts features over labelled follow-ups and writes the table.
#[derive(Debug, Default)]
pub struct ContinuationTrainer {
    keep: u32,
    switch: u32,
    counts: std::collections::BTreeMap<String, (u32, u32)>,
}

impl ContinuationTrainer {
    /// Adds one follow-up: its features ([`super::Classifier::continuation_features`]) and
    /// whether its intended intent is the earlier turn's.
    pub fn add(&mut self, features: &Features, keeps: bool) {
        if keeps {
            self.keep += 1;
        } else {
            self.switch += 1;
        }
        for f in features.texts() {
            let c = self.counts.entry(f.clone()).or_default();
            if keeps {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
    }

    /// The table: the header, then every feature seen at least [`MIN_FEATURE_COUNT`] times, in
    /// byte order (deterministic, so the file diffs cleanly).
    pub fn to_table(&self) -> String {
        let mut out = format!("{HEADER}\t{}\t{}\n", self.keep, self.switch);
        for (feature, (k, s)) in &self.counts {
            if k + s >= MIN_FEATURE_COUNT && !feature.contains(['\t', '\n']) {
                out.push_str(&format!("{feature}\t{k}\t{s}\n"));
            }
        }
        out
    }

    /// The model the table describes.
    pub fn model(&self) -> ContinuationModel {
        ContinuationModel::parse(&self.to_table()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(texts: &[&str]) -> Features {
        let mut f = Features::new(true);
        for t in texts {
            f.add(t);
        }
        f
    }

    #[test]
    fn a_trained_table_reads_back_as_the_same_model_and_leans_the_way_it_was_taught() {
        let mut trainer = ContinuationTrainer::default();
        for _ in 0..5 {
            trainer.add(&features(&["f:and", "w:and", "a:other"]), true);
            trainer.add(&features(&["f:design", "w:design", "a:other"]), false);
        }
        trainer.add(&features(&["w:once"]), true);
        let table = trainer.to_table();
        assert!(table.starts_with("#switchyard-continuation-model\t6\t5\n"));
        assert!(!table.contains("w:once"), "a feature seen once is left out");
        let model = ContinuationModel::parse(&table).expect("the table parses");
        assert_eq!(model, trainer.model());
        let keep = model.keep_probability(&features(&["f:and", "w:and"])).expect("trained");
        let switch = model.keep_probability(&features(&["f:design", "w:design"])).expect("trained");
        assert!(keep > 0.8 && switch < 0.2, "keep {keep}, switch {switch}");
        // Unknown features leave the prior: 6 of 11 keep.
        let unknown = model.keep_probability(&features(&["w:zebra"])).expect("trained");
        assert!((unknown - 1.0 / (1.0 + (-(6.0f64 / 5.0).ln() * LOGIT_SCALE).exp())).abs() < 1e-12);
        assert_eq!(ContinuationModel::default().keep_probability(&features(&["f:and"])), None);
    }

    #[test]
    fn a_malformed_table_is_refused_naming_the_line_and_the_rule() {
        for (table, expected) in [
            ("", "empty table"),
            ("keep\t1\t1\n", "first line must start with"),
            ("#switchyard-continuation-model\tmany\t1\n", "the header's keep count must be a whole number"),
            ("#switchyard-continuation-model\t3\t3\nw:and\t1\n", "line 2's switch count must be a whole number"),
            ("#switchyard-continuation-model\t3\t3\n\t1\t1\n", "line 2: no feature"),
            ("#switchyard-continuation-model\t3\t3\nw:and\t4\t0\n", "line 2: a count above the header's"),
            ("#switchyard-continuation-model\t3\t3\nw:and\t-1\t0\n", "line 2's keep count must be a whole number"),
        ] {
            let err = ContinuationModel::parse(table).expect_err(table);
            assert!(err.contains(expected), "{table:?}: {err}");
        }
    }
}
