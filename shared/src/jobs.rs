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

    /// The JSON body.
    pub fn to_body(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse and check a body: size, version, shape, ids.
    pub fn parse(body: &str) -> Result<Job, JobError> {
        if body.len() > MAX_JOB_BYTES {
            return Err(JobError::TooLarge(body.len()));
        }
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
}
