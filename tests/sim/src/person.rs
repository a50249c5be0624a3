//! A person in the loop: the caller of a query whose tool call waits for approval, holding the
//! approval's role, who decides through the handler a client uses
//! (`POST /v1/queries/{id}/approval`). Driven by the seed: after a while they approve, reject,
//! or never answer (so the approval expires); a decision may come after the expiry (the
//! handler refuses it with 409). Like a careful client, they retry 5xx answers and dropped
//! connections.

use crate::chaos::{Chaos, CALM, FAULTED_DELIVERIES};
use crate::{post_event, SimError};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use switchyard_engine::handlers::handle_http;
use switchyard_engine::memory::MemoryStore;
use switchyard_engine::ports::{QueryStatus, Store};
use switchyard_engine::Deps;
use tokio::time::Instant;

/// How often the person looks at the query.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// How long the person keeps looking (virtual time).
const LOOK_FOR: Duration = Duration::from_secs(600);

/// The longest a person takes to decide: past the manifest's 20 s approval timeout, so some
/// decisions come too late.
const MAX_THINKING: Duration = Duration::from_secs(25);

/// The role the simulation's approvals need.
const ROLE: &str = "approver";

/// Watch query `index` (`query_id`, owned by `user`) and decide each call that waits for
/// approval. Returns the violations seen (a decision refused for a reason other than being
/// late).
pub async fn decide(
    deps: Arc<Deps>,
    store: Arc<MemoryStore>,
    chaos: Arc<Chaos>,
    index: usize,
    query_id: String,
    user: String,
) -> Result<Vec<String>, SimError> {
    let mut violations = Vec::new();
    let mut seen = BTreeSet::new();
    let until = Instant::now() + LOOK_FOR;
    while Instant::now() < until {
        tokio::time::sleep(LOOK_EVERY).await;
        let Some(query) = store.get_query(&query_id).await.ok().flatten() else { return Ok(violations) };
        if query.status == QueryStatus::Done {
            return Ok(violations);
        }
        let Some(waiting) = query.approvals.iter().find(|a| a.is_pending()) else { continue };
        if !seen.insert((waiting.dispatch_id.clone(), waiting.index)) {
            continue;
        }
        let f = chaos.faults;
        let call = format!("query #{index}'s {} call", waiting.tool);
        if chaos.roll_always(f.person_away, &format!("the person asked about {call} never answers")) {
            continue;
        }
        tokio::time::sleep(MAX_THINKING.mul_f64(chaos.fraction())).await;
        let verdict = if chaos.roll_always(f.person_rejects, &format!("the person rejects {call}")) {
            "reject"
        } else {
            "approve"
        };
        let path = format!("/v1/queries/{query_id}/approval");
        let body = json!({ "decision": verdict }).to_string();
        let claims = json!({ "sub": user, "roles": ROLE });
        for attempt in 0..=FAULTED_DELIVERIES + 2 {
            let request = post_event(&path, &body, claims.clone(), &format!("decision-{index}-{attempt}"))?;
            let d = deps.clone();
            let calm = attempt >= FAULTED_DELIVERIES;
            let outcome = tokio::spawn(CALM.scope(calm, async move { handle_http(&d, request).await })).await;
            match outcome {
                Ok(r) if r.status_code == 200 => {
                    chaos.note(&format!("the person's {verdict} of {call} was taken"));
                    break;
                }
                Ok(r) if r.status_code == 409 => {
                    chaos.note(&format!("the person's {verdict} of {call} came too late or twice (409)"));
                    break;
                }
                Ok(r) if r.status_code >= 500 => {
                    chaos.note(&format!("the person's {verdict} of {call}: answered {}; retrying", r.status_code))
                }
                Ok(r) => {
                    violations.push(format!("the person's {verdict} of {call} was refused with {}", r.status_code));
                    break;
                }
                Err(_) => chaos.note(&format!("the person's {verdict} of {call}: the handler crashed; retrying")),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(violations)
}
