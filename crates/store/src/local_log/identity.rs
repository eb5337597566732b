//! The identity of a topic file: a random id drawn when the file is created (or when
//! a writer first opens a file of an older ferry), kept in the file's `identity` row.
//!
//! Offsets are only meaningful in the file they were counted in: a topic file
//! deleted and created anew starts again at offset 0, and a file copied or moved in
//! from another topic counts another topic's records. A sink's committed position
//! keeps the identity of the file it read (in its receipt's mark), so that a
//! position is never applied to a file it was not taken in (see `positions.rs`).

use std::fmt;

use rusqlite::{Connection, OptionalExtension};

use crate::sqlite::{Database, StoreError};

/// The table, created with the topic (format version 3) or added to an older topic
/// by a writer, with its one row. A macro, so that the topic's schema can `concat!`
/// it.
macro_rules! table {
    () => {
        "CREATE TABLE identity (id BLOB NOT NULL);
        INSERT INTO identity (id) VALUES (randomblob(16))"
    };
}
pub(super) use table;

/// The format version from which a topic file has its identity.
const SINCE_VERSION: i64 = 3;

/// A topic file's identity, shown as 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogId(pub(super) u128);

impl fmt::Display for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl LogId {
    /// The identity as a mark keeps it (see `LogMark::log_id`).
    pub fn parse(text: &str) -> Option<LogId> {
        (text.len() == 32).then(|| u128::from_str_radix(text, 16).ok()).flatten().map(LogId)
    }
}

/// The identity of the topic file open in `database`; `None` for a file of an older
/// format that no writer has opened since (it has none yet).
pub fn of(database: &Database) -> Result<Option<LogId>, StoreError> {
    if database.version() < SINCE_VERSION {
        return Ok(None);
    }
    read(database.connection()).map_err(|e| database.error("cannot read the topic file's identity", e))
}

fn read(connection: &Connection) -> rusqlite::Result<Option<LogId>> {
    let id: Option<Vec<u8>> =
        connection.query_row("SELECT id FROM identity LIMIT 1", [], |row| row.get(0)).optional()?;
    id.map(|id| match <[u8; 16]>::try_from(id.as_slice()) {
        Ok(bytes) => Ok(LogId(u128::from_be_bytes(bytes))),
        Err(_) => Err(rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Blob,
            format!("the topic file's identity is {} bytes, not 16: it was damaged on disk", id.len()).into(),
        )),
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local_log::{FORMAT, LocalLog};
    use crate::sqlite::{self, Access};

    fn read_only(path: &std::path::Path) -> Database {
        sqlite::open_existing(path, &FORMAT, Access::Read).unwrap()
    }

    #[test]
    fn each_topic_file_has_an_identity_of_its_own_which_reads_back_as_hex() {
        let dir = tempfile::tempdir().unwrap();
        let created = |topic: &str| {
            let database = sqlite::open_or_create(&LocalLog::topic_file(dir.path(), "s", topic), &FORMAT).unwrap();
            of(&database).unwrap().expect("a new file has an identity")
        };
        let (a, b) = (created("a"), created("b"));
        assert_ne!(a, b, "drawn at random for each file");
        assert_eq!(LogId::parse(&a.to_string()), Some(a));
        assert_eq!(a.to_string().len(), 32);
        assert_eq!(LogId::parse("not hex"), None);
    }

    #[test]
    fn a_file_of_an_older_format_gets_an_identity_from_its_first_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = LocalLog::topic_file(dir.path(), "s", "t");
        let older = sqlite::Format { version: 2, schema: "CREATE TABLE records (x INTEGER)", ..FORMAT };
        drop(sqlite::open_or_create(&path, &older).unwrap());
        assert_eq!(of(&read_only(&path)).unwrap(), None, "a reader leaves it as it is");
        let writer = sqlite::open_or_create(&path, &FORMAT).unwrap();
        let id = of(&writer).unwrap().expect("migrated, it has one");
        assert_eq!(of(&read_only(&path)).unwrap(), Some(id), "kept");
    }
}
