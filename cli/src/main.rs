// Compiled (and unit tested) here; the CLI owner wires `validate_cmd::run` into the commands.
#[allow(dead_code)]
mod validate_cmd;

fn main() {}
