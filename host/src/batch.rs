//! What a source produces, as the host sees it: the contract's own types (moved out
//! of the guest once, never copied per message), plus the checks the host makes
//! before delivering a batch.

use crate::config::Limits;
pub use crate::runtime::bindings::types::{
    Batch, BatchResult, Header, HeaderValue, Int128, Message, Nack, NackReason, Uint128,
};

impl Uint128 {
    pub fn get(&self) -> u128 {
        (u128::from(self.high) << 64) | u128::from(self.low)
    }
}

impl From<u128> for Uint128 {
    fn from(value: u128) -> Self {
        Uint128 { high: (value >> 64) as u64, low: value as u64 }
    }
}

impl Int128 {
    pub fn get(&self) -> i128 {
        ((i128::from(self.high)) << 64) | i128::from(self.low)
    }
}

/// Where the ids of messages the guest left without one come from.
#[derive(Debug, Clone, Copy)]
pub enum IdSource<'a> {
    /// Derived from the connector, the cursor committed before the batch and the
    /// index in the batch: a batch produced again from the same cursor (after a NACK
    /// or a crash) carries the same ids, so a consumer can drop the duplicates by id.
    Cursor { connector: &'a str, committed_before: Option<&'a [u8]> },
    /// Random. For batches that stage no cursor: nothing anchors them, and derived
    /// ids would repeat from one such batch to the next.
    Random,
}

/// Give every message without an id one, from `source`. Ids are never 0 (Iggy reads
/// 0 as "assign one for me").
pub fn assign_ids(messages: &mut [Message], source: IdSource<'_>) {
    if messages.iter().all(|m| m.id.is_some()) {
        return;
    }
    let base = match source {
        IdSource::Cursor { connector, committed_before } => {
            // An unambiguous encoding: lengths before variable parts.
            let mut anchor = Vec::with_capacity(connector.len() + 24);
            anchor.extend_from_slice(&(connector.len() as u64).to_le_bytes());
            anchor.extend_from_slice(connector.as_bytes());
            match committed_before {
                None => anchor.push(0),
                Some(cursor) => {
                    anchor.push(1);
                    anchor.extend_from_slice(&(cursor.len() as u64).to_le_bytes());
                    anchor.extend_from_slice(cursor);
                }
            }
            Some(xxhash_rust::xxh3::xxh3_128(&anchor).to_le_bytes())
        }
        IdSource::Random => None,
    };
    for (index, message) in messages.iter_mut().enumerate() {
        if message.id.is_some() {
            continue;
        }
        let id = match &base {
            Some(base) => {
                let mut input = [0u8; 24];
                input[..16].copy_from_slice(base);
                input[16..].copy_from_slice(&(index as u64).to_le_bytes());
                xxhash_rust::xxh3::xxh3_128(&input)
            }
            None => fastrand::u128(..),
        };
        message.id = Some(Uint128::from(id.max(1)));
    }
}

/// Refuse a batch the contract forbids (a message repeating a header key) or one
/// over the connector's size limits. The error names the message and the limit.
pub fn check(messages: &[Message], staged_state: Option<&[u8]>, limits: &Limits) -> Result<(), String> {
    if messages.len() > limits.max_messages_per_batch as usize {
        return Err(format!(
            "the batch has {} messages, over limits.max_messages_per_batch ({})",
            messages.len(),
            limits.max_messages_per_batch
        ));
    }
    if let Some(state) = staged_state
        && state.len() as u64 > limits.max_state_bytes.bytes()
    {
        return Err(format!(
            "the staged cursor is {} bytes, over limits.max_state_bytes ({})",
            state.len(),
            limits.max_state_bytes
        ));
    }
    let mut batch_bytes = 0u64;
    for (index, message) in messages.iter().enumerate() {
        for (i, header) in message.headers.iter().enumerate() {
            if message.headers[..i].iter().any(|h| h.key == header.key) {
                return Err(format!("message {index} repeats the header key {:?}", header.key));
            }
        }
        let size = message_size(message);
        if size > limits.max_message_bytes.bytes() {
            return Err(format!(
                "message {index} is {size} bytes (payload and headers), over limits.max_message_bytes ({})",
                limits.max_message_bytes
            ));
        }
        batch_bytes += size;
    }
    if batch_bytes > limits.max_batch_bytes.bytes() {
        return Err(format!(
            "the batch is {batch_bytes} bytes (payloads and headers), over limits.max_batch_bytes ({})",
            limits.max_batch_bytes
        ));
    }
    Ok(())
}

/// Payload and headers, as the bytes a message takes.
fn message_size(message: &Message) -> u64 {
    let headers: usize = message
        .headers
        .iter()
        .map(|h| {
            h.key.len()
                + match &h.value {
                    HeaderValue::String(s) => s.len(),
                    HeaderValue::Raw(b) => b.len(),
                    _ => 16,
                }
        })
        .sum();
    (message.payload.len() + headers) as u64
}

impl NackReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            NackReason::DeliveryFailed => "delivery-failed",
            NackReason::StateSaveFailed => "state-save-failed",
            NackReason::TimedOut => "timed-out",
            NackReason::Rejected => "rejected",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u128_halves_round_trip() {
        for value in [0u128, 1, u64::MAX as u128, (u64::MAX as u128) + 1, u128::MAX] {
            assert_eq!(Uint128::from(value).get(), value);
        }
        assert_eq!(Int128 { high: -1, low: u64::MAX }.get(), -1);
        assert_eq!(Int128 { high: i64::MIN, low: 0 }.get(), i128::MIN);
    }

    fn messages(n: usize) -> Vec<Message> {
        (0..n).map(|_| Message { id: None, headers: vec![], payload: b"x".to_vec(), origin_timestamp: None }).collect()
    }

    fn ids(messages: &[Message]) -> Vec<u128> {
        messages.iter().map(|m| m.id.as_ref().unwrap().get()).collect()
    }

    #[test]
    fn derived_ids_depend_on_connector_cursor_and_index_only() {
        let derive = |connector, cursor: Option<&[u8]>| {
            let mut batch = messages(3);
            assign_ids(&mut batch, IdSource::Cursor { connector, committed_before: cursor });
            ids(&batch)
        };
        let first = derive("orders", Some(b"{\"next_seq\":10}"));
        assert_eq!(first, derive("orders", Some(b"{\"next_seq\":10}")), "the same batch again: the same ids");
        assert_eq!(first.iter().collect::<std::collections::HashSet<_>>().len(), 3, "distinct within a batch");
        assert_ne!(first, derive("orders", Some(b"{\"next_seq\":13}")), "another cursor: other ids");
        assert_ne!(first, derive("payments", Some(b"{\"next_seq\":10}")), "another connector: other ids");
        assert_ne!(derive("orders", None), derive("orders", Some(b"")), "no cursor is not an empty cursor");
        // Pinned, so that a change of the derivation (which would break dedup across an
        // upgrade) cannot go unnoticed.
        assert_eq!(derive("k", None)[0], 0x7938_c451_8b08_d272_35b0_13e7_9a26_7bad);
    }

    #[test]
    fn given_ids_are_kept_and_random_ids_differ() {
        let mut batch = messages(2);
        batch[0].id = Some(Uint128::from(77));
        assign_ids(&mut batch, IdSource::Cursor { connector: "k", committed_before: None });
        assert_eq!(ids(&batch)[0], 77);
        let (mut a, mut b) = (messages(2), messages(2));
        assign_ids(&mut a, IdSource::Random);
        assign_ids(&mut b, IdSource::Random);
        assert_ne!(ids(&a), ids(&b));
        assert!(ids(&a).iter().all(|id| *id != 0));
    }

    #[test]
    fn repeated_header_keys_are_refused() {
        let header = |key: &str| Header { key: key.into(), value: HeaderValue::Bool(true) };
        let message = |headers| Message { id: None, headers, payload: vec![], origin_timestamp: None };
        let limits = Limits::default();
        assert!(check(&[message(vec![header("a"), header("b")])], None, &limits).is_ok());
        let error = check(&[message(vec![]), message(vec![header("a"), header("a")])], None, &limits).unwrap_err();
        assert!(error.contains("message 1") && error.contains("\"a\""), "{error}");
    }

    #[test]
    fn batches_over_a_size_limit_are_refused_naming_it() {
        use crate::config::ByteSize;
        let limits = Limits {
            max_messages_per_batch: 3,
            max_message_bytes: ByteSize(10),
            max_batch_bytes: ByteSize(20),
            max_state_bytes: ByteSize(4),
            ..Limits::default()
        };
        let sized = |n: usize, bytes: usize| -> Vec<Message> {
            (0..n)
                .map(|_| Message { id: None, headers: vec![], payload: vec![b'x'; bytes], origin_timestamp: None })
                .collect()
        };
        assert!(check(&sized(3, 6), Some(b"abcd"), &limits).is_ok(), "at every limit is within them");
        let refused = |messages: &[Message], state: Option<&[u8]>| check(messages, state, &limits).unwrap_err();
        assert!(refused(&sized(4, 1), None).contains("limits.max_messages_per_batch (3)"));
        assert!(refused(&sized(1, 11), None).contains("message 0 is 11 bytes"));
        assert!(refused(&sized(3, 7), None).contains("limits.max_batch_bytes (20 B)"));
        assert!(refused(&sized(1, 1), Some(b"abcde")).contains("limits.max_state_bytes (4 B)"));
        let with_header = Message {
            id: None,
            headers: vec![Header { key: "k".into(), value: HeaderValue::String("123456789".into()) }],
            payload: vec![b'x'],
            origin_timestamp: None,
        };
        assert!(refused(&[with_header], None).contains("limits.max_message_bytes"), "headers count");
    }
}
