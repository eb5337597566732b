//! Durable JetStream pull consumers, for the `nats` interface's reads: their state,
//! making one from a start the guest chooses, fetching what the server has now, and
//! knowing which consumer an acknowledgement subject is for.
//!
//! Why `make` deletes a consumer of the same name: a guest that keeps its own cursor
//! (the NATS source) knows better than the server what was delivered; after a crash
//! the server's pending messages would come again only after their `ack_wait`, and
//! after newer ones, so the guest starts the consumer again right after its cursor.

use std::time::Duration;

use async_nats::jetstream::Context;
use async_nats::jetstream::consumer::pull::Config;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::stream::Stream;
use ferry_contract::wit::nats::{ConsumerState, Error, PullConsumer as Wanted};
use futures::StreamExt;

/// The most messages one fetch takes.
pub const MAX_FETCH_MESSAGES: u32 = 10_000;
/// The most bytes one fetch takes.
pub const MAX_FETCH_BYTES: usize = 16 << 20;

/// What the server says of the consumer `durable` of `stream`; `Ok(None)` when it has
/// none of that name, `Ok(Err)` when it refuses (no such stream).
pub async fn state(jetstream: &Context, stream: &str, durable: &str) -> Result<Result<Option<ConsumerState>, String>, Error> {
    let stream = match find_stream(jetstream, stream).await? {
        Ok(stream) => stream,
        Err(refused) => return Ok(Err(refused)),
    };
    match stream.consumer_info(durable).await {
        Ok(info) => Ok(Ok(Some(ConsumerState {
            ack_floor: info.ack_floor.stream_sequence,
            ack_pending: info.num_ack_pending as u64,
            max_ack_pending: u32::try_from(info.config.max_ack_pending).unwrap_or(u32::MAX),
        }))),
        Err(error) => match error.kind() {
            ConsumerInfoErrorKind::NotFound => Ok(Ok(None)),
            ConsumerInfoErrorKind::Request | ConsumerInfoErrorKind::TimedOut => {
                Err(Error::Connection(format!("reading the consumer {durable:?} failed: {error}")))
            }
            _ => Ok(Err(format!("the consumer {durable:?}: {error}"))),
        },
    }
}

/// Make `wanted`, delivering from `start` on (only new messages when none), deleting
/// a consumer of its name first.
pub async fn make(jetstream: &Context, wanted: &Wanted, start: Option<u64>) -> Result<Result<PullConsumer, String>, Error> {
    let stream = match find_stream(jetstream, &wanted.stream).await? {
        Ok(stream) => stream,
        Err(refused) => return Ok(Err(refused)),
    };
    if let Ok(Some(_)) = state(jetstream, &wanted.stream, &wanted.durable).await?
        && let Err(error) = stream.delete_consumer(&wanted.durable).await
    {
        return Ok(Err(format!("cannot delete the consumer {:?} to make it again: {error}", wanted.durable)));
    }
    let config = Config {
        durable_name: Some(wanted.durable.clone()),
        filter_subject: wanted.filter_subject.clone().unwrap_or_default(),
        // Cumulative: the guest acknowledges a batch by its last message.
        ack_policy: AckPolicy::All,
        ack_wait: Duration::from_millis(u64::from(wanted.ack_wait_ms)),
        max_ack_pending: i64::from(wanted.max_ack_pending),
        deliver_policy: match start {
            Some(start_sequence) => DeliverPolicy::ByStartSequence { start_sequence: start_sequence.max(1) },
            None => DeliverPolicy::New,
        },
        ..Default::default()
    };
    Ok(stream.create_consumer(config).await.map_err(|e| format!("cannot make the consumer {:?}: {e}", wanted.durable)))
}

/// The consumer `durable` of `stream` as it is.
pub async fn find(jetstream: &Context, stream: &str, durable: &str) -> Result<Result<PullConsumer, String>, Error> {
    let stream = match find_stream(jetstream, stream).await? {
        Ok(stream) => stream,
        Err(refused) => return Ok(Err(refused)),
    };
    Ok(stream.get_consumer(durable).await.map_err(|e| format!("the consumer {durable:?}: {e}")))
}

/// What `consumer` has for us now, up to `max_messages`, without waiting for more;
/// packed as the interface's `fetch` says.
pub async fn fetch(consumer: &PullConsumer, max_messages: u32) -> Result<Result<Vec<u8>, String>, Error> {
    let wanted = max_messages.clamp(1, MAX_FETCH_MESSAGES) as usize;
    let mut batch = consumer
        .fetch()
        .max_messages(wanted)
        .max_bytes(MAX_FETCH_BYTES)
        .messages()
        .await
        .map_err(|e| Error::Connection(format!("fetching failed: {e}")))?;
    let mut packed = Vec::new();
    while let Some(message) = batch.next().await {
        let message = match message {
            Ok(message) => message,
            // No more until some are acknowledged: what came so far is the answer.
            Err(status) if status.to_string().contains("Max Ack Pending") => break,
            Err(status) if packed.is_empty() => return Ok(Err(status.to_string())),
            Err(_) => break,
        };
        let info = message.info().map_err(|e| Error::Connection(format!("a message without its JetStream reply: {e}")))?;
        let published = u64::try_from(info.published.unix_timestamp_nanos()).unwrap_or(0);
        if packed.is_empty() {
            packed.reserve(wanted * (64 + message.payload.len()));
        }
        for number in [info.stream_sequence, info.delivered.max(0) as u64, published] {
            packed.extend_from_slice(&number.to_le_bytes());
        }
        bytes(&mut packed, message.subject.as_bytes());
        bytes(&mut packed, message.reply.as_ref().map_or(&b""[..], |reply| reply.as_bytes()));
        let headers = message.headers.iter().flat_map(|map| map.iter());
        let values: Vec<_> = headers.flat_map(|(name, values)| values.iter().map(move |value| (name, value))).collect();
        packed.extend_from_slice(&(values.len() as u32).to_le_bytes());
        for (name, value) in values {
            let name: &str = name.as_ref();
            bytes(&mut packed, name.as_bytes());
            bytes(&mut packed, value.as_str().as_bytes());
        }
        bytes(&mut packed, &message.payload);
    }
    Ok(Ok(packed))
}

/// `data` after its length.
fn bytes(packed: &mut Vec<u8>, data: &[u8]) {
    packed.extend_from_slice(&(data.len() as u32).to_le_bytes());
    packed.extend_from_slice(data);
}

/// The stream and consumer an acknowledgement subject (a message's reply) is for:
/// `$JS.ACK.<stream>.<consumer>.` and five numbers, or (ADR-15's second form) a domain
/// and an account hash before the stream.
pub fn acknowledged(reply: &str) -> Option<(&str, &str)> {
    let tokens: Vec<&str> = reply.strip_prefix("$JS.ACK.")?.split('.').collect();
    match tokens.len() {
        7 => Some((tokens[0], tokens[1])),
        n if n >= 9 => Some((tokens[2], tokens[3])),
        _ => None,
    }
}

async fn find_stream(jetstream: &Context, name: &str) -> Result<Result<Stream, String>, Error> {
    use async_nats::jetstream::context::GetStreamErrorKind;
    match jetstream.get_stream(name).await {
        Ok(stream) => Ok(Ok(stream)),
        Err(error) => match error.kind() {
            GetStreamErrorKind::Request => Err(Error::Connection(format!("reading the stream {name:?} failed: {error}"))),
            _ => Ok(Err(format!("the stream {name:?}: {error}"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::acknowledged;

    #[test]
    fn an_acknowledgement_subject_names_its_stream_and_consumer_in_either_form() {
        assert_eq!(acknowledged("$JS.ACK.orders.ferry.1.42.42.1700000000000000000.0"), Some(("orders", "ferry")));
        assert_eq!(acknowledged("$JS.ACK.hub.ACCHASH.orders.ferry.1.42.42.1700000000000000000.0.token"), Some(("orders", "ferry")));
        assert_eq!(acknowledged("$JS.ACK.orders.ferry"), None, "too short");
        assert_eq!(acknowledged("orders.created"), None, "not an acknowledgement");
        assert_eq!(acknowledged("$JS.API.STREAM.DELETE.orders.a.b.c.d.e"), None);
    }
}
