//! A source that reads a NATS JetStream stream through a durable pull consumer, on
//! the server the operator granted (`grants.nats`), and acknowledges each message only
//! after its batch was delivered and the cursor committed.
//!
//! `plugin_config`:
//!
//! | key              | default  | meaning |
//! |------------------|----------|---------|
//! | `connection`     | required | the `[nats.NAME]` granted to the connector |
//! | `stream`         | required | the JetStream stream read |
//! | `durable`        | `ferry`  | the durable consumer's name |
//! | `filter_subject` | none     | only messages whose subject matches it |
//! | `batch_size`     | 100      | the most messages a batch takes (1 to 10,000); the consumer's `max_ack_pending` |
//! | `ack_wait_ms`    | 30000    | how long the server waits for an acknowledgement before it delivers a message again |
//! | `deliver`        | `all`    | where a connector with no cursor and no consumer starts: `all` or `new` |
//!
//! Nothing is lost, and nothing is delivered twice into the local log. The cursor is
//! the stream sequence of the last message delivered; at open the consumer is made
//! again from just after it, so that what the server had delivered and not had
//! acknowledged (the batch in flight at a crash) comes first and in order, at once,
//! not after its `ack_wait` behind newer messages. (With no cursor, an existing
//! consumer is made again from just after its acknowledgement floor.) While running,
//! a batch is acknowledged only once the host committed the cursor past it, by its
//! last message (the consumer's acknowledgements are cumulative); a message that comes
//! again at or below the cursor (an acknowledgement lost, or its `ack_wait` run out
//! during retries) is acknowledged and not delivered. After a NACK the same messages
//! are delivered again, as the same batch. Each message's id comes from its
//! stream and sequence, so an Iggy target sees the same message if it is ever
//! delivered twice.

mod config;
mod messages;

use ferry_guest::bindings::iggy::connector::nats::{Connection, PullConsumer};
use ferry_guest::nats::{Fetched, describe};
use ferry_guest::{Batch, Error, Nack, PackedMessages, Source};
use serde::{Deserialize, Serialize};

use crate::config::Config;

/// The stream sequence of the last message delivered (and committed); 0 before the first.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Cursor {
    #[serde(default)]
    sequence: u64,
}

struct NatsSource {
    config: Config,
    connection: Connection,
    /// The fetch of the batch in flight (its messages past the cursor), kept to
    /// deliver again after a NACK.
    in_flight: Vec<u8>,
    /// What acknowledges the batch in flight: its last message's reply.
    in_flight_reply: String,
    /// The batch in flight was NACKed: the next poll delivers it again.
    again: bool,
    /// A reply whose acknowledgement failed, tried again before the next fetch.
    unacked: Option<String>,
}

impl Source for NatsSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        config.check().map_err(Error::msg)?;
        let connection = Connection::open(&config.connection)
            .map_err(|e| Error::msg(format!("nats `{}`: {}", config.connection, describe(&e))))?;
        let source = NatsSource {
            config,
            connection,
            in_flight: Vec::new(),
            in_flight_reply: String::new(),
            again: false,
            unacked: None,
        };
        source.make_consumer(cursor)?;
        Ok(source)
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        if let Some(reply) = &self.unacked {
            // Kept until the server took it: a failure here is tried again next time.
            self.acknowledge(reply)?;
            self.unacked = None;
        }
        if !std::mem::take(&mut self.again) || self.in_flight.is_empty() {
            let config = &self.config;
            self.in_flight = self
                .connection
                .fetch(&config.stream, &config.durable, config.batch_size)
                .map_err(|e| self.failed(&e))?
                .map_err(|refused| Error::msg(format!("nats `{}`: {refused}", config.connection)))?;
        }
        self.batch(cursor)
    }

    fn on_ack(&mut self, _committed: &Cursor) {
        let reply = std::mem::take(&mut self.in_flight_reply);
        self.in_flight.clear();
        if let Err(error) = self.acknowledge(&reply) {
            ferry_guest::warn!("{error}; the batch is acknowledged before the next fetch");
            self.unacked = Some(reply);
        }
    }

    fn on_nack(&mut self, _nack: &Nack) {
        self.again = true;
    }
}

impl NatsSource {
    /// Make the durable consumer read from just after `cursor` (see the module's doc).
    fn make_consumer(&self, cursor: &Cursor) -> Result<(), Error> {
        let config = &self.config;
        let start = if cursor.sequence > 0 {
            Some(cursor.sequence + 1)
        } else {
            let state = self
                .connection
                .consumer_state(&config.stream, &config.durable)
                .map_err(|e| self.failed(&e))?
                .map_err(|refused| Error::msg(format!("nats `{}`: {refused}", config.connection)))?;
            match state {
                Some(state) => Some(state.ack_floor + 1),
                None if config.deliver == "all" => Some(1),
                None => None,
            }
        };
        let consumer = PullConsumer {
            stream: config.stream.clone(),
            durable: config.durable.clone(),
            filter_subject: config.filter_subject.clone(),
            ack_wait_ms: config.ack_wait_ms,
            max_ack_pending: config.batch_size,
        };
        self.connection
            .make_consumer(&consumer, start)
            .map_err(|e| self.failed(&e))?
            .map_err(|refused| Error::msg(format!("nats `{}`: {refused}", config.connection)))?;
        match start {
            Some(start) => ferry_guest::info!(
                "nats source: reading the stream {:?} from sequence {start} through the consumer {:?}",
                config.stream,
                config.durable
            ),
            None => ferry_guest::info!(
                "nats source: reading the stream {:?}, from the messages stored from now on, through the consumer {:?}",
                config.stream,
                config.durable
            ),
        }
        Ok(())
    }

    /// The messages of the fetch in flight past `cursor`, as a batch; `None` when there
    /// are none. Those at or below it were delivered and committed before (an
    /// acknowledgement lost, or a message's `ack_wait` run out while its batch was
    /// retried): acknowledged, not delivered again.
    fn batch(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        let fetched = |e: Error| e.context(format!("nats `{}`", self.config.connection));
        let mut packed = PackedMessages::with_capacity(self.in_flight.len() + self.in_flight.len() / 2);
        let (mut last, mut last_reply, mut done_reply) = (None, "", "");
        for message in Fetched::new(&self.in_flight) {
            let message = message.map_err(fetched)?;
            if message.stream_sequence <= cursor.sequence {
                done_reply = message.reply;
                continue;
            }
            messages::pack(&mut packed, &self.config.stream, &message);
            if last.is_none_or(|last| message.stream_sequence > last) {
                (last, last_reply) = (Some(message.stream_sequence), message.reply);
            }
        }
        if !done_reply.is_empty() {
            self.acknowledge(done_reply)?;
        }
        let Some(last) = last else {
            self.in_flight.clear();
            return Ok(None);
        };
        self.in_flight_reply = last_reply.to_string();
        Ok(Some(Batch::from_packed(packed, Cursor { sequence: last })))
    }

    /// Acknowledge `reply`'s message, and (cumulative) every one before it.
    fn acknowledge(&self, reply: &str) -> Result<(), Error> {
        if reply.is_empty() {
            return Ok(());
        }
        self.connection.acknowledge(&[reply.to_string()]).map_err(|e| self.failed(&e))?.map_err(|refused| {
            Error::msg(format!("nats `{}`: acknowledging refused: {refused}", self.config.connection))
        })
    }

    fn failed(&self, error: &ferry_guest::bindings::iggy::connector::nats::Error) -> Error {
        Error::msg(format!("nats `{}`: {}", self.config.connection, describe(error)))
    }
}

ferry_guest::export_source!(NatsSource);
