//! The sink's directory: recovery at open, appending a batch durably and only once,
//! rotation.
//!
//! Only `std::fs` and the data file's handle (`data_file.rs`, the one part that
//! differs in the guest) here, no host calls, so the whole of it is tested natively
//! against a temporary directory (see the tests at the bottom).
//!
//! Recovery trusts the files: the checkpoint gives the marks of every data file
//! before the one it names, and the data files from that one on are read line by
//! line. Rotation writes the checkpoint (to a temporary name, fsynced, then renamed
//! over the old one) *before* it creates the next data file, so a crash between the
//! two leaves a checkpoint naming a file that does not exist yet, which recovery
//! creates. Files before the checkpoint's are never read again: an operator may move
//! them away.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use ferry_guest::{Error, SinkBatch};

use crate::data_file::DataFile;
use crate::marks::{Marks, Partition};
use crate::naming::Naming;

/// An open directory of the sink.
pub struct Store {
    dir: PathBuf,
    naming: Naming,
    rotate_bytes: u64,
    marks: Marks,
    /// The number of the data file being appended to.
    current: u64,
    /// It, open for writing; `None` after a failed write could not be undone, until
    /// recovery runs again.
    file: Option<DataFile>,
    /// Its length: the end of its last complete, fsynced line, where the next batch
    /// is written.
    len: u64,
}

/// What recovery found, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The data file appended to from now on.
    pub current: String,
    /// Data files read, and their complete lines.
    pub files_read: u64,
    pub lines_read: u64,
    /// Bytes of a torn last line cut off the current file.
    pub torn_cut: u64,
    /// Partitions with something written.
    pub partitions: usize,
}

/// What became of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// Messages appended now.
    pub written: usize,
    /// Messages at or below what was already written, skipped.
    pub skipped: usize,
    /// The data file this batch started, when it rotated.
    pub rotated_to: Option<String>,
}

/// Roughly what a line holds besides the payload (its other fields), so that the
/// buffer of a batch's lines is allocated once, not grown and copied.
const LINE_OVERHEAD: usize = 256;

/// An error about `path`, with the OS's reason.
fn io_error(what: &str, path: &Path, error: std::io::Error) -> Error {
    Error::msg(format!("{what} {}: {error}", path.display()))
}

/// Make the directory's entries (a new file, a rename) durable.
fn sync_dir(dir: &Path) -> Result<(), Error> {
    crate::dir_sync::sync_dir(dir).map_err(|e| io_error("syncing the directory", dir, e))
}

impl Store {
    /// Open the sink's files in `dir` and recover what is already written.
    pub fn open(dir: &Path, naming: Naming, rotate_bytes: u64) -> Result<(Store, Recovered), Error> {
        if let Err(e) = std::fs::metadata(dir) {
            return Err(Error::msg(format!(
                "the directory {} is not there for the guest ({e}); it must be granted \
                 (grants.dirs, writable) and named by its guest path",
                dir.display()
            )));
        }
        let checkpoint_path = dir.join(naming.checkpoint());
        let checkpoint = match std::fs::read(&checkpoint_path) {
            Ok(bytes) => Some(Marks::from_checkpoint(&naming.checkpoint(), &bytes)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_error("reading", &checkpoint_path, e)),
        };
        let mut numbers = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io_error("listing", dir, e))? {
            let entry = entry.map_err(|e| io_error("listing", dir, e))?;
            if let Some(n) = entry.file_name().to_str().and_then(|name| naming.parse(name)) {
                numbers.push(n);
            }
        }
        numbers.sort_unstable();
        // Without a checkpoint (no rotation yet, or it was removed) every data file
        // is read; with one, those from the file it names.
        let (mut marks, first) =
            checkpoint.unwrap_or_else(|| (Marks::default(), numbers.first().copied().unwrap_or(1)));
        let current = numbers.last().copied().unwrap_or(first).max(first);

        let mut recovered =
            Recovered { current: naming.data(current), files_read: 0, lines_read: 0, torn_cut: 0, partitions: 0 };
        let mut len = 0;
        for &n in numbers.iter().filter(|&&n| n >= first) {
            let path = dir.join(naming.data(n));
            let file = File::open(&path).map_err(|e| io_error("opening", &path, e))?;
            let scanned = marks.scan(&naming.data(n), BufReader::new(file))?;
            recovered.files_read += 1;
            recovered.lines_read += scanned.lines;
            if n == current {
                len = scanned.complete_len;
                recovered.torn_cut = scanned.torn;
            }
        }
        recovered.partitions = marks.len();

        let path = dir.join(naming.data(current));
        let existed = path.exists();
        let file = DataFile::open(&path).map_err(|e| io_error("opening", &path, e))?;
        if recovered.torn_cut > 0 {
            // The torn line's batch was never acknowledged; the next line must not
            // follow it.
            file.set_len(len)
                .and_then(|()| file.sync_data())
                .map_err(|e| io_error("cutting the torn end of", &path, e))?;
        }
        if !existed {
            sync_dir(dir)?;
        }
        let store = Store { dir: dir.to_path_buf(), naming, rotate_bytes, marks, current, file: Some(file), len };
        Ok((store, recovered))
    }

    /// Append the messages of `batch` not written yet, one JSON line each, and fsync.
    /// When this returns `Ok`, they are durable; on an error nothing of the batch
    /// counts as written, and the same batch may be appended again.
    pub fn append(&mut self, batch: &SinkBatch) -> Result<Appended, Error> {
        if self.file.is_none() {
            let (store, _) = Store::open(&self.dir, self.naming.clone(), self.rotate_bytes)?;
            *self = store;
        }
        let partition =
            Partition { stream: batch.stream.clone(), topic: batch.topic.clone(), partition: batch.partition };
        let mark = self.marks.get(&partition);
        let fresh: Vec<_> = batch.messages.iter().filter(|m| mark.is_none_or(|mark| m.offset > mark)).collect();
        let skipped = batch.messages.len() - fresh.len();
        let Some(last) = fresh.last() else {
            return Ok(Appended { written: 0, skipped, rotated_to: None });
        };
        let rotated_to = if self.len >= self.rotate_bytes { Some(self.rotate()?) } else { None };

        // All of the batch's lines in one buffer, for one write (see `data_file.rs`).
        let mut lines = Vec::with_capacity(fresh.iter().map(|m| m.payload.len() + LINE_OVERHEAD).sum());
        for message in &fresh {
            serde_json::to_writer(&mut lines, &batch.message_json(message)).expect("a JSON value serializes");
            lines.push(b'\n');
        }
        let path = self.dir.join(self.naming.data(self.current));
        let file = self.file.as_ref().expect("opened above");
        if let Err(e) = file.write_all_at(&lines, self.len).and_then(|()| file.sync_data()) {
            // Take back whatever part of the batch reached the file: a retry must not
            // follow a torn line, and lines whose fsync failed must not count as
            // written. If even that fails, recover from the file before the next batch.
            if file.set_len(self.len).and_then(|()| file.sync_data()).is_err() {
                self.file = None;
            }
            return Err(io_error("appending to", &path, e));
        }
        self.len += lines.len() as u64;
        self.marks.raise(&partition, last.offset);
        Ok(Appended { written: fresh.len(), skipped, rotated_to })
    }

    /// Start the next data file; its name.
    fn rotate(&mut self) -> Result<String, Error> {
        let next = self.current + 1;
        let tmp = self.dir.join(self.naming.checkpoint_tmp());
        let checkpoint = self.dir.join(self.naming.checkpoint());
        let mut file = File::create(&tmp).map_err(|e| io_error("creating", &tmp, e))?;
        file.write_all(&self.marks.checkpoint(next))
            .and_then(|()| file.sync_all())
            .map_err(|e| io_error("writing", &tmp, e))?;
        std::fs::rename(&tmp, &checkpoint).map_err(|e| io_error("renaming into place", &checkpoint, e))?;
        let name = self.naming.data(next);
        let path = self.dir.join(&name);
        let file = DataFile::open(&path).map_err(|e| io_error("creating", &path, e))?;
        sync_dir(&self.dir)?;
        self.current = next;
        self.file = Some(file);
        self.len = 0;
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;

    use super::*;
    use ferry_guest::{HeaderValue, StoredMessage};

    fn batch(topic: &str, partition: u32, offsets: std::ops::Range<u64>) -> SinkBatch {
        SinkBatch {
            stream: "s".into(),
            topic: topic.into(),
            partition,
            messages: offsets
                .map(|offset| StoredMessage {
                    offset,
                    id: u128::from(offset) << 64,
                    timestamp: offset,
                    origin_timestamp: None,
                    headers: vec![("n".into(), HeaderValue::Uint64(offset))],
                    payload: format!("{{\"seq\":{offset}}}").into_bytes(),
                })
                .collect(),
        }
    }

    fn open(dir: &Path, rotate_bytes: u64) -> (Store, Recovered) {
        Store::open(dir, Naming::new("sink.jsonl").unwrap(), rotate_bytes).unwrap()
    }

    /// Every line of every data file, oldest file first, as (file, topic, partition, offset).
    fn lines(dir: &Path) -> Vec<(String, String, u64, u64)> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".jsonl"))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            for line in std::fs::read_to_string(dir.join(&name)).unwrap().lines() {
                let value: serde_json::Value = serde_json::from_str(line).unwrap();
                out.push((
                    name.clone(),
                    value["topic"].as_str().unwrap().to_string(),
                    value["partition"].as_u64().unwrap(),
                    value["offset"].as_u64().unwrap(),
                ));
            }
        }
        out
    }

    fn offsets(dir: &Path) -> Vec<u64> {
        lines(dir).into_iter().map(|(_, _, _, offset)| offset).collect()
    }

    #[test]
    fn lines_are_the_messages_json_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, recovered) = open(dir.path(), 1 << 20);
        assert_eq!((recovered.current.as_str(), recovered.files_read), ("sink.000001.jsonl", 0));
        let written = store.append(&batch("t", 0, 0..3)).unwrap();
        assert_eq!(written, Appended { written: 3, skipped: 0, rotated_to: None });
        let text = std::fs::read_to_string(dir.path().join("sink.000001.jsonl")).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first, batch("t", 0, 0..1).message_json(&batch("t", 0, 0..1).messages[0]));
        assert_eq!(offsets(dir.path()), [0, 1, 2]);
    }

    #[test]
    fn a_batch_written_before_a_crash_is_not_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open(dir.path(), 1 << 20);
        store.append(&batch("t", 0, 0..5)).unwrap();
        store.append(&batch("t", 1, 0..2)).unwrap();
        drop(store); // the crash: the host never stored the offsets past these batches

        let (mut store, recovered) = open(dir.path(), 1 << 20);
        assert_eq!((recovered.files_read, recovered.lines_read, recovered.partitions), (1, 7, 2));
        // The host replays from an older offset: 3..8 straddles what is written.
        assert_eq!(store.append(&batch("t", 0, 3..8)).unwrap(), Appended { written: 3, skipped: 2, rotated_to: None });
        assert_eq!(store.append(&batch("t", 1, 0..2)).unwrap(), Appended { written: 0, skipped: 2, rotated_to: None });
        // Another partition's offsets are its own.
        assert_eq!(store.append(&batch("u", 0, 0..1)).unwrap().written, 1);
        let t0: Vec<u64> = lines(dir.path()).into_iter().filter(|l| l.1 == "t" && l.2 == 0).map(|l| l.3).collect();
        assert_eq!(t0, [0, 1, 2, 3, 4, 5, 6, 7], "each offset exactly once");
        assert_eq!(lines(dir.path()).len(), 8 + 2 + 1);
    }

    #[test]
    fn a_torn_line_is_cut_off_and_its_batch_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open(dir.path(), 1 << 20);
        store.append(&batch("t", 0, 0..2)).unwrap();
        drop(store);
        // A crash in the middle of the next batch's write: half a line, no fsync, no ack.
        let path = dir.path().join("sink.000001.jsonl");
        let half = &batch("t", 0, 2..3).message_json(&batch("t", 0, 2..3).messages[0]).to_string()[..30];
        OpenOptions::new().append(true).open(&path).unwrap().write_all(half.as_bytes()).unwrap();

        let (mut store, recovered) = open(dir.path(), 1 << 20);
        assert_eq!((recovered.lines_read, recovered.torn_cut), (2, 30));
        assert_eq!(store.append(&batch("t", 0, 2..4)).unwrap().written, 2);
        assert_eq!(offsets(dir.path()), [0, 1, 2, 3]);
    }

    #[test]
    fn rotation_starts_a_new_file_and_recovery_needs_only_the_checkpoint_and_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        // Small enough that every batch passes it: each batch goes to a file of its own.
        let (mut store, _) = open(dir.path(), 100);
        assert_eq!(store.append(&batch("t", 0, 0..3)).unwrap().rotated_to, None);
        assert_eq!(store.append(&batch("u", 0, 0..2)).unwrap().rotated_to.as_deref(), Some("sink.000002.jsonl"));
        assert_eq!(store.append(&batch("t", 0, 3..5)).unwrap().rotated_to.as_deref(), Some("sink.000003.jsonl"));
        drop(store);
        let files: Vec<String> = lines(dir.path()).into_iter().map(|l| l.0).collect();
        assert_eq!(files.iter().filter(|f| *f == "sink.000001.jsonl").count(), 3);
        assert_eq!(files.iter().filter(|f| *f == "sink.000003.jsonl").count(), 2);

        // The operator archives the old files: the checkpoint still knows what they held.
        std::fs::remove_file(dir.path().join("sink.000001.jsonl")).unwrap();
        std::fs::remove_file(dir.path().join("sink.000002.jsonl")).unwrap();
        let (mut store, recovered) = open(dir.path(), 100);
        assert_eq!((recovered.current.as_str(), recovered.files_read), ("sink.000003.jsonl", 1));
        // A replay straddling the rotations: partition u from file 2, t from files 1 and 3.
        assert_eq!(store.append(&batch("u", 0, 0..3)).unwrap().skipped, 2);
        assert_eq!(store.append(&batch("t", 0, 2..6)).unwrap().skipped, 3);
        assert_eq!(offsets(dir.path()), [3, 4, 2, 5], "file 3 (t 3, 4), then file 4 (u 2, t 5)");
    }

    #[test]
    fn a_crash_between_checkpoint_and_new_file_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open(dir.path(), 10);
        store.append(&batch("t", 0, 0..2)).unwrap();
        // What rotation does first, and then the crash before the data file exists.
        std::fs::write(dir.path().join("sink.offsets.json"), store.marks.checkpoint(2)).unwrap();
        drop(store);
        let (mut store, recovered) = open(dir.path(), 10);
        assert_eq!((recovered.current.as_str(), recovered.files_read), ("sink.000002.jsonl", 0));
        assert!(dir.path().join("sink.000002.jsonl").exists());
        assert_eq!(store.append(&batch("t", 0, 0..3)).unwrap(), Appended { written: 1, skipped: 2, rotated_to: None });
    }

    #[test]
    fn without_a_checkpoint_every_data_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open(dir.path(), 10);
        store.append(&batch("t", 0, 0..2)).unwrap();
        store.append(&batch("u", 0, 0..2)).unwrap();
        store.append(&batch("v", 0, 0..2)).unwrap();
        drop(store);
        std::fs::remove_file(dir.path().join("sink.offsets.json")).unwrap();
        let (mut store, recovered) = open(dir.path(), 10);
        assert_eq!((recovered.files_read, recovered.partitions), (3, 3));
        assert_eq!(store.append(&batch("t", 0, 0..2)).unwrap().skipped, 2);
    }

    #[test]
    fn a_failed_write_is_an_error_with_the_reason_and_the_retry_writes_the_batch_once() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open(dir.path(), 1 << 20);
        store.append(&batch("t", 0, 0..2)).unwrap();
        // The disk turns against the sink: the handle it appends through refuses writes.
        let path = dir.path().join("sink.000001.jsonl");
        store.file = Some(DataFile::from_file(File::open(&path).unwrap()));
        let error = store.append(&batch("t", 0, 2..4)).unwrap_err();
        assert!(
            error.message().starts_with("appending to ") && error.message().contains("sink.000001.jsonl: "),
            "{error}"
        );
        assert_eq!(offsets(dir.path()), [0, 1], "nothing of the failed batch counts");
        // The retry of the same batch, after the disk recovered.
        assert_eq!(store.append(&batch("t", 0, 2..4)).unwrap().written, 2);
        assert_eq!(offsets(dir.path()), [0, 1, 2, 3]);
    }

    #[test]
    fn a_foreign_file_stops_recovery_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("sink.000001.jsonl"), "not json\n").unwrap();
        let error = Store::open(dir.path(), Naming::new("sink.jsonl").unwrap(), 10).err().unwrap();
        assert!(error.message().starts_with("sink.000001.jsonl, line 1:"), "{error}");
        std::fs::write(dir.path().join("sink.000001.jsonl"), "").unwrap();
        std::fs::write(dir.path().join("sink.offsets.json"), "[]").unwrap();
        let error = Store::open(dir.path(), Naming::new("sink.jsonl").unwrap(), 10).err().unwrap();
        assert!(error.message().starts_with("sink.offsets.json is not a checkpoint"), "{error}");
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let error = Store::open(&missing, Naming::new("sink.jsonl").unwrap(), 10).err().unwrap();
        assert!(error.message().contains("nope"), "{error}");
    }
}
