//! Implementations of the [`crate::ports`]: in-memory (the embedded default), DynamoDB and SQS.

pub mod aws;
pub mod dynamodb;
pub mod memory;
pub mod sqs;
