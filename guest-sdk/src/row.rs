//! What the sources that read a database table's rows share: a row's stable message
//! id, its JSON text written without a detour through `serde_json::Value`, and keys of
//! raw bytes kept readable in a stored cursor.
//!
//! A row read again (after a NACK, a crash, or from the start) must be the same
//! message with the same id, so that Iggy's deduplication or a downstream consumer can
//! tell it is the same row: the id is a hash of the table and the row's primary key,
//! never of when or how it was read.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// The id of the row of `table` whose primary key is `key`, a value of the kind `tag`
/// (one byte per kind, so `1` the integer and `"1"` the text differ): the 128-bit xxh3
/// of `table`'s length, `table`, `tag` and `key`. Never 0, which Iggy reads as "no id".
pub fn stable_id(table: &str, tag: u8, key: &[u8]) -> u128 {
    let mut input = Vec::with_capacity(table.len() + key.len() + 9);
    input.extend_from_slice(&(table.len() as u64).to_le_bytes());
    input.extend_from_slice(table.as_bytes());
    input.push(tag);
    input.extend_from_slice(key);
    xxhash_rust::xxh3::xxh3_128(&input).max(1)
}

/// `text` as a JSON string, written at the end of `out`.
pub fn write_json_string<W: std::io::Write + for<'b> Extend<&'b u8>>(out: &mut W, text: &str) {
    // Most text has nothing JSON escapes (control characters, `"`, `\`): it is then
    // copied as it is, which is what serde_json would write, at a fraction of the cost.
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.extend(b"\"");
        out.extend(text.as_bytes());
        out.extend(b"\"");
    } else {
        serde_json::to_writer(out, text).expect("a string always serializes");
    }
}

/// What a table source does with its rows once their batch is acknowledged
/// (`plugin_config.after_ack`): `{ delete = true }` or `{ mark_column = "..." }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterAck {
    /// Delete them.
    Delete,
    /// Set this boolean column to true (and read only rows where it is not true).
    Mark(String),
}

impl<'de> serde::Deserialize<'de> for AfterAck {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            #[serde(default)]
            delete: bool,
            #[serde(default)]
            mark_column: Option<String>,
        }
        let raw = Raw::deserialize(deserializer)?;
        match (raw.delete, raw.mark_column) {
            (true, None) => Ok(AfterAck::Delete),
            (false, Some(column)) => Ok(AfterAck::Mark(column)),
            (true, Some(_)) => Err(serde::de::Error::custom(
                "plugin_config.after_ack has both delete and mark_column: choose one (rows are deleted, or marked)",
            )),
            (false, None) => Err(serde::de::Error::custom(
                "plugin_config.after_ack says nothing to do: write { delete = true } or { mark_column = \"...\" }",
            )),
        }
    }
}

/// `#[serde(with = "ferry_guest::row::base64_bytes")]`: bytes as base64 text in a
/// stored cursor, which stays readable JSON.
pub mod base64_bytes {
    use super::*;

    pub fn serialize<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&BASE64.encode(bytes))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(deserializer)?;
        BASE64.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_pinned_and_tells_kinds_and_table_boundaries_apart() {
        // Pinned: an id that changed between versions would defeat deduplication of
        // rows read again after an upgrade.
        assert_eq!(
            stable_id("events", b'i', &1i64.to_le_bytes()),
            xxhash_rust::xxh3::xxh3_128(b"\x06\0\0\0\0\0\0\0eventsi\x01\0\0\0\0\0\0\0")
        );
        assert_ne!(stable_id("t", b'i', b"1"), stable_id("t", b's', b"1"));
        assert_ne!(stable_id("ab", b's', b"c"), stable_id("a", b's', b"bc"));
    }

    #[test]
    fn text_is_written_as_serde_json_writes_it() {
        let texts =
            ["", "plain", "é ü 漢字 🦀", "tab\there", "\"", "back\\slash", "\u{7f}", "\u{1f}", "nul\0", "a\u{2028}b"];
        for text in texts {
            let mut out = Vec::new();
            write_json_string(&mut out, text);
            assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }
}
