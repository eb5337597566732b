//! The state directory: `<key>.sqlite` holds a connector's committed cursor and
//! `<key>.lock` is held (an advisory lock) by the process running that connector.
//!
//! The row carries a CRC32 of its content (cursor and receipt), so a cursor damaged
//! on disk is reported as corrupt instead of being handed to the guest.
//!
//! How a commit reaches the disk is the [`Durability`] of the directory: fsynced at
//! every commit (the default), or at most an interval later. A commit that is not
//! fsynced yet is still a committed SQLite transaction in the write-ahead log, in the
//! operating system's hands: a crash of ferry (`kill -9`) loses nothing; only a
//! crash of the machine can take the cursor back, by at most the interval.
//!
//! Each file has a *lineage*: a random number drawn when the file is created. A
//! target that keeps cursors beside what it delivered (the local log) keeps the
//! lineage with them, so that after `ferry state reset` (a new file, a new lineage)
//! the cursors of the old life are never taken for the new one's.
//!
//! Format version 2 added the receipt (`delivered`), version 3 the lineage; an older
//! file is migrated when a `ferry run` opens it, and read as it is by `ferry state
//! show`.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Committed, CursorStore, StateError};
use crate::delivery::{LogMark, Receipt};
use crate::sqlite::{self, Access, Database, Format, Migration, StoreError};

const FORMAT: Format = Format {
    what: "state database",
    schema: "CREATE TABLE cursor (
        connector TEXT PRIMARY KEY,
        generation INTEGER NOT NULL,
        committed_at INTEGER NOT NULL,
        state BLOB NOT NULL,
        checksum INTEGER NOT NULL,
        delivered TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE lineage (id BLOB NOT NULL);
    INSERT INTO lineage VALUES (randomblob(16));",
    version: 3,
    migrations: &[
        // A cursor of version 1 has no receipt; its checksum stays valid (see `checksum`).
        Migration { from: 1, sql: "ALTER TABLE cursor ADD COLUMN delivered TEXT NOT NULL DEFAULT ''" },
        Migration {
            from: 2,
            sql: "CREATE TABLE lineage (id BLOB NOT NULL); INSERT INTO lineage VALUES (randomblob(16))",
        },
    ],
};

/// The directory holding every connector's state.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
    durability: Durability,
}

/// When a committed cursor is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Before the commit returns (`synchronous=FULL`: one fsync per commit).
    EveryCommit,
    /// Within this long of the commit, while the connector commits, and when its
    /// state is closed (`synchronous=NORMAL`, and a checkpoint, which fsyncs, at
    /// most this often).
    Interval(Duration),
}

impl StateDir {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StateDir { path: path.into(), durability: Durability::EveryCommit }
    }

    /// The same directory, its states committed with `durability`.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database file of connector `key`.
    pub fn file_of(&self, key: &str) -> PathBuf {
        self.path.join(format!("{key}.sqlite"))
    }

    fn lock_of(&self, key: &str) -> PathBuf {
        self.path.join(format!("{key}.lock"))
    }

    /// Take connector `key`'s state for this process: lock it, open (or create) its
    /// file, migrate it to the current format and check it. Fails if another process
    /// holds it, or the file is corrupt or cannot be used.
    pub fn open(&self, key: &str) -> Result<ConnectorStateFile, StateError> {
        self.open_with(key, self.durability)
    }

    /// [`StateDir::open`], committing with `durability` rather than the directory's:
    /// for a connector whose cursor is made durable elsewhere too (see
    /// `local_log::LoggedCursor`).
    pub fn open_with(&self, key: &str, durability: Durability) -> Result<ConnectorStateFile, StateError> {
        let lock = self.lock(key)?;
        let path = self.file_of(key);
        let database = sqlite::open_or_create(&path, &FORMAT)?;
        if let Durability::Interval(_) = durability {
            database.relax_sync()?;
        }
        let lineage = read_lineage(&database)?;
        let held = Held { database, durability, synced_at: Instant::now() };
        let file = ConnectorStateFile {
            key: key.to_string(),
            path,
            lineage,
            inner: Arc::new(Mutex::new(held)),
            _lock: Arc::new(lock),
        };
        // Read once now, so corruption stops the connector before it starts.
        file.committed()?;
        Ok(file)
    }

    /// Read connector `key`'s committed cursor without taking it; works while a
    /// `ferry` process runs it.
    pub fn read(&self, key: &str) -> Result<Option<Committed>, StateError> {
        let path = self.file_of(key);
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => {}
        }
        let database = sqlite::open_existing(&path, &FORMAT, Access::Read)?;
        Ok(read_row(&database, key)?)
    }

    /// Keys that have a state file here.
    pub fn keys(&self) -> Result<Vec<String>, StateError> {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StateError::Io(format!("{}: {}", self.path.display(), sqlite::os_reason(&e)))),
        };
        let mut keys: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".sqlite").map(str::to_string))
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// Move connector `key`'s state aside (renamed with a `.reset-<time>` suffix, not
    /// deleted), so that it starts from scratch next time. Refused while a process
    /// holds the connector. Returns where the old files went, if there were any.
    pub fn reset(&self, key: &str) -> Result<Vec<PathBuf>, StateError> {
        let _lock = self.lock(key)?;
        let path = self.file_of(key);
        let suffix = format!(".reset-{}", now_micros());
        let mut moved = Vec::new();
        let [wal, shm] = sqlite::companion_files(&path);
        for file in [path, wal, shm] {
            if std::fs::symlink_metadata(&file).is_ok() {
                let mut aside = file.clone().into_os_string();
                aside.push(&suffix);
                let aside = PathBuf::from(aside);
                std::fs::rename(&file, &aside).map_err(|e| {
                    StateError::Io(format!("{}: cannot move it aside: {}", file.display(), sqlite::os_reason(&e)))
                })?;
                moved.push(aside);
            }
        }
        if let Ok(dir) = File::open(&self.path) {
            let _ = dir.sync_all();
        }
        Ok(moved)
    }

    fn lock(&self, key: &str) -> Result<File, StateError> {
        std::fs::create_dir_all(&self.path).map_err(|e| {
            StateError::Io(format!(
                "{}: cannot create the state directory: {}",
                self.path.display(),
                sqlite::os_reason(&e)
            ))
        })?;
        let path = self.lock_of(key);
        let io = |e: std::io::Error| StateError::Io(format!("{}: {}", path.display(), sqlite::os_reason(&e)));
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
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
pub struct ConnectorStateFile {
    key: String,
    path: PathBuf,
    lineage: u128,
    inner: Arc<Mutex<Held>>,
    _lock: Arc<File>,
}

/// The open database, and when it was last on disk.
struct Held {
    database: Database,
    durability: Durability,
    synced_at: Instant,
}

impl ConnectorStateFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The committed cursor, read now (blocking).
    pub fn committed(&self) -> Result<Option<Committed>, StateError> {
        let held = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(read_row(&held.database, &self.key)?)
    }

    /// Make `committed` the committed cursor, generation and all: for a cursor found
    /// durable elsewhere (the local log) that this file had not caught up with.
    pub fn restore(&self, committed: &Committed) -> Result<(), StateError> {
        let mut held = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let delivered = delivered_text(&committed.receipt);
        held.database.write("cannot save the cursor", |c| {
            let transaction = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            put_row(&transaction, &self.key, committed, &delivered)?;
            transaction.commit()
        })?;
        Ok(())
    }

    fn commit_blocking(&self, state: Vec<u8>, receipt: Receipt) -> Result<Committed, StateError> {
        let mut held = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let delivered = delivered_text(&receipt);
        let committed =
            held.database.write("cannot save the cursor", |c| write_row(c, &self.key, state, receipt, &delivered))?;
        if let Durability::Interval(every) = held.durability
            && held.synced_at.elapsed() >= every
        {
            // Committed already; this only moves it to the disk sooner. A failure
            // here is the disk's, and the next commits will meet it too.
            if let Err(error) = held.database.sync() {
                tracing::warn!("the committed cursor could not be synced to disk: {error}");
            }
            held.synced_at = Instant::now();
        }
        Ok(committed)
    }
}

#[async_trait]
impl CursorStore for ConnectorStateFile {
    async fn load(&self) -> Result<Option<Committed>, StateError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.committed())
            .await
            .map_err(|e| StateError::Io(format!("state read task failed: {e}")))?
    }

    async fn commit(&self, state: Vec<u8>, receipt: Receipt) -> Result<Committed, StateError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.commit_blocking(state, receipt))
            .await
            .map_err(|e| StateError::Io(format!("state commit task failed: {e}")))?
    }

    fn lineage(&self) -> u128 {
        self.lineage
    }
}

/// Replace the cursor row with the next generation, in one transaction.
fn write_row(
    connection: &mut Connection,
    key: &str,
    state: Vec<u8>,
    receipt: Receipt,
    delivered: &str,
) -> rusqlite::Result<Committed> {
    let transaction = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let previous: Option<u64> = transaction
        .query_row("SELECT generation FROM cursor WHERE connector = ?1", [key], |row| row.get(0))
        .optional()?;
    let committed =
        Committed { state, generation: previous.unwrap_or(0) + 1, committed_at_micros: now_micros(), receipt };
    put_row(&transaction, key, &committed, delivered)?;
    transaction.commit()?;
    Ok(committed)
}

fn put_row(
    transaction: &rusqlite::Transaction,
    key: &str,
    committed: &Committed,
    delivered: &str,
) -> rusqlite::Result<()> {
    transaction.execute(
        "INSERT OR REPLACE INTO cursor (connector, generation, committed_at, state, delivered, checksum)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            key,
            committed.generation,
            committed.committed_at_micros,
            committed.state,
            delivered,
            checksum(key, committed, delivered)
        ],
    )?;
    Ok(())
}

/// The file's lineage (see the module's documentation).
fn read_lineage(database: &Database) -> Result<u128, StoreError> {
    let id: Vec<u8> = database
        .connection()
        .query_row("SELECT id FROM lineage", [], |row| row.get(0))
        .map_err(|e| database.error("cannot read the lineage", e))?;
    let id: [u8; 16] = id.try_into().map_err(|id: Vec<u8>| StoreError::Corrupt {
        path: database.path().to_path_buf(),
        detail: format!("its lineage is {} bytes long, not 16", id.len()),
    })?;
    Ok(u128::from_be_bytes(id))
}

/// The cursor row as stored, before its checksum is checked.
struct StoredRow {
    connector: String,
    /// Without its receipt: that is checked as the text it is stored as.
    committed: Committed,
    delivered: String,
    checksum: u32,
}

fn read_row(database: &Database, key: &str) -> Result<Option<Committed>, StoreError> {
    let path = database.path();
    let corrupt = |detail: String| StoreError::Corrupt { path: path.to_path_buf(), detail };
    // A version 1 file (read as it is, alongside an older ferry) has no receipts.
    let delivered = if database.version() >= 2 { "delivered" } else { "''" };
    let rows: rusqlite::Result<Vec<StoredRow>> = database
        .connection()
        .prepare(&format!("SELECT connector, generation, committed_at, state, checksum, {delivered} FROM cursor"))
        .and_then(|mut statement| {
            statement
                .query_map([], |row| {
                    Ok(StoredRow {
                        connector: row.get(0)?,
                        committed: Committed {
                            generation: row.get(1)?,
                            committed_at_micros: row.get(2)?,
                            state: row.get(3)?,
                            receipt: Receipt::default(),
                        },
                        checksum: row.get(4)?,
                        delivered: row.get(5)?,
                    })
                })?
                .collect()
        });
    let mut rows = rows.map_err(|e| database.error("cannot read the cursor", e))?;
    let row = match rows.len() {
        0 => return Ok(None),
        1 => rows.remove(0),
        more => return Err(corrupt(format!("{more} cursors in one connector's file"))),
    };
    if row.connector != key {
        return Err(corrupt(format!("it holds the cursor of connector `{}`, not `{key}`", row.connector)));
    }
    let (stored, actual) = (row.checksum, checksum(key, &row.committed, &row.delivered));
    if actual != stored {
        return Err(corrupt(format!(
            "checksum mismatch (stored {stored:08x}, computed {actual:08x}): the cursor was damaged on disk"
        )));
    }
    let receipt = parse_delivered(&row.delivered).map_err(|e| corrupt(format!("unreadable receipt: {e}")))?;
    Ok(Some(Committed { receipt, ..row.committed }))
}

/// The receipt as stored: empty when there is none, else its marks as JSON.
fn delivered_text(receipt: &Receipt) -> String {
    if receipt.marks.is_empty() {
        return String::new();
    }
    serde_json::to_string(&receipt.marks).expect("marks serialize")
}

fn parse_delivered(text: &str) -> serde_json::Result<Receipt> {
    if text.is_empty() {
        return Ok(Receipt::default());
    }
    Ok(Receipt { marks: serde_json::from_str::<Vec<LogMark>>(text)? })
}

/// CRC32 over the row. A cursor without a receipt hashes exactly as in format
/// version 1, so a migrated row stays valid; a receipt is hashed behind a byte no
/// key contains (and with its length), so a row with one never hashes like a row
/// without.
fn checksum(key: &str, committed: &Committed, delivered: &str) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(key.as_bytes());
    if delivered.is_empty() {
        hasher.update(&[0]);
    } else {
        hasher.update(&[1]);
        hasher.update(&(delivered.len() as u64).to_le_bytes());
        hasher.update(delivered.as_bytes());
    }
    hasher.update(&committed.generation.to_le_bytes());
    hasher.update(&committed.committed_at_micros.to_le_bytes());
    hasher.update(&committed.state);
    hasher.finalize()
}

fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(end: u64) -> Receipt {
        Receipt { marks: vec![LogMark { stream: "demo".into(), topic: "random".into(), end }] }
    }

    /// `PRAGMA synchronous` of a store's connection: 2 is FULL, 1 NORMAL.
    fn synchronous(store: &ConnectorStateFile) -> i64 {
        let held = store.inner.lock().unwrap();
        held.database.connection().query_row("PRAGMA synchronous", [], |row| row.get(0)).unwrap()
    }

    /// Frames in the write-ahead log not yet checkpointed (copied into the database),
    /// as a checkpoint that copies nothing (NOOP) reports them.
    fn unsynced_frames(store: &ConnectorStateFile) -> i64 {
        let held = store.inner.lock().unwrap();
        let (log, copied): (i64, i64) = held
            .database
            .connection()
            .query_row("PRAGMA wal_checkpoint(NOOP)", [], |row| Ok((row.get(1)?, row.get(2)?)))
            .unwrap();
        log - copied
    }

    #[tokio::test]
    async fn an_interval_durability_commits_without_fsync_and_syncs_at_most_that_often() {
        let dir = tempfile::tempdir().unwrap();
        let every = StateDir::new(dir.path()).open("every").unwrap();
        assert_eq!(synchronous(&every), 2, "every commit fsynced by default");

        let never_yet = StateDir::new(dir.path()).with_durability(Durability::Interval(Duration::from_secs(3600)));
        let store = never_yet.open("lazy").unwrap();
        assert_eq!(synchronous(&store), 1);
        for n in 1..=3u64 {
            store.commit(n.to_string().into_bytes(), receipt(n)).await.unwrap();
        }
        assert_eq!(store.load().await.unwrap().unwrap().generation, 3, "committed, if not synced");
        assert!(unsynced_frames(&store) > 0, "not checkpointed within the hour");
        drop(store);
        let reopened = never_yet.open("lazy").unwrap();
        assert_eq!(reopened.load().await.unwrap().unwrap().state, b"3", "closing put it on disk");

        let always = StateDir::new(dir.path()).with_durability(Durability::Interval(Duration::ZERO));
        let store = always.open("eager").unwrap();
        store.commit(b"1".to_vec(), receipt(1)).await.unwrap();
        assert_eq!(unsynced_frames(&store), 0, "an interval of zero checkpoints at every commit");
    }

    #[tokio::test]
    async fn commits_survive_reopening_and_count_generations() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        {
            let store = states.open("alpha").unwrap();
            assert_eq!(store.load().await.unwrap(), None);
            assert_eq!(store.commit(b"one".to_vec(), receipt(10)).await.unwrap().generation, 1);
            assert_eq!(store.commit(b"two".to_vec(), receipt(20)).await.unwrap().generation, 2);
        }
        let lineage = states.open("alpha").unwrap().lineage();
        let store = states.open("alpha").unwrap();
        assert_eq!(store.lineage(), lineage, "a file keeps its lineage");
        let committed = store.load().await.unwrap().unwrap();
        assert_eq!((committed.state.as_slice(), committed.generation), (&b"two"[..], 2));
        assert_eq!(committed.receipt, receipt(20), "the receipt is kept with its cursor");
        assert_eq!(states.read("alpha").unwrap(), Some(committed));
        assert_eq!(states.keys().unwrap(), ["alpha"]);
    }

    #[test]
    fn a_second_holder_is_refused_and_reset_needs_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        let held = states.open("beta").unwrap();
        let error = states.open("beta").err().unwrap();
        assert!(
            matches!(&error, StateError::Locked { holder, .. } if holder.contains(&std::process::id().to_string())),
            "{error}"
        );
        assert!(matches!(states.reset("beta"), Err(StateError::Locked { .. })));
        drop(held);
        let moved = states.reset("beta").unwrap();
        assert!(!moved.is_empty() && moved.iter().all(|p| p.exists()));
        assert_eq!(states.read("beta").unwrap(), None);
    }

    #[tokio::test]
    async fn a_damaged_cursor_or_receipt_is_reported_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        {
            let store = states.open("gamma").unwrap();
            store.commit(br#"{"next_seq":40}"#.to_vec(), receipt(2860)).await.unwrap();
        }
        let committed = states.read("gamma").unwrap();
        // Damage the stored row behind the checksum's back, one column at a time.
        for (column, value) in [
            ("state", rusqlite::types::Value::Blob(br#"{"next_seq":99}"#.to_vec())),
            ("delivered", rusqlite::types::Value::Text(r#"[{"stream":"demo","topic":"random","end":1040}]"#.into())),
            ("delivered", rusqlite::types::Value::Text(String::new())),
        ] {
            let connection = Connection::open(states.file_of("gamma")).unwrap();
            let original: rusqlite::types::Value =
                connection.query_row(&format!("SELECT {column} FROM cursor"), [], |r| r.get(0)).unwrap();
            connection.execute(&format!("UPDATE cursor SET {column} = ?1"), [&value]).unwrap();
            let error = states.open("gamma").err().unwrap();
            assert!(matches!(&error, StateError::Corrupt { detail, .. } if detail.contains("checksum")), "{error}");
            assert!(matches!(states.read("gamma"), Err(StateError::Corrupt { .. })));
            connection.execute(&format!("UPDATE cursor SET {column} = ?1"), [&original]).unwrap();
        }
        assert_eq!(states.read("gamma").unwrap(), committed, "undamaged, it reads as committed");
    }

    #[test]
    fn a_state_file_of_another_connector_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async { states.open("one").unwrap().commit(b"x".to_vec(), Receipt::default()).await.unwrap() });
        std::fs::copy(states.file_of("one"), states.file_of("two")).unwrap();
        let error = states.open("two").err().unwrap();
        assert!(error.to_string().contains("connector `one`"), "{error}");
    }

    /// A state file as ferry wrote it before receipts (format version 1).
    fn write_version_1(path: &Path, state: &[u8], checksum: u32) {
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
            .execute("INSERT INTO cursor VALUES ('legacy', 7, 1700000000000000, ?1, ?2)", params![state, checksum])
            .unwrap();
    }

    fn user_version(path: &Path) -> i64 {
        Connection::open(path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
    }

    #[tokio::test]
    async fn a_version_1_file_is_read_as_it_is_migrated_when_run_and_keeps_its_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        // The CRC32 ferry 0.1 (format 1) stored for this row.
        write_version_1(&states.file_of("legacy"), br#"{"next_seq":70}"#, 0x5abc_2d20);
        let expected = Committed {
            state: br#"{"next_seq":70}"#.to_vec(),
            generation: 7,
            committed_at_micros: 1_700_000_000_000_000,
            receipt: Receipt::default(),
        };

        assert_eq!(states.read("legacy").unwrap(), Some(expected.clone()));
        assert_eq!(user_version(&states.file_of("legacy")), 1, "reading does not migrate");

        let store = states.open("legacy").unwrap();
        assert_eq!(user_version(&states.file_of("legacy")), 3, "running migrates");
        assert_ne!(store.lineage(), 0, "and draws the file's lineage");
        assert_eq!(store.load().await.unwrap(), Some(expected));
        let next = store.commit(br#"{"next_seq":80}"#.to_vec(), receipt(80)).await.unwrap();
        assert_eq!((next.generation, &next.receipt), (8, &receipt(80)));
        drop(store);
        assert_eq!(states.read("legacy").unwrap(), Some(next));
    }

    #[test]
    fn a_damaged_version_1_row_is_still_corrupt_after_migration() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        write_version_1(&states.file_of("legacy"), br#"{"next_seq":90}"#, 0x5abc_2d20);
        for _ in 0..2 {
            let error = states.open("legacy").err().unwrap();
            assert!(matches!(&error, StateError::Corrupt { detail, .. } if detail.contains("checksum")), "{error}");
        }
    }

    #[tokio::test]
    async fn a_state_file_deleted_while_held_fails_the_commit_and_is_not_recreated() {
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
            assert!(error.to_string().contains("delta.sqlite"), "{error}");
        }
        assert!(!states.file_of("delta").exists());
    }
}
