//! The cursor database of a state directory, `cursors.db`: one row per connector
//! holding its committed cursor, one holding its lineage, and the rows `ferry state
//! reset` put aside.
//!
//! One database for every connector of a directory, rather than a file each, because
//! a file each costs a file's worth of everything per connector: creating it (with
//! its fsyncs), opening and checking it at every start, its write-ahead log and shared
//! memory (three descriptors and a mapping), and an fsync of its own at every commit.
//! With one database a thousand connectors are opened by one check, and commits that
//! arrive together share one fsync (see [`super::committer`]).
//!
//! A row carries a CRC32 of its content (cursor and receipt), so a cursor damaged on
//! disk is reported as corrupt, for that connector alone, instead of being handed to
//! its guest.
//!
//! These are the SQL statements on it; who runs them, and when they reach the disk, is
//! the committer's business.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::Committed;
use crate::sqlite::{Database, Format, StoreError};
use ferry_engine::delivery::{LogMark, Receipt};

/// The name of the database in its state directory. It ends in neither `.sqlite` nor
/// `.lock`, so it is never taken for the file of a connector (see [`super::legacy`]).
pub const FILE_NAME: &str = "cursors.db";

/// The table of cursors, one row per connector: the same here as in the files of an
/// older ferry (see [`super::legacy`]), whose rows are taken in as they are.
macro_rules! cursor_table {
    () => {
        "CREATE TABLE cursor (
            connector TEXT PRIMARY KEY,
            generation INTEGER NOT NULL,
            committed_at INTEGER NOT NULL,
            state BLOB NOT NULL,
            checksum INTEGER NOT NULL,
            delivered TEXT NOT NULL DEFAULT ''
        );"
    };
}
pub(super) use cursor_table;

pub const FORMAT: Format = Format {
    what: "state database",
    schema: concat!(
        cursor_table!(),
        "
    CREATE TABLE lineage (connector TEXT PRIMARY KEY, id BLOB NOT NULL);
    CREATE TABLE reset (
        connector TEXT NOT NULL,
        reset_at INTEGER NOT NULL,
        lineage BLOB,
        generation INTEGER,
        committed_at INTEGER,
        state BLOB,
        checksum INTEGER,
        delivered TEXT
    )"
    ),
    version: 1,
    migrations: &[],
};

/// A cursor as a per-connector file of an older ferry kept it, to be taken into the
/// database as it is (its checksum still valid: see [`checksum`]).
#[derive(Debug, Clone)]
pub struct Imported {
    pub committed: Option<Committed>,
    /// The file's lineage, if its format had one.
    pub lineage: Option<u128>,
}

/// The lineage of `key`, drawn (or taken from `imported`) and stored if it has none
/// yet, with the imported cursor. Returns the lineage, and whether this stored it.
pub fn take(transaction: &Transaction, key: &str, imported: Option<&Imported>) -> rusqlite::Result<(u128, bool)> {
    if let Some(lineage) = lineage_of(transaction, key)? {
        return Ok((lineage, false));
    }
    let lineage = imported.and_then(|i| i.lineage).unwrap_or_else(|| fastrand::u128(1..));
    transaction.execute("INSERT INTO lineage (connector, id) VALUES (?1, ?2)", params![key, &lineage.to_be_bytes()])?;
    if let Some(committed) = imported.and_then(|i| i.committed.as_ref()) {
        put_row(transaction, key, committed)?;
    }
    Ok((lineage, true))
}

/// `key`'s lineage and cursor as they are, to be taken into another database
/// (checked); `None` when it has neither.
pub fn export(database: &Database, key: &str) -> Result<Option<Imported>, StoreError> {
    let lineage = lineage_of(database.connection(), key).map_err(|e| database.error("cannot read the lineage", e))?;
    let committed = read(database, key)?;
    Ok((lineage.is_some() || committed.is_some()).then_some(Imported { committed, lineage }))
}

/// `key`'s lineage. One that is not 16 bytes was damaged on disk: an error (the
/// state is corrupt, reported for this connector alone), never a stand-in value that
/// a damaged cursor kept elsewhere might match.
fn lineage_of(connection: &Connection, key: &str) -> rusqlite::Result<Option<u128>> {
    let id: Option<Vec<u8>> =
        connection.query_row("SELECT id FROM lineage WHERE connector = ?1", [key], |row| row.get(0)).optional()?;
    id.map(|id| match <[u8; 16]>::try_from(id.as_slice()) {
        Ok(bytes) => Ok(u128::from_be_bytes(bytes)),
        Err(_) => Err(rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Blob,
            format!("the lineage of connector `{key}` is {} bytes, not 16: it was damaged on disk", id.len()).into(),
        )),
    })
    .transpose()
}

/// Replace `key`'s cursor with the next generation.
pub fn commit(transaction: &Transaction, key: &str, state: Vec<u8>, receipt: Receipt) -> rusqlite::Result<Committed> {
    // Statements cached on the connection: a commit does not parse its SQL again.
    let previous: Option<u64> = transaction
        .prepare_cached("SELECT generation FROM cursor WHERE connector = ?1")?
        .query_row([key], |row| row.get(0))
        .optional()?;
    let committed =
        Committed { state, generation: previous.unwrap_or(0) + 1, committed_at_micros: now_micros(), receipt };
    put_row(transaction, key, &committed)?;
    Ok(committed)
}

/// Make `committed` `key`'s cursor, generation and all.
pub fn put_row(transaction: &Transaction, key: &str, committed: &Committed) -> rusqlite::Result<()> {
    let delivered = delivered_text(&committed.receipt);
    let values = params![
        key,
        committed.generation,
        committed.committed_at_micros,
        committed.state,
        delivered,
        checksum(key, committed, &delivered)
    ];
    // The row updated in place: one page written. (`INSERT OR REPLACE` deletes the
    // row and inserts it anew, touching its index too: twice the pages, a sizeable
    // share of a small batch's commit.)
    let updated = transaction
        .prepare_cached(
            "UPDATE cursor SET generation = ?2, committed_at = ?3, state = ?4, delivered = ?5, checksum = ?6
             WHERE connector = ?1",
        )?
        .execute(values)?;
    if updated == 0 {
        transaction
            .prepare_cached(
                "INSERT INTO cursor (connector, generation, committed_at, state, delivered, checksum)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(values)?;
    }
    Ok(())
}

/// Put `key`'s cursor and lineage aside in the `reset` table: it starts from scratch
/// (with a new lineage) next time. Returns whether there was anything to put aside.
pub fn reset(transaction: &Transaction, key: &str) -> rusqlite::Result<bool> {
    // Rows counted as they are, damaged or not: a reset is how a damaged one is put aside.
    let rows_in = |table: &str| {
        let count = format!("SELECT count(*) FROM {table} WHERE connector = ?1");
        transaction.query_row(&count, [key], |r| r.get::<_, i64>(0))
    };
    let had = rows_in("lineage")? + rows_in("cursor")? > 0;
    if !had {
        return Ok(false);
    }
    transaction.execute(
        "INSERT INTO reset (connector, reset_at, lineage, generation, committed_at, state, checksum, delivered)
         SELECT ?1, ?2, (SELECT id FROM lineage WHERE connector = ?1),
                c.generation, c.committed_at, c.state, c.checksum, c.delivered
         FROM (SELECT 1) LEFT JOIN cursor c ON c.connector = ?1",
        params![key, now_micros()],
    )?;
    transaction.execute("DELETE FROM cursor WHERE connector = ?1", [key])?;
    transaction.execute("DELETE FROM lineage WHERE connector = ?1", [key])?;
    Ok(true)
}

/// Connectors with a lineage or a cursor here.
pub fn keys(connection: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut statement =
        connection.prepare("SELECT connector FROM lineage UNION SELECT connector FROM cursor ORDER BY 1")?;
    statement.query_map([], |row| row.get(0))?.collect()
}

/// The cursor row as stored, before its checksum is checked.
pub struct StoredRow {
    pub connector: String,
    /// Without its receipt: that is checked as the text it is stored as.
    pub committed: Committed,
    pub delivered: String,
    pub checksum: u32,
}

impl StoredRow {
    /// The row read by `statement`'s columns `connector, generation, committed_at,
    /// state, checksum, delivered`.
    pub fn from_row(row: &rusqlite::Row) -> rusqlite::Result<StoredRow> {
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
    }

    /// The committed cursor, if its checksum holds; `corrupt` words what is wrong.
    pub fn verified(self, key: &str, corrupt: impl Fn(String) -> StoreError) -> Result<Committed, StoreError> {
        if self.connector != key {
            return Err(corrupt(format!("it holds the cursor of connector `{}`, not `{key}`", self.connector)));
        }
        let (stored, actual) = (self.checksum, checksum(key, &self.committed, &self.delivered));
        if actual != stored {
            return Err(corrupt(format!(
                "the cursor of connector `{key}`: checksum mismatch (stored {stored:08x}, computed {actual:08x}): \
                 the cursor was damaged on disk"
            )));
        }
        let receipt = parse_delivered(&self.delivered)
            .map_err(|e| corrupt(format!("the cursor of connector `{key}`: unreadable receipt: {e}")))?;
        Ok(Committed { receipt, ..self.committed })
    }
}

/// `key`'s committed cursor, checked.
pub fn read(database: &Database, key: &str) -> Result<Option<Committed>, StoreError> {
    let row = database
        .connection()
        .query_row(
            "SELECT connector, generation, committed_at, state, checksum, delivered FROM cursor WHERE connector = ?1",
            [key],
            StoredRow::from_row,
        )
        .optional()
        .map_err(|e| database.error("cannot read the cursor", e))?;
    let corrupt = |detail: String| StoreError::Corrupt { path: database.path().to_path_buf(), detail };
    row.map(|row| row.verified(key, corrupt)).transpose()
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

/// CRC32 over the row. A cursor without a receipt hashes exactly as in the first
/// per-connector files, so a cursor imported from one stays valid; a receipt is
/// hashed behind a byte no key contains (and with its length), so a row with one
/// never hashes like a row without.
pub fn checksum(key: &str, committed: &Committed, delivered: &str) -> u32 {
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

pub fn now_micros() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}
