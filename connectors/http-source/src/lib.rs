//! A source that polls a JSON endpoint through `wasi:http` (its `host:port` granted
//! in `grants.network`) and delivers each record of its answers once, as a JSON
//! message.
//!
//! The records are the array at `records` (a JSONPath-style path, `$` by default:
//! the answer itself). `cursor.kind` says how the endpoint is walked (`cursor.rs`):
//! numbered `page`s, an `offset`, records changed `since` the greatest value
//! delivered (a tie-breaker for equal values), a snapshot re-delivered whenever its
//! `etag` changes, or a `next` link (or token) each answer names. A record is
//! delivered as the endpoint wrote it (its own bytes: no number rounded). The host
//! commits the cursor only after the batch was delivered, so a crash or a NACK asks
//! again from the last committed place: at least once, and the same records get the
//! same ids when the endpoint answers the same (the host derives them from the
//! committed cursor).
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
use serde_json::value::RawValue;

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
                Step::Deliver(messages, next) => return Ok(Some(Batch::new(messages, next))),
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
    fn ask(&mut self, cursor: &Cursor) -> Result<Step<Message>, Error> {
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
        // Parsed only as far as `records` (and a cursor's fields) need: each record
        // is delivered as the endpoint wrote it, numbers of any precision exact.
        let not_json =
            |e: &dyn std::fmt::Display| Error::msg(format!("{at}: the answer is not JSON ({e}): {}", said()));
        let text = std::str::from_utf8(&response.body).map_err(|e| not_json(&e))?;
        let body: &RawValue = serde_json::from_str(text).map_err(|e| not_json(&e))?;
        let path = config.records.as_str();
        let Some(found) = config.records.select_raw(body) else {
            return Err(Error::msg(format!("{at}: the answer has nothing at {path} (records): {}", said())));
        };
        let records: Vec<&RawValue> = serde_json::from_str(found.get()).map_err(|_| {
            let kind = match found.get().trim_start().as_bytes().first() {
                Some(b'{') => "an object",
                Some(b'n') => "null",
                _ => "not an array",
            };
            Error::msg(format!("{at}: {path} (records) is {kind}, not an array of records"))
        })?;
        if records.len() > config.max_records {
            return Err(Error::msg(format!(
                "{at}: {} records in one answer, more than max_records ({})",
                records.len(),
                config.max_records
            )));
        }
        let answer = Answer { records: &records, body, etag: response.header("etag") };
        let step = config.cursoring.step(config, cursor, answer).map_err(|e| Error::msg(format!("{at}: {e}")))?;
        Ok(step.map(|record| Message::new(record.get())))
    }
}

ferry_guest::export_source!(HttpSource);

#[cfg(test)]
mod tests;
