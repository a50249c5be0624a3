//! Temporary intake validation; replaced by the validation branch.
use crate::contracts::ParsedQuery;
use crate::manifest::Manifest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    /// Text.
    pub query: Option<String>,
    /// Parsed.
    pub parsed_query: Option<Value>,
    /// Session.
    pub session_id: Option<String>,
    /// History.
    pub conversation_history: Option<Vec<Value>>,
    /// Prefs.
    pub preferences: Option<Value>,
}

/// Valid.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedRequest {
    /// Text.
    pub text: String,
    /// Parsed.
    pub parsed: Option<ParsedQuery>,
    /// Session.
    pub session_id: Option<String>,
    /// History.
    pub conversation_history: Vec<Value>,
    /// Prefs.
    pub preferences: Option<Value>,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// Field error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldError {
    /// Field.
    pub field: String,
    /// Rule.
    pub rule: String,
}

/// Errors.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[error("invalid request")]
pub struct ValidationError {
    /// Errors.
    pub errors: Vec<FieldError>,
}

/// Validate.
pub fn validate_request(body: &[u8], _m: &Manifest) -> Result<ValidatedRequest, ValidationError> {
    let err = |f: &str, r: String| ValidationError { errors: vec![FieldError { field: f.into(), rule: r }] };
    let req: QueryRequest = serde_json::from_slice(body).map_err(|e| err("body", e.to_string()))?;
    let text = req.query.ok_or_else(|| err("query", "required".into()))?;
    if text.trim().is_empty() {
        return Err(err("query", "must not be empty".into()));
    }
    Ok(ValidatedRequest { text, parsed: None, session_id: req.session_id, conversation_history: vec![], preferences: None, warnings: vec![] })
}
