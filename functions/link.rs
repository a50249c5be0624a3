//! Build script shared by the five function crates (each names it with `build = "../link.rs"`).
//!
//! On Linux with glibc (Lambda's `provided.al2023`, `cargo lambda build`, local builds) the
//! function binaries are linked as position-dependent executables (`-no-pie`). A PIE binary of
//! this size carries about 40,000 relative relocations that the loader applies at every start,
//! writing to each page of a ~650 KB `.data.rel.ro` (one copy-on-write page fault each): on a
//! machine where a bare `lambda_runtime` binary starts in ~2 ms, that was about 2 ms of every
//! function's cold start. A fixed-address executable has none of them. The trade-off: the
//! executable image itself is not randomized (ASLR still randomizes the stack, the heap, mmap
//! and every shared library). docs/performance.md#cold-start has the measurements.
//!
//! `SWITCHYARD_PIE=1` at build time keeps the default PIE link.
use std::env;

fn main() {
    println!("cargo:rerun-if-changed=../link.rs");
    println!("cargo:rerun-if-env-changed=SWITCHYARD_PIE");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let keep_pie = env::var("SWITCHYARD_PIE").is_ok_and(|v| v == "1");
    if os == "linux" && target_env == "gnu" && !keep_pie {
        // Given after rustc's own `-pie`; with gcc, clang and zig cc the last one wins.
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
