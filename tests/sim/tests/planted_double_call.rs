//! Proof that the harness catches a write tool called twice: built with the
//! `planted-double-call` feature, the tool loop takes a write call claimed without an outcome
//! (its claimer crashed mid-call) as free to make again. The default seed count must find it
//! and print a seed that replays the same violation.
//! `scripts/test.sh` runs this with `cargo test -p switchyard-sim --features planted-double-call`.

use switchyard_sim::{describe_failure, run_seed, run_seeds, DEFAULT_SEEDS, REPLAY_COMMAND};

/// What the harness says when a write call is made twice for one logical call.
const DOUBLE_CALL: &str = "times for one logical call";

#[test]
fn the_default_seeds_find_the_planted_double_call_and_print_a_seed_that_replays_it() {
    let mut first_failure = None;
    let summary = run_seeds(0, DEFAULT_SEEDS, |report| {
        if report.violations.iter().any(|v| v.contains(DOUBLE_CALL)) && first_failure.is_none() {
            first_failure = Some(report.clone());
        }
    })
    .expect("simulation runs");
    let failure =
        first_failure.unwrap_or_else(|| panic!("{} seeds ran and none noticed the planted double call", summary.seeds));
    let printed = describe_failure(&failure);
    println!("{printed}");
    assert!(printed.starts_with(&format!("seed {}: invariant violated: ", failure.seed)), "{printed}");
    assert!(printed.contains(&format!("{REPLAY_COMMAND} {}", failure.seed)));
    let replay = run_seed(failure.seed).expect("replays");
    assert_eq!(replay.violations, failure.violations, "the printed seed replays the same violations");
    let caught = summary.failures.iter().filter(|r| r.violations.iter().any(|v| v.contains(DOUBLE_CALL))).count();
    println!("{caught} of {} seeds caught it", summary.seeds);
}
