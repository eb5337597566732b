//! A batch's messages packed into one buffer (the `packed` field of a batch; the
//! encoding is in `wit/types.wit`): what the SDK hands the host, which copies one
//! buffer out of the guest instead of lifting every message of a list apart. A source
//! can write its messages in this form itself ([`PackedMessages`]); the SDK packs the
//! [`Message`]s of any other batch. And the way back, [`messages_of`], for a
//! connector's tests of what its `poll` produced.

use crate::bindings::iggy::connector::types as wire;
use crate::message::{HeaderValue, Message};

/// Bit 0 of a message's flags: an id follows.
const HAS_ID: u8 = 1;
/// Bit 1: an origin timestamp follows.
const HAS_ORIGIN_TIMESTAMP: u8 = 2;
/// Bit 2: headers follow.
const HAS_HEADERS: u8 = 4;

/// A batch whose payloads add up to more than this goes as a list: packing copies
/// every payload once more inside the guest, and for large messages the list costs
/// the host little anyway.
const MOST_PACKED_BYTES: usize = 4 << 20;

/// Messages written straight into the packed form: what a source that makes many
/// small messages builds its batch with ([`crate::Batch::from_packed`]), so that no
/// [`Message`], no payload of its own and no second copy is made per message.
///
/// ```
/// use ferry_guest::{Fields, PackedMessages};
///
/// let mut packed = PackedMessages::with_capacity(2 * 64);
/// for seq in 0..2u64 {
///     let fields = Fields { origin_timestamp: Some(1_700_000_000_000_000), ..Fields::default() };
///     packed.push_with(fields, |payload| {
///         payload.extend_from_slice(br#"{"seq":"#);
///         payload.extend_from_slice(seq.to_string().as_bytes());
///         payload.push(b'}');
///     });
/// }
/// let messages = packed.messages().unwrap();
/// assert_eq!(messages[1].payload, br#"{"seq":1}"#);
/// assert_eq!(messages[1].origin_timestamp, Some(1_700_000_000_000_000));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackedMessages {
    bytes: Vec<u8>,
    count: usize,
}

/// What a message carries besides its payload, for [`PackedMessages::push_with`]. As
/// on [`Message`]: leave `id` `None` and the host derives a stable one; header keys
/// must be unique within a message.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fields<'a> {
    pub id: Option<u128>,
    pub origin_timestamp: Option<u64>,
    pub headers: &'a [(String, HeaderValue)],
}

/// The payload of the message being written: bytes are appended to it, nothing
/// before it can be reached. Also an [`std::io::Write`], for `serde_json::to_writer`.
pub struct Payload<'a> {
    bytes: &'a mut Vec<u8>,
    start: usize,
}

impl Payload<'_> {
    #[inline]
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    #[inline]
    pub fn push(&mut self, byte: u8) {
        self.bytes.push(byte);
    }

    /// The payload's length so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'b> Extend<&'b u8> for Payload<'_> {
    fn extend<I: IntoIterator<Item = &'b u8>>(&mut self, bytes: I) {
        self.bytes.extend(bytes);
    }
}

impl std::io::Write for Payload<'_> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl PackedMessages {
    pub fn new() -> Self {
        PackedMessages::default()
    }

    /// Room for `bytes` of packed messages: their payloads, plus [`PER_MESSAGE`]
    /// each for the fields around a payload without headers.
    pub fn with_capacity(bytes: usize) -> Self {
        PackedMessages { bytes: Vec::with_capacity(bytes), count: 0 }
    }

    /// How many messages are written.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Append `message`.
    pub fn push(&mut self, message: &Message) {
        let fields = Fields { id: message.id, origin_timestamp: message.origin_timestamp, headers: &message.headers };
        self.put_fields(fields);
        put_length(&mut self.bytes, message.payload.len());
        self.bytes.extend_from_slice(&message.payload);
    }

    /// Append a message with `fields`, its payload written by `write` straight into
    /// the buffer the host takes.
    ///
    /// # Panics
    /// If the payload `write` makes is 4 GiB or more (no message can be that large).
    pub fn push_with(&mut self, fields: Fields<'_>, write: impl FnOnce(&mut Payload<'_>)) {
        self.put_fields(fields);
        let length_at = self.bytes.len();
        put_length(&mut self.bytes, 0);
        let start = self.bytes.len();
        write(&mut Payload { bytes: &mut self.bytes, start });
        let length = u32::try_from(self.bytes.len() - start).expect("a payload under 4 GiB");
        self.bytes[length_at..start].copy_from_slice(&length.to_le_bytes());
    }

    /// The messages written, read back: for a connector's tests.
    pub fn messages(&self) -> Result<Vec<Message>, String> {
        read_all(&self.bytes, Vec::new())
    }

    /// Flags, id, origin timestamp and headers: everything of a message before its
    /// payload's length. Inlined, as `put_length`, into the connector's loop.
    #[inline]
    fn put_fields(&mut self, fields: Fields<'_>) {
        let Fields { id, origin_timestamp, headers } = fields;
        let packed = &mut self.bytes;
        let flags = if id.is_some() { HAS_ID } else { 0 }
            | if origin_timestamp.is_some() { HAS_ORIGIN_TIMESTAMP } else { 0 }
            | if headers.is_empty() { 0 } else { HAS_HEADERS };
        packed.push(flags);
        if let Some(id) = id {
            packed.extend_from_slice(&id.to_le_bytes());
        }
        if let Some(origin) = origin_timestamp {
            packed.extend_from_slice(&origin.to_le_bytes());
        }
        if !headers.is_empty() {
            put_length(packed, headers.len());
            for (key, value) in headers {
                put_length(packed, key.len());
                packed.extend_from_slice(key.as_bytes());
                put_header_value(packed, value);
            }
        }
        self.count += 1;
    }
}

/// The bytes a message without headers takes around its payload, at most: flags,
/// id, origin timestamp and the payload's length.
pub const PER_MESSAGE: usize = 1 + 16 + 8 + 4;

/// `messages` then `packed` as the host takes them fastest: packed into one buffer
/// (the `packed` field of a batch, encoded as `wit/types.wit` says), or as a list
/// when the messages' payloads are large. Returns `(list, packed)`, one of them empty.
pub(crate) fn to_wire(messages: Vec<Message>, packed: PackedMessages) -> (Vec<wire::Message>, Vec<u8>) {
    if messages.is_empty() {
        return (Vec::new(), packed.bytes);
    }
    let payloads: usize = messages.iter().map(|m| m.payload.len()).sum();
    if payloads > MOST_PACKED_BYTES && packed.is_empty() {
        return (messages.into_iter().map(Into::into).collect(), Vec::new());
    }
    let mut all = PackedMessages::with_capacity(payloads + messages.len() * PER_MESSAGE + packed.bytes.len());
    for message in &messages {
        all.push(message);
    }
    all.bytes.extend_from_slice(&packed.bytes);
    (Vec::new(), all.bytes)
}

#[inline]
fn put_length(packed: &mut Vec<u8>, length: usize) {
    packed.extend_from_slice(&(length as u32).to_le_bytes());
}

/// The kind (the case's index in `header-value`, in the order of `wit/types.wit`),
/// then the value: a length and bytes for raw and string, else its own bytes.
fn put_header_value(packed: &mut Vec<u8>, value: &HeaderValue) {
    let (kind, bytes): (u8, &[u8]) = match value {
        HeaderValue::Raw(v) => (0, v),
        HeaderValue::String(v) => (1, v.as_bytes()),
        fixed => {
            let (kind, bytes): (u8, &[u8]) = match fixed {
                HeaderValue::Bool(v) => (2, &[u8::from(*v)]),
                HeaderValue::Int8(v) => (3, &v.to_le_bytes()),
                HeaderValue::Int16(v) => (4, &v.to_le_bytes()),
                HeaderValue::Int32(v) => (5, &v.to_le_bytes()),
                HeaderValue::Int64(v) => (6, &v.to_le_bytes()),
                HeaderValue::Int128(v) => (7, &v.to_le_bytes()),
                HeaderValue::Uint8(v) => (8, &[*v]),
                HeaderValue::Uint16(v) => (9, &v.to_le_bytes()),
                HeaderValue::Uint32(v) => (10, &v.to_le_bytes()),
                HeaderValue::Uint64(v) => (11, &v.to_le_bytes()),
                HeaderValue::Uint128(v) => (12, &v.to_le_bytes()),
                HeaderValue::Float32(v) => (13, &v.to_le_bytes()),
                HeaderValue::Float64(v) => (14, &v.to_le_bytes()),
                HeaderValue::Raw(_) | HeaderValue::String(_) => unreachable!("matched above"),
            };
            packed.push(kind);
            packed.extend_from_slice(bytes);
            return;
        }
    };
    packed.push(kind);
    put_length(packed, bytes.len());
    packed.extend_from_slice(bytes);
}

/// The messages `batch` carries, from its list or its packed buffer: what the host
/// reads from it. For tests (through [`crate::Driver::poll`]); an error names what
/// does not decode.
pub fn messages_of(batch: &wire::Batch) -> Result<Vec<Message>, String> {
    read_all(&batch.packed, batch.messages.iter().cloned().map(Message::from).collect())
}

/// `messages`, then those packed in `packed`.
fn read_all(packed: &[u8], mut messages: Vec<Message>) -> Result<Vec<Message>, String> {
    let mut reader = Reader { bytes: packed };
    while !reader.bytes.is_empty() {
        let index = messages.len();
        messages.push(reader.message().map_err(|what| format!("packed message {index}: {what}"))?);
    }
    Ok(messages)
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn message(&mut self) -> Result<Message, String> {
        let [flags] = self.take()?;
        let id = (flags & HAS_ID != 0).then(|| self.take().map(u128::from_le_bytes)).transpose()?;
        let origin_timestamp =
            (flags & HAS_ORIGIN_TIMESTAMP != 0).then(|| self.take().map(u64::from_le_bytes)).transpose()?;
        let mut headers = Vec::new();
        if flags & HAS_HEADERS != 0 {
            for _ in 0..self.length()? {
                let key = self.text()?;
                let [kind] = self.take()?;
                headers.push((key, self.header_value(kind)?));
            }
        }
        let payload = self.bytes()?;
        Ok(Message { id, headers, payload, origin_timestamp })
    }

    fn header_value(&mut self, kind: u8) -> Result<HeaderValue, String> {
        Ok(match kind {
            0 => HeaderValue::Raw(self.bytes()?),
            1 => HeaderValue::String(self.text()?),
            2 => HeaderValue::Bool(self.take::<1>()? != [0]),
            3 => HeaderValue::Int8(i8::from_le_bytes(self.take()?)),
            4 => HeaderValue::Int16(i16::from_le_bytes(self.take()?)),
            5 => HeaderValue::Int32(i32::from_le_bytes(self.take()?)),
            6 => HeaderValue::Int64(i64::from_le_bytes(self.take()?)),
            7 => HeaderValue::Int128(i128::from_le_bytes(self.take()?)),
            8 => HeaderValue::Uint8(u8::from_le_bytes(self.take()?)),
            9 => HeaderValue::Uint16(u16::from_le_bytes(self.take()?)),
            10 => HeaderValue::Uint32(u32::from_le_bytes(self.take()?)),
            11 => HeaderValue::Uint64(u64::from_le_bytes(self.take()?)),
            12 => HeaderValue::Uint128(u128::from_le_bytes(self.take()?)),
            13 => HeaderValue::Float32(f32::from_le_bytes(self.take()?)),
            14 => HeaderValue::Float64(f64::from_le_bytes(self.take()?)),
            other => return Err(format!("unknown header kind {other}")),
        })
    }

    fn length(&mut self) -> Result<usize, String> {
        Ok(u32::from_le_bytes(self.take()?) as usize)
    }

    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let length = self.length()?;
        Ok(self.slice(length)?.to_vec())
    }

    fn text(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?).map_err(|e| format!("text that is not UTF-8 ({e})"))
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.slice(N)?.try_into().expect("N bytes"))
    }

    fn slice(&mut self, n: usize) -> Result<&[u8], String> {
        if n > self.bytes.len() {
            return Err(format!("cut short: {n} bytes wanted, {} left", self.bytes.len()));
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_packed_as_the_contract_says() {
        let plain = vec![
            Message::new("ab"),
            Message::new(Vec::new()).with_id(u128::MAX - 1).with_origin_timestamp(7),
            Message::new("c").with_origin_timestamp(1),
        ];
        let (list, packed) = to_wire(plain, PackedMessages::new());
        assert!(list.is_empty());
        let mut expected = vec![0u8, 2, 0, 0, 0, b'a', b'b', 3];
        expected.extend_from_slice(&(u128::MAX - 1).to_le_bytes());
        expected.extend_from_slice(&7u64.to_le_bytes());
        expected.extend_from_slice(&[0, 0, 0, 0, 2]);
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(&[1, 0, 0, 0, b'c']);
        assert_eq!(packed, expected);
    }

    #[test]
    fn headers_are_packed_with_their_kind_and_exact_bytes() {
        let message = Message::new("p")
            .with_header("s", "é")
            .with_header("r", vec![9u8])
            .with_header("b", true)
            .with_header("i16", -2i16)
            .with_header("u128", u128::MAX)
            .with_header("f32", 0.5f32);
        let (_, packed) = to_wire(vec![message], PackedMessages::new());
        let mut expected = vec![4u8, 6, 0, 0, 0];
        let mut header = |key: &str, kind: u8, value: &[u8]| {
            expected.extend_from_slice(&(key.len() as u32).to_le_bytes());
            expected.extend_from_slice(key.as_bytes());
            expected.push(kind);
            expected.extend_from_slice(value);
        };
        header("s", 1, &[2, 0, 0, 0, 0xc3, 0xa9]);
        header("r", 0, &[1, 0, 0, 0, 9]);
        header("b", 2, &[1]);
        header("i16", 4, &(-2i16).to_le_bytes());
        header("u128", 12, &u128::MAX.to_le_bytes());
        header("f32", 13, &0.5f32.to_le_bytes());
        expected.extend_from_slice(&[1, 0, 0, 0, b'p']);
        assert_eq!(packed, expected);
    }

    #[test]
    fn large_batches_go_as_a_list() {
        let big =
            vec![Message::new(vec![0u8; MOST_PACKED_BYTES / 2]), Message::new(vec![1u8; MOST_PACKED_BYTES / 2 + 1])];
        let (list, packed) = to_wire(big, PackedMessages::new());
        assert!(packed.is_empty());
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].payload.len(), MOST_PACKED_BYTES / 2 + 1);
    }

    #[test]
    fn what_is_packed_comes_back_unchanged() {
        let messages = vec![
            Message::new("a").with_id(5).with_origin_timestamp(6).with_header("s", "x").with_header("n", -7i64),
            Message::new(Vec::new()),
            Message::new("b").with_header("u", u128::MAX).with_header("r", vec![1u8, 2]).with_header("f", 1.5f64),
        ];
        let (list, packed) = to_wire(messages.clone(), PackedMessages::new());
        let batch = wire::Batch { id: 1, messages: list, packed, staged_state: None };
        assert_eq!(messages_of(&batch).unwrap(), messages);
        let cut = wire::Batch { packed: batch.packed[..batch.packed.len() - 1].to_vec(), ..batch };
        assert!(messages_of(&cut).unwrap_err().starts_with("packed message 2: cut short"));
    }

    #[test]
    fn a_message_written_in_place_is_packed_as_the_same_message_pushed_whole() {
        let headers = vec![("k".to_string(), HeaderValue::from(3u16))];
        let whole = Message::new("{\"a\":1}").with_id(9).with_origin_timestamp(8).with_header("k", 3u16);
        let mut pushed = PackedMessages::new();
        pushed.push(&whole);
        let mut written = PackedMessages::new();
        let fields = Fields { id: Some(9), origin_timestamp: Some(8), headers: &headers };
        written.push_with(fields, |payload| {
            payload.extend_from_slice(b"{\"a\"");
            std::io::Write::write_all(payload, b":1").unwrap();
            payload.push(b'}');
            assert_eq!(payload.len(), 7, "the payload's own length, not the buffer's");
        });
        assert_eq!(written, pushed);
        assert_eq!(written.len(), 1);
        assert_eq!(written.messages().unwrap(), [whole]);
    }

    #[test]
    fn a_batch_with_both_forms_goes_packed_its_listed_messages_first() {
        let mut packed = PackedMessages::new();
        packed.push_with(Fields::default(), |payload| payload.extend_from_slice(b"second"));
        packed.push_with(Fields::default(), |_| {});
        let (list, bytes) = to_wire(vec![Message::new("first")], packed.clone());
        assert!(list.is_empty());
        let batch = wire::Batch { id: 1, messages: list, packed: bytes, staged_state: None };
        let payloads: Vec<_> = messages_of(&batch).unwrap().into_iter().map(|m| m.payload).collect();
        assert_eq!(payloads, [&b"first"[..], b"second", b""]);
        // Written messages alone go as they are.
        assert_eq!(to_wire(Vec::new(), packed.clone()).1, packed.bytes);
    }
}
