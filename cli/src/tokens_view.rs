//! Printing a streamed answer on a terminal as its `token` events arrive (`switchyard ask`;
//! the same view serves `switchyard chat`).
//!
//! The log is read again and again while the query runs; [`TokenView::take`] returns what to
//! print for the token events not seen before, in log order. Each streamed answer is its own
//! `stream`: when a new one starts after another (a retried attempt, or a revision after the
//! critic rejected the draft), the view starts a new line saying so. At the end,
//! [`TokenView::finish`] says whether the answer printed so far is the output's: when the
//! winning stream is not the last one printed, or no stream spelt the answer, the caller
//! prints `response_text` whole.

use std::collections::{BTreeMap, HashSet};
use switchyard_engine::ports::{Event, EventKind};

/// What has been printed of a query's streamed answers.
#[derive(Debug, Default)]
pub struct TokenView {
    seen: HashSet<String>,
    /// The stream being printed and its next `seq`.
    current: Option<(String, u64)>,
    /// Batches of the current stream that arrived ahead of their turn.
    early: BTreeMap<u64, String>,
    /// Text printed for the current stream.
    printed: String,
    /// Streams printed so far.
    streams: usize,
}

impl TokenView {
    /// What to print for the token events of `events` not seen before.
    pub fn take(&mut self, events: &[Event]) -> String {
        let mut out = String::new();
        for e in events.iter().filter(|e| e.kind == EventKind::Token) {
            if !self.seen.insert(e.key.clone()) {
                continue;
            }
            let (Some(stream), Some(seq), Some(text)) =
                (e.detail["stream"].as_str(), e.detail["seq"].as_u64(), e.detail["text"].as_str())
            else {
                continue;
            };
            if self.current.as_ref().is_none_or(|(s, _)| s != stream) {
                if self.current.is_some() {
                    out.push_str("\n\n[a new draft: the previous one was retried or revised]\n");
                }
                self.current = Some((stream.to_string(), 0));
                self.early.clear();
                self.printed.clear();
                self.streams += 1;
            }
            self.early.insert(seq, text.to_string());
            if let Some((_, next)) = self.current.as_mut() {
                while let Some(text) = self.early.remove(next) {
                    out.push_str(&text);
                    self.printed.push_str(&text);
                    *next += 1;
                }
            }
        }
        out
    }

    /// Whether what was printed last is the answer (`answer_stream` from the `synthesis`
    /// event, `response_text` from the output); when not, the caller prints the answer whole.
    pub fn finish(&self, answer_stream: Option<&str>, response_text: &str) -> bool {
        let last = self.current.as_ref().map(|(s, _)| s.as_str());
        self.streams > 0 && last == answer_stream && self.printed == response_text
    }

    /// Whether anything was printed.
    pub fn printed_any(&self) -> bool {
        self.streams > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn token(key: &str, stream: &str, seq: u64, text: &str) -> Event {
        Event {
            query_id: "q".into(),
            key: key.into(),
            at: chrono::Utc::now(),
            kind: EventKind::Token,
            detail: std::sync::Arc::new(json!({ "stream": stream, "seq": seq, "text": text }).into()),
            expires_at: 0,
        }
    }

    #[test]
    fn batches_print_once_in_order_and_a_new_draft_starts_a_new_line() {
        let mut view = TokenView::default();
        let a0 = token("00-45-token-d1-a1-00000", "d1-a1", 0, "Some ");
        let a1 = token("00-45-token-d1-a1-00001", "d1-a1", 1, "days.");
        assert_eq!(view.take(std::slice::from_ref(&a0)), "Some ");
        assert_eq!(view.take(&[a0.clone(), a1.clone()]), "days.", "seen batches are not printed again");
        let b1 = token("02-45-token-d2-a1-00001", "d2-a1", 1, "31.");
        let b0 = token("02-45-token-d2-a1-00000", "d2-a1", 0, "Up to five, until March ");
        let printed = view.take(&[a0, a1, b1, b0]);
        assert_eq!(printed, "\n\n[a new draft: the previous one was retried or revised]\nUp to five, until March 31.");
        assert!(view.finish(Some("d2-a1"), "Up to five, until March 31."));
        assert!(!view.finish(Some("d1-a1"), "Up to five, until March 31."), "the winner is not what was printed last");
        assert!(!view.finish(None, "a template answer"));
        assert!(!TokenView::default().finish(None, ""), "nothing streamed: print the answer");
    }
}
