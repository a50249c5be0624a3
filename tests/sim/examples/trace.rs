//! Print the trace and violations of one seed: `cargo run -p switchyard-sim --example trace -- 370`.
fn main() {
    let seed = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    match switchyard_sim::run_seed(seed) {
        Ok(r) => {
            println!("{:?}", r.faults);
            for l in &r.trace {
                println!("{l}");
            }
            print!("{}", switchyard_sim::describe_failure(&r));
        }
        Err(e) => eprintln!("{e}"),
    }
}
