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
use ferry_guest::redis::{Item, Items};
use ferry_guest::{Fields, HeaderValue, PackedMessages};
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
        let number =
            |part: &str| part.parse::<u64>().map_err(|_| format!("{text:?} is not a stream entry id (ms-seq)"));
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

/// One entry: its id and fields (none for an entry deleted while it was pending),
/// borrowed from the reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<'a> {
    pub id: EntryId,
    pub fields: Option<Vec<(&'a [u8], &'a [u8])>>,
}

/// The entries of the one stream in a packed `XREADGROUP` reply (nil: none).
pub fn from_reply(data: &[u8]) -> Result<Vec<Entry<'_>>, String> {
    let mut items = Items::new(data);
    let wrong =
        |what: String| format!("an XREADGROUP reply that is not [[stream, [[id, [field, value, ...]], ...]]]: {what}");
    let mut next = || items.next_item().map_err(|e| wrong(e.to_string()));
    // One stream was read: its key and its entries.
    match next()? {
        Item::Nil | Item::Array(0) => return Ok(Vec::new()),
        Item::Array(_) => {}
        Item::ServerError(refusal) => {
            return Err(format!("the server refused the read: {}", String::from_utf8_lossy(refusal)));
        }
        other => return Err(wrong(format!("{other:?}"))),
    }
    if next()? != Item::Array(2) {
        return Err(wrong("a stream that is not [key, entries]".into()));
    }
    let Item::Bulk(_key) = next()? else { return Err(wrong("a stream without its key".into())) };
    let count = match next()? {
        Item::Array(count) => count,
        Item::Nil => 0,
        other => return Err(wrong(format!("entries {other:?}"))),
    };
    let mut read = Vec::with_capacity(count as usize);
    for _ in 0..count {
        if next()? != Item::Array(2) {
            return Err(wrong("an entry that is not [id, fields]".into()));
        }
        let Item::Bulk(id) = next()? else { return Err(wrong("an entry without its id".into())) };
        let id = EntryId::parse(&String::from_utf8_lossy(id))?;
        let fields = match next()? {
            Item::Nil => None,
            Item::Array(values) => {
                let mut fields = Vec::with_capacity(values as usize / 2);
                for _ in 0..values / 2 {
                    match (next()?, next()?) {
                        (Item::Bulk(field), Item::Bulk(value)) => fields.push((field, value)),
                        _ => return Err(wrong("fields that are not bulk strings in pairs".into())),
                    }
                }
                Some(fields)
            }
            other => return Err(wrong(format!("fields {other:?}"))),
        };
        read.push(Entry { id, fields });
    }
    Ok(read)
}

/// Append the message `entry` of `stream` becomes (see the module's documentation) to
/// `packed`: written straight into the buffer the host takes, no `Message` made.
pub fn pack(packed: &mut PackedMessages, stream: &str, entry: &Entry<'_>, payload_field: &str) {
    let id = entry.id;
    let headers = [
        ("redis_stream".to_string(), HeaderValue::String(stream.to_string())),
        ("redis_id".to_string(), HeaderValue::String(id.to_string())),
    ];
    let fields =
        Fields { id: Some(id.message_id()), origin_timestamp: Some(id.ms.saturating_mul(1000)), headers: &headers };
    let values = entry.fields.as_deref().unwrap_or_default();
    match values.iter().find(|(field, _)| *field == payload_field.as_bytes()) {
        Some((_, value)) => packed.push_with(fields, |payload| payload.extend_from_slice(value)),
        None => {
            let mut object = Map::new();
            for (field, value) in values {
                let value = match std::str::from_utf8(value) {
                    Ok(text) => Value::String(text.to_string()),
                    Err(_) => serde_json::json!({ "base64": STANDARD.encode(value) }),
                };
                object.insert(String::from_utf8_lossy(field).into_owned(), value);
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

    /// `items` packed as the host packs a reply.
    fn packed(items: &[Item<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        for item in items {
            let bytes = |out: &mut Vec<u8>, tag: u8, data: &[u8]| {
                out.push(tag);
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
                out.extend_from_slice(data);
            };
            match *item {
                Item::Nil => out.push(0),
                Item::Status(text) => bytes(&mut out, 1, text),
                Item::Int(n) => {
                    out.push(2);
                    out.extend_from_slice(&n.to_le_bytes());
                }
                Item::Bulk(data) => bytes(&mut out, 3, data),
                Item::Array(n) => {
                    out.push(4);
                    out.extend_from_slice(&n.to_le_bytes());
                }
                Item::ServerError(text) => bytes(&mut out, 5, text),
            }
        }
        out
    }

    #[test]
    fn a_read_becomes_entries_and_each_entry_a_message_with_a_stable_id() {
        use Item::{Array, Bulk, Nil};
        let reply = packed(&[
            Array(1),
            Array(2),
            Bulk(b"events"),
            Array(3),
            Array(2),
            Bulk(b"1700000000000-3"),
            Array(2),
            Bulk(b"payload"),
            Bulk(b"{\"a\":1}"),
            Array(2),
            Bulk(b"1700000000001-0"),
            Array(4),
            Bulk(b"k"),
            Bulk(b"v"),
            Bulk(b"n"),
            Bulk(&[0xff]),
            Array(2),
            Bulk(b"1700000000002-0"),
            Nil,
        ]);
        let entries = from_reply(&reply).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].id, EntryId { ms: 1_700_000_000_000, seq: 3 });
        assert_eq!(entries[2].fields, None, "deleted while pending");
        let mut messages = PackedMessages::new();
        pack(&mut messages, "events", &entries[0], "payload");
        pack(&mut messages, "events", &entries[1], "payload");
        let messages = messages.messages().unwrap();
        let first = &messages[0];
        assert_eq!(first.payload, b"{\"a\":1}");
        assert_eq!(first.id, Some((1_700_000_000_000u128 << 64) | 3));
        assert_eq!(first.origin_timestamp, Some(1_700_000_000_000_000));
        assert_eq!(first.headers[1], ("redis_id".to_string(), HeaderValue::String("1700000000000-3".into())));
        assert_eq!(String::from_utf8(messages[1].payload.clone()).unwrap(), r#"{"k":"v","n":{"base64":"/w=="}}"#);

        assert_eq!(from_reply(&packed(&[Nil])).unwrap(), Vec::new());
        let refused = from_reply(&packed(&[Item::ServerError(b"NOGROUP no group")])).unwrap_err();
        assert!(refused.contains("NOGROUP"), "{refused}");
        assert!(from_reply(&packed(&[Array(1), Item::Int(1)])).is_err());
        assert!(from_reply(&reply[..reply.len() - 1]).is_err(), "truncated");
        assert!(EntryId::parse("12").is_err() && EntryId::parse("a-1").is_err());
        assert!(EntryId::parse("1-2").unwrap() < EntryId::parse("2-0").unwrap());
    }
}
