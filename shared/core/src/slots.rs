//! Slot filling: the entity types an intent requires (`required_entities`), the question that
//! asks for the missing ones in the words of their `description`, and the next turn of the
//! session that supplies them ([`crate::classify::Classifier::resume`]).
//!
//! A query whose intent lacks a required entity runs no agent: it ends with `final_reason:
//! missing_entities` and a `missing_entities` list, and the session's turn records that list.
//! The next turn that names one of the missing types goes on with that turn's intent and the
//! entities gathered so far; a turn that asks for something else leaves the slot filling behind.
//! The state lives in the session record, so it is the same embedded, on a local endpoint and
//! on AWS.

use switchyard_model::contracts::ParsedEntity;
use switchyard_model::manifest::Manifest;

/// The required entity types of `intent` that `entities` do not name, in the intent's order.
pub fn missing(manifest: &Manifest, intent: &str, entities: &[ParsedEntity]) -> Vec<String> {
    let Some(intent) = manifest.intent(intent) else { return Vec::new() };
    intent
        .required_entities
        .iter()
        .filter(|t| !entities.iter().any(|e| &e.entity_type == *t && !e.value.trim().is_empty()))
        .cloned()
        .collect()
}

/// The question asking for `missing`, composed from the entity types' descriptions: "What is
/// the city you fly to, and the day you leave?". A type without a description is named by its
/// name, its underscores read as spaces.
pub fn question(manifest: &Manifest, missing: &[String]) -> String {
    let phrases: Vec<String> = missing
        .iter()
        .map(|t| {
            let description = manifest.entities.get(t).map(|s| s.description.trim()).unwrap_or("");
            let phrase = if description.is_empty() { t.replace('_', " ") } else { description.to_string() };
            phrase.trim_end_matches(['.', '?', '!']).to_string()
        })
        .collect();
    let list = match phrases.as_slice() {
        [] => return String::new(),
        [one] => one.clone(),
        [first, second] => format!("{first}, and {second}"),
        [rest @ .., last] => format!("{}, and {last}", rest.join(", ")),
    };
    format!("What is {list}?")
}

/// A turn that asked for missing entities: its intent, what it had gathered, what it lacked.
#[derive(Debug, Clone, Copy)]
pub struct Pending<'a> {
    /// The intent the slots belong to.
    pub intent: &'a str,
    /// The entities gathered so far (own and carried).
    pub entities: &'a [ParsedEntity],
    /// The required types still missing.
    pub missing: &'a [String],
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
version: 1
name: desk
tiers: [{tier: 2, timeout: 10s, max_retries: 0, fallback: none}]
agents: [{id: a, tier: 2, kind: builtin, builtin: {response: ok, confidence: 0.9}}]
intents:
  - {id: book, route: {primary: a}, required_entities: [city, departure_date, seat_class], utterances: [book a flight]}
  - {id: other, route: {primary: a}, utterances: [something else]}
entities:
  city: {description: the city you fly to, gazetteer: [Vienna]}
  departure_date: {description: the day you leave, kind: date}
  seat_class: {description: "", gazetteer: [economy]}
"#;

    fn manifest() -> Manifest {
        serde_yaml::from_str(MANIFEST).expect("manifest")
    }

    fn entity(t: &str, v: &str) -> ParsedEntity {
        ParsedEntity {
            entity_type: t.into(),
            value: v.into(),
            text: v.into(),
            confidence: 1.0,
            source: Default::default(),
        }
    }

    #[test]
    fn missing_lists_the_required_types_not_named_in_the_intents_order() {
        let m = manifest();
        assert_eq!(missing(&m, "book", &[]), ["city", "departure_date", "seat_class"]);
        assert_eq!(missing(&m, "book", &[entity("departure_date", "2026-03-14")]), ["city", "seat_class"]);
        assert!(missing(&m, "other", &[]).is_empty());
        assert!(missing(&m, "no_such_intent", &[]).is_empty());
    }

    #[test]
    fn the_question_is_composed_from_the_descriptions() {
        let m = manifest();
        assert_eq!(question(&m, &["city".into()]), "What is the city you fly to?");
        assert_eq!(
            question(&m, &["city".into(), "departure_date".into()]),
            "What is the city you fly to, and the day you leave?"
        );
        assert_eq!(
            question(&m, &["city".into(), "departure_date".into(), "seat_class".into()]),
            "What is the city you fly to, the day you leave, and seat class?"
        );
        assert_eq!(question(&m, &[]), "");
    }
}
