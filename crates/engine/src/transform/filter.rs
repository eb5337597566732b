//! `filter_fields`: which fields of a record are kept. A field named in
//! `keep_fields` always is; any other is kept when it matches one of the patterns
//! (`include_matching`, the default) or when it matches none (`include_matching =
//! false`). A pattern matches a field when its key part and its value part (each
//! optional) both do.

use ferry_config::transforms::{FieldPattern, FilterFields, KeyPattern, ValuePattern};
use serde_json::{Map, Value};

pub(super) fn apply(filter: &FilterFields, fields: &mut Map<String, Value>) {
    fields.retain(|key, value| {
        if filter.keep_fields.iter().any(|keep| keep == key) {
            return true;
        }
        let matches = filter.patterns.iter().any(|FieldPattern { key_pattern, value_pattern }| {
            key_pattern.as_ref().is_none_or(|p| key_matches(p, key))
                && value_pattern.as_ref().is_none_or(|p| value_matches(p, value))
        });
        matches == filter.include_matching
    });
}

fn key_matches(pattern: &KeyPattern, key: &str) -> bool {
    match pattern {
        KeyPattern::Exact(text) => key == text,
        KeyPattern::StartsWith(text) => key.starts_with(text.as_str()),
        KeyPattern::EndsWith(text) => key.ends_with(text.as_str()),
        KeyPattern::Contains(text) => key.contains(text.as_str()),
        KeyPattern::Regex(regex) => regex.0.is_match(key),
    }
}

fn value_matches(pattern: &ValuePattern, value: &Value) -> bool {
    match pattern {
        ValuePattern::Equals(expected) => value == expected,
        ValuePattern::Contains(text) => value.as_str().is_some_and(|s| s.contains(text.as_str())),
        ValuePattern::Regex(regex) => value.as_str().is_some_and(|s| regex.0.is_match(s)),
        ValuePattern::GreaterThan(n) => value.as_f64().is_some_and(|v| v > *n),
        ValuePattern::LessThan(n) => value.as_f64().is_some_and(|v| v < *n),
        ValuePattern::Between(low, high) => value.as_f64().is_some_and(|v| *low <= v && v <= *high),
        ValuePattern::IsNull => value.is_null(),
        ValuePattern::IsNotNull => !value.is_null(),
        ValuePattern::IsString => value.is_string(),
        ValuePattern::IsNumber => value.is_number(),
        ValuePattern::IsBoolean => value.is_boolean(),
        ValuePattern::IsObject => value.is_object(),
        ValuePattern::IsArray => value.is_array(),
    }
}
