//! The packed form of a batch's messages (`packed` in `wit/types.wit`): one buffer the
//! guest fills message after message, which the host copies out of the guest in one
//! piece instead of lifting every message of a list apart. Decoded here into the same
//! messages a list carries, so that nothing after this knows which form came.
//!
//! The decoder trusts nothing: every length is checked against what is left before
//! anything is allocated for it, and the count of messages against the connector's
//! limit before each one is taken.

use bytes::Bytes;

use ferry_config::Limits;
use ferry_contract::{Header, HeaderValue, Int128, Message, Uint128};

/// Bit 0 of a message's flags: an id follows.
const HAS_ID: u8 = 1;
/// Bit 1 of a message's flags: an origin timestamp follows.
const HAS_ORIGIN_TIMESTAMP: u8 = 2;
/// Bit 2 of a message's flags: headers follow.
const HAS_HEADERS: u8 = 4;

/// The messages packed in `packed`, refusing a buffer that does not decode, or that
/// holds more messages, or a message more headers, than `limits` allow (counted
/// before they are decoded). Payloads are slices of `packed`: nothing is copied. The
/// other limits are [`super::check`]'s, as for a list.
pub fn unpack(packed: Bytes, limits: &Limits) -> Result<Vec<Message>, String> {
    let most = limits.max_messages_per_batch;
    let mut reader = Reader { bytes: &packed, at: 0, most_headers: limits.max_headers_per_message };
    let mut messages = Vec::new();
    while reader.at < packed.len() {
        if messages.len() >= most as usize {
            return Err(format!(
                "the batch has more than {most} messages, over limits.max_messages_per_batch ({most})"
            ));
        }
        let (index, start) = (messages.len(), reader.at);
        reader
            .message_into(&packed, &mut messages)
            .map_err(|what| format!("packed message {index} (at byte {start}): {what}"))?;
        if index == 0 {
            // Sized from the first message, as if the others were as long (batches
            // mostly are), never past the limit: a vector of a thousand messages grown
            // by doubling costs more than the decoding.
            let expected = packed.len() / reader.at.max(1) + 1;
            messages.reserve_exact(expected.min(most as usize));
        }
    }
    Ok(messages)
}

/// How many messages `packed` holds, as far as it decodes: a count for the status
/// before the batch is unpacked, which walks the lengths and copies nothing.
pub fn count(packed: &[u8]) -> usize {
    let mut reader = Reader { bytes: packed, at: 0, most_headers: u32::MAX };
    let mut count = 0;
    while reader.at < packed.len() && reader.skip_message().is_ok() {
        count += 1;
    }
    count
}

/// A place in the packed buffer.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The most headers a message may have.
    most_headers: u32,
}

impl<'a> Reader<'a> {
    /// Decode the next message and push it onto `messages`, its payload a slice of
    /// `packed` (the buffer this reads). Pushed field by field where it is decoded:
    /// a message moved whole through a temporary cost more than its decoding.
    #[inline(always)]
    fn message_into(&mut self, packed: &Bytes, messages: &mut Vec<Message>) -> Result<(), String> {
        let [flags] = self.take("its flags")?;
        if flags & !(HAS_ID | HAS_ORIGIN_TIMESTAMP | HAS_HEADERS) != 0 {
            return Err(format!(
                "unknown flags {flags:#04x} (bit 0 says an id follows, bit 1 an origin timestamp, bit 2 headers)"
            ));
        }
        let id = match flags & HAS_ID {
            0 => None,
            _ => Some(Uint128::from(u128::from_le_bytes(self.take("its id")?))),
        };
        let origin_timestamp = match flags & HAS_ORIGIN_TIMESTAMP {
            0 => None,
            _ => Some(u64::from_le_bytes(self.take("its origin timestamp")?)),
        };
        let headers = match flags & HAS_HEADERS {
            0 => Vec::new(),
            _ => self.headers()?,
        };
        let length = self.length("its payload length")?;
        self.slice(length, "its payload")?;
        messages.push(Message { id, headers, payload: packed.slice(self.at - length..self.at), origin_timestamp });
        Ok(())
    }

    /// A count, then that many headers. The count is not trusted for an allocation:
    /// the headers are as many as the buffer holds (each takes six bytes at least),
    /// and their limits are checked after, as for a list.
    fn headers(&mut self) -> Result<Vec<Header>, String> {
        let count = self.length("its header count")?;
        if count > self.most_headers as usize {
            let most = self.most_headers;
            return Err(format!("it has {count} headers, over limits.max_headers_per_message ({most})"));
        }
        let mut headers = Vec::new();
        for index in 0..count {
            let header = self.header().map_err(|what| format!("header {index}: {what}"))?;
            headers.push(header);
        }
        Ok(headers)
    }

    /// A key, a kind (the case of `header-value`, in the order of `wit/types.wit`),
    /// and the value in that kind's bytes.
    fn header(&mut self) -> Result<Header, String> {
        let length = self.length("its key length")?;
        let key = self.text(length, "its key")?;
        let [kind] = self.take("its kind")?;
        let value = match kind {
            0 | 1 => {
                let length = self.length("its value length")?;
                match kind {
                    0 => HeaderValue::Raw(self.slice(length, "its value")?.to_vec()),
                    _ => HeaderValue::String(self.text(length, "its value")?),
                }
            }
            2 => match self.take("its value")? {
                [0] => HeaderValue::Bool(false),
                [1] => HeaderValue::Bool(true),
                [other] => return Err(format!("a bool of {other} (0 or 1)")),
            },
            3 => HeaderValue::Int8(i8::from_le_bytes(self.take("its value")?)),
            4 => HeaderValue::Int16(i16::from_le_bytes(self.take("its value")?)),
            5 => HeaderValue::Int32(i32::from_le_bytes(self.take("its value")?)),
            6 => HeaderValue::Int64(i64::from_le_bytes(self.take("its value")?)),
            7 => HeaderValue::Int128(Int128::from(i128::from_le_bytes(self.take("its value")?))),
            8 => HeaderValue::Uint8(u8::from_le_bytes(self.take("its value")?)),
            9 => HeaderValue::Uint16(u16::from_le_bytes(self.take("its value")?)),
            10 => HeaderValue::Uint32(u32::from_le_bytes(self.take("its value")?)),
            11 => HeaderValue::Uint64(u64::from_le_bytes(self.take("its value")?)),
            12 => HeaderValue::Uint128(Uint128::from(u128::from_le_bytes(self.take("its value")?))),
            13 => HeaderValue::Float32(f32::from_le_bytes(self.take("its value")?)),
            14 => HeaderValue::Float64(f64::from_le_bytes(self.take("its value")?)),
            other => return Err(format!("unknown kind {other} (0 to 14, the cases of header-value in order)")),
        };
        Ok(Header { key, value })
    }

    fn text(&mut self, length: usize, what: &str) -> Result<String, String> {
        let bytes = self.slice(length, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| format!("{what} is not UTF-8 ({e})"))
    }

    #[inline]
    fn skip_message(&mut self) -> Result<(), String> {
        let [flags] = self.take("its flags")?;
        let fixed = if flags & HAS_ID != 0 { 16 } else { 0 } + if flags & HAS_ORIGIN_TIMESTAMP != 0 { 8 } else { 0 };
        self.slice(fixed, "its id and origin timestamp")?;
        if flags & HAS_HEADERS != 0 {
            // Walked, not decoded: nothing is allocated for a count.
            for _ in 0..self.length("its header count")? {
                let key = self.length("its key length")?;
                self.slice(key, "its key")?;
                let [kind] = self.take("its kind")?;
                let value = match kind {
                    0 | 1 => self.length("its value length")?,
                    2 | 3 | 8 => 1,
                    4 | 9 => 2,
                    5 | 10 | 13 => 4,
                    6 | 11 | 14 => 8,
                    7 | 12 => 16,
                    other => return Err(format!("unknown kind {other}")),
                };
                self.slice(value, "its value")?;
            }
        }
        let length = self.length("its payload length")?;
        self.slice(length, "its payload").map(drop)
    }

    // The three readers below are on the path of every message: inlined, with the
    // error (built only when the buffer is cut short) out of the way.
    #[inline(always)]
    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        match self.bytes.get(self.at..self.at + N) {
            Some(bytes) => {
                self.at += N;
                Ok(bytes.try_into().expect("a slice of N bytes"))
            }
            None => Err(self.cut_short(N, what)),
        }
    }

    #[inline(always)]
    fn length(&mut self, what: &str) -> Result<usize, String> {
        Ok(u32::from_le_bytes(self.take(what)?) as usize)
    }

    #[inline(always)]
    fn slice(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        match self.at.checked_add(n).and_then(|end| self.bytes.get(self.at..end)) {
            Some(slice) => {
                self.at += n;
                Ok(slice)
            }
            None => Err(self.cut_short(n, what)),
        }
    }

    #[cold]
    fn cut_short(&self, n: usize, what: &str) -> String {
        let left = self.bytes.len() - self.at;
        format!("the buffer ends {left} bytes into {what}, which takes {n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `messages` packed the way the guest SDK does it.
    fn pack(messages: &[(Option<u128>, Option<u64>, &[u8])]) -> Vec<u8> {
        let mut packed = Vec::new();
        for (id, origin, payload) in messages {
            packed.push(u8::from(id.is_some()) | (u8::from(origin.is_some()) << 1));
            packed.extend(id.map(u128::to_le_bytes).into_iter().flatten());
            packed.extend(origin.map(u64::to_le_bytes).into_iter().flatten());
            packed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            packed.extend_from_slice(payload);
        }
        packed
    }

    fn most(messages: u32) -> Limits {
        Limits { max_messages_per_batch: messages, ..Limits::default() }
    }

    /// One message with no id or timestamp, payload `p`, and `headers` given as
    /// (key, kind, the value's bytes).
    fn with_headers(headers: &[(&str, u8, &[u8])]) -> Vec<u8> {
        let mut packed = vec![HAS_HEADERS];
        packed.extend_from_slice(&(headers.len() as u32).to_le_bytes());
        for (key, kind, value) in headers {
            packed.extend_from_slice(&(key.len() as u32).to_le_bytes());
            packed.extend_from_slice(key.as_bytes());
            packed.push(*kind);
            packed.extend_from_slice(value);
        }
        packed.extend_from_slice(&1u32.to_le_bytes());
        packed.push(b'p');
        packed
    }

    fn unpacked(packed: Vec<u8>, limits: &Limits) -> Result<Vec<Message>, String> {
        unpack(Bytes::from(packed), limits)
    }

    #[test]
    fn packed_messages_come_out_as_the_list_would_carry_them() {
        let packed = pack(&[(None, None, b"a"), (Some(u128::MAX), Some(7), b""), (Some(3), None, b"xyz")]);
        let messages = unpacked(packed, &most(10)).unwrap();
        let got: Vec<_> = messages
            .iter()
            .map(|m| (m.id.as_ref().map(Uint128::get), m.origin_timestamp, &m.payload[..], m.headers.len()))
            .collect();
        assert_eq!(
            got,
            [(None, None, &b"a"[..], 0), (Some(u128::MAX), Some(7), &b""[..], 0), (Some(3), None, &b"xyz"[..], 0)]
        );
    }

    #[test]
    fn payloads_are_slices_of_the_buffer_not_copies() {
        let packed = Bytes::from(pack(&[(None, None, b"abc"), (None, None, b"de")]));
        let messages = unpack(packed.clone(), &most(10)).unwrap();
        let within = |payload: &Bytes| {
            let (start, end) = (payload.as_ptr() as usize, payload.as_ptr() as usize + payload.len());
            start >= packed.as_ptr() as usize && end <= packed.as_ptr() as usize + packed.len()
        };
        assert!(messages.iter().all(|m| within(&m.payload)));
    }

    #[test]
    fn a_buffer_that_does_not_decode_is_refused_naming_the_message_and_the_byte() {
        let good = pack(&[(None, None, b"abc"), (Some(9), Some(1), b"de")]);
        let refused = |packed: Vec<u8>| unpacked(packed, &most(10)).unwrap_err();

        // Cut short at every length but the whole.
        for end in (1..good.len()).filter(|end| *end != 8) {
            let error = refused(good[..end].to_vec());
            assert!(error.contains("the buffer ends"), "cut at {end}: {error}");
            let index = if end < 8 { 0 } else { 1 };
            assert!(error.starts_with(&format!("packed message {index} ")), "cut at {end}: {error}");
        }
        assert!(
            refused(good[..11].to_vec()).contains("(at byte 8): the buffer ends 2 bytes into its id, which takes 16")
        );

        let mut unknown = good.clone();
        unknown[8] |= 0x80;
        assert_eq!(
            refused(unknown),
            "packed message 1 (at byte 8): unknown flags 0x83 (bit 0 says an id follows, bit 1 an origin timestamp, \
             bit 2 headers)"
        );

        // A length past the end is refused before anything is allocated for it.
        let mut huge = pack(&[(None, None, b"")]);
        huge[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(refused(huge).contains("the buffer ends 0 bytes into its payload, which takes 4294967295"));
    }

    #[test]
    fn headers_of_every_kind_come_out_typed() {
        let text = |t: &str| [&(t.len() as u32).to_le_bytes()[..], t.as_bytes()].concat();
        let values: Vec<(&str, u8, Vec<u8>, HeaderValue)> = vec![
            ("raw", 0, text("\u{0}\u{1}"), HeaderValue::Raw(vec![0, 1])),
            ("string", 1, text("é"), HeaderValue::String("é".into())),
            ("bool", 2, vec![1], HeaderValue::Bool(true)),
            ("int8", 3, vec![0xff], HeaderValue::Int8(-1)),
            ("int16", 4, (-2i16).to_le_bytes().to_vec(), HeaderValue::Int16(-2)),
            ("int32", 5, (-3i32).to_le_bytes().to_vec(), HeaderValue::Int32(-3)),
            ("int64", 6, i64::MIN.to_le_bytes().to_vec(), HeaderValue::Int64(i64::MIN)),
            ("int128", 7, (-5i128).to_le_bytes().to_vec(), HeaderValue::Int128(Int128::from(-5))),
            ("uint8", 8, vec![7], HeaderValue::Uint8(7)),
            ("uint16", 9, 8u16.to_le_bytes().to_vec(), HeaderValue::Uint16(8)),
            ("uint32", 10, 9u32.to_le_bytes().to_vec(), HeaderValue::Uint32(9)),
            ("uint64", 11, u64::MAX.to_le_bytes().to_vec(), HeaderValue::Uint64(u64::MAX)),
            ("uint128", 12, u128::MAX.to_le_bytes().to_vec(), HeaderValue::Uint128(Uint128::from(u128::MAX))),
            ("float32", 13, 0.5f32.to_le_bytes().to_vec(), HeaderValue::Float32(0.5)),
            ("float64", 14, (-1e300f64).to_le_bytes().to_vec(), HeaderValue::Float64(-1e300)),
        ];
        let encoded: Vec<(&str, u8, &[u8])> = values.iter().map(|(k, kind, v, _)| (*k, *kind, v.as_slice())).collect();
        let messages = unpacked(with_headers(&encoded), &Limits { max_headers_per_message: 15, ..Limits::default() });
        let [message] = messages.unwrap().try_into().expect("one message");
        assert_eq!(&message.payload[..], b"p");
        let expected: Vec<Header> =
            values.into_iter().map(|(key, _, _, value)| Header { key: key.into(), value }).collect();
        assert_eq!(message.headers, expected);
    }

    #[test]
    fn bad_headers_are_refused_naming_the_header_and_the_rule() {
        let refused = |headers: &[(&str, u8, &[u8])]| unpacked(with_headers(headers), &most(10)).unwrap_err();
        assert_eq!(
            refused(&[("a", 2, &[1]), ("b", 15, &[])]),
            "packed message 0 (at byte 0): header 1: unknown kind 15 (0 to 14, the cases of header-value in order)"
        );
        assert!(refused(&[("a", 2, &[2])]).ends_with("header 0: a bool of 2 (0 or 1)"));
        let mut bad_key = with_headers(&[("k", 2, &[1])]);
        bad_key[9] = 0xff;
        assert!(unpacked(bad_key, &most(10)).unwrap_err().contains("header 0: its key is not UTF-8"));
        let bad_text = [&1u32.to_le_bytes()[..], &[0xff]].concat();
        assert!(refused(&[("k", 1, &bad_text)]).contains("header 0: its value is not UTF-8"));

        // The count is checked against the limit before any header is decoded.
        let many: Vec<(String, u8, &[u8])> = (0..65).map(|i| (format!("k{i}"), 2, &[1][..])).collect();
        let many: Vec<(&str, u8, &[u8])> = many.iter().map(|(k, kind, v)| (k.as_str(), *kind, *v)).collect();
        assert_eq!(
            unpacked(with_headers(&many), &Limits::default()).unwrap_err(),
            "packed message 0 (at byte 0): it has 65 headers, over limits.max_headers_per_message (64)"
        );
    }

    #[test]
    fn the_count_is_of_the_messages_that_decode() {
        let mut good = pack(&[(None, None, b"abc"), (Some(9), Some(1), b"de"), (None, Some(2), b"")]);
        assert_eq!(count(&good), 3);
        assert_eq!(count(&good[..good.len() - 1]), 2, "the last one cut short");
        assert_eq!(count(&[]), 0);
        let text = [&2u32.to_le_bytes()[..], b"ab"].concat();
        let headers: [(&str, u8, &[u8]); 3] = [("s", 1, &text), ("u", 7, &[0; 16]), ("b", 2, &[1])];
        good.extend(with_headers(&headers));
        assert_eq!(count(&good), 4, "headers of every size are walked over");
        good.extend(with_headers(&[("x", 15, &[])]));
        assert_eq!(count(&good), 4, "an unknown kind ends the count");
    }

    #[test]
    fn more_messages_than_the_limit_are_refused_before_the_rest_is_read() {
        let packed = pack(&[(None, None, &b""[..]); 4]);
        assert!(unpacked(packed.clone(), &most(4)).is_ok());
        let error = unpacked(packed, &most(3)).unwrap_err();
        assert_eq!(error, "the batch has more than 3 messages, over limits.max_messages_per_batch (3)");
    }
}
