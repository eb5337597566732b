//! The connector's `plugin_config`, checked: every mistake is an error that names
//! the key.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_guest::Error;
use serde::Deserialize;
use serde_json::Value;

use crate::path::Path;

/// `plugin_config` as the operator writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    url: String,
    method: Option<String>,
    body: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    timeout: Option<String>,
    records: Option<Path>,
    cursor: Option<Cursoring>,
    max_records: Option<usize>,
}

/// How the endpoint is walked, and so what the cursor holds.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Cursoring {
    /// Numbered pages of `size` records: `?page=N`.
    Page {
        #[serde(default = "page_param")]
        param: String,
        #[serde(default = "first_page")]
        start: u64,
        size: usize,
        /// Sent as the page size, when set (`?per_page=size`).
        size_param: Option<String>,
    },
    /// Records by position: `?offset=N&limit=L`.
    Offset {
        #[serde(default = "offset_param")]
        param: String,
        #[serde(default = "limit_param")]
        limit_param: String,
        #[serde(default = "limit")]
        limit: usize,
    },
    /// Records changed since a value of theirs: `?since=V`, V the greatest `field`
    /// delivered; records with that very value are told apart by `tie_breaker`.
    Since {
        #[serde(default = "since_param")]
        param: String,
        field: Path,
        tie_breaker: Option<Path>,
        initial: Option<Value>,
    },
    /// A snapshot, delivered whole whenever its `ETag` changes.
    Etag {},
    /// Each answer names the next (`field`): a URL or a path, or a token sent as
    /// `param`.
    Next { field: Path, param: Option<String> },
}

fn page_param() -> String {
    "page".into()
}
fn first_page() -> u64 {
    1
}
fn offset_param() -> String {
    "offset".into()
}
fn limit_param() -> String {
    "limit".into()
}
fn limit() -> usize {
    100
}
fn since_param() -> String {
    "since".into()
}

/// The checked settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub url: String,
    pub method: String,
    pub body: Option<String>,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    /// Where the records array is in an answer.
    pub records: Path,
    pub cursoring: Cursoring,
    /// An answer with more records is an error (the endpoint's page size is wrong).
    pub max_records: usize,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        Config::check(raw).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        ferry_guest::http::split_url(&raw.url).map_err(|e| Error::msg(format!("plugin_config.url: {e}")))?;
        let method = raw.method.unwrap_or_else(|| "GET".into()).to_ascii_uppercase();
        if !matches!(method.as_str(), "GET" | "POST") {
            return Err(Error::msg(format!("plugin_config.method {method:?}: a source reads with GET or POST")));
        }
        if raw.body.is_some() && method == "GET" {
            return Err(Error::msg("plugin_config.body: a GET carries no body; set method = \"POST\""));
        }
        let timeout = raw.timeout.unwrap_or_else(|| "30s".into());
        let timeout = humantime::parse_duration(&timeout)
            .map_err(|e| Error::msg(format!("plugin_config.timeout {timeout:?}: {e}")))?;
        let max_records = raw.max_records.unwrap_or(10_000);
        if !(1..=100_000).contains(&max_records) {
            return Err(Error::msg(format!("plugin_config.max_records {max_records}: give 1 to 100000")));
        }
        let cursoring = raw.cursor.ok_or_else(|| {
            Error::msg(
                "plugin_config.cursor: say how the endpoint is walked, `{ kind = \"page\" | \"offset\" | \"since\" \
                 | \"etag\" | \"next\", ... }` (see the README)",
            )
        })?;
        match &cursoring {
            Cursoring::Page { size: 0, .. } => {
                return Err(Error::msg("plugin_config.cursor.size: the endpoint's page size, at least 1"));
            }
            Cursoring::Offset { limit: 0, .. } => {
                return Err(Error::msg("plugin_config.cursor.limit: records per request, at least 1"));
            }
            Cursoring::Since { initial: Some(initial), .. } if !(initial.is_string() || initial.is_number()) => {
                return Err(Error::msg(format!(
                    "plugin_config.cursor.initial {initial}: a string or a number, like the field it starts"
                )));
            }
            _ => {}
        }
        let mut headers: Vec<(String, String)> = raw.headers.into_iter().collect();
        if raw.body.is_some() && !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("accept")) {
            headers.push(("Accept".into(), "application/json".into()));
        }
        Ok(Config {
            url: raw.url,
            method,
            body: raw.body,
            headers,
            timeout,
            records: raw.records.unwrap_or_else(|| Path::parse("$").expect("`$` is a path")),
            cursoring,
            max_records,
        })
    }
}
