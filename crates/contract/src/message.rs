//! A message as the host holds it, and the contract's plain types with the methods
//! every layer uses on them: 128-bit ids as Rust integers, a header's size, a NACK
//! reason's name. The small ones are `#[inline]`: the batch checks call them for every
//! message from another crate, where they would otherwise be a call each.

use bytes::Bytes;

use crate::wit::types::{self, Header, HeaderValue, Int128, NackReason, Uint128};

/// One message of a batch, as the host delivers it: the contract's `message`, its
/// payload shared bytes (a slice of the buffer a packed batch came in, or the list's
/// own payload), so that handing it to a target copies nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: Option<Uint128>,
    pub headers: Vec<Header>,
    pub payload: Bytes,
    pub origin_timestamp: Option<u64>,
}

impl From<types::Message> for Message {
    #[inline]
    fn from(message: types::Message) -> Self {
        let types::Message { id, headers, payload, origin_timestamp } = message;
        Message { id, headers, payload: payload.into(), origin_timestamp }
    }
}

impl Uint128 {
    #[inline]
    pub fn get(&self) -> u128 {
        (u128::from(self.high) << 64) | u128::from(self.low)
    }
}

impl From<u128> for Uint128 {
    #[inline]
    fn from(value: u128) -> Self {
        Uint128 { high: (value >> 64) as u64, low: value as u64 }
    }
}

impl Int128 {
    #[inline]
    pub fn get(&self) -> i128 {
        ((i128::from(self.high)) << 64) | i128::from(self.low)
    }
}

impl From<i128> for Int128 {
    #[inline]
    fn from(value: i128) -> Self {
        Int128 { high: (value >> 64) as i64, low: value as u64 }
    }
}

/// A header's key and value, as the bytes it takes (a number counts as 16).
#[inline]
pub fn header_size(header: &Header) -> u64 {
    let value = match &header.value {
        HeaderValue::String(s) => s.len(),
        HeaderValue::Raw(b) => b.len(),
        _ => 16,
    };
    (header.key.len() + value) as u64
}

impl NackReason {
    #[inline]
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
}
