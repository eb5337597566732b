//! The connector's `plugin_config`: Iggy's InfluxDB sink keys (its v2 and v3 forms)
//! where a 1.x server can honour them, and Ferry's own for mapping JSON records to
//! points. Every mistake, and every setting a 1.x server cannot honour, is an error
//! naming the key and why.

use std::time::Duration;

use ferry_guest::Error;
use serde::Deserialize;

/// `plugin_config` as the operator writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    url: String,
    /// Iggy's `v2` (org, bucket, token) or `v3` (db, token); Ferry's `v1` (db,
    /// username, password). All of them write to the 1.x `/write`.
    version: Option<String>,
    db: Option<String>,
    bucket: Option<String>,
    org: Option<String>,
    retention_policy: Option<String>,
    token: Option<String>,
    username: Option<String>,
    password: Option<String>,
    measurement: Option<String>,
    measurement_field: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    fields: Option<Vec<String>>,
    timestamp_field: Option<String>,
    timestamp_from: Option<TimestampFrom>,
    precision: Option<String>,
    batch_size: Option<u32>,
    payload_format: Option<String>,
    include_metadata: Option<bool>,
    include_checksum: Option<bool>,
    include_origin_timestamp: Option<bool>,
    include_stream_tag: Option<bool>,
    include_topic_tag: Option<bool>,
    include_partition_tag: Option<bool>,
    include_offset_tag: Option<bool>,
    verbose_logging: Option<bool>,
    timeout: Option<String>,
    max_retries: Option<u32>,
    retry_delay: Option<String>,
    retry_max_delay: Option<String>,
    // Accepted for Iggy's configs; the host does their work (see `check`).
    max_open_retries: Option<u32>,
    open_retry_max_delay: Option<String>,
    circuit_breaker_threshold: Option<u32>,
    circuit_breaker_cool_down: Option<String>,
}

/// What a point's fields are made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadFormat {
    /// Iggy's: the payload, which must be JSON, as the string field `payload_json`.
    Json,
    /// Iggy's: the payload, which must be UTF-8, as the string field `payload_text`.
    Text,
    /// Iggy's: the payload in base64 as the string field `payload_base64`.
    Base64,
    /// Ferry's: the JSON object's keys as typed fields (these keys, or every key not
    /// used as a tag, the measurement or the timestamp when empty).
    Fields(Vec<String>),
}

/// Where a point's timestamp comes from when no `timestamp_field` is given.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TimestampFrom {
    /// When ferry (or Iggy) stored the message, as Iggy's sink does.
    Message,
    /// The message's origin timestamp; a message without one is dead-lettered.
    OriginTimestamp,
}

/// A point's timestamp precision, as `/write` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
}

impl Precision {
    /// The `precision` query parameter of the 1.x `/write`.
    pub fn query(self) -> &'static str {
        match self {
            Precision::Nanoseconds => "n",
            Precision::Microseconds => "u",
            Precision::Milliseconds => "ms",
            Precision::Seconds => "s",
        }
    }

    /// `micros` (a message's timestamps) in this precision.
    pub fn of_micros(self, micros: u64) -> u64 {
        match self {
            Precision::Nanoseconds => micros.saturating_mul(1_000),
            Precision::Microseconds => micros,
            Precision::Milliseconds => micros / 1_000,
            Precision::Seconds => micros / 1_000_000,
        }
    }
}

/// The checked settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// `{url}/write?db=...&precision=...`.
    pub write_url: String,
    /// The server, for log lines (no credentials).
    pub url: String,
    pub db: String,
    /// `Authorization: Basic ...`, when credentials are given.
    pub authorization: Option<String>,
    pub measurement: String,
    pub measurement_field: Option<String>,
    pub tags: Vec<String>,
    pub payload_format: PayloadFormat,
    pub timestamp_field: Option<String>,
    pub timestamp_from: TimestampFrom,
    pub precision: Precision,
    pub batch_size: usize,
    pub include_metadata: bool,
    pub include_checksum: bool,
    pub include_origin_timestamp: bool,
    pub stream_tag: bool,
    pub topic_tag: bool,
    pub partition_tag: bool,
    pub offset_tag: bool,
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

/// `text` percent-encoded for a URL's query.
pub fn query_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The metadata tags Iggy's sink writes, which `tags` may not name again.
const METADATA_TAGS: [&str; 4] = ["stream", "topic", "partition", "offset"];

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        ferry_guest::http::split_url(&raw.url).map_err(|e| refuse(format!("plugin_config.url: {e}")))?;
        let version = raw.version.as_deref().unwrap_or("v1");
        if !matches!(version, "v1" | "v2" | "v3") {
            return Err(refuse(format!(
                "plugin_config.version {version:?}: give \"v1\" (the 1.x keys db, username, password), \"v2\" (org, \
                 bucket, token) or \"v3\" (db, token); every one writes to the 1.x /write"
            )));
        }
        let (db, bucket_rp) = match (&raw.db, &raw.bucket) {
            (Some(_), Some(_)) => {
                return Err(refuse(
                    "plugin_config.db and plugin_config.bucket both name the database: give one (bucket is v2's \
                     \"database/retention_policy\")",
                ));
            }
            (Some(db), None) => (db.clone(), None),
            // A 1.x server maps a v2 bucket to "database/retention_policy" (DBRP).
            (None, Some(bucket)) => match bucket.split_once('/') {
                Some((db, rp)) => (db.to_string(), Some(rp.to_string()).filter(|rp| !rp.is_empty())),
                None => (bucket.clone(), None),
            },
            (None, None) => {
                return Err(refuse("plugin_config.db (or v2's bucket): the database to write to is missing"));
            }
        };
        if db.is_empty() {
            return Err(refuse("plugin_config.db: the database name is empty"));
        }
        let retention_policy = match (bucket_rp, raw.retention_policy) {
            (Some(_), Some(_)) => {
                return Err(refuse(
                    "plugin_config.retention_policy: the bucket names a retention policy already (\"db/rp\"); give one",
                ));
            }
            (from_bucket, given) => from_bucket.or(given),
        };
        // `org` is accepted: a 1.x server is one organisation (its own v2-compatible
        // API ignores org too).
        let _ = raw.org;
        let authorization = credentials(raw.token, raw.username, raw.password)?
            .map(|(user, password)| format!("Basic {}", base64_encode(format!("{user}:{password}").as_bytes())));
        let precision = match raw.precision.as_deref().unwrap_or("us") {
            "ns" | "n" => Precision::Nanoseconds,
            "us" | "u" => Precision::Microseconds,
            "ms" => Precision::Milliseconds,
            "s" => Precision::Seconds,
            other => {
                return Err(refuse(format!("plugin_config.precision {other:?}: give \"ns\", \"us\", \"ms\" or \"s\"")));
            }
        };
        let payload_format = match (raw.payload_format.as_deref().unwrap_or("json"), raw.fields) {
            ("json", None) => PayloadFormat::Json,
            ("text", None) => PayloadFormat::Text,
            ("base64", None) => PayloadFormat::Base64,
            ("fields", fields) => PayloadFormat::Fields(fields.unwrap_or_default()),
            ("json" | "text" | "base64", Some(_)) => {
                return Err(refuse(
                    "plugin_config.fields: the fields come from the record's keys only with payload_format = \"fields\"",
                ));
            }
            (other, _) => {
                return Err(refuse(format!(
                    "plugin_config.payload_format {other:?}: give \"json\", \"text\", \"base64\" (Iggy's: the payload \
                     as one string field) or \"fields\" (the record's keys as fields)"
                )));
            }
        };
        let include_metadata = raw.include_metadata.unwrap_or(true);
        let stream_tag = include_metadata && raw.include_stream_tag.unwrap_or(true);
        let topic_tag = include_metadata && raw.include_topic_tag.unwrap_or(true);
        let partition_tag = include_metadata && raw.include_partition_tag.unwrap_or(true);
        let offset_tag = raw.include_offset_tag.unwrap_or(true);
        let record_keys = raw.measurement_field.is_some()
            || !raw.tags.is_empty()
            || raw.timestamp_field.is_some()
            || matches!(payload_format, PayloadFormat::Fields(_));
        if record_keys && matches!(payload_format, PayloadFormat::Text | PayloadFormat::Base64) {
            return Err(refuse(
                "plugin_config.payload_format: measurement_field, tags and timestamp_field read a JSON record; give \
                 payload_format \"json\" or \"fields\"",
            ));
        }
        for (tag, on) in METADATA_TAGS.iter().zip([stream_tag, topic_tag, partition_tag, offset_tag]) {
            if on && raw.tags.iter().any(|t| t == tag) {
                return Err(refuse(format!(
                    "plugin_config.tags names {tag:?}, a tag the sink writes already (include_{tag}_tag = false to use \
                     the record's)"
                )));
            }
        }
        if let PayloadFormat::Fields(fields) = &payload_format {
            let used = raw.tags.iter().chain(&raw.measurement_field).chain(&raw.timestamp_field);
            if let Some(both) = fields.iter().find(|field| used.clone().any(|u| u == *field)) {
                return Err(refuse(format!(
                    "plugin_config.fields names {both:?}, which is a tag, the measurement_field or the timestamp_field"
                )));
            }
        }
        let measurement = raw.measurement.unwrap_or_else(|| "iggy_messages".into());
        if measurement.is_empty() {
            return Err(refuse("plugin_config.measurement is empty"));
        }
        if raw.timestamp_field.is_some() && raw.timestamp_from.is_some() {
            return Err(refuse(
                "plugin_config.timestamp_from: the timestamp comes from timestamp_field already; give one of them",
            ));
        }
        let batch_size = raw.batch_size.unwrap_or(500);
        if batch_size == 0 {
            return Err(refuse("plugin_config.batch_size is 0: give the most points a request carries"));
        }
        let retry_delay = duration("retry_delay", raw.retry_delay, "1s")?;
        let retry_max_delay = duration("retry_max_delay", raw.retry_max_delay, "5s")?;
        if retry_delay > retry_max_delay {
            return Err(refuse("plugin_config.retry_delay is longer than retry_max_delay"));
        }
        // The host retries a failed open and backs off between failed batches
        // (restart_backoff, retry_backoff): what these did in Iggy's sink.
        let _ = (raw.max_open_retries, raw.circuit_breaker_threshold);
        duration("open_retry_max_delay", raw.open_retry_max_delay, "60s")?;
        duration("circuit_breaker_cool_down", raw.circuit_breaker_cool_down, "30s")?;

        let base = raw.url.trim_end_matches('/');
        let mut write_url = format!("{base}/write?db={}&precision={}", query_escape(&db), precision.query());
        if let Some(rp) = &retention_policy {
            write_url.push_str(&format!("&rp={}", query_escape(rp)));
        }
        Ok(Config {
            write_url,
            url: base.to_string(),
            db,
            authorization,
            measurement,
            measurement_field: raw.measurement_field,
            tags: raw.tags,
            payload_format,
            timestamp_field: raw.timestamp_field,
            timestamp_from: raw.timestamp_from.unwrap_or(TimestampFrom::Message),
            precision,
            batch_size: batch_size as usize,
            include_metadata,
            include_checksum: raw.include_checksum.unwrap_or(true),
            include_origin_timestamp: raw.include_origin_timestamp.unwrap_or(true),
            stream_tag,
            topic_tag,
            partition_tag,
            offset_tag,
            verbose: raw.verbose_logging.unwrap_or(false),
            timeout: duration("timeout", raw.timeout, "30s")?,
            max_retries: raw.max_retries.unwrap_or(3),
            retry_delay,
            retry_max_delay,
        })
    }
}

/// The 1.x user and password: `username` and `password`, or a `token` written
/// `"username:password"` as InfluxDB 1.8's v2-compatible API takes it.
fn credentials(
    token: Option<String>,
    username: Option<String>,
    password: Option<String>,
) -> Result<Option<(String, String)>, Error> {
    match (token, username, password) {
        (None, None, None) => Ok(None),
        (None, Some(user), Some(password)) => Ok(Some((user, password))),
        (None, Some(_), None) => Err(refuse("plugin_config.username is given without a password")),
        (None, None, Some(_)) => Err(refuse("plugin_config.password is given without a username")),
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(refuse(
            "plugin_config.token and username/password both give credentials: give one (token as \
             \"username:password\")",
        )),
        (Some(token), None, None) => match token.split_once(':') {
            Some((user, password)) if !user.is_empty() => Ok(Some((user.to_string(), password.to_string()))),
            _ => Err(refuse(
                "plugin_config.token: an InfluxDB 1.x server has no API tokens, only users; give token = \
                 \"username:password\" (as 1.8's v2-compatible API takes it) or username and password",
            )),
        },
    }
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
