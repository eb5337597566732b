//! A sink that misbehaves on purpose, for Ferry's sink-loop, dead-letter and
//! bisection tests, and that records what it claims to have written so a test can
//! check the host's bookkeeping against it.
//!
//! Messages are expected to be `{"seq":N,...}`, as the test sources produce. For every
//! message it reports as written (all of a batch it acks; the others of a batch it
//! rejects some of), it appends `{"seq":N,"offset":O,"partition":P}` to
//! `<dir>/written.jsonl` and fsyncs, *before* answering. A batch it answers `retry`
//! or `unwritable` leaves nothing there.
//!
//! `plugin_config` (every key optional except `dir` when `record` or `trap_on_seq`
//! needs it; without modes it acks everything, a null sink for benchmarks):
//!
//! | key               | default | meaning                                                      |
//! |-------------------|---------|--------------------------------------------------------------|
//! | `dir`             | none    | guest path of a writable granted directory                   |
//! | `record`          | true    | append to `<dir>/written.jsonl`; `false` writes nothing      |
//! | `retry_times`     | 0       | answer `retry` this many times for each batch (by its partition and first offset, per instance) before going on; a batch that comes again after that is retried again |
//! | `trap_on_seq`     | none    | panic on a batch holding this seq, once per connector: the marker `<dir>/trapped-S` is created first, and a later instance that finds it does not trap |
//! | `reject_seqs`     | `[]`    | reject exactly these messages, with reason `poison seq N`    |
//! | `unwritable_seqs` | `[]`    | answer `unwritable("poison somewhere")` for any batch holding one, writing nothing |
//! | `fail_open`       | false   | refuse to open                                               |
//! | `echo`            | none    | appended to every retry and reject reason (a test hands it as a secret) |
//!
//! Checks come in that order: trap, retry, unwritable, reject. A message whose payload
//! has no `seq` is an error (a retry naming its offset) whenever `seq` is needed.

use std::collections::{BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use ferry_guest::{Error, Sink, SinkBatch, StoredMessage, Written};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    dir: Option<PathBuf>,
    #[serde(default = "yes")]
    record: bool,
    #[serde(default)]
    retry_times: u64,
    #[serde(default)]
    trap_on_seq: Option<u64>,
    #[serde(default)]
    reject_seqs: BTreeSet<u64>,
    #[serde(default)]
    unwritable_seqs: BTreeSet<u64>,
    #[serde(default)]
    fail_open: bool,
    #[serde(default)]
    echo: Option<String>,
}

fn yes() -> bool {
    true
}

/// `echo`, to append to a reason.
fn echo(config: &Config) -> String {
    config.echo.as_ref().map(|echo| format!(": {echo}")).unwrap_or_default()
}

/// The part of a payload this sink reads.
#[derive(Deserialize)]
struct Record {
    seq: u64,
}

struct FaultySink {
    config: Config,
    /// `<dir>/written.jsonl`, open for appending, when recording.
    written: Option<File>,
    /// Retries answered so far, per batch (partition, first offset).
    retries: HashMap<(u32, u64), u64>,
}

/// `plugin_config.dir`, or an error naming what needs it.
fn dir<'a>(config: &'a Config, needed_by: &str) -> Result<&'a PathBuf, Error> {
    config.dir.as_ref().ok_or_else(|| Error::msg(format!("plugin_config.dir is required by {needed_by}")))
}

fn seq(message: &StoredMessage) -> Result<u64, Error> {
    Ok(message.payload_json::<Record>()?.seq)
}

impl Sink for FaultySink {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        if config.fail_open {
            return Err(Error::msg("configured to refuse to open"));
        }
        if config.trap_on_seq.is_some() {
            dir(&config, "trap_on_seq")?;
        }
        let written = if config.record {
            let path = dir(&config, "record (set record: false for a null sink)")?.join("written.jsonl");
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| Error::msg(format!("opening {}: {e}", path.display())))?;
            Some(file)
        } else {
            None
        };
        ferry_guest::info!("faulty sink opened");
        Ok(FaultySink { config, written, retries: HashMap::new() })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let needs_seqs = self.config.trap_on_seq.is_some()
            || !self.config.reject_seqs.is_empty()
            || !self.config.unwritable_seqs.is_empty()
            || self.written.is_some();
        let seqs: Vec<u64> =
            if needs_seqs { batch.messages.iter().map(seq).collect::<Result<_, _>>()? } else { Vec::new() };

        if let Some(trap) = self.config.trap_on_seq
            && seqs.contains(&trap)
        {
            let marker = dir(&self.config, "trap_on_seq")?.join(format!("trapped-{trap}"));
            if !marker.exists() {
                File::create(&marker)
                    .and_then(|file| file.sync_all())
                    .map_err(|e| Error::msg(format!("creating {}: {e}", marker.display())))?;
                panic!("faulty sink: configured to trap on seq {trap}");
            }
        }

        if self.config.retry_times > 0 {
            let key = (batch.partition, batch.messages[0].offset);
            let retried = self.retries.entry(key).or_default();
            if *retried < self.config.retry_times {
                *retried += 1;
                return Ok(Written::retry(format!(
                    "configured to retry ({} of {}) the batch at offset {}{}",
                    retried,
                    self.config.retry_times,
                    key.1,
                    echo(&self.config)
                )));
            }
            // Done with this batch: should it come again, it is retried again.
            self.retries.remove(&key);
        }

        if seqs.iter().any(|seq| self.config.unwritable_seqs.contains(seq)) {
            return Ok(Written::unwritable("poison somewhere"));
        }

        let rejected: Vec<(usize, String)> = seqs
            .iter()
            .enumerate()
            .filter(|(_, seq)| self.config.reject_seqs.contains(seq))
            .map(|(index, seq)| (index, format!("poison seq {seq}{}", echo(&self.config))))
            .collect();
        if let Some(file) = &mut self.written {
            let mut lines = String::new();
            for (index, (message, seq)) in batch.messages.iter().zip(&seqs).enumerate() {
                if !rejected.iter().any(|(rejected, _)| *rejected == index) {
                    let (offset, partition) = (message.offset, batch.partition);
                    lines.push_str(&format!("{{\"seq\":{seq},\"offset\":{offset},\"partition\":{partition}}}\n"));
                }
            }
            file.write_all(lines.as_bytes())
                .and_then(|()| file.sync_data())
                .map_err(|e| Error::msg(e).context("recording to written.jsonl"))?;
        }
        Ok(if rejected.is_empty() { Written::Ack } else { Written::reject(rejected) })
    }
}

ferry_guest::export_sink!(FaultySink);
