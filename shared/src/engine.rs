//! Engine steps.
