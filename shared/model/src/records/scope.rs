//! The scope decision intake records with a query.

use serde::{Deserialize, Serialize};

/// The scope decision recorded with a query at intake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeDecision {
    /// Routed as usual.
    InScope,
    /// Sent to the cascaded classifier before it is rejected.
    Borderline,
    /// Ended without an agent.
    OutOfScope,
}

/// The scope score of a query and what intake decided from it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScopeCheck {
    /// The classifier's scope score, 0.0 – 1.0.
    pub score: f64,
    /// The manifest's `classifier.scope.threshold` when it was checked.
    pub threshold: f64,
    /// The decision.
    pub decision: ScopeDecision,
}

impl ScopeCheck {
    /// Whether the router ends the query without routing it.
    pub fn is_out_of_scope(&self) -> bool {
        self.decision == ScopeDecision::OutOfScope
    }

    /// Whether the query is routed without its caller's roles checked first (the cascade or
    /// the out-of-scope ending decides; a question no intent covers cannot be forbidden).
    pub fn skips_role_check(&self) -> bool {
        self.decision != ScopeDecision::InScope
    }
}
