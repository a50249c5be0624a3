//! Build step: the shipped manifest's trained router, compiled in beside the manifest.
//!
//! `switchyard train` writes `routing.router` beside `routing.yaml`; this script copies it into
//! `OUT_DIR`, where `router::EMBEDDED` includes it (cargo reruns it whenever the file changes).
//! A missing file is written empty: the build succeeds, a deployed function then refuses to
//! start naming `switchyard train`, and the embedded default trains in-process.
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let artifact = dir.join("../../routing.router");
    println!("cargo:rerun-if-changed={}", artifact.display());
    println!("cargo:rerun-if-changed=build.rs");
    let bytes = std::fs::read(&artifact).unwrap_or_default();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("routing.router");
    std::fs::write(&out, bytes).expect("OUT_DIR is writable");
}
