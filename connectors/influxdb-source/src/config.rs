//! The connector's `plugin_config`: Iggy's InfluxDB source keys where a 1.x server
//! can honour them (its query in InfluxQL instead of Flux or SQL), checked: every
//! mistake, and every setting 1.x cannot honour, is an error naming the key and why.

use std::time::Duration;

use ferry_guest::Error;
use serde::Deserialize;

use crate::time::parse_rfc3339;

/// `plugin_config` as the operator writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    url: String,
    version: Option<String>,
    db: Option<String>,
    bucket: Option<String>,
    org: Option<String>,
    token: Option<String>,
    username: Option<String>,
    password: Option<String>,
    query: String,
    batch_size: Option<u32>,
    cursor_field: Option<String>,
    initial_offset: Option<String>,
    payload_column: Option<String>,
    payload_format: Option<String>,
    include_metadata: Option<bool>,
    verbose_logging: Option<bool>,
    timeout: Option<String>,
    max_retries: Option<u32>,
    retry_delay: Option<String>,
    retry_max_delay: Option<String>,
    // Accepted for Iggy's configs; the host or the cursor does their work.
    poll_interval: Option<String>,
    stuck_batch_cap_factor: Option<u32>,
    max_open_retries: Option<u32>,
    open_retry_max_delay: Option<String>,
    circuit_breaker_threshold: Option<u32>,
    circuit_breaker_cool_down: Option<String>,
}

/// The checked settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server, for log lines (no credentials).
    pub url: String,
    pub db: String,
    pub authorization: Option<String>,
    /// InfluxQL with `$cursor`, `$limit` and `$offset`.
    pub query: String,
    pub batch_size: u32,
    /// Nanoseconds since the epoch: where a connector that never committed starts.
    pub initial_offset: i64,
    pub include_metadata: bool,
    pub verbose: bool,
    pub timeout: Duration,
    pub max_retries: u32,
    pub retry_delay: Duration,
    pub retry_max_delay: Duration,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        Config::check(raw).map_err(|e| serde::de::Error::custom(e.message()))
    }
}

fn refuse(message: impl Into<String>) -> Error {
    Error::msg(message.into())
}

fn duration(key: &str, value: Option<String>, default: &str) -> Result<Duration, Error> {
    let text = value.unwrap_or_else(|| default.to_string());
    humantime::parse_duration(&text).map_err(|e| refuse(format!("plugin_config.{key} {text:?}: {e}")))
}

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        ferry_guest::http::split_url(&raw.url).map_err(|e| refuse(format!("plugin_config.url: {e}")))?;
        let version = raw.version.as_deref().unwrap_or("v1");
        if !matches!(version, "v1" | "v2" | "v3") {
            return Err(refuse(format!(
                "plugin_config.version {version:?}: give \"v1\", \"v2\" or \"v3\"; every one queries the 1.x /query \
                 in InfluxQL"
            )));
        }
        let db = match (raw.db, raw.bucket) {
            (Some(_), Some(_)) => {
                return Err(refuse("plugin_config.db and plugin_config.bucket both name the database"));
            }
            (Some(db), None) => db,
            // A 1.x bucket is "database/retention_policy": the query names the policy.
            (None, Some(bucket)) => bucket.split('/').next().unwrap_or_default().to_string(),
            (None, None) => return Err(refuse("plugin_config.db (or v2's bucket): the database to read is missing")),
        };
        if db.is_empty() {
            return Err(refuse("plugin_config.db: the database name is empty"));
        }
        let _ = raw.org; // A 1.x server is one organisation.
        let authorization = credentials(raw.token, raw.username, raw.password)?;
        let query = raw.query;
        for placeholder in ["$cursor", "$limit", "$offset"] {
            if !query.contains(placeholder) {
                return Err(refuse(format!(
                    "plugin_config.query has no {placeholder}: write InfluxQL such as SELECT * FROM \"cpu\" WHERE time \
                     >= $cursor ORDER BY time ASC LIMIT $limit OFFSET $offset (the rows at the cursor's time already \
                     delivered are skipped by $offset)"
                )));
            }
        }
        let lower = query.to_ascii_lowercase();
        if lower.contains("group by") || lower.contains("slimit") {
            return Err(refuse(
                "plugin_config.query: GROUP BY and SLIMIT page each series apart, and the cursor needs one time order; \
                 select without them (tags come as columns)",
            ));
        }
        if lower.contains("order by time desc") {
            return Err(refuse("plugin_config.query: ORDER BY time DESC; the cursor moves forward: ORDER BY time ASC"));
        }
        if let Some(field) = raw.cursor_field.as_deref().filter(|f| !matches!(*f, "time" | "_time")) {
            return Err(refuse(format!(
                "plugin_config.cursor_field {field:?}: InfluxQL orders rows by time only, so the cursor is the time \
                 column"
            )));
        }
        if raw.payload_column.is_some() {
            return Err(refuse(
                "plugin_config.payload_column: ferry's InfluxDB source writes each row as one JSON object; select the \
                 columns you want in the query",
            ));
        }
        if let Some(format) = raw.payload_format.as_deref().filter(|f| *f != "json") {
            return Err(refuse(format!(
                "plugin_config.payload_format {format:?}: ferry's InfluxDB source writes each row as JSON (\"json\")"
            )));
        }
        let batch_size = raw.batch_size.unwrap_or(500);
        if batch_size == 0 || batch_size > 100_000 {
            return Err(refuse(format!("plugin_config.batch_size {batch_size}: give 1 to 100000 rows")));
        }
        let initial_offset = match raw.initial_offset {
            None => 0,
            Some(text) => {
                parse_rfc3339(&text).map_err(|why| refuse(format!("plugin_config.initial_offset {text:?}: {why}")))?
            }
        };
        let retry_delay = duration("retry_delay", raw.retry_delay, "1s")?;
        let retry_max_delay = duration("retry_max_delay", raw.retry_max_delay, "5s")?;
        if retry_delay > retry_max_delay {
            return Err(refuse("plugin_config.retry_delay is longer than retry_max_delay"));
        }
        let _ = (raw.stuck_batch_cap_factor, raw.max_open_retries, raw.circuit_breaker_threshold);
        duration("poll_interval", raw.poll_interval, "5s")?;
        duration("open_retry_max_delay", raw.open_retry_max_delay, "60s")?;
        duration("circuit_breaker_cool_down", raw.circuit_breaker_cool_down, "30s")?;
        Ok(Config {
            url: raw.url.trim_end_matches('/').to_string(),
            db,
            authorization,
            query,
            batch_size,
            initial_offset,
            include_metadata: raw.include_metadata.unwrap_or(true),
            verbose: raw.verbose_logging.unwrap_or(false),
            timeout: duration("timeout", raw.timeout, "10s")?,
            max_retries: raw.max_retries.unwrap_or(3),
            retry_delay,
            retry_max_delay,
        })
    }
}

/// `Authorization: Basic ...` for a 1.x user: `username` and `password`, or a
/// `token` written `"username:password"`.
fn credentials(
    token: Option<String>,
    username: Option<String>,
    password: Option<String>,
) -> Result<Option<String>, Error> {
    let pair = match (token, username, password) {
        (None, None, None) => return Ok(None),
        (None, Some(user), Some(password)) => (user, password),
        (None, Some(_), None) => return Err(refuse("plugin_config.username is given without a password")),
        (None, None, Some(_)) => return Err(refuse("plugin_config.password is given without a username")),
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(refuse("plugin_config.token and username/password both give credentials: give one"));
        }
        (Some(token), None, None) => match token.split_once(':') {
            Some((user, password)) if !user.is_empty() => (user.to_string(), password.to_string()),
            _ => {
                return Err(refuse(
                    "plugin_config.token: an InfluxDB 1.x server has no API tokens, only users; give token = \
                     \"username:password\" (as 1.8's v2-compatible API takes it) or username and password",
                ));
            }
        },
    };
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", pair.0, pair.1));
    Ok(Some(format!("Basic {encoded}")))
}
