//! The fan-in as an ordered log of arrivals, shared by the DynamoDB and memory stores.
//!
//! A fan-in set alone cannot say who completed it once a write is retried: a writer whose
//! `ADD` applied but whose answer was lost sends it again, and the set that comes back is the
//! set *now* — complete, if another handoff completed it in between — so two writers would both
//! believe they completed it and both ask for the synthesis. The store therefore keeps, beside
//! the set, the list of arrivals in the order they were applied (one entry per dispatch,
//! appended only when the dispatch is not in the list yet). Any reader of that list can tell
//! what the set was right after a given dispatch's arrival: the slots of every arrival up to
//! and including it. That answer is the same on the first try and on every retry, so exactly one
//! writer sees the stage complete (docs/architecture.md#rules, rule 3), however often its request is repeated.

use std::collections::BTreeSet;

/// One applied arrival: the dispatch whose handoff arrived and the slot it fills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The dispatch (unique per handoff writer).
    pub dispatch_id: String,
    /// The fan-in slot it fills.
    pub slot: String,
}

/// The fan-in set right after `dispatch_id` arrived: the slots of the arrivals up to and
/// including its own. `None` when it has not arrived.
pub fn completed_through(arrivals: &[Arrival], dispatch_id: &str) -> Option<BTreeSet<String>> {
    let position = arrivals.iter().position(|a| a.dispatch_id == dispatch_id)?;
    Some(slots(&arrivals[..=position]))
}

/// The whole fan-in set.
pub fn completed(arrivals: &[Arrival]) -> BTreeSet<String> {
    slots(arrivals)
}

/// The set of the arrivals' slots, inserted one by one: a fan-in has a few slots, and
/// `collect` into a `BTreeSet` first gathers them in a `Vec` to sort (one more allocation and
/// copy per handoff).
fn slots(arrivals: &[Arrival]) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for a in arrivals {
        set.insert(a.slot.clone());
    }
    set
}

/// Append the arrival unless its dispatch already arrived (a retry or a redelivery); returns the
/// set right after its arrival, whichever call applied it.
pub fn arrive(arrivals: &mut Vec<Arrival>, dispatch_id: &str, slot: &str) -> BTreeSet<String> {
    if !arrivals.iter().any(|a| a.dispatch_id == dispatch_id) {
        arrivals.push(Arrival { dispatch_id: dispatch_id.to_string(), slot: slot.to_string() });
    }
    completed_through(arrivals, dispatch_id).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(slots: &[&str]) -> BTreeSet<String> {
        slots.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_retried_arrival_reports_the_set_of_its_first_application_not_the_set_now() {
        let mut log = Vec::new();
        assert_eq!(arrive(&mut log, "a", "a"), set(&["a"]));
        // a's answer is lost; b completes the set of two; a's retry comes in.
        assert_eq!(arrive(&mut log, "b", "b"), set(&["a", "b"]));
        assert_eq!(arrive(&mut log, "a", "a"), set(&["a"]), "the retry must not claim the completion");
        assert_eq!(log.len(), 2, "a retry appends nothing");
        assert_eq!(completed(&log), set(&["a", "b"]));
    }

    #[test]
    fn exactly_one_arrival_sees_the_set_complete_whatever_the_retries() {
        let slots = ["d1", "d2", "d3"];
        let mut log = Vec::new();
        let mut complete = 0;
        for round in 0..3 {
            for s in slots {
                let after = arrive(&mut log, s, s);
                if round == 0 && after.len() == slots.len() {
                    complete += 1;
                }
                if round > 0 {
                    assert_eq!(after, completed_through(&log, s).expect("arrived"), "retries agree");
                }
            }
        }
        assert_eq!(complete, 1);
        assert_eq!(slots.iter().filter(|s| completed_through(&log, s).is_some_and(|c| c.len() == 3)).count(), 1);
    }

    #[test]
    fn two_dispatches_filling_one_slot_are_two_arrivals() {
        let mut log = Vec::new();
        arrive(&mut log, "original", "slot-1");
        assert_eq!(arrive(&mut log, "fallback", "slot-1"), set(&["slot-1"]));
        assert_eq!(log.len(), 2);
        assert_eq!(completed_through(&log, "nobody"), None);
    }
}
