//! The cursor, and how each way of walking an endpoint (`cursor.kind`) turns it
//! into a request and moves it on an answer.
//!
//! The cursor says where the next request starts, never where the last one ended
//! up: the host commits it only after the batch was delivered, and a NACKed batch
//! is asked for again from the committed one. A page or a link that is not full
//! yet is asked for again later, and what was delivered of it (`skip`) is not
//! delivered twice.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::config::{Config, Cursoring};

/// Where the source is. Only the fields of its `cursor.kind` are used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cursor {
    /// `page`: the page to ask for; `offset`: the position of the next record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// `page`, `next`: records of that page delivered already.
    #[serde(skip_serializing_if = "is_zero")]
    pub skip: usize,
    /// `since`: the greatest value delivered, and what tells apart the records
    /// delivered with that very value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<String>,
    /// `etag`: the ETag of the snapshot delivered last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// `next`: the page to ask for (a URL, or the token sent as `param`); `None` is
    /// the first, `url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What an answer holds, for [`Cursoring::step`]: its records and itself as the
/// endpoint sent them (parsed no further than needed).
pub struct Answer<'a> {
    pub records: &'a [&'a RawValue],
    pub body: &'a RawValue,
    pub etag: Option<&'a str>,
}

/// What becomes of an answer.
#[derive(Debug, PartialEq)]
pub enum Step<R> {
    /// These records, after which the cursor is `next`.
    Deliver(Vec<R>, Cursor),
    /// Nothing new here, but the next page is there: ask for it.
    Hop(Cursor),
    /// Nothing new yet: ask again at the next poll.
    Wait,
}

impl<R> Step<R> {
    /// The same step, each record to be delivered made into `S`.
    pub fn map<S>(self, make: impl FnMut(R) -> S) -> Step<S> {
        match self {
            Step::Deliver(records, next) => Step::Deliver(records.into_iter().map(make).collect(), next),
            Step::Hop(next) => Step::Hop(next),
            Step::Wait => Step::Wait,
        }
    }
}

impl Cursoring {
    /// The URL, and the extra headers, of the request for `cursor`.
    pub fn request(&self, config: &Config, cursor: &Cursor) -> (String, Vec<(String, String)>) {
        let url = &config.url;
        match self {
            Cursoring::Page { param, start, size, size_param } => {
                let mut query = vec![(param.as_str(), cursor.position.unwrap_or(*start).to_string())];
                if let Some(size_param) = size_param {
                    query.push((size_param, size.to_string()));
                }
                (with_query(url, &query), Vec::new())
            }
            Cursoring::Offset { param, limit_param, limit } => {
                let query =
                    [(param.as_str(), cursor.position.unwrap_or(0).to_string()), (limit_param, limit.to_string())];
                (with_query(url, &query), Vec::new())
            }
            Cursoring::Since { param, initial, .. } => match cursor.since.as_ref().or(initial.as_ref()) {
                Some(since) => (with_query(url, &[(param, text(since))]), Vec::new()),
                None => (url.clone(), Vec::new()),
            },
            Cursoring::Etag {} => {
                let headers = cursor.etag.iter().map(|etag| ("If-None-Match".to_string(), etag.clone())).collect();
                (url.clone(), headers)
            }
            Cursoring::Next { param, .. } => match (&cursor.next, param) {
                (None, _) => (url.clone(), Vec::new()),
                (Some(token), Some(param)) => (with_query(url, &[(param, token.clone())]), Vec::new()),
                (Some(link), None) => (link.clone(), Vec::new()),
            },
        }
    }

    /// What `answer`, to the request for `cursor`, delivers, and where the cursor
    /// goes after it. An error names the record or the field that is wrong.
    pub fn step<'a>(&self, config: &Config, cursor: &Cursor, answer: Answer<'a>) -> Result<Step<&'a RawValue>, String> {
        let records = answer.records;
        match self {
            Cursoring::Page { start, size, .. } => {
                let page = cursor.position.unwrap_or(*start);
                let full = records.len() >= *size;
                let next = if full {
                    Cursor { position: Some(page + 1), ..Cursor::default() }
                } else {
                    Cursor { position: Some(page), skip: records.len().max(cursor.skip), ..Cursor::default() }
                };
                Ok(fresh_or(records.get(cursor.skip..).unwrap_or_default(), next, full))
            }
            Cursoring::Offset { .. } => {
                let next =
                    Cursor { position: Some(cursor.position.unwrap_or(0) + records.len() as u64), ..Cursor::default() };
                Ok(fresh_or(records, next, false))
            }
            Cursoring::Since { field, tie_breaker, .. } => {
                let from = cursor.since.as_ref();
                let mut greatest = from.cloned();
                let mut fresh = Vec::new();
                let mut values = Vec::with_capacity(records.len());
                let parsed = records
                    .iter()
                    .enumerate()
                    .map(|(index, record)| {
                        serde_json::from_str::<Value>(record.get()).map_err(|e| format!("record {index}: {e}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                for (index, (record, parsed)) in records.iter().zip(&parsed).enumerate() {
                    let value = field.select(parsed).filter(|v| v.is_string() || v.is_number()).ok_or_else(|| {
                        format!("record {index} has no string or number at {} (cursor.field)", field.as_str())
                    })?;
                    let tie = match tie_breaker {
                        Some(path) => path.select(parsed).map(text).ok_or_else(|| {
                            format!("record {index} has nothing at {} (cursor.tie_breaker)", path.as_str())
                        })?,
                        None => fingerprint(record.get()),
                    };
                    let newer = match from {
                        None => true,
                        Some(from) => match compare(value, from)? {
                            std::cmp::Ordering::Greater => true,
                            std::cmp::Ordering::Equal => !cursor.seen.contains(&tie),
                            std::cmp::Ordering::Less => false,
                        },
                    };
                    if !newer {
                        continue;
                    }
                    if greatest.as_ref().is_none_or(|g| compare(value, g).is_ok_and(|o| o.is_gt())) {
                        greatest = Some(value.clone());
                    }
                    values.push((value, tie));
                    fresh.push(*record);
                }
                let Some(greatest) = greatest.filter(|_| !fresh.is_empty()) else { return Ok(Step::Wait) };
                let mut seen: Vec<String> = if Some(&greatest) == from { cursor.seen.clone() } else { Vec::new() };
                seen.extend(values.into_iter().filter(|(v, _)| **v == greatest).map(|(_, tie)| tie));
                Ok(Step::Deliver(fresh, Cursor { since: Some(greatest), seen, ..Cursor::default() }))
            }
            Cursoring::Etag {} => {
                let etag = answer.etag.ok_or("the answer has no ETag header, which cursor.kind = \"etag\" needs")?;
                if cursor.etag.as_deref() == Some(etag) {
                    return Ok(Step::Wait);
                }
                let next = Cursor { etag: Some(etag.to_string()), ..Cursor::default() };
                Ok(if records.is_empty() { Step::Hop(next) } else { Step::Deliver(records.to_vec(), next) })
            }
            Cursoring::Next { field, param } => {
                let fresh = records.get(cursor.skip..).unwrap_or_default();
                let named = field.select_raw(answer.body).map(|raw| serde_json::from_str::<Value>(raw.get()));
                let named = match named.transpose().map_err(|e| format!("{} (cursor.field): {e}", field.as_str()))? {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) if s.is_empty() => None,
                    Some(value @ (Value::String(_) | Value::Number(_))) => Some(text(&value)),
                    Some(other) => {
                        return Err(format!(
                            "{} (cursor.field) is {other}, neither a link nor a token",
                            field.as_str()
                        ));
                    }
                };
                match named {
                    Some(next) => {
                        let next = if param.is_some() { next } else { resolve(&config.url, &next)? };
                        Ok(fresh_or(fresh, Cursor { next: Some(next), ..Cursor::default() }, true))
                    }
                    None => {
                        let skip = records.len().max(cursor.skip);
                        Ok(fresh_or(fresh, Cursor { next: cursor.next.clone(), skip, ..Cursor::default() }, false))
                    }
                }
            }
        }
    }
}

/// Deliver `fresh` if there is any; else move on (`moves`) or wait.
fn fresh_or<'a>(fresh: &[&'a RawValue], next: Cursor, moves: bool) -> Step<&'a RawValue> {
    match (fresh.is_empty(), moves) {
        (false, _) => Step::Deliver(fresh.to_vec(), next),
        (true, true) => Step::Hop(next),
        (true, false) => Step::Wait,
    }
}

/// `a` against `b`: numbers by value, strings by their text (ISO 8601 timestamps
/// of one format order as text).
fn compare(a: &Value, b: &Value) -> Result<std::cmp::Ordering, String> {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => match (a.as_u64(), b.as_u64(), a.as_i64(), b.as_i64()) {
            (Some(a), Some(b), ..) => Ok(a.cmp(&b)),
            (_, _, Some(a), Some(b)) => Ok(a.cmp(&b)),
            _ => a
                .as_f64()
                .unwrap_or(f64::NAN)
                .partial_cmp(&b.as_f64().unwrap_or(f64::NAN))
                .ok_or_else(|| format!("{a} and {b} do not compare")),
        },
        (Value::String(a), Value::String(b)) => Ok(a.cmp(b)),
        _ => Err(format!("{a} and {b} (cursor.field) are not both numbers or both strings")),
    }
}

/// A value as a query parameter or a tie-breaker: a string as it is, else its JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What tells a record apart without a tie-breaker: a hash of its JSON, as the
/// endpoint sent it.
fn fingerprint(record: &str) -> String {
    // FNV-1a: stable across builds and runs, which the committed cursor needs.
    let hash = record
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{hash:016x}")
}

/// A link an answer names: a URL as it is, a path on `url`'s server.
fn resolve(url: &str, link: &str) -> Result<String, String> {
    if link.starts_with("http://") || link.starts_with("https://") {
        return Ok(link.to_string());
    }
    if link.starts_with('/') {
        let (scheme, authority, _) = ferry_guest::http::split_url(url).map_err(|e| e.to_string())?;
        return Ok(format!("{scheme}://{authority}{link}"));
    }
    Err(format!("the next link {link:?} is neither a URL nor a path (set cursor.param if it is a token)"))
}

/// `url` with `query` added, the values percent-encoded.
pub fn with_query(url: &str, query: &[(&str, String)]) -> String {
    let mut url = url.to_string();
    for (name, value) in query {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&encode(name));
        url.push('=');
        url.push_str(&encode(value));
    }
    url
}

fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
