//! The connector's `plugin_config`, with the keys and defaults of Iggy's ClickHouse
//! sink, checked: every mistake, and every setting ferry cannot honour, is an error
//! that names the key.

use std::time::Duration;

use ferry_guest::Error;
use serde::Deserialize;

/// `plugin_config` as the operator writes it (Iggy's keys, and ferry's `id_column`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    url: String,
    table: String,
    database: Option<String>,
    username: Option<String>,
    password: Option<String>,
    insert_format: Option<String>,
    string_format: Option<String>,
    timeout_seconds: Option<u64>,
    max_retries: Option<u32>,
    retry_delay: Option<u64>,
    verbose_logging: Option<bool>,
    /// Ferry's: a column that gets each message's stable id.
    id_column: Option<String>,
}

/// The ClickHouse input format of the rows sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    JsonEachRow,
    Csv,
    Tsv,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::JsonEachRow => "JSONEachRow",
            Format::Csv => "CSV",
            Format::Tsv => "TabSeparated",
        }
    }
}

/// The checked settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's HTTP interface, without a trailing `/`.
    pub url: String,
    pub database: String,
    pub table: String,
    pub username: String,
    pub password: String,
    pub format: Format,
    /// Whether the payloads are rows as they are (`insert_format = "string"`), or
    /// JSON objects (`json_each_row`), into which `id_column` can go.
    pub passthrough: bool,
    pub timeout: Duration,
    pub max_retries: u32,
    pub retry_delay: Duration,
    pub verbose: bool,
    pub id_column: Option<String>,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        Config::check(raw).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

/// A name ClickHouse takes without quoting, as Iggy's sink means to require: the
/// value goes into the statement.
fn identifier(key: &str, value: &str) -> Result<(), Error> {
    let mut chars = value.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(Error::msg(format!(
            "plugin_config.{key} {value:?}: a ClickHouse name of letters, digits and `_`, not starting with a digit"
        )));
    }
    Ok(())
}

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        ferry_guest::http::split_url(&raw.url).map_err(|e| Error::msg(format!("plugin_config.url: {e}")))?;
        let database = raw.database.unwrap_or_else(|| "default".into());
        identifier("database", &database)?;
        identifier("table", &raw.table)?;
        if let Some(column) = &raw.id_column {
            identifier("id_column", column)?;
        }
        let insert_format = raw.insert_format.unwrap_or_else(|| "json_each_row".into());
        let (format, passthrough) = match insert_format.as_str() {
            "json_each_row" => (Format::JsonEachRow, false),
            "string" => {
                let format = match raw.string_format.as_deref().unwrap_or("json_each_row") {
                    "json_each_row" => Format::JsonEachRow,
                    "csv" => Format::Csv,
                    "tsv" => Format::Tsv,
                    other => {
                        return Err(Error::msg(format!(
                            "plugin_config.string_format {other:?}: one of json_each_row, csv, tsv"
                        )));
                    }
                };
                (format, true)
            }
            "row_binary" => {
                return Err(Error::msg(
                    "plugin_config.insert_format \"row_binary\": ferry's ClickHouse sink writes json_each_row or \
                     string (RowBinaryWithDefaults needs ClickHouse 23.7 and a schema read at start)",
                ));
            }
            other => {
                return Err(Error::msg(format!("plugin_config.insert_format {other:?}: one of json_each_row, string")));
            }
        };
        if raw.string_format.is_some() && !passthrough {
            return Err(Error::msg("plugin_config.string_format: only read with insert_format = \"string\""));
        }
        if raw.id_column.is_some() && passthrough {
            return Err(Error::msg(
                "plugin_config.id_column: rows passed through as they are (insert_format = \"string\") get no \
                 column added; use json_each_row",
            ));
        }
        let timeout = raw.timeout_seconds.unwrap_or(30);
        if timeout == 0 {
            return Err(Error::msg("plugin_config.timeout_seconds: at least 1"));
        }
        Ok(Config {
            url: raw.url.trim_end_matches('/').to_string(),
            database,
            table: raw.table,
            username: raw.username.unwrap_or_else(|| "default".into()),
            password: raw.password.unwrap_or_default(),
            format,
            passthrough,
            timeout: Duration::from_secs(timeout),
            max_retries: raw.max_retries.unwrap_or(3),
            retry_delay: Duration::from_secs(raw.retry_delay.unwrap_or(1)),
            verbose: raw.verbose_logging.unwrap_or(false),
            id_column: raw.id_column,
        })
    }
}
