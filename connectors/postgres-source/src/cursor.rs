//! The cursor: the last delivered row's position in the reading order, and (with
//! `after_ack`) the primary keys of the batch that ends there.
//!
//! Positions keep their PostgreSQL type (`{"int": 42}`, `{"timestamp": 1700000000000000}`)
//! so that they go back to the server as the same kind of parameter they came from.

use std::collections::BTreeMap;

use ferry_guest::Error;
use ferry_guest::bindings::iggy::connector::postgres::Value;
use ferry_guest::rows::ValueRef;
use serde::{Deserialize, Serialize};

/// Where the connector is, as the host stores it (JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cursor {
    /// The last delivered row; `None` before the first batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Position>,
    /// The primary keys of the batch that ends at `after`, for `after_ack` to delete
    /// or mark. They travel in the cursor so that a crash between the ACK and the
    /// statement does not leave them behind: whoever starts from this cursor finishes
    /// the job (the statement is idempotent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivered: Vec<Key>,
    /// With several tables (Iggy's `tables`), each table's own cursor by its name;
    /// `after` and `delivered` are then unused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tables: BTreeMap<String, Cursor>,
}

/// A row's place in the reading order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    pub tracking: Key,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tie_breaker: Option<Key>,
}

/// A value that orders or identifies a row: any column value but NULL and json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    Boolean(bool),
    Int(i64),
    Float(f64),
    Text(String),
    /// Base64 in the stored cursor.
    Bytes(#[serde(with = "ferry_guest::row::base64_bytes")] Vec<u8>),
    /// Microseconds since the Unix epoch.
    Timestamp(i64),
}

impl Key {
    /// The key in `value`, the value of `column` (named in the error).
    pub fn from_value(value: ValueRef<'_>, column: &str) -> Result<Key, Error> {
        Ok(match value {
            ValueRef::Boolean(v) => Key::Boolean(v),
            ValueRef::Int(v) => Key::Int(v),
            ValueRef::Float(v) if v.is_finite() => Key::Float(v),
            ValueRef::Float(v) => {
                return Err(Error::msg(format!("column `{column}` holds {v}, which cannot order or identify rows")));
            }
            ValueRef::Text(v) => Key::Text(v.to_string()),
            ValueRef::Bytes(v) => Key::Bytes(v.to_vec()),
            ValueRef::Timestamp(v) => Key::Timestamp(v),
            ValueRef::Null => return Err(Error::msg(format!("a row has NULL in column `{column}`"))),
            ValueRef::Json(_) => {
                return Err(Error::msg(format!(
                    "column `{column}` is json, which cannot order or identify rows: use another column"
                )));
            }
        })
    }

    /// The key as a statement parameter.
    pub fn to_value(&self) -> Value {
        match self {
            Key::Boolean(v) => Value::Boolean(*v),
            Key::Int(v) => Value::Int(*v),
            Key::Float(v) => Value::Float(*v),
            Key::Text(v) => Value::Text(v.clone()),
            Key::Bytes(v) => Value::Bytes(v.clone()),
            Key::Timestamp(v) => Value::Timestamp(*v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_readable_json_and_comes_back_unchanged() {
        let cursor = Cursor {
            after: Some(Position { tracking: Key::Timestamp(1_700_000_000_000_001), tie_breaker: Some(Key::Int(42)) }),
            delivered: vec![Key::Int(41), Key::Int(42)],
            tables: BTreeMap::new(),
        };
        let json = serde_json::to_string(&cursor).unwrap();
        assert_eq!(
            json,
            r#"{"after":{"tracking":{"timestamp":1700000000000001},"tie_breaker":{"int":42}},"delivered":[{"int":41},{"int":42}]}"#
        );
        assert_eq!(serde_json::from_str::<Cursor>(&json).unwrap(), cursor);
    }

    #[test]
    fn the_first_cursor_is_empty_and_every_key_kind_round_trips() {
        assert_eq!(serde_json::to_string(&Cursor::default()).unwrap(), "{}");
        assert_eq!(serde_json::from_str::<Cursor>("{}").unwrap(), Cursor::default());
        let keys = [
            Key::Boolean(true),
            Key::Int(i64::MIN),
            Key::Float(-0.25),
            Key::Text("é\"\\".into()),
            Key::Bytes(vec![0, 255, 7]),
            Key::Timestamp(-1),
        ];
        for key in keys {
            let json = serde_json::to_string(&key).unwrap();
            assert_eq!(serde_json::from_str::<Key>(&json).unwrap(), key, "{json}");
            assert_eq!(Key::from_value((&key.to_value()).into(), "c").unwrap(), key);
        }
        assert_eq!(serde_json::to_string(&Key::Bytes(vec![0, 255, 7])).unwrap(), r#"{"bytes":"AP8H"}"#);
    }

    #[test]
    fn a_cursor_of_another_shape_is_refused() {
        assert!(serde_json::from_str::<Cursor>(r#"{"next_seq": 3}"#).is_err());
        assert!(serde_json::from_str::<Cursor>(r#"{"after": {"tracking": {"uuid": "x"}}}"#).is_err());
        assert!(serde_json::from_str::<Cursor>(r#"{"after": {"tracking": {"bytes": "not base64!"}}}"#).is_err());
    }

    #[test]
    fn null_json_and_non_finite_values_are_no_keys() {
        let null = Key::from_value(ValueRef::Null, "created_at").unwrap_err();
        assert!(null.message().contains("NULL in column `created_at`"), "{null}");
        let json = Key::from_value(ValueRef::Json("{}"), "doc").unwrap_err();
        assert!(json.message().contains("`doc` is json"), "{json}");
        assert!(Key::from_value(ValueRef::Float(f64::NAN), "f").is_err());
        assert!(Key::from_value(ValueRef::Float(f64::INFINITY), "f").is_err());
    }
}
