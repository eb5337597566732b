//! The embedded store under both the state store and the local log: SQLite, in WAL
//! mode with `synchronous=FULL`, so that a committed transaction survives `kill -9`
//! and power loss, a half-written one is never read back, and other processes
//! (`ferry state show`, `ferry log read`) can read while `ferry run` writes.
//!
//! A database file is created whole or not at all (built under a temporary name,
//! then linked into place), so an existing file that is empty or not a database is
//! corruption to report, never a fresh start to assume.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// How long a writer waits for another process holding the write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a database file could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The file exists but is not an intact database of ours.
    #[error("{}: corrupt: {detail}", path.display())]
    Corrupt { path: PathBuf, detail: String },
    /// The file could not be read or written.
    #[error("{}: {detail}", path.display())]
    Io { path: PathBuf, detail: String },
}

fn io(path: &Path, detail: impl std::fmt::Display) -> StoreError {
    StoreError::Io { path: path.to_path_buf(), detail: detail.to_string() }
}

/// Open the database at `path`, creating it with `schema` (SQL) if it does not
/// exist, and check that it is intact and of format `version`.
pub fn open_or_create(path: &Path, schema: &str, version: i64) -> Result<Connection, StoreError> {
    if !path.exists() {
        create(path, schema, version)?;
    }
    open_existing(path, version)
}

/// Open the existing database at `path` and check it, creating nothing.
pub fn open_existing(path: &Path, version: i64) -> Result<Connection, StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt { path: path.to_path_buf(), detail };
    let metadata = std::fs::metadata(path).map_err(|e| io(path, e))?;
    if metadata.len() == 0 {
        return Err(corrupt("the file is empty (it was truncated, or not written by ferry)".into()));
    }
    let connection =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .map_err(|e| io(path, e))?;
    let found: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|e| corrupt(format!("not a database ferry can read ({e})")))?;
    if found != version {
        return Err(corrupt(format!("format version {found}, but this ferry reads version {version}")));
    }
    let check: String = connection
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .map_err(|e| corrupt(format!("integrity check failed ({e})")))?;
    if check != "ok" {
        return Err(corrupt(format!("integrity check failed: {check}")));
    }
    connection.busy_timeout(BUSY_TIMEOUT).map_err(|e| io(path, e))?;
    connection.pragma_update(None, "synchronous", "FULL").map_err(|e| io(path, e))?;
    Ok(connection)
}

fn create(path: &Path, schema: &str, version: i64) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io(dir, format!("cannot create the directory: {e}")))?;
    let temporary = path.with_extension(format!("creating-{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    {
        let connection = Connection::open(&temporary).map_err(|e| io(&temporary, e))?;
        let setup = format!("PRAGMA journal_mode = WAL; {schema}; PRAGMA user_version = {version};");
        connection.execute_batch(&setup).map_err(|e| io(&temporary, e))?;
        // Closing checkpoints the WAL into the file and removes it.
        connection.close().map_err(|(_, e)| io(&temporary, e))?;
    }
    std::fs::File::open(&temporary).and_then(|f| f.sync_all()).map_err(|e| io(&temporary, e))?;
    // A hard link never replaces: if another process created the file meanwhile, its
    // database (and whatever it already wrote) wins and ours is discarded.
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(path, format!("cannot create the database: {e}"))),
    }
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io(dir, e))?;
    Ok(())
}

/// The files SQLite keeps next to `path` (write-ahead log and shared memory).
pub fn companion_files(path: &Path) -> [PathBuf; 2] {
    let with = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [with("-wal"), with("-shm")]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = "CREATE TABLE t (x INTEGER)";

    #[test]
    fn creates_once_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/db.sqlite");
        let connection = open_or_create(&path, SCHEMA, 3).unwrap();
        connection.execute("INSERT INTO t VALUES (7)", []).unwrap();
        drop(connection);
        let connection = open_or_create(&path, SCHEMA, 3).unwrap();
        let x: i64 = connection.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(x, 7);
    }

    #[test]
    fn empty_garbage_and_wrong_version_are_corrupt_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.sqlite");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(open_or_create(&empty, SCHEMA, 1), Err(StoreError::Corrupt { .. })));
        assert_eq!(std::fs::read(&empty).unwrap(), b"", "an empty file must not be initialised");

        let garbage = dir.path().join("garbage.sqlite");
        let junk = vec![0x5a_u8; 8192];
        std::fs::write(&garbage, &junk).unwrap();
        let error = open_or_create(&garbage, SCHEMA, 1).unwrap_err();
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
        assert_eq!(std::fs::read(&garbage).unwrap(), junk);

        let other = dir.path().join("other.sqlite");
        drop(open_or_create(&other, SCHEMA, 1).unwrap());
        let error = open_existing(&other, 2).unwrap_err();
        assert!(error.to_string().contains("format version 1"), "{error}");
    }
}
