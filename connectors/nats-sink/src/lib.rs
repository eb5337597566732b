//! A sink that publishes every message to NATS JetStream, through the server the
//! operator granted (`grants.nats`), with `Nats-Msg-Id` set to the message's stable id,
//! so that the stream stores a message published again (after a crash, a retry, a
//! restart) only once, within its duplicate window.
//!
//! `plugin_config`:
//!
//! | key          | default            | meaning |
//! |--------------|--------------------|---------|
//! | `connection` | required           | the `[nats.NAME]` granted to the connector |
//! | `subject`    | `{stream}.{topic}` | the subject, `{stream}`, `{topic}` and `{partition}` filled in |
//!
//! Each message goes with the headers `Nats-Msg-Id` (its id, in decimal), `Iggy-Stream`,
//! `Iggy-Topic`, `Iggy-Partition`, `Iggy-Offset`, and its own text headers. A batch is
//! published whole before its acknowledgements are awaited, and acknowledged only when
//! JetStream acknowledged every message. A message the server refuses (bigger than its
//! `max_payload`, say) goes to the dead letters with the server's words; a subject no
//! stream takes, a connection that fails or an acknowledgement that does not come is a
//! retry of the batch, said in the log.

mod subject;

use ferry_guest::bindings::iggy::connector::nats::{Connection, Outgoing};
use ferry_guest::nats::describe;
use ferry_guest::{Error, HeaderValue, Sink, SinkBatch, Written};
use serde::Deserialize;

use crate::subject::Subject;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    connection: String,
    #[serde(default)]
    subject: Option<String>,
}

struct NatsSink {
    connection_name: String,
    subject: Subject,
    connection: Connection,
}

impl Sink for NatsSink {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        if config.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a server in grants.nats"));
        }
        let subject = Subject::parse(config.subject.as_deref().unwrap_or("{stream}.{topic}"))
            .map_err(|p| Error::msg(format!("plugin_config.subject: {p}")))?;
        let connection = Connection::open(&config.connection)
            .map_err(|e| Error::msg(format!("nats `{}`: {}", config.connection, describe(&e))))?;
        Ok(NatsSink { connection_name: config.connection, subject, connection })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let subject = match self.subject.render(batch) {
            Ok(subject) => subject,
            // Every message of the batch has it: none can be published.
            Err(reason) => return Ok(Written::reject((0..batch.messages.len()).map(|i| (i, reason.clone())))),
        };
        let outgoing: Vec<Outgoing> = batch
            .messages
            .iter()
            .map(|message| {
                let mut headers = vec![
                    ("Nats-Msg-Id".to_string(), message.id.to_string()),
                    ("Iggy-Stream".to_string(), batch.stream.clone()),
                    ("Iggy-Topic".to_string(), batch.topic.clone()),
                    ("Iggy-Partition".to_string(), batch.partition.to_string()),
                    ("Iggy-Offset".to_string(), message.offset.to_string()),
                ];
                headers.extend(message.headers.iter().filter_map(|(key, value)| match value {
                    HeaderValue::String(text) => Some((key.clone(), text.clone())),
                    _ => None,
                }));
                Outgoing { subject: subject.clone(), headers, payload: message.payload.clone() }
            })
            .collect();
        let answers = match self.connection.publish(&outgoing) {
            Ok(answers) => answers,
            Err(error) => return Ok(Written::retry(format!("nats `{}`: {}", self.connection_name, describe(&error)))),
        };
        let refused: Vec<(usize, String)> = answers
            .into_iter()
            .enumerate()
            .filter_map(|(index, answer)| answer.err().map(|why| (index, why)))
            .collect();
        // A stream missing is the operator's to create, not the messages' fault: wait.
        if refused.iter().any(|(_, why)| why.contains("no stream found")) {
            return Ok(Written::retry(format!(
                "nats `{}`: no JetStream stream takes the subject {subject:?}: create one (the batch waits)",
                self.connection_name
            )));
        }
        let refused = refused.into_iter().map(|(index, why)| (index, format!("the server refused it: {why}")));
        let refused: Vec<(usize, String)> = refused.collect();
        Ok(if refused.is_empty() { Written::Ack } else { Written::reject(refused) })
    }
}

ferry_guest::export_sink!(NatsSink);
