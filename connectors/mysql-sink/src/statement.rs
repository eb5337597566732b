//! The statements a batch becomes: multi-row `INSERT`s of the table's layout, each at
//! most [`ROWS_PER_STATEMENT`] rows (MySQL takes at most 65,535 placeholders), and the
//! `CREATE TABLE` of that layout.

use ferry_guest::bindings::iggy::connector::mysql::{Statement, Value};
use ferry_guest::{SinkBatch, headers_json};
use serde::Deserialize;

/// Rows in one `INSERT`.
pub const ROWS_PER_STATEMENT: usize = 2000;
const COLUMNS: &str = "id, stream, topic, partition_id, message_offset, origin_timestamp, headers, payload";

/// What a row of an id already in the table becomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Left as it is: a replay writes nothing.
    #[default]
    Insert,
    /// Replaced by the message's values.
    Upsert,
}

/// The `CREATE TABLE` of the layout, for `table` (quoted).
pub fn create_table(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (id DECIMAL(39,0) NOT NULL PRIMARY KEY, stream VARCHAR(255) NOT NULL, \
         topic VARCHAR(255) NOT NULL, partition_id INT UNSIGNED NOT NULL, message_offset BIGINT UNSIGNED NOT NULL, \
         origin_timestamp BIGINT UNSIGNED NULL, headers JSON NOT NULL, payload LONGBLOB NOT NULL)"
    )
}

/// The statements that write `batch` into `table` (quoted).
pub fn inserts(table: &str, mode: Mode, batch: &SinkBatch) -> Vec<Statement> {
    let conflict = match mode {
        Mode::Insert => "id = id".to_string(),
        Mode::Upsert => {
            COLUMNS.split(", ").skip(1).map(|c| format!("{c} = VALUES({c})")).collect::<Vec<_>>().join(", ")
        }
    };
    batch
        .messages
        .chunks(ROWS_PER_STATEMENT)
        .map(|messages| {
            let row = "(?, ?, ?, ?, ?, ?, ?, ?)";
            let rows = vec![row; messages.len()].join(", ");
            let sql = format!("INSERT INTO {table} ({COLUMNS}) VALUES {rows} ON DUPLICATE KEY UPDATE {conflict}");
            let mut params = Vec::with_capacity(messages.len() * 8);
            for message in messages {
                params.extend([
                    Value::Text(message.id.to_string()),
                    Value::Text(batch.stream.clone()),
                    Value::Text(batch.topic.clone()),
                    Value::Int(i64::from(batch.partition)),
                    Value::Uint(message.offset),
                    message.origin_timestamp.map_or(Value::Null, Value::Uint),
                    Value::Text(headers_json(&message.headers).to_string()),
                    Value::Bytes(message.payload.clone()),
                ]);
            }
            Statement { sql, params }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_guest::StoredMessage;

    #[test]
    fn a_batch_is_inserts_of_at_most_the_statement_s_rows() {
        let message = |offset| StoredMessage {
            offset,
            id: u128::MAX - offset as u128,
            timestamp: 0,
            origin_timestamp: None,
            headers: Vec::new(),
            payload: b"{}".to_vec(),
        };
        let batch = SinkBatch {
            stream: "s".into(),
            topic: "t".into(),
            partition: 1,
            messages: (0..2001).map(message).collect(),
        };
        let statements = inserts("`shop`.`orders`", Mode::Insert, &batch);
        assert_eq!(statements.len(), 2);
        assert_eq!(statements[0].params.len(), 2000 * 8);
        assert_eq!(statements[1].params.len(), 8);
        assert!(statements[0].sql.starts_with("INSERT INTO `shop`.`orders` (id, stream"));
        assert!(statements[0].sql.ends_with("ON DUPLICATE KEY UPDATE id = id"));
        assert_eq!(statements[0].params[0], Value::Text(u128::MAX.to_string()));
        let upsert = inserts("`orders`", Mode::Upsert, &batch);
        assert!(
            upsert[0].sql.ends_with("payload = VALUES(payload)") && upsert[0].sql.contains("stream = VALUES(stream)")
        );
    }
}
