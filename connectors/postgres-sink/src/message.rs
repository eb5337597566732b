//! What every layout takes from a message: the row's key, its origin timestamp,
//! and whether its payload is JSON `jsonb` takes.

use ferry_guest::bindings::iggy::connector::postgres::Value;
use ferry_guest::{SinkBatch, StoredMessage};

/// The message's origin timestamp for the timestamptz `column`, or NULL.
pub fn origin_timestamp(message: &StoredMessage, column: &str) -> Result<Value, String> {
    match message.origin_timestamp {
        None => Ok(Value::Null),
        Some(micros) => i64::try_from(micros)
            .map(Value::Timestamp)
            .map_err(|_| format!("origin timestamp {micros} µs does not fit the timestamptz column `{column}`")),
    }
}

/// The row's key: the message id in decimal. A message without an id (0) is keyed by
/// where it is stored instead, `stream/topic/partition/offset`: keyed by 0, every
/// such message after the first would be taken for a replay and silently dropped.
pub fn row_id(batch: &SinkBatch, message: &StoredMessage) -> String {
    match message.id {
        0 => format!("{}/{}/{}/{}", batch.stream, batch.topic, batch.partition, message.offset),
        id => id.to_string(),
    }
}

/// Whether `text` is a JSON document `jsonb` accepts. `jsonb` refuses the escape
/// `\u0000`, which JSON allows (the default layout keeps such a payload as bytes).
pub fn is_jsonb(text: &str) -> bool {
    !text.contains("\\u0000") && serde_json::from_str::<serde_json::Value>(text).is_ok()
}

#[cfg(test)]
pub(crate) mod tests {
    //! A batch and a message for the layouts' tests.

    use ferry_guest::HeaderValue;

    use super::*;

    pub(crate) fn batch() -> SinkBatch {
        SinkBatch { stream: "app".into(), topic: "orders".into(), partition: 3, messages: Vec::new() }
    }

    pub(crate) fn message(id: u128, payload: &[u8]) -> StoredMessage {
        StoredMessage {
            offset: 41,
            id,
            timestamp: 1_700_000_000_000_000,
            origin_timestamp: Some(1_600_000_000_000_000),
            headers: vec![("kind".into(), HeaderValue::String("order".into())), ("n".into(), HeaderValue::Uint64(5))],
            payload: payload.to_vec(),
        }
    }
}
