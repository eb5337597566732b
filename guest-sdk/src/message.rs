//! Messages as a source builds them, header values in both directions, and their
//! conversion to and from the wire types.

use crate::bindings::iggy::connector::types as wire;

/// One message for the host to deliver.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The message id. Leave it `None` and the host derives a stable one.
    pub id: Option<u128>,
    /// Headers, in order. Keys must be unique within a message.
    pub headers: Vec<(String, HeaderValue)>,
    /// The payload.
    pub payload: Vec<u8>,
    /// When the record came into being at its origin, in microseconds since the epoch.
    pub origin_timestamp: Option<u64>,
}

impl Message {
    /// A message with this payload and nothing else.
    pub fn new(payload: impl Into<Vec<u8>>) -> Self {
        Message { id: None, headers: Vec::new(), payload: payload.into(), origin_timestamp: None }
    }

    /// Set the message id.
    pub fn with_id(mut self, id: u128) -> Self {
        self.id = Some(id);
        self
    }

    /// Add a header.
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<HeaderValue>) -> Self {
        self.headers.push((key.into(), value.into()));
        self
    }

    /// Set the origin timestamp, in microseconds since the Unix epoch.
    pub fn with_origin_timestamp(mut self, micros: u64) -> Self {
        self.origin_timestamp = Some(micros);
        self
    }
}

/// A typed header value; the kinds are those of Apache Iggy headers.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValue {
    Raw(Vec<u8>),
    String(String),
    Bool(bool),
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Int128(i128),
    Uint8(u8),
    Uint16(u16),
    Uint32(u32),
    Uint64(u64),
    Uint128(u128),
    Float32(f32),
    Float64(f64),
}

macro_rules! header_from {
    ($($ty:ty => $case:ident),* $(,)?) => {
        $(impl From<$ty> for HeaderValue {
            fn from(value: $ty) -> Self {
                HeaderValue::$case(value.into())
            }
        })*
    };
}

header_from! {
    String => String, &str => String, bool => Bool, Vec<u8> => Raw, &[u8] => Raw,
    i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64, i128 => Int128,
    u8 => Uint8, u16 => Uint16, u32 => Uint32, u64 => Uint64, u128 => Uint128,
    f32 => Float32, f64 => Float64,
}

pub(crate) fn wire_u128(value: u128) -> wire::Uint128 {
    wire::Uint128 { high: (value >> 64) as u64, low: value as u64 }
}

fn wire_i128(value: i128) -> wire::Int128 {
    wire::Int128 { high: (value >> 64) as i64, low: value as u64 }
}

pub(crate) fn from_wire_u128(value: wire::Uint128) -> u128 {
    (u128::from(value.high) << 64) | u128::from(value.low)
}

fn from_wire_i128(value: wire::Int128) -> i128 {
    (i128::from(value.high) << 64) | i128::from(value.low)
}

impl From<HeaderValue> for wire::HeaderValue {
    fn from(value: HeaderValue) -> Self {
        match value {
            HeaderValue::Raw(v) => wire::HeaderValue::Raw(v),
            HeaderValue::String(v) => wire::HeaderValue::String(v),
            HeaderValue::Bool(v) => wire::HeaderValue::Bool(v),
            HeaderValue::Int8(v) => wire::HeaderValue::Int8(v),
            HeaderValue::Int16(v) => wire::HeaderValue::Int16(v),
            HeaderValue::Int32(v) => wire::HeaderValue::Int32(v),
            HeaderValue::Int64(v) => wire::HeaderValue::Int64(v),
            HeaderValue::Int128(v) => wire::HeaderValue::Int128(wire_i128(v)),
            HeaderValue::Uint8(v) => wire::HeaderValue::Uint8(v),
            HeaderValue::Uint16(v) => wire::HeaderValue::Uint16(v),
            HeaderValue::Uint32(v) => wire::HeaderValue::Uint32(v),
            HeaderValue::Uint64(v) => wire::HeaderValue::Uint64(v),
            HeaderValue::Uint128(v) => wire::HeaderValue::Uint128(wire_u128(v)),
            HeaderValue::Float32(v) => wire::HeaderValue::Float32(v),
            HeaderValue::Float64(v) => wire::HeaderValue::Float64(v),
        }
    }
}

impl From<wire::HeaderValue> for HeaderValue {
    fn from(value: wire::HeaderValue) -> Self {
        match value {
            wire::HeaderValue::Raw(v) => HeaderValue::Raw(v),
            wire::HeaderValue::String(v) => HeaderValue::String(v),
            wire::HeaderValue::Bool(v) => HeaderValue::Bool(v),
            wire::HeaderValue::Int8(v) => HeaderValue::Int8(v),
            wire::HeaderValue::Int16(v) => HeaderValue::Int16(v),
            wire::HeaderValue::Int32(v) => HeaderValue::Int32(v),
            wire::HeaderValue::Int64(v) => HeaderValue::Int64(v),
            wire::HeaderValue::Int128(v) => HeaderValue::Int128(from_wire_i128(v)),
            wire::HeaderValue::Uint8(v) => HeaderValue::Uint8(v),
            wire::HeaderValue::Uint16(v) => HeaderValue::Uint16(v),
            wire::HeaderValue::Uint32(v) => HeaderValue::Uint32(v),
            wire::HeaderValue::Uint64(v) => HeaderValue::Uint64(v),
            wire::HeaderValue::Uint128(v) => HeaderValue::Uint128(from_wire_u128(v)),
            wire::HeaderValue::Float32(v) => HeaderValue::Float32(v),
            wire::HeaderValue::Float64(v) => HeaderValue::Float64(v),
        }
    }
}

impl From<wire::Message> for Message {
    fn from(message: wire::Message) -> Self {
        Message {
            id: message.id.map(from_wire_u128),
            headers: message.headers.into_iter().map(|header| (header.key, header.value.into())).collect(),
            payload: message.payload,
            origin_timestamp: message.origin_timestamp,
        }
    }
}

impl From<Message> for wire::Message {
    fn from(message: Message) -> Self {
        wire::Message {
            id: message.id.map(wire_u128),
            // Most messages carry no headers: skip the iterator for them, it shows in
            // the cost of a batch of small messages.
            headers: if message.headers.is_empty() {
                Vec::new()
            } else {
                message.headers.into_iter().map(|(key, value)| wire::Header { key, value: value.into() }).collect()
            },
            payload: message.payload,
            origin_timestamp: message.origin_timestamp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_cross_the_wire_and_come_back_unchanged() {
        let values = [
            HeaderValue::Raw(vec![0, 255]),
            HeaderValue::String("é".into()),
            HeaderValue::Bool(true),
            HeaderValue::Int8(i8::MIN),
            HeaderValue::Int16(-2),
            HeaderValue::Int32(i32::MAX),
            HeaderValue::Int64(i64::MIN),
            HeaderValue::Int128(i128::MIN),
            HeaderValue::Int128(-1),
            HeaderValue::Int128(i128::MAX),
            HeaderValue::Uint8(u8::MAX),
            HeaderValue::Uint16(7),
            HeaderValue::Uint32(u32::MAX),
            HeaderValue::Uint64(u64::MAX),
            HeaderValue::Uint128(u128::MAX),
            HeaderValue::Uint128((1 << 64) + 3),
            HeaderValue::Float32(-0.5),
            HeaderValue::Float64(1e300),
        ];
        for value in values {
            let wire: wire::HeaderValue = value.clone().into();
            assert_eq!(HeaderValue::from(wire), value);
        }
    }

    #[test]
    fn a_u128_is_split_high_then_low() {
        let wire = wire_u128((5 << 64) | 9);
        assert_eq!((wire.high, wire.low), (5, 9));
        assert_eq!(from_wire_u128(wire), (5 << 64) | 9);
    }
}
