//! Cursors kept in the local log, in the transaction that appends their batch: what
//! makes delivery into the local log exactly-once.
//!
//! Elsewhere the source loop delivers, then commits the cursor to the state file: a
//! crash between the two delivers the batch again after the restart (a duplicate,
//! never a loss). Into the local log, the batch's staged cursor is written beside its
//! records, in the same SQLite transaction, one row per connector in each topic
//! (`cursors`). Both are on disk, or neither is. At start, [`LoggedCursor`] takes
//! the cursor from the log when the log is ahead of the state file: the crash came
//! between the two, and nothing is delivered twice.
//!
//! Two more cases keep it exactly-once:
//!
//! * A connector delivering to several topics appends to each in its own
//!   transaction. A crash between two of them leaves some topics one batch ahead;
//!   the state file's cursor is then the one taken (the batch is produced again),
//!   and a topic whose row already holds that batch's generation and the same
//!   staged cursor skips the append: the batch is in it.
//! * A NACK after a delivery (the state file refused the commit) produces the same
//!   batch again; it is skipped the same way.
//!
//! A replay whose staged cursor differs from the one kept (a source that batches
//! what is there at the moment) is appended again: a duplicate, since what the log
//! holds covers a different range than what the guest now says.
//!
//! Rows of an earlier life of the connector (before `ferry state reset`) carry
//! another lineage, and are ignored.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Transaction, params};

use super::LocalLog;
use crate::sqlite::StoreError;
use ferry_engine::cursor::{Committed, CursorStore, StateError};
use ferry_engine::delivery::{LogMark, Receipt, StagedCursor};

use crate::state::ConnectorState;

/// The table, created with the topic (format version 2) or added to a version 1
/// topic. A macro, so that the topic's schema can `concat!` it.
macro_rules! table {
    () => {
        "CREATE TABLE cursors (
        connector TEXT PRIMARY KEY,
        lineage BLOB NOT NULL,
        generation INTEGER NOT NULL,
        state BLOB NOT NULL,
        log_end INTEGER NOT NULL
    )"
    };
}
pub(super) use table;

/// The cursor a topic keeps for one connector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kept {
    cursor: StagedCursor,
    /// The topic's end after the batch the cursor follows.
    log_end: u64,
}

/// If the topic already holds the batch `cursor` follows (same lineage, generation
/// and staged bytes), the topic's end after it.
pub(super) fn already_appended(
    transaction: &Transaction,
    connector: &str,
    cursor: &StagedCursor,
) -> rusqlite::Result<Option<u64>> {
    let kept = read(transaction, connector)?;
    Ok(kept.filter(|kept| kept.cursor == *cursor).map(|kept| kept.log_end))
}

/// Keep `cursor` as `connector`'s, the topic ending at `log_end` after its batch.
pub(super) fn keep(
    transaction: &Transaction,
    connector: &str,
    cursor: &StagedCursor,
    log_end: u64,
) -> rusqlite::Result<()> {
    transaction
        .prepare_cached(
            "INSERT OR REPLACE INTO cursors (connector, lineage, generation, state, log_end) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![connector, cursor.lineage.to_be_bytes(), cursor.generation, cursor.state, log_end])?;
    Ok(())
}

fn read(connection: &rusqlite::Connection, connector: &str) -> rusqlite::Result<Option<Kept>> {
    connection
        .prepare_cached("SELECT lineage, generation, state, log_end FROM cursors WHERE connector = ?1")?
        .query_row([connector], |row| {
            let lineage: Vec<u8> = row.get(0)?;
            // A lineage of another length is no lineage of ours: never equal.
            let lineage = <[u8; 16]>::try_from(lineage).map(u128::from_be_bytes).unwrap_or(0);
            let cursor = StagedCursor { lineage, generation: row.get(1)?, state: row.get(2)? };
            Ok(Kept { cursor, log_end: row.get(3)? })
        })
        .optional()
}

/// A source's cursor when it delivers to the local log: committed to its state file,
/// and taken from the log at start when the log is ahead (see the module's
/// documentation).
#[derive(Clone)]
pub struct LoggedCursor {
    file: ConnectorState,
    key: String,
    /// The log, whose open topics (checked once, when first opened) are read again at
    /// each start of the connector rather than opened and checked anew.
    log: Arc<LocalLog>,
    /// Every topic the connector delivers to.
    topics: Vec<(String, String)>,
}

impl LoggedCursor {
    pub fn new(file: ConnectorState, key: &str, log: &Arc<LocalLog>, topics: Vec<(String, String)>) -> Self {
        LoggedCursor { file, key: key.to_string(), log: log.clone(), topics }
    }

    fn load_blocking(&self) -> Result<Option<Committed>, StateError> {
        let in_file = self.file.committed()?;
        let file_generation = in_file.as_ref().map_or(0, |c| c.generation);
        let lineage = self.file.lineage();
        let mut marks = Vec::new();
        let mut oldest: Option<StagedCursor> = None;
        for (stream, topic) in &self.topics {
            let kept = match self.kept_in(stream, topic)? {
                Some(kept) if kept.cursor.lineage == lineage && kept.cursor.generation > file_generation => kept,
                // A topic not ahead: the batch after the file's cursor is not in
                // every topic, so it is produced again from the file's cursor.
                _ => return Ok(in_file),
            };
            marks.push(LogMark::new(stream.clone(), topic.clone(), kept.log_end));
            if oldest.as_ref().is_none_or(|o| kept.cursor.generation < o.generation) {
                oldest = Some(kept.cursor);
            }
        }
        let Some(oldest) = oldest else { return Ok(in_file) };
        // Every topic holds the batch after the file's cursor: the crash came after
        // its append and before its commit. Commit it now, as the source loop would
        // have.
        let committed = Committed {
            state: oldest.state,
            generation: oldest.generation,
            committed_at_micros: ferry_engine::status::now_micros(),
            receipt: Receipt { marks },
        };
        tracing::info!(
            key = %self.key,
            generation = committed.generation,
            behind = file_generation,
            "the local log holds a newer cursor than the state file (ferry stopped between the two): taking it"
        );
        self.file.restore(&committed)?;
        Ok(Some(committed))
    }

    /// The cursor `stream`/`topic` keeps for this connector; `None` when the topic
    /// does not exist yet.
    fn kept_in(&self, stream: &str, topic: &str) -> Result<Option<Kept>, StoreError> {
        if std::fs::symlink_metadata(LocalLog::topic_file(self.log.dir(), stream, topic)).is_err() {
            return Ok(None);
        }
        let database = self.log.topic(stream, topic)?;
        let database = database.lock().unwrap_or_else(|e| e.into_inner());
        read(database.connection(), &self.key).map_err(|e| database.error("cannot read the cursor kept there", e))
    }
}

#[async_trait]
impl CursorStore for LoggedCursor {
    async fn load(&self) -> Result<Option<Committed>, StateError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.load_blocking())
            .await
            .map_err(|e| StateError::Io(format!("state read task failed: {e}")))?
    }

    async fn commit(&self, state: Vec<u8>, receipt: Receipt) -> Result<Committed, StateError> {
        self.file.commit(state, receipt).await
    }

    fn lineage(&self) -> u128 {
        self.file.lineage()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateDir;
    use ferry_config::StreamConfig;
    use ferry_contract::Message;
    use ferry_engine::delivery::{Delivery, Target};

    const KEY: &str = "src";

    /// A batch of `count` messages for `topics` of stream `s`, staging `state` as
    /// generation `generation` of `lineage`.
    fn batch(topics: &[&str], count: usize, lineage: u128, generation: u64, state: &str) -> Delivery {
        let message =
            |n: usize| Message { id: None, headers: vec![], payload: vec![n as u8].into(), origin_timestamp: None };
        Delivery {
            connector: KEY.into(),
            streams: topics.iter().map(|t| StreamConfig::new("s", *t)).collect(),
            messages: Arc::new((0..count).map(message).collect()),
            cursor: Some(StagedCursor { lineage, generation, state: state.as_bytes().to_vec() }),
        }
    }

    fn records(log: &LocalLog, topic: &str) -> usize {
        LocalLog::read_all(log.dir(), "s", topic).unwrap().len()
    }

    struct Site {
        _dir: tempfile::TempDir,
        log: Arc<LocalLog>,
        states: StateDir,
    }

    fn site() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(LocalLog::new(dir.path().join("log")));
        let states = StateDir::new(dir.path().join("state"));
        Site { _dir: dir, log, states }
    }

    fn logged(site: &Site, topics: &[&str]) -> LoggedCursor {
        let file = site.states.open(KEY).unwrap();
        let topics = topics.iter().map(|t| ("s".to_string(), t.to_string())).collect();
        LoggedCursor::new(file, KEY, &site.log, topics)
    }

    #[tokio::test]
    async fn a_batch_the_topic_holds_with_the_same_cursor_is_not_appended_again() {
        let site = site();
        let first = site.log.deliver(batch(&["t"], 2, 7, 1, "a")).await.unwrap();
        let again = site.log.deliver(batch(&["t"], 2, 7, 1, "a")).await.unwrap();
        assert_eq!(again, first, "a replay answers with the receipt of the batch already there");
        assert_eq!(records(&site.log, "t"), 2, "and appends nothing");

        // The same generation staging another cursor covers another range: appended.
        let other = site.log.deliver(batch(&["t"], 3, 7, 1, "b")).await.unwrap();
        assert_eq!(other.marks[0].end, 5);
        // So is a batch of another lineage (a connector whose state was reset).
        site.log.deliver(batch(&["t"], 1, 8, 1, "b")).await.unwrap();
        assert_eq!(records(&site.log, "t"), 6);
    }

    #[tokio::test]
    async fn a_cursor_appended_but_not_committed_is_taken_from_the_log_and_committed() {
        let site = site();
        let cursor = logged(&site, &["t"]);
        let lineage = cursor.lineage();
        site.log.deliver(batch(&["t"], 2, lineage, 1, "one")).await.unwrap();
        cursor.commit(b"one".to_vec(), Receipt::default()).await.unwrap();
        // Ferry dies after the append of generation 2 and before its commit.
        site.log.deliver(batch(&["t"], 3, lineage, 2, "two")).await.unwrap();

        let loaded = cursor.load().await.unwrap().unwrap();
        assert_eq!((loaded.state.as_slice(), loaded.generation), (&b"two"[..], 2));
        assert_eq!(loaded.receipt.marks, [LogMark::new("s", "t", 5)]);
        let in_file = site.states.read(KEY).unwrap().unwrap();
        assert_eq!((in_file.state, in_file.generation), (b"two".to_vec(), 2), "the state file caught up");
        let next = cursor.commit(b"three".to_vec(), Receipt::default()).await.unwrap();
        assert_eq!(next.generation, 3, "commits go on from the generation taken");
    }

    #[tokio::test]
    async fn with_one_topic_behind_the_state_files_cursor_is_taken_and_the_replay_fills_only_that_topic() {
        let site = site();
        let cursor = logged(&site, &["a", "b"]);
        let lineage = cursor.lineage();
        site.log.deliver(batch(&["a", "b"], 2, lineage, 1, "one")).await.unwrap();
        cursor.commit(b"one".to_vec(), Receipt::default()).await.unwrap();
        // Ferry dies between the appends of generation 2 to `a` and to `b`.
        site.log.deliver(batch(&["a"], 3, lineage, 2, "two")).await.unwrap();

        let loaded = cursor.load().await.unwrap().unwrap();
        assert_eq!((loaded.state.as_slice(), loaded.generation), (&b"one"[..], 1));
        // The source produces generation 2 again: `a` has it, `b` gets it.
        let receipt = site.log.deliver(batch(&["a", "b"], 3, lineage, 2, "two")).await.unwrap();
        assert_eq!((records(&site.log, "a"), records(&site.log, "b")), (5, 5), "no duplicate, nothing missing");
        let ends: Vec<u64> = receipt.marks.iter().map(|m| m.end).collect();
        assert_eq!(ends, [5, 5]);
    }

    #[tokio::test]
    async fn cursors_of_a_state_that_was_reset_are_ignored() {
        let site = site();
        let cursor = logged(&site, &["t"]);
        let old = cursor.lineage();
        site.log.deliver(batch(&["t"], 2, old, 1, "one")).await.unwrap();
        drop(cursor);
        site.states.reset(KEY).unwrap();

        let cursor = logged(&site, &["t"]);
        assert_ne!(cursor.lineage(), old, "a new state file is a new lineage");
        assert_eq!(cursor.load().await.unwrap(), None, "it starts from scratch");
    }

    #[tokio::test]
    async fn a_topic_of_format_1_gets_the_cursors_table_and_is_read_as_it_was() {
        let site = site();
        let path = LocalLog::topic_file(site.log.dir(), "s", "t");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let old = rusqlite::Connection::open(&path).unwrap();
        old.execute_batch(
            r#"PRAGMA journal_mode = WAL;
               CREATE TABLE records ("offset" INTEGER PRIMARY KEY, id BLOB, headers TEXT, payload BLOB NOT NULL,
                   origin_timestamp INTEGER, appended_at INTEGER NOT NULL, connector TEXT NOT NULL);
               INSERT INTO records VALUES (0, NULL, NULL, x'00', NULL, 1, 'src');
               PRAGMA user_version = 1;"#,
        )
        .unwrap();
        drop(old);
        let cursor = logged(&site, &["t"]);
        assert_eq!(cursor.load().await.unwrap(), None, "a topic without kept cursors is not ahead");

        let receipt = site.log.deliver(batch(&["t"], 1, cursor.lineage(), 1, "one")).await.unwrap();
        assert_eq!(receipt.marks[0].end, 2, "appended after the record already there");
        assert_eq!(cursor.load().await.unwrap().unwrap().state, b"one");
    }
}
