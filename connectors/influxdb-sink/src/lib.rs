//! A sink that writes every message as a point to an InfluxDB 1.x server: line
//! protocol `POST`ed to `/write` through `wasi:http` (the server's `host:port`
//! granted in `grants.network`), configured with the keys of Iggy's InfluxDB sink
//! where a 1.x server can honour them (the table is in the README).
//!
//! Each batch's messages become points (`line.rs`); a message that cannot be one is
//! rejected, naming why. The points go in requests of at most `batch_size`; the batch
//! is acknowledged once every request was answered 204, so a point is never lost:
//! what is not answered is handed again (at least once). Writing a point again is
//! harmless: a point is its measurement, tag set and timestamp, all taken from the
//! message, and InfluxDB keeps one point for them, the last written. That is how the
//! sink is idempotent on replay.
//!
//! A request the server refuses for good (`send.rs`: 400 "partial write: field type
//! conflict", "unable to parse", 413) is split in halves and sent again until the
//! points it refuses are alone: those are rejected (the dead letters) with the
//! server's answer, every other one is written. (A 1.x partial write stored the
//! other points of the request already; sending them again overwrites them.)

mod config;
mod escape;
mod line;
mod record;
mod send;

use ferry_guest::{Error, Rejected, Sink, SinkBatch, Written};

use crate::config::Config;
use crate::send::{Sent, Transport, Wasi};

struct InfluxDbSink<T = Wasi> {
    config: Config,
    transport: T,
    scratch: line::Scratch,
}

/// A point of the batch: the index of its message, and where its line is in the
/// batch's text.
struct Point {
    index: usize,
    start: usize,
    end: usize,
}

impl<T: Transport + Default + 'static> Sink for InfluxDbSink<T> {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        ferry_guest::info!(
            "influxdb sink: {} database {:?}, measurement {}, precision {:?}",
            config.url,
            config.db,
            config.measurement_field.as_deref().map_or(config.measurement.clone(), |f| format!("from {f:?}")),
            config.precision
        );
        Ok(InfluxDbSink { config, transport: T::default(), scratch: line::Scratch::default() })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let mut text = String::with_capacity(batch.messages.len() * 128);
        let mut points = Vec::with_capacity(batch.messages.len());
        let mut rejected = Vec::new();
        for (index, message) in batch.messages.iter().enumerate() {
            let start = text.len();
            match line::append(&self.config, batch, message, &mut self.scratch, &mut text) {
                Ok(()) => {
                    points.push(Point { index, start, end: text.len() });
                    text.push('\n');
                }
                Err(why) => rejected.push(Rejected::new(index, format!("not written to InfluxDB: {why}"))),
            }
        }
        for chunk in points.chunks(self.config.batch_size) {
            if let Err(why) = self.write_points(&text, chunk, &mut rejected) {
                return Ok(Written::retry(format!(
                    "the points of the messages at offsets {} to {}: {why}",
                    batch.messages[chunk[0].index].offset,
                    batch.messages[chunk[chunk.len() - 1].index].offset
                )));
            }
        }
        if self.config.verbose {
            ferry_guest::info!(
                "influxdb sink: wrote {} point(s), rejected {}",
                batch.messages.len() - rejected.len(),
                rejected.len()
            );
        }
        rejected.sort_by_key(|r| r.index);
        Ok(if rejected.is_empty() { Written::Ack } else { Written::Reject(rejected) })
    }
}

impl<T: Transport> InfluxDbSink<T> {
    /// Write `points` (of `text`) in one request; refused, in halves until the points
    /// the server refuses are alone, which are added to `rejected`. `Err`: not now.
    fn write_points(&mut self, text: &str, points: &[Point], rejected: &mut Vec<Rejected>) -> Result<(), String> {
        let body = text.as_bytes()[points[0].start..points[points.len() - 1].end].to_vec();
        match send::send(&self.config, &mut self.transport, body) {
            Sent::Written => Ok(()),
            Sent::Later(why) => Err(why),
            Sent::Refused(why) if points.len() == 1 => {
                rejected.push(Rejected::new(points[0].index, format!("InfluxDB refused the point: {why}")));
                Ok(())
            }
            Sent::Refused(_) => {
                let (first, second) = points.split_at(points.len() / 2);
                self.write_points(text, first, rejected)?;
                self.write_points(text, second, rejected)
            }
        }
    }
}

ferry_guest::export_sink!(InfluxDbSink);

#[cfg(test)]
mod tests;
