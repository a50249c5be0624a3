//! Plans: which agents answer a query, in which stages, with which budgets.
//!
//! The router turns a parsed query and its intent's route into a [`Plan`]: one stage of
//! parallel dispatches (primary + supporting agents), or one stage per step of a pipeline. The
//! plan is stored in the query record and is the only place the workers read their dispatches
//! from, so a redelivered message always finds the same dispatch ids.
//!
//! Everything here is pure — no port, no I/O — so it is unit-tested on its own:
//! - [`modes`]: the orchestration modes (guardrails, coherence, deliberation, critic, parallel
//!   sources, cascade classification): the first plan of a route, the step that follows a
//!   completed stage, and the shape of the answer;
//! - [`evaluate`]: scoring the parallel sources' chunks (quality, duplicates, contradictions);
//! - [`handoffs`]: which handoff fills a slot, an agent's answer text, QC gates.

pub mod evaluate;
pub mod handoffs;
pub mod modes;

use switchyard_model::contracts::AgentDispatch;

use chrono::{DateTime, Utc};
use switchyard_model::contracts::{
    DispatchConstraints, DispatchMetadata, DispatchPayload, DispatchRouting, ParsedQuery,
};
use switchyard_model::manifest::{Agent, Fallback, Manifest};
pub use switchyard_model::records::{ClassificationDecision, DispatchRole, Flow, Plan, PlannedDispatch, Stage};
use switchyard_model::topology::extended_timeout_ms;

/// Why no plan could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The intent is not in the manifest (E2I `routing_failed`).
    #[error("intent `{0}` is not declared in the manifest")]
    UnknownIntent(String),
    /// The route names something the manifest lacks (a validated manifest cannot).
    #[error("route of `{intent}` names unknown {what} `{id}`")]
    Unknown {
        /// The intent.
        intent: String,
        /// `agent` or `pipeline`.
        what: &'static str,
        /// The missing id.
        id: String,
    },
}

/// E2I priority: 1 for the agent on the critical path (the primary, or a pipeline's
/// steps), then lower tier before higher tier.
fn priority(role: DispatchRole, tier: u8) -> u8 {
    match role {
        DispatchRole::Primary | DispatchRole::Step => 1,
        DispatchRole::Supporting | DispatchRole::Fallback => 2 + tier,
        DispatchRole::Background => 9,
    }
}

/// Build the E2I dispatch of `agent` for `parsed`.
pub fn dispatch_for(
    manifest: &Manifest,
    agent: &Agent,
    role: DispatchRole,
    parsed: &ParsedQuery,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> AgentDispatch {
    let timeout_ms = manifest
        .agent_timeout(agent)
        .map(|d| d.as_millis())
        .unwrap_or(switchyard_model::limits::MAX_ATTEMPT_TIMEOUT_MS);
    let fallback_agent = match (role, manifest.agent_fallback(agent)) {
        (DispatchRole::Fallback, _) => None,
        (_, Fallback::Agent(id)) => Some(id),
        _ => None,
    };
    AgentDispatch {
        dispatch_id: uuid::Uuid::new_v4().to_string(),
        query_id: parsed.query_id.clone(),
        target_agent: agent.id.clone(),
        target_tier: agent.tier,
        payload: DispatchPayload {
            intent: parsed.intent.clone(),
            entities: parsed.entities.clone(),
            context: modes::context_for(manifest, agent, parsed, &[]),
            constraints: DispatchConstraints {
                max_latency_ms: timeout_ms,
                required_confidence: agent.required_confidence,
            },
        },
        routing: DispatchRouting {
            priority: priority(role, agent.tier),
            timeout_ms,
            retry_count: manifest.agent_max_retries(agent),
            fallback_agent,
        },
        metadata: DispatchMetadata { dispatched_at: now, correlation_id: correlation_id.to_string() },
    }
}

/// Worst-case time an agent can take: every attempt timing out with extended timeouts, the
/// largest backoffs between them, then its fallback's worst case.
pub fn worst_case_ms(manifest: &Manifest, agent: &Agent, with_fallback: bool) -> u64 {
    let base = manifest
        .agent_timeout(agent)
        .map(|d| d.as_millis())
        .unwrap_or(switchyard_model::limits::MAX_ATTEMPT_TIMEOUT_MS);
    let retries = manifest.agent_max_retries(agent);
    let tier = manifest.tier(agent.tier);
    let ext = tier.map(|t| t.timeout_extension).unwrap_or(1.0);
    let backoff_max = tier.map(|t| t.backoff.max.as_millis()).unwrap_or(0);
    let attempts: u64 = (0..=retries).map(|n| extended_timeout_ms(base, ext, n)).sum();
    let waits = u64::from(retries) * backoff_max;
    let fallback = match manifest.agent_fallback(agent) {
        Fallback::Agent(id) if with_fallback => {
            manifest.agent(&id).map(|f| worst_case_ms(manifest, f, false)).unwrap_or(0)
        }
        _ => 0,
    };
    attempts + waits + fallback
}

/// Plan the answer to `parsed`: one parallel stage (primary + supporting), or one stage per
/// pipeline step. Dispatch ids are fresh UUIDs; the plan is stored once, so they never change.
pub fn build(
    manifest: &Manifest,
    parsed: &ParsedQuery,
    correlation_id: &str,
    now: DateTime<Utc>,
) -> Result<Plan, PlanError> {
    let intent = manifest.intent(&parsed.intent).ok_or_else(|| PlanError::UnknownIntent(parsed.intent.clone()))?;
    let agent = |id: &str| {
        manifest.agent(id).ok_or_else(|| PlanError::Unknown {
            intent: intent.id.clone(),
            what: "agent",
            id: id.to_string(),
        })
    };
    let planned = |agent: &Agent, role| {
        let dispatch = dispatch_for(manifest, agent, role, parsed, correlation_id, now);
        PlannedDispatch { slot: dispatch.dispatch_id.clone(), role, fallback_for: None, dispatch }
    };
    let mut stages = Vec::new();
    let mut deadline_ms = 0;
    if let Some(pipeline_id) = &intent.route.pipeline {
        let pipeline = manifest.pipeline(pipeline_id).ok_or_else(|| PlanError::Unknown {
            intent: intent.id.clone(),
            what: "pipeline",
            id: pipeline_id.clone(),
        })?;
        for step in &pipeline.steps {
            let a = agent(&step.agent)?;
            deadline_ms += worst_case_ms(manifest, a, true);
            stages.push(Stage { gate: step.gate.clone(), ..Stage::of(vec![planned(a, DispatchRole::Step)]) });
        }
    } else {
        let primary_id = intent.route.primary.as_deref().unwrap_or_default();
        let mut dispatches = vec![planned(agent(primary_id)?, DispatchRole::Primary)];
        for id in &intent.route.supporting {
            dispatches.push(planned(agent(id)?, DispatchRole::Supporting));
        }
        deadline_ms = dispatches
            .iter()
            .filter_map(|d| manifest.agent(&d.dispatch.target_agent))
            .map(|a| worst_case_ms(manifest, a, true))
            .max()
            .unwrap_or(0);
        stages.push(Stage::of(dispatches));
    }
    if let Some(deadline) = intent.route.deadline {
        deadline_ms = deadline.as_millis();
    }
    Ok(Plan {
        intent: intent.id.clone(),
        pipeline: intent.route.pipeline.clone(),
        stages,
        current_stage: 0,
        deadline_ms,
        flow: None,
    })
}
