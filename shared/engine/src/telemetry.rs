//! Traces and metrics leaving the process: OpenTelemetry spans over OTLP/HTTP ([`otlp`]) when
//! the standard `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and CloudWatch embedded-metric-format lines
//! per agent call ([`emf`]). [`init`] installs the process's `tracing` subscriber with both the
//! log output and, when configured, the OTLP layer; the function mains, `switchyard serve` and
//! `ask` call it once at start-up.

pub mod emf;
pub mod otlp;
pub mod trace;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOutput {
    /// Human-readable lines on stderr (the CLI).
    PlainStderr,
    /// JSON lines on stdout (Lambda: CloudWatch Logs reads stdout).
    JsonStdout,
}

/// Install the tracing subscriber: logs filtered by `RUST_LOG` (else `default_filter`), and the
/// OTLP exporter for the engine's spans when the environment configures one, under service name
/// `service` unless `OTEL_SERVICE_NAME` says otherwise. Unusable OTLP settings are logged as a
/// warning naming the variable and the process runs without export. Returns whether spans are
/// exported. A second call changes nothing.
pub fn init(service: &str, output: LogOutput, default_filter: &str) -> bool {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let logs: Box<dyn Layer<Registry> + Send + Sync> = match output {
        LogOutput::PlainStderr => {
            tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter).boxed()
        }
        LogOutput::JsonStdout => {
            tracing_subscriber::fmt::layer().json().with_writer(std::io::stdout).with_filter(filter).boxed()
        }
    };
    let (otlp, problem) = match otlp::OtlpConfig::from_env(service) {
        Ok(Some(config)) => match otlp::OtlpLayer::start(config) {
            Ok(layer) => (Some(layer), None),
            Err(e) => (None, Some(format!("the OTLP exporter thread did not start: {e}"))),
        },
        Ok(None) => (None, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let exporting = otlp.is_some();
    let otlp = otlp.map(|l| {
        l.with_filter(tracing_subscriber::filter::Targets::new().with_target(otlp::SPAN_TARGET, tracing::Level::INFO))
    });
    let installed = tracing_subscriber::registry().with(logs).with(otlp).try_init().is_ok();
    if let Some(problem) = problem {
        tracing::warn!(%problem, "traces are not exported");
    }
    installed && exporting
}
