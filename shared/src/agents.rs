//! Agent kinds.
