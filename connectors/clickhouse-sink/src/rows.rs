//! The body of an insert: one row a line, each a message's payload; in
//! `json_each_row` with `id_column`, the message's stable id added as the object's
//! first field (spliced in, the payload itself neither parsed nor re-written): 32
//! hex digits, or for a message without an id `stream/topic/partition/offset`, as
//! stable through a replay.

use ferry_guest::{SinkBatch, StoredMessage};

use crate::config::Config;

/// Why a message cannot be a row, said without asking the server.
pub fn unfit(config: &Config, message: &StoredMessage) -> Option<String> {
    if config.passthrough {
        return message.payload.contains(&b'\n').then(|| "the row holds a line break: one row a line".to_string());
    }
    let trimmed = message.payload.trim_ascii();
    let object = trimmed.first() == Some(&b'{') && trimmed.last() == Some(&b'}');
    (!object).then(|| "the payload is not a JSON object, which a JSONEachRow row is".to_string())
}

/// The rows of the messages of `batch` at `indices` (every one fit), one a line.
pub fn body(config: &Config, batch: &SinkBatch, indices: &[usize]) -> Vec<u8> {
    let mut body = Vec::new();
    for message in indices.iter().map(|&index| &batch.messages[index]) {
        let payload = message.payload.trim_ascii();
        match &config.id_column {
            Some(column) => {
                // `{` + `"column":"id"` + `,` unless the object is empty + the rest.
                let rest = payload[1..].trim_ascii_start();
                let id = match message.id {
                    0 => format!("{}/{}/{}/{}", batch.stream, batch.topic, batch.partition, message.offset),
                    id => format!("{id:032x}"),
                };
                let id = serde_json::Value::String(id);
                body.extend_from_slice(format!("{{\"{column}\":{id}").as_bytes());
                if rest != b"}" {
                    body.push(b',');
                }
                body.extend_from_slice(rest);
            }
            None => body.extend_from_slice(payload),
        }
        body.push(b'\n');
    }
    body
}
