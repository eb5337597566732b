//! Stored messages as JSON, the way `ferry log read` prints records, for sinks that
//! write or print JSON: one object per message, nothing lost.
//!
//! Headers keep their kinds (`{"key": {"uint64": 5}}`); 128-bit integers and the id
//! are decimal strings (a JSON number cannot hold them exactly), raw bytes are base64,
//! and a float that JSON has no number for is a string (`"NaN"`, `"inf"`, `"-inf"`).
//! The payload is `payload` when it is UTF-8 text, else `payload_base64`.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::{HeaderValue, SinkBatch, StoredMessage};

fn base64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A float as a JSON number, or as a string when it is not finite.
fn float(value: f64) -> Value {
    match serde_json::Number::from_f64(value) {
        Some(number) => Value::Number(number),
        None if value.is_nan() => json!("NaN"),
        None if value > 0.0 => json!("inf"),
        None => json!("-inf"),
    }
}

impl HeaderValue {
    /// The kind's name, as in the contract: `"raw"`, `"string"`, `"uint64"`...
    pub fn kind(&self) -> &'static str {
        match self {
            HeaderValue::Raw(_) => "raw",
            HeaderValue::String(_) => "string",
            HeaderValue::Bool(_) => "bool",
            HeaderValue::Int8(_) => "int8",
            HeaderValue::Int16(_) => "int16",
            HeaderValue::Int32(_) => "int32",
            HeaderValue::Int64(_) => "int64",
            HeaderValue::Int128(_) => "int128",
            HeaderValue::Uint8(_) => "uint8",
            HeaderValue::Uint16(_) => "uint16",
            HeaderValue::Uint32(_) => "uint32",
            HeaderValue::Uint64(_) => "uint64",
            HeaderValue::Uint128(_) => "uint128",
            HeaderValue::Float32(_) => "float32",
            HeaderValue::Float64(_) => "float64",
        }
    }

    /// The value alone as JSON (without its kind; bytes in base64).
    pub fn value_json(&self) -> Value {
        match self {
            HeaderValue::Raw(v) => base64(v),
            HeaderValue::String(v) => json!(v),
            HeaderValue::Bool(v) => json!(v),
            HeaderValue::Int8(v) => json!(v),
            HeaderValue::Int16(v) => json!(v),
            HeaderValue::Int32(v) => json!(v),
            HeaderValue::Int64(v) => json!(v),
            HeaderValue::Int128(v) => json!(v.to_string()),
            HeaderValue::Uint8(v) => json!(v),
            HeaderValue::Uint16(v) => json!(v),
            HeaderValue::Uint32(v) => json!(v),
            HeaderValue::Uint64(v) => json!(v),
            HeaderValue::Uint128(v) => json!(v.to_string()),
            HeaderValue::Float32(v) => float(f64::from(*v)),
            HeaderValue::Float64(v) => float(*v),
        }
    }

    /// `{"<kind>": value}`.
    pub fn to_json(&self) -> Value {
        json!({ self.kind(): self.value_json() })
    }
}

/// Headers as `{"key": {"<kind>": value}, ...}`, in order.
pub fn headers_json(headers: &[(String, HeaderValue)]) -> Value {
    Value::Object(headers.iter().map(|(key, value)| (key.clone(), value.to_json())).collect::<Map<_, _>>())
}

impl SinkBatch {
    /// `message`, a message of this batch, as one JSON object: `stream`, `topic`,
    /// `partition`, `offset`, `id`, `timestamp`, `origin_timestamp` (or null),
    /// `headers`, and `payload` or `payload_base64`.
    pub fn message_json(&self, message: &StoredMessage) -> Value {
        let mut line = json!({
            "stream": self.stream,
            "topic": self.topic,
            "partition": self.partition,
            "offset": message.offset,
            "id": message.id.to_string(),
            "timestamp": message.timestamp,
            "origin_timestamp": message.origin_timestamp,
            "headers": headers_json(&message.headers),
        });
        match message.payload_str() {
            Some(text) => line["payload"] = json!(text),
            None => line["payload_base64"] = base64(&message.payload),
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: &[u8], headers: Vec<(String, HeaderValue)>) -> StoredMessage {
        StoredMessage {
            offset: 7,
            id: u128::MAX,
            timestamp: 1_700_000_000_000_000,
            origin_timestamp: None,
            headers,
            payload: payload.to_vec(),
        }
    }

    fn batch() -> SinkBatch {
        SinkBatch { stream: "s\"1".into(), topic: "t".into(), partition: 2, messages: Vec::new() }
    }

    #[test]
    fn a_text_message_is_one_object_with_every_field_in_order() {
        let message = message(b"{\"seq\":1}", vec![("k".into(), HeaderValue::Uint64(5))]);
        let line = serde_json::to_string(&batch().message_json(&message)).unwrap();
        assert_eq!(
            line,
            r#"{"stream":"s\"1","topic":"t","partition":2,"offset":7,"id":"340282366920938463463374607431768211455","timestamp":1700000000000000,"origin_timestamp":null,"headers":{"k":{"uint64":5}},"payload":"{\"seq\":1}"}"#
        );
    }

    #[test]
    fn a_binary_payload_is_base64_and_nothing_else() {
        let json = batch().message_json(&message(&[0xff, 0x00], Vec::new()));
        assert_eq!(json["payload_base64"], "/wA=");
        assert!(json.get("payload").is_none());
    }

    #[test]
    fn every_header_kind_keeps_its_kind_and_its_exact_value() {
        let cases = [
            (HeaderValue::Raw(vec![1, 2, 3]), json!({"raw": "AQID"})),
            (HeaderValue::String("x".into()), json!({"string": "x"})),
            (HeaderValue::Bool(false), json!({"bool": false})),
            (HeaderValue::Int8(-8), json!({"int8": -8})),
            (HeaderValue::Int16(-16), json!({"int16": -16})),
            (HeaderValue::Int32(-32), json!({"int32": -32})),
            (HeaderValue::Int64(i64::MIN), json!({"int64": i64::MIN})),
            (HeaderValue::Int128(i128::MIN), json!({"int128": "-170141183460469231731687303715884105728"})),
            (HeaderValue::Uint8(8), json!({"uint8": 8})),
            (HeaderValue::Uint16(16), json!({"uint16": 16})),
            (HeaderValue::Uint32(32), json!({"uint32": 32})),
            (HeaderValue::Uint64(u64::MAX), json!({"uint64": u64::MAX})),
            (HeaderValue::Uint128(u128::MAX), json!({"uint128": "340282366920938463463374607431768211455"})),
            (HeaderValue::Float32(0.5), json!({"float32": 0.5})),
            (HeaderValue::Float64(-2.25), json!({"float64": -2.25})),
            (HeaderValue::Float64(f64::NAN), json!({"float64": "NaN"})),
            (HeaderValue::Float32(f32::INFINITY), json!({"float32": "inf"})),
            (HeaderValue::Float64(f64::NEG_INFINITY), json!({"float64": "-inf"})),
        ];
        for (value, expected) in cases {
            assert_eq!(value.to_json(), expected, "{value:?}");
        }
    }

    #[test]
    fn headers_keep_their_order() {
        let headers = vec![("z".into(), HeaderValue::Bool(true)), ("a".into(), HeaderValue::Uint8(1))];
        let text = serde_json::to_string(&headers_json(&headers)).unwrap();
        assert_eq!(text, r#"{"z":{"bool":true},"a":{"uint8":1}}"#);
    }
}
