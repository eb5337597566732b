//! Message ids from the row's identity, so that a row read again (after a NACK, a
//! crash, or from the start) carries the id it had, and Iggy's deduplication or a
//! downstream consumer can tell it is the same row.

use crate::cursor::Key;

/// The id of the row of `table` whose primary key is `key`: the 128-bit xxh3 of an
/// unambiguous encoding of both (the table's length before it, a tag for the key's
/// kind). Never 0, which Iggy reads as "no id".
pub fn message_id(table: &str, key: &Key) -> u128 {
    let mut input = Vec::with_capacity(table.len() + 32);
    input.extend_from_slice(&(table.len() as u64).to_le_bytes());
    input.extend_from_slice(table.as_bytes());
    match key {
        Key::Boolean(v) => input.extend_from_slice(&[b'b', u8::from(*v)]),
        Key::Int(v) => {
            input.push(b'i');
            input.extend_from_slice(&v.to_le_bytes());
        }
        Key::Float(v) => {
            input.push(b'f');
            input.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        Key::Text(v) => {
            input.push(b's');
            input.extend_from_slice(v.as_bytes());
        }
        Key::Bytes(v) => {
            input.push(b'x');
            input.extend_from_slice(v);
        }
        Key::Timestamp(v) => {
            input.push(b't');
            input.extend_from_slice(&v.to_le_bytes());
        }
    }
    xxhash_rust::xxh3::xxh3_128(&input).max(1)
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
