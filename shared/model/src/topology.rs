//! The AWS resources a manifest needs, derived in one place.
//!
//! `switchyard setup --backend aws` creates them on an endpoint, the SAM template in `infra/`
//! is rendered from or checked against them, and the Lambda functions read their names from the
//! environment variables named here. Because all three read [`Topology::for_manifest`], a tier
//! added to `routing.yaml` cannot exist in one and be missing from another.

use crate::limits::{LAMBDA_MAX_TIMEOUT_S, MAX_ATTEMPT_TIMEOUT_MS, MAX_RECEIVE_COUNT, WORKER_MARGIN_S};
use crate::manifest::{Manifest, TierTimeout};
use crate::records::QueueId;

/// Visibility timeout = this × the consuming function's timeout (AWS's guidance for SQS event
/// sources).
pub const VISIBILITY_FACTOR: u64 = 6;
/// Timeout of the intake, router and synthesizer functions.
pub const CONTROL_FUNCTION_TIMEOUT_S: u64 = 30;

/// Environment variable with the DynamoDB table name.
pub const ENV_TABLE: &str = "SWITCHYARD_TABLE";
/// Environment variable with the agent-worker's tier.
pub const ENV_TIER: &str = "SWITCHYARD_TIER";
/// Environment variable with a manifest path (the embedded `routing.yaml` when unset).
pub const ENV_MANIFEST: &str = "SWITCHYARD_MANIFEST";

/// Environment variable with the folder of the cascade's sentence encoder in a deployed
/// function (`classifier.encoder.model` when unset); the template points it at the encoder layer.
pub const ENV_ENCODER: &str = "SWITCHYARD_ENCODER";

/// The single table's key schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// Environment variable holding the table name.
    pub name_env: &'static str,
    /// Default table name (`switchyard`).
    pub default_name: &'static str,
    /// Partition key attribute (string).
    pub partition_key: &'static str,
    /// Sort key attribute (string).
    pub sort_key: &'static str,
    /// TTL attribute (number, epoch seconds).
    pub ttl_attribute: &'static str,
    /// Global secondary indexes.
    pub indexes: Vec<IndexSpec>,
}

/// A global secondary index (string keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    /// Index name.
    pub name: &'static str,
    /// Its partition key attribute.
    pub partition_key: &'static str,
    /// Its sort key attribute.
    pub sort_key: &'static str,
    /// Attributes projected besides the keys; none: keys only.
    pub include: &'static [&'static str],
}

/// A queue with its dead-letter queue and its consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// The logical queue.
    pub id: QueueId,
    /// Physical name suffix: `route`, `tier-2`, `synth` (the DLQ adds `-dlq`).
    pub name: String,
    /// Environment variable holding the queue URL.
    pub url_env: String,
    /// Function that consumes it: `router`, `agent-worker-tier-2`, `synthesizer`.
    pub consumer: String,
    /// The consumer's timeout.
    pub function_timeout_s: u64,
    /// Visibility timeout (≥ 6 × the function timeout).
    pub visibility_timeout_s: u64,
    /// Receives before dead-lettering.
    pub max_receive_count: u32,
    /// Lambda event source batch size.
    pub batch_size: u32,
    /// Reserved concurrency of the consumer, if the manifest sets one.
    pub reserved_concurrency: Option<u32>,
}

/// Everything a deployment of one manifest needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// The table.
    pub table: TableSpec,
    /// Route queue, one queue per tier, synth queue.
    pub queues: Vec<QueueSpec>,
}

/// Environment variable holding the URL of a queue: `SWITCHYARD_QUEUE_ROUTE`,
/// `SWITCHYARD_QUEUE_TIER_2`, `SWITCHYARD_QUEUE_SYNTH`.
pub fn queue_url_env(id: QueueId) -> String {
    let name = id.name().to_uppercase().replace('-', "_");
    format!("SWITCHYARD_QUEUE_{name}")
}

/// The longest attempt timeout of a tier's agents, after timeout extensions, capped at
/// [`MAX_ATTEMPT_TIMEOUT_MS`].
pub fn tier_max_attempt_ms(manifest: &Manifest, tier: u8) -> u64 {
    manifest
        .agents
        .iter()
        .filter(|a| a.tier == tier)
        .filter_map(|a| {
            let base = manifest.agent_timeout(a)?.as_millis();
            let retries = manifest.agent_max_retries(a);
            let ext = manifest.tier(tier).map(|t| t.timeout_extension).unwrap_or(1.0);
            Some(extended_timeout_ms(base, ext, retries))
        })
        .max()
        .or_else(|| match manifest.tier(tier)?.timeout {
            TierTimeout::Fixed(d) => Some(d.as_millis().min(MAX_ATTEMPT_TIMEOUT_MS)),
            TierTimeout::Variable => None,
        })
        .unwrap_or(MAX_ATTEMPT_TIMEOUT_MS)
}

/// Timeout of the attempt after `timeouts` timed-out attempts: `base × extension^timeouts`,
/// capped at [`MAX_ATTEMPT_TIMEOUT_MS`].
pub fn extended_timeout_ms(base_ms: u64, extension: f64, timeouts: u32) -> u64 {
    let factor = extension.max(1.0).powi(timeouts.min(30) as i32);
    ((base_ms as f64 * factor).round() as u64).min(MAX_ATTEMPT_TIMEOUT_MS)
}

impl Topology {
    /// The resources for `manifest`.
    pub fn for_manifest(manifest: &Manifest) -> Topology {
        let control = |id: QueueId, consumer: &str| QueueSpec {
            id,
            name: id.name(),
            url_env: queue_url_env(id),
            consumer: consumer.to_string(),
            function_timeout_s: CONTROL_FUNCTION_TIMEOUT_S,
            visibility_timeout_s: CONTROL_FUNCTION_TIMEOUT_S * VISIBILITY_FACTOR,
            max_receive_count: MAX_RECEIVE_COUNT,
            batch_size: 10,
            reserved_concurrency: None,
        };
        let mut queues = vec![control(QueueId::route(), "router")];
        let mut tiers: Vec<_> = manifest.tiers.iter().collect();
        tiers.sort_by_key(|t| t.tier);
        for tier in tiers {
            let id = QueueId::tier(tier.tier);
            let attempt_s = tier_max_attempt_ms(manifest, tier.tier).div_ceil(1_000);
            let function_timeout_s = (attempt_s + WORKER_MARGIN_S).min(LAMBDA_MAX_TIMEOUT_S);
            queues.push(QueueSpec {
                id,
                name: id.name(),
                url_env: queue_url_env(id),
                consumer: format!("agent-worker-{}", id.name()),
                function_timeout_s,
                visibility_timeout_s: function_timeout_s * VISIBILITY_FACTOR,
                max_receive_count: MAX_RECEIVE_COUNT,
                batch_size: 1,
                reserved_concurrency: tier.reserved_concurrency,
            });
        }
        queues.push(control(QueueId::synth(), "synthesizer"));
        Topology {
            table: TableSpec {
                name_env: ENV_TABLE,
                default_name: "switchyard",
                partition_key: "pk",
                sort_key: "sk",
                ttl_attribute: "expires_at",
                indexes: vec![
                    IndexSpec { name: "by_user", partition_key: "gsi1pk", sort_key: "gsi1sk", include: &[] },
                    // Finished training signals by day of recording (adapters/dynamodb_signals.rs).
                    IndexSpec {
                        name: "by_signal_day",
                        partition_key: "gsi2pk",
                        sort_key: "gsi2sk",
                        include: &["sig", "expires_at"],
                    },
                ],
            },
            queues,
        }
    }

    /// The spec of one queue.
    pub fn queue(&self, id: QueueId) -> Option<&QueueSpec> {
        let base = QueueId { kind: id.kind, dead_letter: false };
        self.queues.iter().find(|q| q.id == base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_manifest_gets_a_route_queue_six_tier_queues_and_a_synth_queue() {
        let m = Manifest::embedded().expect("shipped manifest is valid");
        let t = Topology::for_manifest(&m);
        let names: Vec<_> = t.queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["route", "tier-0", "tier-1", "tier-2", "tier-3", "tier-4", "tier-5", "synth"]);
        for q in &t.queues {
            assert!(q.function_timeout_s <= LAMBDA_MAX_TIMEOUT_S, "{}", q.name);
            assert!(q.visibility_timeout_s >= 6 * q.function_timeout_s, "{}", q.name);
        }
        // Tier 2: 120 s, extended twice by 1.5 = 270 s per attempt at most, + margin.
        assert_eq!(t.queue(QueueId::tier(2)).map(|q| q.function_timeout_s), Some(300));
        assert_eq!(queue_url_env(QueueId::tier(2)), "SWITCHYARD_QUEUE_TIER_2");
    }
}
