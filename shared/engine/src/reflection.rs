//! The RAG manager design's reflection, run by the synthesizer after the output is built when the route
//! declares `reflection`: the answer is scored against the original question (0.70) and the
//! planner's revised query (0.30) and the output gets `applicability_note` and
//! `uncertainty_note` ([`switchyard_core::retrieval::reflect`]). What the answer rests on comes from
//! the output's citations and the retrievers' reports in their handoffs.

use crate::ports::{HandoffRecord, QueryRecord};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use switchyard_core::retrieval::reflect::{reflect as score, Grounds, Reflection};
use switchyard_model::contracts::{OrchestratorOutput, OutputStatus};
use switchyard_model::manifest::Manifest;

/// The reflection for `output`, when its route asks for one and the query was answered.
pub fn reflect(
    manifest: &Manifest,
    query: &QueryRecord,
    handoffs: &[Arc<HandoffRecord>],
    output: &OrchestratorOutput,
) -> Option<Reflection> {
    let plan = query.plan.as_ref()?;
    let settings = manifest.intent(&plan.intent)?.route.reflection.as_ref()?;
    if !matches!(output.status, OutputStatus::Success | OutputStatus::Partial) {
        return None;
    }
    let revised =
        output.orchestration.as_ref().and_then(|o| o.pointer("/coherence/revised_query")).and_then(Value::as_str);
    let cited: BTreeSet<&str> = output.citations.iter().map(|c| c.source_id.as_str()).collect();
    let mut grounds =
        Grounds { passages: output.citations.iter().filter_map(|c| c.text.as_deref()).collect(), ..Default::default() };
    let mut documents: BTreeSet<String> = BTreeSet::new();
    for h in handoffs.iter().filter(|h| h.handoff.execution.status.is_usable()) {
        let out = &h.handoff.result.primary_output;
        for c in out.get("candidates").and_then(Value::as_array).into_iter().flatten() {
            let Some(id) = c.get("chunk_id").and_then(Value::as_str) else { continue };
            if !cited.contains(id) {
                continue;
            }
            documents.insert(id.split('#').next().unwrap_or(id).to_string());
            if let Some(year) = c.get("date").and_then(Value::as_str).and_then(|d| d.get(..4)?.parse().ok()) {
                grounds.years.push(year);
            }
        }
        if let Some(r) = out.get("retrieval") {
            for a in r.get("attempts").and_then(Value::as_array).into_iter().flatten() {
                if a.get("accepted").and_then(Value::as_bool) == Some(false) {
                    if let Some(name) = a.get("setting").and_then(Value::as_str) {
                        grounds.fallbacks.push(name.to_string());
                    }
                }
            }
            for y in r.get("requested_years").and_then(Value::as_array).into_iter().flatten() {
                if let Some(y) = y.as_i64() {
                    grounds.requested_years.push(y as i32);
                }
            }
        }
    }
    grounds.documents = documents.len().max(usize::from(!grounds.passages.is_empty()));
    grounds.requested_years.sort();
    grounds.requested_years.dedup();
    Some(score(
        &query.parsed.raw_query,
        revised,
        &output.response_text,
        &grounds,
        (settings.original_weight, settings.revised_weight),
    ))
}
