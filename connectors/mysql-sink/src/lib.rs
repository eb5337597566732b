//! A sink that writes every message as a row of a MySQL or MariaDB table, through a
//! connection the operator granted (`grants.mysql`), **exactly once by id**: the
//! table's primary key is the message's stable id, and a batch is one transaction.
//!
//! `plugin_config`:
//!
//! | key            | default  | meaning |
//! |----------------|----------|---------|
//! | `connection`   | required | the `[mysql.NAME]` granted to the connector |
//! | `table`        | required | the table written (`name` or `database.name`) |
//! | `mode`         | `insert` | `insert`: a row of an id already there is left as it is; `upsert`: it is replaced |
//! | `create_table` | false    | make the table (the layout below) if it is missing |
//!
//! The table: `id DECIMAL(39,0) PRIMARY KEY` (the id, all 128 bits), `stream`, `topic`
//! (`VARCHAR(255)`), `partition_id INT UNSIGNED`, `message_offset BIGINT UNSIGNED`,
//! `origin_timestamp BIGINT UNSIGNED NULL` (µs), `headers JSON` (as `headers_json`
//! writes them), `payload LONGBLOB`.
//!
//! A batch replayed (after a crash, a retry, a restart) writes nothing new: each row's
//! key is there already (`ON DUPLICATE KEY UPDATE id = id`), in `insert` mode left as
//! it was. A statement the server refuses for a row's data (too long, out of range, not
//! JSON) is the batch's `unwritable` answer: the host splits it until the row is alone,
//! and that message goes to the dead letters with the server's words; a connection
//! that fails is a retry.

mod statement;

use ferry_guest::bindings::iggy::connector::mysql::{Connection, Error as MysqlError};
use ferry_guest::mysql::{describe, quote_table};
use ferry_guest::{Error, Sink, SinkBatch, Written};
use serde::Deserialize;

use crate::statement::{Mode, create_table, inserts};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    connection: String,
    table: String,
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    create_table: bool,
}

struct MysqlSink {
    config: Config,
    /// `config.table`, quoted for the statements.
    table: String,
    connection: Connection,
}

impl Sink for MysqlSink {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        if config.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a connection in grants.mysql"));
        }
        let table = quote_table(&config.table).map_err(|e| e.context("plugin_config.table"))?;
        let said = |e: MysqlError| Error::msg(format!("mysql `{}`: {}", config.connection, describe(&e)));
        let connection = Connection::open(&config.connection).map_err(said)?;
        if config.create_table {
            connection.execute(&create_table(&table), &[]).map_err(said)?;
        }
        ferry_guest::info!("mysql sink: writing into {} ({:?} mode)", config.table, config.mode);
        Ok(MysqlSink { config, table, connection })
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let statements = inserts(&self.table, self.config.mode, batch);
        match self.connection.transaction(&statements) {
            Ok(_) => Ok(Written::Ack),
            Err(MysqlError::Refused(refusal)) if data_error(refusal.code) => Ok(Written::unwritable(format!(
                "the server refused a row: {} ({} {})",
                refusal.message, refusal.code, refusal.state
            ))),
            Err(error) => Ok(Written::retry(format!("mysql `{}`: {}", self.config.connection, describe(&error)))),
        }
    }
}

/// Whether the server's error `code` is about a row's values (so that row can never be
/// written), not about the table, the connection or a lock.
fn data_error(code: u16) -> bool {
    // 1048 null into NOT NULL, 1264 out of range, 1265 truncated, 1292 bad value,
    // 1366 bad string for the column, 1406 too long, 3140 invalid JSON, 4025 CHECK.
    matches!(code, 1048 | 1264 | 1265 | 1292 | 1366 | 1406 | 3140 | 4025)
}

ferry_guest::export_sink!(MysqlSink);
