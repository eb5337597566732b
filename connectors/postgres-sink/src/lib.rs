//! A sink that writes every message as a row of a PostgreSQL table, through the
//! connection the operator granted (`grants.postgres`), exactly once by id.
//!
//! A batch is one transaction of one `INSERT ... ON CONFLICT ("id") DO NOTHING` per
//! message (`row.rs` has the layout), and is acknowledged only once that transaction
//! committed. A batch written again (after a retry, a crash, a restart) inserts
//! nothing new: its ids are already there. With `columns`, a message's metadata and
//! payload fields go into columns of the operator's own table instead (`mapped.rs`),
//! `ON CONFLICT (conflict_columns) DO NOTHING`, or `DO UPDATE` with `upsert`. With
//! Iggy's keys (`target_table`, ...: a sink moved from Iggy's runtime), the table is
//! the one Iggy's PostgreSQL sink writes (`iggy.rs`).
//!
//! `plugin_config` (`columns.rs` checks the mapping):
//!
//! | key                | default         | meaning                                                        |
//! |--------------------|-----------------|----------------------------------------------------------------|
//! | `connection`       | required        | the `[postgres.NAME]` granted to the connector                 |
//! | `table`            | required        | `table` or `schema.table`, taken literally (quoted by the connector) |
//! | `create_table`     | `false`         | create the table with the default layout on open, if missing (not with `columns`) |
//! | `columns`          | none            | `{ column = "source" }`: `@id`, `@stream`, `@topic`, `@partition`, `@offset`, `@origin_timestamp`, `@headers`, `@payload`, a payload field (`customer`) or a JSON pointer (`/details/items/0`) |
//! | `conflict_columns` | the `@id` columns | mapped columns a unique index covers: a message written again collides on them |
//! | `upsert`           | `false`         | on a collision, set the other mapped columns to the message's values |
//!
//! What becomes of a batch (`write.rs`): a message the server refuses for good
//! (a data or integrity error, SQLSTATE classes 22 and 23) is taken out and the rest
//! written again, then rejected to the dead-letter destination; anything else
//! (a lost connection, a time-out, a serialization failure, a missing table or
//! privilege, a connection not granted) is a retry of the whole batch.

mod columns;
mod config;
mod db;
#[cfg(test)]
mod fake_db;
mod iggy;
mod mapped;
mod message;
mod row;
mod write;

use ferry_guest::sql::describe;
use ferry_guest::{Error, Sink, SinkBatch, Written};

use crate::config::Config;
use crate::db::{Database, Db};
use crate::iggy::IggyLayout;
use crate::mapped::MappedLayout;
use crate::row::{DefaultLayout, Layout};

/// The sink, over the granted connection (`Db`) or, in tests, a fake.
struct PostgresSink<D = Db> {
    connection: String,
    table: String,
    layout: Layout,
    db: D,
    /// Log every batch (Iggy's `verbose_logging`).
    verbose: bool,
}

impl<D: Database> Sink for PostgresSink<D> {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        let what =
            |doing: &str, error| Error::msg(format!("postgres `{}`: {doing}: {}", config.connection, describe(&error)));
        let db = D::open(&config.connection).map_err(|e| what("opening the connection", e))?;
        let layout = match (config.mapping, config.iggy) {
            (Some(mapping), _) => Layout::Mapped(MappedLayout::new(&config.quoted_table, mapping)),
            (None, Some(columns)) => {
                let layout = IggyLayout::new(&config.quoted_table, columns);
                if config.create_table {
                    db.execute(&layout.create_table())
                        .map_err(|e| what(&format!("creating the table `{}`", config.table), e))?;
                }
                Layout::Iggy(layout)
            }
            (None, None) => {
                let layout = DefaultLayout::new(&config.quoted_table);
                if config.create_table {
                    db.execute(&layout.create_table())
                        .map_err(|e| what(&format!("creating the table `{}`", config.table), e))?;
                }
                Layout::Default(layout)
            }
        };
        ferry_guest::info!("postgres sink: writing to `{}` through `{}`", config.table, config.connection);
        Ok(PostgresSink { connection: config.connection, table: config.table, layout, db, verbose: config.verbose })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let written = write::write(self, batch);
        if self.verbose {
            ferry_guest::info!("postgres sink: {} messages to `{}`: {written:?}", batch.messages.len(), self.table);
        }
        Ok(written)
    }
}

ferry_guest::export_sink!(PostgresSink);

#[cfg(test)]
mod tests;
