//! One record of the local log, as it is read back and as `ferry log read` prints it.

use base64::Engine as _;
use serde_json::{Value, json};

use ferry_contract::{Header, HeaderValue, Int128, Uint128};

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

/// Headers back from the JSON [`headers_json`] wrote: the same keys, kinds and values,
/// in the order the JSON lists them. A header that does not parse (a log written by
/// something else) is an error naming it.
pub fn headers_from_json(json: &Value) -> Result<Vec<Header>, String> {
    let Value::Object(object) = json else { return Err(format!("headers are not a JSON object: {json}")) };
    object.iter().map(|(key, typed)| header_from_json(key, typed)).collect()
}

fn header_from_json(key: &str, typed: &Value) -> Result<Header, String> {
    let bad = || format!("header {key:?} is not a typed value ferry wrote: {typed}");
    let Some((kind, value)) = typed.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next()) else {
        return Err(bad());
    };
    let int = || value.as_i64().ok_or_else(bad);
    let uint = || value.as_u64().ok_or_else(bad);
    let text = || value.as_str().ok_or_else(bad);
    let value = match kind.as_str() {
        "raw" => HeaderValue::Raw(base64::engine::general_purpose::STANDARD.decode(text()?).map_err(|_| bad())?),
        "string" => HeaderValue::String(text()?.to_string()),
        "bool" => HeaderValue::Bool(value.as_bool().ok_or_else(bad)?),
        "int8" => HeaderValue::Int8(int()?.try_into().map_err(|_| bad())?),
        "int16" => HeaderValue::Int16(int()?.try_into().map_err(|_| bad())?),
        "int32" => HeaderValue::Int32(int()?.try_into().map_err(|_| bad())?),
        "int64" => HeaderValue::Int64(int()?),
        "int128" => HeaderValue::Int128(Int128::from(text()?.parse::<i128>().map_err(|_| bad())?)),
        "uint8" => HeaderValue::Uint8(uint()?.try_into().map_err(|_| bad())?),
        "uint16" => HeaderValue::Uint16(uint()?.try_into().map_err(|_| bad())?),
        "uint32" => HeaderValue::Uint32(uint()?.try_into().map_err(|_| bad())?),
        "uint64" => HeaderValue::Uint64(uint()?),
        "uint128" => HeaderValue::Uint128(Uint128::from(text()?.parse::<u128>().map_err(|_| bad())?)),
        // JSON has no NaN or infinity: `headers_json` wrote them as null.
        "float32" => HeaderValue::Float32(value.as_f64().map_or(f32::NAN, |v| v as f32)),
        "float64" => HeaderValue::Float64(value.as_f64().unwrap_or(f64::NAN)),
        _ => return Err(bad()),
    };
    Ok(Header { key: key.to_string(), value })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_come_back_from_json_as_they_were() {
        let headers = vec![
            Header { key: "raw".into(), value: HeaderValue::Raw(vec![0, 255]) },
            Header { key: "text".into(), value: HeaderValue::String("é".into()) },
            Header { key: "flag".into(), value: HeaderValue::Bool(true) },
            Header { key: "small".into(), value: HeaderValue::Int8(-8) },
            Header { key: "int16".into(), value: HeaderValue::Int16(-16) },
            Header { key: "int32".into(), value: HeaderValue::Int32(-32) },
            Header { key: "int64".into(), value: HeaderValue::Int64(i64::MIN) },
            Header { key: "int128".into(), value: HeaderValue::Int128(Int128::from(i128::MIN)) },
            Header { key: "uint8".into(), value: HeaderValue::Uint8(u8::MAX) },
            Header { key: "uint16".into(), value: HeaderValue::Uint16(u16::MAX) },
            Header { key: "uint32".into(), value: HeaderValue::Uint32(u32::MAX) },
            Header { key: "uint64".into(), value: HeaderValue::Uint64(u64::MAX) },
            Header { key: "uint128".into(), value: HeaderValue::Uint128(Uint128::from(u128::MAX)) },
            Header { key: "f32".into(), value: HeaderValue::Float32(1.5) },
            Header { key: "f64".into(), value: HeaderValue::Float64(-2.25) },
        ];
        // Through text, as the log stores them.
        let stored = headers_json(&headers).to_string();
        let back = headers_from_json(&serde_json::from_str(&stored).unwrap()).unwrap();
        assert_eq!(back, headers);
        let error = headers_from_json(&json!({ "k": { "uint8": 300 } })).unwrap_err();
        assert!(error.contains("\"k\""), "{error}");
    }
}
