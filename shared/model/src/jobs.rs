//! Queue messages: small pointers into the store (docs/architecture.md#rules, rule 1).
//!
//! Every body is a versioned JSON object `{"v": 1, "type": …, …ids}`. A message never carries
//! a payload the store does not hold, so it can always be re-read, duplicated or reordered.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The body format this build writes and reads.
pub const JOB_VERSION: u8 = 1;

/// Largest body a handler accepts; real jobs are a few hundred bytes.
pub const MAX_JOB_BYTES: usize = 8 * 1024;

/// What a message asks the receiving function to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Job {
    /// router: classify (if needed), plan, dispatch, arm the deadline.
    Route {
        /// The query.
        query_id: String,
    },
    /// agent-worker: run one attempt of a dispatch.
    Dispatch {
        /// The query.
        query_id: String,
        /// The dispatch in the query's plan.
        dispatch_id: String,
        /// 1 for the first attempt.
        attempt: u32,
        /// Timeout of this attempt (extended after a timeout).
        timeout_ms: u64,
    },
    /// synthesizer: merge the handoffs into the output.
    Synthesize {
        /// The query.
        query_id: String,
    },
    /// synthesizer: the query's deadline (re-sent with a delay until `fire_at`, since SQS
    /// delays stop at 15 minutes).
    Deadline {
        /// The query.
        query_id: String,
        /// When it fires.
        fire_at: DateTime<Utc>,
    },
}

impl Job {
    /// The query the job belongs to.
    pub fn query_id(&self) -> &str {
        match self {
            Job::Route { query_id }
            | Job::Dispatch { query_id, .. }
            | Job::Synthesize { query_id }
            | Job::Deadline { query_id, .. } => query_id,
        }
    }

    /// The query the job belongs to, taken out of the job (no copy).
    pub fn into_query_id(self) -> String {
        match self {
            Job::Route { query_id }
            | Job::Dispatch { query_id, .. }
            | Job::Synthesize { query_id }
            | Job::Deadline { query_id, .. } => query_id,
        }
    }
}

/// The wire form: `{"v": 1, "type": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobMessage {
    /// Body format version.
    pub v: u8,
    /// The job.
    #[serde(flatten)]
    pub job: Job,
}

/// A field of [`FlatJob`]: absent, or present with a value (`null` is not a value of any job
/// field, so it fails the fast read and the body is read the careful way).
enum Field<T> {
    Absent,
    Present(T),
}

impl<T> Default for Field<T> {
    fn default() -> Self {
        Field::Absent
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Field::Present)
    }
}

/// Every field any job has, read in one pass straight from the body (no `Value`, no tag
/// buffering). Only a body that reads cleanly into exactly one job's fields is taken from
/// here; anything else is read by [`JobMessage::parse`]'s careful path, which names the fault.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlatJob<'a> {
    v: u64,
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    query_id: Field<String>,
    #[serde(default)]
    dispatch_id: Field<String>,
    #[serde(default)]
    attempt: Field<u32>,
    #[serde(default)]
    timeout_ms: Field<u64>,
    #[serde(default)]
    fire_at: Field<DateTime<Utc>>,
}

impl FlatJob<'_> {
    /// The job, when the body is one well-formed job of this version with no other field.
    fn job(self) -> Option<Job> {
        use Field::{Absent, Present};
        if self.v != u64::from(JOB_VERSION) {
            return None;
        }
        match (&*self.kind, self.query_id, self.dispatch_id, self.attempt, self.timeout_ms, self.fire_at) {
            ("route", Present(query_id), Absent, Absent, Absent, Absent) => Some(Job::Route { query_id }),
            ("dispatch", Present(query_id), Present(dispatch_id), Present(attempt), Present(timeout_ms), Absent) => {
                Some(Job::Dispatch { query_id, dispatch_id, attempt, timeout_ms })
            }
            ("synthesize", Present(query_id), Absent, Absent, Absent, Absent) => Some(Job::Synthesize { query_id }),
            ("deadline", Present(query_id), Absent, Absent, Absent, Present(fire_at)) => {
                Some(Job::Deadline { query_id, fire_at })
            }
            _ => None,
        }
    }
}

/// Why a message body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// Larger than [`MAX_JOB_BYTES`].
    #[error("message body is {0} bytes; jobs are at most {MAX_JOB_BYTES}")]
    TooLarge(usize),
    /// Not a job of this version.
    #[error("message body is not a job: {0}")]
    Malformed(String),
    /// Written by another version of Switchyard.
    #[error("message body has version {0}; this build reads version {JOB_VERSION}")]
    Version(u64),
    /// An id is not a UUID.
    #[error("`{field}` is not a UUID")]
    BadId {
        /// Which field.
        field: &'static str,
    },
}

impl JobMessage {
    /// Wrap a job in the current version.
    pub fn new(job: Job) -> JobMessage {
        JobMessage { v: JOB_VERSION, job }
    }

    /// The JSON body: exactly what `serde_json` writes for it (`{"v":1,"type":…,…}`, fields in
    /// declaration order), written directly: every step sends jobs, and serde's flattened,
    /// internally tagged form goes through a map serializer for each one.
    pub fn to_body(&self) -> String {
        let mut body = String::with_capacity(160);
        body.push_str("{\"v\":");
        push_decimal(&mut body, u64::from(self.v), 1);
        let (kind, query_id) = match &self.job {
            Job::Route { query_id } => ("route", query_id),
            Job::Dispatch { query_id, .. } => ("dispatch", query_id),
            Job::Synthesize { query_id } => ("synthesize", query_id),
            Job::Deadline { query_id, .. } => ("deadline", query_id),
        };
        body.push_str(",\"type\":\"");
        body.push_str(kind);
        body.push_str("\",\"query_id\":");
        push_json_str(&mut body, query_id);
        match &self.job {
            Job::Route { .. } | Job::Synthesize { .. } => {}
            Job::Dispatch { dispatch_id, attempt, timeout_ms, .. } => {
                body.push_str(",\"dispatch_id\":");
                push_json_str(&mut body, dispatch_id);
                body.push_str(",\"attempt\":");
                push_decimal(&mut body, u64::from(*attempt), 1);
                body.push_str(",\"timeout_ms\":");
                push_decimal(&mut body, *timeout_ms, 1);
            }
            Job::Deadline { fire_at, .. } => {
                body.push_str(",\"fire_at\":");
                push_json_time(&mut body, fire_at);
            }
        }
        body.push('}');
        body
    }

    /// Parse and check a body: size, version, shape, ids.
    pub fn parse(body: &str) -> Result<Job, JobError> {
        if body.len() > MAX_JOB_BYTES {
            return Err(JobError::TooLarge(body.len()));
        }
        // The common case in one pass: a JSON object that is exactly one job of this version.
        // (A struct also reads from a JSON array, which is not a job: only objects go this way.)
        let fast = body.trim_start().starts_with('{').then(|| serde_json::from_str::<FlatJob<'_>>(body).ok());
        if let Some(job) = fast.flatten().and_then(FlatJob::job) {
            return check_ids(job);
        }
        // Anything else is read the careful way, which names what is wrong.
        let value: serde_json::Value = serde_json::from_str(body).map_err(|e| JobError::Malformed(e.to_string()))?;
        let serde_json::Value::Object(mut map) = value else {
            return Err(JobError::Malformed("the body is not a JSON object".into()));
        };
        match map.remove("v") {
            None => return Err(JobError::Malformed("missing `v`".into())),
            Some(v) => match v.as_u64() {
                Some(v) if v == u64::from(JOB_VERSION) => {}
                Some(v) => return Err(JobError::Version(v)),
                None => return Err(JobError::Malformed(format!("`v` must be a whole number, not {v}"))),
            },
        }
        let body = serde_json::Value::Object(map);
        // A well-formed job is read directly; only a refused one is read again with its path
        // tracked, to name the field a value is wrong in: `fire_at: input contains invalid
        // characters`.
        let job: Job = match Job::deserialize(&body) {
            Ok(job) => job,
            Err(_) => serde_path_to_error::deserialize(body).map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                JobError::Malformed(if path == "." { inner.to_string() } else { format!("{path}: {inner}") })
            })?,
        };
        check_ids(job)
    }
}

/// `n` in decimal, at least `width` digits (zero-padded), as `format!("{n:0width$}")` writes it
/// (width 1: as `serde_json` writes an unsigned integer), without the formatting machinery.
pub fn push_decimal(out: &mut String, n: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let start = i.min(digits.len().saturating_sub(width));
    out.extend(digits[start..].iter().map(|&d| char::from(d)));
}

/// A time as a JSON string, exactly as chrono's `Serialize` writes it (RFC 3339, `Z`, the
/// fraction in 3, 6 or 9 digits as the nanoseconds need, none when they are 0; a leap second
/// as second 60), written directly: every query arms a deadline job, and chrono's writer goes
/// through the formatting machinery. A year outside 0–9999 goes the serde way.
fn push_json_time(out: &mut String, t: &DateTime<Utc>) {
    use chrono::{Datelike, Timelike};
    let year = t.year();
    if !(0..=9999).contains(&year) {
        out.push_str(&serde_json::to_string(t).unwrap_or_default());
        return;
    }
    out.push('"');
    push_decimal(out, year.unsigned_abs().into(), 4);
    for (separator, n) in [('-', t.month()), ('-', t.day()), ('T', t.hour()), (':', t.minute())] {
        out.push(separator);
        push_decimal(out, n.into(), 2);
    }
    let (mut second, mut nano) = (t.second(), t.nanosecond());
    if nano >= 1_000_000_000 {
        second += 1;
        nano -= 1_000_000_000;
    }
    out.push(':');
    push_decimal(out, second.into(), 2);
    if nano != 0 {
        out.push('.');
        if nano % 1_000_000 == 0 {
            push_decimal(out, (nano / 1_000_000).into(), 3);
        } else if nano % 1_000 == 0 {
            push_decimal(out, (nano / 1_000).into(), 6);
        } else {
            push_decimal(out, nano.into(), 9);
        }
    }
    out.push_str("Z\"");
}

/// `s` as a JSON string: as is between quotes when nothing in it needs escaping (ids), else
/// escaped by `serde_json`.
fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    }
}

/// A job whose ids are UUIDs (they become store keys).
fn check_ids(job: Job) -> Result<Job, JobError> {
    if uuid::Uuid::parse_str(job.query_id()).is_err() {
        return Err(JobError::BadId { field: "query_id" });
    }
    if let Job::Dispatch { dispatch_id, .. } = &job {
        if uuid::Uuid::parse_str(dispatch_id).is_err() {
            return Err(JobError::BadId { field: "dispatch_id" });
        }
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: &str = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";

    #[test]
    fn a_job_survives_the_wire() {
        let job = Job::Dispatch { query_id: Q.into(), dispatch_id: Q.into(), attempt: 2, timeout_ms: 1_500 };
        assert_eq!(JobMessage::parse(&JobMessage::new(job.clone()).to_body()), Ok(job));
    }

    #[test]
    fn bodies_of_other_versions_wrong_shapes_and_hostile_ids_are_refused() {
        assert_eq!(JobMessage::parse(r#"{"v":2,"type":"route","query_id":"x"}"#), Err(JobError::Version(2)));
        assert!(matches!(JobMessage::parse("not json"), Err(JobError::Malformed(_))));
        assert!(matches!(JobMessage::parse(r#"{"v":1,"type":"launch"}"#), Err(JobError::Malformed(_))));
        assert_eq!(
            JobMessage::parse(r#"{"v":1,"type":"route","query_id":"' OR 1=1 --"}"#),
            Err(JobError::BadId { field: "query_id" })
        );
        assert!(matches!(JobMessage::parse(&"x".repeat(MAX_JOB_BYTES + 1)), Err(JobError::TooLarge(_))));
    }

    #[test]
    fn a_body_is_written_exactly_as_serde_writes_it() {
        let fire_at = "2026-11-23T08:00:00.123456789Z".parse().expect("a time");
        for id in [Q, "quote \" back \\ slash \u{1} é", ""] {
            for job in [
                Job::Route { query_id: id.into() },
                Job::Dispatch { query_id: id.into(), dispatch_id: Q.into(), attempt: 7, timeout_ms: u64::MAX },
                Job::Dispatch { query_id: Q.into(), dispatch_id: id.into(), attempt: 0, timeout_ms: 0 },
                Job::Synthesize { query_id: id.into() },
                Job::Deadline { query_id: id.into(), fire_at },
            ] {
                let message = JobMessage::new(job);
                assert_eq!(message.to_body(), serde_json::to_string(&message).expect("serializes"));
            }
        }
    }

    #[test]
    fn a_time_is_written_exactly_as_chronos_serde_writes_it() {
        use chrono::{NaiveDate, TimeZone};
        let mut times: Vec<DateTime<Utc>> = Vec::new();
        for nano in [0, 1, 999, 1_000, 120_000, 999_999, 1_000_000, 5_000_000, 999_000_000, 123_456_789, 999_999_999] {
            for secs in [0, 59, 1_795_000_000, 1_795_000_059, 253_402_300_799, -1, -62_167_219_200] {
                times.extend(DateTime::from_timestamp(secs, nano));
            }
        }
        // A leap second (nanoseconds past 10^9), and years past the four digits.
        let leap = NaiveDate::from_ymd_opt(2016, 12, 31).and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_500_000_000));
        times.extend(leap.map(|t| Utc.from_utc_datetime(&t)));
        times.extend(DateTime::from_timestamp(253_402_300_800, 0));
        times.extend(DateTime::from_timestamp(-62_167_219_201, 7));
        assert!(times.len() > 70);
        for t in times {
            let mut written = String::new();
            push_json_time(&mut written, &t);
            assert_eq!(written, serde_json::to_string(&t).expect("serializes"), "{t:?}");
        }
    }

    #[test]
    fn every_kind_of_job_survives_the_wire() {
        let fire_at = "2026-11-23T08:00:00Z".parse().expect("a time");
        for job in [
            Job::Route { query_id: Q.into() },
            Job::Dispatch { query_id: Q.into(), dispatch_id: Q.into(), attempt: 1, timeout_ms: 0 },
            Job::Synthesize { query_id: Q.into() },
            Job::Deadline { query_id: Q.into(), fire_at },
        ] {
            assert_eq!(JobMessage::parse(&JobMessage::new(job.clone()).to_body()), Ok(job));
        }
    }

    #[test]
    fn a_body_the_one_pass_read_does_not_take_is_judged_as_before() {
        // Accepted the careful way: escapes, a repeated key (the last one counts), spacing.
        let escaped = format!(r#"{{"v":1,"type":"rout\u0065","query_id":"{Q}"}}"#);
        assert_eq!(JobMessage::parse(&escaped), Ok(Job::Route { query_id: Q.into() }));
        let repeated = format!(r#"{{"v":1,"type":"route","query_id":"x","query_id":"{Q}"}}"#);
        assert_eq!(JobMessage::parse(&repeated), Ok(Job::Route { query_id: Q.into() }));
        let spaced = format!(" \n{{ \"v\" : 1 , \"type\" : \"synthesize\" , \"query_id\" : \"{Q}\" }} ");
        assert_eq!(JobMessage::parse(&spaced), Ok(Job::Synthesize { query_id: Q.into() }));
        // Refused, with the careful read's reason.
        let refused = [
            format!(r#"{{"v":1,"type":"route","query_id":"{Q}","dispatch_id":null}}"#),
            format!(r#"{{"v":1,"type":"route","query_id":"{Q}","attempt":1}}"#),
            format!(r#"{{"v":1,"type":"route","query_id":null}}"#),
            format!(r#"{{"v":1,"type":"route","query_id":"{Q}","extra":true}}"#),
            format!(r#"{{"v":1,"type":"dispatch","query_id":"{Q}","dispatch_id":"{Q}","attempt":1}}"#),
            format!(r#"{{"v":1,"type":"dispatch","query_id":"{Q}","dispatch_id":"{Q}","attempt":1.5,"timeout_ms":1}}"#),
            format!(r#"{{"v":1,"type":"deadline","query_id":"{Q}","fire_at":"tomorrow"}}"#),
            format!(r#"{{"v":1.0,"type":"route","query_id":"{Q}"}}"#),
            format!(r#"{{"type":"route","query_id":"{Q}"}}"#),
            format!(r#"[1,"route","{Q}"]"#),
        ];
        for body in &refused {
            assert!(matches!(JobMessage::parse(body), Err(JobError::Malformed(_))), "{body}");
        }
        let deadline = JobMessage::parse(&refused[6]);
        assert!(matches!(&deadline, Err(JobError::Malformed(m)) if m.contains("invalid characters")), "{deadline:?}");
        let other_version = format!(r#"{{"v":3,"type":"route","query_id":"{Q}"}}"#);
        assert_eq!(JobMessage::parse(&other_version), Err(JobError::Version(3)));
        let bad_dispatch =
            format!(r#"{{"v":1,"type":"dispatch","query_id":"{Q}","dispatch_id":"d","attempt":1,"timeout_ms":1}}"#);
        assert_eq!(JobMessage::parse(&bad_dispatch), Err(JobError::BadId { field: "dispatch_id" }));
    }
}
