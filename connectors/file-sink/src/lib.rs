//! A sink that appends every message, as one JSON line, to files in a directory the
//! operator granted, and writes each message exactly once however often the host
//! hands it again.
//!
//! Each line is what `ferry log read` would print of it: `stream`, `topic`,
//! `partition`, `offset`, `id` (a decimal string), `timestamp`, `origin_timestamp`,
//! `headers` (`{"key": {"<kind>": value}}`, 128-bit values as decimal strings, raw as
//! base64), and `payload` when it is UTF-8 text or `payload_base64` when it is not.
//! Every message is representable, so no message is ever refused.
//!
//! A batch's lines go to the file in one positioned write (one per 512 KiB) and one
//! fsync, through WASI 0.2 directly rather than `std::fs`, whose preview-1 adapter
//! would make a host call of every 4 KiB (see `data_file.rs`).
//!
//! A batch is acknowledged only after its lines are fsynced. A write or fsync error
//! is a `retry` with the OS's reason, and what part of the batch reached the file is
//! cut off again. After a crash the host hands the batches it had no
//! acknowledgement for again; the sink recovers, from its files, the highest offset
//! it wrote in each partition and skips (and acknowledges) every message at or
//! below it. To write a partition again from the start, point the sink at a new
//! directory or file name.
//!
//! Files: with `file = "sink.jsonl"`, the lines go to `sink.000001.jsonl`; once that
//! passes `rotate_bytes`, the next batch starts `sink.000002.jsonl`, and so on (`ls`
//! lists them in order). `sink.offsets.json` records, at each rotation, the highest
//! offsets of the files before the new one, so recovery reads only the newest file
//! and older ones may be moved away.
//!
//! `plugin_config`:
//!
//! | key            | default        | meaning                                                        |
//! |----------------|----------------|----------------------------------------------------------------|
//! | `directory`    | required       | the directory, as the guest sees it (`grants.dirs`, writable)  |
//! | `file`         | `"sink.jsonl"` | the file name the numbered data files are made from           |
//! | `rotate_bytes` | 67108864       | start a new file when the current one has this many bytes      |
//!
//! The operator grants the directory, for example
//! `grants.dirs = [{ host = "/var/lib/ferry/out", guest = "/out", writable = true }]`
//! with `plugin_config = { directory = "/out" }`.

mod data_file;
mod dir_sync;
mod marks;
mod naming;
mod store;

use std::path::PathBuf;

use ferry_guest::{Error, Sink, SinkBatch, Written};
use serde::Deserialize;

use crate::naming::Naming;
use crate::store::Store;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    directory: PathBuf,
    #[serde(default = "default_file")]
    file: String,
    #[serde(default = "default_rotate_bytes")]
    rotate_bytes: u64,
}

fn default_file() -> String {
    "sink.jsonl".to_string()
}

/// 64 MiB: what recovery reads at most (plus a batch) when an instance starts.
fn default_rotate_bytes() -> u64 {
    64 << 20
}

struct FileSink {
    store: Store,
}

impl Sink for FileSink {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        if config.rotate_bytes == 0 {
            return Err(Error::msg("plugin_config.rotate_bytes must be at least 1"));
        }
        let naming = Naming::new(&config.file)?;
        let (store, recovered) = Store::open(&config.directory, naming, config.rotate_bytes)
            .map_err(|e| e.context(format!("opening the sink's files in {}", config.directory.display())))?;
        ferry_guest::info!(
            "file sink: appending to {} in {}; recovered {} line(s) from {} file(s), {} partition(s) written{}",
            recovered.current,
            config.directory.display(),
            recovered.lines_read,
            recovered.files_read,
            recovered.partitions,
            if recovered.torn_cut > 0 {
                format!("; cut off {} byte(s) of a torn line never acknowledged", recovered.torn_cut)
            } else {
                String::new()
            }
        );
        Ok(FileSink { store })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let appended = self.store.append(batch)?;
        if let Some(file) = &appended.rotated_to {
            ferry_guest::info!("file sink: rotated to {file}");
        }
        if appended.skipped > 0 {
            ferry_guest::info!(
                "file sink: skipped {} message(s) of {}/{}/{} already written (a replay)",
                appended.skipped,
                batch.stream,
                batch.topic,
                batch.partition
            );
        }
        Ok(Written::Ack)
    }
}

ferry_guest::export_sink!(FileSink);
