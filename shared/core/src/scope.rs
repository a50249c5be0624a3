//! Out-of-scope questions: the decision taken at intake and the polite reply that ends them.
//!
//! The embedded classifier gives every question a scope score ([`crate::classify`]): how much
//! of it the manifest's vocabulary and entities account for. Intake turns the score into a
//! [`ScopeCheck`] with [`check`] and records it with the query:
//! - at or above `classifier.scope.threshold`: in scope, routed as usual;
//! - within `classifier.scope.borderline` below it, when a cascaded classifier
//!   (`classifier.llm`) is configured: borderline — the query is flagged ambiguous so the
//!   cascade runs first, and it ends out of scope only if the cascade does not confirm an intent;
//! - otherwise out of scope: the router ends the query at once, `failed` with
//!   `final_reason: out_of_scope` and the reply of [`reply`], dispatching no agent. No role is
//!   checked: a question no intent covers cannot be forbidden.
//!
//! Pre-parsed queries carry the caller's own classification and get no scope check.

use switchyard_model::manifest::Manifest;
pub use switchyard_model::records::{ScopeCheck, ScopeDecision};

/// The decision for a classification under `manifest`'s scope settings: in scope when the
/// classifier says so (`in_scope`: its score reached the threshold, or the conversation kept a
/// follow-up such as "And in Q1?" in scope whatever its own score); otherwise borderline when a
/// cascade classifier is configured and `score` is within the band below the threshold, else
/// out of scope.
pub fn check(manifest: &Manifest, in_scope: bool, score: f64) -> ScopeCheck {
    let settings = &manifest.classifier.scope;
    let decision = if in_scope {
        ScopeDecision::InScope
    } else if manifest.classifier.llm.is_some()
        && settings.threshold > 0.0
        && score >= settings.threshold - settings.borderline
    {
        ScopeDecision::Borderline
    } else {
        ScopeDecision::OutOfScope
    };
    ScopeCheck { score, threshold: settings.threshold, decision }
}

/// The reply to an out-of-scope question: what this assistant can help with, one line per
/// intent, from the intents' descriptions (their ids when a description is empty).
pub fn reply(manifest: &Manifest) -> String {
    let mut text = String::from(
        "This question is outside what this assistant covers, so it was not sent to any agent. \
         It can help with:",
    );
    for intent in &manifest.intents {
        let name = intent.id.replace(['_', '-'], " ");
        let description = intent.description.trim();
        if description.is_empty() {
            text.push_str(&format!("\n- {name}"));
        } else {
            text.push_str(&format!("\n- {name}: {description}"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest::embedded().expect("the shipped manifest loads")
    }

    #[test]
    fn a_score_at_the_threshold_is_in_scope_and_below_it_out_of_scope_without_a_cascade() {
        let m = manifest();
        let t = m.classifier.scope.threshold;
        assert_eq!(check(&m, true, t).decision, ScopeDecision::InScope);
        assert_eq!(check(&m, false, t - 0.01).decision, ScopeDecision::OutOfScope);
        assert!(check(&m, false, 0.0).skips_role_check());
        assert!(!check(&m, true, 1.0).skips_role_check());
        // A follow-up the conversation keeps in scope ("And in Q1?": no word of its own).
        assert_eq!(check(&m, true, 0.0).decision, ScopeDecision::InScope);
    }

    #[test]
    fn with_a_cascade_the_band_below_the_threshold_is_borderline() {
        let mut m = manifest();
        m.classifier.llm = Some("explainer".into());
        let t = m.classifier.scope.threshold;
        let b = m.classifier.scope.borderline;
        assert_eq!(check(&m, false, t - b / 2.0).decision, ScopeDecision::Borderline);
        assert_eq!(check(&m, false, t - b - 0.01).decision, ScopeDecision::OutOfScope);
    }

    #[test]
    fn the_reply_lists_every_intent_with_its_description() {
        let m = manifest();
        let text = reply(&m);
        for intent in &m.intents {
            assert!(text.contains(intent.description.trim()), "{text}");
        }
        assert!(text.contains("- causal impact: "), "{text}");
    }
}
