//! Reading the local log back (`ferry log read`, `ferry log topics`, the tests), and
//! alongside a running writer.

use std::path::Path;

use rusqlite::params;

use super::identity::{self, LogId};
use super::{FORMAT, LocalLog, Record};
use crate::sqlite::{self, Access, Database, StoreError};

/// A topic present in the log, and how many records it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSummary {
    pub stream: String,
    pub topic: String,
    pub records: u64,
}

impl LocalLog {
    /// Every record of `stream`/`topic` from offset `from`, at most `limit` of them,
    /// handed to `each` in order. Reads alongside a running writer.
    pub fn read_with(
        dir: &Path,
        stream: &str,
        topic: &str,
        from: u64,
        limit: Option<u64>,
        each: impl FnMut(Record) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        TopicReader::open(dir, stream, topic)?.read_with(from, limit, each)
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

    /// Check the whole of `stream`/`topic`'s file ([`sqlite::check`]).
    pub fn check(dir: &Path, stream: &str, topic: &str) -> Result<(), StoreError> {
        sqlite::check(&LocalLog::topic_file(dir, stream, topic), &FORMAT)
    }

    /// The topics under `dir`.
    pub fn topics(dir: &Path) -> Result<Vec<TopicSummary>, StoreError> {
        let io = |path: &Path, e: std::io::Error| StoreError::Io {
            path: path.to_path_buf(),
            detail: format!("cannot list the local log: {}", sqlite::os_reason(&e)),
        };
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
                let database = open_topic(dir, &stream_name, topic)?;
                let records: u64 = database
                    .connection()
                    .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
                    .map_err(|e| database.error("cannot count the records", e))?;
                found.push(TopicSummary { stream: stream_name.clone(), topic: topic.to_string(), records });
            }
        }
        found.sort_by(|a, b| (&a.stream, &a.topic).cmp(&(&b.stream, &b.topic)));
        Ok(found)
    }
}

/// One topic, opened once (and checked once) to be read from again and again, as a
/// sink reads its input alongside the writer.
pub struct TopicReader {
    database: Database,
}

impl TopicReader {
    pub fn open(dir: &Path, stream: &str, topic: &str) -> Result<TopicReader, StoreError> {
        Ok(TopicReader { database: open_topic(dir, stream, topic)? })
    }

    /// The file's identity (`None` for a file of an older format no writer opened since).
    pub fn identity(&self) -> Result<Option<LogId>, StoreError> {
        identity::of(&self.database)
    }

    /// The offset after the last record (0 when there is none).
    pub fn end(&self) -> Result<u64, StoreError> {
        let database = &self.database;
        database
            .connection()
            .query_row(r#"SELECT coalesce(max("offset") + 1, 0) FROM records"#, [], |row| row.get(0))
            .map_err(|e| database.error("cannot read the local log topic", e))
    }

    /// The file it reads.
    pub fn path(&self) -> &Path {
        self.database.path()
    }

    /// At most `limit` records from offset `from`, in order.
    pub fn read(&self, from: u64, limit: u64) -> Result<Vec<Record>, StoreError> {
        let mut records = Vec::new();
        self.read_with(from, Some(limit), |r| {
            records.push(r);
            Ok(())
        })?;
        Ok(records)
    }

    /// Records from offset `from`, at most `limit` of them, handed to `each` in order.
    pub fn read_with(
        &self,
        from: u64,
        limit: Option<u64>,
        mut each: impl FnMut(Record) -> std::io::Result<()>,
    ) -> Result<u64, StoreError> {
        let database = &self.database;
        let reading = "cannot read the local log topic";
        let fail = |e: rusqlite::Error| database.error(reading, e);
        let mut statement = database
            .connection()
            .prepare_cached(
                r#"SELECT "offset", id, headers, payload, origin_timestamp, appended_at, connector
                   FROM records WHERE "offset" >= ?1 ORDER BY "offset" LIMIT ?2"#,
            )
            .map_err(fail)?;
        let limit = limit.and_then(|l| i64::try_from(l).ok()).unwrap_or(-1);
        let mut rows = statement.query(params![from, limit]).map_err(fail)?;
        let mut count = 0;
        while let Some(row) = rows.next().map_err(fail)? {
            let id: Option<Vec<u8>> = row.get(1).map_err(fail)?;
            let headers: Option<String> = row.get(2).map_err(fail)?;
            let record = Record {
                offset: row.get(0).map_err(fail)?,
                id: id.and_then(|b| <[u8; 16]>::try_from(b).ok()).map(u128::from_be_bytes),
                // Text that is not JSON is kept as the string it is: a reader that
                // needs the headers (a sink) then names it, rather than their loss
                // passing unseen.
                headers: headers.map(|h| serde_json::from_str(&h).unwrap_or(serde_json::Value::String(h))),
                payload: row.get(3).map_err(fail)?,
                origin_timestamp: row.get(4).map_err(fail)?,
                appended_at_micros: row.get(5).map_err(fail)?,
                connector: row.get(6).map_err(fail)?,
            };
            each(record).map_err(|e| StoreError::Io { path: database.path().to_path_buf(), detail: e.to_string() })?;
            count += 1;
        }
        Ok(count)
    }
}

/// The topic's database, opened to read.
pub(super) fn open_topic(dir: &Path, stream: &str, topic: &str) -> Result<Database, StoreError> {
    sqlite::open_existing(&LocalLog::topic_file(dir, stream, topic), &FORMAT, Access::Read)
}
