//! An event's details, kept as the JSON text they are written as.
//!
//! Most details are only ever stored and, later, serialized: a step writes them once and the
//! store keeps them until the query expires. Kept as a `serde_json::Value` map, every key and
//! string was an allocation to build and to free (16 events per query at k = 3). A [`Detail`]
//! is one string, written field by field by [`DetailWriter`]; the readers that inspect fields
//! (the CLI, the chat stream, tests) get the [`Value`] by dereferencing it, parsed once on
//! first use.
//!
//! The text is canonical: exactly what `serde_json` prints for the same `Value` (object keys in
//! order, compact). Serialization goes through the `Value`, so every serializer sees the same
//! JSON as before and the wire formats do not change.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::fmt;
use std::sync::OnceLock;

/// The details of one event (ids, statuses, timings — never raw query text): a JSON value,
/// usually an object, kept as its canonical JSON text and parsed on first inspection.
#[derive(Clone)]
pub struct Detail {
    /// Not shrunk to a `Box<str>`: that would copy every detail once more.
    json: String,
    value: OnceLock<Value>,
}

impl Detail {
    /// Writes an object's fields in key order (see [`DetailWriter::field`]).
    pub fn object() -> DetailWriter {
        DetailWriter { json: Vec::with_capacity(256), last: "" }
    }

    /// The JSON text, compact, keys in order.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The details as a JSON value, parsed on first use.
    pub fn value(&self) -> &Value {
        // The text is always valid JSON (written by `serde_json` or by `DetailWriter`).
        self.value.get_or_init(|| serde_json::from_str(&self.json).unwrap_or_default())
    }
}

impl Default for Detail {
    /// `null`, as a missing `detail` field reads.
    fn default() -> Self {
        Detail { json: "null".to_string(), value: OnceLock::new() }
    }
}

impl From<Value> for Detail {
    fn from(value: Value) -> Self {
        Detail { json: value.to_string(), value: OnceLock::new() }
    }
}

impl std::ops::Deref for Detail {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl PartialEq for Detail {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json || self.value() == other.value()
    }
}

impl PartialEq<Value> for Detail {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl fmt::Debug for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.json)
    }
}

impl fmt::Display for Detail {
    /// The JSON text, as `Value`'s `Display` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.json)
    }
}

impl Serialize for Detail {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Detail {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Detail::from)
    }
}

/// Writes a [`Detail`] object: one `field` call per key, keys in ascending byte order (the
/// order `serde_json` prints an object's keys in), then [`DetailWriter::finish`].
#[must_use]
pub struct DetailWriter {
    json: Vec<u8>,
    last: &'static str,
}

impl DetailWriter {
    /// Appends `"key":value`. Keys come in ascending order and need no escaping; the value is
    /// written as `serde_json` writes it, so it must print as its `Value` does (no struct with
    /// fields out of key order: pass `serde_json::to_value` of such a value instead). Debug
    /// builds check both.
    pub fn field<T: Serialize + ?Sized>(mut self, key: &'static str, value: &T) -> Self {
        debug_assert!(
            self.last < key || self.json.is_empty(),
            "detail keys out of order: {:?} after {:?}",
            key,
            self.last
        );
        debug_assert!(
            !key.contains(['"', '\\']) && !key.chars().any(char::is_control),
            "detail key needs escaping: {key:?}"
        );
        self.json.push(if self.json.is_empty() { b'{' } else { b',' });
        self.json.push(b'"');
        self.json.extend_from_slice(key.as_bytes());
        self.json.extend_from_slice(b"\":");
        let at = self.json.len();
        if serde_json::to_writer(&mut self.json, value).is_err() {
            // As `json!` would turn a value that cannot be serialized: never for the values the
            // steps write (strings, numbers, ids, lists of them, `Value`s).
            self.json.truncate(at);
            self.json.extend_from_slice(b"null");
        }
        self.last = key;
        self
    }

    /// The object.
    pub fn finish(mut self) -> Detail {
        if self.json.is_empty() {
            self.json.push(b'{');
        }
        self.json.push(b'}');
        // `serde_json` writes UTF-8 and the keys are `str`s: the check cannot fail.
        let json = String::from_utf8(self.json).unwrap_or_default();
        debug_assert!(
            // Printed again from its `Value` (not `Value == String`, which compares a string).
            serde_json::from_str::<Value>(&json).map(|v| v.to_string()).is_ok_and(|canonical| canonical == json),
            "detail is not canonical JSON: {json}"
        );
        Detail { json, value: OnceLock::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_written_detail_is_the_json_of_the_same_value() {
        let when = chrono::DateTime::parse_from_rfc3339("2026-11-23T22:00:00.123Z").expect("time");
        let agents = vec!["a".to_string(), "b\"q".to_string()];
        let none: Option<&str> = None;
        let written = Detail::object()
            .field("agents", &agents)
            .field("at", &when)
            .field("confidence", &0.78)
            .field("fallback_for", &none)
            .field("fills_slot", &true)
            .field("nested", &json!({ "z": 1, "a": [1.5, "x"] }))
            .field("status", "ok\u{1}é")
            .field("timeout_ms", &2_000u64)
            .finish();
        let expected = json!({
            "agents": agents, "at": when, "confidence": 0.78, "fallback_for": none, "fills_slot": true,
            "nested": { "z": 1, "a": [1.5, "x"] }, "status": "ok\u{1}é", "timeout_ms": 2_000u64,
        });
        assert_eq!(written.json(), expected.to_string());
        assert_eq!(*written, expected);
        assert_eq!(written["agents"][1], "b\"q");
        assert_eq!(serde_json::to_string(&written).expect("json"), expected.to_string());
        assert_eq!(Detail::object().finish().json(), "{}");
    }

    #[test]
    fn a_detail_reads_back_as_it_was_written() {
        let detail = Detail::from(json!({ "b": [1, 2], "a": null }));
        assert_eq!(detail.json(), r#"{"a":null,"b":[1,2]}"#);
        let back: Detail = serde_json::from_str(r#"{ "b": [1,2], "a": null }"#).expect("parse");
        assert_eq!(back, detail);
        assert!(Detail::default().is_null());
    }

    #[test]
    #[should_panic(expected = "out of order")]
    #[cfg(debug_assertions)]
    fn keys_out_of_order_are_caught_in_debug_builds() {
        let _ = Detail::object().field("b", &1).field("a", &2).finish();
    }
}
