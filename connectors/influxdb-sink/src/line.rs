//! A message as one point of InfluxDB line protocol:
//! `measurement,tag=value,... field=value,... timestamp`.
//!
//! The measurement is `measurement`, or the record's `measurement_field`; the tags
//! are Iggy's metadata tags (`stream`, `topic`, `partition`, `offset`) and the
//! record's `tags`; the fields are Iggy's (`message_id`, the payload as one string
//! field, the metadata not written as tags) or, with `payload_format = "fields"`, the
//! record's keys, typed (`record.rs`). The timestamp is the record's
//! `timestamp_field` (in `precision` units) or the message's stored or origin
//! timestamp.
//!
//! A point is identified by its measurement, tag set and timestamp, all taken from
//! the message and never from the clock: the same message written again overwrites
//! its own point (the idempotence the sink relies on). A message that cannot be a
//! point (not JSON, no measurement, a timestamp that is not an integer, a name line
//! protocol cannot carry) is an error naming why: it goes to the dead letters.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ferry_guest::{SinkBatch, StoredMessage};
use serde_json::Value;

use crate::config::{Config, PayloadFormat, TimestampFrom};
use crate::escape::{compact_quoted, escaped, quoted};
use crate::record::{self, Record};

/// What a point is built in: the fields are written apart, since a record's keys
/// come in any order and the measurement and tags go first.
#[derive(Default)]
pub struct Scratch {
    fields: String,
}

/// Append the point for `message` of `batch` to `out` (with no newline), or say
/// why it cannot be one (and append nothing).
pub fn append(
    config: &Config,
    batch: &SinkBatch,
    message: &StoredMessage,
    scratch: &mut Scratch,
    out: &mut String,
) -> Result<(), String> {
    let start = out.len();
    let result = build(config, batch, message, scratch, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Whether the config reads keys of the record (which must then be an object).
fn reads_keys(config: &Config) -> bool {
    config.measurement_field.is_some()
        || !config.tags.is_empty()
        || config.timestamp_field.is_some()
        || matches!(config.payload_format, PayloadFormat::Fields(_))
}

fn build(
    config: &Config,
    batch: &SinkBatch,
    message: &StoredMessage,
    scratch: &mut Scratch,
    out: &mut String,
) -> Result<(), String> {
    let fields = &mut scratch.fields;
    fields.clear();
    let record = match &config.payload_format {
        PayloadFormat::Fields(only) => Some(record::read(config, &message.payload, Some(fields), only)?),
        _ if reads_keys(config) => Some(record::read(config, &message.payload, None, &[])?),
        _ => None,
    };
    match &config.payload_format {
        PayloadFormat::Fields(_) => {}
        format => {
            write!(fields, ",message_id=\"{}\"", message.id).expect("writing to a String");
            match format {
                PayloadFormat::Json => {
                    let text = json_text(&message.payload, record.is_some())?;
                    fields.push_str(",payload_json=");
                    compact_quoted(fields, text);
                }
                PayloadFormat::Text => {
                    let text = message
                        .payload_str()
                        .ok_or("its payload is not UTF-8 (payload_format = \"text\")".to_string())?;
                    fields.push_str(",payload_text=");
                    quoted(fields, text);
                }
                _ => {
                    fields.push_str(",payload_base64=\"");
                    STANDARD.encode_string(&message.payload, fields);
                    fields.push('"');
                }
            }
        }
    }
    if config.include_metadata {
        if !config.stream_tag {
            fields.push_str(",iggy_stream=");
            quoted(fields, &batch.stream);
        }
        if !config.topic_tag {
            fields.push_str(",iggy_topic=");
            quoted(fields, &batch.topic);
        }
        if !config.partition_tag {
            write!(fields, ",iggy_partition={}i", batch.partition).expect("writing to a String");
        }
    }
    // InfluxDB 1.x has no unsigned integers (it refuses the `u` Iggy's sink writes
    // for 2.x): the checksum's 64 bits go as a signed integer, as Iggy's PostgreSQL
    // sink stores them. A message from the local log has none.
    if config.include_checksum
        && let Some(checksum) = message.iggy_checksum()
    {
        write!(fields, ",iggy_checksum={}i", checksum as i64).expect("writing to a String");
    }
    if config.include_origin_timestamp
        && let Some(origin) = message.origin_timestamp
    {
        write!(fields, ",iggy_origin_timestamp={origin}i").expect("writing to a String");
    }
    if fields.is_empty() {
        return Err("it has no field to write (a point needs one)".into());
    }

    let measurement = match (&config.measurement_field, &record) {
        (Some(key), Some(record)) => match &record.measurement {
            Some(Value::String(name)) if !name.is_empty() => name.as_str(),
            Some(other) => return Err(format!("its measurement_field {key:?} is {other}, not a non-empty string")),
            None => return Err(format!("it has no {key:?} (the measurement_field): no measurement to write it to")),
        },
        _ => config.measurement.as_str(),
    };
    escaped(out, "the measurement", measurement, &[',', ' '])?;
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
    if let Some(record) = &record {
        record_tags(config, record, out)?;
    }
    out.push(' ');
    // Every field was written with a separator before it.
    out.push_str(&fields[1..]);
    let timestamp = timestamp(config, record.as_ref(), message)?;
    write!(out, " {timestamp}").expect("writing to a String");
    Ok(())
}

/// The record's `tags`, in the config's order.
fn record_tags(config: &Config, record: &Record, out: &mut String) -> Result<(), String> {
    for (key, value) in config.tags.iter().zip(&record.tags) {
        let text = match value {
            None | Some(Value::Null) => continue,
            Some(Value::String(text)) if text.is_empty() => continue,
            Some(Value::String(text)) => text.clone(),
            Some(value @ (Value::Bool(_) | Value::Number(_))) => value.to_string(),
            Some(Value::Array(_) | Value::Object(_)) => return Err(format!("its tag {key:?} is an object or array")),
        };
        tag(out, key, &text)?;
    }
    Ok(())
}

/// The payload as text, checked to be JSON (an object when `read`, by `record.rs`).
fn json_text(payload: &[u8], read: bool) -> Result<&str, String> {
    let text = std::str::from_utf8(payload).map_err(|e| format!("its payload is not JSON: {e}"))?;
    if !read {
        serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| format!("its payload is not JSON: {e}"))?;
    }
    Ok(text)
}

/// The point's timestamp, in the config's precision.
fn timestamp(config: &Config, record: Option<&Record>, message: &StoredMessage) -> Result<i64, String> {
    if let Some(key) = &config.timestamp_field {
        return match record.and_then(|r| r.timestamp.as_ref()) {
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
    escaped(out, "a tag key", key, &[',', '=', ' '])?;
    out.push('=');
    escaped(out, &format!("the tag {key:?}'s value"), value, &[',', '=', ' '])
}
