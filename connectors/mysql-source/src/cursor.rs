//! The cursor: the last delivered row's position in the reading order, and (with
//! `after_ack`) the primary keys of the batch that ends there.
//!
//! Keys keep the kind the server sent (`{"int": 42}`, `{"text": "2026-12-07 10:46:16"}`)
//! so that they go back to it as the same kind of parameter they came from.

use ferry_guest::Error;
use ferry_guest::bindings::iggy::connector::mysql::Value;
use ferry_guest::mysql::ValueRef;
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
}

/// A row's place in the reading order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    pub tracking: Key,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tie_breaker: Option<Key>,
}

/// A value that orders or identifies a row: any column value but NULL. Dates, times
/// and decimals come as the server's text, and go back as text the server reads as
/// the column's type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    Int(i64),
    Uint(u64),
    Float(f64),
    Text(String),
    /// Base64 in the stored cursor.
    Bytes(#[serde(with = "ferry_guest::row::base64_bytes")] Vec<u8>),
}

impl Key {
    /// The key in `value`, the value of `column` (named in the error).
    pub fn from_value(value: ValueRef, column: &str) -> Result<Key, Error> {
        Ok(match value {
            ValueRef::Int(v) => Key::Int(v),
            ValueRef::Uint(v) => Key::Uint(v),
            ValueRef::Float(v) => Key::Float(v),
            ValueRef::Text(v) => Key::Text(v.to_string()),
            ValueRef::Bytes(v) => Key::Bytes(v.to_vec()),
            ValueRef::Null => return Err(Error::msg(format!("a row has NULL in column `{column}`"))),
        })
    }

    /// The key as a statement parameter.
    pub fn to_value(&self) -> Value {
        match self {
            Key::Int(v) => Value::Int(*v),
            Key::Uint(v) => Value::Uint(*v),
            Key::Float(v) => Value::Float(*v),
            Key::Text(v) => Value::Text(v.clone()),
            Key::Bytes(v) => Value::Bytes(v.clone()),
        }
    }

    /// The message id of the row of `table` with this primary key.
    pub fn message_id(&self, table: &str) -> u128 {
        let id = |tag, bytes: &[u8]| ferry_guest::row::stable_id(table, tag, bytes);
        match self {
            Key::Int(v) => id(b'i', &v.to_le_bytes()),
            Key::Uint(v) => id(b'u', &v.to_le_bytes()),
            Key::Float(v) => id(b'f', &v.to_bits().to_le_bytes()),
            Key::Text(v) => id(b's', v.as_bytes()),
            Key::Bytes(v) => id(b'x', v),
        }
    }

    /// The `primary_key` header: the key as the closest header kind.
    pub fn header(&self) -> ferry_guest::HeaderValue {
        use ferry_guest::HeaderValue;
        match self {
            Key::Int(v) => HeaderValue::Int64(*v),
            Key::Uint(v) => HeaderValue::Uint64(*v),
            Key::Float(v) => HeaderValue::Float64(*v),
            Key::Text(v) => HeaderValue::String(v.clone()),
            Key::Bytes(v) => HeaderValue::Raw(v.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn a_cursor_is_readable_json_and_comes_back_unchanged() {
        let cursor = Cursor {
            after: Some(Position {
                tracking: Key::Text("2026-12-07 10:46:16.5".into()),
                tie_breaker: Some(Key::Int(42)),
            }),
            delivered: vec![Key::Int(41), Key::Int(42)],
        };
        let json = serde_json::to_string(&cursor).unwrap();
        assert_eq!(
            json,
            r#"{"after":{"tracking":{"text":"2026-12-07 10:46:16.5"},"tie_breaker":{"int":42}},"delivered":[{"int":41},{"int":42}]}"#
        );
        assert_eq!(serde_json::from_str::<Cursor>(&json).unwrap(), cursor);
        assert_eq!(serde_json::to_string(&Cursor::default()).unwrap(), "{}");
        for key in [
            Key::Int(i64::MIN),
            Key::Uint(u64::MAX),
            Key::Float(-0.25),
            Key::Text("é".into()),
            Key::Bytes(vec![0, 255]),
        ] {
            let json = serde_json::to_string(&key).unwrap();
            assert_eq!(serde_json::from_str::<Key>(&json).unwrap(), key, "{json}");
            assert_eq!(Key::from_value((&key.to_value()).into(), "c").unwrap(), key);
        }
    }

    #[test]
    fn a_cursor_of_another_shape_and_a_null_key_are_refused() {
        assert!(serde_json::from_str::<Cursor>(r#"{"next_seq": 3}"#).is_err());
        assert!(serde_json::from_str::<Cursor>(r#"{"after": {"tracking": {"timestamp": 1}}}"#).is_err());
        let null = Key::from_value(ValueRef::Null, "created_at").unwrap_err();
        assert!(null.message().contains("NULL in column `created_at`"), "{null}");
    }

    #[test]
    fn ids_differ_by_table_key_and_kind_and_are_stable() {
        assert_eq!(Key::Int(1).message_id("events"), Key::Int(1).message_id("events"));
        let ids: HashSet<u128> = [
            Key::Int(1).message_id("events"),
            Key::Int(2).message_id("events"),
            Key::Int(1).message_id("orders"),
            Key::Uint(1).message_id("events"),
            Key::Text("1".into()).message_id("events"),
            Key::Bytes(b"1".to_vec()).message_id("events"),
            Key::Float(1.0).message_id("events"),
        ]
        .into_iter()
        .collect();
        assert_eq!(ids.len(), 7);
    }
}
