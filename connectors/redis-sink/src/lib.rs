//! A sink that writes every message to Redis through the server the operator granted
//! (`grants.redis`): as an entry of a stream (`XADD`), once per message id, or as a
//! key (`SET`) or hash (`HSET`) for a materialised view.
//!
//! `plugin_config`:
//!
//! | key             | default | meaning |
//! |-----------------|---------|---------|
//! | `connection`    | required | the `[redis.NAME]` granted to the connector |
//! | `mode`          | `stream` | `stream`, `set` or `hash` |
//! | `key`           | `{stream}:{topic}` (stream), `{stream}:{topic}:{id}` (set, hash) | the key: `{stream}`, `{topic}`, `{partition}`, `{offset}`, `{id}`, `{payload.FIELD}` filled in |
//! | `max_len`       | none | stream: trim it to about this many entries (`MAXLEN ~`) |
//! | `dedupe_window` | `24h` | stream: how long a message's id is remembered, so that a replay within it adds nothing |
//! | `ttl`           | none | set, hash: the key's expiry |
//!
//! A batch is one pipeline (one round trip); it is acknowledged only once every reply
//! is in. A message the server refuses (a key of the wrong type, say), or one that
//! has no key or value, is rejected to the dead letters with the reason; a connection
//! that fails is a retry of the batch.

mod commands;
mod config;
mod template;

use ferry_guest::bindings::iggy::connector::redis::Connection;
use ferry_guest::redis::{describe, pipeline};
use ferry_guest::{Error, Sink, SinkBatch, Written};

use crate::config::Config;

struct RedisSink {
    config: Config,
    connection: Connection,
}

impl Sink for RedisSink {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        let connection = Connection::open(&config.connection)
            .map_err(|e| Error::msg(format!("redis `{}`: {}", config.connection, describe(&e))))?;
        Ok(RedisSink { config, connection })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let mut rejected = Vec::new();
        let mut commands = Vec::with_capacity(batch.messages.len());
        let mut sent = Vec::with_capacity(batch.messages.len());
        for (index, message) in batch.messages.iter().enumerate() {
            match commands::for_message(&self.config, batch, message) {
                Ok(command) => {
                    commands.push(command);
                    sent.push(index);
                }
                Err(reason) => rejected.push((index, reason)),
            }
        }
        if !commands.is_empty() {
            let replies = match pipeline(&self.connection, &commands, false) {
                Ok(replies) => replies,
                Err(error) => return Ok(Written::retry(format!("redis `{}`: {error}", self.config.connection))),
            };
            for (index, reply) in sent.into_iter().zip(replies) {
                if let Some(refusal) = reply.server_error() {
                    rejected.push((index, format!("the server refused it: {refusal}")));
                }
            }
        }
        rejected.sort_by_key(|(index, _)| *index);
        Ok(if rejected.is_empty() { Written::Ack } else { Written::reject(rejected) })
    }
}

ferry_guest::export_sink!(RedisSink);
