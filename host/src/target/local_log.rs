//! The local log: an append-only, durable log per stream/topic on local disk, the
//! embedded target used when no Iggy server is configured.
//!
//! Each topic is one database file, `<dir>/<stream>/<topic>.sqlite`, with one row per
//! message at consecutive offsets from 0. A batch is appended in one transaction, so
//! after `kill -9` a reader sees all of a batch or none of it, never a torn record.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use base64::Engine as _;
use rusqlite::{Connection, params};
use serde_json::{Value, json};

use super::{Delivery, DeliveryError, Target};
use crate::batch::{Header, HeaderValue, Message};
use crate::config::StreamConfig;
use crate::sqlite::{self, StoreError};

const FORMAT_VERSION: i64 = 1;
const SCHEMA: &str = r#"CREATE TABLE records (
    "offset" INTEGER PRIMARY KEY,
    id BLOB,
    headers TEXT,
    payload BLOB NOT NULL,
    origin_timestamp INTEGER,
    appended_at INTEGER NOT NULL,
    connector TEXT NOT NULL
)"#;

/// The open database of each (stream, topic) appended to so far.
type OpenTopics = Mutex<HashMap<(String, String), Arc<Mutex<Connection>>>>;

/// The local log under one directory.
pub struct LocalLog {
    dir: PathBuf,
    topics: OpenTopics,
}

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub offset: u64,
    pub id: Option<u128>,
    /// `{"key": {"<kind>": value}}`, or `None` when the message had no headers.
    pub headers: Option<Value>,
    pub payload: Vec<u8>,
    pub origin_timestamp: Option<u64>,
    pub appended_at_micros: u64,
    pub connector: String,
}

/// A topic present in the log, and how many records it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSummary {
    pub stream: String,
    pub topic: String,
    pub records: u64,
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
    fn topic(&self, stream: &StreamConfig) -> Result<Arc<Mutex<Connection>>, StoreError> {
        let mut topics = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let name = (stream.stream.clone(), stream.topic.clone());
        if let Some(connection) = topics.get(&name) {
            return Ok(connection.clone());
        }
        let path = Self::topic_file(&self.dir, &stream.stream, &stream.topic);
        let connection = Arc::new(Mutex::new(sqlite::open_or_create(&path, SCHEMA, FORMAT_VERSION)?));
        topics.insert(name, connection.clone());
        Ok(connection)
    }

    /// Every record of `stream`/`topic` from offset `from`, at most `limit` of them,
    /// handed to `each` in order. Reads alongside a running writer.
    pub fn read_with(
        dir: &Path,
        stream: &str,
        topic: &str,
        from: u64,
        limit: Option<u64>,
        mut each: impl FnMut(Record) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        let path = Self::topic_file(dir, stream, topic);
        let connection = sqlite::open_existing(&path, FORMAT_VERSION)?;
        let fail = |e: rusqlite::Error| StoreError::Io { path: path.clone(), detail: e.to_string() };
        let mut statement = connection
            .prepare(
                r#"SELECT "offset", id, headers, payload, origin_timestamp, appended_at, connector
                   FROM records WHERE "offset" >= ?1 ORDER BY "offset" LIMIT ?2"#,
            )
            .map_err(fail)?;
        let limit = limit.map(|l| l as i64).unwrap_or(-1);
        let mut rows = statement.query(params![from, limit]).map_err(fail)?;
        let mut count = 0;
        while let Some(row) = rows.next().map_err(fail)? {
            let id: Option<Vec<u8>> = row.get(1).map_err(fail)?;
            let headers: Option<String> = row.get(2).map_err(fail)?;
            let record = Record {
                offset: row.get(0).map_err(fail)?,
                id: id.and_then(|b| <[u8; 16]>::try_from(b).ok()).map(u128::from_be_bytes),
                headers: headers.and_then(|h| serde_json::from_str(&h).ok()),
                payload: row.get(3).map_err(fail)?,
                origin_timestamp: row.get(4).map_err(fail)?,
                appended_at_micros: row.get(5).map_err(fail)?,
                connector: row.get(6).map_err(fail)?,
            };
            each(record).map_err(|e| StoreError::Io { path: path.clone(), detail: e.to_string() })?;
            count += 1;
        }
        Ok(count)
    }

    /// Every record of `stream`/`topic`, in order.
    pub fn read_all(dir: &Path, stream: &str, topic: &str) -> Result<Vec<Record>, StoreError> {
        let mut records = Vec::new();
        Self::read_with(dir, stream, topic, 0, None, |r| {
            records.push(r);
            Ok(())
        })?;
        Ok(records)
    }

    /// The topics under `dir`.
    pub fn topics(dir: &Path) -> Result<Vec<TopicSummary>, StoreError> {
        let io = |path: &Path, e: std::io::Error| StoreError::Io { path: path.to_path_buf(), detail: e.to_string() };
        let mut found = Vec::new();
        let streams = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(io(dir, e)),
        };
        for stream in streams.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()) {
            let stream_name = stream.file_name().to_string_lossy().into_owned();
            for file in std::fs::read_dir(stream.path()).map_err(|e| io(&stream.path(), e))?.filter_map(|e| e.ok()) {
                let name = file.file_name().to_string_lossy().into_owned();
                let Some(topic) = name.strip_suffix(".sqlite") else { continue };
                let connection = sqlite::open_existing(&file.path(), FORMAT_VERSION)?;
                let records: u64 = connection
                    .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
                    .map_err(|e| StoreError::Io { path: file.path(), detail: e.to_string() })?;
                found.push(TopicSummary { stream: stream_name.clone(), topic: topic.to_string(), records });
            }
        }
        found.sort_by(|a, b| (&a.stream, &a.topic).cmp(&(&b.stream, &b.topic)));
        Ok(found)
    }
}

#[async_trait]
impl Target for LocalLog {
    async fn deliver(&self, delivery: &Delivery) -> Result<(), DeliveryError> {
        for stream in delivery.streams.iter() {
            let connection = self.topic(stream).map_err(|e| DeliveryError::Failed(e.to_string()))?;
            let messages = delivery.messages.clone();
            let connector = delivery.connector.clone();
            let path = Self::topic_file(&self.dir, &stream.stream, &stream.topic);
            tokio::task::spawn_blocking(move || {
                let mut connection = connection.lock().unwrap_or_else(|e| e.into_inner());
                append(&mut connection, &connector, &messages)
                    .map_err(|e| DeliveryError::Failed(format!("{}: cannot append: {e}", path.display())))
            })
            .await
            .map_err(|e| DeliveryError::Failed(format!("local log append task failed: {e}")))??;
        }
        Ok(())
    }
}

/// Append `messages` at the next offsets, in one durable transaction.
fn append(connection: &mut Connection, connector: &str, messages: &[Message]) -> rusqlite::Result<()> {
    // IMMEDIATE takes the write lock first, so the next offset cannot change under us
    // even if another process appends to the same topic.
    let transaction = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    {
        let next: u64 =
            transaction.query_row(r#"SELECT coalesce(max("offset") + 1, 0) FROM records"#, [], |r| r.get(0))?;
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
                message.payload,
                message.origin_timestamp,
                appended_at,
                connector
            ])?;
        }
    }
    transaction.commit()
}

/// Headers as JSON that keeps their kinds: `{"key": {"uint64": 5}}`. 128-bit values
/// are decimal strings (JSON numbers cannot hold them), raw bytes are base64.
pub fn headers_json(headers: &[Header]) -> Value {
    let mut object = serde_json::Map::new();
    for header in headers {
        let (kind, value) = match &header.value {
            HeaderValue::Raw(v) => ("raw", json!(base64::engine::general_purpose::STANDARD.encode(v))),
            HeaderValue::String(v) => ("string", json!(v)),
            HeaderValue::Bool(v) => ("bool", json!(v)),
            HeaderValue::Int8(v) => ("int8", json!(v)),
            HeaderValue::Int16(v) => ("int16", json!(v)),
            HeaderValue::Int32(v) => ("int32", json!(v)),
            HeaderValue::Int64(v) => ("int64", json!(v)),
            HeaderValue::Int128(v) => ("int128", json!(v.get().to_string())),
            HeaderValue::Uint8(v) => ("uint8", json!(v)),
            HeaderValue::Uint16(v) => ("uint16", json!(v)),
            HeaderValue::Uint32(v) => ("uint32", json!(v)),
            HeaderValue::Uint64(v) => ("uint64", json!(v)),
            HeaderValue::Uint128(v) => ("uint128", json!(v.get().to_string())),
            HeaderValue::Float32(v) => ("float32", json!(v)),
            HeaderValue::Float64(v) => ("float64", json!(v)),
        };
        object.insert(header.key.clone(), json!({ kind: value }));
    }
    Value::Object(object)
}

impl Record {
    /// The record as one line of JSON, as `ferry log read` prints it. A payload that
    /// is UTF-8 is printed as text (`payload`), anything else as base64
    /// (`payload_base64`).
    pub fn to_json(&self) -> Value {
        let mut line = json!({
            "offset": self.offset,
            "id": self.id.map(|id| id.to_string()),
            "headers": self.headers.clone().unwrap_or_else(|| json!({})),
            "origin_timestamp": self.origin_timestamp,
            "appended_at": self.appended_at_micros,
            "connector": self.connector,
        });
        match std::str::from_utf8(&self.payload) {
            Ok(text) => line["payload"] = json!(text),
            Err(_) => line["payload_base64"] = json!(base64::engine::general_purpose::STANDARD.encode(&self.payload)),
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Uint128;

    fn message(payload: &[u8]) -> Message {
        Message { id: None, headers: vec![], payload: payload.to_vec(), origin_timestamp: None }
    }

    fn delivery(streams: &[(&str, &str)], messages: Vec<Message>) -> Delivery {
        Delivery {
            connector: "test".into(),
            streams: streams.iter().map(|(s, t)| StreamConfig::new(*s, *t)).collect(),
            messages: Arc::new(messages),
        }
    }

    #[tokio::test]
    async fn batches_get_consecutive_offsets_in_every_stream() {
        let dir = tempfile::tempdir().unwrap();
        let log = LocalLog::new(dir.path());
        let both = [("s", "a"), ("s", "b")];
        log.deliver(&delivery(&both, vec![message(b"0"), message(b"1")])).await.unwrap();
        log.deliver(&delivery(&both, vec![message(b"2")])).await.unwrap();
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
            Header { key: "big".into(), value: HeaderValue::Int128(crate::batch::Int128 { high: -1, low: 0 }) },
        ];
        log.deliver(&delivery(&[("s", "t")], vec![m])).await.unwrap();
        let record = &LocalLog::read_all(dir.path(), "s", "t").unwrap()[0];
        assert_eq!(record.id, Some(u128::MAX - 5));
        assert_eq!(record.origin_timestamp, Some(1234));
        let line = record.to_json();
        assert_eq!(line["headers"]["n"]["uint64"], 5);
        assert_eq!(line["headers"]["big"]["int128"], (-(1i128 << 64)).to_string());
        assert_eq!(line["payload_base64"], "/wA=");
        assert_eq!(line["id"], (u128::MAX - 5).to_string());
    }

    #[test]
    fn reading_a_missing_topic_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let error = LocalLog::read_all(dir.path(), "nope", "none").unwrap_err();
        assert!(error.to_string().contains("none.sqlite"), "{error}");
    }
}
