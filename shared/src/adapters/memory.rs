//! In-memory store and queues with DynamoDB and SQS semantics: the embedded default.
