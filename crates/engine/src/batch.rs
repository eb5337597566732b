//! What a source produces, as the host sees it: the contract's batch as it comes out
//! of the guest, the messages the host takes from it (their payloads copied out of
//! the guest once, never again on their way to a target), plus the checks the host
//! makes before delivering a batch.

mod packed;

pub use packed::count as packed_count;

use std::collections::HashSet;

use bytes::Bytes;

use ferry_config::Limits;
use ferry_contract::guest_text;
use ferry_contract::{Batch, Header, Message, Uint128, header_size};

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

/// Give every message without an id one, from `source`. An id of 0 counts as none:
/// Iggy reads 0 as "assign one for me", which would make the message's id random on
/// every delivery, so it is derived like a missing one. Ids given are never 0.
pub fn assign_ids(messages: &mut [Message], source: IdSource<'_>) {
    let missing = |m: &Message| m.id.as_ref().is_none_or(|id| id.get() == 0);
    if !messages.iter().any(missing) {
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
        if !missing(message) {
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

/// The latest origin timestamp a message may carry: the largest signed 64-bit count
/// of microseconds, which is what stores of time (the local log's SQLite, databases
/// downstream) can hold. A later one could never be stored, so it is refused here,
/// the same for every target.
pub const MAX_ORIGIN_TIMESTAMP: u64 = i64::MAX as u64;

/// Take `batch`'s messages out of whichever form the guest carried them in (see
/// [`packed`]), then [`check`] them with its staged cursor: what the source loop
/// delivers, or the rule the batch breaks.
pub fn admit(batch: Batch, limits: &Limits) -> Result<(Vec<Message>, Option<Vec<u8>>), String> {
    let messages = messages(batch.messages, batch.packed, limits)?;
    check(&messages, batch.staged_state.as_deref(), limits)?;
    Ok((messages, batch.staged_state))
}

/// The messages of a batch, from its list or its packed buffer (one of them empty),
/// refusing a buffer that does not decode or breaks the limits a decoder must keep.
pub fn messages(
    list: Vec<ferry_contract::wit::types::Message>,
    packed: Vec<u8>,
    limits: &Limits,
) -> Result<Vec<Message>, String> {
    if packed.is_empty() {
        return Ok(list.into_iter().map(Message::from).collect());
    }
    if !list.is_empty() {
        return Err(format!(
            "the batch carries messages both in `messages` ({}) and in `packed` ({} bytes): one of them must be empty",
            list.len(),
            packed.len()
        ));
    }
    packed::unpack(Bytes::from(packed), limits)
}

/// Refuse a batch the contract forbids (a message repeating a header key, an origin
/// timestamp no store can hold) or one over the connector's limits. The error names
/// the message and the rule.
///
/// Every pass is linear in the batch, and each cap is checked before the work it
/// bounds: the number of messages before any message is looked at, the number and
/// size of a message's headers before their keys are compared. A guest cannot make
/// the host spend more than the limits allow.
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
    let mut keys = HashSet::new();
    let mut batch_bytes = 0u64;
    for (index, message) in messages.iter().enumerate() {
        check_headers(index, &message.headers, limits, &mut keys)?;
        let size = message_size(message);
        if size > limits.max_message_bytes.bytes() {
            return Err(format!(
                "message {index} is {size} bytes (payload and headers), over limits.max_message_bytes ({})",
                limits.max_message_bytes
            ));
        }
        if let Some(origin) = message.origin_timestamp
            && origin > MAX_ORIGIN_TIMESTAMP
        {
            return Err(format!(
                "message {index} has origin-timestamp {origin}, past the latest any target can store \
                 ({MAX_ORIGIN_TIMESTAMP} microseconds since the epoch)"
            ));
        }
        batch_bytes += size;
        if batch_bytes > limits.max_batch_bytes.bytes() {
            return Err(format!(
                "the batch is over {batch_bytes} bytes (payloads and headers) by message {index}, over \
                 limits.max_batch_bytes ({})",
                limits.max_batch_bytes
            ));
        }
    }
    Ok(())
}

/// Up to this many headers, a message's keys are compared pair by pair (at most 28
/// comparisons) rather than hashed.
const FEW_HEADERS: usize = 8;

/// One message's headers: within their caps (count first, then bytes), and no key
/// twice. `keys` is scratch space, reused from message to message.
fn check_headers<'a>(
    index: usize,
    headers: &'a [Header],
    limits: &Limits,
    keys: &mut HashSet<&'a str>,
) -> Result<(), String> {
    if headers.len() > limits.max_headers_per_message as usize {
        return Err(format!(
            "message {index} has {} headers, over limits.max_headers_per_message ({})",
            headers.len(),
            limits.max_headers_per_message
        ));
    }
    let header_bytes: u64 = headers.iter().map(header_size).sum();
    if header_bytes > limits.max_header_bytes.bytes() {
        return Err(format!(
            "message {index} has {header_bytes} bytes of headers, over limits.max_header_bytes ({})",
            limits.max_header_bytes
        ));
    }
    let repeated = |key: &str| format!("message {index} repeats the header key {}", guest_text::quote(key));
    if headers.len() <= FEW_HEADERS {
        // Most messages have a few headers: comparing each pair is cheaper than hashing.
        for (at, header) in headers.iter().enumerate() {
            if headers[..at].iter().any(|earlier| earlier.key == header.key) {
                return Err(repeated(&header.key));
            }
        }
        return Ok(());
    }
    keys.clear();
    for header in headers {
        if !keys.insert(header.key.as_str()) {
            return Err(repeated(&header.key));
        }
    }
    Ok(())
}

/// Payload and headers, as the bytes a message takes.
fn message_size(message: &Message) -> u64 {
    message.payload.len() as u64 + message.headers.iter().map(header_size).sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_config::ByteSize;
    use ferry_contract::HeaderValue;

    fn messages(n: usize) -> Vec<Message> {
        (0..n)
            .map(|_| Message { id: None, headers: vec![], payload: Bytes::from_static(b"x"), origin_timestamp: None })
            .collect()
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
        let message = |headers| Message { id: None, headers, payload: Bytes::new(), origin_timestamp: None };
        let limits = Limits::default();
        assert!(check(&[message(vec![header("a"), header("b")])], None, &limits).is_ok());
        let error = check(&[message(vec![]), message(vec![header("a"), header("a")])], None, &limits).unwrap_err();
        assert!(error.contains("message 1") && error.contains("\"a\""), "{error}");
        // Past FEW_HEADERS the keys are hashed: the same rule, the same error.
        let many = |repeat: Option<&str>| {
            let mut headers: Vec<Header> = (0..20).map(|i| header(&format!("k{i}"))).collect();
            headers.extend(repeat.map(header));
            message(headers)
        };
        assert!(check(&[many(None)], None, &limits).is_ok());
        let error = check(&[many(Some("k7"))], None, &limits).unwrap_err();
        assert_eq!(error, "message 0 repeats the header key \"k7\"");
    }

    #[test]
    fn batches_over_a_size_limit_are_refused_naming_it() {
        let limits = Limits {
            max_messages_per_batch: 3,
            max_message_bytes: ByteSize(10),
            max_batch_bytes: ByteSize(20),
            max_state_bytes: ByteSize(4),
            ..Limits::default()
        };
        let sized = |n: usize, bytes: usize| -> Vec<Message> {
            (0..n)
                .map(|_| Message {
                    id: None,
                    headers: vec![],
                    payload: vec![b'x'; bytes].into(),
                    origin_timestamp: None,
                })
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
            payload: Bytes::from_static(b"x"),
            origin_timestamp: None,
        };
        assert!(refused(&[with_header], None).contains("limits.max_message_bytes"), "headers count");
    }

    fn header(key: &str) -> Header {
        Header { key: key.into(), value: HeaderValue::Bool(true) }
    }

    fn with_headers(headers: Vec<Header>) -> Message {
        Message { id: None, headers, payload: Bytes::new(), origin_timestamp: None }
    }

    #[test]
    fn the_header_count_is_capped_before_any_key_is_compared() {
        // 300,000 distinct short keys: the attack that cost the host minutes of CPU
        // per batch when keys were compared pairwise. The cap answers at once.
        let many = with_headers((0..300_000).map(|i| header(&format!("k{i}"))).collect());
        let error = check(&[many], None, &Limits::default()).unwrap_err();
        assert_eq!(error, "message 0 has 300000 headers, over limits.max_headers_per_message (64)");

        let limits = Limits { max_headers_per_message: 3, max_header_bytes: ByteSize(60), ..Limits::default() };
        assert!(check(&[with_headers(vec![header("a"), header("b"), header("c")])], None, &limits).is_ok());
        let big = with_headers(vec![header(&"k".repeat(50))]);
        assert!(
            check(&[big], None, &limits).unwrap_err().contains("66 bytes of headers, over limits.max_header_bytes")
        );
    }

    #[test]
    fn a_quoted_header_key_is_escaped_and_cut() {
        let key = format!("evil\n{}", "x".repeat(1 << 20));
        let error = check(
            &[with_headers(vec![header(&key), header(&key)])],
            None,
            &Limits { max_header_bytes: ByteSize::mib(4), max_message_bytes: ByteSize::mib(4), ..Limits::default() },
        )
        .unwrap_err();
        assert!(error.starts_with("message 0 repeats the header key \"evil\\u{a}xxx"), "{error}");
        assert!(error.len() < 200 && error.contains(&format!("{} bytes in all", key.len())), "{error}");
    }

    #[test]
    fn an_origin_timestamp_no_target_can_store_is_refused_naming_the_rule() {
        let at =
            |origin: u64| Message { id: None, headers: vec![], payload: Bytes::new(), origin_timestamp: Some(origin) };
        assert!(check(&[at(MAX_ORIGIN_TIMESTAMP)], None, &Limits::default()).is_ok());
        let error = check(&[at(0), at(u64::MAX)], None, &Limits::default()).unwrap_err();
        assert!(error.starts_with("message 1 has origin-timestamp 18446744073709551615, past the latest"), "{error}");
    }

    #[test]
    fn an_id_of_zero_is_derived_like_a_missing_one() {
        let mut zero = messages(2);
        zero[0].id = Some(Uint128::from(0));
        let mut none = messages(2);
        let source = IdSource::Cursor { connector: "k", committed_before: Some(b"7") };
        assign_ids(&mut zero, source);
        assign_ids(&mut none, source);
        assert_eq!(ids(&zero), ids(&none), "0 means: derive it, stably");
        assert!(ids(&zero).iter().all(|id| *id != 0));
    }

    mod properties {
        //! The batch checks against a plain model of the rules, on arbitrary batches.
        use proptest::prelude::*;

        use super::super::*;
        use ferry_config::ByteSize;
        use ferry_contract::HeaderValue;

        fn header_value() -> impl Strategy<Value = HeaderValue> {
            prop_oneof![
                any::<bool>().prop_map(HeaderValue::Bool),
                any::<u64>().prop_map(HeaderValue::Uint64),
                ".{0,12}".prop_map(HeaderValue::String),
                proptest::collection::vec(any::<u8>(), 0..12).prop_map(HeaderValue::Raw),
            ]
        }

        fn message() -> impl Strategy<Value = Message> {
            let header = ("[a-c\\n]{0,3}", header_value()).prop_map(|(key, value)| Header { key, value });
            (
                proptest::collection::vec(header, 0..8),
                proptest::collection::vec(any::<u8>(), 0..40),
                proptest::option::of(prop_oneof![any::<u64>(), 0..1000u64]),
            )
                .prop_map(|(headers, payload, origin_timestamp)| Message {
                    id: None,
                    headers,
                    payload: payload.into(),
                    origin_timestamp,
                })
        }

        fn limits() -> impl Strategy<Value = Limits> {
            (1..6u32, 1..6u32, 1..80u64, 1..200u64, 1..400u64, 1..8u64).prop_map(
                |(messages, headers, header_bytes, message_bytes, batch_bytes, state)| Limits {
                    max_messages_per_batch: messages,
                    max_headers_per_message: headers,
                    max_header_bytes: ByteSize(header_bytes),
                    max_message_bytes: ByteSize(message_bytes),
                    max_batch_bytes: ByteSize(batch_bytes),
                    max_state_bytes: ByteSize(state),
                    ..Limits::default()
                },
            )
        }

        /// The rules, written the obvious way (pairwise, no early caps).
        fn allowed(messages: &[Message], state: Option<&[u8]>, limits: &Limits) -> bool {
            let size = |m: &Message| m.payload.len() as u64 + m.headers.iter().map(header_size).sum::<u64>();
            messages.len() <= limits.max_messages_per_batch as usize
                && state.is_none_or(|s| s.len() as u64 <= limits.max_state_bytes.bytes())
                && messages.iter().all(|m| {
                    let header_bytes: u64 = m.headers.iter().map(header_size).sum();
                    let unique =
                        m.headers.iter().enumerate().all(|(i, h)| m.headers[..i].iter().all(|o| o.key != h.key));
                    m.headers.len() <= limits.max_headers_per_message as usize
                        && header_bytes <= limits.max_header_bytes.bytes()
                        && unique
                        && size(m) <= limits.max_message_bytes.bytes()
                        && m.origin_timestamp.is_none_or(|t| t <= MAX_ORIGIN_TIMESTAMP)
                })
                && messages.iter().map(size).sum::<u64>() <= limits.max_batch_bytes.bytes()
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

            #[test]
            fn check_agrees_with_the_rules(
                messages in proptest::collection::vec(message(), 0..8),
                state in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..10)),
                limits in limits(),
            ) {
                let verdict = check(&messages, state.as_deref(), &limits);
                prop_assert_eq!(verdict.is_ok(), allowed(&messages, state.as_deref(), &limits), "{:?}", verdict);
                if let Err(rule) = verdict {
                    // Every refusal names the limit or rule it applied, on one clean line.
                    prop_assert!(rule.contains("limits.") || rule.contains("repeats the header key")
                        || rule.contains("origin-timestamp"), "{}", rule);
                    prop_assert_eq!(ferry_contract::guest_text::clean(&rule, 10_000), rule.clone());
                }
            }

            #[test]
            fn derived_ids_are_never_zero_and_never_replace_given_ones(
                given in proptest::collection::vec(proptest::option::of(any::<u128>()), 0..20),
                cursor in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
            ) {
                let mut batch: Vec<Message> = given.iter().map(|id| Message {
                    id: id.map(Uint128::from), headers: vec![], payload: Bytes::new(), origin_timestamp: None,
                }).collect();
                assign_ids(&mut batch, IdSource::Cursor { connector: "k", committed_before: cursor.as_deref() });
                for (message, given) in batch.iter().zip(&given) {
                    let id = message.id.as_ref().unwrap().get();
                    prop_assert_ne!(id, 0);
                    if let Some(given) = given.filter(|g| *g != 0) {
                        prop_assert_eq!(id, given);
                    }
                }
            }
        }
    }

    fn wire_message(payload: &[u8]) -> ferry_contract::wit::types::Message {
        ferry_contract::wit::types::Message {
            id: None,
            headers: vec![],
            payload: payload.to_vec(),
            origin_timestamp: None,
        }
    }

    #[test]
    fn a_batch_takes_its_messages_from_its_list_or_its_buffer_never_both() {
        let limits = Limits::default();
        let listed = super::messages(vec![wire_message(b"p")], Vec::new(), &limits).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(&listed[0].payload[..], b"p");
        assert!(super::messages(Vec::new(), Vec::new(), &limits).unwrap().is_empty(), "an empty batch");
        let packed = vec![0, 1, 0, 0, 0, b'q'];
        assert_eq!(&super::messages(Vec::new(), packed.clone(), &limits).unwrap()[0].payload[..], b"q");
        let error = super::messages(vec![wire_message(b"p")], packed, &limits).unwrap_err();
        assert!(error.contains("both in `messages` (1) and in `packed` (6 bytes)"), "{error}");
    }
}
