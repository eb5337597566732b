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
use ferry_guest::{Fields, HeaderValue, PackedMessages};
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

/// The entries of `stream` in an `XREADGROUP` reply (nil: none), their bytes moved
/// out of it rather than copied.
pub fn from_reply(reply: Reply) -> Result<Vec<Entry>, String> {
    if let Some(refusal) = reply.server_error() {
        return Err(format!("the server refused the read: {refusal}"));
    }
    let wrong = |what: &str| format!("an XREADGROUP reply that is not [[stream, [[id, [field, value, ...]], ...]]]: {what}");
    let streams = match reply {
        Reply::Nil => return Ok(Vec::new()),
        Reply::Array(streams) => streams,
        other => return Err(wrong(&format!("{other:?}"))),
    };
    let Some(stream) = streams.into_iter().next() else { return Ok(Vec::new()) };
    let entries = match stream {
        Reply::Array(parts) => match parts.into_iter().nth(1) {
            Some(Reply::Array(entries)) => entries,
            Some(Reply::Nil) => Vec::new(),
            other => return Err(wrong(&format!("entries {other:?}"))),
        },
        other => return Err(wrong(&format!("{other:?}"))),
    };
    let mut read = Vec::with_capacity(entries.len());
    for entry in entries {
        let Reply::Array(parts) = entry else { return Err(wrong("an entry that is not [id, fields]")) };
        let mut parts = parts.into_iter();
        let id = match parts.next() {
            Some(Reply::Bulk(id)) => EntryId::parse(&String::from_utf8_lossy(&id))?,
            other => return Err(wrong(&format!("an entry id {other:?}"))),
        };
        let fields = match parts.next() {
            None | Some(Reply::Nil) => None,
            Some(Reply::Array(values)) => {
                let mut fields = Vec::with_capacity(values.len() / 2);
                let mut values = values.into_iter();
                while let Some(field) = values.next() {
                    match (field, values.next()) {
                        (Reply::Bulk(field), Some(Reply::Bulk(value))) => fields.push((field, value)),
                        _ => return Err(wrong("fields that are not bulk strings in pairs")),
                    }
                }
                Some(fields)
            }
            Some(other) => return Err(wrong(&format!("fields {other:?}"))),
        };
        read.push(Entry { id, fields });
    }
    Ok(read)
}

/// Append the message `entry` of `stream` becomes (see the module's documentation) to
/// `packed`: written straight into the buffer the host takes, no `Message` made.
pub fn pack(packed: &mut PackedMessages, stream: &str, entry: Entry, payload_field: &str) {
    let id = entry.id;
    let headers = [
        ("redis_stream".to_string(), HeaderValue::String(stream.to_string())),
        ("redis_id".to_string(), HeaderValue::String(id.to_string())),
    ];
    let fields = Fields {
        id: Some(id.message_id()),
        origin_timestamp: Some(id.ms.saturating_mul(1000)),
        headers: &headers,
    };
    let mut values = entry.fields.unwrap_or_default();
    match values.iter().position(|(field, _)| field == payload_field.as_bytes()) {
        Some(at) => packed.push_with(fields, |payload| payload.extend_from_slice(&values[at].1)),
        None => {
            let mut object = Map::new();
            for (field, value) in values.drain(..) {
                let value = match String::from_utf8(value) {
                    Ok(text) => Value::String(text),
                    Err(not_text) => serde_json::json!({ "base64": STANDARD.encode(not_text.as_bytes()) }),
                };
                object.insert(String::from_utf8_lossy(&field).into_owned(), value);
            }
            packed.push_with(fields, |payload| {
                serde_json::to_writer(payload, &Value::Object(object)).expect("a JSON object serializes")
            });
        }
    }
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
        let entries = from_reply(reply).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].id, EntryId { ms: 1_700_000_000_000, seq: 3 });
        assert_eq!(entries[2].fields, None, "deleted while pending");
        let mut packed = PackedMessages::new();
        pack(&mut packed, "events", entries[0].clone(), "payload");
        pack(&mut packed, "events", entries[1].clone(), "payload");
        let messages = packed.messages().unwrap();
        let first = &messages[0];
        assert_eq!(first.payload, b"{\"a\":1}");
        assert_eq!(first.id, Some((1_700_000_000_000u128 << 64) | 3));
        assert_eq!(first.origin_timestamp, Some(1_700_000_000_000_000));
        assert_eq!(first.headers[1], ("redis_id".to_string(), HeaderValue::String("1700000000000-3".into())));
        assert_eq!(String::from_utf8(messages[1].payload.clone()).unwrap(), r#"{"k":"v","n":{"base64":"/w=="}}"#);
        assert_eq!(from_reply(Reply::Nil).unwrap(), Vec::new());
        assert!(from_reply(Reply::ServerError("NOGROUP".into())).unwrap_err().contains("NOGROUP"));
        assert!(from_reply(Reply::Array(vec![Reply::Int(1)])).is_err());
        assert!(EntryId::parse("12").is_err() && EntryId::parse("a-1").is_err());
        assert!(EntryId::parse("1-2").unwrap() < EntryId::parse("2-0").unwrap());
    }
}
