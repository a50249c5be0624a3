//! The embedded store keeps the same contract as the DynamoDB adapter: the checks in
//! `support/store_contract.rs` run here on the in-memory store and, in `aws_adapters.rs`,
//! against the local DynamoDB endpoint.

#[path = "support/store_contract.rs"]
mod store_contract;

use shared::adapters::memory::MemoryStore;
use shared::ports::TokioClock;
use std::sync::Arc;

#[tokio::test]
async fn the_memory_store_keeps_the_store_contract() {
    let store = MemoryStore::new(Arc::new(TokioClock::new()));
    store_contract::all(&store).await;
}
