//! The local log as a sink's input: the topics a sink reads, each one partition,
//! and the sink's position in each kept in Ferry's state store under the sink's key.
//!
//! The committed positions are one JSON object, `{"stream/topic": next offset}`
//! (what `ferry state show` prints), saved with a receipt that marks the same
//! positions and the identity of each file read, so that a log which later lost
//! what a sink already read past is noticed at start (see `LocalLog::verify_cursor`):
//! appending there again would reuse offsets the sink skips. Each instance checks the
//! positions against the files before it reads (see `positions.rs`): positions that
//! do not fit refuse the sink. The position of a topic the sink does not read now
//! (left out of its config for a while) is kept as it was, mark and all: it is
//! committed progress, and the topic goes on from there when it is back.
//!
//! A read goes to tokio's blocking pool (a runtime thread is shared by many
//! connectors and must not wait on a file). So that the sink does not wait for that
//! hop and the read each batch, the next batch of a topic is read ahead while the
//! guest writes the one before (see [`Ahead`]): read, not handed over, so there is
//! still one batch in the guest's hands, and the position moves only on commit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::identity::LogId;
use super::positions::{self, name_of};
use super::{LocalLog, Record, TopicReader, headers_from_json};
use ferry_contract::{StoredChecksums, Uint128};
use ferry_engine::cursor::{CursorStore, StateError};
use ferry_engine::delivery::{LogMark, Receipt};
use ferry_engine::sink::input::{
    Budget, Input, InputError, OpenError, Read, Reader, SinkBatch, StoredMessage, Unreadable, end_of,
};
use ferry_engine::status::StartingFrom;

/// A sink's input from the local log under `dir`.
pub struct LocalLogInput {
    /// The sink's key, and the config file it is in when known: for the words of a
    /// refusal.
    key: String,
    config_file: Option<PathBuf>,
    dir: PathBuf,
    /// Stream and topic of each topic read, in the order they are read.
    topics: Vec<(String, String)>,
    positions: Arc<dyn CursorStore>,
}

impl LocalLogInput {
    /// Sink `key` reading `topics` of the log in `dir`, keeping positions in `positions`.
    pub fn new(
        key: &str,
        dir: impl Into<PathBuf>,
        topics: Vec<(String, String)>,
        positions: Arc<dyn CursorStore>,
    ) -> Self {
        LocalLogInput { key: key.to_string(), config_file: None, dir: dir.into(), topics, positions }
    }

    /// The config file the sink is in, which a refusal's `ferry state reset` names.
    pub fn in_config_file(mut self, file: impl Into<PathBuf>) -> Self {
        self.config_file = Some(file.into());
        self
    }
}

#[async_trait]
impl Input for LocalLogInput {
    async fn open(&self) -> Result<Box<dyn Reader>, OpenError> {
        let committed = self.positions.load().await.map_err(|e| match e {
            StateError::Corrupt { .. } => OpenError::Untrusted(e.to_string()),
            e => OpenError::Failed(InputError(format!("cannot load positions: {e}"))),
        })?;
        let mut kept = match &committed {
            None => BTreeMap::new(),
            Some(committed) => positions::parse(&committed.state).map_err(|problem| {
                OpenError::Untrusted(format!(
                    "the committed state is not a sink's positions ({problem}): {}; it is left as it is \
                     (`ferry state show`, `ferry state reset`)",
                    String::from_utf8_lossy(&committed.state)
                ))
            })?,
        };
        let (dir, topics, committed_now, at) = (self.dir.clone(), self.topics.clone(), committed.clone(), kept.clone());
        let checked = tokio::task::spawn_blocking(move || positions::check(&dir, committed_now.as_ref(), &at, &topics))
            .await
            .map_err(|e| OpenError::Failed(InputError(format!("the task checking the positions failed: {e}"))))?
            .map_err(|untrusted| OpenError::Untrusted(untrusted.explain(&self.key, self.config_file.as_deref())))?;
        let topics = self
            .topics
            .iter()
            .zip(checked)
            .map(|((stream, topic), checked)| {
                kept.remove(&name_of(stream, topic));
                TopicState {
                    stream: stream.clone(),
                    topic: topic.clone(),
                    reader: checked.reader.map(|reader| Arc::new(Mutex::new(reader))),
                    log_id: checked.log_id,
                    held_at: None,
                    read: checked.at,
                    committed: checked.at,
                    ahead: None,
                }
            })
            .collect();
        let kept_marks = committed
            .iter()
            .flat_map(|c| &c.receipt.marks)
            .filter(|mark| kept.contains_key(&name_of(&mark.stream, &mark.topic)))
            .cloned()
            .collect();
        let config = self.config_file.as_ref().map_or_else(|| "CONFIG".to_string(), |f| f.display().to_string());
        Ok(Box::new(LocalLogReader {
            skip_command: format!("ferry log skip {config} --key {}", self.key),
            dir: self.dir.clone(),
            topics,
            next: 0,
            positions: self.positions.clone(),
            kept,
            kept_marks,
            generation: committed.map(|c| c.generation),
        }))
    }
}

struct LocalLogReader {
    /// `ferry log skip CONFIG --key KEY`, for the error of a record it cannot read.
    skip_command: String,
    dir: PathBuf,
    topics: Vec<TopicState>,
    /// The topic to look at first next time: topics take turns.
    next: usize,
    positions: Arc<dyn CursorStore>,
    /// The committed positions of topics not read now, and their marks: stored
    /// again, unchanged, with every commit.
    kept: BTreeMap<String, u64>,
    kept_marks: Vec<LogMark>,
    /// The generation of the positions it started from.
    generation: Option<u64>,
}

struct TopicState {
    stream: String,
    topic: String,
    /// Opened once the topic's file exists.
    reader: Option<Arc<Mutex<TopicReader>>>,
    /// The identity of that file, stored with the position.
    log_id: Option<LogId>,
    /// The offset of a record it could not read, handed over as unreadable: nothing
    /// past it is read until it is committed (dead-lettered).
    held_at: Option<u64>,
    /// The offset to read next.
    read: u64,
    /// The offset committed.
    committed: u64,
    /// The read of the batch after the one handed over, under way.
    ahead: Option<Ahead>,
}

/// A read under way on tokio's blocking pool.
type Reading = tokio::task::JoinHandle<Result<Vec<Record>, crate::sqlite::StoreError>>;

/// A read started ahead: at most `max` records from offset `from`. The log only grows
/// at its end, so what it found is still what is there; only an empty answer may be
/// stale (the topic may have grown since), and is read again.
struct Ahead {
    from: u64,
    max: u32,
    records: Reading,
}

#[async_trait]
impl Reader for LocalLogReader {
    fn starting_from(&self) -> StartingFrom {
        StartingFrom::generation(self.generation)
    }

    async fn next(&mut self, budget: Budget) -> Result<Option<Read>, InputError> {
        for turn in 0..self.topics.len() {
            let index = (self.next + turn) % self.topics.len();
            if self.topics[index].held_at.is_some() {
                continue;
            }
            let records = read(&self.dir, &mut self.topics[index], budget.messages).await?;
            if records.is_empty() {
                continue;
            }
            let topic = &mut self.topics[index];
            self.next = index + 1;
            let read = match batch_of(&topic.stream, &topic.topic, records) {
                (mut batch, _) if !batch.messages.is_empty() => {
                    budget.trim(&mut batch);
                    // The local log keeps no Iggy checksum.
                    Read::Batch(batch, StoredChecksums::default())
                }
                (_, Some((record, problem))) => {
                    topic.held_at = Some(record.offset);
                    Read::Unreadable(unreadable(topic, record, problem, &self.skip_command))
                }
                (_, None) => continue,
            };
            topic.read = match &read {
                Read::Batch(batch, _) => end_of(batch),
                Read::Unreadable(unreadable) => end_of(&unreadable.batch),
            };
            if let (Read::Batch(..), Some(reader)) = (&read, &topic.reader) {
                let (from, max) = (topic.read, budget.messages);
                topic.ahead = Some(Ahead { from, max, records: start_read(reader.clone(), from, max) });
            }
            return Ok(Some(read));
        }
        Ok(None)
    }

    async fn commit(&mut self, batch: &SinkBatch) -> Result<Option<u64>, InputError> {
        let topic =
            self.topics.iter_mut().find(|t| t.stream == batch.stream && t.topic == batch.topic).ok_or_else(|| {
                InputError(format!("{}/{} is not a topic this sink reads", batch.stream, batch.topic))
            })?;
        topic.committed = end_of(batch);
        if topic.held_at.is_some_and(|held| held < topic.committed) {
            topic.held_at = None;
        }
        let mut positions = self.kept.clone();
        positions.extend(self.topics.iter().map(|t| (name_of(&t.stream, &t.topic), t.committed)));
        let state = serde_json::to_vec(&positions).expect("a map of numbers serializes");
        let read_now = self.topics.iter().filter(|t| t.committed > 0).map(|t| LogMark {
            stream: t.stream.clone(),
            topic: t.topic.clone(),
            end: t.committed,
            log_id: t.log_id.map(|id| id.to_string()),
        });
        let marks = self.kept_marks.iter().cloned().chain(read_now).collect();
        self.positions
            .commit(state, Receipt { marks })
            .await
            .map(|committed| Some(committed.generation))
            .map_err(|e| InputError(format!("cannot store the position: {e}")))
    }
}

/// At most `max` records of `topic` from its read position (none while its file does
/// not exist yet).
async fn read(dir: &std::path::Path, topic: &mut TopicState, max: u32) -> Result<Vec<Record>, InputError> {
    let reader = match &topic.reader {
        Some(reader) => reader.clone(),
        None => {
            if !LocalLog::topic_file(dir, &topic.stream, &topic.topic).exists() {
                return Ok(Vec::new());
            }
            let (dir, stream, name) = (dir.to_path_buf(), topic.stream.clone(), topic.topic.clone());
            let (opened, log_id) = tokio::task::spawn_blocking(move || {
                let reader = TopicReader::open(&dir, &stream, &name)?;
                let log_id = reader.identity()?;
                Ok::<_, crate::sqlite::StoreError>((reader, log_id))
            })
            .await
            .map_err(|e| InputError(format!("the reading task failed: {e}")))?
            .map_err(|e| InputError(e.to_string()))?;
            topic.log_id = log_id;
            topic.reader.insert(Arc::new(Mutex::new(opened))).clone()
        }
    };
    if let Some(ahead) = topic.ahead.take()
        && (ahead.from, ahead.max) == (topic.read, max)
    {
        let records = finished(ahead.records).await?;
        if !records.is_empty() {
            return Ok(records);
        }
    }
    finished(start_read(reader, topic.read, max)).await
}

/// At most `max` records from offset `from`, read on tokio's blocking pool.
fn start_read(reader: Arc<Mutex<TopicReader>>, from: u64, max: u32) -> Reading {
    tokio::task::spawn_blocking(move || reader.lock().unwrap_or_else(|e| e.into_inner()).read(from, u64::from(max)))
}

/// What a read on the blocking pool found.
async fn finished(read: Reading) -> Result<Vec<Record>, InputError> {
    read.await.map_err(|e| InputError(format!("the reading task failed: {e}")))?.map_err(|e| InputError(e.to_string()))
}

/// Records of one topic as the batch a sink receives (the local log has one
/// partition per topic: 0), up to the first whose headers do not parse, which comes
/// back apart with what is wrong with it.
fn batch_of(stream: &str, topic: &str, records: Vec<Record>) -> (SinkBatch, Option<(Record, String)>) {
    let mut messages = Vec::with_capacity(records.len());
    let mut unreadable = None;
    for record in records {
        let headers = match &record.headers {
            Some(json) => match headers_from_json(json) {
                Ok(headers) => headers,
                Err(problem) => {
                    unreadable = Some((record, problem));
                    break;
                }
            },
            None => Vec::new(),
        };
        messages.push(message_of(record, headers));
    }
    (SinkBatch { stream: stream.to_string(), topic: topic.to_string(), partition: 0, messages }, unreadable)
}

fn message_of(record: Record, headers: Vec<ferry_contract::Header>) -> StoredMessage {
    StoredMessage {
        offset: record.offset,
        id: Uint128::from(record.id.unwrap_or(0)),
        timestamp: record.appended_at_micros,
        origin_timestamp: record.origin_timestamp,
        headers,
        payload: record.payload,
    }
}

/// `record` of `topic`, whose headers do not parse (`problem`), handed over without
/// them: for the dead letters, or for an operator to skip with `skip_command`.
fn unreadable(topic: &TopicState, record: Record, problem: String, skip_command: &str) -> Unreadable {
    let (stream, name, offset) = (&topic.stream, &topic.topic, record.offset);
    Unreadable {
        reason: format!("its headers as the local log stores them cannot be read ({problem})"),
        skip: format!(
            "to skip it (it stays in the log), stop the sink and run `{skip_command} --stream {stream} --topic {name} \
             --offset {offset}`, or configure dead_letters to take it"
        ),
        batch: SinkBatch {
            stream: stream.clone(),
            topic: name.clone(),
            partition: 0,
            messages: vec![message_of(record, Vec::new())],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDir;
    use ferry_config::StreamConfig;
    use ferry_contract::Message;
    use ferry_engine::delivery::{Delivery, Target};

    const BUDGET: Budget = Budget { messages: 10, bytes: u64::MAX };

    async fn append(log: &LocalLog, seqs: std::ops::Range<u32>) {
        let messages = seqs
            .map(|n| Message {
                id: None,
                headers: vec![],
                payload: n.to_string().into_bytes().into(),
                origin_timestamp: None,
            })
            .collect();
        let streams = vec![StreamConfig::new("s", "t")].into();
        log.deliver(Delivery { connector: "test".into(), streams, messages: Arc::new(messages), cursor: None })
            .await
            .unwrap();
    }

    fn offsets(read: Option<Read>) -> Vec<u64> {
        match read {
            Some(Read::Batch(batch, _)) => batch.messages.iter().map(|m| m.offset).collect(),
            Some(Read::Unreadable(_)) => panic!("an unreadable record"),
            None => Vec::new(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_read_ahead_come_in_order_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let log = LocalLog::new(dir.path().join("log"));
        append(&log, 0..25).await;
        let positions = Arc::new(StateDir::new(dir.path().join("state")).open("k").unwrap());
        let input = LocalLogInput::new("k", dir.path().join("log"), vec![("s".into(), "t".into())], positions);
        let mut reader = input.open().await.unwrap();
        for expected in [0..10, 10..20, 20..25] {
            assert_eq!(offsets(reader.next(BUDGET).await.unwrap()), expected.collect::<Vec<_>>());
        }
        append(&log, 25..28).await;
        assert_eq!(offsets(reader.next(BUDGET).await.unwrap()), (25..28).collect::<Vec<_>>());
        assert_eq!(offsets(reader.next(BUDGET).await.unwrap()), Vec::<u64>::new(), "the end");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_ahead_that_found_nothing_or_another_place_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let log = LocalLog::new(dir.path().join("log"));
        append(&log, 0..5).await;
        let reader = Arc::new(Mutex::new(TopicReader::open(&dir.path().join("log"), "s", "t").unwrap()));
        let mut topic = TopicState {
            stream: "s".into(),
            topic: "t".into(),
            reader: Some(reader),
            log_id: None,
            held_at: None,
            read: 5,
            committed: 5,
            ahead: None,
        };
        // Read ahead at the topic's end, which has grown since: read again.
        let found_nothing = tokio::task::spawn_blocking(|| Ok(Vec::new()));
        topic.ahead = Some(Ahead { from: 5, max: 10, records: found_nothing });
        append(&log, 5..8).await;
        let records = read(&dir.path().join("log"), &mut topic, 10).await.unwrap();
        assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), [5, 6, 7]);

        // Read ahead from somewhere else than the topic's read position: not taken.
        let elsewhere = tokio::task::spawn_blocking(|| Ok(Vec::new()));
        topic.ahead = Some(Ahead { from: 2, max: 10, records: elsewhere });
        let records = read(&dir.path().join("log"), &mut topic, 2).await.unwrap();
        assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), [5, 6]);
        assert!(topic.ahead.is_none(), "spent");
    }
}
