//! The tool-call records of the table: a write call claimed with a condition before it is
//! made (`Q#<query>` / `C#<dispatch>#<index>`), its outcome added after.

use super::*;

const PREFIX_TOOL_CALL: &str = "C#";
/// A tool call's outcome, added after the call.
const OUTCOME: &str = "outcome";

/// The sort key of write call `index` of a dispatch: sorted by index within the dispatch.
fn tool_call_sk(dispatch_id: &str, index: u32) -> String {
    format!("{PREFIX_TOOL_CALL}{dispatch_id}#{index:04}")
}

impl DynamoStore {
    pub(super) async fn claim_call(&self, record: &ToolCallRecord) -> Result<ToolClaim, StoreError> {
        let sk = tool_call_sk(&record.dispatch_id, record.index);
        let mut item = Item::new();
        item.insert(PK.into(), s(query_pk(&record.query_id)));
        item.insert(SK.into(), s(sk.clone()));
        item.insert(KIND.into(), s("tool_call"));
        item.insert(DOC.into(), packed("tool call", record)?);
        item.insert(EXPIRES_AT.into(), n(record.expires_at));
        if self.put_once("tool call", item).await? {
            return Ok(ToolClaim::Claimed);
        }
        let Some(item) = self.get_item(query_pk(&record.query_id), &sk).await? else {
            return Err(StoreError::Unavailable {
                message: format!("call {} of {} was claimed and is gone", record.index, record.dispatch_id),
                source: None,
            });
        };
        let mut stored: ToolCallRecord = from_doc("tool call", &item)?;
        stored.outcome = unpack("tool call", &item, OUTCOME)?;
        Ok(ToolClaim::Recorded(Box::new(stored)))
    }

    pub(super) async fn finish_call(
        &self,
        query_id: &str,
        dispatch_id: &str,
        index: u32,
        outcome: &ToolCallOutcome,
    ) -> Result<(), StoreError> {
        let value = packed("tool call outcome", outcome)?;
        bump(&self.counters.writes, 1);
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(query_pk(query_id)))
            .key(SK, s(tool_call_sk(dispatch_id, index)))
            .condition_expression("attribute_exists(#pk) AND attribute_not_exists(#outcome)")
            .update_expression("SET #outcome = :outcome")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#outcome", OUTCOME)
            .expression_attribute_values(":outcome", value)
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| sdk_error("UpdateItem", e))?;
        bump(&self.counters.items_written, 1);
        let size = result.attributes.as_ref().map_or(0, billed_size);
        bump(&self.counters.write_units, units(size, WRITE_UNIT_BYTES));
        Ok(())
    }
}
