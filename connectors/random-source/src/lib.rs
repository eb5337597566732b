//! A source of JSON records, like Iggy's `random_source`, built to be checked.
//!
//! Every record carries `seq`, taken from the connector's cursor, so `seq` counts
//! 0, 1, 2, ... with no gap across batches, NACKs, traps and restarts: anyone reading
//! the log can verify that nothing was lost. The text beside it is pseudo-random but
//! derived from `seq`, so a batch produced again after a NACK is byte-identical.
//!
//! `plugin_config`:
//!
//! | key                  | default | meaning                                            |
//! |----------------------|---------|----------------------------------------------------|
//! | `messages_per_batch` | 10      | records per batch                                  |
//! | `payload_size`       | 100     | bytes per record (at least the JSON around `text`) |
//! | `interval`           | none    | at most one batch per interval, e.g. `"100ms"`     |
//! | `max_count`          | none    | stop (return nothing) after this many records      |

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry_guest::{Batch, Error, Fields, PER_MESSAGE, PackedMessages, Source};
use serde::{Deserialize, Serialize};

mod record;
use record::write_record;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "default_messages_per_batch")]
    messages_per_batch: u64,
    #[serde(default = "default_payload_size")]
    payload_size: usize,
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    max_count: Option<u64>,
}

fn default_messages_per_batch() -> u64 {
    10
}

fn default_payload_size() -> usize {
    100
}

/// The cursor: the `seq` of the next record to produce.
#[derive(Serialize, Deserialize, Default)]
struct Cursor {
    next_seq: u64,
}

struct RandomSource {
    messages_per_batch: u64,
    payload_size: usize,
    interval: Option<Duration>,
    max_count: Option<u64>,
    last_batch_at: Option<Instant>,
}

impl Source for RandomSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        if config.messages_per_batch == 0 {
            return Err(Error::msg("plugin_config.messages_per_batch must be at least 1"));
        }
        let interval = config
            .interval
            .as_deref()
            .map(humantime::parse_duration)
            .transpose()
            .map_err(|e| Error::msg(e).context("plugin_config.interval"))?;
        ferry_guest::info!(
            "random source: {} records per batch of {} bytes, starting at seq {}",
            config.messages_per_batch,
            config.payload_size,
            cursor.next_seq
        );
        Ok(RandomSource {
            messages_per_batch: config.messages_per_batch,
            payload_size: config.payload_size,
            interval,
            max_count: config.max_count,
            last_batch_at: None,
        })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        let end = match self.max_count {
            Some(max) => max.min(cursor.next_seq + self.messages_per_batch),
            None => cursor.next_seq + self.messages_per_batch,
        };
        if end <= cursor.next_seq {
            return Ok(None);
        }
        if let (Some(interval), Some(last)) = (self.interval, self.last_batch_at)
            && last.elapsed() < interval
        {
            return Ok(None);
        }
        self.last_batch_at = Some(Instant::now());
        // Written straight into the batch's buffer: no message or payload of its own
        // per record.
        let fields = Fields { origin_timestamp: Some(now_micros()), ..Fields::default() };
        let mut packed =
            PackedMessages::with_capacity((end - cursor.next_seq) as usize * (self.payload_size + PER_MESSAGE));
        for seq in cursor.next_seq..end {
            packed.push_with(fields, |payload| write_record(seq, self.payload_size, payload));
        }
        Ok(Some(Batch::from_packed(packed, Cursor { next_seq: end })))
    }
}

ferry_guest::export_source!(RandomSource);

fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        write_record(seq, size, &mut out);
        out
    }

    #[test]
    fn records_are_json_of_the_requested_size_and_deterministic() {
        for size in [0, 10, 23, 100, 1000] {
            let bytes = record(42, size);
            let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(value["seq"], 42);
            if size >= 23 {
                assert_eq!(bytes.len(), size);
            }
            assert_eq!(bytes, record(42, size));
        }
        assert_ne!(record(1, 100), record(2, 100));
    }

    #[test]
    fn the_seq_is_written_in_decimal_whatever_its_width() {
        assert_eq!(record(0, 0), br#"{"seq":0,"text":""}"#);
        assert_eq!(record(42, 0), br#"{"seq":42,"text":""}"#);
        let max = record(u64::MAX, 0);
        assert_eq!(max, format!(r#"{{"seq":{},"text":""}}"#, u64::MAX).as_bytes());
    }

    #[test]
    fn a_batch_holds_the_records_after_the_cursor_with_one_origin_timestamp() {
        let config = r#"{"messages_per_batch": 3, "payload_size": 40, "max_count": 4}"#;
        let mut source = RandomSource::open(serde_json::from_str(config).unwrap(), &Cursor::default()).unwrap();
        let batch = source.poll(&Cursor { next_seq: 1 }).unwrap().expect("a batch");
        assert_eq!(batch.next.next_seq, 4);
        let messages = batch.packed.messages().unwrap();
        let payloads: Vec<_> = messages.iter().map(|m| m.payload.clone()).collect();
        assert_eq!(payloads, [record(1, 40), record(2, 40), record(3, 40)]);
        let origin = messages[0].origin_timestamp.expect("an origin timestamp");
        assert!(messages.iter().all(|m| m.origin_timestamp == Some(origin) && m.id.is_none() && m.headers.is_empty()));
        // `max_count` cuts the last batch short, then there is nothing more.
        assert_eq!(source.poll(&Cursor { next_seq: 3 }).unwrap().expect("a batch").packed.len(), 1);
        assert!(source.poll(&Cursor { next_seq: 4 }).unwrap().is_none());
    }
}
