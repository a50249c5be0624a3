//! The Python tools some tests drive (PyYAML, openapi-spec-validator), from the venv that
//! `scripts/pyapi.sh` installs and names in `SWITCHYARD_PYTHON`.
//!
//! A test that needs them and cannot find them fails with the reason; it never skips.

use std::path::Path;
use std::process::Command;

/// How to run the tests that need the venv.
pub const HOW_TO_RUN: &str = "run these tests through scripts/test.sh (or `source scripts/pyapi.sh && pyapi_install` \
     first), which installs PyYAML, openapi-spec-validator and schemathesis into a venv and sets SWITCHYARD_PYTHON";

/// The venv's python; panics (fails the test) when `SWITCHYARD_PYTHON` is not set.
pub fn python() -> String {
    let python = std::env::var("SWITCHYARD_PYTHON").unwrap_or_default();
    assert!(!python.trim().is_empty(), "SWITCHYARD_PYTHON is not set: {HOW_TO_RUN}");
    python
}

/// Run `script` with the venv's python and `args`; `Ok(stdout)` on exit 0, `Err(stderr)` otherwise.
pub fn run(script: &str, args: &[&Path]) -> Result<String, String> {
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}; {HOW_TO_RUN}", python()));
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
