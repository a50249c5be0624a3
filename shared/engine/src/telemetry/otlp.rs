//! OpenTelemetry traces over OTLP/HTTP with the JSON encoding, from `tracing` spans.
//!
//! [`OtlpLayer`] is a `tracing_subscriber` layer. Every span of the engine (target `shared…`:
//! the `sqs_record` span of each message, the `#[instrument]`ed steps `submit`, `route`,
//! `run_dispatch`, `synthesize`, `deadline`) becomes an OTLP span when it closes:
//!
//! - **trace id** = the query id's 32 hex digits (the span's `query_id` or `trace_id` field, or
//!   an ancestor's), the same id the W3C `traceparent` of every queue message carries, so one
//!   query is one trace across every SQS hop and process;
//! - **parent** = the nearest exported ancestor span in this process, else the span id of the
//!   incoming message's `traceparent` (the `parent_span_id` field of `sqs_record`); the engine
//!   stamps each message it sends with the span id of the step that sends it
//!   ([`current_span_id`]), so the tree follows the flow: `submit` → `sqs_record` → `route` →
//!   `sqs_record` → `run_dispatch` → … → `synthesize`;
//! - a span with an `ERROR` event inside gets status `ERROR`.
//!
//! A span without any query id in its ancestry (start-up, pollers) is not exported.
//! Spans go to an exporter thread with its own small runtime (so a paused test clock or a busy
//! runtime cannot stall it), which posts batches to `…/v1/traces` every 200 ms, on [`flush`],
//! and when a batch reaches 256 spans.
//!
//! Why hand-written rather than the `opentelemetry-otlp` crates: the OTLP/HTTP JSON mapping is a
//! small, stable, published encoding (hex trace and span ids, nanosecond times as strings), the
//! engine already has an HTTP client, and the opentelemetry SDK + OTLP exporter stack would add
//! a large dependency tree to every Lambda binary and to the build of a two-core machine.

use crate::http_client::HttpClient;
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Spans per export request, at most.
const MAX_BATCH: usize = 256;
/// How long a finished span waits for more before its batch is sent.
const BATCH_INTERVAL: Duration = Duration::from_millis(200);
/// Longest wait for one export request.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where traces go and under which service name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The full traces URL (`…/v1/traces`).
    pub traces_url: String,
    /// `service.name` of the resource.
    pub service_name: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`), e.g. a collector's API key.
    pub headers: Vec<(String, String)>,
}

/// Why the OTLP settings in the environment cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {rule}")]
pub struct OtlpConfigError {
    /// The environment variable.
    pub variable: &'static str,
    /// The rule it breaks.
    pub rule: String,
}

impl OtlpConfig {
    /// The settings from the standard variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full
    /// URL) or `OTEL_EXPORTER_OTLP_ENDPOINT` (the base; `/v1/traces` is appended),
    /// `OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_PROTOCOL` (only
    /// `http/json`) and `OTEL_SDK_DISABLED`. `None` when no endpoint is set.
    pub fn from_env(default_service: &str) -> Result<Option<OtlpConfig>, OtlpConfigError> {
        OtlpConfig::from_vars(default_service, |k| std::env::var(k).ok())
    }

    /// [`OtlpConfig::from_env`] over any variable source (for tests).
    pub fn from_vars(
        default_service: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpConfig>, OtlpConfigError> {
        let set = |k: &str| var(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let (variable, url) = match (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), set("OTEL_EXPORTER_OTLP_ENDPOINT")) {
            (Some(full), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", full),
            (None, Some(base)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("{}/v1/traces", base.trim_end_matches('/'))),
            (None, None) => return Ok(None),
        };
        let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
        if !scheme_ok || url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(OtlpConfigError {
                variable,
                rule: "an http:// or https:// URL of at most 2048 characters without spaces".into(),
            });
        }
        for protocol_var in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let Some(p) = set(protocol_var) {
                if p != "http/json" {
                    let variable = if protocol_var.contains("TRACES") {
                        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
                    } else {
                        "OTEL_EXPORTER_OTLP_PROTOCOL"
                    };
                    return Err(OtlpConfigError { variable, rule: format!("only http/json is supported, not {p:?}") });
                }
                break;
            }
        }
        let mut headers = Vec::new();
        if let Some(list) = set("OTEL_EXPORTER_OTLP_HEADERS") {
            for pair in list.split(',').filter(|p| !p.trim().is_empty()) {
                let Some((k, v)) = pair.split_once('=') else {
                    return Err(OtlpConfigError {
                        variable: "OTEL_EXPORTER_OTLP_HEADERS",
                        rule: "comma-separated key=value pairs".into(),
                    });
                };
                let (k, v) = (k.trim(), v.trim());
                let name_ok = !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
                if !name_ok || v.chars().any(char::is_control) {
                    return Err(OtlpConfigError {
                        variable: "OTEL_EXPORTER_OTLP_HEADERS",
                        rule: "header names of letters, digits, - and _; values without control characters".into(),
                    });
                }
                headers.push((k.to_string(), v.to_string()));
            }
        }
        let service_name = set("OTEL_SERVICE_NAME").unwrap_or_else(|| default_service.to_string());
        Ok(Some(OtlpConfig { traces_url: url, service_name, headers }))
    }
}

// ------------------------------------------------------------------------------------------
// Spans
// ------------------------------------------------------------------------------------------

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
enum AttrValue {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
}

/// What the layer keeps in a live span's extensions.
#[derive(Debug)]
struct SpanState {
    span_id: u64,
    start: SystemTime,
    trace_id: Option<String>,
    remote_parent: Option<u64>,
    attributes: Vec<(String, AttrValue)>,
    error: bool,
    /// Closed descendants whose trace id was not known yet; exported with this span's.
    pending: Vec<FinishedSpan>,
}

/// A closed span, ready to encode.
#[derive(Debug, Clone, PartialEq)]
struct FinishedSpan {
    trace_id: String,
    span_id: u64,
    parent: Option<u64>,
    name: String,
    kind: u8,
    start_ns: u128,
    end_ns: u128,
    attributes: Vec<(String, AttrValue)>,
    error: bool,
}

impl Visit for SpanState {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), AttrValue::Str(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.set(field.name(), AttrValue::Str(format!("{value:?}")));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), AttrValue::Int(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), AttrValue::Int(i64::try_from(value).unwrap_or(i64::MAX)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.name(), AttrValue::Double(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), AttrValue::Bool(value));
    }
}

impl SpanState {
    fn set(&mut self, name: &str, value: AttrValue) {
        if let AttrValue::Str(text) = &value {
            match name {
                "query_id" if !text.is_empty() => self.trace_id = Some(trace_id_of_query(text)),
                "trace_id" => {
                    if text.len() == 32 && text.chars().all(|c| c.is_ascii_hexdigit()) {
                        self.trace_id = Some(text.to_ascii_lowercase());
                    }
                    return;
                }
                "parent_span_id" => {
                    self.remote_parent = u64::from_str_radix(text, 16).ok().filter(|p| *p != 0);
                    return;
                }
                _ => {}
            }
            if text.is_empty() {
                return;
            }
        }
        self.attributes.retain(|(k, _)| k != name);
        self.attributes.push((name.to_string(), value));
    }
}

/// The trace id of a query: the hex digits of its id, as [`crate::traceparent`] makes it.
pub fn trace_id_of_query(query_id: &str) -> String {
    let tp = crate::traceparent(query_id, 1);
    crate::trace_id(&tp).unwrap_or("00000000000000000000000000000000").to_string()
}

/// A fresh non-zero span id.
fn new_span_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        nanos ^ u64::from(std::process::id()).rotate_left(32)
    });
    // splitmix64 over a counter: distinct ids within the process, spread across processes.
    let mut z = seed.wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1)
}

fn nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// OTLP span kinds used here.
const KIND_INTERNAL: u8 = 1;
const KIND_SERVER: u8 = 2;
const KIND_CONSUMER: u8 = 5;

fn kind_of(name: &str) -> u8 {
    match name {
        "sqs_record" => KIND_CONSUMER,
        "submit" => KIND_SERVER,
        _ => KIND_INTERNAL,
    }
}

/// Messages to the exporter thread.
enum Msg {
    Span(FinishedSpan),
    Flush(tokio::sync::oneshot::Sender<()>),
}

static EXPORTER: OnceLock<tokio::sync::mpsc::UnboundedSender<Msg>> = OnceLock::new();

/// The layer that turns the engine's spans into OTLP spans.
pub struct OtlpLayer {
    sender: tokio::sync::mpsc::UnboundedSender<Msg>,
}

impl std::fmt::Debug for OtlpLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpLayer").finish_non_exhaustive()
    }
}

impl OtlpLayer {
    /// Start the exporter thread for `config` and return the layer. The first layer of the
    /// process is also the one [`flush`] flushes.
    pub fn start(config: OtlpConfig) -> std::io::Result<OtlpLayer> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new().name("otlp-export".into()).spawn(move || export_loop(config, receiver))?;
        let _ = EXPORTER.set(sender.clone());
        Ok(OtlpLayer { sender })
    }
}

fn exported<S>(span: &tracing_subscriber::registry::SpanRef<'_, S>) -> bool
where
    S: for<'a> LookupSpan<'a>,
{
    span.metadata().target().starts_with(SPAN_TARGET)
}

/// The prefix of the targets whose spans are exported: every Switchyard crate
/// (`switchyard_engine`, `switchyard_agents`, `switchyard_aws`, …).
pub const SPAN_TARGET: &str = "switchyard";

impl<S> Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if !exported(&span) {
            return;
        }
        let mut state = SpanState {
            span_id: new_span_id(),
            start: SystemTime::now(),
            trace_id: None,
            remote_parent: None,
            attributes: Vec::new(),
            error: false,
            pending: Vec::new(),
        };
        attrs.record(&mut state);
        span.extensions_mut().insert(state);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(state) = span.extensions_mut().get_mut::<SpanState>() {
                values.record(state);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() != tracing::Level::ERROR {
            return;
        }
        if let Some(span) = ctx.event_span(event) {
            for s in span.scope() {
                if let Some(state) = s.extensions_mut().get_mut::<SpanState>() {
                    state.error = true;
                    return;
                }
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(state) = span.extensions_mut().remove::<SpanState>() else { return };
        let end = SystemTime::now();
        // The nearest exported ancestor: the parent, and where the trace id may come from.
        let mut parent_id = None;
        let mut inherited_trace = None;
        for ancestor in span.scope().skip(1) {
            if let Some(a) = ancestor.extensions().get::<SpanState>() {
                if parent_id.is_none() {
                    parent_id = Some(ancestor.id());
                }
                if a.trace_id.is_some() {
                    inherited_trace = a.trace_id.clone();
                    break;
                }
            }
        }
        let parent_span = parent_id.as_ref().and_then(|p| ctx.span(p));
        let parent = parent_span.as_ref().and_then(|p| p.extensions().get::<SpanState>().map(|s| s.span_id));
        let mut finished = FinishedSpan {
            trace_id: String::new(),
            span_id: state.span_id,
            parent: parent.or(state.remote_parent),
            name: span.name().to_string(),
            kind: kind_of(span.name()),
            start_ns: nanos(state.start),
            end_ns: nanos(end),
            attributes: state.attributes,
            error: state.error,
        };
        match state.trace_id.or(inherited_trace) {
            Some(trace) => {
                for mut child in state.pending.into_iter().chain(std::iter::once(finished)) {
                    child.trace_id.clone_from(&trace);
                    let _ = self.sender.send(Msg::Span(child));
                }
            }
            None => {
                // Not known yet: the ancestor that learns the query id exports it.
                if let Some(p) = parent_span {
                    if let Some(a) = p.extensions_mut().get_mut::<SpanState>() {
                        a.pending.extend(state.pending);
                        finished.trace_id.clear();
                        a.pending.push(finished);
                    }
                }
            }
        }
    }
}

/// The span id of the innermost exported span around the caller, when an [`OtlpLayer`] is
/// installed: the engine stamps it into the `traceparent` of the messages it sends.
pub fn current_span_id() -> Option<u64> {
    tracing::Span::current()
        .with_subscriber(|(id, dispatch)| {
            let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
            let span = registry.span(id)?;
            span.scope().find_map(|s| s.extensions().get::<SpanState>().map(|st| st.span_id))
        })
        .flatten()
}

/// Send what is waiting now and wait (at most `timeout`) until it is sent. A no-op without an
/// exporter. Lambda handlers call it before they return: the process may be frozen afterwards.
pub async fn flush(timeout: Duration) {
    let Some(sender) = EXPORTER.get() else { return };
    let (done, wait) = tokio::sync::oneshot::channel();
    if sender.send(Msg::Flush(done)).is_ok() {
        let _ = tokio::time::timeout(timeout, wait).await;
    }
}

// ------------------------------------------------------------------------------------------
// Export
// ------------------------------------------------------------------------------------------

fn attribute(key: &str, value: &AttrValue) -> Value {
    let v = match value {
        AttrValue::Str(s) => json!({ "stringValue": s }),
        // OTLP JSON carries 64-bit integers as strings.
        AttrValue::Int(i) => json!({ "intValue": i.to_string() }),
        AttrValue::Double(d) if d.is_finite() => json!({ "doubleValue": d }),
        AttrValue::Double(d) => json!({ "stringValue": d.to_string() }),
        AttrValue::Bool(b) => json!({ "boolValue": b }),
    };
    json!({ "key": key, "value": v })
}

/// The OTLP/HTTP JSON body (`ExportTraceServiceRequest`) for a batch of spans.
fn encode(service_name: &str, spans: &[FinishedSpan]) -> Value {
    let spans: Vec<Value> = spans
        .iter()
        .map(|s| {
            let mut span = json!({
                "traceId": s.trace_id,
                "spanId": format!("{:016x}", s.span_id),
                "name": s.name,
                "kind": s.kind,
                "startTimeUnixNano": s.start_ns.to_string(),
                "endTimeUnixNano": s.end_ns.to_string(),
                "attributes": s.attributes.iter().map(|(k, v)| attribute(k, v)).collect::<Vec<_>>(),
                "status": { "code": if s.error { 2 } else { 0 } },
            });
            if let Some(p) = s.parent {
                span["parentSpanId"] = json!(format!("{p:016x}"));
            }
            span
        })
        .collect();
    json!({
        "resourceSpans": [{
            "resource": { "attributes": [
                attribute("service.name", &AttrValue::Str(service_name.to_string())),
                attribute("telemetry.sdk.name", &AttrValue::Str("switchyard".into())),
                attribute("telemetry.sdk.language", &AttrValue::Str("rust".into())),
            ] },
            "scopeSpans": [{ "scope": { "name": "switchyard", "version": env!("CARGO_PKG_VERSION") }, "spans": spans }],
        }]
    })
}

fn export_loop(config: OtlpConfig, mut receiver: tokio::sync::mpsc::UnboundedReceiver<Msg>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    runtime.block_on(async move {
        let client = HttpClient::new();
        let mut batch: Vec<FinishedSpan> = Vec::new();
        loop {
            let msg = if batch.is_empty() {
                receiver.recv().await
            } else {
                match tokio::time::timeout(BATCH_INTERVAL, receiver.recv()).await {
                    Ok(m) => m,
                    Err(_) => {
                        send(&client, &config, std::mem::take(&mut batch)).await;
                        continue;
                    }
                }
            };
            match msg {
                None => {
                    send(&client, &config, std::mem::take(&mut batch)).await;
                    return;
                }
                Some(Msg::Span(span)) => {
                    batch.push(span);
                    if batch.len() >= MAX_BATCH {
                        send(&client, &config, std::mem::take(&mut batch)).await;
                    }
                }
                Some(Msg::Flush(done)) => {
                    send(&client, &config, std::mem::take(&mut batch)).await;
                    let _ = done.send(());
                }
            }
        }
    });
}

async fn send(client: &HttpClient, config: &OtlpConfig, batch: Vec<FinishedSpan>) {
    if batch.is_empty() {
        return;
    }
    let body = encode(&config.service_name, &batch).to_string().into_bytes();
    match client.post_json(&config.traces_url, &config.headers, body, EXPORT_TIMEOUT).await {
        Ok(reply) if (200..300).contains(&reply.status) => {}
        Ok(reply) => {
            tracing::warn!(target: "switchyard::telemetry", status = reply.status, spans = batch.len(), "the OTLP endpoint refused a batch of spans")
        }
        Err(e) => {
            tracing::warn!(target: "switchyard::telemetry", error = %e, spans = batch.len(), "could not export spans over OTLP")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_base_endpoint_gets_v1_traces_and_the_traces_endpoint_is_used_as_is() {
        let c = OtlpConfig::from_vars("router", vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")]))
            .expect("valid")
            .expect("set");
        assert_eq!(c.traces_url, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(c.service_name, "router");
        let c = OtlpConfig::from_vars(
            "router",
            vars(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://collector.example/otlp/traces"),
                ("OTEL_SERVICE_NAME", "switchyard-intents"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=abc, x-team=blue"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ]),
        )
        .expect("valid")
        .expect("set");
        assert_eq!(c.traces_url, "https://collector.example/otlp/traces");
        assert_eq!(c.service_name, "switchyard-intents");
        assert_eq!(c.headers, [("x-api-key".to_string(), "abc".to_string()), ("x-team".into(), "blue".into())]);
    }

    #[test]
    fn no_endpoint_or_a_disabled_sdk_means_no_export() {
        assert_eq!(OtlpConfig::from_vars("x", vars(&[])), Ok(None));
        assert_eq!(OtlpConfig::from_vars("x", vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")])), Ok(None));
        let off = vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), ("OTEL_SDK_DISABLED", "true")]);
        assert_eq!(OtlpConfig::from_vars("x", off), Ok(None));
    }

    #[test]
    fn malformed_settings_are_refused_naming_the_variable_and_the_rule() {
        for (vars_, variable) in [
            (vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318")], "OTEL_EXPORTER_OTLP_ENDPOINT"),
            (vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x")], "OTEL_EXPORTER_OTLP_ENDPOINT"),
            (vec![("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://a b")], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", &*format!("http://{}", "a".repeat(3000)))],
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), ("OTEL_EXPORTER_OTLP_HEADERS", "novalue")],
                "OTEL_EXPORTER_OTLP_HEADERS",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x"), ("OTEL_EXPORTER_OTLP_HEADERS", "bad name=v")],
                "OTEL_EXPORTER_OTLP_HEADERS",
            ),
        ] {
            let err = OtlpConfig::from_vars("x", vars(&vars_)).expect_err("refused");
            assert_eq!(err.variable, variable, "{vars_:?}");
            assert!(!err.rule.is_empty());
        }
    }

    #[test]
    fn a_span_encodes_with_hex_ids_string_times_and_typed_attributes() {
        let span = FinishedSpan {
            trace_id: trace_id_of_query("6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"),
            span_id: 0xab,
            parent: Some(0x1),
            name: "route".into(),
            kind: KIND_INTERNAL,
            start_ns: 1_700_000_000_000_000_000,
            end_ns: 1_700_000_000_500_000_000,
            attributes: vec![("attempt".into(), AttrValue::Int(2)), ("ok".into(), AttrValue::Bool(true))],
            error: true,
        };
        let body = encode("router", &[span]);
        let s = &body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], "6f1c2d3e4a5b4c6d8e7f0a1b2c3d4e5f");
        assert_eq!(s["spanId"], "00000000000000ab");
        assert_eq!(s["parentSpanId"], "0000000000000001");
        assert_eq!(s["startTimeUnixNano"], "1700000000000000000");
        assert_eq!(s["attributes"][0], json!({ "key": "attempt", "value": { "intValue": "2" } }));
        assert_eq!(s["attributes"][1], json!({ "key": "ok", "value": { "boolValue": true } }));
        assert_eq!(s["status"]["code"], 2);
        assert_eq!(body["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"], "router");
    }

    #[test]
    fn span_ids_are_distinct_and_never_zero() {
        let ids: std::collections::HashSet<u64> = (0..10_000).map(|_| new_span_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(!ids.contains(&0));
    }
}
