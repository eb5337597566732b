//! A query's rows as a batch: one message per row, and the cursor after the last.

use ferry_guest::bindings::iggy::connector::postgres::PackedRows;
use ferry_guest::rows::Table;
use ferry_guest::{Batch, Error, Message};

use crate::config::Config;
use crate::cursor::{Cursor, Key, Position};
use crate::id::message_id;
use crate::iggy::{Envelope, snake_case};
use crate::record;

/// Now, in microseconds since the epoch: when a batch's rows were read.
fn now_micros() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

/// Turns rows into messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    table: String,
    tracking: String,
    tie_breaker: Option<String>,
    primary_key: String,
    /// Whether the cursor carries the batch's primary keys, for `after_ack`.
    keep_keys: bool,
    /// Each row as Iggy's record, for Iggy's keys.
    envelope: Option<Envelope>,
    snake_case_columns: bool,
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
            envelope: config.envelope.clone(),
            snake_case_columns: config.snake_case_columns,
        }
    }

    /// The batch of `rows` (read in the cursor's order), or `None` when there are none.
    pub fn batch(&self, rows: &PackedRows) -> Result<Option<Batch<Cursor>>, Error> {
        let table = Table::of(rows).map_err(Error::msg)?;
        if table.is_empty() {
            return Ok(None);
        }
        let last = table.row(table.len() - 1);
        let at = self.locate(table.columns())?;
        let snake_cased: Vec<String>;
        let names = match self.snake_case_columns {
            true => {
                snake_cased = table.columns().iter().map(|name| snake_case(name)).collect();
                &snake_cased
            }
            false => table.columns(),
        };
        let objects = record::Objects::new(names);
        let now = self.envelope.as_ref().map(|_| now_micros());
        let mut messages = Vec::with_capacity(table.len());
        let mut delivered = Vec::new();
        for row in table.rows() {
            let payload = match (&self.envelope, now) {
                (Some(envelope), Some(now)) => envelope.record(now, |out| objects.write_json(row, out))?,
                _ => objects.to_json(row)?,
            };
            let key = Key::from_value(row[at.primary_key], &self.primary_key)?;
            messages.push(
                Message::new(payload)
                    .with_id(message_id(&self.table, &key))
                    .with_header("table", self.table.as_str())
                    .with_header("primary_key", header_value(&key)),
            );
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
        Ok(Some(Batch::new(messages, Cursor { after: Some(after), delivered, ..Cursor::default() })))
    }

    fn locate(&self, columns: &[String]) -> Result<Located, Error> {
        for (index, name) in columns.iter().enumerate() {
            if columns[..index].contains(name) {
                return Err(Error::msg(format!(
                    "the result has two columns named `{name}`: give them distinct names (AS) in plugin_config.query"
                )));
            }
        }
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

/// The `primary_key` header: the key as the closest header kind.
fn header_value(key: &Key) -> ferry_guest::HeaderValue {
    use ferry_guest::HeaderValue;
    match key {
        Key::Boolean(v) => HeaderValue::Bool(*v),
        Key::Int(v) | Key::Timestamp(v) => HeaderValue::Int64(*v),
        Key::Float(v) => HeaderValue::Float64(*v),
        Key::Text(v) => HeaderValue::String(v.clone()),
        Key::Bytes(v) => HeaderValue::Raw(v.clone()),
    }
}

#[cfg(test)]
mod tests {
    use ferry_guest::HeaderValue;
    use ferry_guest::bindings::iggy::connector::postgres::{Rows, Value};

    use super::*;

    fn reader(json: &str) -> Reader {
        Reader::new(&serde_json::from_str(json).unwrap())
    }

    /// Rows packed as the host packs them.
    fn rows(columns: &[&str], rows: Vec<Vec<Value>>) -> PackedRows {
        ferry_guest::rows::pack(&Rows { columns: columns.iter().map(|c| c.to_string()).collect(), rows })
    }

    #[test]
    fn each_row_is_a_message_with_its_id_and_headers_and_the_cursor_is_the_last_row() {
        let reader = reader(r#"{"connection": "c", "table": "events"}"#);
        let result =
            rows(&["id", "name"], vec![vec![Value::Int(3), Value::Text("a".into())], vec![Value::Int(8), Value::Null]]);
        let batch = reader.batch(&result).unwrap().unwrap();
        assert_eq!(batch.messages.len(), 2);
        assert_eq!(batch.messages[0].payload, br#"{"id":3,"name":"a"}"#);
        assert_eq!(batch.messages[1].payload, br#"{"id":8,"name":null}"#);
        assert_eq!(batch.messages[0].id, Some(message_id("events", &Key::Int(3))));
        assert_eq!(batch.messages[1].id, Some(message_id("events", &Key::Int(8))));
        assert_eq!(
            batch.messages[1].headers,
            [
                ("table".to_string(), HeaderValue::String("events".into())),
                ("primary_key".to_string(), HeaderValue::Int64(8))
            ]
        );
        assert_eq!(
            batch.next,
            Cursor { after: Some(Position { tracking: Key::Int(8), tie_breaker: None }), ..Cursor::default() }
        );
        // The same rows make the same messages: a batch read again after a NACK is identical.
        assert_eq!(reader.batch(&result).unwrap().unwrap(), batch);
    }

    #[test]
    fn no_rows_is_no_batch() {
        let reader = reader(r#"{"connection": "c", "table": "events"}"#);
        assert_eq!(reader.batch(&rows(&["id"], vec![])).unwrap(), None);
    }

    #[test]
    fn a_timestamp_cursor_carries_its_tie_breaker_and_after_ack_the_keys() {
        let reader = reader(
            r#"{"connection": "c", "table": "jobs", "tracking_column": "at", "tie_breaker_column": "id",
                "primary_key": "id", "after_ack": {"delete": true}}"#,
        );
        let result = rows(
            &["at", "id"],
            vec![
                vec![Value::Timestamp(10), Value::Text("x".into())],
                vec![Value::Timestamp(10), Value::Text("y".into())],
            ],
        );
        let batch = reader.batch(&result).unwrap().unwrap();
        assert_eq!(
            batch.next,
            Cursor {
                after: Some(Position { tracking: Key::Timestamp(10), tie_breaker: Some(Key::Text("y".into())) }),
                delivered: vec![Key::Text("x".into()), Key::Text("y".into())],
                ..Cursor::default()
            }
        );
        assert_eq!(batch.messages[0].headers[1].1, HeaderValue::String("x".into()));
        assert_eq!(batch.messages[0].payload, br#"{"at":"1970-01-01T00:00:00.000010Z","id":"x"}"#);
    }

    #[test]
    fn missing_or_repeated_columns_and_null_keys_are_errors_that_say_which() {
        let reader = reader(r#"{"connection": "c", "table": "t", "tracking_column": "seq"}"#);
        let error = reader.batch(&rows(&["id", "name"], vec![vec![Value::Int(1), Value::Null]])).unwrap_err();
        assert!(error.message().contains("no column `seq` (plugin_config.tracking_column)"), "{error}");
        assert!(error.message().contains("`id`, `name`"), "{error}");

        let error = reader.batch(&rows(&["seq", "name"], vec![vec![Value::Int(1), Value::Null]])).unwrap_err();
        assert!(error.message().contains("no column `id` (plugin_config.primary_key)"), "{error}");

        let error = reader
            .batch(&rows(&["seq", "id", "id"], vec![vec![Value::Int(1), Value::Int(1), Value::Int(2)]]))
            .unwrap_err();
        assert!(error.message().contains("two columns named `id`"), "{error}");

        let error = reader.batch(&rows(&["seq", "id"], vec![vec![Value::Int(1), Value::Null]])).unwrap_err();
        assert!(error.message().contains("NULL in column `id`"), "{error}");
    }
}
