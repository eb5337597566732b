//! A source that reads Kafka topics, every partition of each, through the cluster the
//! operator granted (`grants.kafka`), and commits the consumer group's offsets only
//! after a batch was delivered and the cursor committed: the way from Kafka to Iggy.
//!
//! `plugin_config`:
//!
//! | key             | default    | meaning |
//! |-----------------|------------|---------|
//! | `connection`    | required   | the `[kafka.NAME]` granted to the connector |
//! | `topics`        | required   | the topics read, every partition of each |
//! | `group`         | `ferry`    | the consumer group whose offsets are committed |
//! | `batch_size`    | 100        | the most messages a batch takes (1 to 10,000) |
//! | `fetch_wait_ms` | 100        | how long a poll waits for a first message |
//! | `start`         | `earliest` | where a partition with no cursor and no committed offset starts: `earliest` or `latest` |
//!
//! Nothing is lost, and nothing is delivered twice into the local log. The cursor
//! holds each partition's next offset and is committed by the host after each
//! delivery; only then are the same offsets sent to be committed to the group (not
//! awaited: a source does not wait a round trip per batch for the group). At open each
//! partition starts at its cursor's offset, else the group's committed one (a group
//! moved from Kafka consumers to ferry resumes where they stopped), else at `start`.
//! A message below the cursor (the group's offsets are behind it after a crash
//! between the two commits) is not delivered again. After a NACK the same messages are
//! delivered again, as the same batch. Each message's id comes from its topic,
//! partition and offset, so an Iggy target sees the same message if it is ever
//! delivered twice.

mod config;
mod cursor;
mod messages;

use ferry_guest::bindings::iggy::connector::kafka::{Connection, Error as KafkaError, Position};
use ferry_guest::kafka::{Fetched, describe};
use ferry_guest::{Batch, Error, Nack, PackedMessages, Source};

use crate::config::Config;
use crate::cursor::Cursor;

struct KafkaSource {
    config: Config,
    connection: Connection,
    /// The fetch of the batch in flight, kept to deliver again after a NACK.
    in_flight: Vec<u8>,
    /// The batch in flight was NACKed: the next poll delivers it again.
    again: bool,
    /// Offsets committed to the host whose commit to the group failed, tried again
    /// before the next fetch.
    uncommitted: Option<Vec<Position>>,
}

impl Source for KafkaSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        config.check().map_err(Error::msg)?;
        let connection = Connection::open(&config.connection)
            .map_err(|e| Error::msg(format!("kafka `{}`: {}", config.connection, describe(&e))))?;
        let source = KafkaSource { config, connection, in_flight: Vec::new(), again: false, uncommitted: None };
        source.assign(cursor)?;
        Ok(source)
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        if let Some(positions) = self.uncommitted.take() {
            self.commit(positions);
        }
        if !std::mem::take(&mut self.again) || self.in_flight.is_empty() {
            let config = &self.config;
            self.in_flight = self
                .connection
                .fetch(config.batch_size, config.fetch_wait_ms)
                .map_err(|e| self.failed(&e))?
                .map_err(|refused| Error::msg(format!("kafka `{}`: {refused}", config.connection)))?;
        }
        self.batch(cursor)
    }

    fn on_ack(&mut self, committed: &Cursor) {
        self.in_flight.clear();
        self.commit(committed.positions(&self.config.topics));
    }

    fn on_nack(&mut self, _nack: &Nack) {
        self.again = true;
    }
}

impl KafkaSource {
    /// Assign every partition of the topics, each from its cursor's offset where it
    /// has one (see the module's doc).
    fn assign(&self, cursor: &Cursor) -> Result<(), Error> {
        let config = &self.config;
        let starts = cursor.positions(&config.topics);
        let from_earliest = config.start == "earliest";
        let assigned = self
            .connection
            .assign(&config.group, &config.topics, &starts, from_earliest)
            .map_err(|e| self.failed(&e))?
            .map_err(|refused| Error::msg(format!("kafka `{}`: {refused}", config.connection)))?;
        let places: Vec<String> = assigned
            .iter()
            .map(|p| match p.offset {
                -1 => format!("{}/{} from the {}", p.topic, p.partition, config.start),
                offset => format!("{}/{} from offset {offset}", p.topic, p.partition),
            })
            .collect();
        ferry_guest::info!("kafka source: reading as the group {:?}: {}", config.group, places.join(", "));
        Ok(())
    }

    /// The messages of the fetch in flight past `cursor`, as a batch; `None` when there
    /// are none. Those below it were delivered and committed before (the group's
    /// offsets lag the cursor after a crash between the two commits): not again.
    fn batch(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        let mut packed = PackedMessages::with_capacity(self.in_flight.len() + self.in_flight.len() / 2);
        // Each partition's next offset as the fetch moves it, looked up in the cursor
        // once per partition, not once per message (a fetch holds few partitions).
        let mut partitions: Vec<(&str, i32, Option<i64>)> = Vec::new();
        for message in Fetched::new(&self.in_flight) {
            let message = message.map_err(|e| e.context(format!("kafka `{}`", self.config.connection)))?;
            let at = match partitions.iter().position(|&(t, p, _)| p == message.partition && t == message.topic) {
                Some(at) => at,
                None => {
                    partitions.push((message.topic, message.partition, cursor.next(message.topic, message.partition)));
                    partitions.len() - 1
                }
            };
            let next = &mut partitions[at].2;
            if next.is_some_and(|next| message.offset < next) {
                continue;
            }
            messages::pack(&mut packed, &message);
            *next = Some(message.offset + 1);
        }
        if packed.is_empty() {
            self.in_flight.clear();
            return Ok(None);
        }
        let mut next = cursor.clone();
        for (topic, partition, offset) in partitions {
            if let Some(offset) = offset {
                next.set(topic, partition, offset);
            }
        }
        Ok(Some(Batch::from_packed(packed, next)))
    }

    /// Send `positions` to be committed to the group (not awaited: the host logs a
    /// commit the cluster fails, and the next covers it); one that cannot be sent is
    /// said, and tried again before the next fetch (the cursor, not the group, is what
    /// the source resumes from).
    fn commit(&mut self, positions: Vec<Position>) {
        let failed = match self.connection.commit(&positions) {
            Ok(Ok(())) => return,
            Ok(Err(refused)) => refused,
            Err(error) => describe(&error),
        };
        ferry_guest::warn!(
            "kafka `{}`: committing the group's offsets failed ({failed}); tried again before the next fetch",
            self.config.connection
        );
        self.uncommitted = Some(positions);
    }

    fn failed(&self, error: &KafkaError) -> Error {
        Error::msg(format!("kafka `{}`: {}", self.config.connection, describe(error)))
    }
}

ferry_guest::export_source!(KafkaSource);
