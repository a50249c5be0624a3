//! Checks of the agent kinds that call out (`llm`, `http`, `lambda`), the model providers,
//! the cascaded classifier and the orchestration modes of routes.

use super::Check;
use crate::manifest::{Agent, ProviderKind, RouteMode};
use std::collections::BTreeSet;

/// Most orchestrator rounds a deliberation may allow.
const MAX_ITERATIONS: u32 = 50;
/// Most critic re-syntheses.
const MAX_CRITIC_RETRIES: u32 = 10;

impl Check<'_> {
    /// `llm`, `http` and `lambda` settings, and `inputs`.
    pub(super) fn remote_kinds(&mut self, i: usize, agent: &Agent) {
        if let Some(inputs) = &agent.inputs {
            for (j, field) in inputs.iter().enumerate() {
                if field.trim().is_empty() {
                    self.report(format!("agents[{i}].inputs[{j}]"), "empty field name in `inputs`; remove it");
                }
            }
        }
        if let Some(llm) = &agent.llm {
            let at = |f: &str| format!("agents[{i}].llm.{f}");
            match self.m.provider(&llm.provider) {
                None => self.report(
                    at("provider"),
                    format!(
                        "provider `{}` is not declared in `providers`; declare it or fix the spelling",
                        llm.provider
                    ),
                ),
                Some(p) => {
                    if p.kind != ProviderKind::Scripted && llm.model.is_none() && p.model.is_none() {
                        self.report(
                            at("model"),
                            format!("neither the agent nor provider `{}` names a model; set `model`", p.id),
                        );
                    }
                }
            }
            if llm.output_schema.name.trim().is_empty() {
                self.report(
                    at("output_schema.name"),
                    "output schema `name` is empty; name it (scripted replies are keyed by it)",
                );
            }
            if !llm.output_schema.schema.is_object() {
                self.report(
                    at("output_schema.schema"),
                    "the schema must be a JSON Schema object, e.g. `{type: object, required: [answer]}`",
                );
            }
            if llm.max_tokens == 0 {
                self.report(at("max_tokens"), "`max_tokens` is 0, so the model could not answer; set a positive limit");
            }
            if let Some(c) = llm.confidence {
                self.unit_interval(at("confidence"), "confidence", c);
            }
            if let Some(limit) = llm.max_tokens_limit {
                if limit < llm.max_tokens {
                    self.report(
                        at("max_tokens_limit"),
                        format!(
                            "`max_tokens_limit` {limit} is below `max_tokens` {}; the limit is the most a cut answer may be given on a retry",
                            llm.max_tokens
                        ),
                    );
                }
            }
            if let Some(t) = llm.temperature {
                if !(0.0..=2.0).contains(&t) {
                    self.report(at("temperature"), format!("temperature {t} is outside 0.0 – 2.0"));
                }
            }
        }
        if let Some(http) = &agent.http {
            if !(http.url.starts_with("http://") || http.url.starts_with("https://")) {
                self.report(
                    format!("agents[{i}].http.url"),
                    format!("`{}` is not an http:// or https:// URL", http.url),
                );
            }
        }
        if let Some(lambda) = &agent.lambda {
            if lambda.function.trim().is_empty() {
                self.report(
                    format!("agents[{i}].lambda.function"),
                    "function name is empty; name the function or its ARN",
                );
            }
        }
    }

    /// Provider ids unique; each kind's required settings present.
    pub(super) fn providers(&mut self) {
        self.unique("providers", "id", "provider id", self.m.providers.iter().map(|p| p.id.clone()));
        for (i, p) in self.m.providers.iter().enumerate() {
            let at = |f: &str| format!("providers[{i}].{f}");
            match p.kind {
                ProviderKind::Openai => {
                    if p.base_url.is_none() && p.base_url_env.is_none() {
                        self.report(at("base_url"), "an `openai` provider needs `base_url` or `base_url_env`");
                    }
                }
                ProviderKind::Scripted => {
                    if p.responses.is_empty() {
                        self.report(
                            at("responses"),
                            "a `scripted` provider needs `responses`, keyed by output-schema name",
                        );
                    }
                    for (name, replies) in &p.responses {
                        for (j, r) in replies.iter().enumerate() {
                            let both = r.reply.is_some() && r.text.is_some();
                            if both || (r.reply.is_none() && r.text.is_none() && r.tool_calls.is_empty()) {
                                self.report(
                                    format!("providers[{i}].responses.{name}[{j}]"),
                                    "set exactly one of `reply` and `text` (or only `tool_calls`)",
                                );
                            }
                            for (k, call) in r.tool_calls.iter().enumerate() {
                                if !self.names_a_tool(&call.tool) {
                                    self.report(
                                        format!("providers[{i}].responses.{name}[{j}].tool_calls[{k}].tool"),
                                        format!("`{}` names no declared tool source; write `<source>.<tool>` or an HTTP tool's id", call.tool),
                                    );
                                }
                            }
                        }
                    }
                }
                ProviderKind::Bedrock => {}
            }
            if p.timeout.is_some_and(|t| t.as_millis() == 0) {
                self.report(at("timeout"), "timeout is 0; set a positive duration or remove it");
            }
        }
    }

    /// The cascaded classifier names a declared agent.
    pub(super) fn cascade(&mut self) {
        if let Some(id) = &self.m.classifier.llm {
            self.known_agent("classifier.llm".into(), id);
        }
    }

    /// The orchestration modes of `intents[i].route`.
    pub(super) fn route_modes(&mut self, i: usize) {
        let Some(intent) = self.m.intents.get(i) else { return };
        let route = &intent.route;
        let at = |f: &str| format!("intents[{i}].route.{f}");
        if let Some(mode) = route.mode {
            if route.primary.is_some() || route.pipeline.is_some() {
                self.report(
                    at("mode"),
                    "a route with a `mode` answers with its mode's agents; remove `primary` / `pipeline`",
                );
            }
            let (name, present) = match mode {
                RouteMode::Deliberate => ("deliberate", route.deliberate.is_some()),
                RouteMode::Sources => ("sources", route.sources.is_some()),
            };
            if !present {
                self.report(at("mode"), format!("`mode: {name}` needs a `{name}:` settings block; add it"));
            }
        }
        if route.deliberate.is_some() && route.mode != Some(RouteMode::Deliberate) {
            self.report(
                at("deliberate"),
                "a `deliberate:` block is used only with `mode: deliberate`; add the mode or remove the block",
            );
        }
        if route.sources.is_some() && route.mode != Some(RouteMode::Sources) {
            self.report(
                at("sources"),
                "a `sources:` block is used only with `mode: sources`; add the mode or remove the block",
            );
        }
        if let Some(d) = &route.deliberate {
            if d.experts.is_empty() {
                self.report(at("deliberate.experts"), "no experts; list at least one");
            } else if d.experts.iter().all(|e| e.on_demand) {
                self.report(
                    at("deliberate.experts"),
                    "every expert is `on_demand`, so the first fan-out would be empty; make one consulted up front",
                );
            }
            let mut seen = BTreeSet::new();
            for (j, e) in d.experts.iter().enumerate() {
                if !seen.insert(e.agent.as_str()) {
                    self.report(
                        at(&format!("deliberate.experts[{j}].agent")),
                        format!("`{}` is listed twice; list each expert once", e.agent),
                    );
                }
                self.known_agent(at(&format!("deliberate.experts[{j}].agent")), &e.agent);
            }
            self.known_agent(at("deliberate.orchestrator"), &d.orchestrator);
            self.known_agent(at("deliberate.crafter"), &d.crafter);
            if d.max_iterations == 0 || d.max_iterations > MAX_ITERATIONS {
                self.report(
                    at("deliberate.max_iterations"),
                    format!("{} is outside 1 – {MAX_ITERATIONS}", d.max_iterations),
                );
            }
        }
        if let Some(s) = &route.sources {
            if s.agents.is_empty() {
                self.report(at("sources.agents"), "no sources; list at least one source agent");
            }
            for (j, a) in s.agents.iter().enumerate() {
                self.known_agent(at(&format!("sources.agents[{j}]")), a);
            }
            self.known_agent(at("sources.synthesizer"), &s.synthesizer);
            if let Some(m) = &s.memory {
                self.known_agent(at("sources.memory"), m);
            }
            if s.budget.as_millis() == 0 {
                self.report(
                    at("sources.budget"),
                    "budget is 0, so every source would time out at once; set a positive duration",
                );
            }
            self.unit_interval(at("sources.quality_threshold"), "threshold", s.quality_threshold);
            self.unit_interval(at("sources.duplicate_similarity"), "similarity", s.duplicate_similarity);
            for (name, w) in
                [("source", s.weights.source), ("recency", s.weights.recency), ("relevance", s.weights.relevance)]
            {
                self.unit_interval(at(&format!("sources.weights.{name}")), "weight", w);
            }
            for (source, r) in &s.reputation {
                self.unit_interval(at(&format!("sources.reputation.{source}")), "reputation", *r);
            }
            if !(s.recency_horizon_years > 0.0 && s.recency_horizon_years.is_finite()) {
                self.report(at("sources.recency_horizon_years"), "must be a positive number of years");
            }
        }
        if let Some(c) = &route.critic {
            self.known_agent(at("critic.agent"), &c.agent);
            if c.max_retries > MAX_CRITIC_RETRIES {
                self.report(
                    at("critic.max_retries"),
                    format!("{} re-syntheses is more than the maximum {MAX_CRITIC_RETRIES}", c.max_retries),
                );
            }
            if route.pipeline.is_some() {
                self.report(at("critic"), "a critic cannot re-run a pipeline; use it on a `primary` or `mode` route");
            }
        }
        if let Some(g) = &route.guardrails {
            if g.input.is_none() && g.planner.is_none() && g.output.is_none() {
                self.report(at("guardrails"), "set at least one of `input`, `planner`, `output`, or remove the block");
            }
            for (name, id) in [("input", &g.input), ("planner", &g.planner), ("output", &g.output)] {
                if let Some(id) = id {
                    self.known_agent(at(&format!("guardrails.{name}")), id);
                }
            }
        }
    }
}
