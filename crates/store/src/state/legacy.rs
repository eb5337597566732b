//! The per-connector state files of an older ferry, `<key>.sqlite`: read as they are
//! (by `ferry state show` and the API), and taken into the state directory's cursor
//! database when the connector is first run by this ferry, then put aside as
//! `<key>.sqlite.imported-<time>` (kept, never deleted).
//!
//! Their formats: version 1 held the cursor, version 2 added the receipt
//! (`delivered`), version 3 the lineage.

use std::path::{Path, PathBuf};

use rusqlite::OptionalExtension;

use super::StateError;
use super::database::{Imported, StoredRow, cursor_table};
use crate::sqlite::{self, Access, Format, Migration, StoreError};

const FORMAT: Format = Format {
    what: "state database",
    schema: concat!(
        cursor_table!(),
        "CREATE TABLE lineage (id BLOB NOT NULL); INSERT INTO lineage VALUES (randomblob(16));"
    ),
    version: 3,
    migrations: &[
        Migration { from: 1, sql: "ALTER TABLE cursor ADD COLUMN delivered TEXT NOT NULL DEFAULT ''" },
        Migration {
            from: 2,
            sql: "CREATE TABLE lineage (id BLOB NOT NULL); INSERT INTO lineage VALUES (randomblob(16))",
        },
    ],
};

/// Connector `key`'s file of an older ferry in `dir`.
pub fn file_of(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.sqlite"))
}

/// Whether `key` has such a file in `dir`.
pub fn exists(dir: &Path, key: &str) -> bool {
    std::fs::symlink_metadata(file_of(dir, key)).is_ok()
}

/// Keys with such a file in `dir`.
pub fn keys(dir: &Path) -> Result<Vec<String>, StateError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StateError::Io(format!("{}: {}", dir.display(), sqlite::os_reason(&e)))),
    };
    Ok(entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".sqlite").map(str::to_string))
        .collect())
}

/// What `key`'s file in `dir` holds, read as it is (an older format is not migrated).
pub fn read(dir: &Path, key: &str) -> Result<Imported, StoreError> {
    let path = file_of(dir, key);
    let database = sqlite::open_existing(&path, &FORMAT, Access::Read)?;
    let corrupt = |detail: String| StoreError::Corrupt { path: path.clone(), detail };
    // A version 1 file has no receipts.
    let delivered = if database.version() >= 2 { "delivered" } else { "''" };
    let rows: rusqlite::Result<Vec<StoredRow>> = database
        .connection()
        .prepare(&format!("SELECT connector, generation, committed_at, state, checksum, {delivered} FROM cursor"))
        .and_then(|mut statement| statement.query_map([], StoredRow::from_row)?.collect());
    let mut rows = rows.map_err(|e| database.error("cannot read the cursor", e))?;
    let committed = match rows.len() {
        0 => None,
        1 => Some(rows.remove(0).verified(key, corrupt)?),
        more => return Err(corrupt(format!("{more} cursors in one connector's file"))),
    };
    let lineage = match database.version() >= 3 {
        false => None,
        true => {
            let id: Option<Vec<u8>> = database
                .connection()
                .query_row("SELECT id FROM lineage", [], |row| row.get(0))
                .optional()
                .map_err(|e| database.error("cannot read the lineage", e))?;
            id.and_then(|id| <[u8; 16]>::try_from(id.as_slice()).ok()).map(u128::from_be_bytes)
        }
    };
    Ok(Imported { committed, lineage })
}

/// Rename `key`'s file in `dir` (and its write-ahead log and shared memory) with
/// `suffix` appended; returns the new names.
pub fn put_aside(dir: &Path, key: &str, suffix: &str) -> Result<Vec<PathBuf>, StateError> {
    let path = file_of(dir, key);
    let mut moved = Vec::new();
    let [wal, shm] = sqlite::companion_files(&path);
    for file in [path, wal, shm] {
        if std::fs::symlink_metadata(&file).is_ok() {
            let mut aside = file.clone().into_os_string();
            aside.push(suffix);
            let aside = PathBuf::from(aside);
            std::fs::rename(&file, &aside).map_err(|e| {
                StateError::Io(format!("{}: cannot move it aside: {}", file.display(), sqlite::os_reason(&e)))
            })?;
            moved.push(aside);
        }
    }
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(moved)
}
