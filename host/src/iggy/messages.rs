//! From the contract's messages to Iggy's and back: payload, typed headers, id,
//! origin timestamp; and which partition each one goes to.
//!
//! Keyed partitioning is resolved here, not by the server, so that a batch becomes
//! one send per partition rather than one per distinct key. The mapping is the
//! server's own (`calculate_32(key) % partitions`, over the partitions in id order),
//! so a key lands where an Iggy producer sending it with `messages_key` would land.

use std::collections::BTreeMap;

use bytes::Bytes;
use iggy::prelude::{
    HeaderKey, HeaderKind, HeaderValue as IggyHeaderValue, IggyMessage, Partitioning as IggyPartitioning,
};

use super::topics::TopicInfo;
use crate::batch::{Header, HeaderValue, Int128, Message, Uint128};
use crate::config::Partitioning;
use crate::guest_text;
use crate::sink::input::StoredMessage;

/// `message` as Iggy sends it. Errors say which rule of Iggy's the message breaks.
pub fn to_iggy(index: usize, message: &Message) -> Result<IggyMessage, String> {
    let at = |what: String| format!("message {index}: {what}");
    let headers = if message.headers.is_empty() {
        None
    } else {
        let mut headers = BTreeMap::new();
        for header in &message.headers {
            let key = HeaderKey::try_from(header.key.as_str()).map_err(|e| {
                at(format!("header key {} is not valid for Iggy ({e})", guest_text::quote(&header.key)))
            })?;
            let value = header_value(&header.value)
                .map_err(|e| at(format!("header {} is not valid for Iggy ({e})", guest_text::quote(&header.key))))?;
            headers.insert(key, value);
        }
        Some(headers)
    };
    let mut built = IggyMessage::builder()
        .maybe_id(message.id.as_ref().map(|id| id.get()))
        .payload(Bytes::copy_from_slice(&message.payload))
        .maybe_user_headers(headers)
        .build()
        .map_err(|e| at(format!("Iggy refuses it: {e}")))?;
    if let Some(origin) = message.origin_timestamp {
        built.header.origin_timestamp = origin;
    }
    Ok(built)
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

fn header_value(value: &HeaderValue) -> Result<IggyHeaderValue, iggy::prelude::IggyError> {
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

/// The bytes a header value contributes as a partitioning key: its value as Iggy
/// stores it (text as UTF-8, numbers little-endian).
fn key_bytes(value: &HeaderValue) -> Vec<u8> {
    match value {
        HeaderValue::Raw(v) => v.clone(),
        HeaderValue::String(v) => v.as_bytes().to_vec(),
        HeaderValue::Bool(v) => vec![u8::from(*v)],
        HeaderValue::Int8(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Int16(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Int32(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Int64(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Int128(v) => v.get().to_le_bytes().to_vec(),
        HeaderValue::Uint8(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Uint16(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Uint32(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Uint64(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Uint128(v) => v.get().to_le_bytes().to_vec(),
        HeaderValue::Float32(v) => v.to_le_bytes().to_vec(),
        HeaderValue::Float64(v) => v.to_le_bytes().to_vec(),
    }
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
            Partitioning::Header(name) => {
                message.headers.iter().find(|h| &h.key == name).map(|h| key_bytes(&h.value)).ok_or_else(|| {
                    format!("message {index} has no header {name:?}, which partitioning takes its key from")
                })
            }
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
    use iggy::prelude::Identifier;

    use super::*;
    use crate::batch::{Header, Int128, Uint128};

    fn message(id: u128, headers: Vec<Header>) -> Message {
        Message { id: Some(Uint128::from(id)), headers, payload: b"{}".to_vec(), origin_timestamp: Some(42) }
    }

    fn topic(partitions: Vec<u32>) -> TopicInfo {
        TopicInfo { stream_id: Identifier::named("s").unwrap(), topic_id: Identifier::named("t").unwrap(), partitions }
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
        let converted = to_iggy(0, &message(99, headers)).unwrap();
        assert_eq!(converted.header.id, 99);
        assert_eq!(converted.header.origin_timestamp, 42);
        assert_eq!(&converted.payload[..], b"{}");
        let map = converted.user_headers_map().unwrap().unwrap();
        let get = |k: &str| map.get(&HeaderKey::try_from(k).unwrap()).unwrap().clone();
        assert_eq!(get("name").as_str().unwrap(), "ferry");
        assert_eq!(get("count").as_uint64().unwrap(), 7);
        assert_eq!(get("delta").as_int128().unwrap(), -2);
        assert!(get("ok").as_bool().unwrap());
        assert_eq!(get("ratio").as_float64().unwrap(), 0.5);
        assert_eq!(get("blob").as_raw().unwrap(), &[1, 2, 3]);
    }

    #[test]
    fn what_iggy_cannot_carry_is_an_error_naming_the_message() {
        let empty = Message { id: None, headers: vec![], payload: vec![], origin_timestamp: None };
        let error = to_iggy(3, &empty).unwrap_err();
        assert!(error.starts_with("message 3: Iggy refuses it"), "{error}");
        let long = Header { key: "k".into(), value: HeaderValue::String("x".repeat(300)) };
        let error = to_iggy(1, &message(1, vec![long])).unwrap_err();
        assert!(error.contains("message 1: header \"k\""), "{error}");
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
