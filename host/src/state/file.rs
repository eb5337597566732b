//! The state directory: `<key>.sqlite` holds a connector's committed cursor and
//! `<key>.lock` is held (an advisory lock) by the process running that connector.
//!
//! The row carries a CRC32 of its content, so a cursor damaged on disk is reported
//! as corrupt instead of being handed to the guest.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{Committed, CursorStore, StateError};
use crate::sqlite;

const FORMAT_VERSION: i64 = 1;
const SCHEMA: &str = "CREATE TABLE cursor (
    connector TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    committed_at INTEGER NOT NULL,
    state BLOB NOT NULL,
    checksum INTEGER NOT NULL
)";

/// The directory holding every connector's state.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StateDir { path: path.into() }
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
    /// file and check it. Fails if another process holds it or the file is corrupt.
    pub fn open(&self, key: &str) -> Result<ConnectorStateFile, StateError> {
        let lock = self.lock(key)?;
        let path = self.file_of(key);
        let connection = sqlite::open_or_create(&path, SCHEMA, FORMAT_VERSION)?;
        let file = ConnectorStateFile {
            key: key.to_string(),
            path,
            inner: Arc::new(Mutex::new(connection)),
            _lock: Arc::new(lock),
        };
        // Read once now, so corruption stops the connector before it starts.
        file.read_blocking()?;
        Ok(file)
    }

    /// Read connector `key`'s committed cursor without taking it; works while a
    /// `ferry` process runs it.
    pub fn read(&self, key: &str) -> Result<Option<Committed>, StateError> {
        let path = self.file_of(key);
        if !path.exists() {
            return Ok(None);
        }
        let connection = sqlite::open_existing(&path, FORMAT_VERSION)?;
        read_row(&connection, key, &path)
    }

    /// Keys that have a state file here.
    pub fn keys(&self) -> Result<Vec<String>, StateError> {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StateError::Io(format!("{}: {e}", self.path.display()))),
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
            if file.exists() {
                let mut aside = file.clone().into_os_string();
                aside.push(&suffix);
                let aside = PathBuf::from(aside);
                std::fs::rename(&file, &aside)
                    .map_err(|e| StateError::Io(format!("{}: cannot move it aside: {e}", file.display())))?;
                moved.push(aside);
            }
        }
        if let Ok(dir) = File::open(&self.path) {
            let _ = dir.sync_all();
        }
        Ok(moved)
    }

    fn lock(&self, key: &str) -> Result<File, StateError> {
        std::fs::create_dir_all(&self.path)
            .map_err(|e| StateError::Io(format!("{}: cannot create the state directory: {e}", self.path.display())))?;
        let path = self.lock_of(key);
        let io = |e: std::io::Error| StateError::Io(format!("{}: {e}", path.display()));
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
    inner: Arc<Mutex<Connection>>,
    _lock: Arc<File>,
}

impl ConnectorStateFile {
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_blocking(&self) -> Result<Option<Committed>, StateError> {
        let connection = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        read_row(&connection, &self.key, &self.path)
    }

    fn commit_blocking(&self, state: Vec<u8>) -> Result<Committed, StateError> {
        let mut connection = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let io = |e: rusqlite::Error| StateError::Io(format!("{}: cannot save the cursor: {e}", self.path.display()));
        let transaction = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(io)?;
        let previous: Option<u64> = transaction
            .query_row("SELECT generation FROM cursor WHERE connector = ?1", [&self.key], |row| row.get(0))
            .optional()
            .map_err(io)?;
        let committed = Committed { state, generation: previous.unwrap_or(0) + 1, committed_at_micros: now_micros() };
        transaction
            .execute(
                "INSERT OR REPLACE INTO cursor (connector, generation, committed_at, state, checksum)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    self.key,
                    committed.generation,
                    committed.committed_at_micros,
                    committed.state,
                    checksum(&self.key, &committed)
                ],
            )
            .map_err(io)?;
        transaction.commit().map_err(io)?;
        Ok(committed)
    }
}

#[async_trait]
impl CursorStore for ConnectorStateFile {
    async fn load(&self) -> Result<Option<Committed>, StateError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.read_blocking())
            .await
            .map_err(|e| StateError::Io(format!("state read task failed: {e}")))?
    }

    async fn commit(&self, state: Vec<u8>) -> Result<Committed, StateError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.commit_blocking(state))
            .await
            .map_err(|e| StateError::Io(format!("state commit task failed: {e}")))?
    }
}

fn read_row(connection: &Connection, key: &str, path: &Path) -> Result<Option<Committed>, StateError> {
    let corrupt = |detail: String| StateError::Corrupt { path: path.display().to_string(), detail };
    let mut statement = connection
        .prepare("SELECT connector, generation, committed_at, state, checksum FROM cursor")
        .map_err(|e| corrupt(format!("cannot read the cursor table ({e})")))?;
    let rows: Vec<(String, u64, u64, Vec<u8>, u32)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)))
        .and_then(|rows| rows.collect())
        .map_err(|e| corrupt(format!("cannot read the cursor ({e})")))?;
    match rows.as_slice() {
        [] => Ok(None),
        [(connector, generation, committed_at, state, stored)] => {
            if connector != key {
                return Err(corrupt(format!("it holds the cursor of connector `{connector}`, not `{key}`")));
            }
            let committed =
                Committed { state: state.clone(), generation: *generation, committed_at_micros: *committed_at };
            let actual = checksum(key, &committed);
            if actual != *stored {
                return Err(corrupt(format!(
                    "checksum mismatch (stored {stored:08x}, computed {actual:08x}): the cursor was damaged on disk"
                )));
            }
            Ok(Some(committed))
        }
        more => Err(corrupt(format!("{} cursors in one connector's file", more.len()))),
    }
}

fn checksum(key: &str, committed: &Committed) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(key.as_bytes());
    hasher.update(&[0]);
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

    #[tokio::test]
    async fn commits_survive_reopening_and_count_generations() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        {
            let store = states.open("alpha").unwrap();
            assert_eq!(store.load().await.unwrap(), None);
            assert_eq!(store.commit(b"one".to_vec()).await.unwrap().generation, 1);
            assert_eq!(store.commit(b"two".to_vec()).await.unwrap().generation, 2);
        }
        let store = states.open("alpha").unwrap();
        let committed = store.load().await.unwrap().unwrap();
        assert_eq!((committed.state.as_slice(), committed.generation), (&b"two"[..], 2));
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
    async fn a_damaged_cursor_is_reported_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        {
            let store = states.open("gamma").unwrap();
            store.commit(br#"{"next_seq":40}"#.to_vec()).await.unwrap();
        }
        // Damage the stored cursor behind the checksum's back.
        let connection = Connection::open(states.file_of("gamma")).unwrap();
        connection.execute("UPDATE cursor SET state = ?1", [&br#"{"next_seq":99}"#[..]]).unwrap();
        drop(connection);
        let error = states.open("gamma").err().unwrap();
        assert!(matches!(&error, StateError::Corrupt { detail, .. } if detail.contains("checksum")), "{error}");
        assert!(matches!(states.read("gamma"), Err(StateError::Corrupt { .. })));
    }

    #[test]
    fn a_state_file_of_another_connector_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let states = StateDir::new(dir.path());
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async { states.open("one").unwrap().commit(b"x".to_vec()).await.unwrap() });
        std::fs::copy(states.file_of("one"), states.file_of("two")).unwrap();
        let error = states.open("two").err().unwrap();
        assert!(error.to_string().contains("connector `one`"), "{error}");
    }
}
