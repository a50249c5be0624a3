//! Temporary keyword classifier; replaced by the embedded classifier branch.
use crate::contracts::ParsedEntity;
use crate::manifest::Manifest;
use serde::Serialize;

/// A ranked alternative.
#[derive(Debug, Clone, Serialize)]
pub struct Alternative {
    /// Intent.
    pub intent: String,
    /// Score.
    pub score: f64,
}

/// Result.
#[derive(Debug, Clone, Serialize)]
pub struct Classification {
    /// Intent.
    pub intent: String,
    /// Confidence.
    pub confidence: f64,
    /// Ambiguous.
    pub ambiguity_flag: bool,
    /// Alternatives.
    pub alternatives: Vec<Alternative>,
    /// Entities.
    pub entities: Vec<ParsedEntity>,
}

/// Classifier.
#[derive(Debug, Clone)]
pub struct Classifier {
    intents: Vec<(String, Vec<String>)>,
}

impl Classifier {
    /// Build.
    pub fn new(m: &Manifest) -> Classifier {
        Classifier {
            intents: m.intents.iter().map(|i| (i.id.clone(), i.keywords.iter().map(|k| k.to_lowercase()).collect())).collect(),
        }
    }
    /// Classify.
    pub fn classify(&self, text: &str) -> Classification {
        let t = text.to_lowercase();
        let mut best = (self.intents[0].0.clone(), 0usize);
        for (id, kws) in &self.intents {
            let n = kws.iter().filter(|k| t.contains(k.as_str())).count();
            if n > best.1 {
                best = (id.clone(), n);
            }
        }
        Classification { intent: best.0, confidence: if best.1 > 0 { 0.9 } else { 0.1 }, ambiguity_flag: best.1 == 0, alternatives: vec![], entities: vec![] }
    }
}
