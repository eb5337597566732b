//! A sink that inserts every message into a ClickHouse table over its HTTP
//! interface, through `wasi:http` (the server's `host:port` granted in
//! `grants.network`), configured with the keys and defaults of Iggy's ClickHouse
//! sink, so that its `plugin_config` moves over unchanged.
//!
//! A batch is one insert (`rows.rs`: `JSONEachRow`, or with `insert_format =
//! "string"` the payloads passed through as rows of `string_format`), acknowledged
//! only once ClickHouse took it: at least once, never a silent drop. A row the
//! server refuses fails its whole insert naming the row (`insert.rs`): that message
//! goes to the dead letters with the server's words, and the rest is inserted again
//! within the same write. A payload that cannot be a row (not a JSON object, a line
//! break in a passed-through row) goes there without being sent.
//!
//! A replay (the batch in flight when ferry died, or a timeout after ClickHouse took
//! it) inserts its rows again: ClickHouse's own insert deduplication needs a
//! replicated table, so ferry's answer is `id_column`: each row gets the message's
//! stable id (the same on every replay) in that column, and a `ReplacingMergeTree`
//! ordered by it keeps one row per id (read with `FINAL`, or once merged).

mod config;
mod insert;
mod rows;

use ferry_guest::{Error, Rejected, Sink, SinkBatch, Written};

use crate::config::Config;
use crate::insert::{Inserted, Transport, Wasi};

struct ClickHouseSink<T = Wasi> {
    config: Config,
    transport: T,
}

impl<T: Transport + Default + 'static> Sink for ClickHouseSink<T> {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        let mut sink = ClickHouseSink { config, transport: T::default() };
        sink.check_table()?;
        ferry_guest::info!(
            "clickhouse sink: inserting into {}.{} at {} as {}",
            sink.config.database,
            sink.config.table,
            sink.config.url,
            sink.config.format.name()
        );
        Ok(sink)
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let mut rejected = Vec::new();
        let mut rows = Vec::with_capacity(batch.messages.len());
        for (index, message) in batch.messages.iter().enumerate() {
            match rows::unfit(&self.config, message) {
                Some(why) => rejected.push(Rejected::new(index, why)),
                None => rows.push(index),
            }
        }
        while !rows.is_empty() {
            let body = rows::body(&self.config, batch, &rows);
            match insert::insert(&self.config, &mut self.transport, body) {
                Inserted::All => {
                    if self.config.verbose {
                        ferry_guest::info!("clickhouse sink: inserted {} rows into {}", rows.len(), self.config.table);
                    }
                    break;
                }
                // Left out, and the rest inserted again.
                Inserted::RowRefused(row, said) if row < rows.len() => {
                    rejected.push(Rejected::new(rows.remove(row), said));
                }
                Inserted::RowRefused(_, said) => return Ok(Written::unwritable(said)),
                Inserted::Later(why) => {
                    let first = batch.messages[rows[0]].offset;
                    return Ok(Written::retry(format!("the insert from offset {first}: {why}")));
                }
            }
        }
        rejected.sort_by_key(|r| r.index);
        Ok(if rejected.is_empty() { Written::Ack } else { Written::Reject(rejected) })
    }
}

impl<T: Transport> ClickHouseSink<T> {
    /// The table is there: said at open, rather than at the first batch.
    fn check_table(&mut self) -> Result<(), Error> {
        let (database, table) = (&self.config.database, &self.config.table);
        let request = insert::request(&self.config, &format!("EXISTS TABLE {database}.{table}"), Vec::new());
        let at = format!("clickhouse sink: {}", self.config.url);
        let response = self.transport.send(&request).map_err(|e| Error::msg(format!("{at}: {e}")))?;
        let answer = String::from_utf8_lossy(&response.body);
        match (response.status, answer.trim()) {
            (200, "1") => Ok(()),
            (200, "0") => Err(Error::msg(format!(
                "{at}: there is no table {database}.{table}: create it (with id_column, a ReplacingMergeTree ordered by \
                 it)"
            ))),
            (status, answer) => Err(Error::msg(format!("{at} answered {status}: {answer}"))),
        }
    }
}

ferry_guest::export_sink!(ClickHouseSink);

#[cfg(test)]
mod tests;
