//! A sink that produces every message to Kafka, through the cluster the operator
//! granted (`grants.kafka`), on the host's idempotent producer, and acknowledges a
//! batch only when the cluster stored all of it.
//!
//! `plugin_config`:
//!
//! | key          | default            | meaning |
//! |--------------|--------------------|---------|
//! | `connection` | required           | the `[kafka.NAME]` granted to the connector |
//! | `topic`      | `{stream}.{topic}` | the topic, `{stream}`, `{topic}` and `{partition}` filled in |
//! | `key`        | `id`               | each message's key: `id` (its stable id, in decimal: one id, one partition) or `none` |
//!
//! Each message goes with the headers `Iggy-Stream`, `Iggy-Topic`, `Iggy-Partition`,
//! `Iggy-Offset`, `Iggy-Id`, and its own headers (text and bytes as they are, numbers
//! in decimal, as JSON). A batch is produced whole before its delivery reports are awaited. A
//! message the cluster refuses (too large) goes to the dead letters with its words; a
//! cluster that cannot be reached, a topic it does not have, or a report that does
//! not come in time is a retry of the batch, said in the log.
//!
//! What "idempotent" covers: the producer's own retries store a message once. Kafka
//! keeps no ids across producers, so a batch produced again after a crash of ferry
//! (its offset was not yet committed) is stored again: at most the batch in flight,
//! each copy with the same `Iggy-Id` header for a reader to drop.

mod topic;

use std::borrow::Cow;

use ferry_guest::bindings::iggy::connector::kafka::Connection;
use ferry_guest::kafka::{Outgoing, Record, describe};
use ferry_guest::{Error, HeaderValue, Sink, SinkBatch, Written};
use serde::Deserialize;

use crate::topic::Topic;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    connection: String,
    #[serde(default)]
    topic: Option<String>,
    #[serde(default)]
    key: Option<String>,
}

struct KafkaSink {
    connection_name: String,
    topic: Topic,
    keyed: bool,
    connection: Connection,
}

impl Sink for KafkaSink {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        if config.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a cluster in grants.kafka"));
        }
        let topic = Topic::parse(config.topic.as_deref().unwrap_or("{stream}.{topic}"))
            .map_err(|p| Error::msg(format!("plugin_config.topic: {p}")))?;
        let keyed = match config.key.as_deref().unwrap_or("id") {
            "id" => true,
            "none" => false,
            other => {
                return Err(Error::msg(format!(
                    "plugin_config.key {other:?} is neither \"id\" (the message's stable id) nor \"none\""
                )));
            }
        };
        let connection = Connection::open(&config.connection)
            .map_err(|e| Error::msg(format!("kafka `{}`: {}", config.connection, describe(&e))))?;
        Ok(KafkaSink { connection_name: config.connection, topic, keyed, connection })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let topic = match self.topic.render(batch) {
            Ok(topic) => topic,
            // Every message of the batch has it: none can be produced.
            Err(reason) => return Ok(Written::reject((0..batch.messages.len()).map(|i| (i, reason.clone())))),
        };
        let partition = batch.partition.to_string();
        let size: usize = batch.messages.iter().map(|m| m.payload.len() + 128).sum();
        let mut outgoing = Outgoing::with_capacity(size);
        for message in &batch.messages {
            let id = message.id.to_string();
            let offset = message.offset.to_string();
            let mut headers: Vec<(&str, &[u8])> = Vec::with_capacity(5 + message.headers.len());
            headers.extend([
                ("Iggy-Stream", batch.stream.as_bytes()),
                ("Iggy-Topic", batch.topic.as_bytes()),
                ("Iggy-Partition", partition.as_bytes()),
                ("Iggy-Offset", offset.as_bytes()),
                ("Iggy-Id", id.as_bytes()),
            ]);
            let own: Vec<Cow<'_, [u8]>> = message.headers.iter().map(|(_, value)| bytes(value)).collect();
            headers.extend(message.headers.iter().zip(&own).map(|((name, _), value)| (name.as_str(), &value[..])));
            outgoing.push(&Record {
                topic: &topic,
                key: self.keyed.then_some(id.as_bytes()),
                headers: &headers,
                payload: &message.payload,
                ..Record::default()
            });
        }
        let answers = match self.connection.produce(outgoing.as_bytes()) {
            Ok(answers) => answers,
            Err(error) => return Ok(Written::retry(format!("kafka `{}`: {}", self.connection_name, describe(&error)))),
        };
        let refused: Vec<(usize, String)> = answers
            .into_iter()
            .enumerate()
            .filter_map(|(index, answer)| answer.err().map(|why| (index, format!("the cluster refused it: {why}"))))
            .collect();
        Ok(if refused.is_empty() { Written::Ack } else { Written::reject(refused) })
    }
}

/// A header's value as Kafka carries it, bytes: text and bytes as they are, any
/// other value as its JSON (numbers in decimal).
fn bytes(value: &HeaderValue) -> Cow<'_, [u8]> {
    match value {
        HeaderValue::Raw(bytes) => Cow::Borrowed(bytes),
        HeaderValue::String(text) => Cow::Borrowed(text.as_bytes()),
        other => Cow::Owned(other.value_json().to_string().into_bytes()),
    }
}

ferry_guest::export_sink!(KafkaSink);
