//! The engine on AWS: dependencies built once per process from the environment the SAM
//! template sets (`SWITCHYARD_TABLE`, `SWITCHYARD_QUEUE_*`, `SWITCHYARD_TIER`,
//! optionally `SWITCHYARD_MANIFEST`), with the DynamoDB and SQS adapters.
//!
//! The Lambda functions, `switchyard serve --backend aws` and `switchyard ask --backend aws`
//! all build their dependencies here, so the local runs read their configuration exactly as
//! the deployed functions do.

use crate::dynamodb::DynamoStore;
use crate::sdk::aws_config_from_env;
use crate::sqs::{MissingQueueUrl, SqsQueue};
use std::path::Path;
use std::sync::Arc;
use switchyard_agents::Agents;
use switchyard_engine::ports::TokioClock;
use switchyard_engine::{Deps, EngineSettings};
use switchyard_model::manifest::{Manifest, ManifestError};
use switchyard_model::topology::{Topology, ENV_ENCODER, ENV_MANIFEST, ENV_TABLE, ENV_TIER};

/// Why a process could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The manifest is missing or invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A required environment variable is not set.
    #[error(
        "environment variable {0} is not set (the SAM template sets it; locally see `switchyard setup --backend aws`)"
    )]
    MissingEnv(&'static str),
    /// A queue URL is not set.
    #[error(transparent)]
    Queue(#[from] MissingQueueUrl),
    /// `SWITCHYARD_TIER` is not a tier of the manifest.
    #[error("SWITCHYARD_TIER={0} is not a tier of the manifest")]
    Tier(String),
    /// An agent kind's configuration is unusable (a provider without its base URL, …).
    #[error("agent configuration: {}", .0.join("; "))]
    Agents(Vec<String>),
    /// The manifest's trained router is missing, stale or damaged: a deployed function never
    /// trains, so it does not start.
    #[error("{0}")]
    Router(String),
}

/// The manifest at `SWITCHYARD_MANIFEST` (from its artifact's JSON form when the file is
/// unchanged since `switchyard train`), or the one embedded in the binary; its cascade's
/// encoder read from `SWITCHYARD_ENCODER` when that is set (where the template's encoder layer
/// puts it).
pub fn manifest_from_env() -> Result<Manifest, ManifestError> {
    let mut manifest = match std::env::var(ENV_MANIFEST) {
        Ok(path) if !path.is_empty() => switchyard_core::router::load_manifest(Path::new(&path))?,
        _ => Manifest::embedded()?,
    };
    manifest.encoder_dir = std::env::var_os(ENV_ENCODER).filter(|dir| !dir.is_empty()).map(Into::into);
    Ok(manifest)
}

/// The agent-worker's tier from `SWITCHYARD_TIER`, checked against the manifest.
pub fn tier_from_env(manifest: &Manifest) -> Result<u8, StartupError> {
    let raw = std::env::var(ENV_TIER).map_err(|_| StartupError::MissingEnv(ENV_TIER))?;
    raw.trim().parse::<u8>().ok().filter(|t| manifest.tier(*t).is_some()).ok_or(StartupError::Tier(raw))
}

/// The engine wired to DynamoDB and SQS, with the adapters kept for their request counts.
#[derive(Debug)]
pub struct AwsSystem {
    /// What every step gets.
    pub deps: Arc<Deps>,
    /// The table.
    pub store: Arc<DynamoStore>,
    /// The queues.
    pub queue: Arc<SqsQueue>,
    /// The manifest's resources.
    pub topology: Topology,
    /// The agent runtime (provider clients built once).
    pub agents: Arc<Agents>,
}

impl AwsSystem {
    /// Build from the environment (manifest, AWS config honouring `AWS_ENDPOINT_URL`, table and
    /// queue URLs).
    pub async fn from_env(settings: EngineSettings) -> Result<AwsSystem, StartupError> {
        let manifest = Arc::new(manifest_from_env()?);
        let system = AwsSystem::with_manifest(manifest, settings).await?;
        let problems = system.agents.problems();
        if problems.is_empty() {
            Ok(system)
        } else {
            Err(StartupError::Agents(problems))
        }
    }

    /// Check the manifest's trained router (the init of intake and events-stream, the functions
    /// that classify questions; the router itself is read with the classifier, on the first
    /// question); refuses when the
    /// artifact is missing, stale or damaged, naming `switchyard train`. From then on the process
    /// never trains a router.
    pub fn require_router(&self) -> Result<(), StartupError> {
        match switchyard_core::router::startup_problem(&self.deps.manifest) {
            None => {
                switchyard_core::router::never_train();
                Ok(())
            }
            Some(problem) => Err(StartupError::Router(problem)),
        }
    }

    /// Build for `manifest` with the AWS resources named in the environment.
    pub async fn with_manifest(manifest: Arc<Manifest>, settings: EngineSettings) -> Result<AwsSystem, StartupError> {
        let table = std::env::var(ENV_TABLE).map_err(|_| StartupError::MissingEnv(ENV_TABLE))?;
        let config = aws_config_from_env().await;
        let topology = Topology::for_manifest(&manifest);
        let store = Arc::new(DynamoStore::new(aws_sdk_dynamodb::Client::new(&config), table));
        let queue = Arc::new(SqsQueue::from_env(aws_sdk_sqs::Client::new(&config), &topology)?);
        Ok(AwsSystem::assemble(manifest, settings, store, queue, topology))
    }

    /// Build for `manifest` on an explicit table and queue URLs (tests, tools).
    pub fn with_resources(
        manifest: Arc<Manifest>,
        settings: EngineSettings,
        config: &aws_config::SdkConfig,
        table: &str,
        queue_urls: std::collections::BTreeMap<switchyard_engine::ports::QueueId, String>,
    ) -> AwsSystem {
        let topology = Topology::for_manifest(&manifest);
        let store = Arc::new(DynamoStore::new(aws_sdk_dynamodb::Client::new(config), table.to_string()));
        let queue = Arc::new(SqsQueue::new(aws_sdk_sqs::Client::new(config), queue_urls));
        AwsSystem::assemble(manifest, settings, store, queue, topology)
    }

    fn assemble(
        manifest: Arc<Manifest>,
        settings: EngineSettings,
        store: Arc<DynamoStore>,
        queue: Arc<SqsQueue>,
        topology: Topology,
    ) -> AwsSystem {
        let agents = Arc::new(Agents::new(&manifest));
        let deps =
            Deps::new(manifest, store.clone(), queue.clone(), Arc::new(TokioClock::new()), agents.clone(), settings);
        AwsSystem { deps: Arc::new(deps), store, queue, topology, agents }
    }
}
