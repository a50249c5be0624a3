//! Structured output: find the JSON in a model's answer and check it against the agent's
//! output schema (a JSON Schema subset: `type`, `properties`, `required`, `enum`, `items`,
//! `minimum`, `maximum`).

use serde_json::Value;

/// The JSON object or array in a model's text: the whole text, or the part inside a
/// ```` ```json ```` fence, or from the first `{` to the last `}`.
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Some(v);
    }
    if let Some(start) = trimmed.find("```") {
        let after = &trimmed[start + 3..];
        let after = after.strip_prefix("json").unwrap_or(after);
        if let Some(end) = after.find("```") {
            if let Ok(v) = serde_json::from_str::<Value>(after[..end].trim()) {
                return Some(v);
            }
        }
    }
    let (start, end) = (trimmed.find('{')?, trimmed.rfind('}')?);
    if end <= start {
        return None;
    }
    serde_json::from_str::<Value>(&trimmed[start..=end]).ok()
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
    fn a_missing_required_field_or_wrong_enum_is_reported_with_its_path() {
        let schema = json!({"type": "object", "required": ["verdict"], "properties": {"verdict": {"enum": ["accept", "reject"]}}});
        assert!(check(&schema, &json!({"verdict": "accept"})).is_ok());
        assert_eq!(check(&schema, &json!({})).expect_err("missing"), "$.verdict is required but missing");
        assert!(check(&schema, &json!({"verdict": "maybe"}))
            .expect_err("not in enum")
            .starts_with("$.verdict is \"maybe\""));
    }
}
