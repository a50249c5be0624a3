//! Implementations of the [`crate::ports`]: in-memory (the embedded default), DynamoDB and SQS.

pub mod faults;
pub mod memory;
