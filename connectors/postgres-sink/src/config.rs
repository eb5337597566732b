//! The connector's `plugin_config`, checked: every mistake is an error that names
//! the key, before anything reaches the server.

use ferry_guest::Error;
use ferry_guest::sql::quote_table;
use serde::Deserialize;

use crate::columns::{Columns, Mapping};

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
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        Config::check(raw).map_err(|e| serde::de::Error::custom(e.message()))
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
        ];
        for (json, needle) in cases {
            let error = parse(json).unwrap_err();
            assert!(error.contains(needle), "{json}: {error}");
        }
    }
}
