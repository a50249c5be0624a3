//! Structured output: find the JSON in a model's answer and check it against the agent's
//! output schema (a JSON Schema subset: `type`, `properties`, `required`, `enum`, `items`,
//! `minimum`, `maximum`).

use serde_json::Value;

/// The JSON object or array in a model's text: the whole text, or the part inside a
/// ```` ```json ```` fence, or from the first `{` to the last `}`. Each is read strictly
/// first, then leniently where that is harmless: raw control characters inside strings (a
/// newline a model wrote into an answer) are read as their escapes. The result is still
/// checked against the schema.
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    let mut candidates = vec![trimmed];
    if let Some(start) = trimmed.find("```") {
        let after = &trimmed[start + 3..];
        let after = after.strip_prefix("json").unwrap_or(after);
        if let Some(end) = after.find("```") {
            candidates.push(after[..end].trim());
        }
    }
    if let (Some(start), Some(end)) = (trimmed.find('{'), trimmed.rfind('}')) {
        if start < end {
            candidates.push(&trimmed[start..=end]);
        }
    }
    candidates.iter().find_map(|c| parse(c))
}

/// `text` as JSON, strictly, or with raw control characters inside strings escaped.
fn parse(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text).ok().or_else(|| {
        let escaped = escape_controls_in_strings(text)?;
        serde_json::from_str::<Value>(&escaped).ok()
    })
}

/// `text` with the control characters inside its JSON strings escaped, or `None` when it has
/// none (nothing to retry).
fn escape_controls_in_strings(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    for c in text.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            } else if (c as u32) < 0x20 {
                changed = true;
                match c {
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    other => out.push_str(&format!("\\u{:04x}", other as u32)),
                }
                continue;
            }
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    changed.then_some(out)
}

/// The first way `value` breaks `schema`, with the path of the offending field.
pub fn check(schema: &Value, value: &Value) -> Result<(), String> {
    check_at(schema, value, "$")
}

fn type_matches(expected: &str, value: &Value) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn check_at(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else { return Ok(()) };
    match schema.get("type") {
        Some(Value::String(t)) if !type_matches(t, value) => return Err(format!("{path} should be {t}, got {value}")),
        Some(Value::Array(types)) if !types.iter().filter_map(Value::as_str).any(|t| type_matches(t, value)) => {
            return Err(format!("{path} has none of the types {}", Value::Array(types.clone())));
        }
        _ => {}
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(value) {
            return Err(format!("{path} is {value}, not one of {}", Value::Array(allowed.clone())));
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            if n < min {
                return Err(format!("{path} is {n}, below the minimum {min}"));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            if n > max {
                return Err(format!("{path} is {n}, above the maximum {max}"));
            }
        }
    }
    if let Some(obj) = value.as_object() {
        if let Some(Value::Array(required)) = schema.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(key) {
                    return Err(format!("{path}.{key} is required but missing"));
                }
            }
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (key, sub) in props {
                if let Some(v) = obj.get(key) {
                    check_at(sub, v, &format!("{path}.{key}"))?;
                }
            }
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        for (i, v) in list.iter().enumerate() {
            check_at(items, v, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

/// What constrained decoding (a server that turns the schema into a grammar) cannot honour
/// in `schema`: a `required` field that `properties` does not declare (the grammar never
/// produces it, so every answer fails the check) and numeric bounds (`minimum`, `maximum`:
/// left to the model, and an answer outside them fails). Each with the field's path.
pub fn grammar_warnings(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    lint_at(schema, "$", &mut out);
    out
}

fn lint_at(schema: &Value, path: &str, out: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else { return };
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = schema.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !props.is_some_and(|p| p.contains_key(key)) {
                out.push(format!(
                    "{path}.{key} is required but not in `properties`: a server that decodes by the schema never writes it, so every answer would fail; declare it under `properties`"
                ));
            }
        }
    }
    let bounds: Vec<&str> = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
        .into_iter()
        .filter(|k| schema.contains_key(*k))
        .collect();
    if !bounds.is_empty() {
        out.push(format!(
            "{path} has {} that decoding by the schema does not enforce: the model may write a number outside, and that answer fails the check; say the range in `description` or the prompt instead",
            bounds.join(" and ")
        ));
    }
    for (key, sub) in props.into_iter().flatten() {
        lint_at(sub, &format!("{path}.{key}"), out);
    }
    if let Some(items) = schema.get("items") {
        lint_at(items, &format!("{path}[]"), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_inside_a_fence_or_prose_is_found() {
        assert_eq!(extract_json("```json\n{\"a\": 1}\n```"), Some(json!({"a": 1})));
        assert_eq!(extract_json("Sure! {\"a\": 2} hope that helps"), Some(json!({"a": 2})));
        assert_eq!(extract_json("no json here"), None);
    }

    #[test]
    fn a_raw_newline_inside_a_string_is_read_as_its_escape_and_nothing_else_is_loosened() {
        assert_eq!(extract_json("{\"answer\": \"line one\nline two\"}"), Some(json!({"answer": "line one\nline two"})));
        assert_eq!(
            extract_json("{\"a\": \"tab\there\", \"b\": \"q\\\"\n\"}"),
            Some(json!({"a": "tab\there", "b": "q\"\n"}))
        );
        // Outside strings, whitespace is whitespace; broken JSON stays broken.
        assert_eq!(extract_json("{\n\"a\": 1\n}"), Some(json!({"a": 1})));
        assert_eq!(extract_json("{\"a\": \"cut\nno end"), None);
        assert_eq!(extract_json("{\"a\": 1,}"), None);
    }

    #[test]
    fn required_fields_outside_properties_and_numeric_bounds_are_named_with_their_paths() {
        let schema = json!({"type": "object", "required": ["ready", "reasoning"], "properties": {
            "ready": {"type": "boolean"},
            "scores": {"type": "array", "items": {"type": "number", "maximum": 10}},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1}}});
        let warnings = grammar_warnings(&schema);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].starts_with("$.reasoning is required but not in `properties`"), "{warnings:?}");
        assert!(warnings.iter().any(|w| w.starts_with("$.confidence has minimum and maximum")), "{warnings:?}");
        assert!(warnings.iter().any(|w| w.starts_with("$.scores[] has maximum")), "{warnings:?}");
        assert!(grammar_warnings(
            &json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}})
        )
        .is_empty());
    }

    #[test]
    fn a_missing_required_field_or_wrong_enum_is_reported_with_its_path() {
        let schema = json!({"type": "object", "required": ["verdict"], "properties": {"verdict": {"enum": ["accept", "reject"]}}});
        assert!(check(&schema, &json!({"verdict": "accept"})).is_ok());
        assert_eq!(check(&schema, &json!({})).expect_err("missing"), "$.verdict is required but missing");
        assert!(check(&schema, &json!({"verdict": "maybe"}))
            .expect_err("not in enum")
            .starts_with("$.verdict is \"maybe\""));
    }
}
