//! The AWS limits Switchyard works within, each defined once.
//!
//! The in-memory adapters enforce the same numbers as the DynamoDB and SQS adapters, so the
//! embedded default rejects exactly what AWS would reject; the manifest validator, the engine
//! and the template renderer read them from here too.

/// DynamoDB's item size limit (400 KB, counted as 1024-byte KB).
pub const DYNAMODB_MAX_ITEM_BYTES: usize = 400 * 1024;
/// DynamoDB's limit on actions in one transaction.
pub const DYNAMODB_MAX_TRANSACT_ITEMS: usize = 100;
/// The largest SQS message (body and attributes) Switchyard's queues accept: 256 KiB, SQS's
/// default `MaximumMessageSize`, which `switchyard setup` and the template keep.
pub const SQS_MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// SQS's largest delivery delay; longer deadlines are chained.
pub const SQS_MAX_DELAY_S: u64 = 900;
/// SQS's longest long-poll wait.
pub const SQS_MAX_WAIT_S: u64 = 20;
/// Most messages one SQS receive (or one batch send) carries.
pub const SQS_MAX_BATCH: usize = 10;
/// Lambda's maximum function timeout.
pub const LAMBDA_MAX_TIMEOUT_S: u64 = 900;
/// Time a worker keeps for itself after an agent's attempt times out (record, re-enqueue).
pub const WORKER_MARGIN_S: u64 = 30;
/// The longest per-attempt timeout an agent may have: what fits in one worker invocation.
pub const MAX_ATTEMPT_TIMEOUT_MS: u64 = (LAMBDA_MAX_TIMEOUT_S - WORKER_MARGIN_S) * 1_000;
/// Receives before a message moves to its dead-letter queue (the redrive policy of every queue).
pub const MAX_RECEIVE_COUNT: u32 = 5;

/// Most training signals one `Store::list_signals` call (and one `GET /v1/signals` page) returns.
pub const MAX_SIGNAL_PAGE: usize = 500;

/// Counts the bytes written to it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The size of `value` serialized as JSON, in bytes, counted without building the JSON: what
/// the item and message limits above are checked against (0 if it does not serialize).
pub fn json_size<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    let mut count = ByteCount(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}
