//! The messages a JetStream message becomes.
//!
//! A stream's message `sequence` is the message with the id `hash(stream) << 64 |
//! sequence` (stable: read again, from the same stream, it is the same message, which
//! the local log and an Iggy target keep once), its origin timestamp the time the
//! server stored it, and the headers `nats_stream`, `nats_subject` and
//! `nats_sequence`, then its own headers (the first value of each name; a name of ours
//! is not taken twice). The payload is its bytes, as they are.

use ferry_guest::nats::Delivered;
use ferry_guest::{Fields, HeaderValue, PackedMessages};

/// The headers this source sets itself.
const OURS: [&str; 3] = ["nats_stream", "nats_subject", "nats_sequence"];

/// The stable id of the message `sequence` of `stream`.
pub fn message_id(stream: &str, sequence: u64) -> u128 {
    // FNV-1a: the same stream name is the same number, in every build.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in stream.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (u128::from(hash) << 64) | u128::from(sequence)
}

/// Add `message` of `stream` to `packed`.
pub fn pack(packed: &mut PackedMessages, stream: &str, message: &Delivered<'_>) {
    let mut headers = vec![
        (OURS[0].to_string(), HeaderValue::String(stream.to_string())),
        (OURS[1].to_string(), HeaderValue::String(message.subject.to_string())),
        (OURS[2].to_string(), HeaderValue::Uint64(message.stream_sequence)),
    ];
    for &(name, value) in &message.headers {
        if !headers.iter().any(|(taken, _)| taken == name) {
            headers.push((name.to_string(), HeaderValue::String(value.to_string())));
        }
    }
    let fields = Fields {
        id: Some(message_id(stream, message.stream_sequence)),
        origin_timestamp: Some(message.published / 1000),
        headers: &headers,
    };
    packed.push_with(fields, |payload| payload.extend_from_slice(message.payload));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incoming<'a>(sequence: u64, headers: &[(&'a str, &'a str)]) -> Delivered<'a> {
        Delivered {
            subject: "orders.created",
            headers: headers.to_vec(),
            payload: b"{\"seq\":1}",
            stream_sequence: sequence,
            delivered: 1,
            published: 1_700_000_000_123_456_789,
            reply: "",
        }
    }

    #[test]
    fn a_message_keeps_its_bytes_and_headers_and_has_an_id_of_its_stream_and_sequence() {
        let mut packed = PackedMessages::new();
        pack(
            &mut packed,
            "ORDERS",
            &incoming(42, &[("Nats-Msg-Id", "7"), ("nats_stream", "forged"), ("Nats-Msg-Id", "8")]),
        );
        let messages = packed.messages().unwrap();
        let message = &messages[0];
        assert_eq!(message.payload, b"{\"seq\":1}");
        assert_eq!(message.id, Some(message_id("ORDERS", 42)));
        assert_eq!(message.origin_timestamp, Some(1_700_000_000_123_456));
        let names: Vec<&str> = message.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["nats_stream", "nats_subject", "nats_sequence", "Nats-Msg-Id"]);
        assert_eq!(message.headers[0].1, HeaderValue::String("ORDERS".into()), "ours are not overwritten");
        assert_eq!(message.headers[3].1, HeaderValue::String("7".into()), "the first value of a name");

        assert_eq!(message_id("ORDERS", 42), message_id("ORDERS", 42));
        assert_ne!(message_id("ORDERS", 42), message_id("EVENTS", 42));
        assert_ne!(message_id("ORDERS", 42), message_id("ORDERS", 43));
    }
}
