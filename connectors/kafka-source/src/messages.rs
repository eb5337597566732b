//! The messages a Kafka message becomes.
//!
//! The message at `offset` of `topic`'s `partition` has the id `stable_id(topic,
//! partition, offset)` (stable: read again, it is the same message, which the local
//! log and an Iggy target keep once), its origin timestamp the message's own, and the
//! headers `kafka_topic`, `kafka_partition`, `kafka_offset` and `kafka_key` (when it
//! has a key: text when the key is UTF-8, bytes otherwise), then its own headers the
//! same way (the first value of each name; a name of ours is not taken twice). The
//! payload is its bytes, as they are.

use ferry_guest::kafka::Consumed;
use ferry_guest::row::stable_id;
use ferry_guest::{Fields, HeaderValue, PackedMessages};

/// The headers this source sets itself.
const OURS: [&str; 4] = ["kafka_topic", "kafka_partition", "kafka_offset", "kafka_key"];

/// The stable id of the message at `offset` of `topic`'s `partition`.
pub fn message_id(topic: &str, partition: i32, offset: i64) -> u128 {
    let mut place = [0u8; 12];
    place[..4].copy_from_slice(&partition.to_le_bytes());
    place[4..].copy_from_slice(&offset.to_le_bytes());
    stable_id(topic, b'k', &place)
}

/// Text when it is UTF-8, bytes otherwise.
fn value(bytes: &[u8]) -> HeaderValue {
    match std::str::from_utf8(bytes) {
        Ok(text) => HeaderValue::String(text.to_string()),
        Err(_) => HeaderValue::Raw(bytes.to_vec()),
    }
}

/// Add `message` to `packed`.
pub fn pack(packed: &mut PackedMessages, message: &Consumed<'_>) {
    let mut headers = Vec::with_capacity(4 + message.headers.len());
    headers.extend([
        (OURS[0].to_string(), HeaderValue::String(message.topic.to_string())),
        (OURS[1].to_string(), HeaderValue::Int32(message.partition)),
        (OURS[2].to_string(), HeaderValue::Int64(message.offset)),
    ]);
    if let Some(key) = message.key {
        headers.push((OURS[3].to_string(), value(key)));
    }
    for &(name, bytes) in &message.headers {
        if !headers.iter().any(|(taken, _)| taken == name) && !OURS.contains(&name) {
            headers.push((name.to_string(), value(bytes)));
        }
    }
    let fields = Fields {
        id: Some(message_id(message.topic, message.partition, message.offset)),
        origin_timestamp: message.timestamp.map(|ms| ms.max(0) as u64 * 1000),
        headers: &headers,
    };
    packed.push_with(fields, |payload| payload.extend_from_slice(message.payload));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_its_bytes_key_and_headers_and_has_an_id_of_its_place() {
        let consumed = Consumed {
            topic: "orders",
            partition: 2,
            offset: 42,
            timestamp: Some(1_700_000_000_123),
            key: Some(b"customer-7"),
            headers: vec![("trace", b"abc"), ("kafka_topic", b"forged"), ("blob", &[0xff, 0xfe]), ("trace", b"x")],
            payload: b"{\"seq\":1}",
        };
        let mut packed = PackedMessages::new();
        pack(&mut packed, &consumed);
        let messages = packed.messages().unwrap();
        let message = &messages[0];
        assert_eq!(message.payload, b"{\"seq\":1}");
        assert_eq!(message.id, Some(message_id("orders", 2, 42)));
        assert_eq!(message.origin_timestamp, Some(1_700_000_000_123_000));
        let names: Vec<&str> = message.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["kafka_topic", "kafka_partition", "kafka_offset", "kafka_key", "trace", "blob"]);
        assert_eq!(message.headers[0].1, HeaderValue::String("orders".into()), "ours are not overwritten");
        assert_eq!(message.headers[3].1, HeaderValue::String("customer-7".into()));
        assert_eq!(message.headers[4].1, HeaderValue::String("abc".into()), "the first value of a name");
        assert_eq!(message.headers[5].1, HeaderValue::Raw(vec![0xff, 0xfe]), "bytes that are not text stay bytes");

        assert_eq!(message_id("orders", 2, 42), message_id("orders", 2, 42));
        assert_ne!(message_id("orders", 2, 42), message_id("events", 2, 42));
        assert_ne!(message_id("orders", 2, 42), message_id("orders", 3, 42));
        assert_ne!(message_id("orders", 2, 42), message_id("orders", 2, 43));
    }
}
