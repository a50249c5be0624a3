//! Why messages failed, read from the logs: the handlers log every failed record at warn or
//! error level with a `reason` inside the record's `sqs_record` span (which carries its
//! `message_id`), and the queue logs each move to a dead-letter queue with the `message_id`.
//! [`ReasonLog`] is a `tracing` layer that keeps both, so the harness can check that every
//! dead-lettered message has a logged reason — from the logs an operator would read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// What the logs said about messages.
#[derive(Debug, Default, Clone)]
pub struct Reasons {
    /// Failure reasons logged per message id, in order.
    pub by_message: BTreeMap<String, Vec<String>>,
    /// Message ids the queue reported moving to a dead-letter queue.
    pub dead_lettered: BTreeSet<String>,
}

/// The layer; clone [`ReasonLog::reasons`] before installing it.
#[derive(Debug, Clone, Default)]
pub struct ReasonLog {
    /// What was captured.
    pub reasons: Arc<Mutex<Reasons>>,
}

struct MessageId(String);

#[derive(Default)]
struct Fields {
    message_id: Option<String>,
    reason: Option<String>,
    message: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.set(field, format!("{value:?}"));
    }
}

impl Fields {
    fn set(&mut self, field: &Field, value: String) {
        match field.name() {
            "message_id" => self.message_id = Some(value),
            "reason" | "error" => self.reason = Some(value),
            "message" => self.message = Some(value),
            _ => {}
        }
    }
}

impl<S> Layer<S> for ReasonLog
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let (Some(message_id), Some(span)) = (fields.message_id, ctx.span(id)) {
            span.extensions_mut().insert(MessageId(message_id));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() > Level::WARN {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let Ok(mut reasons) = self.reasons.lock() else { return };
        if let Some(id) = &fields.message_id {
            if fields.message.as_deref().is_some_and(|m| m.contains("dead-letter")) {
                reasons.dead_lettered.insert(id.clone());
                return;
            }
        }
        let span_id = ctx.event_scope(event).and_then(|scope| {
            scope.from_root().find_map(|span| span.extensions().get::<MessageId>().map(|m| m.0.clone()))
        });
        let Some(message_id) = fields.message_id.or(span_id) else { return };
        let reason = match (fields.message, fields.reason) {
            (Some(m), Some(r)) => format!("{m}: {r}"),
            (Some(m), None) => m,
            (None, Some(r)) => r,
            (None, None) => return,
        };
        reasons.by_message.entry(message_id).or_default().push(reason);
    }
}
