//! The connector's `plugin_config`, with the keys and defaults of Iggy's HTTP sink,
//! checked: every mistake, and every setting ferry cannot honour, is an error that
//! names the key.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_guest::Error;
use serde::Deserialize;

/// `plugin_config` as the operator writes it (Iggy's keys).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    url: String,
    method: Option<String>,
    timeout: Option<String>,
    max_payload_size_bytes: Option<u64>,
    batch_mode: Option<BatchMode>,
    include_metadata: Option<bool>,
    include_checksum: Option<bool>,
    include_origin_timestamp: Option<bool>,
    health_check_enabled: Option<bool>,
    health_check_method: Option<String>,
    max_retries: Option<u32>,
    retry_delay: Option<String>,
    retry_backoff_multiplier: Option<u32>,
    max_retry_delay: Option<String>,
    success_status_codes: Option<Vec<u16>>,
    tls_danger_accept_invalid_certs: Option<bool>,
    max_connections: Option<u32>,
    verbose_logging: Option<bool>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Ferry's: an `Idempotency-Key` header from the messages' stable ids.
    idempotency_key: Option<bool>,
}

/// How messages become requests.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BatchMode {
    /// One request per message, its JSON (or envelope) the body.
    Individual,
    /// One request per batch: a JSON value a line.
    Ndjson,
    /// One request per batch: a JSON array.
    JsonArray,
    /// One request per message, its payload's bytes the body, as they are.
    Raw,
}

impl BatchMode {
    pub fn content_type(self) -> &'static str {
        match self {
            BatchMode::Individual | BatchMode::JsonArray => "application/json",
            BatchMode::Ndjson => "application/x-ndjson",
            BatchMode::Raw => "application/octet-stream",
        }
    }
}

/// The checked settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub url: String,
    pub method: String,
    pub timeout: Duration,
    /// 0: no bound.
    pub max_payload_size_bytes: u64,
    pub batch_mode: BatchMode,
    pub include_metadata: bool,
    pub include_checksum: bool,
    pub include_origin_timestamp: bool,
    /// The method of a request sent at open, when set.
    pub health_check: Option<String>,
    pub max_retries: u32,
    pub retry_delay: Duration,
    pub retry_backoff_multiplier: u32,
    pub max_retry_delay: Duration,
    pub success_status_codes: Vec<u16>,
    pub verbose: bool,
    pub headers: Vec<(String, String)>,
    pub idempotency_key: bool,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        Config::check(raw).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

fn duration(key: &str, value: Option<String>, default: &str) -> Result<Duration, Error> {
    let text = value.unwrap_or_else(|| default.to_string());
    humantime::parse_duration(&text).map_err(|e| Error::msg(format!("plugin_config.{key} {text:?}: {e}")))
}

fn method(key: &str, value: Option<String>) -> Result<String, Error> {
    let method = value.unwrap_or_else(|| "POST".into()).to_ascii_uppercase();
    if !METHODS.contains(&method.as_str()) {
        return Err(Error::msg(format!("plugin_config.{key} {method:?} is none of {}", METHODS.join(", "))));
    }
    Ok(method)
}

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        ferry_guest::http::split_url(&raw.url).map_err(|e| Error::msg(format!("plugin_config.url: {e}")))?;
        if raw.tls_danger_accept_invalid_certs == Some(true) {
            return Err(Error::msg(
                "plugin_config.tls_danger_accept_invalid_certs: ferry's host always verifies certificates; give the \
                 server a certificate the host trusts",
            ));
        }
        let batch_mode = raw.batch_mode.unwrap_or(BatchMode::Individual);
        let success_status_codes = raw.success_status_codes.unwrap_or_else(|| vec![200, 201, 202, 204]);
        if success_status_codes.is_empty() || success_status_codes.iter().any(|code| !(100..600).contains(code)) {
            return Err(Error::msg(format!(
                "plugin_config.success_status_codes {success_status_codes:?}: give HTTP status codes (100 to 599)"
            )));
        }
        let retry_delay = duration("retry_delay", raw.retry_delay, "1s")?;
        let max_retry_delay = duration("max_retry_delay", raw.max_retry_delay, "30s")?;
        if retry_delay > max_retry_delay {
            return Err(Error::msg("plugin_config.retry_delay is longer than max_retry_delay"));
        }
        let mut headers: Vec<(String, String)> = raw.headers.into_iter().collect();
        if let Some((name, _)) = headers.iter().find(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
            return Err(Error::msg(format!(
                "plugin_config.headers.{name}: the content type follows batch_mode ({})",
                batch_mode.content_type()
            )));
        }
        headers.push(("Content-Type".into(), batch_mode.content_type().into()));
        let _ = raw.max_connections; // The host keeps the connections; one request at a time.
        Ok(Config {
            url: raw.url,
            method: method("method", raw.method)?,
            timeout: duration("timeout", raw.timeout, "30s")?,
            max_payload_size_bytes: raw.max_payload_size_bytes.unwrap_or(10 * 1024 * 1024),
            batch_mode,
            include_metadata: raw.include_metadata.unwrap_or(true),
            include_checksum: raw.include_checksum.unwrap_or(false),
            include_origin_timestamp: raw.include_origin_timestamp.unwrap_or(false),
            health_check: match raw.health_check_enabled {
                Some(true) => Some(method("health_check_method", raw.health_check_method.or(Some("HEAD".into())))?),
                _ => None,
            },
            max_retries: raw.max_retries.unwrap_or(3),
            retry_delay,
            retry_backoff_multiplier: raw.retry_backoff_multiplier.unwrap_or(2).max(1),
            max_retry_delay,
            success_status_codes,
            verbose: raw.verbose_logging.unwrap_or(false),
            headers,
            idempotency_key: raw.idempotency_key.unwrap_or(true),
        })
    }
}
