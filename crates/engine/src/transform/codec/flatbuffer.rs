//! `schema = "flat_buffer"`: the layouts Iggy's runtime uses without a FlatBuffers
//! schema (its configs cannot give one). A JSON object is written as a vector of
//! alternating key and value strings (a value that is not a string as its JSON),
//! other JSON as one string of it, anything else as a vector of its bytes; a sink's
//! guest gets `{"buffer_size", "has_root_table", "raw_data_base64"}` of what is
//! stored, since without a schema no field can be read out of a FlatBuffer.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use flatbuffers::FlatBufferBuilder;
use serde_json::Value;

/// The smallest buffer (its root offset) Iggy's runtime accepts.
const SMALLEST: usize = 4;

/// What a sink's guest is told of the FlatBuffer `payload`.
pub fn decode(payload: &[u8]) -> Result<Vec<u8>, String> {
    if payload.len() < SMALLEST {
        return Err(format!("{} byte(s), too small for a FlatBuffer (at least {SMALLEST})", payload.len()));
    }
    let json = serde_json::json!({
        "buffer_size": payload.len(),
        "has_root_table": true,
        "raw_data_base64": STANDARD.encode(payload),
    });
    Ok(serde_json::to_vec(&json).expect("JSON values serialize"))
}

/// `payload` as a FlatBuffer.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    let mut builder = FlatBufferBuilder::with_capacity(payload.len() + 64);
    match serde_json::from_slice::<Value>(payload) {
        Ok(Value::Object(fields)) => {
            let mut offsets = Vec::with_capacity(fields.len() * 2);
            for (key, value) in &fields {
                let value = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                offsets.push(builder.create_string(key).value());
                offsets.push(builder.create_string(&value).value());
            }
            let vector = builder.create_vector(&offsets);
            builder.finish_minimal(vector);
        }
        Ok(other) => {
            let string = builder.create_string(&other.to_string());
            builder.finish_minimal(string);
        }
        Err(_) => {
            let bytes = builder.create_vector(payload);
            builder.finish_minimal(bytes);
        }
    }
    builder.finished_data().to_vec()
}
