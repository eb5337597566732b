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
//! | `messages_range`     | none    | `[min, max]`: min to max - 1 records per batch, as Iggy's random source has it (instead of `messages_per_batch`) |
//! | `payload_size`       | 100     | bytes per record (at least the JSON around `text`) |
//! | `interval`           | none    | at most one batch per interval, e.g. `"100ms"`     |
//! | `max_count`          | none    | stop (return nothing) after this many records      |
//!
//! Iggy's random source draws each batch's size from `messages_range`; this one
//! derives it from the cursor, so that a batch produced again is the same batch.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry_guest::{Batch, Error, Fields, PER_MESSAGE, PackedMessages, Source};
use serde::{Deserialize, Serialize};

mod record;
use record::write_record;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    messages_per_batch: Option<u64>,
    #[serde(default = "default_payload_size")]
    payload_size: usize,
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    max_count: Option<u64>,
    #[serde(default)]
    messages_range: Option<(u64, u64)>,
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
    batch_size: BatchSize,
    payload_size: usize,
    interval: Option<Duration>,
    max_count: Option<u64>,
    last_batch_at: Option<Instant>,
}

/// How many records a batch holds.
#[derive(Clone, Copy)]
enum BatchSize {
    Fixed(u64),
    /// `min..max`, chosen by the batch's first seq.
    Range(u64, u64),
}

impl BatchSize {
    fn of(config: &Config) -> Result<BatchSize, Error> {
        match (config.messages_per_batch, config.messages_range) {
            (Some(0), None) => Err(Error::msg("plugin_config.messages_per_batch must be at least 1")),
            (Some(size), None) => Ok(BatchSize::Fixed(size)),
            (None, None) => Ok(BatchSize::Fixed(10)),
            (Some(_), Some(_)) => Err(Error::msg("plugin_config: give messages_range or messages_per_batch, not both")),
            (None, Some((min, max))) if min == 0 || min >= max => Err(Error::msg(format!(
                "plugin_config.messages_range [{min}, {max}]: needs 1 <= min < max (a batch holds min to max - 1 \
                 records)"
            ))),
            (None, Some((min, max))) => Ok(BatchSize::Range(min, max)),
        }
    }

    /// The size of the batch whose first record is `seq`: the same whenever it is
    /// produced again.
    fn at(self, seq: u64) -> u64 {
        match self {
            BatchSize::Fixed(size) => size,
            BatchSize::Range(min, max) => min + spread(seq) % (max - min),
        }
    }
}

impl std::fmt::Display for BatchSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchSize::Fixed(size) => write!(f, "{size}"),
            BatchSize::Range(min, max) => write!(f, "{min} to {}", max - 1),
        }
    }
}

/// `seq`'s bits mixed (splitmix64's finaliser), so that neighbouring seqs give
/// unrelated sizes.
fn spread(seq: u64) -> u64 {
    let mut z = seq.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Source for RandomSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        let batch_size = BatchSize::of(&config)?;
        let interval = config
            .interval
            .as_deref()
            .map(humantime::parse_duration)
            .transpose()
            .map_err(|e| Error::msg(e).context("plugin_config.interval"))?;
        ferry_guest::info!(
            "random source: {} records per batch of {} bytes, starting at seq {}",
            batch_size,
            config.payload_size,
            cursor.next_seq
        );
        Ok(RandomSource {
            batch_size,
            payload_size: config.payload_size,
            interval,
            max_count: config.max_count,
            last_batch_at: None,
        })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        let size = self.batch_size.at(cursor.next_seq);
        let end = match self.max_count {
            Some(max) => max.min(cursor.next_seq + size),
            None => cursor.next_seq + size,
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

    #[test]
    fn iggys_messages_range_sizes_each_batch_within_it_and_the_same_when_produced_again() {
        let open = |config: &str| RandomSource::open(serde_json::from_str(config).unwrap(), &Cursor::default());
        let mut source = open(r#"{"messages_range": [10, 50], "payload_size": 30}"#).unwrap();
        let mut sizes = std::collections::BTreeSet::new();
        let mut cursor = Cursor::default();
        for _ in 0..200 {
            let batch = source.poll(&cursor).unwrap().expect("a batch");
            let size = batch.next.next_seq - cursor.next_seq;
            assert!((10..50).contains(&size), "{size}");
            assert_eq!(batch.packed.len() as u64, size);
            // Polled again from the same cursor (after a NACK): the same batch.
            let again = source.poll(&cursor).unwrap().expect("a batch");
            assert_eq!(again.next.next_seq, batch.next.next_seq);
            sizes.insert(size);
            cursor = batch.next;
        }
        assert!(sizes.len() > 20, "sizes spread over the range: {sizes:?}");

        for (config, words) in [
            (r#"{"messages_range": [0, 5]}"#, "needs 1 <= min < max"),
            (r#"{"messages_range": [5, 5]}"#, "needs 1 <= min < max"),
            (r#"{"messages_range": [1, 5], "messages_per_batch": 3}"#, "not both"),
        ] {
            let error = open(config).err().expect(config).to_string();
            assert!(error.contains(words), "{config}: {error}");
        }
    }
}
