//! A query's rows as a batch: one message per row, the row as a JSON object, and the
//! cursor after the last row.
//!
//! | MySQL / MariaDB                                  | JSON                              |
//! |--------------------------------------------------|-----------------------------------|
//! | NULL                                             | `null`                            |
//! | integers (`BIGINT UNSIGNED` too), `BOOL`         | number                            |
//! | `FLOAT`, `DOUBLE`                                | number                            |
//! | `DECIMAL`                                        | string, its exact decimal text    |
//! | text types, `JSON`, `ENUM`, `SET`                | string                            |
//! | dates and times                                  | string, as the server prints them (`2026-12-07 10:46:16.5`) |
//! | binary types (`BLOB`, `VARBINARY`, `BINARY`)     | string, base64 (standard, padded) |

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ferry_guest::bindings::iggy::connector::mysql::PackedRows;
use ferry_guest::mysql::ValueRef;
use ferry_guest::row::write_json_string;
use ferry_guest::{Batch, Error, Fields, HeaderValue, PackedMessages, Payload};

use crate::config::Config;
use crate::cursor::{Cursor, Key, Position};

/// Turns rows into messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    table: String,
    tracking: String,
    tie_breaker: Option<String>,
    primary_key: String,
    /// Whether the cursor carries the batch's primary keys, for `after_ack`.
    keep_keys: bool,
}

/// Where the columns the connector needs are in a result.
struct Located {
    tracking: usize,
    tie_breaker: Option<usize>,
    primary_key: usize,
}

impl Reader {
    pub fn new(config: &Config) -> Reader {
        Reader {
            table: config.table.clone(),
            tracking: config.tracking_column.clone(),
            tie_breaker: config.tie_breaker_column.clone(),
            primary_key: config.primary_key.clone(),
            keep_keys: config.after_ack.is_some(),
        }
    }

    /// The batch of `rows` (read in the cursor's order), or `None` when there are none.
    pub fn batch(&self, rows: &PackedRows) -> Result<Option<Batch<Cursor>>, Error> {
        let table = ferry_guest::mysql::table(rows).map_err(Error::msg)?;
        if table.is_empty() {
            return Ok(None);
        }
        let last = table.row(table.len() - 1);
        let at = self.locate(table.columns())?;
        // Each column's name as an object key, `"name":`, escaped once for all rows.
        let keys: Vec<Vec<u8>> = table
            .columns()
            .iter()
            .map(|column| {
                let mut key = Vec::with_capacity(column.len() + 3);
                write_json_string(&mut key, column);
                key.push(b':');
                key
            })
            .collect();
        // Written straight into the packed form the host takes: no message, payload or
        // header list of its own per row. The headers' names are made once.
        let mut packed = PackedMessages::with_capacity(rows.data.len() * 2);
        let mut headers = [
            ("table".to_string(), HeaderValue::String(self.table.clone())),
            // Each row's own, set below.
            ("primary_key".to_string(), HeaderValue::Bool(false)),
        ];
        let mut delivered = Vec::new();
        for row in table.rows() {
            let key = Key::from_value(row[at.primary_key], &self.primary_key)?;
            headers[1].1 = key.header();
            let fields = Fields { id: Some(key.message_id(&self.table)), origin_timestamp: None, headers: &headers };
            packed.push_with(fields, |payload| {
                payload.push(b'{');
                for (index, (key, value)) in keys.iter().zip(row).enumerate() {
                    if index > 0 {
                        payload.push(b',');
                    }
                    payload.extend_from_slice(key);
                    write_value(payload, *value);
                }
                payload.push(b'}');
            });
            if self.keep_keys {
                delivered.push(key);
            }
        }
        let after = Position {
            tracking: Key::from_value(last[at.tracking], &self.tracking)?,
            tie_breaker: match (at.tie_breaker, &self.tie_breaker) {
                (Some(index), Some(name)) => Some(Key::from_value(last[index], name)?),
                _ => None,
            },
        };
        Ok(Some(Batch::from_packed(packed, Cursor { after: Some(after), delivered })))
    }

    fn locate(&self, columns: &[String]) -> Result<Located, Error> {
        let find = |name: &str, key: &str| {
            columns.iter().position(|c| c == name).ok_or_else(|| {
                Error::msg(format!(
                    "the rows have no column `{name}` (plugin_config.{key}); they have {}",
                    columns.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
                ))
            })
        };
        Ok(Located {
            tracking: find(&self.tracking, "tracking_column")?,
            tie_breaker: self.tie_breaker.as_deref().map(|t| find(t, "tie_breaker_column")).transpose()?,
            primary_key: find(&self.primary_key, "primary_key")?,
        })
    }
}

fn write_value(out: &mut Payload<'_>, value: ValueRef) {
    match value {
        ValueRef::Null => out.extend_from_slice(b"null"),
        ValueRef::Int(v) => serde_json::to_writer(&mut *out, &v).expect("an integer always serializes"),
        ValueRef::Uint(v) => serde_json::to_writer(&mut *out, &v).expect("an integer always serializes"),
        // MySQL stores no NaN or infinity; were one to come, it would still be JSON.
        ValueRef::Float(v) if v.is_finite() => serde_json::to_writer(&mut *out, &v).expect("a finite float serializes"),
        ValueRef::Float(v) => write_json_string(out, &v.to_string()),
        ValueRef::Text(v) => write_json_string(out, v),
        ValueRef::Bytes(v) => write_json_string(out, &BASE64.encode(v)),
    }
}

#[cfg(test)]
mod tests {
    use ferry_guest::HeaderValue;
    use ferry_guest::bindings::iggy::connector::mysql::{Rows, Value};
    use serde_json::json;

    use super::*;

    fn reader(json: &str) -> Reader {
        Reader::new(&serde_json::from_str(json).unwrap())
    }

    fn rows(columns: &[&str], rows: Vec<Vec<Value>>) -> PackedRows {
        ferry_guest::mysql::pack(&Rows { columns: columns.iter().map(|c| c.to_string()).collect(), rows })
    }

    #[test]
    fn each_row_is_a_message_with_its_id_and_headers_and_the_cursor_is_the_last_row() {
        let reader = reader(r#"{"connection": "c", "table": "events"}"#);
        let result = rows(
            &["id", "name", "big", "price", "raw", "at", "ratio"],
            vec![
                vec![
                    Value::Int(3),
                    Value::Text("a \"b\"".into()),
                    Value::Uint(u64::MAX),
                    Value::Text("10.50".into()),
                    Value::Bytes(vec![0, 255]),
                    Value::Text("2026-12-07 10:46:16.5".into()),
                    Value::Float(0.25),
                ],
                vec![Value::Int(8), Value::Null, Value::Null, Value::Null, Value::Null, Value::Null, Value::Null],
            ],
        );
        let batch = reader.batch(&result).unwrap().unwrap();
        let messages = batch.packed.messages().unwrap();
        assert_eq!(messages.len(), 2);
        let first: serde_json::Value = serde_json::from_slice(&messages[0].payload).unwrap();
        assert_eq!(
            first,
            json!({"id": 3, "name": "a \"b\"", "big": u64::MAX, "price": "10.50", "raw": "AP8=",
                   "at": "2026-12-07 10:46:16.5", "ratio": 0.25})
        );
        assert!(messages[0].payload.starts_with(br#"{"id":3,"name""#), "columns keep the result's order");
        assert_eq!(messages[1].id, Some(Key::Int(8).message_id("events")));
        assert_eq!(
            messages[1].headers,
            [
                ("table".to_string(), HeaderValue::String("events".into())),
                ("primary_key".to_string(), HeaderValue::Int64(8))
            ]
        );
        assert_eq!(
            batch.next,
            Cursor { after: Some(Position { tracking: Key::Int(8), tie_breaker: None }), delivered: vec![] }
        );
        // The same rows make the same messages: a batch read again after a NACK is identical.
        assert_eq!(reader.batch(&result).unwrap().unwrap(), batch);
        assert_eq!(reader.batch(&rows(&["id"], vec![])).unwrap(), None, "no rows, no batch");
    }

    #[test]
    fn a_timestamp_cursor_carries_its_tie_breaker_and_after_ack_the_keys() {
        let reader = reader(
            r#"{"connection": "c", "table": "jobs", "tracking_column": "at", "tie_breaker_column": "id",
                "after_ack": {"delete": true}}"#,
        );
        let at = || Value::Text("2026-12-07 10:46:16".into());
        let result =
            rows(&["at", "id"], vec![vec![at(), Value::Text("x".into())], vec![at(), Value::Text("y".into())]]);
        let batch = reader.batch(&result).unwrap().unwrap();
        assert_eq!(
            batch.next,
            Cursor {
                after: Some(Position {
                    tracking: Key::Text("2026-12-07 10:46:16".into()),
                    tie_breaker: Some(Key::Text("y".into()))
                }),
                delivered: vec![Key::Text("x".into()), Key::Text("y".into())],
            }
        );
    }

    #[test]
    fn missing_columns_and_null_keys_are_errors_that_say_which() {
        let reader = reader(r#"{"connection": "c", "table": "t", "tracking_column": "seq"}"#);
        let error = reader.batch(&rows(&["id", "name"], vec![vec![Value::Int(1), Value::Null]])).unwrap_err();
        assert!(error.message().contains("no column `seq` (plugin_config.tracking_column)"), "{error}");
        assert!(error.message().contains("`id`, `name`"), "{error}");
        let error = reader.batch(&rows(&["seq", "name"], vec![vec![Value::Int(1), Value::Null]])).unwrap_err();
        assert!(error.message().contains("no column `id` (plugin_config.primary_key)"), "{error}");
        let error = reader.batch(&rows(&["seq", "id"], vec![vec![Value::Int(1), Value::Null]])).unwrap_err();
        assert!(error.message().contains("NULL in column `id`"), "{error}");
    }
}
