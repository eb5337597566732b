//! A source that reads the rows of a PostgreSQL table in order, each as a JSON
//! message, through the connection the operator granted (`grants.postgres`).
//!
//! Rows are read in the order of a tracking column (an increasing id, or a
//! timestamp with a tie-breaker such as the primary key), `batch_size` at a time,
//! with keyset pagination: `WHERE (tracking, tie_breaker) > (last row's values)
//! ORDER BY tracking, tie_breaker LIMIT batch_size`. The cursor the host commits is
//! the last delivered row's values, so a NACK or a crash reads the same rows again,
//! as the same messages with the same ids.
//!
//! Each message is the row as a JSON object (see `record.rs` for the mapping), with
//! the headers `table` and `primary_key`, and an id derived from the table and the
//! primary key (`id.rs`): the same row always has the same id.
//!
//! `plugin_config`:
//!
//! | key                  | default            | meaning                                                          |
//! |----------------------|--------------------|------------------------------------------------------------------|
//! | `connection`         | required           | the `[postgres.NAME]` granted to the connector                   |
//! | `table`              | required           | `table` or `schema.table`, taken literally (quoted by the connector) |
//! | `query`              | `SELECT * FROM table` | what to read instead, a SELECT without parameters (the connector wraps it) |
//! | `tracking_column`    | the primary key    | the column that orders rows; new rows must come after old ones   |
//! | `tie_breaker_column` | none               | orders rows with equal tracking values (use the primary key)     |
//! | `primary_key`        | `"id"`             | identifies a row: ids, the `primary_key` header, `after_ack`     |
//! | `batch_size`         | 100                | rows per batch, at most 10,000                                   |
//! | `after_ack`          | none               | `{ "delete": true }` or `{ "mark_column": "processed" }`        |
//!
//! With Iggy's keys (`tables`, `tracking_column`, `initial_offset`, ...: a source
//! moved from Iggy's runtime), each row is the record Iggy's source makes of it
//! (`iggy.rs`).
//!
//! With `after_ack`, the rows of a batch are deleted, or their boolean mark column
//! set to true (and marked rows are not read), once the host acknowledges the batch,
//! never before and never after a NACK. The batch's primary keys travel in its
//! cursor, so a failed statement or a crash right after the ACK is made good before
//! the next batch is read.

mod config;
mod cursor;
mod db;
#[cfg(test)]
mod fake_db;
mod id;
mod iggy;
mod record;
mod rows;
mod sql;
mod timestamp;

use ferry_guest::{Batch, Error, Source};

use crate::config::Config;
use crate::cursor::Cursor;
use crate::db::{Database, Db};
use crate::rows::Reader;
use crate::sql::Sql;

/// The source, over the granted connection (`Db`) or, in tests, a fake.
struct PostgresSource<D = Db> {
    /// One per table read: one, or Iggy's several `tables`.
    tables: Vec<TableReader>,
    db: D,
    /// The committed cursor whose `delivered` rows `after_ack` has dealt with, so
    /// that each acknowledged batch is deleted or marked once, not at every poll.
    settled: Option<Cursor>,
    /// Log every batch read (Iggy's `verbose_logging`).
    verbose: bool,
}

/// What reads one table: its statements and how its rows become messages.
struct TableReader {
    table: String,
    sql: Sql,
    reader: Reader,
}

impl<D: Database> Source for PostgresSource<D> {
    type Config = Config;
    type Cursor = Cursor;

    fn open(config: Config, cursor: &Cursor) -> Result<Self, Error> {
        let mut tables = Vec::new();
        for table in config.tables() {
            let own = config.for_table(table);
            let sql = Sql::new(&own)?;
            tables.push(TableReader { table: table.clone(), reader: Reader::new(&own), sql });
        }
        let several = tables.len() > 1;
        for table in &tables {
            // A cursor made with other settings is refused now rather than at every poll.
            table.sql.next_rows(table_cursor(cursor, &table.table, several).after.as_ref())?;
        }
        let db = D::open(&config.connection)?;
        let names: Vec<&str> = config.tables().map(String::as_str).collect();
        ferry_guest::info!(
            "postgres source: reading `{}` by `{}`{} in batches of {}, after {}",
            names.join("`, `"),
            config.tracking_column,
            config.tie_breaker_column.as_deref().map(|t| format!(", `{t}`")).unwrap_or_default(),
            config.batch_size,
            serde_json::to_string(cursor).unwrap_or_default()
        );
        Ok(PostgresSource { tables, db, settled: None, verbose: config.verbose })
    }

    fn poll(&mut self, cursor: &Cursor) -> Result<Option<Batch<Cursor>>, Error> {
        // Rows of an acknowledged batch that `on_ack` could not delete or mark (or a
        // crash came first): finish that before reading on.
        if self.settled.as_ref() != Some(cursor) {
            self.after_ack(cursor)?;
        }
        let several = self.tables.len() > 1;
        let mut messages = Vec::new();
        let mut next = Cursor::default();
        for table in &self.tables {
            let own = table_cursor(cursor, &table.table, several);
            let statement = table.sql.next_rows(own.after.as_ref())?;
            let rows = self.db.query(&statement, &format!("reading the rows of `{}`", table.table))?;
            // An error (a missing column, a NULL key) fails the poll; the host logs it.
            let read = match table.reader.batch(&rows)? {
                Some(batch) => {
                    messages.extend(batch.messages);
                    batch.next
                }
                // Nothing new: where it was, its last rows settled above.
                None => Cursor { after: own.after, ..Cursor::default() },
            };
            if several {
                next.tables.insert(table.table.clone(), read);
            } else {
                next = read;
            }
        }
        if self.verbose {
            ferry_guest::info!("postgres source: read {} rows", messages.len());
        }
        Ok((!messages.is_empty()).then(|| Batch::new(messages, next)))
    }

    fn on_ack(&mut self, committed: &Cursor) {
        // Nobody else hears of this failure: say so, and make it good at the next poll.
        if let Err(error) = self.after_ack(committed) {
            ferry_guest::warn!("{error}; trying again before the next rows are read");
        }
    }
}

/// The cursor of `table` in `cursor`: the whole of it for one table, its entry in
/// `tables` for several.
fn table_cursor(cursor: &Cursor, table: &str, several: bool) -> Cursor {
    match several {
        true => cursor.tables.get(table).cloned().unwrap_or_default(),
        false => cursor.clone(),
    }
}

impl<D: Database> PostgresSource<D> {
    /// Delete or mark the rows of the acknowledged batch that ends at `committed`.
    fn after_ack(&mut self, committed: &Cursor) -> Result<(), Error> {
        let several = self.tables.len() > 1;
        for table in &self.tables {
            let delivered = table_cursor(committed, &table.table, several).delivered;
            if let Some(statement) = table.sql.after_ack(&delivered) {
                let doing = format!("after_ack on the delivered rows of `{}`", table.table);
                let affected = self.db.execute(&statement, &doing)?;
                ferry_guest::debug!("after_ack: {affected} of {} delivered rows of `{}`", delivered.len(), table.table);
            }
        }
        self.settled = Some(committed.clone());
        Ok(())
    }
}

ferry_guest::export_source!(PostgresSource);

#[cfg(test)]
mod tests;
