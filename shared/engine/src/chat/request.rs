//! A chat completions request read and checked: every field named in an error, the
//! conversation turned into the session's prior turns.

use super::super::deps::Deps;
use super::super::intake::IntakeError;
use super::*;
use serde_json::{json, Map, Value};
use switchyard_core::admission::{FieldError, ValidationError};
use switchyard_model::manifest::Manifest;

/// A chat completions request, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The model named (the manifest's name).
    pub model: String,
    /// Answer with `chat.completion.chunk` server-sent events.
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with `usage` and no choices.
    pub include_usage: bool,
    /// The last user message: this turn's question.
    pub turn: String,
    /// Earlier exchanges, oldest first: (question, answer).
    pub prior: Vec<(String, String)>,
    /// The `session_id` extension.
    pub session_id: Option<String>,
    /// The `switchyard.preferences` extension: passed to the agents as with `POST /v1/queries`.
    pub preferences: Option<Value>,
    /// Parameters present and ignored ([`IGNORED_PARAMETERS`]), for the reply.
    pub ignored: Vec<String>,
}

pub(crate) fn invalid(errors: Vec<FieldError>) -> IntakeError {
    IntakeError::Invalid(ValidationError { errors })
}

pub(crate) fn field(field: impl Into<String>, rule: impl Into<String>) -> FieldError {
    FieldError { field: field.into(), rule: rule.into() }
}

/// The model id this deployment answers to: the manifest's name.
pub fn model_id(manifest: &Manifest) -> &str {
    &manifest.name
}

/// `GET /v1/models`: the manifest as the one model.
pub fn models(deps: &Deps) -> Value {
    json!({
        "object": "list",
        "data": [{
            "id": model_id(&deps.manifest),
            "object": "model",
            "created": 0,
            "owned_by": "switchyard",
            "description": deps.manifest.description,
        }]
    })
}

/// The text of a message's `content`: a string, or an array of `{"type": "text", "text": …}`
/// parts joined; `None` (with the errors pushed) when it is neither.
pub(crate) fn content_text(path: &str, content: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    match content {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                let kind = part.get("type").and_then(Value::as_str);
                match (kind, part.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                    }
                    (Some("text"), None) => errors.push(field(format!("{path}.content[{j}].text"), "must be a string")),
                    (Some(other), _) => errors.push(field(
                        format!("{path}.content[{j}].type"),
                        format!("`{other}` is not supported: only text parts are"),
                    )),
                    (None, _) => errors.push(field(format!("{path}.content[{j}].type"), "must be `text`")),
                }
            }
            Some(text)
        }
        None | Some(Value::Null) => {
            errors.push(field(format!("{path}.content"), "is required: a string or an array of text parts"));
            None
        }
        Some(_) => {
            errors.push(field(format!("{path}.content"), "must be a string or an array of text parts"));
            None
        }
    }
}

pub(crate) fn has_control(text: &str) -> bool {
    text.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
}

/// Check a request body against the protocol and Switchyard's limits. Every broken rule is
/// reported, each naming its field.
pub fn parse_request(body: &[u8], manifest: &Manifest) -> Result<ChatRequest, IntakeError> {
    if body.len() > MAX_CHAT_BODY_BYTES {
        return Err(IntakeError::TooLarge { size: Some(body.len()), limit: MAX_CHAT_BODY_BYTES });
    }
    let text = std::str::from_utf8(body).map_err(|_| invalid(vec![field("body", "must be UTF-8 JSON")]))?;
    if switchyard_core::admission::json_depth_exceeds(text, switchyard_core::admission::MAX_JSON_DEPTH) {
        return Err(invalid(vec![field(
            "body",
            format!(
                "must not nest arrays or objects deeper than {} levels",
                switchyard_core::admission::MAX_JSON_DEPTH
            ),
        )]));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| invalid(vec![field("body", format!("must be a JSON object ({e})"))]))?;
    let Value::Object(map) = value else {
        return Err(invalid(vec![field("body", "must be a JSON object")]));
    };
    let mut errors = Vec::new();
    let mut ignored = Vec::new();
    let mut request = ChatRequest {
        model: String::new(),
        stream: false,
        include_usage: false,
        turn: String::new(),
        prior: Vec::new(),
        session_id: None,
        preferences: None,
        ignored: Vec::new(),
    };
    let mut messages = None;
    let mut stream_options = None;
    for (key, value) in &map {
        match key.as_str() {
            "model" => match value.as_str() {
                Some(m) if m == model_id(manifest) => request.model = m.to_string(),
                Some(m) => errors.push(field(
                    "model",
                    format!(
                        "`{}` is not served here; the model is `{}` (GET /v1/models)",
                        switchyard_core::context::clip(m, 64),
                        model_id(manifest)
                    ),
                )),
                None => errors.push(field("model", "must be a string")),
            },
            "messages" => messages = Some(value),
            "stream" => match value {
                Value::Bool(b) => request.stream = *b,
                Value::Null => {}
                _ => errors.push(field("stream", "must be true or false")),
            },
            "stream_options" => stream_options = Some(value),
            "n" => match value {
                Value::Null => {}
                v if v.as_u64() == Some(1) => {}
                _ => errors.push(field("n", "must be 1: Switchyard writes one answer per turn")),
            },
            "logprobs" => match value {
                Value::Null | Value::Bool(false) => {}
                _ => errors.push(field("logprobs", "must be false: agents' log probabilities are not relayed")),
            },
            "tool_choice" => match value.as_str() {
                Some("none") => {}
                _ => errors.push(field("tool_choice", "must be `none`: no tools are offered")),
            },
            "parallel_tool_calls" => {}
            "modalities" => match value.as_array() {
                Some(m) if m.iter().all(|v| v.as_str() == Some("text")) => {}
                _ => errors.push(field("modalities", "must be [\"text\"]: answers are text")),
            },
            "response_format" if value.get("type").and_then(Value::as_str) == Some("text") => {}
            "logit_bias" if value.as_object().is_some_and(Map::is_empty) => {}
            "tools" | "functions" if value.as_array().is_some_and(Vec::is_empty) => {}
            "session_id" => match value.as_str() {
                Some(id) => request.session_id = Some(id.to_string()),
                None => errors.push(field("session_id", "must be a string")),
            },
            "switchyard" => match value {
                Value::Object(ext) => {
                    for (k, v) in ext {
                        match k.as_str() {
                            "session_id" => match v.as_str() {
                                Some(id) if request.session_id.as_deref().is_none_or(|s| s == id) => {
                                    request.session_id = Some(id.to_string())
                                }
                                Some(_) => errors.push(field("switchyard.session_id", "differs from `session_id`")),
                                None => errors.push(field("switchyard.session_id", "must be a string")),
                            },
                            "preferences" if v.is_object() => request.preferences = Some(v.clone()),
                            "preferences" => errors.push(field("switchyard.preferences", "must be an object")),
                            other => errors.push(field(
                                format!("switchyard.{}", switchyard_core::context::clip(other, 64)),
                                "unknown field (known: session_id, preferences)",
                            )),
                        }
                    }
                }
                _ => errors.push(field("switchyard", "must be an object")),
            },
            k if IGNORED_PARAMETERS.contains(&k) => ignored.push(k.to_string()),
            k => match REFUSED_PARAMETERS.iter().find(|(name, _)| *name == k) {
                Some((name, rule)) => errors.push(field(*name, *rule)),
                None => errors.push(field(
                    switchyard_core::context::clip(k, 64),
                    "unknown parameter (docs/openai-compatible.md lists the ones accepted)",
                )),
            },
        }
    }
    if request.model.is_empty() && !map.contains_key("model") {
        errors.push(field("model", format!("is required (the model is `{}`)", model_id(manifest))));
    }
    match stream_options {
        None | Some(Value::Null) => {}
        Some(Value::Object(o)) if request.stream => {
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("include_usage", Value::Bool(b)) => request.include_usage = *b,
                    ("include_usage", _) => errors.push(field("stream_options.include_usage", "must be true or false")),
                    (other, _) => errors.push(field(
                        format!("stream_options.{}", switchyard_core::context::clip(other, 64)),
                        "unknown field (known: include_usage)",
                    )),
                }
            }
        }
        Some(Value::Object(_)) => errors.push(field("stream_options", "is only allowed with `stream: true`")),
        Some(_) => errors.push(field("stream_options", "must be an object")),
    }
    match messages {
        None => errors.push(field("messages", "is required: a non-empty array of messages")),
        Some(Value::Array(list)) if list.is_empty() => errors.push(field("messages", "must not be empty")),
        Some(Value::Array(list)) if list.len() > MAX_MESSAGES => {
            errors.push(field("messages", format!("must have at most {MAX_MESSAGES} entries; got {}", list.len())))
        }
        Some(Value::Array(list)) => conversation(list, manifest, &mut request, &mut errors),
        Some(_) => errors.push(field("messages", "must be an array")),
    }
    if let Some(id) = &request.session_id {
        let chars = id.chars().count();
        if chars == 0
            || chars > switchyard_core::admission::MAX_SESSION_ID_CHARS
            || !id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
        {
            errors.push(field(
                "session_id",
                format!(
                    "must be 1 to {} letters, digits, `.`, `_`, `:` or `-`",
                    switchyard_core::admission::MAX_SESSION_ID_CHARS
                ),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    request.ignored = ignored;
    Ok(request)
}

/// Read `messages` into the turn and the earlier exchanges.
pub(crate) fn conversation(
    list: &[Value],
    manifest: &Manifest,
    request: &mut ChatRequest,
    errors: &mut Vec<FieldError>,
) {
    let last = list.len() - 1;
    for (i, message) in list.iter().enumerate() {
        let path = format!("messages[{i}]");
        let Some(object) = message.as_object() else {
            errors.push(field(path, "must be an object with `role` and `content`"));
            continue;
        };
        for key in object.keys() {
            match key.as_str() {
                "role" | "content" | "name" | "refusal" => {}
                "tool_calls" | "function_call" | "tool_call_id" | "audio" => {
                    errors.push(field(format!("{path}.{key}"), "is not supported: no tools are offered"))
                }
                other => errors.push(field(
                    format!("{path}.{}", switchyard_core::context::clip(other, 64)),
                    "unknown field (known: role, content, name)",
                )),
            }
        }
        let role = object.get("role").and_then(Value::as_str);
        let text = match role {
            Some("system" | "developer" | "user" | "assistant") => content_text(&path, object.get("content"), errors),
            Some("tool" | "function") => {
                errors.push(field(
                    format!("{path}.role"),
                    "tool and function messages are not supported: no tools are offered",
                ));
                continue;
            }
            Some(other) => {
                errors.push(field(
                    format!("{path}.role"),
                    format!(
                        "`{}` is not a role; one of system, developer, user, assistant",
                        switchyard_core::context::clip(other, 32)
                    ),
                ));
                continue;
            }
            None => {
                errors.push(field(format!("{path}.role"), "is required: one of system, developer, user, assistant"));
                continue;
            }
        };
        let Some(text) = text else { continue };
        let role = role.unwrap_or_default();
        if i == last {
            if role != "user" {
                errors.push(field(format!("{path}.role"), "the last message must be the user's turn (`user`)"));
                continue;
            }
            let turn = text.trim();
            let max = manifest.query.max_query_chars;
            let chars = turn.chars().count();
            if turn.is_empty() {
                errors.push(field(format!("{path}.content"), "must not be empty or only whitespace"));
            } else if chars > max {
                errors.push(field(format!("{path}.content"), format!("must be at most {max} characters; got {chars}")));
            } else if has_control(turn) {
                errors.push(field(
                    format!("{path}.content"),
                    "must not contain control characters other than newline, tab and carriage return",
                ));
            }
            request.turn = turn.to_string();
            continue;
        }
        let chars = text.chars().count();
        if chars > MAX_MESSAGE_CHARS {
            errors.push(field(
                format!("{path}.content"),
                format!("must be at most {MAX_MESSAGE_CHARS} characters; got {chars}"),
            ));
            continue;
        }
        if has_control(&text) {
            errors.push(field(
                format!("{path}.content"),
                "must not contain control characters other than newline, tab and carriage return",
            ));
            continue;
        }
        let text = text.trim().to_string();
        match role {
            // The manifest writes every agent's instructions; system messages do not reach them.
            "system" | "developer" => {}
            "user" if text.is_empty() => {
                errors.push(field(format!("{path}.content"), "must not be empty or only whitespace"))
            }
            "user" => request.prior.push((text, String::new())),
            // An assistant message answers the user message before it; one before any question
            // (a greeting) belongs to no turn.
            _ => {
                if let Some((_, answer)) = request.prior.last_mut() {
                    if !answer.is_empty() && !text.is_empty() {
                        answer.push_str("\n\n");
                    }
                    answer.push_str(&text);
                }
            }
        }
    }
}
