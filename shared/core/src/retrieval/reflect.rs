//! The RAG manager design's reflection: after synthesis, the answer is scored against the original question
//! (weight 0.70) and the planner's revised query (0.30), and two notes for the UI are written:
//! `applicability_note` (does the answer address what was asked) and `uncertainty_note` (what
//! it rests on and what could make it wrong).
//!
//! The score is lexical and deterministic — the share of each query's search terms found in
//! the answer and the passages it cites — so the same answer always gets the same notes; it
//! is the offline reflection, playing the role a model at temperature 0.0 plays in the seed.

use super::terms::distinct_terms;
pub use switchyard_model::contracts::Reflection;

/// What the answer rests on.
#[derive(Debug, Clone, Default)]
pub struct Grounds<'a> {
    /// Texts of the cited passages.
    pub passages: Vec<&'a str>,
    /// Years of the cited documents (where known).
    pub years: Vec<i32>,
    /// Distinct documents cited.
    pub documents: usize,
    /// Retrieval settings that found too little before the one used.
    pub fallbacks: Vec<String>,
    /// `explicit` when the caller chose years.
    pub requested_years: Vec<i32>,
}

/// Reflect on `answer`.
pub fn reflect(
    question: &str,
    revised: Option<&str>,
    answer: &str,
    grounds: &Grounds<'_>,
    weights: (f64, f64),
) -> Reflection {
    let mut haystack: Vec<String> = distinct_terms(answer);
    for p in &grounds.passages {
        haystack.extend(distinct_terms(p));
    }
    haystack.sort();
    haystack.dedup();
    let cover = |q: &str| -> (f64, Vec<String>) {
        let t = distinct_terms(q);
        if t.is_empty() {
            return (0.0, vec![]);
        }
        let missing: Vec<String> = t.iter().filter(|x| haystack.binary_search(x).is_err()).cloned().collect();
        (1.0 - missing.len() as f64 / t.len() as f64, missing)
    };
    let (original_score, missing_original) = cover(question);
    let (revised_score, missing_revised) = match revised.filter(|r| !r.trim().is_empty()) {
        Some(r) => cover(r),
        None => (original_score, vec![]),
    };
    let (wo, wr) = weights;
    let total = if wo + wr > 0.0 { wo + wr } else { 1.0 };
    let score = (wo * original_score + wr * revised_score) / total;
    let applicability_note = if grounds.passages.is_empty() || answer.trim().is_empty() {
        "No passage of the corpus supports an answer, so the reply does not apply to the question.".to_string()
    } else if score >= 0.8 {
        "The answer addresses the question directly: every part of it is covered by the cited passages.".to_string()
    } else if missing_original.is_empty() {
        format!(
            "The answer addresses the question as asked; the cited passages do not cover the planner's wider reading of it ({}).",
            missing_revised.join(", ")
        )
    } else if score >= 0.5 {
        format!(
            "The answer addresses the question in part; the cited passages say nothing about: {}.",
            missing_original.join(", ")
        )
    } else {
        format!("The answer may not apply: the cited passages do not cover {}.", missing_original.join(", "))
    };
    let mut notes: Vec<String> = Vec::new();
    let mut years = grounds.years.clone();
    years.sort();
    years.dedup();
    notes.push(match (years.first(), years.last()) {
        (Some(a), Some(b)) if a != b => format!(
            "Based on {} passage(s) from {} document(s) dated {a}–{b}; where they differ, the newer figures may supersede the older.",
            grounds.passages.len(),
            grounds.documents
        ),
        (Some(a), _) => {
            format!("Based on {} passage(s) from {} document(s) of {a}.", grounds.passages.len(), grounds.documents)
        }
        _ => format!("Based on {} passage(s) with no date.", grounds.passages.len()),
    });
    if !grounds.requested_years.is_empty() {
        notes.push(format!("Limited to the requested years {:?}.", grounds.requested_years));
    }
    if !grounds.fallbacks.is_empty() {
        notes.push(format!(
            "The stricter retrieval settings ({}) found too little, so looser matches were used.",
            grounds.fallbacks.join(", ")
        ));
    }
    let flagged = ["preliminary", "restated", "unaudited", "estimate"];
    let marked: Vec<&str> =
        flagged.iter().copied().filter(|w| grounds.passages.iter().any(|p| p.to_lowercase().contains(w))).collect();
    if !marked.is_empty() {
        notes.push(format!("Some cited figures are marked {}.", marked.join(" or ")));
    }
    if score < 0.5 {
        notes.push("Low coverage of the question: treat the answer as a lead, not a conclusion.".into());
    }
    Reflection {
        score,
        original_score,
        revised_score,
        original_weight: wo,
        revised_weight: wr,
        applicability_note,
        uncertainty_note: notes.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grounds<'a>(passages: Vec<&'a str>, years: Vec<i32>) -> Grounds<'a> {
        let documents = passages.len();
        Grounds { passages, years, documents, ..Default::default() }
    }

    #[test]
    fn the_original_question_weighs_seventy_percent_and_the_revised_query_thirty() {
        // question terms: revenu, segment (both covered) → 1.0
        // revised terms: revenu, margin, europ, 2024 → revenu covered → 0.25
        let g = grounds(vec!["Revenue by segment rose."], vec![2024]);
        let r = reflect("revenue by segment", Some("revenue margin europe 2024"), "Revenue rose.", &g, (0.7, 0.3));
        assert!((r.original_score - 1.0).abs() < 1e-9);
        assert!((r.revised_score - 0.25).abs() < 1e-9);
        assert!((r.score - (0.7 + 0.3 * 0.25)).abs() < 1e-9, "{}", r.score);
        assert!(
            r.applicability_note.starts_with("The answer addresses the question as asked"),
            "{}",
            r.applicability_note
        );
        assert!(r.applicability_note.contains("(2024, europ, margin)"), "{}", r.applicability_note);
        let r = reflect("revenue by segment", Some("segment revenue"), "Revenue rose.", &g, (0.7, 0.3));
        assert!(
            r.applicability_note.starts_with("The answer addresses the question directly"),
            "{}",
            r.applicability_note
        );
    }

    #[test]
    fn missing_terms_and_fallbacks_show_in_the_notes() {
        let mut g = grounds(vec!["Services revenue rose 18%, preliminary figures."], vec![2023, 2024]);
        g.fallbacks = vec!["hybrid_strict".into()];
        let r = reflect("services revenue and headcount in asia", None, "Services revenue rose 18%.", &g, (0.7, 0.3));
        assert!(r.applicability_note.contains("headcount"), "{}", r.applicability_note);
        assert!(r.uncertainty_note.contains("dated 2023–2024"), "{}", r.uncertainty_note);
        assert!(r.uncertainty_note.contains("hybrid_strict"), "{}", r.uncertainty_note);
        assert!(r.uncertainty_note.contains("preliminary"), "{}", r.uncertainty_note);
    }

    #[test]
    fn no_passage_means_the_answer_does_not_apply() {
        let r = reflect("revenue", None, "", &Grounds::default(), (0.7, 0.3));
        assert_eq!(r.score, 0.0);
        assert!(r.applicability_note.starts_with("No passage"));
    }
}
