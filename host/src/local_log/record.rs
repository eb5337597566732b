//! One record of the local log, as it is read back and as `ferry log read` prints it.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::batch::{Header, HeaderValue};

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub offset: u64,
    pub id: Option<u128>,
    /// `{"key": {"<kind>": value}}`, or `None` when the message had no headers.
    pub headers: Option<Value>,
    pub payload: Vec<u8>,
    pub origin_timestamp: Option<u64>,
    pub appended_at_micros: u64,
    pub connector: String,
}

/// Headers as JSON that keeps their kinds: `{"key": {"uint64": 5}}`. 128-bit values
/// are decimal strings (JSON numbers cannot hold them), raw bytes are base64.
pub fn headers_json(headers: &[Header]) -> Value {
    let mut object = serde_json::Map::new();
    for header in headers {
        let (kind, value) = match &header.value {
            HeaderValue::Raw(v) => ("raw", json!(base64::engine::general_purpose::STANDARD.encode(v))),
            HeaderValue::String(v) => ("string", json!(v)),
            HeaderValue::Bool(v) => ("bool", json!(v)),
            HeaderValue::Int8(v) => ("int8", json!(v)),
            HeaderValue::Int16(v) => ("int16", json!(v)),
            HeaderValue::Int32(v) => ("int32", json!(v)),
            HeaderValue::Int64(v) => ("int64", json!(v)),
            HeaderValue::Int128(v) => ("int128", json!(v.get().to_string())),
            HeaderValue::Uint8(v) => ("uint8", json!(v)),
            HeaderValue::Uint16(v) => ("uint16", json!(v)),
            HeaderValue::Uint32(v) => ("uint32", json!(v)),
            HeaderValue::Uint64(v) => ("uint64", json!(v)),
            HeaderValue::Uint128(v) => ("uint128", json!(v.get().to_string())),
            HeaderValue::Float32(v) => ("float32", json!(v)),
            HeaderValue::Float64(v) => ("float64", json!(v)),
        };
        object.insert(header.key.clone(), json!({ kind: value }));
    }
    Value::Object(object)
}

impl Record {
    /// The record as one line of JSON, as `ferry log read` prints it. A payload that
    /// is UTF-8 is printed as text (`payload`), anything else as base64
    /// (`payload_base64`).
    pub fn to_json(&self) -> Value {
        let mut line = json!({
            "offset": self.offset,
            "id": self.id.map(|id| id.to_string()),
            "headers": self.headers.clone().unwrap_or_else(|| json!({})),
            "origin_timestamp": self.origin_timestamp,
            "appended_at": self.appended_at_micros,
            "connector": self.connector,
        });
        match std::str::from_utf8(&self.payload) {
            Ok(text) => line["payload"] = json!(text),
            Err(_) => line["payload_base64"] = json!(base64::engine::general_purpose::STANDARD.encode(&self.payload)),
        }
        line
    }
}
