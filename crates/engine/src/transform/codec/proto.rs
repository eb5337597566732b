//! `schema = "proto"`: each payload a `google.protobuf.Any`, the layout Iggy's
//! runtime reads and writes when it is given no `.proto` file (which its connector
//! configs cannot give): JSON travels as a `StringValue`, anything else as a
//! `BytesValue`, and a sink's guest gets `{"type_url", "value": base64}`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use prost::Message as _;
use prost_types::Any;

/// The type URLs Iggy's runtime writes.
const STRING_VALUE: &str = "type.googleapis.com/google.protobuf.StringValue";
const BYTES_VALUE: &str = "type.googleapis.com/google.protobuf.BytesValue";

/// `{"type_url", "value"}` of the `Any` `payload`.
pub fn decode(payload: &[u8]) -> Result<Vec<u8>, String> {
    if payload.is_empty() {
        return Err("empty, and a protobuf Any is never empty here".into());
    }
    let any = Any::decode(payload).map_err(|e| format!("not a protobuf Any ({e})"))?;
    let json = serde_json::json!({ "type_url": any.type_url, "value": STANDARD.encode(&any.value) });
    Ok(serde_json::to_vec(&json).expect("JSON values serialize"))
}

/// `payload` in an `Any`: compact JSON as a `StringValue` when it is JSON, the bytes
/// as a `BytesValue` when not.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    let any = match serde_json::from_slice::<serde_json::Value>(payload) {
        Ok(json) => Any { type_url: STRING_VALUE.into(), value: json.to_string().into_bytes() },
        Err(_) => Any { type_url: BYTES_VALUE.into(), value: payload.to_vec() },
    };
    any.encode_to_vec()
}
