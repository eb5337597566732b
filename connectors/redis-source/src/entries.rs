//! A stream's entries as `XREADGROUP` returns them, and the messages they become.
//!
//! An entry `ms-seq` is the message with the id `ms << 64 | seq` (stable: read again,
//! it is the same message, which the local log keeps once), its origin timestamp `ms`,
//! and the headers `redis_stream` and `redis_id`. Its payload is the bytes of its
//! `payload_field` when it has one, else a JSON object of its fields (a value that is
//! not UTF-8 as `{"base64": "..."}`).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ferry_guest::Message;
use ferry_guest::redis::Reply;
use serde_json::{Map, Value};

/// An entry's id: milliseconds and a sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct EntryId {
    pub ms: u64,
    pub seq: u64,
}

impl EntryId {
    pub fn parse(text: &str) -> Result<EntryId, String> {
        let (ms, seq) = text.split_once('-').ok_or_else(|| format!("{text:?} is not a stream entry id (ms-seq)"))?;
        let number = |part: &str| part.parse::<u64>().map_err(|_| format!("{text:?} is not a stream entry id (ms-seq)"));
        Ok(EntryId { ms: number(ms)?, seq: number(seq)? })
    }

    /// The message id it stands for.
    pub fn message_id(self) -> u128 {
        (u128::from(self.ms) << 64) | u128::from(self.seq)
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// One entry: its id and fields (none for an entry deleted while it was pending).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: EntryId,
    pub fields: Option<Vec<(Vec<u8>, Vec<u8>)>>,
}

/// The entries of `stream` in an `XREADGROUP` reply (nil: none).
pub fn from_reply(reply: &Reply) -> Result<Vec<Entry>, String> {
    if let Some(refusal) = reply.server_error() {
        return Err(format!("the server refused the read: {refusal}"));
    }
    let wrong = || format!("an XREADGROUP reply that is not [[stream, [[id, [field, value, ...]], ...]]]: {reply:?}");
    let streams = reply.as_array().ok_or_else(wrong)?;
    let Some(stream) = streams.first() else { return Ok(Vec::new()) };
    let entries = stream.as_array().and_then(|s| s.get(1)).and_then(Reply::as_array).ok_or_else(wrong)?;
    let mut read = Vec::with_capacity(entries.len());
    for entry in entries {
        let parts = entry.as_array().ok_or_else(wrong)?;
        let id = parts.first().and_then(Reply::as_bytes).ok_or_else(wrong)?;
        let id = EntryId::parse(&String::from_utf8_lossy(id))?;
        let fields = match parts.get(1) {
            None | Some(Reply::Nil) => None,
            Some(Reply::Array(values)) => Some(
                values
                    .chunks(2)
                    .map(|pair| match pair {
                        [field, value] => Ok((
                            field.as_bytes().ok_or_else(wrong)?.to_vec(),
                            value.as_bytes().ok_or_else(wrong)?.to_vec(),
                        )),
                        _ => Err(wrong()),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Some(_) => return Err(wrong()),
        };
        read.push(Entry { id, fields });
    }
    Ok(read)
}

/// The message `entry` of `stream` becomes (see the module's documentation).
pub fn message(stream: &str, entry: &Entry, payload_field: &str) -> Message {
    let fields = entry.fields.as_deref().unwrap_or_default();
    let payload = match fields.iter().find(|(field, _)| field == payload_field.as_bytes()) {
        Some((_, value)) => value.clone(),
        None => {
            let mut object = Map::new();
            for (field, value) in fields {
                let value = match std::str::from_utf8(value) {
                    Ok(text) => Value::String(text.to_string()),
                    Err(_) => serde_json::json!({ "base64": STANDARD.encode(value) }),
                };
                object.insert(String::from_utf8_lossy(field).into_owned(), value);
            }
            serde_json::to_vec(&Value::Object(object)).expect("a JSON object serializes")
        }
    };
    Message::new(payload)
        .with_id(entry.id.message_id())
        .with_origin_timestamp(entry.id.ms.saturating_mul(1000))
        .with_header("redis_stream", stream)
        .with_header("redis_id", entry.id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Reply {
        Reply::Bulk(text.as_bytes().to_vec())
    }

    #[test]
    fn a_read_becomes_entries_and_each_entry_a_message_with_a_stable_id() {
        let reply = Reply::Array(vec![Reply::Array(vec![
            bulk("events"),
            Reply::Array(vec![
                Reply::Array(vec![bulk("1700000000000-3"), Reply::Array(vec![bulk("payload"), bulk("{\"a\":1}")])]),
                Reply::Array(vec![bulk("1700000000001-0"), Reply::Array(vec![bulk("k"), bulk("v"), bulk("n"), Reply::Bulk(vec![0xff])])]),
                Reply::Array(vec![bulk("1700000000002-0"), Reply::Nil]),
            ]),
        ])]);
        let entries = from_reply(&reply).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].id, EntryId { ms: 1_700_000_000_000, seq: 3 });
        assert_eq!(entries[2].fields, None, "deleted while pending");
        let first = message("events", &entries[0], "payload");
        assert_eq!(first.payload, b"{\"a\":1}");
        assert_eq!(first.id, Some((1_700_000_000_000u128 << 64) | 3));
        assert_eq!(first.origin_timestamp, Some(1_700_000_000_000_000));
        let second = message("events", &entries[1], "payload");
        assert_eq!(String::from_utf8(second.payload).unwrap(), r#"{"k":"v","n":{"base64":"/w=="}}"#);
        assert_eq!(from_reply(&Reply::Nil).unwrap(), Vec::new());
        assert!(from_reply(&Reply::ServerError("NOGROUP".into())).unwrap_err().contains("NOGROUP"));
        assert!(from_reply(&Reply::Array(vec![Reply::Int(1)])).is_err());
        assert!(EntryId::parse("12").is_err() && EntryId::parse("a-1").is_err());
        assert!(EntryId::parse("1-2").unwrap() < EntryId::parse("2-0").unwrap());
    }
}
