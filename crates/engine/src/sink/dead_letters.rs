//! Dead letters: messages a sink can never write (poison), handed to a destination
//! of their own instead of blocking their partition or being dropped.
//!
//! A dead letter is the original message (id, payload, headers, origin timestamp)
//! with headers that say which connector gave up on it, why, and where it came
//! from, so that an operator can look at it, fix what is wrong, and replay it. It is
//! delivered like a source's batch (to Iggy, or the local log) before the sink's
//! offset moves past it.

use std::sync::Arc;

use super::input::SinkBatch;
use crate::delivery::{Delivery, DeliveryError, Target};
use ferry_config::StreamConfig;
use ferry_contract::guest_text;
use ferry_contract::{Header, HeaderValue, Message};

/// The headers a dead letter carries (replacing any of the same name it had).
pub const CONNECTOR: &str = "ferry-dead-letter-connector";
pub const REASON: &str = "ferry-dead-letter-reason";
pub const STREAM: &str = "ferry-dead-letter-stream";
pub const TOPIC: &str = "ferry-dead-letter-topic";
pub const PARTITION: &str = "ferry-dead-letter-partition";
pub const OFFSET: &str = "ferry-dead-letter-offset";

/// Iggy keeps a header value to 255 bytes: a reason is cut to fit.
const MAX_REASON: usize = 255;

/// Where a sink's dead letters go.
#[derive(Clone)]
pub struct DeadLetters {
    pub target: Arc<dyn Target>,
    pub stream: Arc<[StreamConfig]>,
}

impl DeadLetters {
    /// Deliver the messages of `batch` at `dead` (index, reason) as dead letters of
    /// `connector`.
    pub async fn deliver(
        &self,
        connector: &Arc<str>,
        batch: &SinkBatch,
        dead: &[(usize, String)],
    ) -> Result<(), DeliveryError> {
        let delivery = Delivery {
            connector: connector.clone(),
            streams: self.stream.clone(),
            messages: Arc::new(letters(connector, batch, dead)),
            cursor: None,
        };
        self.target.deliver(delivery).await.map(|_| ())
    }
}

/// The dead letters of `batch`'s messages at `dead`, in that order.
pub fn letters(connector: &str, batch: &SinkBatch, dead: &[(usize, String)]) -> Vec<Message> {
    dead.iter()
        .map(|(index, reason)| {
            let original = &batch.messages[*index];
            let ours = [
                (CONNECTOR, HeaderValue::String(connector.to_string())),
                (REASON, HeaderValue::String(guest_text::clean(reason, MAX_REASON))),
                (STREAM, HeaderValue::String(batch.stream.clone())),
                (TOPIC, HeaderValue::String(batch.topic.clone())),
                (PARTITION, HeaderValue::Uint32(batch.partition)),
                (OFFSET, HeaderValue::Uint64(original.offset)),
            ];
            let mut headers: Vec<Header> =
                original.headers.iter().filter(|h| !ours.iter().any(|(key, _)| h.key == *key)).cloned().collect();
            headers.extend(ours.into_iter().map(|(key, value)| Header { key: key.to_string(), value }));
            Message {
                id: Some(original.id),
                headers,
                payload: original.payload.clone().into(),
                origin_timestamp: original.origin_timestamp,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::input::StoredMessage;
    use ferry_contract::Uint128;

    #[test]
    fn a_dead_letter_is_the_message_with_where_it_came_from_and_why() {
        let message = |offset: u64, headers: Vec<Header>| StoredMessage {
            offset,
            id: Uint128::from(u128::from(offset) + 1000),
            timestamp: 1,
            origin_timestamp: Some(7),
            headers,
            payload: format!("m{offset}").into_bytes(),
        };
        let stale = Header { key: REASON.into(), value: HeaderValue::String("an older reason".into()) };
        let kept = Header { key: "customer".into(), value: HeaderValue::Uint64(42) };
        let batch = SinkBatch {
            stream: "orders".into(),
            topic: "created".into(),
            partition: 3,
            messages: vec![message(10, vec![]), message(11, vec![stale, kept.clone()])],
        };
        let letters = letters("pg", &batch, &[(1, "bad\nrow".into())]);
        assert_eq!(letters.len(), 1);
        let letter = &letters[0];
        assert_eq!((letter.id.map(|id| id.get()), &letter.payload[..]), (Some(1011), &b"m11"[..]));
        assert_eq!(letter.origin_timestamp, Some(7));
        let value = |key: &str| letter.headers.iter().find(|h| h.key == key).map(|h| h.value.clone());
        assert_eq!(value("customer"), Some(kept.value));
        assert_eq!(value(CONNECTOR), Some(HeaderValue::String("pg".into())));
        assert_eq!(value(REASON), Some(HeaderValue::String("bad\\u{a}row".into())), "escaped, the stale one gone");
        assert_eq!(letter.headers.iter().filter(|h| h.key == REASON).count(), 1);
        assert_eq!(value(STREAM), Some(HeaderValue::String("orders".into())));
        assert_eq!(value(TOPIC), Some(HeaderValue::String("created".into())));
        assert_eq!(value(PARTITION), Some(HeaderValue::Uint32(3)));
        assert_eq!(value(OFFSET), Some(HeaderValue::Uint64(11)));
    }
}
