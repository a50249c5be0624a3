//! Read-only views for people looking at the system: the caller's recent queries
//! (`GET /v1/queries`) and the manifest's routing table (`GET /v1/manifest/routes`), both used
//! by the web console of `switchyard serve`.
//!
//! The list shows only the caller's own queries (the store's per-user index); the routing table
//! is the manifest as a person reads it: for each intent, which agents answer, in which role,
//! on which tier, with which timeout, retries and fallback.

use super::intake::{Caller, IntakeError};
use super::Deps;
use crate::ports::QueryStatus;
use chrono::{DateTime, Utc};
use serde::Serialize;
use switchyard_model::contracts::OutputStatus;
use switchyard_model::manifest::{Fallback, Manifest};

/// Largest `limit` a caller may ask for.
pub const MAX_LIST_LIMIT: usize = 100;
/// Queries listed when the caller names no limit.
pub const DEFAULT_LIST_LIMIT: usize = 20;
/// A listed question is cut to this many characters.
const QUESTION_CHARS: usize = 200;

/// One of the caller's queries, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuerySummary {
    /// The query id.
    pub query_id: String,
    /// Its conversation.
    pub session_id: String,
    /// The caller's question, cut to 200 characters.
    pub question: String,
    /// Routed intent.
    pub intent: String,
    /// Classification confidence.
    pub confidence: f64,
    /// Where it is in its life.
    pub status: QueryStatus,
    /// How it ended, once done.
    pub outcome: Option<OutputStatus>,
    /// When intake accepted it.
    pub accepted_at: DateTime<Utc>,
}

/// The caller's most recent queries, newest first; `limit` from 1 to [`MAX_LIST_LIMIT`].
pub async fn recent_queries(deps: &Deps, caller: &Caller, limit: usize) -> Result<Vec<QuerySummary>, IntakeError> {
    let limit = limit.clamp(1, MAX_LIST_LIMIT);
    let queries = deps.store.list_user_queries(&caller.user_id, limit).await?;
    Ok(queries
        .into_iter()
        // The store promises only the caller's queries; a second check costs nothing.
        .filter(|q| q.user_id == caller.user_id)
        .map(|q| QuerySummary {
            question: q.parsed.raw_query.chars().take(QUESTION_CHARS).collect(),
            intent: q.parsed.intent.clone(),
            confidence: q.parsed.confidence,
            query_id: q.query_id,
            session_id: q.session_id,
            status: q.status,
            outcome: q.outcome,
            accepted_at: q.accepted_at,
        })
        .collect())
}

/// The manifest's routing table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoutingTable {
    /// The manifest's name.
    pub manifest: String,
    /// Its fingerprint (the version new queries start on).
    pub fingerprint: String,
    /// The tiers, lowest (highest priority) first.
    pub tiers: Vec<TierRow>,
    /// One row per intent, in manifest order.
    pub routes: Vec<RouteRow>,
}

/// A tier as the table shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierRow {
    /// 0 – 5.
    pub tier: u8,
    /// Its short name.
    pub name: String,
    /// Per-attempt timeout in milliseconds; `None` when each agent sets its own.
    pub timeout_ms: Option<u64>,
    /// Retries after the first attempt.
    pub max_retries: u32,
}

/// One intent's route.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteRow {
    /// The intent id.
    pub intent: String,
    /// What it is for.
    pub description: String,
    /// The role a caller needs, if any.
    pub required_role: Option<String>,
    /// `direct`, `pipeline`, `deliberate` or `sources`.
    pub mode: &'static str,
    /// The route's deadline in milliseconds, when it sets one.
    pub deadline_ms: Option<u64>,
    /// The agents of the route, each once, in the order they act.
    pub agents: Vec<RouteAgent>,
}

/// An agent on a route.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteAgent {
    /// The agent id.
    pub agent: String,
    /// `primary`, `supporting`, `pipeline step N`, `expert`, `orchestrator`, `crafter`,
    /// `source`, `synthesizer`, `critic` or `guardrail`.
    pub role: String,
    /// Its tier.
    pub tier: u8,
    /// Per-attempt timeout in milliseconds (its own, else its tier's).
    pub timeout_ms: Option<u64>,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// What answers when its retries are exhausted: `none`, `agent:<id>` or `template`.
    pub fallback: String,
}

/// The routing table of `manifest`.
pub fn routing_table(manifest: &Manifest) -> RoutingTable {
    let tiers = manifest
        .tiers
        .iter()
        .map(|t| TierRow {
            tier: t.tier,
            name: t.name.clone(),
            timeout_ms: match t.timeout {
                switchyard_model::manifest::TierTimeout::Fixed(d) => Some(d.as_millis()),
                switchyard_model::manifest::TierTimeout::Variable => None,
            },
            max_retries: t.max_retries,
        })
        .collect();
    let routes = manifest.intents.iter().map(|intent| route_row(manifest, intent)).collect();
    RoutingTable { manifest: manifest.name.clone(), fingerprint: manifest.fingerprint(), tiers, routes }
}

fn route_row(manifest: &Manifest, intent: &switchyard_model::manifest::Intent) -> RouteRow {
    let route = &intent.route;
    let mut named: Vec<(String, String)> = Vec::new();
    let mut add = |role: String, id: &str| {
        if !named.iter().any(|(_, a)| a == id) {
            named.push((role, id.to_string()));
        }
    };
    if let Some(g) = &route.guardrails {
        for id in [&g.input, &g.planner].into_iter().flatten() {
            add("guardrail".into(), id);
        }
    }
    if let Some(p) = route.pipeline.as_deref().and_then(|p| manifest.pipeline(p)) {
        for (i, step) in p.steps.iter().enumerate() {
            add(format!("pipeline step {}", i + 1), &step.agent);
        }
    }
    if let Some(m) = &route.merge {
        for r in &m.retrievers {
            add("retriever".into(), r);
        }
        if let Some(r) = &m.reranker {
            add("reranker".into(), r);
        }
    }
    if let Some(primary) = &route.primary {
        add("primary".into(), primary);
    }
    for s in &route.supporting {
        add("supporting".into(), s);
    }
    if let Some(d) = &route.deliberate {
        for e in &d.experts {
            add("expert".into(), &e.agent);
        }
        add("orchestrator".into(), &d.orchestrator);
        add("crafter".into(), &d.crafter);
    }
    if let Some(s) = &route.sources {
        for a in &s.agents {
            add("source".into(), a);
        }
        add("synthesizer".into(), &s.synthesizer);
    }
    if let Some(c) = &route.critic {
        add("critic".into(), &c.agent);
    }
    if let Some(output) = route.guardrails.as_ref().and_then(|g| g.output.as_deref()) {
        add("guardrail".into(), output);
    }
    let agents = named
        .into_iter()
        .filter_map(|(role, id)| {
            let agent = manifest.agent(&id)?;
            Some(RouteAgent {
                role,
                tier: agent.tier,
                timeout_ms: manifest.agent_timeout(agent).map(|d| d.as_millis()),
                max_retries: manifest.agent_max_retries(agent),
                fallback: match manifest.agent_fallback(agent) {
                    Fallback::None => "none".into(),
                    Fallback::Agent(a) => format!("agent:{a}"),
                    Fallback::Template(_) => "template".into(),
                },
                agent: id,
            })
        })
        .collect();
    let mode = match (&route.mode, &route.pipeline) {
        (Some(switchyard_model::manifest::RouteMode::Deliberate), _) => "deliberate",
        (Some(switchyard_model::manifest::RouteMode::Sources), _) => "sources",
        (None, Some(_)) => "pipeline",
        (None, None) => "direct",
    };
    RouteRow {
        intent: intent.id.clone(),
        description: intent.description.clone(),
        required_role: intent.required_role.clone(),
        mode,
        deadline_ms: route.deadline.map(|d| d.as_millis()),
        agents,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_manifest_routes_every_intent_to_known_agents_with_their_timeouts() {
        let manifest = Manifest::embedded().expect("the shipped manifest loads");
        let table = routing_table(&manifest);
        assert_eq!(table.routes.len(), manifest.intents.len());
        for row in &table.routes {
            assert!(!row.agents.is_empty(), "intent {} lists no agent", row.intent);
            for a in &row.agents {
                let agent = manifest.agent(&a.agent).expect("a listed agent is declared");
                assert_eq!(a.tier, agent.tier);
            }
        }
        let gap = table.routes.iter().find(|r| r.intent == "gap_analysis").expect("gap_analysis is routed");
        let names: Vec<(&str, &str)> = gap.agents.iter().map(|a| (a.role.as_str(), a.agent.as_str())).collect();
        assert_eq!(names[0], ("primary", "gap_analyzer"));
        assert!(gap.agents.iter().all(|a| a.timeout_ms.is_some_and(|t| t > 0)), "{:?}", gap.agents);
    }
}
