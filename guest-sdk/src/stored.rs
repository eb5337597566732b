//! Messages as a sink receives them, and their conversion from the wire types.

use serde::de::DeserializeOwned;

use crate::bindings::sink::exports::iggy::connector::sink as wire;
use crate::message::from_wire_u128;
use crate::{Error, HeaderValue};

/// A batch to write: consecutive messages of one partition of one topic, in offset
/// order. The SDK never hands a sink an empty batch.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkBatch {
    pub stream: String,
    pub topic: String,
    pub partition: u32,
    pub messages: Vec<StoredMessage>,
}

/// One message, as it was stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Its offset in its partition: increasing, unique within the partition.
    pub offset: u64,
    /// Its id: the key to write idempotently by. 0 when the message has none.
    pub id: u128,
    /// When the log or server stored it, in microseconds since the Unix epoch.
    pub timestamp: u64,
    /// When the record came into being at its origin, in microseconds since the Unix
    /// epoch, if the source said.
    pub origin_timestamp: Option<u64>,
    /// Headers, in order; keys are unique.
    pub headers: Vec<(String, HeaderValue)>,
    pub payload: Vec<u8>,
}

impl StoredMessage {
    /// The payload as text, if it is UTF-8.
    pub fn payload_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.payload).ok()
    }

    /// The payload parsed as JSON into `T`; the error names the message's offset.
    pub fn payload_json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.payload).map_err(|e| {
            Error::msg(format!("the payload of the message at offset {} is not the JSON expected: {e}", self.offset))
        })
    }

    /// The value of the header `key`, if the message has one.
    pub fn header(&self, key: &str) -> Option<&HeaderValue> {
        self.headers.iter().find(|(k, _)| k == key).map(|(_, value)| value)
    }

    /// Iggy's checksum of this message, as the Iggy server stored it (what Iggy's own
    /// sinks write with `include_checksum`), or `None` for a message read from the
    /// local log, which keeps none. The host answers it for the batch being written:
    /// call it from `write`. Outside WebAssembly (a native unit test) there is no host,
    /// and no checksum.
    pub fn iggy_checksum(&self) -> Option<u64> {
        #[cfg(target_arch = "wasm32")]
        return crate::bindings::sink::iggy::connector::stored_checksums::checksum(self.offset);
        #[cfg(not(target_arch = "wasm32"))]
        None
    }
}

impl From<wire::SinkBatch> for SinkBatch {
    fn from(batch: wire::SinkBatch) -> Self {
        SinkBatch {
            stream: batch.stream,
            topic: batch.topic,
            partition: batch.partition,
            messages: batch.messages.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<wire::StoredMessage> for StoredMessage {
    fn from(message: wire::StoredMessage) -> Self {
        StoredMessage {
            offset: message.offset,
            id: from_wire_u128(message.id),
            timestamp: message.timestamp,
            origin_timestamp: message.origin_timestamp,
            headers: message.headers.into_iter().map(|h| (h.key, h.value.into())).collect(),
            payload: message.payload,
        }
    }
}
