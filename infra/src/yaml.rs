//! The YAML writer: small builders for the template's values, mappings, tags and
//! intrinsic functions (`!Ref`, `!GetAtt`, `!Sub`), so the renderer reads as the template it writes.

use serde_yaml::value::{Tag, TaggedValue};
use serde_yaml::{Mapping, Value};

// ---- rendering -----------------------------------------------------------------------------

pub(crate) fn s(text: &str) -> Value {
    Value::String(text.to_string())
}

pub(crate) fn n(number: u64) -> Value {
    Value::Number(number.into())
}

pub(crate) fn seq(items: Vec<Value>) -> Value {
    Value::Sequence(items)
}

pub(crate) fn strings(items: &[&str]) -> Value {
    seq(items.iter().map(|i| s(i)).collect())
}

pub(crate) fn map(entries: Vec<(&str, Value)>) -> Value {
    let mut m = Mapping::new();
    for (k, v) in entries {
        m.insert(s(k), v);
    }
    Value::Mapping(m)
}

pub(crate) fn tagged(tag: &str, value: Value) -> Value {
    Value::Tagged(Box::new(TaggedValue { tag: Tag::new(tag), value }))
}

pub(crate) fn reference(id: &str) -> Value {
    tagged("Ref", s(id))
}

pub(crate) fn get_att(id: &str, attribute: &str) -> Value {
    tagged("GetAtt", s(&format!("{id}.{attribute}")))
}

pub(crate) fn sub(text: &str) -> Value {
    tagged("Sub", s(text))
}

pub(crate) fn policy(name: &str, statements: Vec<Value>) -> Value {
    map(vec![
        ("PolicyName", s(name)),
        ("PolicyDocument", map(vec![("Version", s("2012-10-17")), ("Statement", seq(statements))])),
    ])
}

pub(crate) fn allow(actions: &[&str], resources: Vec<Value>) -> Value {
    map(vec![("Effect", s("Allow")), ("Action", strings(actions)), ("Resource", seq(resources))])
}
