//! A message as one point of InfluxDB line protocol:
//! `measurement,tag=value,... field=value,... timestamp`.
//!
//! The measurement is `measurement`, or the record's `measurement_field`; the tags
//! are Iggy's metadata tags (`stream`, `topic`, `partition`, `offset`) and the
//! record's `tags`; the fields are Iggy's (`message_id`, the payload as one string
//! field, the metadata not written as tags) or, with `payload_format = "fields"`, the
//! record's keys, typed (an integer `i`, a float, a boolean, a string; an object or
//! array as its JSON text). The timestamp is the record's `timestamp_field` (in
//! `precision` units) or the message's stored or origin timestamp.
//!
//! A point is identified by its measurement, tag set and timestamp, all taken from
//! the message and never from the clock: the same message written again overwrites
//! its own point (the idempotence the sink relies on). A message that cannot be a
//! point (not JSON, no measurement, a timestamp that is not an integer, a name line
//! protocol cannot carry) is an error naming why: it goes to the dead letters.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ferry_guest::{SinkBatch, StoredMessage};
use serde_json::{Map, Value};
use std::fmt::Write as _;

use crate::config::{Config, PayloadFormat, TimestampFrom};

/// Append the point for `message` of `batch` to `out` (with no newline), or say
/// why it cannot be one (and append nothing).
pub fn append(config: &Config, batch: &SinkBatch, message: &StoredMessage, out: &mut String) -> Result<(), String> {
    let start = out.len();
    let result = build(config, batch, message, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn build(config: &Config, batch: &SinkBatch, message: &StoredMessage, out: &mut String) -> Result<(), String> {
    let record = record(config, message)?;
    let object = record.as_ref().and_then(Value::as_object);
    let measurement = match &config.measurement_field {
        Some(key) => match object.and_then(|o| o.get(key)) {
            Some(Value::String(name)) if !name.is_empty() => name.as_str(),
            Some(other) => return Err(format!("its measurement_field {key:?} is {other}, not a non-empty string")),
            None => return Err(format!("it has no {key:?} (the measurement_field): no measurement to write it to")),
        },
        None => config.measurement.as_str(),
    };
    name(out, "the measurement", measurement, &[',', ' '])?;

    if config.stream_tag {
        tag(out, "stream", &batch.stream)?;
    }
    if config.topic_tag {
        tag(out, "topic", &batch.topic)?;
    }
    if config.partition_tag {
        write!(out, ",partition={}", batch.partition).expect("writing to a String");
    }
    if config.offset_tag {
        write!(out, ",offset={}", message.offset).expect("writing to a String");
    }
    for key in &config.tags {
        let Some(value) = object.and_then(|o| o.get(key)) else { continue };
        let text = match value {
            Value::Null => continue,
            Value::String(text) if text.is_empty() => continue,
            Value::String(text) => text.clone(),
            Value::Bool(_) | Value::Number(_) => value.to_string(),
            Value::Array(_) | Value::Object(_) => return Err(format!("its tag {key:?} is an object or array")),
        };
        tag(out, key, &text)?;
    }

    out.push(' ');
    let fields_start = out.len();
    match &config.payload_format {
        PayloadFormat::Fields(keys) => record_fields(config, object, keys, out)?,
        format => {
            write!(out, "message_id=\"{}\"", message.id).expect("writing to a String");
            match format {
                PayloadFormat::Json => {
                    let compact = serde_json::to_string(record.as_ref().expect("json reads the record"))
                        .expect("JSON values serialize");
                    string_field(out, "payload_json", &compact);
                }
                PayloadFormat::Text => {
                    let text = message
                        .payload_str()
                        .ok_or("its payload is not UTF-8 (payload_format = \"text\")".to_string())?;
                    string_field(out, "payload_text", text);
                }
                _ => {
                    out.push_str(",payload_base64=\"");
                    STANDARD.encode_string(&message.payload, out);
                    out.push('"');
                }
            }
        }
    }
    if config.include_metadata {
        if !config.stream_tag {
            string_field(out, "iggy_stream", &batch.stream);
        }
        if !config.topic_tag {
            string_field(out, "iggy_topic", &batch.topic);
        }
        if !config.partition_tag {
            write!(out, ",iggy_partition={}i", batch.partition).expect("writing to a String");
        }
    }
    if config.include_origin_timestamp
        && let Some(origin) = message.origin_timestamp
    {
        write!(out, ",iggy_origin_timestamp={origin}i").expect("writing to a String");
    }
    if out.len() == fields_start {
        return Err("it has no field to write (a point needs one)".into());
    }
    // The fields may start with a separator when the first ones were left out.
    if out[fields_start..].starts_with(',') {
        out.remove(fields_start);
    }

    let timestamp = timestamp(config, object, message)?;
    write!(out, " {timestamp}").expect("writing to a String");
    Ok(())
}

/// The payload as JSON, when the config reads it as JSON.
fn record(config: &Config, message: &StoredMessage) -> Result<Option<Value>, String> {
    let needs_json = matches!(config.payload_format, PayloadFormat::Json | PayloadFormat::Fields(_))
        || config.measurement_field.is_some()
        || !config.tags.is_empty()
        || config.timestamp_field.is_some();
    if !needs_json {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(&message.payload).map_err(|e| format!("its payload is not JSON: {e}"))?;
    let reads_keys = !matches!(config.payload_format, PayloadFormat::Json)
        || config.measurement_field.is_some()
        || !config.tags.is_empty()
        || config.timestamp_field.is_some();
    if reads_keys && !value.is_object() {
        return Err(format!("its payload is JSON but not an object (a {}): it has no keys to map", kind(&value)));
    }
    Ok(Some(value))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The record's keys as fields: `keys`, or every key not used otherwise.
fn record_fields(
    config: &Config,
    object: Option<&Map<String, Value>>,
    keys: &[String],
    out: &mut String,
) -> Result<(), String> {
    let object = object.expect("fields reads an object");
    let used = |key: &str| {
        config.tags.iter().any(|t| t == key)
            || config.measurement_field.as_deref() == Some(key)
            || config.timestamp_field.as_deref() == Some(key)
    };
    let chosen: Vec<(&String, &Value)> = if keys.is_empty() {
        object.iter().filter(|(key, _)| !used(key)).collect()
    } else {
        keys.iter().filter_map(|key| object.get_key_value(key)).collect()
    };
    for (key, value) in chosen {
        if value.is_null() {
            continue;
        }
        out.push(',');
        name(out, "a field key", key, &[',', '=', ' '])?;
        out.push('=');
        match value {
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => write!(out, "{i}i").expect("writing to a String"),
                // An integer past i64 (1.x has no unsigned fields by default) as a float.
                (None, Some(f)) => write!(out, "{f:?}").expect("writing to a String"),
                (None, None) => return Err(format!("its field {key:?} is a number InfluxDB cannot hold: {n}")),
            },
            Value::String(text) => quoted(out, text),
            other => quoted(out, &other.to_string()),
        }
    }
    Ok(())
}

/// The point's timestamp, in the config's precision.
fn timestamp(config: &Config, object: Option<&Map<String, Value>>, message: &StoredMessage) -> Result<i64, String> {
    if let Some(key) = &config.timestamp_field {
        return match object.and_then(|o| o.get(key)) {
            Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64().expect("checked")),
            Some(other) => Err(format!(
                "its timestamp_field {key:?} is {other}, not an integer (a time in {:?} since the epoch)",
                config.precision
            )),
            None => Err(format!("it has no {key:?} (the timestamp_field)")),
        };
    }
    let micros = match config.timestamp_from {
        TimestampFrom::Message => message.timestamp,
        TimestampFrom::OriginTimestamp => message
            .origin_timestamp
            .ok_or("it has no origin timestamp (timestamp_from = \"origin_timestamp\")".to_string())?,
    };
    i64::try_from(config.precision.of_micros(micros)).map_err(|_| format!("its timestamp {micros} µs is too late"))
}

/// `,key=value`, escaped.
fn tag(out: &mut String, key: &str, value: &str) -> Result<(), String> {
    out.push(',');
    name(out, "a tag key", key, &[',', '=', ' '])?;
    out.push('=');
    name(out, &format!("the tag {key:?}'s value"), value, &[',', '=', ' '])
}

/// `,key="text"`, escaped.
fn string_field(out: &mut String, key: &str, text: &str) {
    out.push(',');
    out.push_str(key);
    out.push('=');
    quoted(out, text);
}

/// A string field's value: in quotes, `"` and `\` escaped.
fn quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// A measurement, tag key, tag value or field key, its `special` characters escaped.
/// Line protocol 1.x has no escape for a newline, nor for a backslash: one that
/// ends the name or comes before a special character would escape what follows.
fn name(out: &mut String, what: &str, text: &str, special: &[char]) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if text.contains(['\n', '\r']) {
        return Err(format!("{what} {text:?} holds a line break, which line protocol cannot carry"));
    }
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_none_or(|next| special.contains(next) || *next == '\\') {
            return Err(format!("{what} {text:?} holds a backslash line protocol would read as an escape"));
        }
        if special.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    Ok(())
}
