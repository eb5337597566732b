//! A source that reads the rows of a MySQL or MariaDB table in order, each as a JSON
//! message, through the connection the operator granted (`grants.mysql`).
//!
//! Rows are read in the order of a tracking column (an increasing id, or a timestamp
//! with a tie-breaker such as the primary key), `batch_size` at a time, with keyset
//! pagination: `WHERE tracking > ?` (with a tie-breaker,
//! `tracking >= ? AND (tracking > ? OR tie > ?)`) `ORDER BY tracking[, tie] LIMIT
//! batch_size`. The cursor the host commits is the last delivered row's values, so a
//! NACK or a crash reads the same rows again, as the same messages with the same ids.
//!
//! Each message is the row as a JSON object (see `rows.rs` for the mapping), with the
//! headers `table` and `primary_key`, and an id derived from the table and the primary
//! key: the same row always has the same id.
//!
//! `plugin_config`:
//!
//! | key                  | default         | meaning                                                    |
//! |----------------------|-----------------|------------------------------------------------------------|
//! | `connection`         | required        | the `[mysql.NAME]` granted to the connector                |
//! | `table`              | required        | `table` or `database.table`, taken literally (quoted by the connector) |
//! | `tracking_column`    | the primary key | the column that orders rows; new rows must come after old ones |
//! | `tie_breaker_column` | none            | orders rows with equal tracking values (use the primary key) |
//! | `primary_key`        | `"id"`          | identifies a row: ids, the `primary_key` header, `after_ack` |
//! | `batch_size`         | 100             | rows per batch, at most 10,000                             |
//! | `after_ack`          | none            | `{ delete = true }` or `{ mark_column = "processed" }`    |
//!
//! With `after_ack`, the rows of a batch are deleted, or their boolean mark column set
//! to true (and marked rows are not read), once the host acknowledges the batch, never
//! before and never after a NACK. The batch's primary keys travel in its cursor, so a
//! failed statement or a crash right after the ACK is made good before the next batch
//! is read.

mod config;
mod cursor;
mod rows;
mod sql;

use ferry_guest::bindings::iggy::connector::mysql::{Connection, Error as MysqlError, PackedRows, Statement};
use ferry_guest::mysql::describe;
use ferry_guest::{Batch, Error, Source};

use crate::config::Config;
use crate::cursor::Cursor;
use crate::rows::Reader;
use crate::sql::Sql;

struct MysqlSource {
    /// The `[mysql.NAME]` read, for errors.
    name: String,
    connection: Connection,
    sql: Sql,
    reader: Reader,
    table: String,
    /// The committed cursor whose `delivered` rows `after_ack` has dealt with, so that
    /// each acknowledged batch is deleted or marked once, not at every poll.
    settled: Option<Cursor>,
}

impl Source for MysqlSource {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        let sql = Sql::new(&config)?;
        // A cursor made with other settings is refused now rather than at every poll.
        sql.next_rows(cursor.after.as_ref())?;
        // Fails only when the name is not granted: the server is reached on first use.
        let connection = Connection::open(&config.connection)
            .map_err(|e| failed(&config.connection, "opening the connection", &e))?;
        ferry_guest::info!(
            "mysql source: reading `{}` by `{}`{} in batches of {}, after {}",
            config.table,
            config.tracking_column,
            config.tie_breaker_column.as_deref().map(|t| format!(", `{t}`")).unwrap_or_default(),
            config.batch_size,
            serde_json::to_string(cursor).unwrap_or_default()
        );
        Ok(MysqlSource {
            name: config.connection.clone(),
            connection,
            reader: Reader::new(&config),
            sql,
            table: config.table,
            settled: None,
        })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        // Rows of an acknowledged batch that `on_ack` could not delete or mark (or a
        // crash came first): finish that before reading on.
        if self.settled.as_ref() != Some(cursor) {
            self.after_ack(cursor)?;
        }
        let Statement { sql, params } = self.sql.next_rows(cursor.after.as_ref())?;
        let rows: PackedRows = self
            .connection
            .query_packed(&sql, &params)
            .map_err(|e| failed(&self.name, &format!("reading the rows of `{}`", self.table), &e))?;
        // An error (a missing column, a NULL key) fails the poll; the host logs it.
        self.reader.batch(&rows)
    }

    fn on_ack(&mut self, committed: &Cursor) {
        // Nobody else hears of this failure: say so, and make it good at the next poll.
        if let Err(error) = self.after_ack(committed) {
            ferry_guest::warn!("{error}; trying again before the next rows are read");
        }
    }
}

impl MysqlSource {
    /// Delete or mark the rows of the acknowledged batch that ends at `committed`.
    fn after_ack(&mut self, committed: &Cursor) -> Result<(), Error> {
        if let Some(Statement { sql, params }) = self.sql.after_ack(&committed.delivered) {
            let doing = format!("after_ack on the delivered rows of `{}`", self.table);
            let affected = self.connection.execute(&sql, &params).map_err(|e| failed(&self.name, &doing, &e))?;
            ferry_guest::debug!(
                "after_ack: {affected} of {} delivered rows of `{}`",
                committed.delivered.len(),
                self.table
            );
        }
        self.settled = Some(committed.clone());
        Ok(())
    }
}

/// The import's error as the connector's, saying what it was doing. It is returned,
/// not logged here: the host logs a failed poll with the guest's message, then backs
/// off and polls again (replacing a broken connection on its next use).
fn failed(name: &str, what: &str, error: &MysqlError) -> Error {
    Error::msg(format!("mysql `{name}`: {what}: {}", describe(error)))
}

ferry_guest::export_source!(MysqlSource);
