//! A source that polls a JSON endpoint through `wasi:http` (its `host:port` granted
//! in `grants.network`) and delivers each record of its answers once, as a JSON
//! message.
//!
//! The records are the array at `records` (a JSONPath-style path, `$` by default:
//! the answer itself). `cursor.kind` says how the endpoint is walked (`cursor.rs`):
//! numbered `page`s, an `offset`, records changed `since` the greatest value
//! delivered (a tie-breaker for equal values), a snapshot re-delivered whenever its
//! `etag` changes, or a `next` link (or token) each answer names. The host commits
//! the cursor only after the batch was delivered, so a crash or a NACK asks again
//! from the last committed place: at least once, and the same records get the same
//! ids when the endpoint answers the same (the host derives them from the committed
//! cursor).
//!
//! An answer that is not 2xx (or 304 to an `etag` poll), not JSON, or without an
//! array at `records` fails the poll with an error naming the URL and what is wrong;
//! the host logs it and polls again after its backoff: nothing is committed.

mod config;
mod cursor;
mod fetch;
mod path;

use ferry_guest::http::Request;
use ferry_guest::{Batch, Error, Message, Source};
use serde_json::Value;

use crate::config::Config;
use crate::cursor::{Answer, Cursor, Step};
use crate::fetch::{Transport, Wasi};

/// Pages hopped over in one poll (nothing new on them) before the cursor is
/// committed with an empty batch, so that a long run of them is walked once.
const MAX_HOPS: usize = 16;

struct HttpSource<T = Wasi> {
    config: Config,
    transport: T,
}

impl<T: Transport + Default + 'static> Source for HttpSource<T> {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        ferry_guest::info!(
            "http source: polling {} {} ({:?}), from {cursor:?}",
            config.method,
            config.url,
            config.cursoring
        );
        Ok(HttpSource { config, transport: T::default() })
    }

    fn poll(&mut self, committed: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        let mut cursor = committed.clone();
        for _ in 0..MAX_HOPS {
            match self.ask(&cursor)? {
                Step::Deliver(records, next) => {
                    let messages = records.iter().map(|record| Message::new(record.to_string())).collect();
                    return Ok(Some(Batch::new(messages, next)));
                }
                Step::Hop(next) => cursor = next,
                Step::Wait if cursor == *committed => return Ok(None),
                Step::Wait => break,
            }
        }
        // Pages with nothing new were passed: commit that much.
        Ok(Some(Batch::new(Vec::new(), cursor)))
    }
}

impl<T: Transport> HttpSource<T> {
    /// One request for `cursor`, and what its answer delivers.
    fn ask(&mut self, cursor: &Cursor) -> Result<Step, Error> {
        let config = &self.config;
        let (url, extra) = config.cursoring.request(config, cursor);
        let mut request = Request::new(config.method.clone(), url.clone());
        request.headers = config.headers.iter().cloned().chain(extra).collect();
        request.body = config.body.clone().unwrap_or_default().into_bytes();
        request.timeout = Some(config.timeout);
        let at = format!("{} {url}", config.method);
        let response = self.transport.send(&request).map_err(|e| Error::msg(format!("{at}: {e}")))?;
        let said = || String::from_utf8_lossy(&response.body[..response.body.len().min(200)]).into_owned();
        match response.status {
            200..=299 => {}
            304 if cursor.etag.is_some() => return Ok(Step::Wait),
            401 | 403 | 407 => {
                return Err(Error::msg(format!(
                    "{at} answered {} (the credentials are refused): {}",
                    response.status,
                    said()
                )));
            }
            status => return Err(Error::msg(format!("{at} answered {status}: {}", said()))),
        }
        if response.body.len() >= ferry_guest::http::MAX_BODY {
            return Err(Error::msg(format!(
                "{at}: the answer is larger than {} MiB, more than a guest keeps: ask for smaller pages",
                ferry_guest::http::MAX_BODY >> 20
            )));
        }
        let body: Value = serde_json::from_slice(&response.body)
            .map_err(|e| Error::msg(format!("{at}: the answer is not JSON ({e}): {}", said())))?;
        let records = match config.records.select(&body) {
            Some(Value::Array(records)) => records.as_slice(),
            Some(other) => {
                let kind = match other {
                    Value::Object(_) => "an object",
                    Value::Null => "null",
                    _ => "not an array",
                };
                return Err(Error::msg(format!(
                    "{at}: {} (records) is {kind}, not an array of records",
                    config.records.as_str()
                )));
            }
            None => {
                return Err(Error::msg(format!(
                    "{at}: the answer has nothing at {} (records): {}",
                    config.records.as_str(),
                    said()
                )));
            }
        };
        if records.len() > config.max_records {
            return Err(Error::msg(format!(
                "{at}: {} records in one answer, more than max_records ({})",
                records.len(),
                config.max_records
            )));
        }
        let answer = Answer { records, body: &body, etag: response.header("etag") };
        config.cursoring.step(config, cursor, answer).map_err(|e| Error::msg(format!("{at}: {e}")))
    }
}

ferry_guest::export_source!(HttpSource);

#[cfg(test)]
mod tests;
