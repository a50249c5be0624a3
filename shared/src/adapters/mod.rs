//! Implementations of the [`crate::ports`]: in-memory (the embedded default), DynamoDB and SQS,
//! and fault injection around any of them.

pub mod aws;
pub mod dynamodb;
pub mod faults;
pub mod hooked;
pub mod memory;
pub mod sqs;
