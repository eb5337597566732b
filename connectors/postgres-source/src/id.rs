//! Message ids from the row's identity, so that a row read again (after a NACK, a
//! crash, or from the start) carries the id it had, and Iggy's deduplication or a
//! downstream consumer can tell it is the same row.

use crate::cursor::Key;

/// The id of the row of `table` whose primary key is `key` (see
/// [`ferry_guest::row::stable_id`]; a tag for the key's kind).
pub fn message_id(table: &str, key: &Key) -> u128 {
    let (tag, bytes): (u8, std::borrow::Cow<[u8]>) = match key {
        Key::Boolean(v) => (b'b', vec![u8::from(*v)].into()),
        Key::Int(v) => (b'i', v.to_le_bytes().to_vec().into()),
        Key::Float(v) => (b'f', v.to_bits().to_le_bytes().to_vec().into()),
        Key::Text(v) => (b's', v.as_bytes().into()),
        Key::Bytes(v) => (b'x', v.as_slice().into()),
        Key::Timestamp(v) => (b't', v.to_le_bytes().to_vec().into()),
    };
    ferry_guest::row::stable_id(table, tag, &bytes)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn the_same_row_always_has_the_same_id() {
        // Pinned: an id that changed between versions would defeat deduplication of
        // rows read again after an upgrade.
        assert_eq!(message_id("events", &Key::Int(1)), message_id("events", &Key::Int(1)));
        assert_eq!(
            message_id("events", &Key::Int(1)),
            xxhash_rust::xxh3::xxh3_128(b"\x06\0\0\0\0\0\0\0eventsi\x01\0\0\0\0\0\0\0")
        );
    }

    #[test]
    fn different_rows_have_different_ids() {
        let ids: HashSet<u128> = [
            message_id("events", &Key::Int(1)),
            message_id("events", &Key::Int(2)),
            message_id("orders", &Key::Int(1)),
            message_id("events", &Key::Text("1".into())),
            message_id("events", &Key::Timestamp(1)),
            message_id("events", &Key::Bytes(vec![1])),
            message_id("events", &Key::Float(1.0)),
            message_id("events", &Key::Boolean(true)),
            // The table's length keeps `ab` + `c...` apart from `a` + `bc...`.
            message_id("ab", &Key::Text("c".into())),
            message_id("a", &Key::Text("bc".into())),
        ]
        .into_iter()
        .collect();
        assert_eq!(ids.len(), 10);
        assert!(!ids.contains(&0));
    }
}
