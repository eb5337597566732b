//! A connector's side of the host's `kafka` import: the import's errors in words for
//! an operator, the messages of a packed `fetch` walked without copying, and the
//! messages for `produce` packed the same way ([`Outgoing`]). (`Connection::open`,
//! `produce`, `assign`, `fetch` and `commit` are the import's own, in
//! [`crate::bindings::iggy::connector::kafka`].)

use crate::Error;
use crate::bindings::iggy::connector::kafka::Error as KafkaError;

/// The import's error, for people.
pub fn describe(error: &KafkaError) -> String {
    match error {
        KafkaError::NotGranted(detail) => format!("not granted ({detail})"),
        KafkaError::Connection(detail) => format!("no connection ({detail})"),
        KafkaError::Invalid(detail) => format!("invalid request ({detail})"),
        KafkaError::TimedOut(detail) => format!("timed out ({detail})"),
    }
}

/// A message to produce.
#[derive(Debug, Clone, Copy, Default)]
pub struct Record<'a> {
    pub topic: &'a str,
    /// None: the cluster's partitioner chooses by the key.
    pub partition: Option<i32>,
    /// Milliseconds since the Unix epoch; none: the time it is produced.
    pub timestamp: Option<i64>,
    pub key: Option<&'a [u8]>,
    /// Names and values, in order.
    pub headers: &'a [(&'a str, &'a [u8])],
    pub payload: &'a [u8],
}

/// Messages for `produce`, packed into the one buffer that crosses to the host (the
/// layout of a fetch, which [`Fetched`] reads back).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outgoing {
    bytes: Vec<u8>,
    count: usize,
}

impl Outgoing {
    /// Room for `bytes` of packed messages (their payloads, keys and headers, and
    /// about 40 bytes each besides).
    pub fn with_capacity(bytes: usize) -> Self {
        Outgoing { bytes: Vec::with_capacity(bytes), count: 0 }
    }

    /// Append `record`.
    ///
    /// # Panics
    /// If a part of it is 4 GiB or more (no message can be that large).
    pub fn push(&mut self, record: &Record<'_>) {
        let out = &mut self.bytes;
        out.extend_from_slice(&record.partition.unwrap_or(-1).to_le_bytes());
        out.extend_from_slice(&0i64.to_le_bytes()); // the offset: the cluster's to give
        out.extend_from_slice(&record.timestamp.unwrap_or(-1).to_le_bytes());
        put_bytes(out, record.topic.as_bytes());
        match record.key {
            Some(key) => put_bytes(out, key),
            None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
        out.extend_from_slice(&length(record.headers.len()).to_le_bytes());
        for (name, value) in record.headers {
            put_bytes(out, name.as_bytes());
            put_bytes(out, value);
        }
        put_bytes(out, record.payload);
        self.count += 1;
    }

    /// How many messages are packed.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The buffer `produce` takes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

fn length(count: usize) -> u32 {
    u32::try_from(count).expect("a part of a message under 4 GiB")
}

/// `data` after its length.
fn put_bytes(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&length(data.len()).to_le_bytes());
    out.extend_from_slice(data);
}

/// A message of a fetch, borrowed from its buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch; none when the message has no timestamp.
    pub timestamp: Option<i64>,
    pub key: Option<&'a [u8]>,
    /// Names and values, in order (a header without a value has an empty one).
    pub headers: Vec<(&'a str, &'a [u8])>,
    pub payload: &'a [u8],
}

/// The messages of the buffer a `fetch` returned, in order.
pub struct Fetched<'a> {
    data: &'a [u8],
}

impl<'a> Fetched<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Fetched { data }
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], Error> {
        if self.data.len() < count {
            return Err(Error::msg("a fetched buffer that ends inside a message"));
        }
        let (taken, rest) = self.data.split_at(count);
        self.data = rest;
        Ok(taken)
    }

    fn number(&mut self) -> Result<i64, Error> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn length(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn bytes(&mut self) -> Result<&'a [u8], Error> {
        let length = self.length()?;
        self.take(length as usize)
    }

    fn text(&mut self) -> Result<&'a str, Error> {
        std::str::from_utf8(self.bytes()?)
            .map_err(|_| Error::msg("a fetched message whose topic or header name is not UTF-8"))
    }

    fn message(&mut self) -> Result<Consumed<'a>, Error> {
        let partition = i32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes"));
        let (offset, timestamp) = (self.number()?, self.number()?);
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
        let timestamp = (timestamp >= 0).then_some(timestamp);
        Ok(Consumed { topic, partition, offset, timestamp, key, headers, payload })
    }
}

impl<'a> Iterator for Fetched<'a> {
    type Item = Result<Consumed<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() {
            return None;
        }
        let message = self.message();
        if message.is_err() {
            self.data = &[];
        }
        Some(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_packed_to_produce_reads_as_a_fetch_and_a_cut_buffer_is_an_error() {
        // What is packed for `produce` is laid out as a fetch is.
        let mut outgoing = Outgoing::default();
        outgoing.push(&Record { topic: "orders", ..Record::default() });
        let headers: [(&str, &[u8]); 2] = [("a", b"1"), ("b", b"")];
        let keyed = Record {
            topic: "orders",
            partition: Some(3),
            timestamp: Some(7),
            key: Some(b"k"),
            headers: &headers,
            payload: b"xyz",
        };
        outgoing.push(&keyed);
        assert_eq!(outgoing.len(), 2);
        let data = outgoing.as_bytes();
        let messages: Vec<Consumed<'_>> = Fetched::new(data).collect::<Result<_, _>>().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!((messages[0].key, messages[0].timestamp, messages[0].partition), (None, None, -1));
        assert_eq!((messages[1].topic, messages[1].partition, messages[1].timestamp), ("orders", 3, Some(7)));
        assert_eq!(messages[1].key, Some(&b"k"[..]));
        assert_eq!(messages[1].headers, [("a", &b"1"[..]), ("b", &b""[..])]);
        assert_eq!(messages[1].payload, b"xyz");

        let mut fetched = Fetched::new(&data[..data.len() - 1]);
        assert!(fetched.next().unwrap().is_ok());
        assert!(fetched.next().unwrap().is_err(), "ends inside its payload");
        assert!(fetched.next().is_none(), "nothing after an error");
    }
}
