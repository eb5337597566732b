//! Messages packed into one buffer, the layout `wit/kafka.wit` gives under `fetch`,
//! both ways: what a fetch answers ([`pack`]), and what a guest produces
//! ([`Packed`]). One buffer crosses between guest and host, not a record, a key and a
//! list of headers per message, each lifted and allocated apart.

use rdkafka::message::{Headers, Message};

/// `message` at the end of `packed`.
pub fn pack<M: Message>(packed: &mut Vec<u8>, message: &M) {
    packed.extend_from_slice(&message.partition().to_le_bytes());
    packed.extend_from_slice(&message.offset().to_le_bytes());
    packed.extend_from_slice(&message.timestamp().to_millis().unwrap_or(-1).to_le_bytes());
    bytes(packed, message.topic().as_bytes());
    match message.key() {
        Some(key) => bytes(packed, key),
        None => packed.extend_from_slice(&u32::MAX.to_le_bytes()),
    }
    match message.headers() {
        Some(headers) => {
            packed.extend_from_slice(&(headers.count() as u32).to_le_bytes());
            for header in headers.iter() {
                bytes(packed, header.key.as_bytes());
                bytes(packed, header.value.unwrap_or_default());
            }
        }
        None => packed.extend_from_slice(&0u32.to_le_bytes()),
    }
    bytes(packed, message.payload().unwrap_or_default());
}

/// `data` after its length.
fn bytes(packed: &mut Vec<u8>, data: &[u8]) {
    packed.extend_from_slice(&(data.len() as u32).to_le_bytes());
    packed.extend_from_slice(data);
}

/// A message to produce, borrowed from the guest's buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Outgoing<'a> {
    pub topic: &'a str,
    /// None: the partitioner chooses by the key.
    pub partition: Option<i32>,
    /// Milliseconds since the Unix epoch; none: the time of producing.
    pub timestamp: Option<i64>,
    pub key: Option<&'a [u8]>,
    pub headers: Vec<(&'a str, &'a [u8])>,
    pub payload: &'a [u8],
}

/// The messages of a guest's packed buffer, in order; the first that cannot be read
/// ends it with an error naming the byte where it starts.
pub struct Packed<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Packed<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Packed { data, at: 0 }
    }

    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let taken = self.data.get(self.at..self.at.checked_add(count)?)?;
        self.at += count;
        Some(taken)
    }

    fn fixed<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).map(|bytes| bytes.try_into().expect("N bytes"))
    }

    fn length(&mut self) -> Option<u32> {
        self.fixed().map(u32::from_le_bytes)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let length = self.length()?;
        self.take(length as usize)
    }

    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    fn message(&mut self) -> Option<Outgoing<'a>> {
        let partition = i32::from_le_bytes(self.fixed()?);
        let _offset: [u8; 8] = self.fixed()?;
        let timestamp = i64::from_le_bytes(self.fixed()?);
        let topic = self.text()?;
        let key = match self.length()? {
            u32::MAX => None,
            length => Some(self.take(length as usize)?),
        };
        let count = self.length()?;
        let mut headers = Vec::with_capacity(count.min(64) as usize);
        for _ in 0..count {
            headers.push((self.text()?, self.bytes()?));
        }
        let payload = self.bytes()?;
        Some(Outgoing {
            topic,
            partition: (partition >= 0).then_some(partition),
            timestamp: (timestamp >= 0).then_some(timestamp),
            key,
            headers,
            payload,
        })
    }
}

impl<'a> Iterator for Packed<'a> {
    type Item = Result<Outgoing<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at == self.data.len() {
            return None;
        }
        let start = self.at;
        let message = self.message().ok_or_else(|| {
            format!(
                "the packed messages cannot be read from byte {start} of {}: cut short, or a topic or header name \
                 that is not UTF-8",
                self.data.len()
            )
        });
        if message.is_err() {
            self.at = self.data.len();
        }
        Some(message)
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::Timestamp;
    use rdkafka::message::{Header, OwnedHeaders, OwnedMessage};

    use super::*;

    #[test]
    fn what_is_packed_reads_back_and_a_cut_buffer_is_named() {
        let headers = OwnedHeaders::new().insert(Header { key: "a", value: Some("1") }).insert(Header {
            key: "b",
            value: None::<&[u8]>,
        });
        let keyed = OwnedMessage::new(
            Some(b"xyz".to_vec()),
            Some(b"k".to_vec()),
            "orders".into(),
            Timestamp::CreateTime(1_700_000_000_000),
            3,
            42,
            Some(headers),
        );
        let bare = OwnedMessage::new(None, None, "t".into(), Timestamp::NotAvailable, -1, 0, None);
        let mut data = Vec::new();
        pack(&mut data, &keyed);
        pack(&mut data, &bare);

        let read: Vec<Outgoing<'_>> = Packed::new(&data).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            read,
            [
                Outgoing {
                    topic: "orders",
                    partition: Some(3),
                    timestamp: Some(1_700_000_000_000),
                    key: Some(b"k"),
                    headers: vec![("a", b"1"), ("b", b"")],
                    payload: b"xyz",
                },
                Outgoing { topic: "t", partition: None, timestamp: None, key: None, headers: vec![], payload: b"" },
            ]
        );

        let mut cut = Packed::new(&data[..data.len() - 1]);
        assert!(cut.next().unwrap().is_ok());
        // Partition, offset, timestamp, "t", no key, no headers, no payload.
        let second = data.len() - (4 + 8 + 8 + 4 + 1 + 4 + 4 + 4);
        let error = cut.next().unwrap().unwrap_err();
        assert!(error.contains(&format!("from byte {second} of {}", data.len() - 1)), "{error}");
        assert!(cut.next().is_none(), "nothing after an error");
    }
}
