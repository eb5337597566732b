//! A connector's side of the host's `kafka` import: the import's errors in words for
//! an operator, and the messages of a packed `fetch` walked without copying.
//! (`Connection::open`, `produce`, `assign`, `fetch` and `commit` are the import's
//! own, in [`crate::bindings::iggy::connector::kafka`].)

use crate::Error;
use crate::bindings::iggy::connector::kafka::Error as KafkaError;

/// The import's error, for people.
pub fn describe(error: &KafkaError) -> String {
    match error {
        KafkaError::NotGranted(detail) => format!("not granted ({detail})"),
        KafkaError::Connection(detail) => format!("no connection ({detail})"),
        KafkaError::TimedOut(detail) => format!("timed out ({detail})"),
    }
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

    fn pack(out: &mut Vec<u8>, offset: i64, key: Option<&[u8]>, headers: &[(&str, &[u8])], payload: &[u8]) {
        out.extend_from_slice(&3i32.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(-1i64).to_le_bytes());
        let bytes = |out: &mut Vec<u8>, data: &[u8]| {
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(data);
        };
        bytes(out, b"orders");
        match key {
            Some(key) => bytes(out, key),
            None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
        out.extend_from_slice(&(headers.len() as u32).to_le_bytes());
        for (name, value) in headers {
            bytes(out, name.as_bytes());
            bytes(out, value);
        }
        bytes(out, payload);
    }

    #[test]
    fn a_fetch_is_walked_in_order_and_a_cut_buffer_is_an_error() {
        let mut data = Vec::new();
        pack(&mut data, 41, None, &[], b"");
        pack(&mut data, 42, Some(b"k"), &[("a", b"1"), ("b", b"")], b"xyz");
        let messages: Vec<Consumed<'_>> = Fetched::new(&data).collect::<Result<_, _>>().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!((messages[0].key, messages[0].timestamp, messages[0].offset), (None, None, 41));
        assert_eq!((messages[1].topic, messages[1].partition, messages[1].offset), ("orders", 3, 42));
        assert_eq!(messages[1].key, Some(&b"k"[..]));
        assert_eq!(messages[1].headers, [("a", &b"1"[..]), ("b", &b""[..])]);
        assert_eq!(messages[1].payload, b"xyz");

        let mut fetched = Fetched::new(&data[..data.len() - 1]);
        assert!(fetched.next().unwrap().is_ok());
        assert!(fetched.next().unwrap().is_err(), "ends inside its payload");
        assert!(fetched.next().is_none(), "nothing after an error");
    }
}
