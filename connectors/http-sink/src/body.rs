//! What is sent for messages, as Iggy's HTTP sink sends it: each message's payload
//! as JSON when it is JSON (else `{"data": base64, "iggy_payload_encoding":
//! "base64"}`), wrapped with `include_metadata` in `{"metadata": {"iggy_id", ...},
//! "payload": ...}`; one body per message, or a batch's as NDJSON or a JSON array;
//! `raw` sends the payload's bytes as they are.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ferry_guest::{HeaderValue, SinkBatch, StoredMessage};
use serde_json::{Map, Value, json};

use crate::config::Config;

/// The JSON value sent for `message` of `batch`.
pub fn value(config: &Config, batch: &SinkBatch, message: &StoredMessage) -> Value {
    let payload = serde_json::from_slice::<Value>(&message.payload)
        .unwrap_or_else(|_| json!({ "data": STANDARD.encode(&message.payload), "iggy_payload_encoding": "base64" }));
    if !config.include_metadata {
        return payload;
    }
    let mut metadata = json!({
        "iggy_id": message.id.to_string(),
        "iggy_offset": message.offset,
        "iggy_timestamp": message.timestamp,
        "iggy_stream": batch.stream,
        "iggy_topic": batch.topic,
        "iggy_partition_id": batch.partition,
    });
    // A message from the local log has none.
    if config.include_checksum
        && let Some(checksum) = message.iggy_checksum()
    {
        metadata["iggy_checksum"] = json!(checksum);
    }
    if config.include_origin_timestamp {
        metadata["iggy_origin_timestamp"] = json!(message.origin_timestamp.unwrap_or(0));
    }
    if !message.headers.is_empty() {
        let headers: Map<String, Value> =
            message.headers.iter().map(|(key, value)| (key.clone(), header(value))).collect();
        metadata["iggy_headers"] = Value::Object(headers);
    }
    json!({ "metadata": metadata, "payload": payload })
}

/// A header's value as JSON: text, numbers and booleans as they are, bytes in base64.
fn header(value: &HeaderValue) -> Value {
    match value {
        HeaderValue::Raw(bytes) => json!({ "data": STANDARD.encode(bytes), "iggy_header_encoding": "base64" }),
        other => other.value_json(),
    }
}

/// The body of one request for `message` (`individual` and `raw` modes).
pub fn one(config: &Config, batch: &SinkBatch, message: &StoredMessage) -> Vec<u8> {
    match config.batch_mode {
        crate::config::BatchMode::Raw => message.payload.clone(),
        _ => serde_json::to_vec(&value(config, batch, message)).expect("JSON values serialize"),
    }
}

/// The body of one request for the messages of `batch` in `part` (`ndjson` and
/// `json_array` modes).
pub fn many(config: &Config, batch: &SinkBatch, part: &[StoredMessage]) -> Vec<u8> {
    match config.batch_mode {
        crate::config::BatchMode::Ndjson => {
            let mut body = Vec::new();
            for message in part {
                serde_json::to_writer(&mut body, &value(config, batch, message)).expect("JSON values serialize");
                body.push(b'\n');
            }
            body
        }
        _ => {
            let values: Vec<Value> = part.iter().map(|message| value(config, batch, message)).collect();
            serde_json::to_vec(&values).expect("JSON values serialize")
        }
    }
}
