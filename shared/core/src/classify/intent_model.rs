//! The learned intent model: naive Bayes over labelled questions, beside the manifest's
//! vocabulary.
//!
//! The classifier of [`super`] learns from the manifest alone: a few dozen utterances and
//! keywords per intent. Questions worded unlike any of them ("Did the lunch-and-learns increase
//! TRx among dermatologists?", "Train a model to predict which HCPs will start writing
//! Fabhalta") were read by their incidental words ("learn", "predict", "among") and carried
//! into every follow-up of their conversation: most of the follow-up misses on unseen dialogues
//! were such first turns (docs/conversations.md). This model learns from the repository's
//! labelled questions, thousands of them, which words go with which intent: a multinomial-style
//! naive Bayes over the same terms the classifier reads (stems with the manifest's synonyms,
//! entities and numbers left out, and the pairs of adjacent stems). Its log posterior, times
//! [`WEIGHT`], is added to the classifier's log probabilities: `p(i) ∝ p_manifest(i) ·
//! p_model(i)^WEIGHT`.
//!
//! The model is a table of counts, `intent_model.tsv` beside this file: a header naming the
//! intents, a line with the number of training questions of each, then one line per term with
//! the number of training questions of each intent that contain it. It applies only to a
//! manifest with exactly the table's intents (the shipped `routing.yaml`); any other manifest
//! is classified by its own vocabulary alone. The table is trained from the labelled fixtures
//! by `SWITCHYARD_WRITE_INTENT_MODEL=1 cargo test -p switchyard-tests --test intent_model`, and
//! the same test fails when it differs from what the fixtures and the shipped manifest give, so
//! it cannot go stale; the test also reports the model's accuracy on each fixture group held
//! out of its training. It is compiled in and parsed when the first classifier is built (the
//! functions build theirs on their first question, not at start).

use super::{text_hash as hash, Map};

/// The shipped table (see the module docs).
static SHIPPED: &str = include_str!("intent_model.tsv");

/// Terms seen in fewer training questions than this are left out of the table.
pub const MIN_TERM_COUNT: u32 = 2;
/// The exponent of the model's posterior in the combination (module docs). Chosen by leaving
/// each fixture group out of training in turn, in an offline re-implementation of this model
/// (0.1, 0.2, 0.3 and 0.5 tried; 0.3 and 0.5 within a few questions of each other, the
/// gentler kept); `tests/intent_model.rs` reports the same cross-validation for the model as
/// built.
pub const WEIGHT: f64 = 0.3;
/// Additive smoothing of a term's rate within an intent.
const SMOOTHING: f64 = 0.5;
/// The header's first field.
const HEADER: &str = "#switchyard-intent-model";

/// Per term, the log rate of the term among each intent's training questions; per intent, the
/// log prior. Built from the counts by [`IntentModel::parse`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntentModel {
    intents: Vec<String>,
    log_prior: Vec<f64>,
    /// Term hash → row in `log_rates` (`intents.len()` values per row).
    rows: Map<u64, u32>,
    log_rates: Vec<f64>,
}

impl IntentModel {
    /// The model compiled into the binary, parsed on first use.
    pub fn shipped() -> &'static IntentModel {
        static MODEL: std::sync::LazyLock<IntentModel> = std::sync::LazyLock::new(|| {
            // The table is checked by tests/intent_model.rs; a broken one is a build defect, and
            // an empty model applies to no manifest.
            IntentModel::parse(SHIPPED).unwrap_or_default()
        });
        &MODEL
    }

    /// The intents the model was trained on, in its table's order.
    pub fn intents(&self) -> &[String] {
        &self.intents
    }

    /// Reads a table written by [`IntentModelTrainer::to_table`].
    pub fn parse(table: &str) -> Result<IntentModel, String> {
        let mut lines = table.lines();
        let header = lines.next().ok_or("intent model: empty table")?;
        let mut fields = header.split('\t');
        if fields.next() != Some(HEADER) {
            return Err(format!("intent model: the first line must start with {HEADER}"));
        }
        let intents: Vec<String> = fields.map(str::to_string).collect();
        if intents.is_empty() || intents.iter().any(String::is_empty) {
            return Err("intent model: the first line must name the intents after the header".into());
        }
        let k = intents.len();
        let counts = |line: &str, n: usize| -> Result<(String, Vec<u32>), String> {
            let mut fields = line.split('\t');
            let term =
                fields.next().filter(|f| !f.is_empty()).ok_or_else(|| format!("intent model line {n}: no term"))?;
            let values: Vec<u32> = fields
                .map(|f| f.parse().map_err(|_| format!("intent model line {n}: {f:?} is not a whole number")))
                .collect::<Result<_, _>>()?;
            if values.len() != k {
                return Err(format!("intent model line {n}: {} counts for {k} intents", values.len()));
            }
            Ok((term.to_string(), values))
        };
        let (label, docs) = counts(lines.next().ok_or("intent model: no line of question counts")?, 2)?;
        if label != "questions" {
            return Err("intent model line 2: must start with `questions`".into());
        }
        let total: f64 = docs.iter().map(|&d| f64::from(d)).sum();
        let log_prior = docs.iter().map(|&d| ((f64::from(d) + 1.0) / (total + k as f64)).ln()).collect();
        let mut rows = Map::default();
        let mut log_rates = Vec::new();
        for (n, line) in lines.enumerate() {
            let (term, values) = counts(line, n + 3)?;
            if values.iter().zip(&docs).any(|(v, d)| v > d) {
                return Err(format!("intent model line {}: a count above its intent's questions", n + 3));
            }
            rows.insert(hash(&term), (log_rates.len() / k) as u32);
            log_rates.extend(
                values
                    .iter()
                    .zip(&docs)
                    .map(|(&c, &d)| ((f64::from(c) + SMOOTHING) / (f64::from(d) + 2.0 * SMOOTHING)).ln()),
            );
        }
        Ok(IntentModel { intents, log_prior, rows, log_rates })
    }

    /// For each of `intents` (a manifest's, in its order), the model's column; `None` unless
    /// the model knows exactly these intents.
    pub(super) fn columns_for(&self, intents: &[String]) -> Option<Vec<usize>> {
        if self.intents.len() != intents.len() {
            return None;
        }
        intents.iter().map(|i| self.intents.iter().position(|m| m == i)).collect()
    }

    /// Multiplies `probabilities` (manifest order, through `columns`) by the model's posterior
    /// to the power `WEIGHT` for a question with these term hashes, and renormalises them. (The
    /// posterior's normalising constant cancels in the renormalisation, so it is never taken.)
    pub(super) fn weigh(&self, columns: &[usize], terms: impl Iterator<Item = u64>, probabilities: &mut [f64]) {
        let k = self.intents.len();
        let mut lp = self.log_prior.clone();
        for h in terms {
            if let Some(&row) = self.rows.get(&h) {
                let rates = &self.log_rates[row as usize * k..(row as usize + 1) * k];
                for (l, r) in lp.iter_mut().zip(rates) {
                    *l += r;
                }
            }
        }
        let max = lp.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut sum = 0.0;
        for (p, &column) in probabilities.iter_mut().zip(columns) {
            *p *= (WEIGHT * (lp[column] - max)).exp();
            sum += *p;
        }
        if sum > 0.0 {
            for p in probabilities.iter_mut() {
                *p /= sum;
            }
        }
    }
}

/// Counts labelled questions into an [`IntentModel`] table.
#[derive(Debug, Clone)]
pub struct IntentModelTrainer {
    intents: Vec<String>,
    questions: Vec<u32>,
    terms: std::collections::BTreeMap<String, Vec<u32>>,
}

impl IntentModelTrainer {
    /// A trainer for these intents (a manifest's).
    pub fn new(intents: &[String]) -> IntentModelTrainer {
        IntentModelTrainer {
            intents: intents.to_vec(),
            questions: vec![0; intents.len()],
            terms: std::collections::BTreeMap::new(),
        }
    }

    /// Counts one question of `intent` with its distinct terms
    /// ([`super::Classifier::intent_model_terms`]); an intent not given to `new` is refused.
    pub fn add(&mut self, intent: &str, terms: &[String]) -> Result<(), String> {
        let i = self
            .intents
            .iter()
            .position(|x| x == intent)
            .ok_or_else(|| format!("intent model: {intent:?} is not one of the trainer's intents"))?;
        self.questions[i] += 1;
        let k = self.intents.len();
        let mut seen: Vec<&String> = terms.iter().collect();
        seen.sort();
        seen.dedup();
        for term in seen {
            self.terms.entry(term.clone()).or_insert_with(|| vec![0; k])[i] += 1;
        }
        Ok(())
    }

    /// The model this table gives.
    pub fn model(&self) -> IntentModel {
        IntentModel::parse(&self.to_table()).unwrap_or_default()
    }

    /// The table (module docs): terms in byte order, those seen in fewer than
    /// [`MIN_TERM_COUNT`] questions left out.
    pub fn to_table(&self) -> String {
        let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join("\t");
        let mut out = format!("{HEADER}\t{}\nquestions\t{}\n", self.intents.join("\t"), join(&self.questions));
        for (term, counts) in &self.terms {
            if counts.iter().sum::<u32>() >= MIN_TERM_COUNT {
                out.push_str(&format!("{term}\t{}\n", join(counts)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_trained_table_parses_back_and_favours_the_intent_its_terms_were_seen_with() {
        let intents = names(&["a", "b"]);
        let mut t = IntentModelTrainer::new(&intents);
        for _ in 0..3 {
            t.add("a", &names(&["train", "model"])).unwrap();
            t.add("b", &names(&["predict", "model"])).unwrap();
        }
        t.add("b", &names(&["once"])).unwrap();
        let table = t.to_table();
        assert!(!table.contains("once"), "a term seen once is left out: {table}");
        let model = IntentModel::parse(&table).unwrap();
        let columns = model.columns_for(&names(&["b", "a"])).unwrap();
        assert_eq!(columns, vec![1, 0]);
        let mut p = vec![0.5, 0.5];
        model.weigh(&columns, [hash("train"), hash("model")].into_iter(), &mut p);
        assert!(p[1] > p[0], "'train' was seen with a only: {p:?}");
        assert!((p[0] + p[1] - 1.0).abs() < 1e-12, "renormalised: {p:?}");
        assert!(t.add("c", &[]).unwrap_err().contains("\"c\""));
    }

    #[test]
    fn the_model_applies_only_to_a_manifest_with_exactly_its_intents() {
        let model = IntentModel::parse("#switchyard-intent-model\ta\tb\nquestions\t1\t1\n").unwrap();
        assert!(model.columns_for(&names(&["a"])).is_none());
        assert!(model.columns_for(&names(&["a", "c"])).is_none());
        assert!(model.columns_for(&names(&["b", "a"])).is_some());
    }

    #[test]
    fn malformed_tables_are_refused_naming_the_line_and_the_rule() {
        for (table, expected) in [
            ("", "empty table"),
            ("#other\ta\n", "first line must start with"),
            ("#switchyard-intent-model\n", "name the intents"),
            ("#switchyard-intent-model\ta\tb\n", "no line of question counts"),
            ("#switchyard-intent-model\ta\tb\ncounts\t1\t1\n", "line 2: must start with `questions`"),
            ("#switchyard-intent-model\ta\tb\nquestions\t1\n", "line 2: 1 counts for 2 intents"),
            ("#switchyard-intent-model\ta\tb\nquestions\t1\t1\nx\t1\tz\n", "line 3: \"z\" is not a whole number"),
            ("#switchyard-intent-model\ta\tb\nquestions\t1\t1\nx\t2\t0\n", "line 3: a count above"),
            ("#switchyard-intent-model\ta\tb\nquestions\t1\t1\n\t1\t0\n", "line 3: no term"),
        ] {
            let err = IntentModel::parse(table).unwrap_err();
            assert!(err.contains(expected), "{table:?}: {err}");
        }
    }

    #[test]
    fn the_shipped_table_parses() {
        assert!(IntentModel::parse(SHIPPED).is_ok());
    }
}
