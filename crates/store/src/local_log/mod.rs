//! The local log: an append-only, durable log per stream/topic on local disk, the
//! embedded target used when no Iggy server is configured.
//!
//! Each topic is one database file, `<dir>/<stream>/<topic>.sqlite`, with one row per
//! message at consecutive offsets from 0. A batch is appended in one transaction, so
//! after `kill -9` a reader sees all of a batch or none of it, never a torn record.
//!
//! A delivery's receipt names the end of each topic after the batch; the state store
//! keeps it with the cursor, and [`LocalLog::verify_cursor`] checks it at start. An
//! append counts as delivered only if, after its commit, the topic's path still names
//! the file written to: a file deleted or replaced under a running ferry fails every
//! delivery to it from then on, and is never silently created anew (its offsets would
//! start over at 0, behind every committed cursor). Each topic file has an identity
//! of its own (see [`identity`]), which a sink's positions keep, so that a position
//! is never applied to a file it was not taken in (see [`positions`]).

mod cursor;
mod identity;
mod input;
mod positions;
mod read;
mod record;
mod skip;
mod verify;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rusqlite::{Connection, params};

use crate::sqlite::{self, Database, Format, Migration, StoreError};
use ferry_contract::Message;
use ferry_engine::delivery::{Delivery, DeliveryError, LogMark, Receipt, StagedCursor, Target};

pub use cursor::LoggedCursor;
pub use identity::LogId;
pub use input::LocalLogInput;
pub use read::TopicReader;
pub use record::{Record, headers_from_json, headers_json};
pub use skip::{Skipped, skip_unreadable};
pub use verify::LogCheckError;

/// Version 2 added the cursors kept beside the records (see [`cursor`]), version 3
/// the file's identity (see [`identity`]).
const FORMAT: Format = Format {
    what: "local log topic",
    schema: concat!(
        r#"CREATE TABLE records (
        "offset" INTEGER PRIMARY KEY,
        id BLOB,
        headers TEXT,
        payload BLOB NOT NULL,
        origin_timestamp INTEGER,
        appended_at INTEGER NOT NULL,
        connector TEXT NOT NULL
    );
    "#,
        cursor::table!(),
        ";\n",
        identity::table!()
    ),
    version: 3,
    migrations: &[Migration { from: 1, sql: cursor::table!() }, Migration { from: 2, sql: identity::table!() }],
};

/// The open database of each (stream, topic) appended to so far.
type OpenTopics = Mutex<HashMap<(String, String), Arc<Mutex<Database>>>>;

/// The local log under one directory.
pub struct LocalLog {
    dir: PathBuf,
    topics: OpenTopics,
}

impl LocalLog {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LocalLog { dir: dir.into(), topics: Mutex::new(HashMap::new()) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of one topic.
    pub fn topic_file(dir: &Path, stream: &str, topic: &str) -> PathBuf {
        dir.join(stream).join(format!("{topic}.sqlite"))
    }

    /// The open database of `stream`, opened (or created) on first use and kept.
    pub(super) fn topic(&self, stream: &str, topic: &str) -> Result<Arc<Mutex<Database>>, StoreError> {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let name = (stream.to_string(), topic.to_string());
        if let Some(database) = topics.get(&name) {
            return Ok(database.clone());
        }
        let path = Self::topic_file(&self.dir, stream, topic);
        let database = Arc::new(Mutex::new(sqlite::open_or_create(&path, &FORMAT)?));
        topics.insert(name, database.clone());
        Ok(database)
    }
}

#[async_trait]
impl Target for LocalLog {
    async fn deliver(&self, delivery: Delivery) -> Result<Receipt, DeliveryError> {
        let mut receipt = Receipt::default();
        for stream in delivery.streams.iter() {
            let topic = self.topic(&stream.stream, &stream.topic).map_err(|e| DeliveryError::Failed(e.to_string()))?;
            let messages = delivery.messages.clone();
            let connector = delivery.connector.clone();
            let cursor = delivery.cursor.clone();
            let end = tokio::task::spawn_blocking(move || {
                let mut database = topic.lock().unwrap_or_else(|e| e.into_inner());
                database.write("cannot append to the local log topic", |c| {
                    append(c, &connector, &messages, cursor.as_ref())
                })
            })
            .await
            .map_err(|e| DeliveryError::Failed(format!("local log append task failed: {e}")))?
            .map_err(|e| DeliveryError::Failed(e.to_string()))?;
            receipt.marks.push(LogMark::new(stream.stream.clone(), stream.topic.clone(), end));
        }
        Ok(receipt)
    }
}

/// Append `messages` at the next offsets, with the `cursor` they stage, in one
/// durable transaction; the topic's end (its last offset + 1) after them. A batch the
/// topic already holds (see [`cursor`]) is not appended again.
fn append(
    connection: &mut Connection,
    connector: &str,
    messages: &[Message],
    cursor: Option<&StagedCursor>,
) -> rusqlite::Result<u64> {
    // IMMEDIATE takes the write lock first, so the next offset cannot change under us
    // even if another process appends to the same topic.
    let transaction = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    if let Some(cursor) = cursor
        && let Some(end) = cursor::already_appended(&transaction, connector, cursor)?
    {
        return Ok(end);
    }
    let next: u64 = transaction
        .prepare_cached(r#"SELECT coalesce(max("offset") + 1, 0) FROM records"#)?
        .query_row([], |r| r.get(0))?;
    {
        let appended_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
        let mut insert = transaction.prepare_cached(
            r#"INSERT INTO records ("offset", id, headers, payload, origin_timestamp, appended_at, connector)
               VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"#,
        )?;
        for (index, message) in messages.iter().enumerate() {
            let id = message.id.as_ref().map(|id| id.get().to_be_bytes().to_vec());
            let headers = (!message.headers.is_empty()).then(|| headers_json(&message.headers).to_string());
            insert.execute(params![
                next + index as u64,
                id,
                headers,
                &message.payload[..],
                message.origin_timestamp,
                appended_at,
                connector
            ])?;
        }
    }
    let end = next + messages.len() as u64;
    if let Some(cursor) = cursor {
        cursor::keep(&transaction, connector, cursor, end)?;
    }
    transaction.commit()?;
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_config::StreamConfig;
    use ferry_contract::{Header, HeaderValue, Uint128};

    fn message(payload: &[u8]) -> Message {
        Message { id: None, headers: vec![], payload: bytes::Bytes::copy_from_slice(payload), origin_timestamp: None }
    }

    fn delivery(streams: &[(&str, &str)], messages: Vec<Message>) -> Delivery {
        Delivery {
            connector: "test".into(),
            streams: streams.iter().map(|(s, t)| StreamConfig::new(*s, *t)).collect(),
            messages: Arc::new(messages),
            cursor: None,
        }
    }

    #[tokio::test]
    async fn batches_get_consecutive_offsets_in_every_stream() {
        let dir = tempfile::tempdir().unwrap();
        let log = LocalLog::new(dir.path());
        let both = [("s", "a"), ("s", "b")];
        log.deliver(delivery(&both, vec![message(b"0"), message(b"1")])).await.unwrap();
        let receipt = log.deliver(delivery(&both, vec![message(b"2")])).await.unwrap();
        let ends: Vec<_> = receipt.marks.iter().map(|m| (m.stream.as_str(), m.topic.as_str(), m.end)).collect();
        assert_eq!(ends, [("s", "a", 3), ("s", "b", 3)], "the receipt names each topic's end after the batch");
        for topic in ["a", "b"] {
            let records = LocalLog::read_all(dir.path(), "s", topic).unwrap();
            let seen: Vec<_> = records.iter().map(|r| (r.offset, r.payload.clone())).collect();
            assert_eq!(seen, [(0, b"0".to_vec()), (1, b"1".to_vec()), (2, b"2".to_vec())]);
        }
        let topics = LocalLog::topics(dir.path()).unwrap();
        assert_eq!(topics.iter().map(|t| (t.topic.as_str(), t.records)).collect::<Vec<_>>(), [("a", 3), ("b", 3)]);
    }

    #[tokio::test]
    async fn ids_headers_and_binary_payloads_come_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let log = LocalLog::new(dir.path());
        let mut m = message(&[0xff, 0x00]);
        m.id = Some(Uint128::from(u128::MAX - 5));
        m.origin_timestamp = Some(1234);
        m.headers = vec![
            Header { key: "n".into(), value: HeaderValue::Uint64(5) },
            Header { key: "big".into(), value: HeaderValue::Int128(ferry_contract::Int128 { high: -1, low: 0 }) },
        ];
        log.deliver(delivery(&[("s", "t")], vec![m])).await.unwrap();
        let record = &LocalLog::read_all(dir.path(), "s", "t").unwrap()[0];
        assert_eq!(record.id, Some(u128::MAX - 5));
        assert_eq!(record.origin_timestamp, Some(1234));
        let line = record.to_json();
        assert_eq!(line["headers"]["n"]["uint64"], 5);
        assert_eq!(line["headers"]["big"]["int128"], (-(1i128 << 64)).to_string());
        assert_eq!(line["payload_base64"], "/wA=");
        assert_eq!(line["id"], (u128::MAX - 5).to_string());
    }

    #[tokio::test]
    async fn a_topic_deleted_under_a_running_log_fails_every_delivery_and_is_not_recreated() {
        let dir = tempfile::tempdir().unwrap();
        let log = LocalLog::new(dir.path());
        let topic = [("s", "t")];
        log.deliver(delivery(&topic, vec![message(b"0")])).await.unwrap();
        let path = LocalLog::topic_file(dir.path(), "s", "t");
        std::fs::remove_file(&path).unwrap();
        for _ in 0..2 {
            let Err(DeliveryError::Failed(detail)) = log.deliver(delivery(&topic, vec![message(b"1")])).await else {
                panic!("a delivery to a deleted topic must fail");
            };
            assert!(
                detail.starts_with(&format!(
                    "{}: the local log topic was deleted or replaced while ferry was running",
                    path.display()
                )),
                "{detail}"
            );
        }
        assert!(!path.exists(), "the topic is not created anew");
    }

    #[tokio::test]
    async fn a_topic_path_that_is_not_a_file_fails_the_delivery_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = LocalLog::new(dir.path());
        let path = LocalLog::topic_file(dir.path(), "s", "t");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        let Err(DeliveryError::Failed(detail)) = log.deliver(delivery(&[("s", "t")], vec![message(b"0")])).await else {
            panic!("a delivery to /dev/zero must fail");
        };
        assert!(detail.contains("it is a character device, not a regular file"), "{detail}");
        let error = LocalLog::read_all(dir.path(), "s", "t").unwrap_err();
        assert!(error.to_string().contains("a character device"), "{error}");
    }

    #[test]
    fn reading_a_missing_topic_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let error = LocalLog::read_all(dir.path(), "nope", "none").unwrap_err();
        assert!(error.to_string().contains("none.sqlite"), "{error}");
    }
}
