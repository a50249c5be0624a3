//! Proof that the harness can fail: built with the `planted-bug` feature, the engine's fan-in
//! condition always holds, so a query is synthesized as soon as any of its handoffs arrives.
//! The default seed count must find it and print a seed that replays the same violation.
//! `scripts/test.sh` runs this with `cargo test -p switchyard-sim --features planted-bug`.

use switchyard_sim::{assert_seeds_catch, SeedReport};

#[test]
fn the_default_seeds_find_the_planted_fan_in_bug_and_print_a_seed_that_replays_it() {
    assert_seeds_catch("fan-in bug", |report: &SeedReport| !report.passed());
}
