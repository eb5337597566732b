//! From the contract's messages to Iggy's and back: payload, typed headers, id,
//! origin timestamp; and which partition each one goes to.
//!
//! Keyed partitioning is resolved here, not by the server, so that a batch becomes
//! one send per partition rather than one per distinct key. The mapping is the
//! server's own (`calculate_32(key) % partitions`, over the partitions in id order),
//! so a key lands where an Iggy producer sending it with `messages_key` would land.

use std::collections::BTreeMap;

use bytes::{BufMut, BytesMut};
use iggy::prelude::{
    HeaderKind, HeaderValue as IggyHeaderValue, IggyError, IggyMessage, IggyMessageHeader, MAX_PAYLOAD_SIZE,
    MAX_USER_HEADERS_SIZE, Partitioning as IggyPartitioning,
};

use super::topics::TopicInfo;
use ferry_config::Partitioning;
use ferry_contract::guest_text;
use ferry_contract::{Header, HeaderValue, Int128, Message, Uint128};
use ferry_engine::sink::input::StoredMessage;

/// The messages of `batch` at `indexes`, as Iggy sends them; `now` (microseconds
/// since the epoch, read once per batch) is the origin timestamp of those that carry
/// none. Errors name the message and the rule of Iggy's it breaks.
///
/// Built field by field rather than with `IggyMessage::builder()`, which for every
/// message copies the payload into an allocation of its own, builds a map of typed
/// headers (two allocations per header) only to encode it to bytes, and reads the
/// clock. Here each payload is the message's own `Bytes`, moved or shared (as
/// `payloads` says), never copied; the
/// encoded headers of the whole send are written once into one buffer and each
/// message's are a slice of it, encoded straight to Iggy's wire format, in the order
/// of Iggy's own map (by key; of a key given twice the last value), so the bytes on
/// the wire are the same.
pub fn to_iggy(
    batch: &mut [Message],
    indexes: &[usize],
    payloads: Payloads,
    now: u64,
) -> Result<Vec<IggyMessage>, String> {
    let size = indexes.iter().map(|&index| headers_size(&batch[index])).sum();
    let mut buffer = BytesMut::with_capacity(size);
    let mut sorted = Vec::new();
    let mut converted = Vec::with_capacity(indexes.len());
    for &index in indexes {
        let message = &batch[index];
        let at = |what: String| format!("message {index}: {what}");
        let refused = |error: IggyError| at(format!("Iggy refuses it: {error}"));
        check_headers(&message.headers).map_err(at)?;
        if message.payload.is_empty() {
            return Err(refused(IggyError::InvalidMessagePayloadLength));
        }
        if message.payload.len() > MAX_PAYLOAD_SIZE as usize {
            return Err(refused(IggyError::TooBigMessagePayload));
        }
        let user_headers = if message.headers.is_empty() {
            None
        } else {
            encode_headers(&message.headers, &mut sorted, &mut buffer);
            if buffer.len() > MAX_USER_HEADERS_SIZE as usize {
                return Err(refused(IggyError::TooBigUserHeaders));
            }
            Some(buffer.split().freeze())
        };
        let header = IggyMessageHeader {
            checksum: 0,
            // Never 0 here (ids are assigned before delivery); 0 would ask the server for one.
            id: message.id.as_ref().map_or(0, Uint128::get),
            offset: 0,
            timestamp: 0,
            origin_timestamp: message.origin_timestamp.unwrap_or(now),
            user_headers_length: user_headers.as_ref().map_or(0, |h| h.len() as u32),
            payload_length: message.payload.len() as u32,
            reserved: 0,
        };
        let payload = match payloads {
            Payloads::Take => std::mem::take(&mut batch[index].payload),
            Payloads::Share => batch[index].payload.clone(),
        };
        converted.push(IggyMessage { header, payload, user_headers });
    }
    Ok(converted)
}

/// What [`to_iggy`] does with the payloads of the messages it converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payloads {
    /// Move each into its Iggy message, leaving the batch's empty: for the batch's
    /// last send, as sharing costs an atomic count per payload, taken and given back.
    Take,
    /// Share each (the batch goes on to another stream after this one).
    Share,
}

/// The bytes `message` takes in the buffer of [`to_iggy`]: its headers as Iggy encodes
/// them (per header: kind, length and bytes of the key, then of the value).
fn headers_size(message: &Message) -> usize {
    let header = |h: &Header| 1 + 4 + h.key.len() + 1 + 4 + wire_value(&h.value, &mut [0; 16]).1.len();
    message.headers.iter().map(header).sum::<usize>()
}

/// Whether Iggy takes every header: keys, and text or raw values, of 1 to 255 bytes.
/// The first header it refuses, in the message's order, is named.
fn check_headers(headers: &[Header]) -> Result<(), String> {
    let fits = |bytes: &[u8]| (1..=255).contains(&bytes.len());
    for header in headers {
        if !fits(header.key.as_bytes()) {
            let key = guest_text::quote(&header.key);
            return Err(format!("header key {key} is not valid for Iggy ({})", IggyError::InvalidHeaderValue));
        }
        if let HeaderValue::String(_) | HeaderValue::Raw(_) = &header.value
            && !fits(wire_value(&header.value, &mut [0; 16]).1)
        {
            let key = guest_text::quote(&header.key);
            return Err(format!("header {key} is not valid for Iggy ({})", IggyError::InvalidHeaderValue));
        }
    }
    Ok(())
}

/// Append `headers` (checked) to `out` in Iggy's wire format, ordered as Iggy's map of
/// them would be: by key (every key here is text, so by its bytes), the last value of
/// a key given twice. `sorted` is scratch space (indexes into `headers`), reused from
/// message to message.
fn encode_headers(headers: &[Header], sorted: &mut Vec<usize>, out: &mut BytesMut) {
    sorted.clear();
    sorted.extend(0..headers.len());
    // Stable: of equal keys, the last given stays last.
    sorted.sort_by(|&a, &b| headers[a].key.as_bytes().cmp(headers[b].key.as_bytes()));
    let mut scratch = [0; 16];
    for (at, &index) in sorted.iter().enumerate() {
        let header = &headers[index];
        if sorted.get(at + 1).is_some_and(|&next| headers[next].key == header.key) {
            continue;
        }
        let (kind, value) = wire_value(&header.value, &mut scratch);
        out.put_u8(HeaderKind::String.as_code());
        out.put_u32_le(header.key.len() as u32);
        out.put_slice(header.key.as_bytes());
        out.put_u8(kind.as_code());
        out.put_u32_le(value.len() as u32);
        out.put_slice(value);
    }
}

/// A message Iggy stored, as a sink receives it: its offset, id and timestamps, its
/// typed headers (a key that is not text, which Iggy allows and the contract does not,
/// is written as text), and its payload.
pub fn from_iggy(message: &IggyMessage) -> Result<StoredMessage, String> {
    let header = &message.header;
    let at = |what: String| format!("offset {}: {what}", header.offset);
    let headers = match message.user_headers_map().map_err(|e| at(format!("unreadable headers ({e})")))? {
        None => Vec::new(),
        Some(map) => map
            .iter()
            .map(|(key, value)| {
                let key = match key.kind() {
                    HeaderKind::String => key.as_str().map(str::to_string).unwrap_or_else(|_| key.to_string()),
                    _ => key.to_string(),
                };
                let value = header_from_iggy(value).map_err(|e| at(format!("header {key:?}: {e}")))?;
                Ok(Header { key, value })
            })
            .collect::<Result<_, String>>()?,
    };
    Ok(StoredMessage {
        offset: header.offset,
        id: Uint128::from(header.id),
        timestamp: header.timestamp,
        // Iggy keeps 0 for "the producer did not say".
        origin_timestamp: (header.origin_timestamp != 0).then_some(header.origin_timestamp),
        headers,
        payload: message.payload.to_vec(),
    })
}

fn header_from_iggy(value: &IggyHeaderValue) -> Result<HeaderValue, iggy::prelude::IggyError> {
    Ok(match value.kind() {
        HeaderKind::Raw => HeaderValue::Raw(value.as_raw()?.to_vec()),
        HeaderKind::String => HeaderValue::String(value.as_str()?.to_string()),
        HeaderKind::Bool => HeaderValue::Bool(value.as_bool()?),
        HeaderKind::Int8 => HeaderValue::Int8(value.as_int8()?),
        HeaderKind::Int16 => HeaderValue::Int16(value.as_int16()?),
        HeaderKind::Int32 => HeaderValue::Int32(value.as_int32()?),
        HeaderKind::Int64 => HeaderValue::Int64(value.as_int64()?),
        HeaderKind::Int128 => HeaderValue::Int128(Int128::from(value.as_int128()?)),
        HeaderKind::Uint8 => HeaderValue::Uint8(value.as_uint8()?),
        HeaderKind::Uint16 => HeaderValue::Uint16(value.as_uint16()?),
        HeaderKind::Uint32 => HeaderValue::Uint32(value.as_uint32()?),
        HeaderKind::Uint64 => HeaderValue::Uint64(value.as_uint64()?),
        HeaderKind::Uint128 => HeaderValue::Uint128(Uint128::from(value.as_uint128()?)),
        HeaderKind::Float32 => HeaderValue::Float32(value.as_float32()?),
        HeaderKind::Float64 => HeaderValue::Float64(value.as_float64()?),
    })
}

/// A header value as Iggy stores it: its kind, and its bytes (text as UTF-8, numbers
/// little-endian), which are written into `scratch` when they are a number's.
fn wire_value<'v>(value: &'v HeaderValue, scratch: &'v mut [u8; 16]) -> (HeaderKind, &'v [u8]) {
    let mut number = |kind: HeaderKind, bytes: &[u8]| {
        scratch[..bytes.len()].copy_from_slice(bytes);
        (kind, bytes.len())
    };
    let (kind, len) = match value {
        HeaderValue::Raw(v) => return (HeaderKind::Raw, v),
        HeaderValue::String(v) => return (HeaderKind::String, v.as_bytes()),
        HeaderValue::Bool(v) => number(HeaderKind::Bool, &[u8::from(*v)]),
        HeaderValue::Int8(v) => number(HeaderKind::Int8, &v.to_le_bytes()),
        HeaderValue::Int16(v) => number(HeaderKind::Int16, &v.to_le_bytes()),
        HeaderValue::Int32(v) => number(HeaderKind::Int32, &v.to_le_bytes()),
        HeaderValue::Int64(v) => number(HeaderKind::Int64, &v.to_le_bytes()),
        HeaderValue::Int128(v) => number(HeaderKind::Int128, &v.get().to_le_bytes()),
        HeaderValue::Uint8(v) => number(HeaderKind::Uint8, &v.to_le_bytes()),
        HeaderValue::Uint16(v) => number(HeaderKind::Uint16, &v.to_le_bytes()),
        HeaderValue::Uint32(v) => number(HeaderKind::Uint32, &v.to_le_bytes()),
        HeaderValue::Uint64(v) => number(HeaderKind::Uint64, &v.to_le_bytes()),
        HeaderValue::Uint128(v) => number(HeaderKind::Uint128, &v.get().to_le_bytes()),
        HeaderValue::Float32(v) => number(HeaderKind::Float32, &v.to_le_bytes()),
        HeaderValue::Float64(v) => number(HeaderKind::Float64, &v.to_le_bytes()),
    };
    (kind, &scratch[..len])
}

/// One send: where to, and the indexes of the messages that go there.
#[derive(Debug, PartialEq)]
pub struct Send {
    pub partitioning: IggyPartitioning,
    pub messages: Vec<usize>,
}

/// How the batch `messages` is sent to `topic`: one send, or one per partition.
pub fn plan(partitioning: &Partitioning, topic: &TopicInfo, messages: &[Message]) -> Result<Vec<Send>, String> {
    let all = || (0..messages.len()).collect();
    let key = |index: usize, message: &Message| -> Result<Vec<u8>, String> {
        match partitioning {
            Partitioning::MessageId => {
                let id = message.id.as_ref().ok_or_else(|| format!("message {index} has no id"))?;
                Ok(id.get().to_le_bytes().to_vec())
            }
            Partitioning::Header(name) => message
                .headers
                .iter()
                .find(|h| &h.key == name)
                .map(|h| wire_value(&h.value, &mut [0; 16]).1.to_vec())
                .ok_or_else(|| {
                    format!("message {index} has no header {name:?}, which partitioning takes its key from")
                }),
            Partitioning::Balanced | Partitioning::PartitionId(_) => unreachable!("no key needed"),
        }
    };
    match partitioning {
        Partitioning::Balanced => Ok(vec![Send { partitioning: IggyPartitioning::balanced(), messages: all() }]),
        Partitioning::PartitionId(id) => {
            Ok(vec![Send { partitioning: IggyPartitioning::partition_id(*id), messages: all() }])
        }
        Partitioning::MessageId | Partitioning::Header(_) => {
            let mut by_partition: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for (index, message) in messages.iter().enumerate() {
                let key = key(index, message)?;
                let slot = iggy_common::calculate_32(&key) as usize % topic.partitions.len();
                by_partition.entry(topic.partitions[slot]).or_default().push(index);
            }
            Ok(by_partition
                .into_iter()
                .map(|(partition, messages)| Send { partitioning: IggyPartitioning::partition_id(partition), messages })
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use iggy::prelude::{HeaderKey, Identifier};

    use super::*;
    use ferry_contract::{Header, Int128, Uint128};

    fn message(id: u128, headers: Vec<Header>) -> Message {
        Message {
            id: Some(Uint128::from(id)),
            headers,
            payload: bytes::Bytes::from_static(b"{}"),
            origin_timestamp: Some(42),
        }
    }

    fn topic(partitions: Vec<u32>) -> TopicInfo {
        TopicInfo { stream_id: Identifier::named("s").unwrap(), topic_id: Identifier::named("t").unwrap(), partitions }
    }

    /// One message converted alone.
    fn one(message: Message, now: u64) -> Result<IggyMessage, String> {
        to_iggy(&mut [message], &[0], Payloads::Take, now).map(|mut converted| converted.remove(0))
    }

    #[test]
    fn payload_id_timestamp_and_typed_headers_are_carried() {
        let headers = vec![
            Header { key: "name".into(), value: HeaderValue::String("ferry".into()) },
            Header { key: "count".into(), value: HeaderValue::Uint64(7) },
            Header { key: "delta".into(), value: HeaderValue::Int128(Int128 { high: -1, low: u64::MAX - 1 }) },
            Header { key: "ok".into(), value: HeaderValue::Bool(true) },
            Header { key: "ratio".into(), value: HeaderValue::Float64(0.5) },
            Header { key: "blob".into(), value: HeaderValue::Raw(vec![1, 2, 3]) },
        ];
        let converted = one(message(99, headers), 7).unwrap();
        assert_eq!(converted.header.id, 99);
        assert_eq!(converted.header.origin_timestamp, 42, "the message's own, not the batch's");
        assert_eq!(&converted.payload[..], b"{}");
        assert_eq!(converted.header.payload_length, 2);
        let map = converted.user_headers_map().unwrap().unwrap();
        let get = |k: &str| map.get(&HeaderKey::try_from(k).unwrap()).unwrap().clone();
        assert_eq!(get("name").as_str().unwrap(), "ferry");
        assert_eq!(get("count").as_uint64().unwrap(), 7);
        assert_eq!(get("delta").as_int128().unwrap(), -2);
        assert!(get("ok").as_bool().unwrap());
        assert_eq!(get("ratio").as_float64().unwrap(), 0.5);
        assert_eq!(get("blob").as_raw().unwrap(), &[1, 2, 3]);
        assert_eq!(map.len(), 6);
    }

    #[test]
    fn a_message_without_origin_timestamp_gets_the_batchs() {
        let without = Message { origin_timestamp: None, ..message(1, vec![]) };
        assert_eq!(one(without, 1_700_000_000_000_000).unwrap().header.origin_timestamp, 1_700_000_000_000_000);
    }

    #[test]
    fn what_iggy_cannot_carry_is_an_error_naming_the_message() {
        let empty = Message { id: None, headers: vec![], payload: bytes::Bytes::new(), origin_timestamp: None };
        let mut batch = [message(1, vec![]), message(2, vec![]), message(3, vec![]), empty];
        let error = to_iggy(&mut batch, &[0, 3], Payloads::Take, 0).unwrap_err();
        assert!(error.starts_with("message 3: Iggy refuses it"), "{error}");
        let long = Header { key: "k".into(), value: HeaderValue::String("x".repeat(300)) };
        let error = to_iggy(&mut [message(1, vec![]), message(1, vec![long])], &[1], Payloads::Take, 0).unwrap_err();
        assert!(error.contains("message 1: header \"k\""), "{error}");
        let unnamed = Header { key: String::new(), value: HeaderValue::Bool(true) };
        let error = one(message(1, vec![unnamed]), 0).unwrap_err();
        assert!(error.starts_with("message 0: header key \"\" is not valid for Iggy"), "{error}");
    }

    #[test]
    fn the_messages_of_a_batch_keep_their_own_bytes() {
        // They share one buffer: each must see its own slice of it, whatever the order.
        let mut batch: Vec<Message> = (0..50u32)
            .map(|i| Message {
                id: Some(Uint128::from(u128::from(i) + 1)),
                headers: (0..i % 3)
                    .map(|h| Header { key: format!("h{h}"), value: HeaderValue::String("v".repeat(i as usize + 1)) })
                    .collect(),
                payload: vec![i as u8; i as usize + 1].into(),
                origin_timestamp: None,
            })
            .collect();
        let indexes: Vec<usize> = (0..50).rev().step_by(2).collect();
        let expected: Vec<IggyMessage> =
            indexes.iter().map(|&index| through_the_builder(index, &batch[index], 5).unwrap()).collect();
        let before = batch.clone();
        // Shared (for a stream the batch goes on from), the batch is left as it was.
        assert_eq!(to_iggy(&mut batch, &indexes, Payloads::Share, 5).unwrap(), expected);
        assert_eq!(batch, before);
        // Taken (for the last stream), the same messages, and the taken payloads gone
        // from the batch, the others left.
        assert_eq!(to_iggy(&mut batch, &indexes, Payloads::Take, 5).unwrap(), expected);
        for (index, (now, was)) in batch.iter().zip(&before).enumerate() {
            let taken = indexes.contains(&index);
            assert_eq!(now.payload.is_empty(), taken, "message {index}");
            assert_eq!((&now.headers, &now.id), (&was.headers, &was.id), "message {index}");
        }
    }

    #[test]
    fn headers_over_iggys_total_limit_are_refused_as_the_builder_refuses_them() {
        let headers: Vec<Header> = (0..250)
            .map(|i| Header { key: format!("{i:0>200}"), value: HeaderValue::String("x".repeat(255)) })
            .collect();
        let error = one(message(1, headers.clone()), 0).unwrap_err();
        assert_eq!(Err(error), through_the_builder(0, &message(1, headers), 0));
    }

    /// The conversion as it was done through Iggy's own types and builder: what
    /// [`to_iggy`] must give, byte for byte.
    fn through_the_builder(index: usize, message: &Message, now: u64) -> Result<IggyMessage, String> {
        let at = |what: String| format!("message {index}: {what}");
        let headers = if message.headers.is_empty() {
            None
        } else {
            let mut headers = BTreeMap::new();
            for header in &message.headers {
                let key = HeaderKey::try_from(header.key.as_str()).map_err(|e| {
                    at(format!("header key {} is not valid for Iggy ({e})", guest_text::quote(&header.key)))
                })?;
                let value = iggy_value(&header.value).map_err(|e| {
                    at(format!("header {} is not valid for Iggy ({e})", guest_text::quote(&header.key)))
                })?;
                headers.insert(key, value);
            }
            Some(headers)
        };
        let mut built = IggyMessage::builder()
            .maybe_id(message.id.as_ref().map(|id| id.get()))
            .payload(message.payload.clone())
            .maybe_user_headers(headers)
            .build()
            .map_err(|e| at(format!("Iggy refuses it: {e}")))?;
        built.header.origin_timestamp = message.origin_timestamp.unwrap_or(now);
        Ok(built)
    }

    fn iggy_value(value: &HeaderValue) -> Result<IggyHeaderValue, IggyError> {
        Ok(match value {
            HeaderValue::Raw(v) => IggyHeaderValue::try_from(v.as_slice())?,
            HeaderValue::String(v) => IggyHeaderValue::try_from(v.as_str())?,
            HeaderValue::Bool(v) => (*v).into(),
            HeaderValue::Int8(v) => (*v).into(),
            HeaderValue::Int16(v) => (*v).into(),
            HeaderValue::Int32(v) => (*v).into(),
            HeaderValue::Int64(v) => (*v).into(),
            HeaderValue::Int128(v) => v.get().into(),
            HeaderValue::Uint8(v) => (*v).into(),
            HeaderValue::Uint16(v) => (*v).into(),
            HeaderValue::Uint32(v) => (*v).into(),
            HeaderValue::Uint64(v) => (*v).into(),
            HeaderValue::Uint128(v) => v.get().into(),
            HeaderValue::Float32(v) => (*v).into(),
            HeaderValue::Float64(v) => (*v).into(),
        })
    }

    mod properties {
        //! [`to_iggy`] against the conversion through Iggy's builder, on arbitrary
        //! messages: the same messages (bytes, headers on the wire, id, timestamps) or
        //! the same error.
        use proptest::prelude::*;

        use super::*;

        fn header_value() -> impl Strategy<Value = HeaderValue> {
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..4).prop_map(HeaderValue::Raw),
                prop_oneof![".{0,4}", "x{250,260}"].prop_map(HeaderValue::String),
                any::<bool>().prop_map(HeaderValue::Bool),
                any::<i8>().prop_map(HeaderValue::Int8),
                any::<i16>().prop_map(HeaderValue::Int16),
                any::<i32>().prop_map(HeaderValue::Int32),
                any::<i64>().prop_map(HeaderValue::Int64),
                any::<i128>().prop_map(|v| HeaderValue::Int128(Int128::from(v))),
                any::<u8>().prop_map(HeaderValue::Uint8),
                any::<u16>().prop_map(HeaderValue::Uint16),
                any::<u32>().prop_map(HeaderValue::Uint32),
                any::<u64>().prop_map(HeaderValue::Uint64),
                any::<u128>().prop_map(|v| HeaderValue::Uint128(Uint128::from(v))),
                any::<f32>().prop_map(HeaderValue::Float32),
                any::<f64>().prop_map(HeaderValue::Float64),
            ]
        }

        fn message() -> impl Strategy<Value = Message> {
            // Few, short keys: unsorted, repeated, now and then empty.
            let header = ("[a-cé]{0,2}", header_value()).prop_map(|(key, value)| Header { key, value });
            (
                proptest::option::of(1..u128::MAX),
                proptest::collection::vec(header, 0..6),
                proptest::collection::vec(any::<u8>(), 0..40),
                proptest::option::of(any::<u64>()),
            )
                .prop_map(|(id, headers, payload, origin_timestamp)| Message {
                    id: id.map(Uint128::from),
                    headers,
                    payload: payload.into(),
                    origin_timestamp,
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

            #[test]
            fn to_iggy_gives_what_the_builder_gives(
                batch in proptest::collection::vec(message(), 1..6),
                now in any::<u64>(),
            ) {
                let indexes: Vec<usize> = (0..batch.len()).rev().collect();
                let expected = indexes
                    .iter()
                    .map(|&index| through_the_builder(index, &batch[index], now))
                    .collect::<Result<Vec<_>, _>>();
                let mut batch = batch;
                prop_assert_eq!(to_iggy(&mut batch, &indexes, Payloads::Take, now), expected);
            }
        }
    }

    #[test]
    fn balanced_and_fixed_partitioning_send_the_batch_whole() {
        let batch = vec![message(1, vec![]), message(2, vec![])];
        let one = plan(&Partitioning::Balanced, &topic(vec![0, 1]), &batch).unwrap();
        assert_eq!(one, [Send { partitioning: IggyPartitioning::balanced(), messages: vec![0, 1] }]);
        let fixed = plan(&Partitioning::PartitionId(1), &topic(vec![0, 1]), &batch).unwrap();
        assert_eq!(fixed, [Send { partitioning: IggyPartitioning::partition_id(1), messages: vec![0, 1] }]);
    }

    #[test]
    fn keyed_partitioning_groups_by_partition_the_way_the_server_maps_keys() {
        let by = |customer: &str, id| {
            message(id, vec![Header { key: "customer".into(), value: HeaderValue::String(customer.into()) }])
        };
        let batch = vec![by("alice", 1), by("bob", 2), by("alice", 3), by("carol", 4)];
        let topic = topic(vec![0, 1, 2]);
        let sends = plan(&Partitioning::Header("customer".into()), &topic, &batch).unwrap();
        let mut seen: Vec<usize> = sends.iter().flat_map(|s| s.messages.clone()).collect();
        seen.sort();
        assert_eq!(seen, [0, 1, 2, 3], "every message exactly once");
        let partition_of = |index: usize| sends.iter().position(|s| s.messages.contains(&index)).unwrap();
        assert_eq!(partition_of(0), partition_of(2), "the same key, the same partition");
        let expected = topic.partitions[iggy_common::calculate_32(b"alice") as usize % 3];
        let alice = sends.iter().find(|s| s.messages.contains(&0)).unwrap();
        assert_eq!(alice.partitioning, IggyPartitioning::partition_id(expected));

        let error = plan(&Partitioning::Header("region".into()), &topic, &batch).unwrap_err();
        assert!(error.contains("message 0 has no header \"region\""), "{error}");
        let by_id = plan(&Partitioning::MessageId, &topic, &batch).unwrap();
        assert_eq!(by_id.iter().map(|s| s.messages.len()).sum::<usize>(), 4);
    }
}
