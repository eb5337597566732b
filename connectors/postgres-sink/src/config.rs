//! The connector's `plugin_config`, checked: every mistake is an error that names
//! the key, before anything reaches the server.

use ferry_guest::Error;
use ferry_guest::sql::{quote_identifier, quote_table};
use serde::Deserialize;

use crate::columns::{Columns, Mapping};
use crate::iggy::{self, PayloadFormat};

/// `plugin_config` as the operator writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    connection: String,
    table: String,
    #[serde(default)]
    create_table: bool,
    columns: Option<Columns>,
    conflict_columns: Option<Vec<String>>,
    #[serde(default)]
    upsert: bool,
}

/// `plugin_config` as Iggy's PostgreSQL sink takes it (told by `target_table`), its
/// `connection_string` made a server the host serves (`connection`) by ferry's
/// reading of Iggy's files.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IggyRaw {
    connection: String,
    target_table: String,
    batch_size: Option<u32>,
    auto_create_table: Option<bool>,
    include_metadata: Option<bool>,
    include_checksum: Option<bool>,
    include_origin_timestamp: Option<bool>,
    payload_format: Option<String>,
    verbose_logging: Option<bool>,
    max_retries: Option<serde_json::Value>,
    retry_delay: Option<serde_json::Value>,
}

/// The checked settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The `[postgres.NAME]` the operator granted.
    pub connection: String,
    /// The table as configured, for messages.
    pub table: String,
    /// The table quoted for SQL text.
    pub quoted_table: String,
    /// Create the table with the default layout on open, if it does not exist.
    pub create_table: bool,
    /// Mapped columns instead of the default layout, when configured.
    pub mapping: Option<Mapping>,
    /// Iggy's layout instead of the default one, for Iggy's keys.
    pub iggy: Option<iggy::Columns>,
    /// Log every batch written (Iggy's `verbose_logging`).
    pub verbose: bool,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let object = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let iggys = object.contains_key("target_table");
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
            return Err(Error::msg("plugin_config.connection is empty: name a connection in grants.postgres"));
        }
        let quoted_table = quote_table(&raw.table).map_err(|e| e.context("plugin_config.table"))?;
        let mapping = Mapping::check(raw.columns, raw.conflict_columns, raw.upsert, raw.create_table)?;
        Ok(Config {
            connection: raw.connection,
            table: raw.table,
            quoted_table,
            create_table: raw.create_table,
            mapping,
            iggy: None,
            verbose: false,
        })
    }

    /// Iggy's keys, with Iggy's defaults; what ferry cannot honour is refused, saying why.
    fn check_iggy(raw: IggyRaw) -> Result<Config, Error> {
        if raw.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a connection in grants.postgres"));
        }
        if raw.max_retries.is_some() || raw.retry_delay.is_some() {
            let key = if raw.max_retries.is_some() { "max_retries" } else { "retry_delay" };
            return Err(Error::msg(format!(
                "plugin_config.{key}: ferry retries a batch the server failed for a passing reason until it is \
                 written (the sink's retry_backoff) and never drops it, as Iggy's sink does after max_retries; \
                 leave it out"
            )));
        }
        if raw.batch_size == Some(0) {
            return Err(Error::msg("plugin_config.batch_size is 0: it must be at least 1"));
        }
        let payload = match raw.payload_format {
            None => PayloadFormat::Bytea,
            Some(name) => {
                PayloadFormat::named(&name).map_err(|p| Error::msg(format!("plugin_config.payload_format: {p}")))?
            }
        };
        // Iggy's sink quotes the whole name as one identifier: `a.b` is a table of that name.
        let quoted_table = quote_identifier(&raw.target_table).map_err(|e| e.context("plugin_config.target_table"))?;
        Ok(Config {
            connection: raw.connection,
            table: raw.target_table,
            quoted_table,
            create_table: raw.auto_create_table.unwrap_or(false),
            mapping: None,
            iggy: Some(iggy::Columns {
                metadata: raw.include_metadata.unwrap_or(true),
                checksum: raw.include_checksum.unwrap_or(true),
                origin_timestamp: raw.include_origin_timestamp.unwrap_or(true),
                payload,
            }),
            verbose: raw.verbose_logging.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Config, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn the_table_is_quoted_and_create_table_is_off_by_default() {
        let config = parse(r#"{"connection": "app", "table": "audit.Events"}"#).unwrap();
        assert_eq!(config.quoted_table, r#""audit"."Events""#);
        assert!(!config.create_table);
        assert!(parse(r#"{"connection": "app", "table": "t", "create_table": true}"#).unwrap().create_table);
        assert_eq!(config.mapping, None, "the default layout unless columns are mapped");
        let mapped = parse(r#"{"connection": "app", "table": "t", "columns": {"k": "@id", "v": "v"}}"#).unwrap();
        assert_eq!(mapped.mapping.unwrap().conflict, ["k"]);
    }

    #[test]
    fn iggys_keys_take_iggys_layout_with_iggys_defaults() {
        let config = parse(
            r#"{"connection": "sink-pg", "target_table": "iggy.messages", "batch_size": 100,
            "verbose_logging": true}"#,
        )
        .unwrap();
        assert_eq!(config.quoted_table, r#""iggy.messages""#, "one identifier, as Iggy quotes it");
        assert!(!config.create_table && config.verbose);
        assert_eq!(
            config.iggy,
            Some(iggy::Columns {
                metadata: true,
                checksum: true,
                origin_timestamp: true,
                payload: PayloadFormat::Bytea
            })
        );
        let chosen = parse(
            r#"{"connection": "c", "target_table": "t", "include_checksum": false, "auto_create_table": true,
            "include_metadata": false, "include_origin_timestamp": false, "payload_format": "JSON"}"#,
        )
        .unwrap();
        assert!(chosen.create_table);
        assert_eq!(
            chosen.iggy,
            Some(iggy::Columns {
                metadata: false,
                checksum: false,
                origin_timestamp: false,
                payload: PayloadFormat::Json
            })
        );
    }

    #[test]
    fn mistakes_name_their_key() {
        let cases = [
            (r#"{"table": "t"}"#, "connection"),
            (r#"{"connection": "app"}"#, "table"),
            (r#"{"connection": "", "table": "t"}"#, "plugin_config.connection"),
            (r#"{"connection": "app", "table": "a.b.c"}"#, "plugin_config.table"),
            (r#"{"connection": "app", "table": "x\"y"}"#, "plugin_config.table"),
            (r#"{"connection": "app", "table": "t", "create_tabel": true}"#, "create_tabel"),
            (r#"{"connection": "app", "table": "t", "create_table": "yes"}"#, "invalid type"),
            (r#"{"connection": "app", "table": "t", "columns": {"c": "x"}}"#, "map a column to \"@id\""),
            (r#"{"connection": "app", "table": "t", "columns": {"c": "@idd"}}"#, "plugin_config.columns.c"),
            (r#"{"connection": "app", "table": "t", "upsert": true}"#, "plugin_config.upsert"),
            (r#"{"connection": "app", "table": "t", "columns": {"c": "@id"}, "upsert": 1}"#, "invalid type"),
            (r#"{"connection": "app", "target_table": "t", "include_checksum": 1}"#, "invalid type"),
            (r#"{"connection": "app", "target_table": "t", "max_retries": 3}"#, "max_retries"),
            (r#"{"connection": "app", "target_table": "t", "retry_delay": "1s"}"#, "retry_delay"),
            (r#"{"connection": "app", "target_table": "t", "payload_format": "xml"}"#, "payload_format"),
            (r#"{"connection": "app", "target_table": "t", "batch_size": 0}"#, "batch_size"),
            (r#"{"connection": "app", "target_table": "t", "table": "t"}"#, "unknown field `table`"),
            (r#"{"connection": "", "target_table": "t"}"#, "plugin_config.connection"),
        ];
        for (json, needle) in cases {
            let error = parse(json).unwrap_err();
            assert!(error.contains(needle), "{json}: {error}");
        }
    }
}
