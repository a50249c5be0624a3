//! # switchyard-intents
//!
//! The trained router: which intent a question has, and whether any intent has it at all,
//! learned ahead from a manifest's own examples with one method for every manifest.
//!
//! A question becomes hashed word and character n-grams ([`features`]); one linear model per
//! intent (an SVM, or a logistic regression) scores it ([`svm`]); the best score below a
//! threshold means "no intent": out of scope. The threshold is calibrated by cross-validation
//! on the manifest's own examples ([`Router::train`]), so that only a chosen share of held-out
//! in-scope questions fall below it: a customer wrongly refused is worse than a fallback
//! answer. Training happens ahead of time; a function loads the result ([`artifact`]) at init.
//!
//! # Layout
//!
//! - [`features`]: text → sparse hashed features.
//! - [`svm`]: one-vs-rest linear SVMs and logistic regressions by dual coordinate descent.
//! - [`artifact`]: the trained router as bytes, with the manifest's hash and the trainer's
//!   version.
#![warn(missing_docs)]

pub mod artifact;
pub mod features;
pub mod svm;

pub use features::{featurize, featurize_with, Embedder, FeatureSpec, Sparse};
pub use svm::{Compact, Loss, SvmSpec, Weights};

/// Labelled examples to learn from: texts with their intent, and texts of no intent.
#[derive(Debug, Clone, Default)]
pub struct TrainingSet {
    /// The intents, in the order their ids are used.
    pub intents: Vec<String>,
    /// `(text, intent index)`.
    pub examples: Vec<(String, usize)>,
    /// Questions no intent answers (everyday off-domain questions, the manifest's negative
    /// examples): learnt as one more class, "none of them". Empty: no such class.
    pub background: Vec<String>,
}

/// The general background of off-domain questions the repository ships: everyday questions
/// (science, cooking, sport, trivia) and what people ask of a personal assistant (timers,
/// music, weather, messages, scores) that no business assistant answers. A router
/// learns them as "none of the intents", so a fresh manifest refuses what is plainly not its
/// business without any hand-written list.
pub const BACKGROUND: &str = include_str!("../background.txt");

/// [`BACKGROUND`], one question per line.
pub fn background() -> impl Iterator<Item = &'static str> {
    BACKGROUND.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// How many lines of [`noise`] a router learns as background.
pub const NOISE_LINES: usize = 160;

/// Text that is no question at all, made up the same way every time: keyboard mashes, one
/// letter repeated, runs of digits, symbols. Learnt as background, so that what no class has
/// seen does not fall to whichever intent has the largest bias.
pub fn noise() -> Vec<String> {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
    const SYMBOLS: &[&str] = &["?", "!", "...", "{}", "[]", "//", ";", "--", "==", "%s", "<>", "@@", "#", "*"];
    let mut out = Vec::with_capacity(NOISE_LINES);
    for line in 0..NOISE_LINES {
        let words = 1 + next(4) as usize;
        let mut text = Vec::with_capacity(words);
        for _ in 0..words {
            let word: String = match line % 4 {
                // A mash of letters.
                0 | 1 => (0..2 + next(9)).map(|_| LETTERS[next(26) as usize] as char).collect(),
                // One letter, repeated.
                2 => std::iter::repeat_n(LETTERS[next(26) as usize] as char, 2 + next(14) as usize).collect(),
                // Digits or symbols.
                _ if next(2) == 0 => (0..1 + next(6)).map(|_| char::from(b'0' + next(10) as u8)).collect(),
                _ => SYMBOLS[next(SYMBOLS.len() as u64) as usize].to_string(),
            };
            text.push(word);
        }
        out.push(text.join(" "));
    }
    out
}

/// How the router is trained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainSpec {
    /// Features.
    pub features: FeatureSpec,
    /// The linear models (a linear SVM unless told otherwise).
    pub svm: SvmSpec,
    /// Folds of the cross-validation that places the threshold (0: no threshold); a set of
    /// at most [`SMALL_SET`] intent examples gets [`SMALL_SET_FOLDS`], so that each held-out
    /// example is scored by a model nearly as well taught as the final one.
    pub folds: usize,
    /// Share of held-out in-scope examples the threshold may refuse.
    pub refuse_budget: f32,
    /// Cost of refusing one in-scope question, in accepted off-domain questions (rates: a
    /// share of held-out in-scope examples refused against a share of background let in).
    pub refusal_cost: f32,
    /// Classes trained at once.
    pub threads: usize,
}

impl Default for TrainSpec {
    fn default() -> Self {
        TrainSpec {
            features: FeatureSpec::default(),
            svm: SvmSpec::default(),
            folds: 5,
            refuse_budget: 0.05,
            refusal_cost: REFUSAL_COST,
            threads: 2,
        }
    }
}

/// The most intent examples a set may have to be cross-validated with [`SMALL_SET_FOLDS`].
pub const SMALL_SET: usize = 1_000;
/// Folds for a small set.
pub const SMALL_SET_FOLDS: usize = 10;

/// A trained router.
#[derive(Debug, Clone, PartialEq)]
pub struct Router {
    /// The intents.
    pub intents: Vec<String>,
    /// How texts become features.
    pub features: FeatureSpec,
    /// The linear models, as shipped.
    pub weights: Compact,
    /// A best score less the background's below this is out of scope.
    pub threshold: f32,
    /// Whether the last class of `weights` is the background ("none of the intents").
    pub background: bool,
    /// Softmax temperature of the intents' scores, fitted on held-out examples.
    pub temperature: f32,
    /// The embedding of the dense block ([`Embedder::name`]); empty without one.
    pub embedding: String,
}

/// Where a question goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// The best intent's index.
    pub intent: usize,
    /// Its score (the SVM's margin, or the logistic model's log-odds).
    pub score: f32,
    /// Its lead over the second best.
    pub margin: f32,
    /// The best intent's score less the background's (the score without a background).
    pub scope_margin: f32,
    /// Whether the score's lead over the background class reached the threshold.
    pub in_scope: bool,
    /// Per intent, the probability that it is the one (softmax of the scores at the fitted
    /// temperature; the background class is not among them).
    pub probabilities: Vec<f32>,
}

/// Why a router cannot be trained.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TrainError {
    /// No intent, or one intent and no background to tell it from.
    #[error("a router needs two intents, or one and background questions; got {0} intent(s)")]
    TooFewIntents(usize),
    /// An intent with no example.
    #[error("intent `{0}` has no example to learn from")]
    NoExamples(String),
}

impl Router {
    /// Learn from `set` by n-grams alone; the threshold comes from cross-validation.
    pub fn train(set: &TrainingSet, spec: &TrainSpec) -> Result<Router, TrainError> {
        Router::train_with(set, spec, None)
    }

    /// Learn from `set`, with `embedder`'s vectors as a dense block when given (its dimensions
    /// and `spec.features.dense_weight`); the threshold comes from cross-validation.
    pub fn train_with(
        set: &TrainingSet,
        spec: &TrainSpec,
        embedder: Option<&dyn Embedder>,
    ) -> Result<Router, TrainError> {
        let k = set.intents.len();
        if k == 0 || (k == 1 && set.background.is_empty()) {
            return Err(TrainError::TooFewIntents(k));
        }
        let mut seen = vec![false; k];
        for (_, label) in &set.examples {
            seen[*label] = true;
        }
        if let Some(missing) = seen.iter().position(|s| !s) {
            return Err(TrainError::NoExamples(set.intents[missing].clone()));
        }
        let mut features = spec.features;
        features.dense_dims = embedder.map_or(0, |e| e.dims() as u32);
        let featurize = |t: &str| featurize_with(t, &features, embedder.and_then(|e| e.embed(t)).as_deref());
        let mut xs: Vec<Sparse> = set.examples.iter().map(|(t, _)| featurize(t)).collect();
        let mut labels: Vec<usize> = set.examples.iter().map(|(_, l)| *l).collect();
        let background = !set.background.is_empty();
        for text in &set.background {
            xs.push(featurize(text));
            labels.push(k);
        }
        let classes = k + usize::from(background);
        let dim = (1usize << features.hash_bits) + features.dense_dims as usize;
        let weights = example_weights(&labels, k);
        let trained = svm::train(&xs, &labels, &weights, classes, dim, &spec.svm, spec.threads).compact();
        let (threshold, temperature) = if spec.folds >= 2 {
            calibrate(&xs, &labels, &weights, k, classes, dim, spec)
        } else {
            (f32::NEG_INFINITY, 1.0)
        };
        let weights = trained;
        Ok(Router {
            intents: set.intents.clone(),
            features,
            weights,
            threshold,
            background,
            temperature,
            embedding: embedder.map(|e| e.name().to_string()).unwrap_or_default(),
        })
    }

    /// Route one question by its n-grams (a router with a dense block reads it as zero: use
    /// [`Router::route_with`]).
    pub fn route(&self, text: &str) -> Routed {
        self.route_with(text, None)
    }

    /// Route one question with its dense vector (from the embedder the router was trained with).
    pub fn route_with(&self, text: &str, dense: Option<&[f32]>) -> Routed {
        let scores = self.weights.scores(&featurize_with(text, &self.features, dense));
        let k = self.intents.len();
        let (best, second) = best_two(&scores[..k]);
        let score = scores[best];
        Routed {
            intent: best,
            score,
            margin: score - second,
            scope_margin: scope_margin(&scores, k),
            in_scope: scope_margin(&scores, k) >= self.threshold,
            probabilities: softmax(&scores[..k], self.temperature),
        }
    }
}

/// Each example's weight: 1 for the intents' examples; the background's share their weight so
/// that the background weighs no more than the intents together (a manifest of twenty
/// utterances is not drowned by hundreds of off-domain questions), and no less than
/// [`MIN_BACKGROUND_WEIGHT`] each.
fn example_weights(labels: &[usize], k: usize) -> Vec<f32> {
    let intents = labels.iter().filter(|&&l| l < k).count() as f32;
    let background = labels.len() as f32 - intents;
    let per_intent = intents / k.max(1) as f32;
    let each = if background > 0.0 {
        (BACKGROUND_SHARE * per_intent / background).clamp(MIN_BACKGROUND_WEIGHT, 1.0)
    } else {
        1.0
    };
    labels.iter().map(|&l| if l < k { 1.0 } else { each }).collect()
}

/// The least weight of one background example.
pub const MIN_BACKGROUND_WEIGHT: f32 = 0.002;
/// The background's total weight, in intents: it weighs as much as this many average intents.
pub const BACKGROUND_SHARE: f32 = 3.0;

/// How far the best intent's score is above the background class's (above zero without
/// one): what the threshold is placed on.
fn scope_margin(scores: &[f32], k: usize) -> f32 {
    let best = scores[..k].iter().copied().fold(f32::NEG_INFINITY, f32::max);
    best - scores.get(k).copied().unwrap_or(0.0)
}

/// The index of the best score and the second best score.
fn best_two(scores: &[f32]) -> (usize, f32) {
    let (mut best, mut second) = (0usize, f32::NEG_INFINITY);
    for (i, &s) in scores.iter().enumerate() {
        if s > scores[best] {
            second = scores[best];
            best = i;
        } else if i != best && s > second {
            second = s;
        }
    }
    (best, second)
}

/// Softmax of `scores / temperature`.
fn softmax(scores: &[f32], temperature: f32) -> Vec<f32> {
    let t = if temperature > 0.0 { temperature } else { 1.0 };
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = scores.iter().map(|s| ((s - max) / t).exp()).collect();
    let sum: f32 = exps.iter().sum();
    exps.into_iter().map(|e| e / sum).collect()
}

/// Cost of refusing one in-scope question, in accepted off-domain questions.
pub const REFUSAL_COST: f32 = 10.0;

/// The threshold on the scope margin, from held-out margins of in-scope examples (`kept`) and
/// of background ones (`off`): the one with the least cost, [`REFUSAL_COST`] per in-scope
/// example refused and 1 per background example let in, among those refusing at most
/// `budget` of the in-scope examples. Without background, the `budget` quantile of `kept`.
fn place_threshold(kept: &mut [f32], off: &mut [f32], budget: f32, refusal_cost: f32) -> f32 {
    kept.sort_by(f32::total_cmp);
    off.sort_by(f32::total_cmp);
    let most_refused = ((kept.len() as f32) * budget).floor() as usize;
    let quantile = kept.get(most_refused).copied().unwrap_or(f32::NEG_INFINITY);
    if off.is_empty() || kept.is_empty() {
        return quantile;
    }
    let (n_in, n_off) = (kept.len() as f32, off.len() as f32);
    let mut best = (f32::INFINITY, quantile);
    for &t in kept.iter().take(most_refused + 1).chain(off.iter().filter(|&&m| m <= quantile)) {
        let refused = kept.partition_point(|&m| m < t) as f32;
        let let_in = (off.len() - off.partition_point(|&m| m < t)) as f32;
        let cost = refusal_cost * refused / n_in + let_in / n_off;
        if refused as usize <= most_refused && cost < best.0 {
            best = (cost, t);
        }
    }
    best.1
}

/// The threshold and the temperature, from `spec.folds`-fold cross-validation: each
/// example is scored by a router trained on the other folds. The threshold is the
/// `refuse_budget` quantile of the held-out in-scope examples' scope margins (best intent
/// score less the background's): it refuses what the background takes and what scores weakly,
/// but never more than the budget of in-scope examples; the temperature is the one under
/// which the held-out intents' softmax gives the true intents the highest likelihood.
fn calibrate(
    xs: &[Sparse],
    labels: &[usize],
    weights: &[f32],
    k: usize,
    classes: usize,
    dim: usize,
    spec: &TrainSpec,
) -> (f32, f32) {
    let intents = labels.iter().filter(|&&l| l < k).count();
    let folds = if intents <= SMALL_SET { spec.folds.max(SMALL_SET_FOLDS) } else { spec.folds };
    let mut kept = Vec::with_capacity(xs.len());
    let mut off = Vec::new();
    let mut held_out: Vec<(usize, Vec<f32>)> = Vec::with_capacity(xs.len());
    for fold in 0..folds {
        let train: Vec<usize> = (0..xs.len()).filter(|i| i % folds != fold).collect();
        let test: Vec<usize> = (0..xs.len()).filter(|i| i % folds == fold).collect();
        let txs: Vec<Sparse> = train.iter().map(|&i| xs[i].clone()).collect();
        let tls: Vec<usize> = train.iter().map(|&i| labels[i]).collect();
        let tws: Vec<f32> = train.iter().map(|&i| weights[i]).collect();
        let w = svm::train(&txs, &tls, &tws, classes, dim, &spec.svm, spec.threads).compact();
        for &i in &test {
            let scores = w.scores(&xs[i]);
            if labels[i] < k {
                kept.push(scope_margin(&scores, k));
                held_out.push((labels[i], scores[..k].to_vec()));
            } else {
                off.push(scope_margin(&scores, k));
            }
        }
    }
    let threshold = place_threshold(&mut kept, &mut off, spec.refuse_budget, spec.refusal_cost);
    let nll = |t: f32| -> f32 { held_out.iter().map(|(truth, s)| -softmax(s, t)[*truth].max(1e-9).ln()).sum::<f32>() };
    let temperature = (0..60).map(|step| 0.02 * 1.12f32.powi(step)).min_by(|a, b| nll(*a).total_cmp(&nll(*b)));
    (threshold, temperature.unwrap_or(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> TrainingSet {
        let intents = vec!["weather".to_string(), "flights".to_string(), "balance".to_string()];
        let ex = [
            ("what's the weather like today", 0),
            ("will it rain tomorrow", 0),
            ("is it going to be sunny this weekend", 0),
            ("how cold is it outside", 0),
            ("book me a flight to paris", 1),
            ("i need a plane ticket to rome", 1),
            ("find flights from boston to denver", 1),
            ("can you book a flight for friday", 1),
            ("what's my account balance", 2),
            ("how much money do i have in checking", 2),
            ("show my savings balance", 2),
            ("how much is left in my account", 2),
        ];
        TrainingSet { intents, examples: ex.iter().map(|(t, l)| (t.to_string(), *l)).collect(), background: Vec::new() }
    }

    #[test]
    fn a_router_learns_three_intents_and_routes_new_wordings() {
        let router = Router::train(&toy(), &TrainSpec { folds: 0, ..TrainSpec::default() }).expect("trains");
        for (q, want) in [("rain later?", 0), ("flight to tokyo please", 1), ("checking account balance", 2)] {
            assert_eq!(router.intents[router.route(q).intent], router.intents[want], "{q}");
        }
    }

    #[test]
    fn the_threshold_refuses_at_most_the_budget_of_held_out_examples() {
        let spec = TrainSpec { folds: 4, refuse_budget: 0.25, ..TrainSpec::default() };
        let router = Router::train(&toy(), &spec).expect("trains");
        assert!(router.threshold.is_finite());
        let set = toy();
        let refused = set.examples.iter().filter(|(t, _)| !router.route(t).in_scope).count();
        assert!(refused <= 3, "{refused} of 12 training examples refused");
    }

    #[test]
    fn the_background_class_refuses_what_no_intent_answers() {
        let mut set = toy();
        set.background = background().map(str::to_string).chain(noise()).collect();
        let router = Router::train(&set, &TrainSpec::default()).expect("trains");
        assert!(router.background && router.weights.classes == 4);
        // Four examples per intent are too few to refuse any held-out one within the budget:
        // the threshold sits below them all, and what it refuses is left to larger sets
        // (`one_intent_is_told_from_the_background`, the manifests' own tests).
        assert!(router.threshold.is_finite());
        for q in ["will it snow tomorrow", "book a flight to oslo", "what's the balance of my account"] {
            let routed = router.route(q);
            assert!(routed.in_scope, "{q}: {routed:?}");
            let total: f32 = routed.probabilities.iter().sum();
            assert!((total - 1.0).abs() < 1e-4 && routed.probabilities[routed.intent] > 0.34, "{routed:?}");
        }
    }

    #[test]
    fn a_set_without_examples_for_an_intent_is_refused_by_name() {
        let mut set = toy();
        set.intents.push("greeting".into());
        assert_eq!(Router::train(&set, &TrainSpec::default()), Err(TrainError::NoExamples("greeting".into())));
        let one = TrainingSet { intents: vec!["only".into()], ..TrainingSet::default() };
        assert_eq!(Router::train(&one, &TrainSpec::default()), Err(TrainError::TooFewIntents(1)));
        assert_eq!(Router::train(&TrainingSet::default(), &TrainSpec::default()), Err(TrainError::TooFewIntents(0)));
    }

    #[test]
    fn one_intent_is_told_from_the_background() {
        let set = TrainingSet {
            intents: vec!["annual_reports".into()],
            examples: [
                "what did the annual report say about revenue",
                "summarise the 2022 annual report",
                "which risks does the annual report list",
                "what were the operating costs in last year's report",
                "how much did the company invest according to the report",
            ]
            .iter()
            .map(|t| (t.to_string(), 0))
            .collect(),
            background: background().map(str::to_string).chain(noise()).collect(),
        };
        let router = Router::train(&set, &TrainSpec::default()).expect("one intent and a background train");
        assert_eq!(router.route("what does the 2023 annual report say about energy investment").probabilities, [1.0]);
        assert!(router.route("what did the annual report say about debt").in_scope);
        assert!(!router.route("how do i bake sourdough bread").in_scope);
    }
}
