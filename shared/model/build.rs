//! Build step: the shipped `routing.yaml`, prepared for a fast start.
//!
//! Every function binary embeds the shipped manifest and parses it in its init. Parsing the YAML
//! (about 43 KB) is most of that init; the same document as JSON deserializes into the same
//! `Manifest` several times faster. This script converts the YAML text to JSON once per build,
//! from the very file `EMBEDDED_ROUTING_YAML` includes, so the two can never disagree
//! (`cargo` reruns it whenever `routing.yaml` changes). It never fails the build: a file that
//! is not valid YAML is written as an empty JSON text, and `Manifest::embedded` then parses the
//! YAML itself, which reports the problem with its line.
use std::path::PathBuf;

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("../../routing.yaml");
    println!("cargo:rerun-if-changed={}", manifest.display());
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(&manifest).unwrap_or_default();
    let json = serde_yaml::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|value| serde_json::to_string(&value).ok())
        .unwrap_or_default();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("routing.json");
    std::fs::write(&out, json).expect("OUT_DIR is writable");
}
