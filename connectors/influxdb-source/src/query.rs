//! One page of rows: the query with its placeholders filled in, sent to `/query`
//! (`epoch=ns`, so times are integers) and tried again within the poll on 429, 5xx
//! or no answer; the answer's rows, in the order the server gave them. A 1.x server
//! answers a query it cannot run with 200 and an `error`: that, refused credentials
//! and any other refusal are errors naming the query and the server's words.

use std::time::Duration;

use ferry_guest::http::{HttpError, Request, Response};
use serde_json::{Map, Value};

use crate::config::Config;

/// How requests go out and time passes: `wasi:http` and the guest's clock in the
/// component, fakes in the tests.
pub trait Transport {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError>;
    fn sleep(&mut self, duration: Duration);
}

/// The host's `wasi:http` and clock.
#[derive(Default)]
pub struct Wasi;

impl Transport for Wasi {
    fn send(&mut self, request: &Request) -> Result<Response, HttpError> {
        ferry_guest::http::send(request)
    }

    fn sleep(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// A row: its measurement, its time (ns) and its columns (tags and fields).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub measurement: String,
    pub time: i64,
    pub columns: Map<String, Value>,
}

/// The query for the page after `cursor` (ns), skipping `offset` rows at it.
pub fn text(config: &Config, cursor: i64, offset: u64) -> String {
    config
        .query
        .replace("$cursor", &cursor.to_string())
        .replace("$limit", &config.batch_size.to_string())
        .replace("$offset", &offset.to_string())
}

/// Run `query`: its rows, or why not.
pub fn run(config: &Config, transport: &mut dyn Transport, query: &str) -> Result<Vec<Row>, String> {
    let url = format!("{}/query?db={}&epoch=ns&q={}", config.url, escape(&config.db), escape(query));
    let mut request = Request::new("GET", url);
    if let Some(authorization) = &config.authorization {
        request.headers.push(("Authorization".into(), authorization.clone()));
    }
    request.timeout = Some(config.timeout);
    let mut delay = config.retry_delay;
    let mut attempt = 0;
    loop {
        let problem = match transport.send(&request) {
            Ok(response) if response.status == 200 => return rows(&response.body, query),
            Ok(response) => {
                let said = answer(&response);
                match response.status {
                    429 | 500..=599 => said,
                    401 | 403 => {
                        return Err(format!(
                            "InfluxDB at {} refused the credentials ({said}): check username and password (or token = \
                             \"username:password\") and the user's READ privilege on {:?}",
                            config.url, config.db
                        ));
                    }
                    _ => return Err(format!("InfluxDB at {} refused the query {query:?}: {said}", config.url)),
                }
            }
            Err(error @ (HttpError::Invalid(_) | HttpError::Denied(_))) => return Err(error.to_string()),
            Err(error @ HttpError::Failed(_)) => format!("InfluxDB at {}: {error}", config.url),
        };
        if attempt >= config.max_retries {
            return Err(format!("{problem} (after {} attempt(s))", attempt + 1));
        }
        attempt += 1;
        ferry_guest::warn!(
            "influxdb source: {problem}; trying again in {delay:?} ({attempt} of {})",
            config.max_retries
        );
        transport.sleep(delay);
        delay = delay.saturating_mul(2).min(config.retry_max_delay);
    }
}

/// The rows of an answer: `{"results": [{"series": [{"name", "columns", "values"}]}]}`.
fn rows(body: &[u8], query: &str) -> Result<Vec<Row>, String> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer to {query:?} is not JSON: {e}"))?;
    let result = &answer["results"][0];
    if let Some(error) = answer.get("error").or_else(|| result.get("error")) {
        return Err(format!("InfluxDB refused the query {query:?}: {}", error.as_str().unwrap_or_default()));
    }
    let mut rows = Vec::new();
    for series in result["series"].as_array().into_iter().flatten() {
        let measurement = series["name"].as_str().unwrap_or_default().to_string();
        let columns: Vec<&str> = series["columns"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let time_at = columns
            .iter()
            .position(|c| *c == "time")
            .ok_or_else(|| format!("the answer to {query:?} has no time column"))?;
        for values in series["values"].as_array().into_iter().flatten() {
            let values = values.as_array().ok_or_else(|| format!("a row of the answer to {query:?} is not a list"))?;
            let time = values.get(time_at).and_then(Value::as_i64).ok_or_else(|| {
                format!("a row of the answer to {query:?} has no integer time (is epoch=ns ignored?)")
            })?;
            let columns = columns.iter().zip(values).map(|(c, v)| (c.to_string(), v.clone())).collect();
            rows.push(Row { measurement: measurement.clone(), time, columns });
        }
    }
    Ok(rows)
}

/// The status and the server's error, for a log line.
fn answer(response: &Response) -> String {
    let body = String::from_utf8_lossy(&response.body);
    let error = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.trim().to_string());
    let error: String = error.chars().take(500).collect();
    if error.is_empty() { format!("HTTP {}", response.status) } else { format!("HTTP {}: {error}", response.status) }
}

/// `text` percent-encoded for a URL's query.
fn escape(text: &str) -> String {
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
