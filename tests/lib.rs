//! Shared helpers for Switchyard's cross-crate tests live in the test files themselves.
