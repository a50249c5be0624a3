//! Following a query's event log live, as server-sent events: the one follower behind
//! `switchyard serve`'s events endpoint and the `events-stream` Lambda function (response
//! streaming).
//!
//! The log is the truth (docs/streaming.md): the follower
//! polls [`crate::ports::Store::list_events`] and sends each event it has not sent yet, so any
//! process can serve any query and a stream that breaks can be picked up by another.
//!
//! - **Delay.** The first read is immediate; after a read with nothing new the next one waits
//!   twice as long, from [`FollowSettings::first_poll`] up to [`FollowSettings::max_poll`],
//!   and a read that finds something starts over from the first interval. An event is on the
//!   wire at most `max_poll` (plus one store read) after it is written.
//! - **Resume.** `Last-Event-ID` is an event's key (the SSE `id:` of its frame). The stream
//!   resumes after that event in the log's order (time, then key). A key the log does not hold
//!   (expired, or never sent by us) replays the whole log: a reconnecting client loses nothing.
//!   Events that arrive out of order while a stream is open are still sent (the follower
//!   remembers every key it sent); across a reconnect, an event written with an earlier time
//!   than the resume point after the client left would be skipped — writers stamp events when
//!   they write them, so that window is one store write wide.
//! - **Heartbeat.** A comment line (`: heartbeat`) when nothing was sent for
//!   [`FollowSettings::heartbeat`], so proxies and clients keep idle connections open.
//! - **End.** After the `final` event (the query's output is stored before it is logged), or
//!   at once when the resume point is at or after `final`. A stream also ends after
//!   [`FollowSettings::max_duration`] (a Lambda invocation has a time limit) with a comment
//!   saying to reconnect with `Last-Event-ID`, and after
//!   [`FollowSettings::max_store_failures`] failed reads in a row with an `error` event.
//! - **Disconnects.** The stream only reads; a client that goes away drops it, and the query
//!   runs on and stores its output as if nobody had watched.

use crate::ports::{Event, EventKind, Store};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::admission::{FieldError, ValidationError};
use tokio::time::Instant;

/// The header (and field name in errors) a reconnecting client sends.
pub const LAST_EVENT_ID: &str = "Last-Event-ID";

/// Longest `Last-Event-ID` accepted: event keys are far shorter.
pub const MAX_LAST_EVENT_ID_LEN: usize = 256;

/// The comment frame sent when the stream has been idle for [`FollowSettings::heartbeat`].
pub const HEARTBEAT_FRAME: &str = ": heartbeat\n\n";

/// How the follower polls, keeps idle connections open and gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowSettings {
    /// Wait after a read that found something new (and the shortest wait).
    pub first_poll: Duration,
    /// Longest wait between two reads: the bound on an event's delay.
    pub max_poll: Duration,
    /// Send a comment after this long without a frame.
    pub heartbeat: Duration,
    /// End the stream after this long (under the function's timeout); the client reconnects
    /// with `Last-Event-ID`.
    pub max_duration: Duration,
    /// End the stream with an `error` event after this many failed reads in a row.
    pub max_store_failures: u32,
    /// Reconnection delay advertised to EventSource clients (`retry:`).
    pub client_retry: Duration,
}

impl Default for FollowSettings {
    fn default() -> Self {
        FollowSettings {
            first_poll: Duration::from_millis(100),
            max_poll: Duration::from_millis(800),
            heartbeat: Duration::from_secs(15),
            max_duration: Duration::from_secs(14 * 60),
            max_store_failures: 5,
            client_retry: Duration::from_secs(1),
        }
    }
}

/// Server-sent-events frame for one event: `id:` is its key, `event:` its kind, `data:` the
/// event as one line of JSON.
pub fn sse_frame(event: &Event) -> String {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    format!(
        "id: {}\nevent: {}\ndata: {data}\n\n",
        event.key,
        serde_json::to_value(event.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    )
}

/// Check a `Last-Event-ID` header value: 1 to [`MAX_LAST_EVENT_ID_LEN`] characters from
/// `A-Z a-z 0-9 - _ . : #` (what event keys are made of). Anything else is refused, so a value
/// can never inject lines into the stream or the logs.
pub fn parse_last_event_id(value: &str) -> Result<String, ValidationError> {
    let rule = |rule: String| ValidationError { errors: vec![FieldError { field: LAST_EVENT_ID.into(), rule }] };
    if value.is_empty() {
        return Err(rule("must not be empty (omit the header to start from the beginning)".into()));
    }
    if value.len() > MAX_LAST_EVENT_ID_LEN {
        return Err(rule(format!("must be at most {MAX_LAST_EVENT_ID_LEN} characters")));
    }
    if !value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '#')) {
        return Err(rule("must be an event id from this stream (letters, digits, - _ . : #)".into()));
    }
    Ok(value.to_string())
}

/// The events of `log` (in the log's order) that come after the event keyed `after`; the whole
/// log when `after` is `None` or not in it. Also whether the events skipped include `final`.
pub fn events_after(log: Vec<Event>, after: Option<&str>) -> (Vec<Event>, bool) {
    let Some(position) = after.and_then(|key| log.iter().position(|e| e.key == key)) else {
        return (log, false);
    };
    let finished = log[..=position].iter().any(|e| e.kind == EventKind::Final);
    (log.into_iter().skip(position + 1).collect(), finished)
}

/// Where the follower is.
struct Follower {
    store: Arc<dyn Store>,
    query_id: String,
    settings: FollowSettings,
    /// `Last-Event-ID`, until the first successful read has applied it.
    resume_after: Option<String>,
    /// Keys already sent (or skipped by the resume).
    sent: HashSet<String>,
    started: Instant,
    last_frame: Instant,
    /// Wait between a read and the next one.
    poll: Duration,
    /// When the next read is due: kept across heartbeats, so a heartbeat shorter than the
    /// wait between reads never pushes the read back.
    next_read: Instant,
    failures: u32,
    /// Nothing more to send.
    done: bool,
    /// The `retry:` line is still to be sent.
    preamble: bool,
}

/// What the follower has for its reader next.
#[derive(Debug, Clone, PartialEq)]
pub enum Followed {
    /// The stream opened: the reconnection delay to advertise (`retry:`).
    Opened(Duration),
    /// Events not sent before, in the log's order.
    Events(Vec<Event>),
    /// Nothing was sent for [`FollowSettings::heartbeat`].
    Heartbeat,
    /// [`FollowSettings::max_duration`] passed; the reader reconnects to continue. Last item.
    TimeLimit,
    /// The log could not be read [`FollowSettings::max_store_failures`] times in a row. Last
    /// item.
    Unavailable,
}

impl Follower {
    /// The next item, or `None` when the stream is over.
    async fn next_item(&mut self) -> Option<Followed> {
        if self.done {
            return None;
        }
        if self.preamble {
            self.preamble = false;
            self.last_frame = Instant::now();
            return Some(Followed::Opened(self.settings.client_retry));
        }
        loop {
            if self.started.elapsed() >= self.settings.max_duration {
                self.done = true;
                return Some(Followed::TimeLimit);
            }
            let now = Instant::now();
            if now < self.next_read {
                // Sleep until the next read, or the heartbeat, or the time limit: whichever
                // comes first.
                let beat_at = self.last_frame + self.settings.heartbeat;
                let limit_at = self.started + self.settings.max_duration;
                let wake = self.next_read.min(beat_at).min(limit_at);
                tokio::time::sleep_until(wake).await;
                if wake == limit_at && wake < self.next_read {
                    continue;
                }
                if wake == beat_at && wake < self.next_read {
                    self.last_frame = Instant::now();
                    return Some(Followed::Heartbeat);
                }
            }
            match self.store.list_events(&self.query_id).await {
                Err(e) => {
                    self.failures += 1;
                    tracing::warn!(query_id = %self.query_id, failures = self.failures, error = %e, "event stream: reading the log failed");
                    if self.failures >= self.settings.max_store_failures {
                        self.done = true;
                        return Some(Followed::Unavailable);
                    }
                    self.poll = (self.poll * 2).min(self.settings.max_poll);
                    self.next_read = Instant::now() + self.poll;
                }
                Ok(log) => {
                    self.failures = 0;
                    let fresh = if let Some(after) = self.resume_after.take() {
                        let total: Vec<String> = log.iter().map(|e| e.key.clone()).collect();
                        let (rest, finished) = events_after(log, Some(&after));
                        // Everything before the resume point counts as sent.
                        let rest_keys: HashSet<&str> = rest.iter().map(|e| e.key.as_str()).collect();
                        self.sent.extend(total.into_iter().filter(|k| !rest_keys.contains(k.as_str())));
                        if finished {
                            self.done = true;
                            return None;
                        }
                        rest
                    } else {
                        log.into_iter().filter(|e| !self.sent.contains(&e.key)).collect::<Vec<_>>()
                    };
                    if fresh.is_empty() {
                        self.poll = (self.poll * 2).min(self.settings.max_poll);
                        self.next_read = Instant::now() + self.poll;
                        continue;
                    }
                    self.poll = self.settings.first_poll;
                    self.next_read = Instant::now() + self.poll;
                    self.done = fresh.iter().any(|e| e.kind == EventKind::Final);
                    self.sent.extend(fresh.iter().map(|e| e.key.clone()));
                    self.last_frame = Instant::now();
                    return Some(Followed::Events(fresh));
                }
            }
        }
    }
}

/// The frames of one [`Followed`] item on the events endpoint.
fn frames(item: Followed) -> String {
    match item {
        Followed::Opened(retry) => format!("retry: {}\n\n", retry.as_millis()),
        Followed::Events(events) => events.iter().map(sse_frame).collect(),
        Followed::Heartbeat => HEARTBEAT_FRAME.into(),
        Followed::TimeLimit => ": stream time limit reached; reconnect with Last-Event-ID to continue\n\n".into(),
        Followed::Unavailable => "event: error\ndata: {\"code\":\"unavailable\",\"message\":\"the event log cannot be read; reconnect with Last-Event-ID\"}\n\n".into(),
    }
}

/// Follow `query_id`'s log from the beginning, or after the event keyed `resume_after` (a
/// `Last-Event-ID` already checked by [`parse_last_event_id`]), as SSE text chunks: a `retry:`
/// line, then the events as they are written, heartbeats while idle, and nothing after the
/// `final` event. The caller has checked that the query is the client's.
pub fn follow(
    store: Arc<dyn Store>,
    query_id: String,
    resume_after: Option<String>,
    settings: FollowSettings,
) -> impl Stream<Item = Bytes> + Send + 'static {
    follow_events(store, query_id, resume_after, settings).map(|item| Bytes::from(frames(item)))
}

/// The same follower as [`follow`], item by item, for readers that send the events in another
/// shape (the chat completions stream, `super::chat`).
pub fn follow_events(
    store: Arc<dyn Store>,
    query_id: String,
    resume_after: Option<String>,
    settings: FollowSettings,
) -> impl Stream<Item = Followed> + Send + 'static {
    let now = Instant::now();
    let follower = Follower {
        store,
        query_id,
        settings,
        resume_after,
        sent: HashSet::new(),
        started: now,
        last_frame: now,
        poll: settings.first_poll,
        next_read: now,
        failures: 0,
        done: false,
        preamble: true,
    };
    futures::stream::unfold(follower, |mut follower| async move {
        let item = follower.next_item().await?;
        Some((item, follower))
    })
}
