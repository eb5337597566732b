//! One batch, one transaction, and what becomes of the batch when the server
//! refuses part of it.
//!
//! A refusal that is permanent and about the data (SQLSTATE class 22, data exception,
//! or 23, integrity constraint violation) with the index of the statement refused
//! names a message that can never be written: it is taken out and the transaction
//! run again with the others, until they commit; the ones taken out are rejected,
//! with the server's reason. Every other failure is not about one message: a lost
//! connection, a time-out or a passing refusal (a serialization failure) is worth
//! retrying as is; a permanent refusal of another class (a missing table or column, a
//! privilege) would refuse every message alike, so it is a retry too, which the
//! operator sees in the log and fixes, rather than a whole stream dead-lettered.

use ferry_guest::bindings::iggy::connector::postgres::{Error as PgError, Refusal};
use ferry_guest::sql::describe;
use ferry_guest::{SinkBatch, Written};

use crate::PostgresSink;
use crate::db::Database;

/// Write `batch` and say what became of it.
pub fn write<D: Database>(sink: &PostgresSink<D>, batch: &SinkBatch) -> Written {
    let mut rejected: Vec<(usize, String)> = Vec::new();
    // The messages still to write: their index in the batch, and their inserts, kept
    // apart so that the transaction takes the inserts as they are (no copy a round).
    let mut pending = Vec::with_capacity(batch.messages.len());
    let mut statements = Vec::with_capacity(batch.messages.len());
    for (index, message) in batch.messages.iter().enumerate() {
        match sink.layout.insert(batch, message) {
            Ok(statement) => {
                pending.push(index);
                statements.push(statement);
            }
            Err(reason) => rejected.push((index, reason)),
        }
    }
    // Each round either commits or takes one message out, so this ends.
    while !statements.is_empty() {
        match sink.db.transaction(&statements) {
            Ok(_) => break,
            Err(PgError::Refused(refusal)) if is_about_the_row(&refusal) => {
                let Some(at) = refusal.statement.map(|s| s as usize).filter(|&s| s < statements.len()) else {
                    // Some message is poison and the server did not say which: the
                    // host splits the batch until it finds it.
                    return Written::unwritable(failed(sink, &PgError::Refused(refusal)));
                };
                statements.remove(at);
                rejected.push((pending.remove(at), format!("{} (SQLSTATE {})", refusal.message, refusal.code)));
            }
            Err(error) => return Written::retry(failed(sink, &error)),
        }
    }
    if rejected.is_empty() {
        return Written::Ack;
    }
    for (index, reason) in &rejected {
        ferry_guest::warn!(
            "postgres sink: the message at offset {} can never be written to `{}`: {reason}",
            batch.messages[*index].offset,
            sink.table
        );
    }
    Written::reject(rejected)
}

/// Whether the server refused the statement for its values, so that the same
/// message would be refused again and the others not.
fn is_about_the_row(refusal: &Refusal) -> bool {
    refusal.permanent && (refusal.code.starts_with("22") || refusal.code.starts_with("23"))
}

/// Why the batch was not written, for the operator's log.
fn failed<D>(sink: &PostgresSink<D>, error: &PgError) -> String {
    let hint = match error {
        PgError::NotGranted(_) => {
            format!("; add `{}` to the connector's grants.postgres and define [postgres.{0}]", sink.connection)
        }
        PgError::Refused(refusal) if refusal.permanent && !is_about_the_row(refusal) => {
            format!("; check that the table `{}` exists {} and may be written", sink.table, sink.layout.expected())
        }
        _ => String::new(),
    };
    format!("postgres `{}`: writing to `{}`: {}{hint}", sink.connection, sink.table, describe(error))
}
