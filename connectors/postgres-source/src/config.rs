//! The connector's `plugin_config`, checked: every mistake is an error that names
//! the key, before anything reaches the server.

use ferry_guest::Error;
pub use ferry_guest::row::AfterAck;
use serde::Deserialize;

use crate::iggy::{Envelope, IggyRaw};

/// `plugin_config` as the operator writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    connection: String,
    table: String,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    tracking_column: Option<String>,
    #[serde(default)]
    tie_breaker_column: Option<String>,
    #[serde(default = "default_primary_key")]
    primary_key: String,
    #[serde(default = "default_batch_size")]
    batch_size: u32,
    #[serde(default)]
    after_ack: Option<AfterAck>,
}

fn default_primary_key() -> String {
    "id".to_string()
}

fn default_batch_size() -> u32 {
    100
}

/// The most rows one batch may hold: `after_ack` names each row's key as a
/// parameter of one statement, and PostgreSQL takes at most 65,535 of them.
pub const MAX_BATCH_SIZE: u32 = 10_000;

/// The checked settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The `[postgres.NAME]` the operator granted.
    pub connection: String,
    /// The table the rows belong to: their `table` header, their ids, `after_ack`.
    pub table: String,
    /// What to read instead of the whole table, if given.
    pub query: Option<String>,
    pub tracking_column: String,
    pub tie_breaker_column: Option<String>,
    pub primary_key: String,
    pub batch_size: u32,
    pub after_ack: Option<AfterAck>,
    /// Read only rows whose tracking value is greater than this, as PostgreSQL reads
    /// it for the column (Iggy's `initial_offset`), until there is a cursor.
    pub initial_offset: Option<String>,
    /// The tables after `table`, read by the same connector (Iggy's `tables`), each
    /// with a cursor of its own.
    pub other_tables: Vec<String>,
    /// Each row as the record Iggy's source makes of it, for Iggy's keys.
    pub envelope: Option<Envelope>,
    /// Column names snake_cased in the record (Iggy's `snake_case_columns`).
    pub snake_case_columns: bool,
    /// Log every batch read (Iggy's `verbose_logging`).
    pub verbose: bool,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Iggy's keys are told by `tables` (ferry's source says `table`).
        let object = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let iggys = object.contains_key("tables");
        let object = serde_json::Value::Object(object);
        let checked = if iggys {
            Config::check_iggy(serde_json::from_value(object).map_err(serde::de::Error::custom)?)
        } else {
            Config::check(serde_json::from_value(object).map_err(serde::de::Error::custom)?)
        };
        checked.map_err(|e| serde::de::Error::custom(e.message()))
    }
}

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        if raw.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a [postgres.NAME] in grants.postgres"));
        }
        if raw.batch_size == 0 || raw.batch_size > MAX_BATCH_SIZE {
            return Err(Error::msg(format!(
                "plugin_config.batch_size is {}: it must be from 1 to {MAX_BATCH_SIZE}",
                raw.batch_size
            )));
        }
        let query = match raw.query {
            None => None,
            Some(query) => Some(check_query(&query).map_err(|e| e.context("plugin_config.query"))?),
        };
        let tracking_column = raw.tracking_column.unwrap_or_else(|| raw.primary_key.clone());
        let tie_breaker_column = raw.tie_breaker_column.filter(|tie| *tie != tracking_column);
        Ok(Config {
            connection: raw.connection,
            table: raw.table,
            query,
            tracking_column,
            tie_breaker_column,
            primary_key: raw.primary_key,
            batch_size: raw.batch_size,
            after_ack: raw.after_ack,
            initial_offset: None,
            other_tables: Vec::new(),
            envelope: None,
            snake_case_columns: false,
            verbose: false,
        })
    }
}

impl Config {
    /// Every table the connector reads: `table`, then `other_tables`.
    pub fn tables(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.table).chain(&self.other_tables)
    }

    /// The settings for reading `table` alone.
    pub fn for_table(&self, table: &str) -> Config {
        Config {
            table: table.to_string(),
            other_tables: Vec::new(),
            envelope: self.envelope.as_ref().map(|envelope| envelope.for_table(table)),
            ..self.clone()
        }
    }
}

/// A feature of Iggy's source that ferry's does not have, as the error saying so.
fn unsupported(key: &str, why: &str) -> Error {
    Error::msg(format!("plugin_config.{key}: {why}"))
}

impl Config {
    /// The settings Iggy's keys mean, with Iggy's defaults.
    fn check_iggy(raw: IggyRaw) -> Result<Config, Error> {
        if raw.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a [postgres.NAME] in grants.postgres"));
        }
        match raw.mode.as_str() {
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
            ("replication_slot", raw.replication_slot.is_some()),
            ("capture_operations", raw.capture_operations.is_some()),
            ("cdc_backend", raw.cdc_backend.is_some()),
        ];
        if let Some((key, _)) = cdc_keys.iter().find(|(_, given)| *given) {
            return Err(unsupported(key, "applies to mode = \"cdc\", which ferry's PostgreSQL source does not have"));
        }
        if raw.custom_query.is_some() {
            return Err(unsupported(
                "custom_query",
                "Iggy's query with $table, $offset and $limit is not supported: ferry's source builds the query \
                 from tables and tracking_column",
            ));
        }
        if raw.payload_column.is_some() || raw.payload_format.is_some() {
            let key = if raw.payload_column.is_some() { "payload_column" } else { "payload_format" };
            return Err(unsupported(key, "a column as the whole payload is not supported yet: each row is its record"));
        }
        if raw.max_retries.is_some() || raw.retry_delay.is_some() {
            let key = if raw.max_retries.is_some() { "max_retries" } else { "retry_delay" };
            return Err(unsupported(
                key,
                "a read the server failed is polled again after the host's back-off until it succeeds; leave it out",
            ));
        }
        let mut tables = raw.tables.into_iter();
        let table = tables.next().ok_or_else(|| Error::msg("plugin_config.tables is empty: name a table to read"))?;
        let other_tables: Vec<String> = tables.collect();
        if let Some(twice) =
            other_tables.iter().find(|t| **t == table || other_tables.iter().filter(|o| o == t).count() > 1)
        {
            return Err(Error::msg(format!("plugin_config.tables names `{twice}` twice")));
        }
        let batch_size = raw.batch_size.unwrap_or(1000);
        if batch_size == 0 || batch_size > MAX_BATCH_SIZE {
            return Err(Error::msg(format!(
                "plugin_config.batch_size is {batch_size}: it must be from 1 to {MAX_BATCH_SIZE}"
            )));
        }
        // It goes into the query as a string literal (quotes doubled): no backslash,
        // which a server without standard_conforming_strings reads as an escape.
        if let Some(offset) = &raw.initial_offset
            && (offset.contains('\\') || offset.chars().any(char::is_control) || offset.len() > 1024)
        {
            return Err(Error::msg(
                "plugin_config.initial_offset may not hold a backslash or a control character, nor be longer than \
                 1024 bytes: give the tracking column's value as PostgreSQL writes it",
            ));
        }
        let tracking_column = raw.tracking_column.unwrap_or_else(|| "id".to_string());
        let primary_key = raw.primary_key_column.unwrap_or_else(|| tracking_column.clone());
        let after_ack = match (raw.delete_after_read.unwrap_or(false), raw.processed_column) {
            (true, _) => Some(AfterAck::Delete),
            (false, Some(column)) => Some(AfterAck::Mark(column)),
            (false, None) => None,
        };
        Ok(Config {
            connection: raw.connection,
            envelope: Some(Envelope::new(&table, raw.include_metadata.unwrap_or(true))),
            table,
            query: None,
            tracking_column,
            tie_breaker_column: None,
            primary_key,
            batch_size,
            after_ack,
            initial_offset: raw.initial_offset,
            other_tables,
            snake_case_columns: raw.snake_case_columns.unwrap_or(false),
            verbose: raw.verbose_logging.unwrap_or(false),
        })
    }
}

/// The query without a trailing `;`, refused when it has parameters of its own: the
/// connector wraps it and binds `$1` (and `$2`) to the cursor itself.
fn check_query(query: &str) -> Result<String, Error> {
    let query = query.trim().trim_end_matches(';').trim_end();
    if query.is_empty() {
        return Err(Error::msg("is empty"));
    }
    let bytes = query.as_bytes();
    if bytes.windows(2).any(|pair| pair[0] == b'$' && pair[1].is_ascii_digit()) {
        return Err(Error::msg(
            "has a parameter ($1, ...): write the SELECT without the cursor condition; the connector reads it as \
             a subquery and adds WHERE, ORDER BY and LIMIT itself",
        ));
    }
    Ok(query.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Config, String> {
        serde_json::from_str::<Config>(json).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_read_a_table_by_its_id() {
        let config = parse(r#"{"connection": "main", "table": "events"}"#).unwrap();
        assert_eq!(config.tracking_column, "id");
        assert_eq!(config.primary_key, "id");
        assert_eq!(config.tie_breaker_column, None);
        assert_eq!(config.batch_size, 100);
        assert_eq!(config.after_ack, None);
        assert_eq!(config.query, None);
    }

    #[test]
    fn every_key_is_read() {
        let config = parse(
            r#"{"connection": "main", "table": "public.events", "query": " SELECT * FROM events ; ",
                "tracking_column": "created_at", "tie_breaker_column": "event_id", "primary_key": "event_id",
                "batch_size": 7, "after_ack": {"mark_column": "processed"}}"#,
        )
        .unwrap();
        assert_eq!(config.query.as_deref(), Some("SELECT * FROM events"));
        assert_eq!(config.tracking_column, "created_at");
        assert_eq!(config.tie_breaker_column.as_deref(), Some("event_id"));
        assert_eq!(config.primary_key, "event_id");
        assert_eq!(config.batch_size, 7);
        assert_eq!(config.after_ack, Some(AfterAck::Mark("processed".into())));
        let delete = parse(r#"{"connection": "c", "table": "t", "after_ack": {"delete": true}}"#).unwrap();
        assert_eq!(delete.after_ack, Some(AfterAck::Delete));
    }

    #[test]
    fn a_tie_breaker_equal_to_the_tracking_column_is_dropped() {
        let config = parse(r#"{"connection": "c", "table": "t", "tie_breaker_column": "id"}"#).unwrap();
        assert_eq!(config.tie_breaker_column, None);
    }

    #[test]
    fn mistakes_name_the_key() {
        let cases = [
            (r#"{"table": "t"}"#, "connection"),
            (r#"{"connection": "c"}"#, "table"),
            (r#"{"connection": "", "table": "t"}"#, "plugin_config.connection"),
            (r#"{"connection": "c", "table": "t", "batch_size": 0}"#, "plugin_config.batch_size"),
            (r#"{"connection": "c", "table": "t", "batch_size": 10001}"#, "plugin_config.batch_size"),
            (r#"{"connection": "c", "table": "t", "query": " ; "}"#, "plugin_config.query: is empty"),
            (r#"{"connection": "c", "table": "t", "query": "SELECT * FROM t WHERE id > $1"}"#, "plugin_config.query"),
            (r#"{"connection": "c", "table": "t", "after_ack": {}}"#, "plugin_config.after_ack says nothing"),
            (r#"{"connection": "c", "table": "t", "after_ack": {"delete": false}}"#, "plugin_config.after_ack"),
            (r#"{"connection": "c", "table": "t", "after_ack": {"delete": true, "mark_column": "m"}}"#, "choose one"),
            (r#"{"connection": "c", "table": "t", "after_ack": {"truncate": true}}"#, "truncate"),
            (r#"{"connection": "c", "table": "t", "tracking": "x"}"#, "tracking"),
        ];
        for (json, expected) in cases {
            let error = parse(json).unwrap_err();
            assert!(error.contains(expected), "{json}: {error}");
        }
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
            (r#""mode": "polling", "tables": ["t"], "initial_offset": "1\\' OR true --""#, "initial_offset"),
            (r#""mode": "polling", "tables": ["t"], "initial_offset": "1\n2""#, "initial_offset"),
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
}
