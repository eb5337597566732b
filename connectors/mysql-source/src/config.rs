//! The connector's `plugin_config`, checked: every mistake is an error that names the
//! key, before anything reaches the server.

use ferry_guest::Error;
pub use ferry_guest::row::AfterAck;
use serde::Deserialize;

/// `plugin_config` as the operator writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    connection: String,
    table: String,
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

/// The most rows one batch may hold: `after_ack` names each row's key as a parameter
/// of one statement (MySQL takes at most 65,535), and a batch is one query's result.
pub const MAX_BATCH_SIZE: u32 = 10_000;

/// The checked settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The `[mysql.NAME]` the operator granted.
    pub connection: String,
    /// `table` or `database.table`: what is read, the rows' `table` header and ids.
    pub table: String,
    pub tracking_column: String,
    pub tie_breaker_column: Option<String>,
    pub primary_key: String,
    pub batch_size: u32,
    pub after_ack: Option<AfterAck>,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Config::check(Raw::deserialize(deserializer)?).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        if raw.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a [mysql.NAME] in grants.mysql"));
        }
        if raw.batch_size == 0 || raw.batch_size > MAX_BATCH_SIZE {
            return Err(Error::msg(format!(
                "plugin_config.batch_size is {}: it must be from 1 to {MAX_BATCH_SIZE}",
                raw.batch_size
            )));
        }
        let tracking_column = raw.tracking_column.unwrap_or_else(|| raw.primary_key.clone());
        let tie_breaker_column = raw.tie_breaker_column.filter(|tie| *tie != tracking_column);
        Ok(Config {
            connection: raw.connection,
            table: raw.table,
            tracking_column,
            tie_breaker_column,
            primary_key: raw.primary_key,
            batch_size: raw.batch_size,
            after_ack: raw.after_ack,
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
    fn defaults_read_a_table_by_its_id_and_every_key_is_read() {
        let config = parse(r#"{"connection": "main", "table": "events"}"#).unwrap();
        assert_eq!((config.tracking_column.as_str(), config.primary_key.as_str()), ("id", "id"));
        assert_eq!((config.tie_breaker_column, config.batch_size, config.after_ack), (None, 100, None));
        let every = parse(
            r#"{"connection": "main", "table": "shop.events", "tracking_column": "created_at",
                "tie_breaker_column": "event_id", "primary_key": "event_id", "batch_size": 7,
                "after_ack": {"mark_column": "processed"}}"#,
        )
        .unwrap();
        assert_eq!(every.tracking_column, "created_at");
        assert_eq!(every.tie_breaker_column.as_deref(), Some("event_id"));
        assert_eq!((every.primary_key.as_str(), every.batch_size), ("event_id", 7));
        assert_eq!(every.after_ack, Some(AfterAck::Mark("processed".into())));
        let delete = parse(r#"{"connection": "c", "table": "t", "after_ack": {"delete": true}}"#).unwrap();
        assert_eq!(delete.after_ack, Some(AfterAck::Delete));
        let same = parse(r#"{"connection": "c", "table": "t", "tie_breaker_column": "id"}"#).unwrap();
        assert_eq!(same.tie_breaker_column, None, "a tie-breaker equal to the tracking column is dropped");
    }

    #[test]
    fn mistakes_name_the_key() {
        let cases = [
            (r#"{"table": "t"}"#, "connection"),
            (r#"{"connection": "c"}"#, "table"),
            (r#"{"connection": "", "table": "t"}"#, "plugin_config.connection"),
            (r#"{"connection": "c", "table": "t", "batch_size": 0}"#, "plugin_config.batch_size"),
            (r#"{"connection": "c", "table": "t", "batch_size": 10001}"#, "plugin_config.batch_size"),
            (r#"{"connection": "c", "table": "t", "after_ack": {}}"#, "plugin_config.after_ack says nothing"),
            (r#"{"connection": "c", "table": "t", "after_ack": {"delete": true, "mark_column": "m"}}"#, "choose one"),
            (r#"{"connection": "c", "table": "t", "after_ack": {"truncate": true}}"#, "truncate"),
            (r#"{"connection": "c", "table": "t", "query": "SELECT 1"}"#, "query"),
        ];
        for (json, expected) in cases {
            let error = parse(json).unwrap_err();
            assert!(error.contains(expected), "{json}: {error}");
        }
    }
}
