//! Sending one `/write` request, as many times as it takes within one `write`, and
//! what each answer of a 1.x server means:
//!
//! * 204 (or any 2xx): the points are written.
//! * 429, 5xx, or no answer at all: tried again after `retry_delay` (doubled each
//!   time, at most `retry_max_delay`), up to `max_retries` more times, then left to
//!   the host (the batch is handed again later: nothing is dropped).
//! * 401 and 403: the credentials are refused, never the points: left to the host,
//!   the reason saying so (fixed by the operator, the batch is written).
//! * 404 "database not found": the config's fault, never the points': the same.
//! * any other answer (400 "unable to parse", 400 "partial write: field type
//!   conflict", 413 too large): the server will never take this body, and says why.

use std::time::Duration;

use ferry_guest::http::{HttpError, Request, Response};

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

/// What became of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    Written,
    /// Not now: try the whole batch again later.
    Later(String),
    /// Never, for this body: the server's answer.
    Refused(String),
}

/// Write `body` (points, a line each), trying again as the config says.
pub fn send(config: &Config, transport: &mut dyn Transport, body: Vec<u8>) -> Sent {
    // `ferry_guest::http` sends the body's Content-Length: a chunked body took the
    // server twice as long to read at 5,000 points.
    let mut request = Request::post(config.write_url.clone(), body);
    request.headers.push(("Content-Type".into(), "text/plain; charset=utf-8".into()));
    if let Some(authorization) = &config.authorization {
        request.headers.push(("Authorization".into(), authorization.clone()));
    }
    request.timeout = Some(config.timeout);
    let mut delay = config.retry_delay;
    let mut attempt = 0;
    loop {
        let problem = match transport.send(&request) {
            Ok(response) if (200..300).contains(&response.status) => return Sent::Written,
            Ok(response) => {
                let said = answer(&response);
                match response.status {
                    429 | 500..=599 => said,
                    401 | 403 => {
                        return Sent::Later(format!(
                            "InfluxDB at {} refused the credentials ({said}): check username and password (or \
                             token = \"username:password\") and the user's WRITE privilege on {:?}",
                            config.url, config.db
                        ));
                    }
                    404 => {
                        return Sent::Later(format!(
                            "InfluxDB at {} has no database {:?} ({said}): create it (CREATE DATABASE \"{}\")",
                            config.url, config.db, config.db
                        ));
                    }
                    _ => return Sent::Refused(said),
                }
            }
            Err(HttpError::Invalid(why)) => return Sent::Refused(format!("the request is invalid: {why}")),
            Err(error @ HttpError::Denied(_)) => return Sent::Later(error.to_string()),
            Err(error @ HttpError::Failed(_)) => format!("InfluxDB at {}: {error}", config.url),
        };
        if attempt >= config.max_retries {
            return Sent::Later(format!("{problem} (after {} attempt(s))", attempt + 1));
        }
        attempt += 1;
        ferry_guest::warn!("influxdb sink: {problem}; trying again in {delay:?} ({attempt} of {})", config.max_retries);
        transport.sleep(delay);
        delay = delay.saturating_mul(2).min(config.retry_max_delay);
    }
}

/// The status and the server's error (1.x answers `{"error": "..."}`), for a log
/// line or a dead letter.
fn answer(response: &Response) -> String {
    let body = String::from_utf8_lossy(&response.body);
    let error = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.trim().to_string());
    let error: String = error.chars().take(500).collect();
    if error.is_empty() { format!("HTTP {}", response.status) } else { format!("HTTP {}: {error}", response.status) }
}
