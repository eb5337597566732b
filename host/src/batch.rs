//! What a source produces, as the host sees it: the contract's own types (moved out
//! of the guest once, never copied per message), plus the checks the host makes
//! before delivering a batch.

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

/// Refuse a batch the contract forbids: a message repeating a header key.
pub fn check(messages: &[Message]) -> Result<(), String> {
    for (index, message) in messages.iter().enumerate() {
        for (i, header) in message.headers.iter().enumerate() {
            if message.headers[..i].iter().any(|h| h.key == header.key) {
                return Err(format!("message {index} repeats the header key {:?}", header.key));
            }
        }
    }
    Ok(())
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

    #[test]
    fn repeated_header_keys_are_refused() {
        let header = |key: &str| Header { key: key.into(), value: HeaderValue::Bool(true) };
        let message = |headers| Message { id: None, headers, payload: vec![], origin_timestamp: None };
        assert!(check(&[message(vec![header("a"), header("b")])]).is_ok());
        let error = check(&[message(vec![]), message(vec![header("a"), header("a")])]).unwrap_err();
        assert!(error.contains("message 1") && error.contains("\"a\""), "{error}");
    }
}
