//! Sending one request, as many times as it takes within one `write`: an answer in
//! `success_status_codes` is written; 429, 5xx and no answer at all are tried again
//! after `retry_delay` (times `retry_backoff_multiplier` each time, at most
//! `max_retry_delay`, and never sooner than a `Retry-After` asks), up to
//! `max_retries` more times, and then left to the host (the batch is handed again
//! later, nothing is dropped); 401, 403 and 407 are the credentials' fault, never
//! the message's: the same; any other answer means the server will never take this
//! body, and says so.

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

/// Send `body` with `extra` headers, trying again as the config says.
pub fn send(config: &Config, transport: &mut dyn Transport, body: Vec<u8>, extra: &[(String, String)]) -> Sent {
    let mut request = Request::new(config.method.clone(), config.url.clone());
    request.headers = config.headers.iter().chain(extra).cloned().collect();
    request.body = body;
    request.timeout = Some(config.timeout);
    let mut delay = config.retry_delay;
    let mut attempt = 0;
    loop {
        let (problem, retry_after) = match transport.send(&request) {
            Ok(response) if config.success_status_codes.contains(&response.status) => {
                if config.verbose {
                    ferry_guest::info!("http sink: {} {} answered {}", request.method, request.url, response.status);
                }
                return Sent::Written;
            }
            Ok(response) => {
                let said = answer(&response);
                match response.status {
                    429 | 500..=599 => (said, retry_after(&response)),
                    401 | 403 | 407 => return Sent::Later(format!("{said} (the credentials are refused)")),
                    _ => return Sent::Refused(said),
                }
            }
            Err(HttpError::Invalid(why)) => return Sent::Refused(format!("the request is invalid: {why}")),
            Err(error @ HttpError::Denied(_)) => return Sent::Later(error.to_string()),
            Err(error @ HttpError::Failed(_)) => (error.to_string(), None),
        };
        if attempt >= config.max_retries {
            return Sent::Later(format!("{problem} (after {} attempt(s))", attempt + 1));
        }
        attempt += 1;
        let wait = retry_after.map_or(delay, |asked| asked.max(delay)).min(config.max_retry_delay);
        ferry_guest::warn!("http sink: {problem}; trying again in {wait:?} ({attempt} of {})", config.max_retries);
        transport.sleep(wait);
        // Saturating: both factors come from the config.
        delay = delay.saturating_mul(config.retry_backoff_multiplier).min(config.max_retry_delay);
    }
}

/// The status and the start of the body, for a log line or a dead letter.
fn answer(response: &Response) -> String {
    let body = String::from_utf8_lossy(&response.body);
    let body: String = body.chars().take(200).collect();
    let body = body.trim();
    if body.is_empty() { format!("HTTP {}", response.status) } else { format!("HTTP {}: {body}", response.status) }
}

/// A `Retry-After` in seconds (an HTTP date is not followed: the backoff is).
fn retry_after(response: &Response) -> Option<Duration> {
    response.header("retry-after")?.trim().parse::<u64>().ok().map(Duration::from_secs)
}
