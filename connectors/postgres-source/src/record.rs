//! A row as the JSON object a message carries: `{"column": value, ...}` in the
//! result's column order.
//!
//! | PostgreSQL                          | JSON                                               |
//! |-------------------------------------|----------------------------------------------------|
//! | NULL                                | `null`                                             |
//! | `bool`                              | `true` / `false`                                   |
//! | `int2`, `int4`, `int8`, `oid`       | number                                             |
//! | `float4`, `float8`                  | number; NaN and ±infinity as `"NaN"`, `"Infinity"`, `"-Infinity"` |
//! | `text`, `varchar`, `bpchar`, `name` | string                                             |
//! | `bytea`                             | string, base64 (standard alphabet, padded)         |
//! | `json`, `jsonb`                     | the document itself, embedded as it came           |
//! | `timestamp`, `timestamptz`          | string, RFC 3339 in UTC to the microsecond         |
//!
//! The document of a json column is embedded as its text rather than parsed and
//! printed again, so a number too large for a double keeps all its digits.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ferry_guest::Error;
use ferry_guest::rows::ValueRef;
use serde::de::IgnoredAny;

use crate::timestamp::write_rfc3339;
pub use ferry_guest::row::write_json_string as write_string;

/// The rows of one result as JSON objects, `{"column": value, ...}`: the column
/// names are escaped once for all the rows (escaping them for every row took a
/// sizeable share of a batch).
pub struct Objects<'a> {
    columns: &'a [String],
    /// Each column's name as an object key, `"name":`.
    keys: Vec<Vec<u8>>,
}

impl<'a> Objects<'a> {
    pub fn new(columns: &'a [String]) -> Objects<'a> {
        let keys = columns
            .iter()
            .map(|column| {
                let mut key = Vec::with_capacity(column.len() + 3);
                write_string(&mut key, column);
                key.push(b':');
                key
            })
            .collect();
        Objects { columns, keys }
    }

    /// The JSON object of one row.
    pub fn to_json(&self, row: &[ValueRef]) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(64 * self.columns.len());
        self.write_json(row, &mut out)?;
        Ok(out)
    }

    /// The JSON object of one row, written at the end of `out`.
    pub fn write_json(&self, row: &[ValueRef], out: &mut Vec<u8>) -> Result<(), Error> {
        if self.columns.len() != row.len() {
            return Err(Error::msg(format!("a row has {} values for {} columns", row.len(), self.columns.len())));
        }
        out.push(b'{');
        for (index, ((column, key), value)) in self.columns.iter().zip(&self.keys).zip(row).enumerate() {
            if index > 0 {
                out.push(b',');
            }
            out.extend_from_slice(key);
            write_value(out, column, *value)?;
        }
        out.push(b'}');
        Ok(())
    }
}

fn write_value(out: &mut Vec<u8>, column: &str, value: ValueRef) -> Result<(), Error> {
    match value {
        ValueRef::Null => out.extend_from_slice(b"null"),
        ValueRef::Boolean(v) => out.extend_from_slice(if v { b"true" } else { b"false" }),
        ValueRef::Int(v) => serde_json::to_writer(&mut *out, &v).expect("an integer always serializes"),
        ValueRef::Float(v) if v.is_finite() => {
            serde_json::to_writer(&mut *out, &v).map_err(|e| Error::msg(format!("column `{column}`: {e}")))?
        }
        ValueRef::Float(v) if v.is_nan() => write_string(out, "NaN"),
        ValueRef::Float(v) => write_string(out, if v > 0.0 { "Infinity" } else { "-Infinity" }),
        ValueRef::Text(v) => write_string(out, v),
        ValueRef::Bytes(v) => write_string(out, &BASE64.encode(v)),
        ValueRef::Json(document) => {
            // The server sends valid JSON; checking costs little and keeps a broken
            // document from making the whole message unreadable.
            serde_json::from_str::<IgnoredAny>(document)
                .map_err(|e| Error::msg(format!("column `{column}` holds json that does not parse: {e}")))?;
            out.extend_from_slice(document.trim().as_bytes());
        }
        ValueRef::Timestamp(micros) => {
            // Digits and ASCII punctuation only: nothing to escape.
            out.push(b'"');
            write_rfc3339(out, micros);
            out.push(b'"');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ferry_guest::bindings::iggy::connector::postgres::Value;
    use serde_json::json;

    use super::*;

    fn columns(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn to_json(columns: &[String], row: &[Value]) -> Result<Vec<u8>, Error> {
        Objects::new(columns).to_json(&row.iter().map(ValueRef::from).collect::<Vec<_>>())
    }

    #[test]
    fn every_kind_of_value_becomes_its_json() {
        let names = columns(&["n", "b", "i", "f", "t", "raw", "doc", "at", "nan", "inf", "ninf"]);
        let row = [
            Value::Null,
            Value::Boolean(true),
            Value::Int(-9_007_199_254_740_993),
            Value::Float(0.1),
            Value::Text("line\n\"quoted\" é".into()),
            Value::Bytes(vec![0, 1, 254, 255]),
            Value::Json(r#"{"z": 1, "a": [true, null]}"#.into()),
            Value::Timestamp(1_709_210_096_000_001),
            Value::Float(f64::NAN),
            Value::Float(f64::INFINITY),
            Value::Float(f64::NEG_INFINITY),
        ];
        let bytes = to_json(&names, &row).unwrap();
        let parsed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            parsed,
            json!({
                "n": null, "b": true, "i": -9_007_199_254_740_993_i64, "f": 0.1,
                "t": "line\n\"quoted\" é", "raw": "AAH+/w==", "doc": {"z": 1, "a": [true, null]},
                "at": "2024-02-29T12:34:56.000001Z", "nan": "NaN", "inf": "Infinity", "ninf": "-Infinity",
            })
        );
        let keys: Vec<&String> = parsed.as_object().unwrap().keys().collect();
        assert_eq!(keys, names.iter().collect::<Vec<_>>(), "columns keep the result's order");
    }

    #[test]
    fn a_json_document_is_embedded_digit_for_digit() {
        let row = [Value::Json(r#"{"big": 123456789012345678901234567890, "x": 1.50}"#.into())];
        let bytes = to_json(&columns(&["doc"]), &row).unwrap();
        assert_eq!(String::from_utf8(bytes).unwrap(), r#"{"doc":{"big": 123456789012345678901234567890, "x": 1.50}}"#);
    }

    #[test]
    fn broken_json_and_a_short_row_are_errors_naming_the_problem() {
        let error = to_json(&columns(&["doc"]), &[Value::Json("{\"a\":".into())]).unwrap_err();
        assert!(error.message().contains("column `doc`"), "{error}");
        let error = to_json(&columns(&["a", "b"]), &[Value::Int(1)]).unwrap_err();
        assert!(error.message().contains("1 values for 2 columns"), "{error}");
    }

    #[test]
    fn column_names_are_escaped() {
        let bytes = to_json(&columns(&["we\"ird\\"]), &[Value::Int(1)]).unwrap();
        let parsed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(parsed, json!({"we\"ird\\": 1}));
    }
}
