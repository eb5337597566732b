//! What the sink has written: the highest offset per partition, recovered from the
//! lines themselves, so that a batch the host hands again after a crash is not
//! written twice.
//!
//! The files are the only record. Each line names its `stream`, `topic`, `partition`
//! and `offset`; reading them back gives the marks. A line without its newline is the
//! torn end of a batch that was never acknowledged (the sink answers only after the
//! whole batch and its fsync), so it does not count.

use std::collections::BTreeMap;
use std::io::BufRead;

use ferry_guest::Error;
use serde::{Deserialize, Serialize};

/// One partition of one topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Partition {
    pub stream: String,
    pub topic: String,
    pub partition: u32,
}

/// Where a line (or a checkpoint entry) stands: the fields recovery reads.
#[derive(Debug, Serialize, Deserialize)]
struct Position {
    stream: String,
    topic: String,
    partition: u32,
    offset: u64,
}

/// The highest offset written, per partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks(BTreeMap<Partition, u64>);

/// What reading one file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scanned {
    /// Complete lines.
    pub lines: u64,
    /// Bytes up to the end of the last complete line.
    pub complete_len: u64,
    /// Bytes after it: a torn line, to be cut off.
    pub torn: u64,
}

/// The checkpoint: the marks of every file before data file `file`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Checkpoint {
    file: u64,
    written_before: Vec<Position>,
}

impl Marks {
    /// The highest offset written in `partition`, if any.
    pub fn get(&self, partition: &Partition) -> Option<u64> {
        self.0.get(partition).copied()
    }

    /// `offset` of `partition` is written.
    pub fn raise(&mut self, partition: &Partition, offset: u64) {
        match self.0.get_mut(partition) {
            Some(mark) => *mark = (*mark).max(offset),
            None => {
                self.0.insert(partition.clone(), offset);
            }
        }
    }

    /// How many partitions have a mark.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Raise the marks by every complete line of `file` (named `name` in errors).
    pub fn scan(&mut self, name: &str, file: impl BufRead) -> Result<Scanned, Error> {
        let mut file = file;
        let mut scanned = Scanned { lines: 0, complete_len: 0, torn: 0 };
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = file.read_until(b'\n', &mut line).map_err(|e| Error::msg(format!("reading {name}: {e}")))?;
            if read == 0 {
                return Ok(scanned);
            }
            if line.last() != Some(&b'\n') {
                scanned.torn = read as u64;
                return Ok(scanned);
            }
            let position: Position = serde_json::from_slice(&line).map_err(|e| {
                Error::msg(format!(
                    "{name}, line {}: not a line this sink wrote ({e}); move the file away if it is \
                     not this sink's output",
                    scanned.lines + 1
                ))
            })?;
            self.raise(
                &Partition { stream: position.stream, topic: position.topic, partition: position.partition },
                position.offset,
            );
            scanned.lines += 1;
            scanned.complete_len += read as u64;
        }
    }

    /// The checkpoint saying these are the marks before data file `file`.
    pub fn checkpoint(&self, file: u64) -> Vec<u8> {
        let written_before = self
            .0
            .iter()
            .map(|(p, offset)| Position {
                stream: p.stream.clone(),
                topic: p.topic.clone(),
                partition: p.partition,
                offset: *offset,
            })
            .collect();
        let mut bytes = serde_json::to_vec(&Checkpoint { file, written_before }).expect("a checkpoint serializes");
        bytes.push(b'\n');
        bytes
    }

    /// The marks and data file number a checkpoint (named `name` in errors) holds.
    pub fn from_checkpoint(name: &str, bytes: &[u8]) -> Result<(Marks, u64), Error> {
        let checkpoint: Checkpoint = serde_json::from_slice(bytes)
            .map_err(|e| Error::msg(format!("{name} is not a checkpoint of this sink: {e}")))?;
        let mut marks = Marks::default();
        for p in checkpoint.written_before {
            marks.raise(&Partition { stream: p.stream, topic: p.topic, partition: p.partition }, p.offset);
        }
        Ok((marks, checkpoint.file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(topic: &str, partition: u32) -> Partition {
        Partition { stream: "s".into(), topic: topic.into(), partition }
    }

    fn line(topic: &str, partition: u32, offset: u64) -> String {
        format!(
            "{{\"stream\":\"s\",\"topic\":\"{topic}\",\"partition\":{partition},\"offset\":{offset},\"id\":\"0\",\"payload\":\"x\"}}\n"
        )
    }

    #[test]
    fn the_highest_offset_of_each_partition_is_found() {
        let text = [line("t", 0, 5), line("t", 1, 9), line("t", 0, 6), line("u", 0, 2), line("t", 1, 3)].concat();
        let mut marks = Marks::default();
        let scanned = marks.scan("f", text.as_bytes()).unwrap();
        assert_eq!(scanned, Scanned { lines: 5, complete_len: text.len() as u64, torn: 0 });
        assert_eq!(marks.get(&partition("t", 0)), Some(6));
        assert_eq!(marks.get(&partition("t", 1)), Some(9));
        assert_eq!(marks.get(&partition("u", 0)), Some(2));
        assert_eq!(marks.get(&partition("u", 1)), None);
        assert_eq!(marks.len(), 3);
    }

    #[test]
    fn a_torn_last_line_does_not_count_and_is_measured() {
        let whole = line("t", 0, 5);
        let torn = &line("t", 0, 6)[..20];
        let text = format!("{whole}{torn}");
        let mut marks = Marks::default();
        let scanned = marks.scan("f", text.as_bytes()).unwrap();
        assert_eq!(scanned, Scanned { lines: 1, complete_len: whole.len() as u64, torn: 20 });
        assert_eq!(marks.get(&partition("t", 0)), Some(5));
        // Even a complete object is torn without its newline: its batch was never acked.
        let mut marks = Marks::default();
        let unterminated = line("t", 0, 7);
        let scanned = marks.scan("f", unterminated.trim_end().as_bytes()).unwrap();
        assert_eq!((scanned.lines, scanned.complete_len), (0, 0));
        assert_eq!(marks.get(&partition("t", 0)), None);
    }

    #[test]
    fn a_foreign_line_is_an_error_naming_the_file_and_line() {
        let text = format!("{}{}", line("t", 0, 1), "{\"hello\":1}\n");
        let error = Marks::default().scan("sink.000004.jsonl", text.as_bytes()).unwrap_err();
        assert!(error.message().starts_with("sink.000004.jsonl, line 2: not a line this sink wrote"), "{error}");
    }

    #[test]
    fn scanning_never_lowers_a_mark() {
        let mut marks = Marks::default();
        marks.raise(&partition("t", 0), 50);
        marks.scan("f", line("t", 0, 10).as_bytes()).unwrap();
        assert_eq!(marks.get(&partition("t", 0)), Some(50));
    }

    #[test]
    fn a_checkpoint_round_trips_and_a_bad_one_is_named() {
        let mut marks = Marks::default();
        marks.raise(&partition("t\"\n", 7), u64::MAX);
        marks.raise(&partition("u", 0), 0);
        let bytes = marks.checkpoint(12);
        assert_eq!(Marks::from_checkpoint("c", &bytes).unwrap(), (marks, 12));
        let error = Marks::from_checkpoint("sink.offsets.json", b"{\"file\":").unwrap_err();
        assert!(error.message().starts_with("sink.offsets.json is not a checkpoint of this sink"), "{error}");
    }
}
