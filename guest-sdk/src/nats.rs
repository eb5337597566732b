//! A connector's side of the host's `nats` import: the import's errors in words for
//! an operator, and the messages of a packed `fetch` walked without copying.
//! (`Connection::open`, `publish`, `fetch` and the rest are the import's own, in
//! [`crate::bindings::iggy::connector::nats`].)

use crate::Error;
use crate::bindings::iggy::connector::nats::Error as NatsError;

/// The import's error, for people.
pub fn describe(error: &NatsError) -> String {
    match error {
        NatsError::NotGranted(detail) => format!("not granted ({detail})"),
        NatsError::Connection(detail) => format!("no connection ({detail})"),
        NatsError::TimedOut(detail) => format!("timed out ({detail})"),
    }
}

/// A message of a fetch, borrowed from its buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered<'a> {
    /// Its place in the stream.
    pub stream_sequence: u64,
    /// How many times the server delivered it: 1 the first time.
    pub delivered: u64,
    /// When the server stored it, in nanoseconds since the Unix epoch.
    pub published: u64,
    pub subject: &'a str,
    /// What acknowledges it (hand it to `acknowledge`).
    pub reply: &'a str,
    /// Names and values, in order.
    pub headers: Vec<(&'a str, &'a str)>,
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

    fn number(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn length(&mut self) -> Result<usize, Error> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")) as usize)
    }

    fn bytes(&mut self) -> Result<&'a [u8], Error> {
        let length = self.length()?;
        self.take(length)
    }

    fn text(&mut self) -> Result<&'a str, Error> {
        std::str::from_utf8(self.bytes()?)
            .map_err(|_| Error::msg("a fetched message whose subject or header is not UTF-8"))
    }

    fn message(&mut self) -> Result<Delivered<'a>, Error> {
        let (stream_sequence, delivered, published) = (self.number()?, self.number()?, self.number()?);
        let (subject, reply) = (self.text()?, self.text()?);
        let count = self.length()?;
        let mut headers = Vec::with_capacity(count.min(64));
        for _ in 0..count {
            headers.push((self.text()?, self.text()?));
        }
        let payload = self.bytes()?;
        Ok(Delivered { stream_sequence, delivered, published, subject, reply, headers, payload })
    }
}

impl<'a> Iterator for Fetched<'a> {
    type Item = Result<Delivered<'a>, Error>;

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

    fn pack(out: &mut Vec<u8>, sequence: u64, headers: &[(&str, &str)], payload: &[u8]) {
        for number in [sequence, 1, 7] {
            out.extend_from_slice(&number.to_le_bytes());
        }
        let bytes = |out: &mut Vec<u8>, data: &[u8]| {
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(data);
        };
        bytes(out, b"orders.created");
        bytes(out, format!("$JS.ACK.ORDERS.ferry.1.{sequence}.{sequence}.7.0").as_bytes());
        out.extend_from_slice(&(headers.len() as u32).to_le_bytes());
        for (name, value) in headers {
            bytes(out, name.as_bytes());
            bytes(out, value.as_bytes());
        }
        bytes(out, payload);
    }

    #[test]
    fn a_fetched_buffer_is_its_messages_and_a_short_one_an_error() {
        let mut data = Vec::new();
        pack(&mut data, 41, &[], b"{}");
        pack(&mut data, 42, &[("a", "1"), ("b", "")], b"xyz");
        let messages: Vec<Delivered<'_>> = Fetched::new(&data).collect::<Result<_, _>>().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!((messages[1].stream_sequence, messages[1].delivered, messages[1].published), (42, 1, 7));
        assert_eq!((messages[1].subject, messages[1].reply), ("orders.created", "$JS.ACK.ORDERS.ferry.1.42.42.7.0"));
        assert_eq!(messages[1].headers, [("a", "1"), ("b", "")]);
        assert_eq!(messages[1].payload, b"xyz");

        let mut fetched = Fetched::new(&data[..data.len() - 1]);
        assert!(fetched.next().unwrap().is_ok());
        assert!(fetched.next().unwrap().is_err(), "ends inside its payload");
        assert!(fetched.next().is_none(), "and nothing after");
        assert_eq!(Fetched::new(&[]).count(), 0);
    }
}
