//! # switchyard-aws
//!
//! Switchyard on AWS: the adapters behind the engine's ports and the wiring every Lambda
//! function starts from.
//!
//! # Layout
//!
//! - [`dynamodb`]: the `Store` on one DynamoDB table (conditional writes, transactions, the
//!   signal index).
//! - [`sqs`]: the `Queue` on SQS, with the dead-letter queues' redrive.
//! - [`sdk`]: the SDK's shared configuration from the environment (endpoint, TLS roots).
//! - [`system`]: the engine's dependencies built once per function from the environment the
//!   SAM template sets.
#![warn(missing_docs)]

pub mod dynamodb;
pub mod sdk;
pub mod sqs;
pub mod system;

pub use dynamodb::DynamoStore;
pub use sqs::SqsQueue;
pub use system::{manifest_from_env, tier_from_env, AwsSystem, StartupError};
