//! Reading `seq` back out of records, and the check every test ends with: every
//! `seq` is there. Also the messages tests append themselves, and the committed
//! state of sources and sinks.

use std::collections::BTreeMap;

use ferry::contract::{Message, Uint128};
use ferry::store::local_log::Record;

/// A `{"seq":N}` message with an id of its own, N + 1 (an id is never 0).
pub fn seq_message(seq: u64) -> Message {
    Message {
        id: Some(Uint128::from(u128::from(seq) + 1)),
        headers: Vec::new(),
        payload: format!("{{\"seq\":{seq}}}").into_bytes().into(),
        origin_timestamp: None,
    }
}

/// Messages `{"seq":N}` for every N of `seqs`.
pub fn seq_messages(seqs: std::ops::Range<u64>) -> Vec<Message> {
    seqs.map(seq_message).collect()
}

/// The `seq` of a `{"seq":N,...}` payload.
pub fn seq_of(payload: &[u8]) -> u64 {
    let value: serde_json::Value = serde_json::from_slice(payload)
        .unwrap_or_else(|e| panic!("a torn or foreign record: {e}: {}", String::from_utf8_lossy(payload)));
    value["seq"].as_u64().unwrap_or_else(|| panic!("no seq in {value}"))
}

/// The `seq`s of records, in log order.
pub fn seqs(records: &[Record]) -> Vec<u64> {
    records.iter().map(|r| seq_of(&r.payload)).collect()
}

/// The `seq`s of messages, in order.
pub fn message_seqs(messages: &[Message]) -> Vec<u64> {
    messages.iter().map(|m| seq_of(&m.payload)).collect()
}

/// Check that every `seq` in `0..count` occurs at least once and nothing else does;
/// return how many records were duplicates.
pub fn assert_complete(seqs: &[u64], count: u64) -> usize {
    let mut seen = vec![0u32; count as usize];
    for &seq in seqs {
        assert!(seq < count, "seq {seq} is beyond max_count {count}");
        seen[seq as usize] += 1;
    }
    let missing: Vec<_> = seen.iter().enumerate().filter(|(_, n)| **n == 0).map(|(s, _)| s).collect();
    assert!(
        missing.is_empty(),
        "lost records: {} seqs missing, the first {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    seqs.len() - count as usize
}

/// The `next_seq` of a committed `{"next_seq":N}` cursor.
pub fn next_seq(state: &[u8]) -> u64 {
    let value: serde_json::Value = serde_json::from_slice(state).expect("a JSON cursor");
    value["next_seq"].as_u64().expect("next_seq in the cursor")
}

/// The positions of a sink's committed state, `{"stream/topic": next offset}`.
pub fn positions(state: &[u8]) -> BTreeMap<String, u64> {
    serde_json::from_slice(state)
        .unwrap_or_else(|e| panic!("not a sink's positions ({e}): {}", String::from_utf8_lossy(state)))
}
