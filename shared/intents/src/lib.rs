//! # switchyard-intents
//!
//! The trained router: which intent a question has, and whether any intent has it at all,
//! learned ahead from a manifest's own examples with one method for every manifest.
//!
//! A question becomes hashed word and character n-grams ([`features`]); one linear SVM per
//! intent scores it ([`svm`]); the best score below a threshold means "no intent": out of
//! scope. The threshold is calibrated by cross-validation on the manifest's own examples
//! ([`Router::train`]), so that only a chosen share of held-out in-scope questions fall below
//! it: a customer wrongly refused is worse than a fallback answer. Training happens ahead of
//! time; a function loads the result ([`artifact`]) at init.
//!
//! # Layout
//!
//! - [`features`]: text → sparse hashed features.
//! - [`svm`]: one-vs-rest linear SVMs by dual coordinate descent.
//! - [`artifact`]: the trained router as bytes, with the manifest's hash and the trainer's
//!   version.
#![warn(missing_docs)]

pub mod artifact;
pub mod features;
pub mod svm;

pub use features::{featurize, FeatureSpec, Sparse};
pub use svm::{Compact, SvmSpec, Weights};

/// Labelled examples to learn from: texts with their intent.
#[derive(Debug, Clone, Default)]
pub struct TrainingSet {
    /// The intents, in the order their ids are used.
    pub intents: Vec<String>,
    /// `(text, intent index)`.
    pub examples: Vec<(String, usize)>,
}

/// How the router is trained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainSpec {
    /// Features.
    pub features: FeatureSpec,
    /// The SVMs.
    pub svm: SvmSpec,
    /// Folds of the cross-validation that places the threshold (0: no threshold).
    pub folds: usize,
    /// Share of held-out in-scope examples the threshold may refuse.
    pub refuse_budget: f32,
    /// Classes trained at once.
    pub threads: usize,
}

impl Default for TrainSpec {
    fn default() -> Self {
        TrainSpec {
            features: FeatureSpec::default(),
            svm: SvmSpec::default(),
            folds: 5,
            refuse_budget: 0.02,
            threads: 2,
        }
    }
}

/// A trained router.
#[derive(Debug, Clone, PartialEq)]
pub struct Router {
    /// The intents.
    pub intents: Vec<String>,
    /// How texts become features.
    pub features: FeatureSpec,
    /// The SVMs, as shipped.
    pub weights: Compact,
    /// A best score below this is out of scope.
    pub threshold: f32,
}

/// Where a question goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// The best intent's index.
    pub intent: usize,
    /// Its score (SVM margin).
    pub score: f32,
    /// Its lead over the second best.
    pub margin: f32,
    /// Whether the score reached the threshold.
    pub in_scope: bool,
}

/// Why a router cannot be trained.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TrainError {
    /// Fewer than two intents.
    #[error("a router needs at least two intents, got {0}")]
    TooFewIntents(usize),
    /// An intent with no example.
    #[error("intent `{0}` has no example to learn from")]
    NoExamples(String),
}

impl Router {
    /// Learn from `set`; the threshold comes from `spec.folds`-fold cross-validation.
    pub fn train(set: &TrainingSet, spec: &TrainSpec) -> Result<Router, TrainError> {
        let k = set.intents.len();
        if k < 2 {
            return Err(TrainError::TooFewIntents(k));
        }
        let mut seen = vec![false; k];
        for (_, label) in &set.examples {
            seen[*label] = true;
        }
        if let Some(missing) = seen.iter().position(|s| !s) {
            return Err(TrainError::NoExamples(set.intents[missing].clone()));
        }
        let xs: Vec<Sparse> = set.examples.iter().map(|(t, _)| featurize(t, &spec.features)).collect();
        let labels: Vec<usize> = set.examples.iter().map(|(_, l)| *l).collect();
        let dim = 1usize << spec.features.hash_bits;
        let weights = svm::train(&xs, &labels, k, dim, &spec.svm, spec.threads).compact();
        let threshold = if spec.folds >= 2 { calibrate(&xs, &labels, k, dim, spec) } else { f32::NEG_INFINITY };
        Ok(Router { intents: set.intents.clone(), features: spec.features, weights, threshold })
    }

    /// Route one question.
    pub fn route(&self, text: &str) -> Routed {
        let scores = self.weights.scores(&featurize(text, &self.features));
        let (mut best, mut second) = (0usize, f32::NEG_INFINITY);
        for (i, &s) in scores.iter().enumerate() {
            if s > scores[best] {
                second = scores[best];
                best = i;
            } else if i != best && s > second {
                second = s;
            }
        }
        let score = scores[best];
        Routed { intent: best, score, margin: score - second, in_scope: score >= self.threshold }
    }
}

/// The threshold: the `refuse_budget` quantile of the best scores of held-out in-scope
/// examples, each scored by a router trained on the other folds.
fn calibrate(xs: &[Sparse], labels: &[usize], k: usize, dim: usize, spec: &TrainSpec) -> f32 {
    let folds = spec.folds;
    let mut held_out_scores = Vec::with_capacity(xs.len());
    for fold in 0..folds {
        let train: Vec<usize> = (0..xs.len()).filter(|i| i % folds != fold).collect();
        let test: Vec<usize> = (0..xs.len()).filter(|i| i % folds == fold).collect();
        let txs: Vec<Sparse> = train.iter().map(|&i| xs[i].clone()).collect();
        let tls: Vec<usize> = train.iter().map(|&i| labels[i]).collect();
        let w = svm::train(&txs, &tls, k, dim, &spec.svm, spec.threads).compact();
        for &i in &test {
            let best = w.scores(&xs[i]).into_iter().fold(f32::NEG_INFINITY, f32::max);
            held_out_scores.push(best);
        }
    }
    held_out_scores.sort_by(f32::total_cmp);
    let at = ((held_out_scores.len() as f32) * spec.refuse_budget).floor() as usize;
    held_out_scores.get(at).copied().unwrap_or(f32::NEG_INFINITY)
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
        TrainingSet { intents, examples: ex.iter().map(|(t, l)| (t.to_string(), *l)).collect() }
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
    fn a_set_without_examples_for_an_intent_is_refused_by_name() {
        let mut set = toy();
        set.intents.push("greeting".into());
        assert_eq!(Router::train(&set, &TrainSpec::default()), Err(TrainError::NoExamples("greeting".into())));
        let one = TrainingSet { intents: vec!["only".into()], ..TrainingSet::default() };
        assert_eq!(Router::train(&one, &TrainSpec::default()), Err(TrainError::TooFewIntents(1)));
    }
}
