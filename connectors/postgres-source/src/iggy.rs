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

use ferry_guest::Error;
use serde::Deserialize;

use crate::config::{AfterAck, Config, MAX_BATCH_SIZE};
use crate::record;
use crate::timestamp::write_rfc3339;

/// `plugin_config` as Iggy's PostgreSQL source takes it; `connection` is the server
/// the host made of its `connection_string`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IggyRaw {
    connection: String,
    mode: String,
    tables: Vec<String>,
    batch_size: Option<u32>,
    tracking_column: Option<String>,
    initial_offset: Option<String>,
    primary_key_column: Option<String>,
    delete_after_read: Option<bool>,
    processed_column: Option<String>,
    snake_case_columns: Option<bool>,
    include_metadata: Option<bool>,
    verbose_logging: Option<bool>,
    custom_query: Option<serde_json::Value>,
    payload_column: Option<serde_json::Value>,
    payload_format: Option<serde_json::Value>,
    replication_slot: Option<serde_json::Value>,
    capture_operations: Option<serde_json::Value>,
    cdc_backend: Option<serde_json::Value>,
    max_retries: Option<serde_json::Value>,
    retry_delay: Option<serde_json::Value>,
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
    fn new(table: &str, include_metadata: bool) -> Envelope {
        let mut head = b"{\"table_name\":".to_vec();
        record::write_string(&mut head, table);
        head.extend_from_slice(b",\"operation_type\":\"SELECT\",\"timestamp\":\"");
        Envelope { head, include_metadata }
    }

    /// The same record for the rows of `table`.
    pub fn for_table(&self, table: &str) -> Envelope {
        Envelope::new(table, self.include_metadata)
    }

    /// The record of the row `object` (its JSON object), read at `now` (microseconds
    /// since the epoch).
    pub fn wrap(&self, object: &[u8], now: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + object.len() + 64);
        out.extend_from_slice(&self.head);
        write_rfc3339(&mut out, now);
        out.extend_from_slice(b"\",\"data\":");
        if !self.include_metadata {
            out.extend_from_slice(b"{\"data\":");
        }
        out.extend_from_slice(object);
        if !self.include_metadata {
            out.push(b'}');
        }
        out.extend_from_slice(b",\"old_data\":null}");
        out
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

/// A feature of Iggy's source that ferry's does not have, as the error saying so.
fn unsupported(key: &str, why: &str) -> Error {
    Error::msg(format!("plugin_config.{key}: {why}"))
}

impl IggyRaw {
    /// The settings Iggy's keys mean, with Iggy's defaults.
    pub(crate) fn check(self) -> Result<Config, Error> {
        if self.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a [postgres.NAME] in grants.postgres"));
        }
        match self.mode.as_str() {
            "polling" => {}
            "cdc" => {
                return Err(unsupported(
                    "mode",
                    "\"cdc\" (logical replication) is not supported by ferry's PostgreSQL source yet; \"polling\" is",
                ));
            }
            other => return Err(unsupported("mode", &format!("{other:?} is neither \"polling\" nor \"cdc\""))),
        }
        let cdc_keys = [
            ("replication_slot", self.replication_slot.is_some()),
            ("capture_operations", self.capture_operations.is_some()),
            ("cdc_backend", self.cdc_backend.is_some()),
        ];
        if let Some((key, _)) = cdc_keys.iter().find(|(_, given)| *given) {
            return Err(unsupported(key, "applies to mode = \"cdc\", which ferry's PostgreSQL source does not have"));
        }
        if self.custom_query.is_some() {
            return Err(unsupported(
                "custom_query",
                "Iggy's query with $table, $offset and $limit is not supported: ferry's source builds the query \
                 from tables and tracking_column",
            ));
        }
        if self.payload_column.is_some() || self.payload_format.is_some() {
            let key = if self.payload_column.is_some() { "payload_column" } else { "payload_format" };
            return Err(unsupported(key, "a column as the whole payload is not supported yet: each row is its record"));
        }
        if self.max_retries.is_some() || self.retry_delay.is_some() {
            let key = if self.max_retries.is_some() { "max_retries" } else { "retry_delay" };
            return Err(unsupported(
                key,
                "a read the server failed is polled again after the host's back-off until it succeeds; leave it out",
            ));
        }
        let mut tables = self.tables.into_iter();
        let table = tables.next().ok_or_else(|| Error::msg("plugin_config.tables is empty: name a table to read"))?;
        let other_tables: Vec<String> = tables.collect();
        if let Some(twice) =
            other_tables.iter().find(|t| **t == table || other_tables.iter().filter(|o| o == t).count() > 1)
        {
            return Err(Error::msg(format!("plugin_config.tables names `{twice}` twice")));
        }
        let batch_size = self.batch_size.unwrap_or(1000);
        if batch_size == 0 || batch_size > MAX_BATCH_SIZE {
            return Err(Error::msg(format!(
                "plugin_config.batch_size is {batch_size}: it must be from 1 to {MAX_BATCH_SIZE}"
            )));
        }
        let tracking_column = self.tracking_column.unwrap_or_else(|| "id".to_string());
        let primary_key = self.primary_key_column.unwrap_or_else(|| tracking_column.clone());
        let after_ack = match (self.delete_after_read.unwrap_or(false), self.processed_column) {
            (true, _) => Some(AfterAck::Delete),
            (false, Some(column)) => Some(AfterAck::Mark(column)),
            (false, None) => None,
        };
        Ok(Config {
            connection: self.connection,
            envelope: Some(Envelope::new(&table, self.include_metadata.unwrap_or(true))),
            table,
            query: None,
            tracking_column,
            tie_breaker_column: None,
            primary_key,
            batch_size,
            after_ack,
            initial_offset: self.initial_offset,
            other_tables,
            snake_case_columns: self.snake_case_columns.unwrap_or(false),
            verbose: self.verbose_logging.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Config, String> {
        serde_json::from_str::<Config>(json).map_err(|e| e.to_string())
    }

    #[test]
    fn iggys_keys_read_with_iggys_defaults() {
        let config = parse(r#"{"connection": "source-pg", "mode": "polling", "tables": ["users"]}"#).unwrap();
        assert_eq!(
            (config.table.as_str(), config.tracking_column.as_str(), config.primary_key.as_str()),
            ("users", "id", "id")
        );
        assert_eq!(config.batch_size, 1000);
        assert_eq!((config.after_ack, config.initial_offset, config.snake_case_columns), (None, None, false));
        assert!(config.envelope.is_some());
        let every = parse(
            r#"{"connection": "c", "mode": "polling", "tables": ["app.orders"], "batch_size": 10,
                "tracking_column": "seq", "initial_offset": "5", "primary_key_column": "order_id",
                "processed_column": "done", "snake_case_columns": true, "include_metadata": false,
                "verbose_logging": true}"#,
        )
        .unwrap();
        assert_eq!((every.tracking_column.as_str(), every.primary_key.as_str()), ("seq", "order_id"));
        assert_eq!(every.after_ack, Some(AfterAck::Mark("done".into())));
        assert_eq!(every.initial_offset.as_deref(), Some("5"));
        assert!(every.snake_case_columns && every.verbose);
        let delete = parse(r#"{"connection": "c", "mode": "polling", "tables": ["t"], "delete_after_read": true}"#);
        assert_eq!(delete.unwrap().after_ack, Some(AfterAck::Delete));
    }

    #[test]
    fn what_ferry_cannot_honour_is_refused_saying_why() {
        let cases = [
            (r#""mode": "cdc", "tables": ["t"]"#, "plugin_config.mode: \"cdc\""),
            (r#""mode": "poll", "tables": ["t"]"#, "plugin_config.mode: \"poll\""),
            (r#""mode": "polling", "tables": ["a", "b", "a"]"#, "names `a` twice"),
            (r#""mode": "polling", "tables": []"#, "tables is empty"),
            (r#""mode": "polling", "tables": ["t"], "custom_query": "SELECT 1""#, "custom_query"),
            (r#""mode": "polling", "tables": ["t"], "payload_column": "p""#, "payload_column"),
            (r#""mode": "polling", "tables": ["t"], "max_retries": 3"#, "max_retries"),
            (r#""mode": "polling", "tables": ["t"], "replication_slot": "s""#, "replication_slot"),
            (r#""mode": "polling", "tables": ["t"], "batch_size": 0"#, "batch_size"),
            (r#""mode": "polling", "tables": ["t"], "table": "t""#, "unknown field `table`"),
            (r#""tables": ["t"]"#, "mode"),
        ];
        for (keys, needle) in cases {
            let json = format!(r#"{{"connection": "c", {keys}}}"#);
            let problem = parse(&json).unwrap_err();
            assert!(problem.contains(needle), "{json}: {problem}");
        }
    }

    #[test]
    fn a_row_becomes_iggys_record() {
        let with = Envelope::new("users", true);
        let record = with.wrap(br#"{"id":1}"#, 1_700_000_000_000_001);
        let record: serde_json::Value = serde_json::from_slice(&record).unwrap();
        assert_eq!(
            record,
            serde_json::json!({"table_name": "users", "operation_type": "SELECT",
                "timestamp": "2023-11-14T22:13:20.000001Z", "data": {"id": 1}, "old_data": null})
        );
        let without: serde_json::Value =
            serde_json::from_slice(&Envelope::new("a\"b", false).wrap(br#"{"id":1}"#, 0)).unwrap();
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
