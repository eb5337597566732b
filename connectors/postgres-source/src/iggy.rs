//! Iggy's `plugin_config` for its PostgreSQL source (told by `tables`), read as
//! Iggy's source reads it, for a source moved from Iggy's runtime: polling mode,
//! `tracking_column` (`id`), `initial_offset`, `batch_size` (1000),
//! `primary_key_column`, `delete_after_read` / `processed_column`, several `tables`
//! (each with a cursor of its own, read in turn into one batch),
//! `snake_case_columns`, `include_metadata` and the record Iggy's source makes of a
//! row (`Envelope`).
//!
//! Where ferry keeps a stronger promise than Iggy's source, it keeps it: rows are
//! deleted or marked once their batch was delivered (Iggy's source does it as it reads
//! them, so a crash before delivery loses them), and a row's message id is derived
//! from its table and primary key (Iggy's is random), so a row read again is
//! recognisable. What ferry cannot honour is refused, saying why.

use serde::Deserialize;

use crate::record;
use crate::timestamp::write_rfc3339;

/// `plugin_config` as Iggy's PostgreSQL source takes it; `connection` is the server
/// the host made of its `connection_string` (checked into the settings by `config.rs`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IggyRaw {
    pub connection: String,
    pub mode: String,
    pub tables: Vec<String>,
    pub batch_size: Option<u32>,
    pub tracking_column: Option<String>,
    pub initial_offset: Option<String>,
    pub primary_key_column: Option<String>,
    pub delete_after_read: Option<bool>,
    pub processed_column: Option<String>,
    pub snake_case_columns: Option<bool>,
    pub include_metadata: Option<bool>,
    pub verbose_logging: Option<bool>,
    pub custom_query: Option<serde_json::Value>,
    pub payload_column: Option<serde_json::Value>,
    pub payload_format: Option<serde_json::Value>,
    pub replication_slot: Option<serde_json::Value>,
    pub capture_operations: Option<serde_json::Value>,
    pub cdc_backend: Option<serde_json::Value>,
    pub max_retries: Option<serde_json::Value>,
    pub retry_delay: Option<serde_json::Value>,
}

/// The record Iggy's source makes of a row: `{"table_name", "operation_type":
/// "SELECT", "timestamp" (when it was read), "data" (the row), "old_data": null}`;
/// without `include_metadata` the row is one level deeper, `"data": {"data": row}`,
/// as Iggy's source writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `"table_name":"...","operation_type":"SELECT","timestamp":`, escaped once.
    head: Vec<u8>,
    include_metadata: bool,
}

impl Envelope {
    pub fn new(table: &str, include_metadata: bool) -> Envelope {
        let mut head = b"{\"table_name\":".to_vec();
        record::write_string(&mut head, table);
        head.extend_from_slice(b",\"operation_type\":\"SELECT\",\"timestamp\":\"");
        Envelope { head, include_metadata }
    }

    /// The same record for the rows of `table`.
    pub fn for_table(&self, table: &str) -> Envelope {
        Envelope::new(table, self.include_metadata)
    }

    /// The record of one row, read at `now` (microseconds since the epoch), its JSON
    /// object written by `object` into the record's buffer (no copy of it).
    pub fn record<E>(&self, now: i64, object: impl FnOnce(&mut Vec<u8>) -> Result<(), E>) -> Result<Vec<u8>, E> {
        let mut out = Vec::with_capacity(self.head.len() + 256);
        out.extend_from_slice(&self.head);
        write_rfc3339(&mut out, now);
        out.extend_from_slice(b"\",\"data\":");
        if !self.include_metadata {
            out.extend_from_slice(b"{\"data\":");
        }
        object(&mut out)?;
        if !self.include_metadata {
            out.push(b'}');
        }
        out.extend_from_slice(b",\"old_data\":null}");
        Ok(out)
    }
}

/// A column's name as Iggy's `snake_case_columns` makes it: `userId` is `user_id`,
/// `HTTPCode` is `httpcode` (an underscore before an upper-case letter that follows a
/// lower-case one or a digit, every letter lower-cased).
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut after_upper = false;
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 && !after_upper {
                out.push('_');
            }
            out.extend(c.to_lowercase());
            after_upper = true;
        } else {
            out.push(c);
            after_upper = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_becomes_iggys_record() {
        let with = Envelope::new("users", true);
        let object = |out: &mut Vec<u8>| {
            out.extend_from_slice(br#"{"id":1}"#);
            Ok::<_, ()>(())
        };
        let record = with.record(1_700_000_000_000_001, object).unwrap();
        let record: serde_json::Value = serde_json::from_slice(&record).unwrap();
        assert_eq!(
            record,
            serde_json::json!({"table_name": "users", "operation_type": "SELECT",
                "timestamp": "2023-11-14T22:13:20.000001Z", "data": {"id": 1}, "old_data": null})
        );
        let without: serde_json::Value =
            serde_json::from_slice(&Envelope::new("a\"b", false).record(0, object).unwrap()).unwrap();
        assert_eq!(without["data"], serde_json::json!({"data": {"id": 1}}));
        assert_eq!(without["table_name"], "a\"b");
    }

    #[test]
    fn column_names_are_snake_cased_as_iggy_does() {
        for (name, snake) in [
            ("userId", "user_id"),
            ("HTTPCode", "httpcode"),
            ("already_snake", "already_snake"),
            ("Id", "id"),
            ("a1B", "a1_b"),
        ] {
            assert_eq!(snake_case(name), snake);
        }
    }
}
