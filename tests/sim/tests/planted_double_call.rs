//! Proof that the harness catches a write tool called twice: built with the
//! `planted-double-call` feature, the tool loop takes a write call claimed without an outcome
//! (its claimer crashed mid-call) as free to make again. The default seed count must find it
//! and print a seed that replays the same violation.
//! `scripts/test.sh` runs this with `cargo test -p switchyard-sim --features planted-double-call`.

use switchyard_sim::{assert_seeds_catch, SeedReport};

/// What the harness says when a write call is made twice for one logical call.
const DOUBLE_CALL: &str = "times for one logical call";

#[test]
fn the_default_seeds_find_the_planted_double_call_and_print_a_seed_that_replays_it() {
    assert_seeds_catch("double call", |report: &SeedReport| report.violations.iter().any(|v| v.contains(DOUBLE_CALL)));
}
