//! The in-memory store's tool-call records: a write call claimed before it is made, its
//! outcome added after (the same contract as the DynamoDB adapter's).

use super::*;

impl MemoryStore {
    /// Every tool-call record of a query, by dispatch and index (for the simulation's
    /// invariant checks).
    pub fn tool_calls_of(&self, query_id: &str) -> Vec<ToolCallRecord> {
        self.tables
            .lock()
            .map(|t| t.tool_calls.iter().filter(|((q, _, _), _)| q == query_id).map(|(_, r)| r.clone()).collect())
            .unwrap_or_default()
    }

    pub(super) fn claim_call(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError> {
        check_size("tool call", record)?;
        let claim = {
            let mut t = self.lock()?;
            let key = (record.query_id.clone(), record.dispatch_id.clone(), record.index);
            match t.tool_calls.get(&key).filter(|r| self.live(r.expires_at)) {
                Some(existing) => ToolClaim::Recorded(Box::new(existing.clone())),
                None => {
                    t.tool_calls.insert(key, record.clone());
                    ToolClaim::Claimed
                }
            }
        };
        self.transact(1);
        Ok(claim)
    }

    pub(super) fn finish_call(
        &self,
        query_id: &str,
        dispatch_id: &str,
        index: u32,
        outcome: &ToolCallOutcome,
    ) -> Result<(), StoreError> {
        check_size("tool call outcome", outcome)?;
        {
            let mut t = self.lock()?;
            let now = self.now_s();
            let key = (query_id.to_string(), dispatch_id.to_string(), index);
            match t.tool_calls.get_mut(&key).filter(|r| r.expires_at >= now) {
                Some(record) if record.outcome.is_none() => record.outcome = Some(outcome.clone()),
                Some(_) => {
                    return Err(StoreError::ConditionFailed(format!("call {index} of {dispatch_id} has an outcome")))
                }
                None => {
                    return Err(StoreError::ConditionFailed(format!("call {index} of {dispatch_id} was not claimed")))
                }
            }
        }
        self.transact(1);
        Ok(())
    }
}
