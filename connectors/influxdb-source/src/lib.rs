//! A source that reads points from an InfluxDB 1.x server in time order, each row a
//! JSON message, through `wasi:http` (the server's `host:port` granted in
//! `grants.network`), configured with the keys of Iggy's InfluxDB source where a 1.x
//! server can honour them; the query is InfluxQL (the table is in the README).
//!
//! The cursor is a time and a tie-breaker: `{"time": ns, "skip": n}`, the `n` rows at
//! exactly `time` already delivered. Each poll runs the operator's query with
//! `$cursor` = `time`, `$offset` = `n` and `$limit` = `batch_size`
//! (`... WHERE time >= $cursor ORDER BY time ASC LIMIT $limit OFFSET $offset`): the
//! rows at the cursor's time come first, in the server's order, and those delivered
//! are skipped, so any number of points at one time (several series, one timestamp)
//! are read a page at a time, none twice, none lost. The host commits the cursor a
//! batch ends at only once the batch is delivered, so a NACK or a crash reads the
//! same rows again (at least once).
//!
//! Each message is the row as a JSON object: `time` (ns since the epoch, an integer),
//! every tag and field column, and with `include_metadata` the `measurement`; its
//! origin timestamp is the row's time.

mod config;
mod query;
mod time;

use ferry_guest::{Batch, Error, Message, Source};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::query::{Transport, Wasi};

/// Where the source is: the rows at `time` (ns) already delivered are `skip`; `None`
/// before the first batch (then `initial_offset`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub time: Option<i64>,
    pub skip: u64,
}

struct InfluxDbSource<T = Wasi> {
    config: Config,
    transport: T,
}

impl<T: Transport + Default + 'static> Source for InfluxDbSource<T> {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        ferry_guest::info!(
            "influxdb source: {} database {:?}, {} rows a batch, from {:?}",
            config.url,
            config.db,
            config.batch_size,
            cursor
        );
        Ok(InfluxDbSource { config, transport: T::default() })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        let time = cursor.time.unwrap_or(self.config.initial_offset);
        let skip = if cursor.time.is_some() { cursor.skip } else { 0 };
        let query = query::text(&self.config, time, skip);
        let rows = query::run(&self.config, &mut self.transport, &query).map_err(Error::msg)?;
        let Some(last) = rows.last() else { return Ok(None) };
        let mut previous = time;
        for row in &rows {
            if row.time < previous {
                return Err(Error::msg(format!(
                    "the query {query:?} gave a row at {} after one at {previous}, before the cursor's time or out of \
                     order: it must select time >= $cursor ORDER BY time ASC",
                    row.time
                )));
            }
            previous = row.time;
        }
        let at_last = rows.iter().rev().take_while(|row| row.time == last.time).count() as u64;
        let next = Cursor { time: Some(last.time), skip: if last.time == time { skip + at_last } else { at_last } };
        let messages = rows
            .into_iter()
            .map(|row| {
                let mut object = row.columns;
                if self.config.include_metadata {
                    object.insert("measurement".into(), row.measurement.into());
                }
                let payload = serde_json::to_vec(&object).expect("JSON values serialize");
                let origin = u64::try_from(row.time / 1_000).unwrap_or(0);
                Message::new(payload).with_origin_timestamp(origin)
            })
            .collect::<Vec<_>>();
        if self.config.verbose {
            ferry_guest::info!("influxdb source: {} row(s), next {next:?}", messages.len());
        }
        Ok(Some(Batch::new(messages, next)))
    }
}

ferry_guest::export_source!(InfluxDbSource);

#[cfg(test)]
mod tests;
