//! "Did you mean …?": the declared name nearest to a misspelled one.
//!
//! Nearness is the Levenshtein edit distance (insertions, deletions and substitutions of one
//! character each count 1). A name is suggested only when it is close enough to be a plausible
//! typo: at most a third of the longer name's characters differ (and at least one edit is
//! allowed), so `suply_agent` finds `supply_agent` but `weather` does not find `pricing`.

/// Edit distance between two strings, counted in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb { diagonal } else { 1 + diagonal.min(above).min(row[j]) };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The declared name nearest to `name`, if one is close enough to be a typo of it; ties go to
/// the first declared.
pub fn nearest<'a>(name: &str, declared: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for candidate in declared {
        let distance = edit_distance(&name.to_lowercase(), &candidate.to_lowercase());
        let limit = (name.chars().count().max(candidate.chars().count()) / 3).max(1);
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// ` (did you mean `x`?)` when a declared name is near, else empty: appended to a message.
pub fn did_you_mean<'a>(name: &str, declared: impl IntoIterator<Item = &'a str>) -> String {
    nearest(name, declared).map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("supply_agent", "suply_agent"), 1);
        assert_eq!(edit_distance("causal_impact", "casual_impact"), 2);
    }

    #[test]
    fn a_one_letter_typo_finds_the_declared_name() {
        let declared = ["supply_agent", "pricing_agent", "causal_impact"];
        assert_eq!(nearest("suply_agent", declared), Some("supply_agent"));
        assert_eq!(nearest("casual_impact", declared), Some("causal_impact"));
        assert_eq!(nearest("Pricing_Agent", declared), Some("pricing_agent"));
    }

    #[test]
    fn an_unrelated_name_gets_no_suggestion() {
        assert_eq!(nearest("weather", ["pricing", "supply_agent"]), None);
        assert_eq!(nearest("x", ["y_long_name"]), None);
        assert_eq!(did_you_mean("weather", ["pricing"]), "");
    }

    #[test]
    fn the_closest_of_several_near_names_wins() {
        assert_eq!(nearest("agent_bb", ["agent_x", "agent_b", "agent_bbbb"]), Some("agent_b"));
        assert_eq!(did_you_mean("agnt_c", ["agent_c"]), " (did you mean `agent_c`?)");
    }
}
