//! The state directory: `cursors.db` holds the committed cursor of every connector
//! whose state lives there (see [`super::database`]), and `<key>.lock` is held (an
//! advisory lock) by the process running connector `key`, so that two processes
//! never run one connector, while each may run others from the same directory.
//!
//! Each connector has a *lineage*: a random number drawn when its state is first
//! taken. A target that keeps cursors beside what it delivered (the local log) keeps
//! the lineage with them, so that after `ferry state reset` (a new lineage) the
//! cursors of the old life are never taken for the new one's.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;

use super::committer::{Ask, Committer, Done};
use super::database::{self, FORMAT, now_micros};
use ferry_contract::{Durability, files};
use ferry_engine::cursor::CursorStore;

use super::{Committed, StateError, legacy};
use crate::sqlite::{self, Access};
use ferry_engine::delivery::Receipt;

/// A directory holding the state of connectors.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
    durability: Durability,
    /// The writer of its cursor database, while some connector's state is held.
    committer: Arc<Mutex<Weak<Committer>>>,
}

impl StateDir {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StateDir { path: path.into(), durability: Durability::EveryCommit, committer: Default::default() }
    }

    /// The same directory, its states committed with `durability`.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database file holding connector `key`'s committed cursor: the directory's
    /// cursor database, shared by all its connectors.
    pub fn file_of(&self, _key: &str) -> PathBuf {
        self.path.join(database::FILE_NAME)
    }

    fn lock_of(&self, key: &str) -> PathBuf {
        self.path.join(format!("{key}.lock"))
    }

    /// Take connector `key`'s state for this process: lock it, open (or create) the
    /// cursor database, take in the file an older ferry kept for it, and read its
    /// cursor. Fails if another process holds it, or its cursor is corrupt or cannot
    /// be read.
    pub fn open(&self, key: &str) -> Result<ConnectorState, StateError> {
        self.open_with(key, self.durability)
    }

    /// [`StateDir::open`], committing with `durability` rather than the directory's:
    /// for a connector whose cursor is made durable elsewhere too (see
    /// `local_log::LoggedCursor`).
    pub fn open_with(&self, key: &str, durability: Durability) -> Result<ConnectorState, StateError> {
        self.open_from(key, durability, None)
    }

    /// [`StateDir::open_with`], first moving `key`'s state here from `from`, another
    /// state directory, if this one holds none and `from` holds one: for a connector
    /// moved into a tenant (whose state lives in a directory of its own), so that it
    /// goes on from its cursor instead of starting from scratch.
    pub fn open_moving_from(
        &self,
        key: &str,
        durability: Durability,
        from: &StateDir,
    ) -> Result<ConnectorState, StateError> {
        self.open_from(key, durability, Some(from))
    }

    fn open_from(
        &self,
        key: &str,
        durability: Durability,
        from: Option<&StateDir>,
    ) -> Result<ConnectorState, StateError> {
        // Taken once, and held: a lock let go and taken again could meet a copy of
        // its descriptor in a child process being started (compiling), and fail.
        let lock = self.lock(key)?;
        if let Some(from) = from {
            self.move_from(key, from)?;
        }
        let committer = self.committer()?;
        let imported = match legacy::exists(&self.path, key) {
            true => Some(legacy::read(&self.path, key)?),
            false => None,
        };
        let key: Arc<str> = key.into();
        let Done::Taken(taken) = committer.ask_blocking(Ask::Take { key: key.clone(), imported: imported.clone() })?
        else {
            unreachable!("a take is answered with what was taken")
        };
        if imported.is_some() {
            self.put_legacy_aside(&committer, &key, taken.stored)?;
        }
        Ok(ConnectorState {
            key,
            path: committer.path().to_path_buf(),
            lineage: taken.lineage,
            durability,
            committer,
            _lock: Arc::new(lock),
        })
    }

    /// Put aside the file an older ferry kept `key`'s cursor in, once its cursor is
    /// on disk in the database (`stored` now, or by an earlier take that stopped
    /// before it could put the file aside).
    fn put_legacy_aside(&self, committer: &Committer, key: &str, stored: bool) -> Result<(), StateError> {
        committer.ask_blocking(Ask::Sync)?;
        let moved = legacy::put_aside(&self.path, key, &format!(".imported-{}", now_micros()))?;
        let moved = moved.first().map(|p| p.display().to_string()).unwrap_or_default();
        match stored {
            true => tracing::info!(key, into = %committer.path().display(), kept_as = moved,
                "took the cursor of an older ferry's state file into the cursor database"),
            false => tracing::info!(
                key,
                kept_as = moved,
                "the cursor database already held the cursor of this older state file; put it aside"
            ),
        }
        Ok(())
    }

    /// The writer of the cursor database, started if nobody holds it.
    fn committer(&self) -> Result<Arc<Committer>, StateError> {
        let mut slot = self.committer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(committer) = slot.upgrade() {
            return Ok(committer);
        }
        let committer = Arc::new(Committer::start(&self.path.join(database::FILE_NAME))?);
        *slot = Arc::downgrade(&committer);
        Ok(committer)
    }

    /// Put on disk what the states taken from this directory committed (or took)
    /// without an fsync: one fsync for all of them.
    pub fn sync(&self) -> Result<(), StateError> {
        let committer = self.committer.lock().unwrap_or_else(|e| e.into_inner()).upgrade();
        match committer {
            Some(committer) => committer.ask_blocking(Ask::Sync).map(drop),
            None => Ok(()),
        }
    }

    /// Read connector `key`'s committed cursor without taking it; works while a
    /// `ferry` process runs it.
    pub fn read(&self, key: &str) -> Result<Option<Committed>, StateError> {
        Ok(self.export(key)?.and_then(|exported| exported.committed))
    }

    /// Move `key`'s state from `from` into this directory (whose lock of `key` the
    /// caller holds), if this one holds none. The cursor and its lineage are stored
    /// and synced here first, then put aside in `from` (as a reset would), so that a
    /// crash in between leaves it in both places, never in neither.
    fn move_from(&self, key: &str, from: &StateDir) -> Result<(), StateError> {
        let _there = from.lock(key)?;
        if self.export(key)?.is_some() {
            return Ok(());
        }
        let Some(imported) = from.export(key)? else { return Ok(()) };
        let committer = self.committer()?;
        committer.ask_blocking(Ask::Take { key: key.into(), imported: Some(imported) })?;
        committer.ask_blocking(Ask::Sync)?;
        let kept = from.reset_locked(key)?;
        tracing::info!(
            key,
            from = %from.path.display(),
            into = %self.path.display(),
            "moved the connector's committed state into its tenant's state directory; the old copy is kept {}",
            kept.join(", ")
        );
        Ok(())
    }

    /// `key`'s lineage and cursor, from the database or an older ferry's file; `None`
    /// when neither holds it. Creates nothing.
    fn export(&self, key: &str) -> Result<Option<database::Imported>, StateError> {
        if let Some(database) = self.read_only()?
            && let Some(exported) = database::export(&database, key)?
        {
            return Ok(Some(exported));
        }
        match legacy::exists(&self.path, key) {
            true => Ok(Some(legacy::read(&self.path, key)?)),
            false => Ok(None),
        }
    }

    /// The cursor database opened for reading alongside its writer, if it exists.
    fn read_only(&self) -> Result<Option<crate::sqlite::Database>, StateError> {
        let path = self.path.join(database::FILE_NAME);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        Ok(Some(sqlite::open_existing(&path, &FORMAT, Access::Read)?))
    }

    /// Check the whole cursor database of this directory ([`sqlite::check`]), if it
    /// has one: its path, or `None`.
    pub fn check(&self) -> Result<Option<PathBuf>, StateError> {
        let path = self.path.join(database::FILE_NAME);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        sqlite::check(&path, &FORMAT)?;
        Ok(Some(path))
    }

    /// Keys that have a state here.
    pub fn keys(&self) -> Result<Vec<String>, StateError> {
        let mut keys = legacy::keys(&self.path)?;
        if let Some(database) = self.read_only()? {
            keys.extend(database::keys(database.connection()).map_err(|e| database.error("cannot list it", e))?);
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// Put connector `key`'s state aside (kept, not deleted), so that it starts from
    /// scratch next time. Refused while a process holds the connector. Returns where
    /// the old state is kept ("in the `reset` table of …", "as …"), if there was any.
    pub fn reset(&self, key: &str) -> Result<Vec<String>, StateError> {
        let _lock = self.lock(key)?;
        self.reset_locked(key)
    }

    /// [`StateDir::reset`], the lock of `key` held by the caller.
    fn reset_locked(&self, key: &str) -> Result<Vec<String>, StateError> {
        let mut kept = Vec::new();
        let database = self.path.join(database::FILE_NAME);
        if std::fs::symlink_metadata(&database).is_ok() {
            let Done::Reset(had) = self.committer()?.ask_blocking(Ask::Reset { key: key.into() })? else {
                unreachable!("a reset is answered with whether there was state")
            };
            if had {
                kept.push(format!("in the `reset` table of {}", database.display()));
            }
        }
        let moved = legacy::put_aside(&self.path, key, &format!(".reset-{}", now_micros()))?;
        kept.extend(moved.iter().map(|p| format!("as {}", p.display())));
        Ok(kept)
    }

    fn lock(&self, key: &str) -> Result<File, StateError> {
        files::create_private_dir(&self.path).map_err(|e| {
            StateError::Io(format!(
                "{}: cannot create the state directory: {}",
                self.path.display(),
                sqlite::os_reason(&e)
            ))
        })?;
        let path = self.lock_of(key);
        let io = |e: std::io::Error| StateError::Io(format!("{}: {}", path.display(), sqlite::os_reason(&e)));
        let mut file =
            files::private_file().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {
                file.set_len(0).map_err(io)?;
                file.rewind().map_err(io)?;
                write!(file, "{}", std::process::id()).map_err(io)?;
                Ok(file)
            }
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => "another process".to_string(),
                    pid => format!("process {pid}"),
                };
                Err(StateError::Locked { key: key.to_string(), path: path.display().to_string(), holder })
            }
            Err(TryLockError::Error(e)) => Err(io(e)),
        }
    }
}

/// One connector's state, held by this process for as long as the value lives.
#[derive(Clone)]
pub struct ConnectorState {
    key: Arc<str>,
    path: PathBuf,
    lineage: u128,
    durability: Durability,
    committer: Arc<Committer>,
    _lock: Arc<File>,
}

impl ConnectorState {
    /// The database holding it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The committed cursor, read now (blocking: not on an async runtime's thread).
    pub fn committed(&self) -> Result<Option<Committed>, StateError> {
        match self.committer.ask_blocking(Ask::Read { key: self.key.clone() })? {
            Done::Read(committed) => Ok(committed),
            _ => unreachable!("a read is answered with what was read"),
        }
    }

    /// Make `committed` the committed cursor, generation and all: for a cursor found
    /// durable elsewhere (the local log) that this state had not caught up with
    /// (blocking).
    pub fn restore(&self, committed: &Committed) -> Result<(), StateError> {
        let ask = Ask::Restore { key: self.key.clone(), committed: committed.clone(), durability: self.durability };
        self.committer.ask_blocking(ask).map(drop)
    }
}

#[async_trait]
impl CursorStore for ConnectorState {
    async fn load(&self) -> Result<Option<Committed>, StateError> {
        match self.committer.ask(Ask::Read { key: self.key.clone() }).await? {
            Done::Read(committed) => Ok(committed),
            _ => unreachable!("a read is answered with what was read"),
        }
    }

    async fn commit(&self, state: Vec<u8>, receipt: Receipt) -> Result<Committed, StateError> {
        let ask = Ask::Commit { key: self.key.clone(), state, receipt, durability: self.durability };
        match self.committer.ask(ask).await? {
            Done::Committed(committed) => Ok(committed),
            _ => unreachable!("a commit is answered with what was committed"),
        }
    }

    fn lineage(&self) -> u128 {
        self.lineage
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use rusqlite::{Connection, params};

    use super::*;
    use ferry_engine::delivery::LogMark;

    fn receipt(end: u64) -> Receipt {
        Receipt { marks: vec![LogMark::new("demo", "random", end)] }
    }

    /// Frames in the write-ahead log not yet checkpointed (copied into the database),
    /// as a checkpoint that copies nothing (NOOP) reports them.
    fn unsynced_frames(states: &StateDir) -> i64 {
        let connection = Connection::open(states.file_of("")).unwrap();
        let (log, copied): (i64, i64) =
            connection.query_row("PRAGMA wal_checkpoint(NOOP)", [], |row| Ok((row.get(1)?, row.get(2)?))).unwrap();
        log - copied
    }

    #[tokio::test]
    async fn commits_survive_reopening_and_count_generations() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        let lineage = {
            let store = states.open("alpha").unwrap();
            assert_eq!(store.load().await.unwrap(), None);
            assert_eq!(store.commit(b"one".to_vec(), receipt(10)).await.unwrap().generation, 1);
            assert_eq!(store.commit(b"two".to_vec(), receipt(20)).await.unwrap().generation, 2);
            store.lineage()
        };
        let store = StateDir::new(dir.path()).open("alpha").unwrap();
        assert_eq!(store.lineage(), lineage, "a connector keeps its lineage");
        let committed = store.load().await.unwrap().unwrap();
        assert_eq!((committed.state.as_slice(), committed.generation), (&b"two"[..], 2));
        assert_eq!(committed.receipt, receipt(20), "the receipt is kept with its cursor");
        assert_eq!(states.read("alpha").unwrap(), Some(committed));
        let other = states.open("beta").unwrap();
        assert_ne!(other.lineage(), lineage, "each connector has a lineage of its own");
        assert_eq!(states.keys().unwrap(), ["alpha", "beta"]);
        assert_eq!(
            std::fs::read_dir(dir.path())
                .unwrap()
                .filter(|e| { e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".sqlite") })
                .count(),
            0,
            "no file per connector"
        );
    }

    #[tokio::test]
    async fn an_interval_durability_commits_without_fsync_and_syncs_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let lazy = StateDir::new(dir.path()).with_durability(Durability::Interval(Duration::from_secs(3600)));
        let store = lazy.open("lazy").unwrap();
        lazy.sync().unwrap();
        for n in 1..=3u64 {
            store.commit(n.to_string().into_bytes(), receipt(n)).await.unwrap();
        }
        assert!(unsynced_frames(&lazy) > 0, "committed, not checkpointed within the hour");
        assert_eq!(lazy.read("lazy").unwrap().unwrap().generation, 3, "and readable by others at once");
        drop(store);
        assert_eq!(unsynced_frames(&lazy), 0, "closing the last state synced it");

        let eager = StateDir::new(dir.path()).with_durability(Durability::Interval(Duration::ZERO));
        let store = eager.open("eager").unwrap();
        store.commit(b"1".to_vec(), receipt(1)).await.unwrap();
        assert_eq!(unsynced_frames(&eager), 0, "an interval of zero checkpoints at every commit");
    }

    #[test]
    fn a_second_holder_is_refused_and_reset_needs_the_lock_and_draws_a_new_lineage() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        let held = states.open("beta").unwrap();
        let lineage = held.lineage();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(held.commit(b"7".to_vec(), receipt(7))).unwrap();
        let error = states.open("beta").err().unwrap();
        assert!(
            matches!(&error, StateError::Locked { holder, .. } if holder.contains(&std::process::id().to_string())),
            "{error}"
        );
        assert!(matches!(states.reset("beta"), Err(StateError::Locked { .. })));
        drop(held);
        let kept = states.reset("beta").unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(kept[0].contains("`reset` table") && kept[0].contains("cursors.db"), "{kept:?}");
        assert_eq!(states.read("beta").unwrap(), None);
        let connection = Connection::open(states.file_of("beta")).unwrap();
        let aside: Vec<u8> =
            connection.query_row("SELECT state FROM reset WHERE connector = 'beta'", [], |r| r.get(0)).unwrap();
        assert_eq!(aside, b"7", "the old cursor is kept aside");
        assert_ne!(states.open("beta").unwrap().lineage(), lineage, "a reset connector starts a new life");
        assert!(states.reset("nobody").unwrap().is_empty(), "nothing to reset");
    }

    #[tokio::test]
    async fn a_damaged_cursor_or_receipt_is_reported_for_that_connector_alone() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        {
            let gamma = states.open("gamma").unwrap();
            gamma.commit(br#"{"next_seq":40}"#.to_vec(), receipt(2860)).await.unwrap();
            states.open("delta").unwrap().commit(b"1".to_vec(), receipt(1)).await.unwrap();
        }
        let committed = states.read("gamma").unwrap();
        // Damage the stored row behind the checksum's back, one column at a time.
        for (column, value) in [
            ("state", rusqlite::types::Value::Blob(br#"{"next_seq":99}"#.to_vec())),
            ("delivered", rusqlite::types::Value::Text(r#"[{"stream":"demo","topic":"random","end":1040}]"#.into())),
            ("delivered", rusqlite::types::Value::Text(String::new())),
        ] {
            let connection = Connection::open(states.file_of("gamma")).unwrap();
            let original: rusqlite::types::Value = connection
                .query_row(&format!("SELECT {column} FROM cursor WHERE connector = 'gamma'"), [], |r| r.get(0))
                .unwrap();
            let damage = format!("UPDATE cursor SET {column} = ?1 WHERE connector = 'gamma'");
            connection.execute(&damage, [&value]).unwrap();
            let error = states.open("gamma").err().unwrap();
            assert!(
                matches!(&error, StateError::Corrupt { detail, .. }
                    if detail.contains("checksum") && detail.contains("connector `gamma`")),
                "{error}"
            );
            assert!(matches!(states.read("gamma"), Err(StateError::Corrupt { .. })));
            assert!(states.open("delta").is_ok(), "another connector of the directory runs on");
            connection.execute(&damage, [&original]).unwrap();
        }
        assert_eq!(states.read("gamma").unwrap(), committed, "undamaged, it reads as committed");
    }

    #[tokio::test]
    async fn a_damaged_lineage_is_corrupt_for_that_connector_alone_and_a_reset_puts_it_aside() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        let lineage = {
            let gamma = states.open("gamma").unwrap();
            gamma.commit(b"7".to_vec(), Receipt::default()).await.unwrap();
            states.open("delta").unwrap();
            gamma.lineage()
        };
        let connection = Connection::open(states.file_of("gamma")).unwrap();
        connection.execute("UPDATE lineage SET id = x'0102' WHERE connector = 'gamma'", []).unwrap();
        let error = states.open("gamma").err().unwrap();
        assert!(
            matches!(&error, StateError::Corrupt { detail, .. }
                if detail.contains("lineage of connector `gamma` is 2 bytes, not 16")),
            "{error}"
        );
        assert!(states.open("delta").is_ok(), "another connector of the directory runs on");
        // The operator's way out: the reset puts the damaged row aside, and the
        // connector starts a new life.
        assert!(!states.reset("gamma").unwrap().is_empty(), "there was something to put aside");
        let fresh = states.open("gamma").unwrap();
        assert_ne!(fresh.lineage(), lineage);
        assert_eq!(fresh.load().await.unwrap(), None, "no cursor after the reset");
    }

    /// A state file as ferry wrote it before receipts (format version 1).
    fn write_version_1(path: &Path, key: &str, state: &[u8], checksum: u32) {
        let connection = Connection::open(path).unwrap();
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 CREATE TABLE cursor (
                     connector TEXT PRIMARY KEY,
                     generation INTEGER NOT NULL,
                     committed_at INTEGER NOT NULL,
                     state BLOB NOT NULL,
                     checksum INTEGER NOT NULL
                 );
                 PRAGMA user_version = 1;",
            )
            .unwrap();
        connection
            .execute("INSERT INTO cursor VALUES (?1, 7, 1700000000000000, ?2, ?3)", params![key, state, checksum])
            .unwrap();
    }

    fn files_named(dir: &Path, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(prefix))
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn an_older_ferrys_file_is_read_as_it_is_then_taken_in_and_put_aside() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        // The CRC32 ferry 0.1 (format 1) stored for this row.
        write_version_1(&legacy::file_of(dir.path(), "legacy"), "legacy", br#"{"next_seq":70}"#, 0x5abc_2d20);
        let expected = Committed {
            state: br#"{"next_seq":70}"#.to_vec(),
            generation: 7,
            committed_at_micros: 1_700_000_000_000_000,
            receipt: Receipt::default(),
        };
        assert_eq!(states.read("legacy").unwrap(), Some(expected.clone()));
        assert_eq!(states.keys().unwrap(), ["legacy"]);
        assert_eq!(files_named(dir.path(), "legacy.sqlite"), ["legacy.sqlite"], "reading changes nothing");

        let store = states.open("legacy").unwrap();
        assert_ne!(store.lineage(), 0, "a file without a lineage gets one");
        assert_eq!(store.load().await.unwrap(), Some(expected));
        let aside = files_named(dir.path(), "legacy.sqlite");
        assert!(aside.len() == 1 && aside[0].starts_with("legacy.sqlite.imported-"), "{aside:?}");
        let next = store.commit(br#"{"next_seq":80}"#.to_vec(), receipt(80)).await.unwrap();
        assert_eq!((next.generation, &next.receipt), (8, &receipt(80)));
        drop(store);
        assert_eq!(states.read("legacy").unwrap(), Some(next));
        assert_eq!(states.keys().unwrap(), ["legacy"]);
    }

    #[tokio::test]
    async fn an_older_ferrys_file_keeps_its_lineage() {
        let dir = tempfile::tempdir().unwrap();
        let path = legacy::file_of(dir.path(), "three");
        let cursor = Committed {
            state: br#"{"next_seq":70}"#.to_vec(),
            generation: 7,
            committed_at_micros: 1_700_000_000_000_000,
            receipt: Receipt::default(),
        };
        write_version_1(&path, "three", &cursor.state, database::checksum("three", &cursor, ""));
        let connection = Connection::open(&path).unwrap();
        let lineage: u128 = 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef;
        connection
            .execute_batch("ALTER TABLE cursor ADD COLUMN delivered TEXT NOT NULL DEFAULT ''; CREATE TABLE lineage (id BLOB NOT NULL); PRAGMA user_version = 3;")
            .unwrap();
        connection.execute("INSERT INTO lineage VALUES (?1)", [&lineage.to_be_bytes()[..]]).unwrap();
        drop(connection);
        let store = StateDir::new(dir.path()).open("three").unwrap();
        assert_eq!(store.lineage(), lineage, "cursors the local log kept for it still match");
        assert_eq!(store.load().await.unwrap().unwrap().generation, 7);
    }

    #[test]
    fn a_damaged_file_of_an_older_ferry_is_corrupt_and_left_where_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        write_version_1(&legacy::file_of(dir.path(), "legacy"), "legacy", br#"{"next_seq":90}"#, 0x5abc_2d20);
        for _ in 0..2 {
            let error = states.open("legacy").err().unwrap();
            assert!(matches!(&error, StateError::Corrupt { detail, .. } if detail.contains("checksum")), "{error}");
            assert!(error.to_string().contains("legacy.sqlite"), "{error}");
        }
        assert_eq!(files_named(dir.path(), "legacy.sqlite"), ["legacy.sqlite"]);
        assert!(states.read("legacy").is_err());
    }

    #[test]
    fn a_file_of_an_older_ferry_holding_another_connector_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        write_version_1(&legacy::file_of(dir.path(), "two"), "one", br#"{"next_seq":70}"#, 0x5abc_2d20);
        let error = StateDir::new(dir.path()).open("two").err().unwrap();
        assert!(error.to_string().contains("connector `one`"), "{error}");
    }

    #[tokio::test]
    async fn a_cursor_database_deleted_while_held_fails_the_commit_and_is_not_recreated() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        let store = states.open("delta").unwrap();
        store.commit(b"1".to_vec(), Receipt::default()).await.unwrap();
        std::fs::remove_file(states.file_of("delta")).unwrap();
        for _ in 0..2 {
            let error = store.commit(b"2".to_vec(), Receipt::default()).await.unwrap_err();
            assert!(
                matches!(&error, StateError::Io(detail) if detail.contains("deleted or replaced while ferry was running")),
                "{error}"
            );
            assert!(error.to_string().contains("cursors.db"), "{error}");
        }
        assert!(!states.file_of("delta").exists());
    }
}
