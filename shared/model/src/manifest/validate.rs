//! Checks a parsed manifest for problems the types cannot express.
//!
//! [`validate`] walks the whole manifest once and reports every problem it finds, each with the
//! YAML path of the offending field written the way `serde_path_to_error` writes the paths of
//! parse errors (`agents[3].fallback`, `intents[9].route.primary`, `tiers[2].timeout`), and a
//! message that names the rule and says what would be right.

use super::{Agent, Backoff, Dur, Fallback, GazetteerEntry, Manifest, TierTimeout};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

mod ext;
mod retrieval_checks;
mod streaming;
mod suggest;
mod tool_checks;

/// One problem in a manifest: where (YAML path, and line when the parser knows it) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// YAML path such as `intents[3].route.primary`; empty for the whole file.
    pub path: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong and what would be right.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.path.is_empty(), self.line) {
            (true, Some(l)) => write!(f, "line {l}: {}", self.message),
            (true, None) => write!(f, "{}", self.message),
            (false, Some(l)) => write!(f, "{} (line {l}): {}", self.path, self.message),
            (false, None) => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// The schema version this build reads.
const SUPPORTED_VERSION: u32 = 1;
/// Highest tier number (E2I: tiers 0 – 5).
const MAX_TIER: u8 = 5;
/// Lambda's 900 s maximum run time minus the 30 s the worker keeps to record the outcome; the
/// same limit [`crate::topology`] sizes the functions with (extended retries are capped there).
const MAX_ATTEMPT_TIMEOUT: Dur = Dur::from_millis(crate::limits::MAX_ATTEMPT_TIMEOUT_MS);
/// Most retries a tier or agent may ask for.
const MAX_RETRIES: u32 = 10;
/// Longest `query.deadline_slack`.
const MAX_DEADLINE_SLACK: Dur = Dur::from_millis(60_000);
/// Shortest `query.record_ttl`.
const MIN_RECORD_TTL: Dur = Dur::from_millis(3_600_000);
/// Longest agent id (`^[a-z][a-z0-9_]{0,63}$`).
const MAX_AGENT_ID_CHARS: usize = 64;
/// At most this many `classifier.scope.negative_examples` (they are learnt at start-up).
const MAX_NEGATIVE_EXAMPLES: usize = 1_000;
/// Longest negative example, in characters (a question, not a document).
const MAX_NEGATIVE_EXAMPLE_CHARS: usize = 500;
/// At most this many `classifier.scope.refuse` phrases.
const MAX_REFUSED_PHRASES: usize = 1_000;
/// Longest refused phrase, in characters (a phrase, not a sentence).
const MAX_REFUSED_PHRASE_CHARS: usize = 100;

/// Most signals an optimization window may span (one export page walk on AWS).
const MAX_OPTIMIZATION_WINDOW: usize = 10_000;

/// Every problem in the manifest; empty when it is valid.
pub fn validate(manifest: &Manifest) -> Vec<Problem> {
    let mut check = Check { m: manifest, problems: Vec::new() };
    check.header();
    check.query();
    check.classifier();
    check.tiers();
    check.agents();
    check.fallback_loops();
    check.intents();
    check.pipelines();
    check.entities();
    check.providers();
    check.cascade();
    check.reflections();
    check.merges();
    check.context();
    check.signals();
    check.streaming();
    check.tools();
    check.problems
}

/// The manifest under check and the problems found so far.
struct Check<'m> {
    m: &'m Manifest,
    problems: Vec<Problem>,
}

impl<'m> Check<'m> {
    fn report(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem { path: path.into(), line: None, message: message.into() });
    }

    /// A fraction that must lie in `[0, 1]`.
    fn unit_interval(&mut self, path: String, what: &str, value: f64) {
        if !(0.0..=1.0).contains(&value) {
            self.report(path, format!("{what} {value} is outside 0.0 – 1.0; write a number between 0 and 1"));
        }
    }

    /// A reference to an agent that must be declared.
    fn known_agent(&mut self, path: String, id: &str) -> bool {
        if self.m.agent(id).is_some() {
            return true;
        }
        let hint = suggest::did_you_mean(id, self.m.agents.iter().map(|a| a.id.as_str()));
        self.report(path, format!("agent `{id}` is not declared in `agents`{hint}; declare it or fix the spelling"));
        false
    }

    /// Reports every id after its first occurrence; `section` is the list's name.
    fn unique(&mut self, section: &str, field: &str, what: &str, ids: impl Iterator<Item = String>) {
        let mut first: BTreeMap<String, usize> = BTreeMap::new();
        for (i, id) in ids.enumerate() {
            match first.get(&id) {
                Some(j) => self.report(
                    format!("{section}[{i}].{field}"),
                    format!("duplicate {what} `{id}`: already declared at {section}[{j}]; ids must be unique"),
                ),
                None => {
                    first.insert(id, i);
                }
            }
        }
    }

    fn header(&mut self) {
        if self.m.version != SUPPORTED_VERSION {
            let v = self.m.version;
            self.report(
                "version",
                format!("version {v} is not supported: this build reads `version: {SUPPORTED_VERSION}`"),
            );
        }
        if self.m.name.trim().is_empty() {
            self.report("name", "`name` is empty; name the system this manifest describes (e.g. `e2i`)");
        }
    }

    fn signals(&mut self) {
        let s = &self.m.signals;
        for (i, role) in s.export_roles.iter().enumerate() {
            let ok = !role.is_empty()
                && role.len() <= 64
                && role.chars().all(|c| c.is_ascii_alphanumeric() || "_-:.".contains(c));
            if !ok {
                self.report(
                    format!("signals.export_roles[{i}]"),
                    "a role is 1 – 64 characters of letters, digits, `_`, `-`, `:` or `.`; write the role name as the token carries it",
                );
            }
        }
        let o = &s.optimization;
        if o.window == 0 || o.window > MAX_OPTIMIZATION_WINDOW {
            self.report(
                "signals.optimization.window",
                format!("window {} is outside 1 – {MAX_OPTIMIZATION_WINDOW}; the newest signals considered must be a positive number", o.window),
            );
        }
        self.unit_interval("signals.optimization.threshold".into(), "threshold", o.threshold);
        if o.min_signals == 0 || o.min_signals > o.window {
            self.report(
                "signals.optimization.min_signals",
                format!(
                    "min_signals {} must be from 1 to the window ({}); a mean over no signals says nothing",
                    o.min_signals, o.window
                ),
            );
        }
    }

    fn query(&mut self) {
        let q = &self.m.query;
        if let Some(fallback) = &q.fallback_intent {
            if self.m.intent(fallback).is_none() {
                let hint = suggest::did_you_mean(fallback, self.m.intents.iter().map(|i| i.id.as_str()));
                self.report(
                    "query.fallback_intent",
                    format!(
                        "intent `{fallback}` is not declared in `intents`{hint}; name a declared intent or remove the setting"
                    ),
                );
            }
        }
        for (field, value) in [
            ("max_query_chars", q.max_query_chars),
            ("max_entities", q.max_entities),
            ("max_entity_value_chars", q.max_entity_value_chars),
        ] {
            if value == 0 {
                self.report(
                    format!("query.{field}"),
                    format!("`{field}` is 0, which would refuse every query; set a positive limit"),
                );
            }
        }
        if q.deadline_slack > MAX_DEADLINE_SLACK {
            self.report(
                "query.deadline_slack",
                format!("deadline slack {} is longer than the maximum {MAX_DEADLINE_SLACK}; queries must end soon after their deadline", q.deadline_slack),
            );
        }
        if q.record_ttl < MIN_RECORD_TTL {
            self.report(
                "query.record_ttl",
                format!("record TTL {} is shorter than the minimum {MIN_RECORD_TTL}: records would expire while callers still read them", q.record_ttl),
            );
        }
    }

    /// `context`: counts within their bounds, keep ≤ history, decay in (0, 1], declared agents.
    fn context(&mut self) {
        use super::context_bounds as b;
        let c = self.m.context.clone();
        let ranges: [(&str, usize, usize, usize); 7] = [
            ("history_turns", c.history_turns, 1, b::MAX_HISTORY_TURNS),
            ("answer_chars", c.answer_chars, 16, b::MAX_ANSWER_CHARS),
            ("summary.threshold_tokens", c.summary.threshold_tokens, 64, b::MAX_THRESHOLD_TOKENS),
            ("summary.max_tokens", c.summary.max_tokens, 16, b::MAX_SUMMARY_TOKENS),
            ("notes.top_k", c.notes.top_k, 0, b::MAX_NOTES),
            ("notes.max_notes", c.notes.max_notes, 0, b::MAX_NOTES),
            ("budgets.classifier", c.budgets.classifier, 0, b::MAX_BUDGET_TOKENS),
        ];
        for (field, value, min, max) in ranges {
            if value < min || value > max {
                self.report(
                    format!("context.{field}"),
                    format!("{value} is outside {min} – {max}; pick a value in that range"),
                );
            }
        }
        if c.budgets.agent > b::MAX_BUDGET_TOKENS {
            self.report(
                "context.budgets.agent",
                format!("{} is outside 0 – {}; pick a value in that range", c.budgets.agent, b::MAX_BUDGET_TOKENS),
            );
        }
        if c.summary.keep_turns > c.history_turns {
            self.report(
                "context.summary.keep_turns",
                format!(
                    "{} turns kept after a compaction is more than `history_turns` ({}); keep at most that many",
                    c.summary.keep_turns, c.history_turns
                ),
            );
        }
        if c.notes.top_k > c.notes.max_notes {
            self.report(
                "context.notes.top_k",
                format!(
                    "top {} of at most {} stored notes; make `top_k` at most `max_notes`",
                    c.notes.top_k, c.notes.max_notes
                ),
            );
        }
        if !(c.notes.decay > 0.0 && c.notes.decay <= 1.0) {
            self.report("context.notes.decay", format!("decay {} must be above 0 and at most 1", c.notes.decay));
        }
        self.unit_interval("context.notes.min_score".into(), "score", c.notes.min_score);
        if let Some(ttl) = c.session_ttl {
            if ttl < MIN_RECORD_TTL {
                self.report(
                    "context.session_ttl",
                    format!("session TTL {ttl} is shorter than the minimum {MIN_RECORD_TTL}: a conversation would be forgotten mid-way"),
                );
            }
        }
        if let Some(agent) = &c.summary.agent {
            self.known_agent("context.summary.agent".into(), agent);
        }
        for (agent, budget) in &c.budgets.agents {
            if self.known_agent(format!("context.budgets.agents.{agent}"), agent) && *budget > b::MAX_BUDGET_TOKENS {
                self.report(
                    format!("context.budgets.agents.{agent}"),
                    format!("{budget} is outside 0 – {}; pick a value in that range", b::MAX_BUDGET_TOKENS),
                );
            }
        }
    }

    fn classifier(&mut self) {
        let c = &self.m.classifier;
        self.unit_interval("classifier.min_confidence".into(), "threshold", c.min_confidence);
        self.unit_interval("classifier.ambiguity_margin".into(), "margin", c.ambiguity_margin);
        if let Some(below) = c.cascade_below {
            self.unit_interval("classifier.cascade_below".into(), "threshold", below);
        }
        if let Some(encoder) = &c.encoder {
            let doubt = encoder.doubt;
            if encoder.model.trim().is_empty() {
                self.report("classifier.encoder.model", "is empty; name the encoder's folder");
            }
            self.unit_interval("classifier.encoder.doubt".into(), "probability", doubt);
        }
        self.scope();
    }

    /// `classifier.scope`: threshold and borderline band in [0, 1] (a band wider than the
    /// threshold reaches down to 0), and negative examples that are short, non-empty questions.
    fn scope(&mut self) {
        let s = &self.m.classifier.scope;
        let (threshold, borderline) = (s.threshold, s.borderline);
        self.unit_interval("classifier.scope.threshold".into(), "threshold", threshold);
        self.unit_interval("classifier.scope.borderline".into(), "band", borderline);

        let examples = self.m.classifier.scope.negative_examples.clone();
        self.short_texts(
            "classifier.scope.negative_examples",
            &examples,
            (MAX_NEGATIVE_EXAMPLES, MAX_NEGATIVE_EXAMPLE_CHARS),
            ("negative example", "a question this manifest does not answer"),
        );
        self.refused_phrases();
    }

    /// A list of short texts at `path`: at most `max.0` of them, none empty (`what.0` names one,
    /// `what.1` says what to write instead), none over `max.1` characters.
    fn short_texts(&mut self, path: &str, texts: &[String], max: (usize, usize), what: (&str, &str)) {
        let ((max_count, max_chars), (name, instead)) = (max, what);
        if texts.len() > max_count {
            self.report(path, format!("{} {name}s; at most {max_count} are read", texts.len()));
        }
        for (i, text) in texts.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let chars = text.chars().count();
            if text.trim().is_empty() {
                self.report(at, format!("a {name} is empty; write {instead}"));
            } else if chars > max_chars {
                self.report(at, format!("a {name} is {chars} characters long; at most {max_chars}"));
            }
        }
    }

    /// `classifier.scope.refuse`: short, non-empty phrases that none of the manifest's own
    /// keywords and utterances use (the manifest would refuse its own examples).
    fn refused_phrases(&mut self) {
        let phrases = self.m.classifier.scope.refuse.clone();
        self.short_texts(
            "classifier.scope.refuse",
            &phrases,
            (MAX_REFUSED_PHRASES, MAX_REFUSED_PHRASE_CHARS),
            ("refused phrase", "a phrase of a topic not to answer, e.g. \"side effect\""),
        );
        let refused = super::RefusedPhrases::new(&phrases);
        let mut clashes = Vec::new();
        for (i, intent) in self.m.intents.iter().enumerate() {
            for (field, texts) in [("keywords", &intent.keywords), ("utterances", &intent.utterances)] {
                for (j, text) in texts.iter().enumerate() {
                    if let Some(p) = refused.find(text) {
                        clashes.push((p, format!("intents[{i}].{field}[{j}]"), text.clone()));
                    }
                }
            }
        }
        for (p, at, text) in clashes {
            self.report(
                format!("classifier.scope.refuse[{p}]"),
                format!(
                    "\"{}\" is used by {at} (\"{text}\"): the manifest would refuse its own example",
                    phrases[p].trim()
                ),
            );
        }
    }

    fn tiers(&mut self) {
        self.unique("tiers", "tier", "tier", self.m.tiers.iter().map(|t| t.tier.to_string()));
        for (i, tier) in self.m.tiers.iter().enumerate() {
            let at = |field: &str| format!("tiers[{i}].{field}");
            if tier.tier > MAX_TIER {
                self.report(
                    at("tier"),
                    format!("tier {} is out of range: tiers are numbered 0 to {MAX_TIER}", tier.tier),
                );
            }
            if let TierTimeout::Fixed(timeout) = tier.timeout {
                self.attempt_timeout(at("timeout"), timeout);
            }
            if tier.max_retries > MAX_RETRIES {
                self.report(
                    at("max_retries"),
                    format!("{} retries is more than the maximum {MAX_RETRIES}", tier.max_retries),
                );
            }
            if !(tier.timeout_extension >= 1.0 && tier.timeout_extension.is_finite()) {
                self.report(
                    at("timeout_extension"),
                    format!(
                        "timeout extension {} must be at least 1.0: a retry after a timeout never gets less time",
                        tier.timeout_extension
                    ),
                );
            }
            self.backoff(&at("backoff"), &tier.backoff);
            self.fallback_target(at("fallback"), &tier.fallback, None);
        }
    }

    /// A per-attempt timeout: more than zero and within what a Lambda worker can run.
    fn attempt_timeout(&mut self, path: String, timeout: Dur) {
        if timeout.as_millis() == 0 {
            self.report(path, "timeout is 0, so every attempt would time out at once; set a positive duration");
        } else if timeout > MAX_ATTEMPT_TIMEOUT {
            self.report(
                path,
                format!(
                    "timeout {timeout} exceeds the maximum {MAX_ATTEMPT_TIMEOUT} per attempt \
                     (Lambda's 900s limit minus 30s for the worker); lower it or split the work into pipeline steps"
                ),
            );
        }
    }

    fn backoff(&mut self, path: &str, backoff: &Backoff) {
        if backoff.base.as_millis() == 0 {
            self.report(
                format!("{path}.base"),
                "backoff base is 0: retries would hammer a failing agent; set a positive duration",
            );
        }
        if backoff.max.as_millis() == 0 {
            self.report(format!("{path}.max"), "backoff max is 0; set a positive duration at least as long as `base`");
        }
        if backoff.base > backoff.max {
            self.report(
                format!("{path}.base"),
                format!(
                    "backoff base {} is longer than its max {}; base must be at most max",
                    backoff.base, backoff.max
                ),
            );
        }
    }

    /// A fallback's target: a declared agent other than `owner` (the agent it belongs to), or a
    /// non-empty template.
    fn fallback_target(&mut self, path: String, fallback: &Fallback, owner: Option<&str>) {
        match fallback {
            Fallback::None => {}
            Fallback::Template(text) => {
                if text.trim().is_empty() {
                    self.report(
                        path,
                        "fallback template is empty; write the text to answer with, or use `fallback: none`",
                    );
                }
            }
            Fallback::Agent(id) => {
                if owner == Some(id.as_str()) {
                    self.report(
                        path,
                        format!("agent `{id}` falls back to itself; name another agent, a template or `none`"),
                    );
                } else {
                    self.known_agent(path, id);
                }
            }
        }
    }

    fn agents(&mut self) {
        self.unique("agents", "id", "agent id", self.m.agents.iter().map(|a| a.id.clone()));
        let declared: Vec<String> = self.m.tiers.iter().map(|t| t.tier.to_string()).collect();
        for (i, agent) in self.m.agents.iter().enumerate() {
            let at = |field: &str| format!("agents[{i}].{field}");
            if !is_agent_id(&agent.id) {
                self.report(
                    at("id"),
                    format!("agent id `{}` must match ^[a-z][a-z0-9_]{{0,63}}$ (lower case letter first, then letters, digits, `_`)", agent.id),
                );
            }
            match self.m.tier(agent.tier) {
                None => self.report(
                    at("tier"),
                    format!(
                        "tier {} is not declared in `tiers` (declared: {}); declare it or move the agent",
                        agent.tier,
                        declared.join(", ")
                    ),
                ),
                Some(tier) => {
                    if tier.timeout == TierTimeout::Variable && agent.timeout.is_none() {
                        self.report(
                            at("timeout"),
                            format!(
                                "tier {} has `timeout: variable`, so every agent on it must set `timeout`",
                                agent.tier
                            ),
                        );
                    }
                }
            }
            if let Some(timeout) = agent.timeout {
                self.attempt_timeout(at("timeout"), timeout);
            }
            if let Some(retries) = agent.max_retries {
                if retries > MAX_RETRIES {
                    self.report(at("max_retries"), format!("{retries} retries is more than the maximum {MAX_RETRIES}"));
                }
            }
            if let Some(fallback) = &agent.fallback {
                self.fallback_target(at("fallback"), fallback, Some(&agent.id));
            }
            self.unit_interval(at("required_confidence"), "required confidence", agent.required_confidence);
            self.kind_settings(i, agent);
            self.placeholders(i, agent);
        }
    }

    /// Every `{placeholder}` of a builtin agent's texts names an input or a declared entity type.
    fn placeholders(&mut self, i: usize, agent: &Agent) {
        let Some(builtin) = &agent.builtin else { return };
        let mut texts = vec![(format!("agents[{i}].builtin.response"), builtin.response.as_str())];
        for (j, e) in builtin.evidence.iter().enumerate() {
            texts.push((format!("agents[{i}].builtin.evidence[{j}].text"), e.text.as_str()));
        }
        for (path, text) in texts {
            for name in placeholders(text) {
                if !TEMPLATE_INPUTS.contains(&name) && !self.m.entities.contains_key(name) {
                    self.report(
                        path.clone(),
                        format!(
                            "placeholder `{{{name}}}` names no declared entity type (declared: {}) nor an input ({}); declare it or fix the name",
                            declared_list(self.m.entities.keys()),
                            TEMPLATE_INPUTS.join(", ")
                        ),
                    );
                }
            }
        }
        for key in builtin.defaults.keys() {
            if !TEMPLATE_INPUTS.contains(&key.as_str()) && !self.m.entities.contains_key(key) {
                self.report(
                    format!("agents[{i}].builtin.defaults.{key}"),
                    format!("`{key}` names no declared entity type; a default stands in for a missing entity"),
                );
            }
        }
    }

    /// The settings block named by `kind` is present; the other kinds' blocks are absent.
    fn kind_settings(&mut self, i: usize, agent: &Agent) {
        let kind = agent.kind.as_str();
        let blocks = [
            ("builtin", agent.builtin.is_some()),
            ("scripted", agent.scripted.is_some()),
            ("llm", agent.llm.is_some()),
            ("http", agent.http.is_some()),
            ("lambda", agent.lambda.is_some()),
            ("retriever", agent.retriever.is_some()),
        ];
        for (block, present) in blocks {
            if block == kind && !present {
                self.report(format!("agents[{i}]"), format!("`kind: {kind}` needs a `{kind}:` settings block; add it"));
            }
            if block != kind && present {
                self.report(
                    format!("agents[{i}].{block}"),
                    format!("a `{block}:` block on a `kind: {kind}` agent is never used; remove it or change `kind`"),
                );
            }
        }
        if let Some(builtin) = &agent.builtin {
            self.unit_interval(format!("agents[{i}].builtin.confidence"), "confidence", builtin.confidence);
            for (j, evidence) in builtin.evidence.iter().enumerate() {
                self.unit_interval(
                    format!("agents[{i}].builtin.evidence[{j}].relevance"),
                    "relevance",
                    evidence.relevance,
                );
            }
        }
        if let Some(confidence) = agent.scripted.as_ref().and_then(|s| s.confidence) {
            self.unit_interval(format!("agents[{i}].scripted.confidence"), "confidence", confidence);
        }
        self.remote_kinds(i, agent);
        self.retriever(i, agent);
    }

    /// Follows each agent's effective fallback; a chain that comes back to an agent is a loop.
    fn fallback_loops(&mut self) {
        let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
        for agent in &self.m.agents {
            let mut chain: Vec<&str> = vec![&agent.id];
            let mut current = agent;
            while let Fallback::Agent(next) = self.m.agent_fallback(current) {
                let Some(next_agent) = self.m.agent(&next) else { break };
                if let Some(start) = chain.iter().position(|id| *id == next) {
                    let cycle: Vec<&str> = chain[start..].to_vec();
                    // A one-agent loop is an explicit self-fallback, reported with the agent.
                    if cycle.len() > 1 && seen.insert(canonical(&cycle)) {
                        self.report_loop(&cycle);
                    }
                    break;
                }
                chain.push(&next_agent.id);
                current = next_agent;
            }
        }
    }

    fn report_loop(&mut self, cycle: &[&str]) {
        let Some(first) = cycle.first() else { return };
        let mut shown: Vec<&str> = cycle.to_vec();
        shown.push(first);
        let path = self.fallback_path(first);
        self.report(
            path,
            format!(
                "fallback loop: {}; every fallback chain must end in `none`, a template or an agent without a fallback",
                shown.join(" -> ")
            ),
        );
    }

    /// Where an agent's effective fallback is written: its own `fallback`, else its tier's.
    fn fallback_path(&self, id: &str) -> String {
        let Some(i) = self.m.agents.iter().position(|a| a.id == id) else { return "agents".into() };
        let agent = &self.m.agents[i];
        if agent.fallback.is_some() {
            return format!("agents[{i}].fallback");
        }
        match self.m.tiers.iter().position(|t| t.tier == agent.tier) {
            Some(t) => format!("tiers[{t}].fallback"),
            None => format!("agents[{i}].fallback"),
        }
    }

    fn intents(&mut self) {
        if self.m.intents.is_empty() {
            self.report("intents", "no intents declared; declare at least one intent and its route");
        }
        self.unique("intents", "id", "intent id", self.m.intents.iter().map(|i| i.id.clone()));
        for (i, intent) in self.m.intents.iter().enumerate() {
            let at = |field: &str| format!("intents[{i}].{field}");
            if intent.id.trim().is_empty() {
                self.report(at("id"), "intent id is empty; name the intent");
            }
            if let Some(role) = &intent.required_role {
                if role.trim().is_empty() {
                    self.report(at("required_role"), "`required_role` is empty; name the role or remove the setting");
                }
            }
            if intent.utterances.is_empty() && intent.keywords.is_empty() {
                self.report(
                    format!("intents[{i}]"),
                    format!("intent `{}` has neither `utterances` nor `keywords`: the classifier cannot learn it; add example questions", intent.id),
                );
            }
            for (j, name) in intent.required_entities.iter().enumerate() {
                if !self.m.entities.contains_key(name) {
                    self.report(
                        format!("intents[{i}].required_entities[{j}]"),
                        format!(
                            "`{name}` is not a declared entity type (declared: {}); declare it under `entities` or remove it",
                            declared_list(self.m.entities.keys())
                        ),
                    );
                }
            }
            for (field, list) in [("utterances", &intent.utterances), ("keywords", &intent.keywords)] {
                for (j, text) in list.iter().enumerate() {
                    if text.trim().is_empty() {
                        self.report(
                            format!("intents[{i}].{field}[{j}]"),
                            format!("empty entry in `{field}`; remove it"),
                        );
                    }
                }
            }
            self.route(i);
        }
    }

    fn route(&mut self, i: usize) {
        let Some(intent) = self.m.intents.get(i) else { return };
        let route = &intent.route;
        let at = |field: &str| format!("intents[{i}].route.{field}");
        // The tier the route's first dispatch runs on, when it can be known.
        let mut first_tier: Option<(u8, String)> = None;
        match (&route.primary, &route.pipeline) {
            (Some(_), Some(_)) => self.report(
                format!("intents[{i}].route"),
                "route sets both `primary` and `pipeline`; set exactly one of them",
            ),
            (None, None) if route.mode.is_none() => self.report(
                format!("intents[{i}].route"),
                "route sets neither `primary` nor `pipeline`; set exactly one of them",
            ),
            (None, None) => {}
            (Some(primary), None) => {
                if self.known_agent(at("primary"), primary) {
                    first_tier = self.m.agent(primary).map(|a| (a.tier, format!("the primary agent `{primary}`")));
                }
            }
            (None, Some(pipeline)) => match self.m.pipeline(pipeline) {
                None => {
                    let hint = suggest::did_you_mean(pipeline, self.m.pipelines.iter().map(|p| p.id.as_str()));
                    self.report(
                        at("pipeline"),
                        format!("pipeline `{pipeline}` is not declared in `pipelines`{hint}; declare it or fix the spelling"),
                    )
                }
                Some(p) => {
                    first_tier = p
                        .steps
                        .first()
                        .and_then(|s| self.m.agent(&s.agent))
                        .map(|a| (a.tier, format!("pipeline `{pipeline}`'s first step `{}`", a.id)));
                }
            },
        }
        if let (Some(tier), Some((actual, whose))) = (route.tier, first_tier) {
            if tier != actual {
                self.report(
                    at("tier"),
                    format!("tier {tier} does not match {whose}, which runs on tier {actual}; write `tier: {actual}`"),
                );
            }
        }
        let mut listed: BTreeMap<&str, usize> = BTreeMap::new();
        for (j, agent) in route.supporting.iter().enumerate() {
            let path = format!("intents[{i}].route.supporting[{j}]");
            if route.primary.as_deref() == Some(agent.as_str()) {
                self.report(path, format!("`{agent}` is the primary agent; a supporting agent must be another agent"));
            } else if let Some(k) = listed.get(agent.as_str()) {
                self.report(
                    path,
                    format!("`{agent}` is already listed at supporting[{k}]; list each supporting agent once"),
                );
            } else {
                self.known_agent(path, agent);
            }
            listed.entry(agent).or_insert(j);
        }
        if route.deadline.is_some_and(|d| d.as_millis() == 0) {
            self.report(
                at("deadline"),
                "deadline is 0, so every query would fail at once; set a positive duration or remove it",
            );
        }
        self.route_modes(i);
    }

    fn pipelines(&mut self) {
        self.unique("pipelines", "id", "pipeline id", self.m.pipelines.iter().map(|p| p.id.clone()));
        for (i, pipeline) in self.m.pipelines.iter().enumerate() {
            if pipeline.steps.is_empty() {
                self.report(
                    format!("pipelines[{i}].steps"),
                    format!("pipeline `{}` has no steps; list at least one agent", pipeline.id),
                );
            }
            let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
            for (j, step) in pipeline.steps.iter().enumerate() {
                let at = format!("pipelines[{i}].steps[{j}]");
                if let Some(k) = seen.get(step.agent.as_str()) {
                    self.report(
                        format!("{at}.agent"),
                        format!("agent `{}` already runs at steps[{k}]: an agent appearing twice makes a cycle in the pipeline", step.agent),
                    );
                } else {
                    self.known_agent(format!("{at}.agent"), &step.agent);
                    seen.insert(&step.agent, j);
                }
                if let Some(gate) = &step.gate {
                    if gate.field.trim().is_empty() {
                        self.report(
                            format!("{at}.gate.field"),
                            "gate `field` is empty; name the dotted path into `primary_output` to check",
                        );
                    }
                    match (gate.min, &gate.equals) {
                        (Some(_), Some(_)) => {
                            self.report(format!("{at}.gate"), "gate sets both `min` and `equals`; set exactly one")
                        }
                        (None, None) => {
                            self.report(format!("{at}.gate"), "gate sets neither `min` nor `equals`; set exactly one")
                        }
                        (Some(min), None) if !min.is_finite() => {
                            self.report(format!("{at}.gate.min"), format!("gate min {min} is not a finite number"))
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    fn entities(&mut self) {
        if let Some(zone) = &self.m.timezone {
            if zone.parse::<chrono_tz::Tz>().is_err() {
                self.report(
                    "timezone",
                    format!("`{zone}` is not a time zone; write an IANA name such as `Europe/Vienna` or `UTC`"),
                );
            }
        }
        for (name, spec) in &self.m.entities {
            let at = format!("entities.{name}");
            if !is_agent_id(name) {
                self.report(&at, format!("entity type `{name}` must be lower snake_case: ^[a-z][a-z0-9_]{{0,63}}$"));
            }
            if spec.description.trim().is_empty() {
                self.report(
                    format!("{at}.description"),
                    "no `description`; write a short noun phrase (\"the city you fly to\"): a question asking for the value uses it",
                );
            }
            let sources: Vec<&str> = [
                spec.gazetteer.is_some().then_some("gazetteer"),
                spec.patterns.is_some().then_some("patterns"),
                spec.kind.is_some().then_some("kind"),
            ]
            .into_iter()
            .flatten()
            .collect();
            match sources.len() {
                0 => self.report(
                    &at,
                    "no source; give exactly one of `gazetteer` (known values), `patterns` (regular expressions) or `kind` (date, time, number, money, duration, email, time_period)",
                ),
                1 => {}
                _ => self.report(&at, format!("{} sources ({}); give exactly one", sources.len(), sources.join(", "))),
            }
            if spec.fuzzy.is_some() && spec.gazetteer.is_none() {
                self.report(format!("{at}.fuzzy"), "`fuzzy` applies to a gazetteer only; remove it");
            }
            if matches!(&spec.gazetteer, Some(g) if g.is_empty()) {
                self.report(format!("{at}.gazetteer"), "the gazetteer is empty; list the known values");
            }
            if matches!(&spec.patterns, Some(p) if p.is_empty()) {
                self.report(format!("{at}.patterns"), "no patterns; write at least one regular expression");
            }
            for (j, pattern) in spec.patterns().iter().enumerate() {
                // Parsed, not compiled: the parser is the one `regex` uses, so a pattern that
                // parses compiles (the classifier compiles it when it is built); compiling here
                // cost every function's init about 8 million instructions (Unicode classes).
                if let Err(e) = regex_syntax::Parser::new().parse(pattern) {
                    self.report(
                        format!("{at}.patterns[{j}]"),
                        format!("pattern `{pattern}` does not compile as a regular expression: {}", regex_reason(&e)),
                    );
                }
            }
            let mut values: BTreeMap<String, usize> = BTreeMap::new();
            for (j, entry) in spec.gazetteer().iter().enumerate() {
                let path = match entry {
                    GazetteerEntry::Value(_) => format!("{at}.gazetteer[{j}]"),
                    GazetteerEntry::WithAliases { .. } => format!("{at}.gazetteer[{j}].value"),
                };
                let value = entry.value();
                if value.trim().is_empty() {
                    self.report(path, "gazetteer value is empty; write the canonical spelling");
                    continue;
                }
                match values.get(&value.trim().to_lowercase()) {
                    Some(k) => self.report(
                        path,
                        format!("value `{value}` is already listed at gazetteer[{k}] (case-insensitive); list each value once"),
                    ),
                    None => {
                        values.insert(value.trim().to_lowercase(), j);
                    }
                }
                for (k, alias) in entry.aliases().iter().enumerate() {
                    if alias.trim().is_empty() {
                        self.report(format!("{at}.gazetteer[{j}].aliases[{k}]"), "alias is empty; remove it");
                    }
                }
            }
        }
    }
}

/// What a builtin template's `{placeholder}` may name besides a declared entity type.
pub const TEMPLATE_INPUTS: [&str; 3] = ["question", "intent", "entities"];

/// The `{name}` placeholders of a template, in order (`{` not followed by `name}` is text).
pub fn placeholders(template: &str) -> impl Iterator<Item = &str> {
    template.match_indices('{').filter_map(move |(start, _)| {
        let after = &template[start + 1..];
        let end = after.find('}')?;
        let name = &after[..end];
        (end > 0 && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')).then_some(name)
    })
}

mod names;
use names::{canonical, declared_list, is_agent_id, regex_reason};
