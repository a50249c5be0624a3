//! Proof that the harness can fail: built with the `planted-bug` feature, the engine's fan-in
//! condition always holds, so a query is synthesized as soon as any of its handoffs arrives.
//! The default seed count must find it and print a seed that replays the same violation.
//! `scripts/test.sh` runs this with `cargo test -p switchyard-sim --features planted-bug`.

use switchyard_sim::{describe_failure, run_seed, run_seeds, DEFAULT_SEEDS, REPLAY_COMMAND};

#[test]
fn the_default_seeds_find_the_planted_fan_in_bug_and_print_a_seed_that_replays_it() {
    let mut first_failure = None;
    let summary = run_seeds(0, DEFAULT_SEEDS, |report| {
        if !report.passed() && first_failure.is_none() {
            first_failure = Some(report.clone());
        }
    })
    .expect("simulation runs");
    let failure =
        first_failure.unwrap_or_else(|| panic!("{} seeds ran and none noticed the planted bug", summary.seeds));
    let printed = describe_failure(&failure);
    println!("{printed}");
    assert!(printed.starts_with(&format!("seed {}: invariant violated: ", failure.seed)), "{printed}");
    assert!(printed.contains(&format!("{REPLAY_COMMAND} {}", failure.seed)));
    let replay = run_seed(failure.seed).expect("replays");
    assert_eq!(replay.violations, failure.violations, "the printed seed replays the same violations");
    println!("{} of {} seeds caught it", summary.failures.len(), summary.seeds);
}
