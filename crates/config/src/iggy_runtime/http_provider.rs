//! Iggy's HTTP config provider: the connectors' configs fetched from a URL
//! (`[connectors] config_type = "http"`) instead of read from `config_dir`.
//!
//! As Iggy's runtime does when it starts: one `GET` of `base_url` joined with the
//! `get_active_configs` template (`/configs/active`), answered with
//! `{"sinks": {KEY: config}, "sources": {KEY: config}}`, or that at
//! `[connectors.response] data_path`; a value other than `null` at `error_path` is the
//! server's own error. Each config is the JSON form of a connector file, read by the
//! same code as a file (`connector_file.rs`), so the same keys mean the same things.
//!
//! Retried as Iggy retries (`[connectors.retry]`, on by default): a failure that may
//! pass (no connection, a timeout, 408, 429, 5xx) is tried again up to `max_attempts`
//! more times, waiting `initial_backoff` and then `backoff_multiplier` times longer
//! each time, at most `max_backoff`; an answer that will not change (401, 404, a body
//! that is not the configs) fails at once. Ferry fetches at every load of the config
//! (start, `kill -HUP`, `POST /reload`), so a reload picks up what the server says now.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_contract::guest_text;
use ferry_contract::settings::{SecretSource, duration};
use serde::Deserialize;

/// The largest answer read: the configs of every connector, not a download.
const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;

/// The most of a server's own words (an error body, its error) shown in an error.
const SHOWN_BYTES: usize = 300;

/// The URL templates Iggy's provider knows, and their defaults. Ferry asks only for
/// the active configs; the others name Iggy's ways of changing them, which ferry
/// leaves to whatever serves them.
const TEMPLATES: [(&str, &str); 14] = [
    ("get_active_configs", "/configs/active"),
    ("get_active_versions", "/configs/active/versions"),
    ("create_sink", "/sinks/{key}/configs"),
    ("get_sink_configs", "/sinks/{key}/configs"),
    ("get_sink_config", "/sinks/{key}/configs/{version}"),
    ("get_active_sink_config", "/sinks/{key}/configs/active"),
    ("set_active_sink", "/sinks/{key}/configs/active"),
    ("delete_sink_config", "/sinks/{key}/configs"),
    ("create_source", "/sources/{key}/configs"),
    ("get_source_configs", "/sources/{key}/configs"),
    ("get_source_config", "/sources/{key}/configs/{version}"),
    ("get_active_source_config", "/sources/{key}/configs/active"),
    ("set_active_source", "/sources/{key}/configs/active"),
    ("delete_source_config", "/sources/{key}/configs"),
];

/// `[connectors]` with `config_type = "http"`, as Iggy's runtime reads it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpProvider {
    base_url: String,
    #[serde(default = "ten_seconds", with = "duration")]
    timeout: Duration,
    /// Sent with every request: Iggy writes the values in the file; ferry also takes
    /// `{ env = "NAME" }` or `{ file = "PATH" }` for one that is a secret.
    #[serde(default)]
    request_headers: BTreeMap<String, HeaderValue>,
    #[serde(default)]
    url_templates: BTreeMap<String, String>,
    #[serde(default)]
    response: ResponsePaths,
    #[serde(default)]
    retry: Retry,
}

fn ten_seconds() -> Duration {
    Duration::from_secs(10)
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum HeaderValue {
    Written(String),
    Secret(SecretSource),
}

/// Where in the answer the configs are, and where the server puts its error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResponsePaths {
    data_path: Option<String>,
    error_path: Option<String>,
}

/// Iggy's retry settings, with Iggy's defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Retry {
    enabled: bool,
    max_attempts: u32,
    #[serde(with = "duration")]
    initial_backoff: Duration,
    #[serde(with = "duration")]
    max_backoff: Duration,
    backoff_multiplier: u32,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            enabled: true,
            max_attempts: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            backoff_multiplier: 2,
        }
    }
}

/// One of the active configs the server answered with, as the table a connector
/// file would hold.
pub(super) struct FetchedConfig {
    /// `<url> sinks.KEY`, for errors.
    pub origin: String,
    pub table: toml::Table,
}

impl HttpProvider {
    /// `[connectors]`, without `config_type` (and ferry's `components_dir`).
    pub(super) fn new(connectors: toml::Table) -> Result<Self, String> {
        let at = "[connectors] (config_type = \"http\")";
        let provider =
            HttpProvider::deserialize(toml::Value::Table(connectors)).map_err(|e| format!("{at}: {}", e.message()))?;
        if !(provider.base_url.starts_with("http://") || provider.base_url.starts_with("https://")) {
            return Err(format!("{at}: base_url {:?} is not an http:// or https:// URL", provider.base_url));
        }
        if let Some(name) = provider.url_templates.keys().find(|name| !TEMPLATES.iter().any(|(known, _)| known == name))
        {
            let known: Vec<&str> = TEMPLATES.iter().map(|(name, _)| *name).collect();
            return Err(format!("{at}: url_templates.{name}: not one of Iggy's templates ({})", known.join(", ")));
        }
        if provider.retry.enabled && provider.retry.backoff_multiplier == 0 {
            return Err(format!("{at}: retry.backoff_multiplier: must be 1 or more"));
        }
        if provider.timeout.is_zero() {
            return Err(format!("{at}: timeout: must be more than 0s"));
        }
        Ok(provider)
    }

    /// The URL of the active configs.
    pub(super) fn active_configs_url(&self) -> String {
        let template = self.url_templates.get("get_active_configs").map(String::as_str).unwrap_or(TEMPLATES[0].1);
        format!("{}/{}", self.base_url.trim_end_matches('/'), template.trim_start_matches('/'))
    }

    /// Fetch the active configs; `base` resolves a header's secret file.
    pub(super) fn fetch_active(&self, base: &Path) -> Result<Vec<FetchedConfig>, String> {
        let url = self.active_configs_url();
        let mut headers = Vec::new();
        for (name, value) in &self.request_headers {
            let value = match value {
                HeaderValue::Written(value) => Ok(value.clone()),
                HeaderValue::Secret(SecretSource::Env(variable)) => SecretSource::Env(variable.clone()).read(),
                HeaderValue::Secret(SecretSource::File(path)) => SecretSource::File(resolve(base, path)).read(),
            }
            .map_err(|problem| format!("[connectors.request_headers] {name}: {problem}"))?;
            headers.push((name.clone(), value));
        }
        // reqwest's blocking client runs a runtime of its own, which may not be made
        // inside another's: a reload asks from within the host's.
        let body = std::thread::scope(|scope| {
            scope
                .spawn(|| self.get_with_retries(&url, &headers))
                .join()
                .unwrap_or_else(|_| Err(format!("GET {url}: the request's thread panicked")))
        })
        .map_err(|problem| format!("[connectors] {problem}"))?;
        self.configs(&url, &body)
    }

    fn get_with_retries(&self, url: &str, headers: &[(String, String)]) -> Result<String, String> {
        let mut header_map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("[connectors.request_headers] {name:?}: not a header name"))?;
            // The value is never shown: it may be a token.
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| format!("[connectors.request_headers] {name}: its value is not a valid header value"))?;
            header_map.insert(header, value);
        }
        let client = reqwest::blocking::Client::builder()
            .timeout(self.timeout)
            .default_headers(header_map)
            .build()
            .map_err(|e| format!("GET {url}: cannot build an HTTP client: {e}"))?;
        let retries = if self.retry.enabled { self.retry.max_attempts } else { 0 };
        let mut wait = self.retry.initial_backoff;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match get(&client, url) {
                Ok(body) => return Ok(body),
                Err(Failure { problem, transient }) if transient && attempt <= retries => {
                    eprintln!(
                        "ferry: GET {url}: {problem}; trying again in {} (attempt {} of {})",
                        duration::show(wait),
                        attempt + 1,
                        retries + 1
                    );
                    std::thread::sleep(wait);
                    // Both from the config: saturate rather than overflow.
                    let next = wait.checked_mul(self.retry.backoff_multiplier).unwrap_or(self.retry.max_backoff);
                    wait = next.min(self.retry.max_backoff);
                }
                Err(Failure { problem, .. }) => {
                    let tries = if attempt == 1 { String::new() } else { format!(" (after {attempt} attempts)") };
                    return Err(format!("GET {url}: {problem}{tries}"));
                }
            }
        }
    }

    /// The answer `body` as the configs it holds.
    fn configs(&self, url: &str, body: &str) -> Result<Vec<FetchedConfig>, String> {
        let answer: serde_json::Value =
            serde_json::from_str(body).map_err(|e| format!("GET {url}: the answer is not JSON: {e}"))?;
        if let Some(path) = &self.response.error_path
            && let Some(error) = at_path(&answer, path).filter(|error| !error.is_null())
        {
            let error = error.as_str().map(str::to_string).unwrap_or_else(|| error.to_string());
            // The server's words reach a terminal: escaped and bounded.
            let error = guest_text::clean(&error, SHOWN_BYTES);
            return Err(format!("GET {url}: the server answered with an error at `{path}`: {error}"));
        }
        let data = match &self.response.data_path {
            None => &answer,
            Some(path) => at_path(&answer, path).ok_or_else(|| {
                format!("GET {url}: the answer has nothing at data_path `{path}` (it holds {})", outline(&answer))
            })?,
        };
        let serde_json::Value::Object(data) = data else {
            return Err(format!(
                "GET {url}: expected {{\"sinks\": {{...}}, \"sources\": {{...}}}}, found {}",
                outline(data)
            ));
        };
        let mut configs = Vec::new();
        for (role, section) in data {
            let role = match role.as_str() {
                "sinks" => "sink",
                "sources" => "source",
                other => {
                    return Err(format!("GET {url}: unknown key `{other}` in the answer (expected sinks, sources)"));
                }
            };
            let serde_json::Value::Object(section) = section else {
                return Err(format!(
                    "GET {url}: `{role}s` must map each key to its config, found {}",
                    outline(section)
                ));
            };
            for (key, config) in section {
                let origin = format!("{url} {role}s.{key}");
                let toml::Value::Table(mut table) = toml_value(config).map_err(|p| format!("{origin}: {p}"))? else {
                    return Err(format!("{origin}: expected the connector's config, found {}", outline(config)));
                };
                table.insert("type".into(), role.into());
                match table.get("key") {
                    None => {
                        table.insert("key".into(), key.clone().into());
                    }
                    Some(toml::Value::String(written)) if written == key => {}
                    Some(other) => {
                        return Err(format!("{origin}: its key is {other}, not the `{key}` it is listed under"));
                    }
                }
                configs.push(FetchedConfig { origin, table });
            }
        }
        Ok(configs)
    }
}

/// Why one request failed, and whether another may succeed.
struct Failure {
    problem: String,
    transient: bool,
}

fn get(client: &reqwest::blocking::Client, url: &str) -> Result<String, Failure> {
    let response = client.get(url).send().map_err(|e| Failure {
        transient: e.is_connect() || e.is_timeout() || e.is_request(),
        problem: described(e.without_url()),
    })?;
    let status = response.status();
    let mut body = Vec::new();
    response
        .take(MAX_ANSWER_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| Failure { problem: format!("reading the answer: {e}"), transient: true })?;
    if body.len() as u64 > MAX_ANSWER_BYTES {
        return Err(Failure {
            problem: format!("the answer is larger than {} MiB", MAX_ANSWER_BYTES >> 20),
            transient: false,
        });
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        // The server's words reach a terminal: escaped and bounded.
        let shown = guest_text::clean(text.trim(), SHOWN_BYTES);
        return Err(Failure {
            problem: format!("HTTP {status}: {shown}"),
            transient: status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429,
        });
    }
    Ok(text)
}

/// reqwest's message with its causes (the caller names the URL once).
fn described(error: reqwest::Error) -> String {
    let mut problem = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        problem.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    problem
}

/// The value at a dot path: object keys, and array indexes where a part is a number.
fn at_path<'a>(value: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    path.split('.').try_fold(value, |value, part| match value {
        serde_json::Value::Object(map) => map.get(part),
        serde_json::Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// What a JSON value is, in a few words, for an error.
fn outline(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => {
            let keys: Vec<&str> = map.keys().map(String::as_str).take(6).collect();
            let more = if map.len() > 6 { ", ..." } else { "" };
            format!("an object with keys {{{}{more}}}", guest_text::clean(&keys.join(", "), SHOWN_BYTES))
        }
        serde_json::Value::Array(items) => format!("an array of {} items", items.len()),
        serde_json::Value::String(_) => "a string".into(),
        serde_json::Value::Number(_) => "a number".into(),
        serde_json::Value::Bool(_) => "a boolean".into(),
        serde_json::Value::Null => "null".into(),
    }
}

/// A JSON value as TOML: a key whose value is `null` is as if absent (Iggy's
/// optional fields); `null` inside an array has no TOML form and is refused.
fn toml_value(value: &serde_json::Value) -> Result<toml::Value, String> {
    Ok(match value {
        serde_json::Value::Null => return Err("null where a value is needed".into()),
        serde_json::Value::Bool(b) => toml::Value::Boolean(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => toml::Value::Integer(i),
            (None, Some(f)) => toml::Value::Float(f),
            (None, None) => return Err(format!("the number {n} is too large")),
        },
        serde_json::Value::String(s) => toml::Value::String(s.clone()),
        serde_json::Value::Array(items) => toml::Value::Array(items.iter().map(toml_value).collect::<Result<_, _>>()?),
        serde_json::Value::Object(map) => {
            let mut table = toml::Table::new();
            for (key, value) in map.iter().filter(|(_, value)| !value.is_null()) {
                table.insert(key.clone(), toml_value(value).map_err(|p| format!("{key}: {p}"))?);
            }
            toml::Value::Table(table)
        }
    })
}

fn resolve(base: &Path, path: &Path) -> PathBuf {
    if path.is_relative() { base.join(path) } else { path.to_path_buf() }
}

#[cfg(test)]
mod tests;
