//! A source that reads a Redis stream through a consumer group, on the server the
//! operator granted (`grants.redis`), and acknowledges (`XACK`) each entry only after
//! its batch was delivered and the cursor committed.
//!
//! `plugin_config`:
//!
//! | key             | default   | meaning |
//! |-----------------|-----------|---------|
//! | `connection`    | required  | the `[redis.NAME]` granted to the connector |
//! | `stream`        | required  | the stream's key |
//! | `group`         | `ferry`   | the consumer group (made, with the stream, if missing) |
//! | `consumer`      | `ferry`   | this connector's name in the group |
//! | `batch_size`    | 100       | the most entries a batch takes (1 to 10,000) |
//! | `start`         | `0`       | where a group the connector makes starts: `0` (every entry) or `$` (new ones) |
//! | `payload_field` | `payload` | the field whose bytes are the payload; an entry without it is a JSON object of its fields |
//!
//! Nothing is lost, and nothing is delivered twice into the local log: an entry
//! stays in the group's pending list until it is acknowledged, which happens only
//! after the host committed the cursor past it. The cursor is the last entry id
//! delivered; an instance starts by reading its pending list, acknowledging what the
//! cursor says was delivered (a crash between the commit and the `XACK`) and
//! delivering the rest. After a NACK the same entries are read again from the pending
//! list, in the same batch. Each entry's message id is derived from its entry id, so
//! an Iggy target sees the same message if it is ever delivered twice.

mod config;
mod entries;

use ferry_guest::bindings::iggy::connector::redis::Connection;
use ferry_guest::redis::{Reply, command, describe, execute, execute_packed};
use ferry_guest::{Batch, Error, Nack, PER_MESSAGE, PackedMessages, Source};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::entries::{EntryId, from_reply, pack};

/// The last entry delivered (and committed), `ms-seq`; empty before the first.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Cursor {
    #[serde(default)]
    last: String,
}

struct RedisSource {
    config: Config,
    connection: Connection,
    /// Read the pending list (entries read before and not acknowledged) before new ones.
    reading_pending: bool,
    /// The entry ids of the batch in flight.
    in_flight: Vec<String>,
    /// Ids whose `XACK` failed, tried again before the next read.
    unacked: Vec<String>,
}

impl Source for RedisSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, _cursor: &Cursor) -> Result<Self, Error> {
        config.check().map_err(Error::msg)?;
        let server = |e| Error::msg(format!("redis `{}`: {}", config.connection, describe(&e)));
        let connection = Connection::open(&config.connection).map_err(server)?;
        let create = command(["XGROUP", "CREATE", &config.stream, &config.group, &config.start, "MKSTREAM"]);
        let reply = execute(&connection, create).map_err(|e| e.context(format!("redis `{}`", config.connection)))?;
        if let Some(refusal) = reply.server_error().filter(|r| !r.starts_with("BUSYGROUP")) {
            return Err(Error::msg(format!(
                "redis `{}`: cannot make the group {:?} of the stream {:?}: {refusal}",
                config.connection, config.group, config.stream
            )));
        }
        Ok(RedisSource { config, connection, reading_pending: true, in_flight: Vec::new(), unacked: Vec::new() })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        if !self.unacked.is_empty() {
            // Kept until the server took them: a failure here is tried again next time.
            self.acknowledge(self.unacked.clone())?;
            self.unacked.clear();
        }
        let delivered =
            if cursor.last.is_empty() { None } else { Some(EntryId::parse(&cursor.last).map_err(Error::msg)?) };
        loop {
            let from = if self.reading_pending { "0" } else { ">" };
            let count = self.config.batch_size.to_string();
            let read = command([
                "XREADGROUP",
                "GROUP",
                &self.config.group,
                &self.config.consumer,
                "COUNT",
                &count,
                "STREAMS",
                &self.config.stream,
                from,
            ]);
            let reply = execute_packed(&self.connection, read)
                .map_err(|e| e.context(format!("redis `{}`", self.config.connection)))?;
            let entries =
                from_reply(&reply).map_err(|p| Error::msg(format!("redis `{}`: {p}", self.config.connection)))?;
            if entries.is_empty() {
                if self.reading_pending {
                    self.reading_pending = false;
                    continue;
                }
                return Ok(None);
            }
            // Delivered and committed before a crash kept them from being acknowledged;
            // or deleted while pending: acknowledge them, deliver the rest.
            let (done, fresh): (Vec<_>, Vec<_>) =
                entries.into_iter().partition(|e| delivered.is_some_and(|d| e.id <= d) || e.fields.is_none());
            if !done.is_empty() {
                self.acknowledge(done.iter().map(|e| e.id.to_string()).collect())?;
            }
            let Some(last) = fresh.last().map(|e| e.id) else { continue };
            self.in_flight = fresh.iter().map(|e| e.id.to_string()).collect();
            let mut packed = PackedMessages::with_capacity(fresh.len() * (PER_MESSAGE + 160));
            for entry in &fresh {
                pack(&mut packed, &self.config.stream, entry, &self.config.payload_field);
            }
            return Ok(Some(Batch::from_packed(packed, Cursor { last: last.to_string() })));
        }
    }

    fn on_ack(&mut self, _committed: &Cursor) {
        let ids = std::mem::take(&mut self.in_flight);
        if let Err(error) = self.acknowledge(ids.clone()) {
            ferry_guest::warn!("{error}; the entries stay pending and are acknowledged before the next read");
            self.unacked.extend(ids);
        }
    }

    fn on_nack(&mut self, _nack: &Nack) {
        // The entries are still pending: read them again, as the same batch.
        self.in_flight.clear();
        self.reading_pending = true;
    }
}

impl RedisSource {
    fn execute(&self, command: Vec<Vec<u8>>) -> Result<Reply, Error> {
        execute(&self.connection, command).map_err(|e| e.context(format!("redis `{}`", self.config.connection)))
    }

    /// `XACK` the entries `ids` of the group.
    fn acknowledge(&self, ids: Vec<String>) -> Result<(), Error> {
        let mut ack = command(["XACK", &self.config.stream, &self.config.group]);
        ack.extend(ids.into_iter().map(String::into_bytes));
        match self.execute(ack)?.server_error() {
            Some(refusal) => Err(Error::msg(format!("redis `{}`: XACK refused: {refusal}", self.config.connection))),
            None => Ok(()),
        }
    }
}

ferry_guest::export_source!(RedisSource);
