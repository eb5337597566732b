//! How a message becomes a row: the default layout (here: one row per message, and
//! the statements that create the table and insert a message into it), or columns
//! mapped by the operator (`mapped.rs`). Values are bound as parameters, never
//! spliced in.

use ferry_guest::bindings::iggy::connector::postgres::{Statement, Value};
use ferry_guest::{SinkBatch, StoredMessage, headers_json};

use crate::iggy::IggyLayout;
use crate::mapped::MappedLayout;
use crate::message::{is_jsonb, origin_timestamp, row_id};

/// The table's layout: the default one, or mapped columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    Default(DefaultLayout),
    Mapped(MappedLayout),
    Iggy(IggyLayout),
}

impl Layout {
    /// The insert of `message`, a message of `batch`; an error says why the message
    /// can never be written (it is rejected, not retried).
    pub fn insert(&self, batch: &SinkBatch, message: &StoredMessage) -> Result<Statement, String> {
        match self {
            Layout::Default(layout) => layout.insert(batch, message),
            Layout::Mapped(layout) => layout.insert(batch, message),
            Layout::Iggy(layout) => layout.insert(batch, message),
        }
    }

    /// What the table must be like for the inserts to work, for the hint of a
    /// refusal that is about the table rather than a row.
    pub fn expected(&self) -> String {
        match self {
            Layout::Default(_) => "with the default layout".to_string(),
            Layout::Mapped(layout) => layout.expected(),
            Layout::Iggy(_) => {
                "with Iggy's layout (id DECIMAL(39, 0) PRIMARY KEY, iggy_... columns, payload)".to_string()
            }
        }
    }
}

/// The default layout's statements for one (quoted) table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultLayout {
    create: String,
    insert: String,
}

impl DefaultLayout {
    pub fn new(quoted_table: &str) -> DefaultLayout {
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {quoted_table} (\"id\" text PRIMARY KEY, \"payload\" jsonb, \
             \"payload_bytes\" bytea, \"headers\" jsonb NOT NULL, \"stream\" text NOT NULL, \"topic\" text NOT NULL, \
             \"partition\" int8 NOT NULL, \"offset\" int8 NOT NULL, \"origin_timestamp\" timestamptz)"
        );
        // A message written before (a replay after a crash or a retry) has its row
        // already: the insert does nothing, and the batch is acknowledged all the same.
        let insert = format!(
            "INSERT INTO {quoted_table} (\"id\", \"payload\", \"payload_bytes\", \"headers\", \"stream\", \"topic\", \
             \"partition\", \"offset\", \"origin_timestamp\") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (\"id\") DO NOTHING"
        );
        DefaultLayout { create, insert }
    }

    /// `CREATE TABLE IF NOT EXISTS` with the default layout.
    pub fn create_table(&self) -> Statement {
        Statement { sql: self.create.clone(), params: Vec::new() }
    }

    /// The insert of `message`, a message of `batch`; an error (a value PostgreSQL
    /// cannot hold) says why the message can never be written.
    pub fn insert(&self, batch: &SinkBatch, message: &StoredMessage) -> Result<Statement, String> {
        let (payload, payload_bytes) = payload_values(&message.payload);
        let offset = i64::try_from(message.offset)
            .map_err(|_| format!("offset {} does not fit the int8 column `offset`", message.offset))?;
        let origin_timestamp = origin_timestamp(message, "origin_timestamp")?;
        let params = vec![
            Value::Text(row_id(batch, message)),
            payload,
            payload_bytes,
            Value::Json(headers_json(&message.headers).to_string()),
            Value::Text(batch.stream.clone()),
            Value::Text(batch.topic.clone()),
            Value::Int(i64::from(batch.partition)),
            Value::Int(offset),
            origin_timestamp,
        ];
        Ok(Statement { sql: self.insert.clone(), params })
    }
}

/// `(payload, payload_bytes)`: the JSON document, or the bytes when the payload is
/// not one `jsonb` takes.
fn payload_values(payload: &[u8]) -> (Value, Value) {
    match std::str::from_utf8(payload) {
        Ok(text) if is_jsonb(text) => (Value::Json(text.to_string()), Value::Null),
        _ => (Value::Null, Value::Bytes(payload.to_vec())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::tests::{batch, message};

    #[test]
    fn the_statements_name_the_quoted_table_and_skip_ids_already_written() {
        let layout = DefaultLayout::new(r#""audit"."Events""#);
        assert!(
            layout
                .create_table()
                .sql
                .starts_with(r#"CREATE TABLE IF NOT EXISTS "audit"."Events" ("id" text PRIMARY KEY"#)
        );
        let insert = layout.insert(&batch(), &message(1, b"{}")).unwrap();
        assert!(insert.sql.starts_with(r#"INSERT INTO "audit"."Events" ("id", "payload""#), "{}", insert.sql);
        assert!(insert.sql.ends_with(r#"ON CONFLICT ("id") DO NOTHING"#), "{}", insert.sql);
    }

    #[test]
    fn a_json_payload_is_jsonb_and_every_column_has_its_value() {
        let id = u128::MAX;
        let insert = DefaultLayout::new("\"t\"").insert(&batch(), &message(id, br#"{"total": 12.5}"#)).unwrap();
        assert_eq!(
            insert.params,
            [
                Value::Text("340282366920938463463374607431768211455".into()),
                Value::Json(r#"{"total": 12.5}"#.into()),
                Value::Null,
                Value::Json(r#"{"kind":{"string":"order"},"n":{"uint64":5}}"#.into()),
                Value::Text("app".into()),
                Value::Text("orders".into()),
                Value::Int(3),
                Value::Int(41),
                Value::Timestamp(1_600_000_000_000_000),
            ]
        );
    }

    #[test]
    fn a_payload_jsonb_would_refuse_is_kept_as_bytes() {
        for payload in [&b"not json"[..], b"", b"{\"a\": 1", &[0xff, 0xfe], br#""a\u0000b""#, b"1e400"] {
            let insert = DefaultLayout::new("\"t\"").insert(&batch(), &message(1, payload)).unwrap();
            assert_eq!(insert.params[1], Value::Null, "{payload:?}");
            assert_eq!(insert.params[2], Value::Bytes(payload.to_vec()), "{payload:?}");
        }
        for payload in [&b"42"[..], b"\"text\"", b" [1, null] ", b"null"] {
            let insert = DefaultLayout::new("\"t\"").insert(&batch(), &message(1, payload)).unwrap();
            assert_eq!(insert.params[1], Value::Json(String::from_utf8(payload.to_vec()).unwrap()), "{payload:?}");
            assert_eq!(insert.params[2], Value::Null);
        }
    }

    #[test]
    fn a_message_without_an_id_is_keyed_by_where_it_is_stored() {
        assert_eq!(row_id(&batch(), &message(0, b"x")), "app/orders/3/41");
        assert_eq!(row_id(&batch(), &message(7, b"x")), "7");
    }

    #[test]
    fn values_postgres_cannot_hold_are_explained() {
        let mut far = message(1, b"x");
        far.offset = u64::MAX;
        assert!(DefaultLayout::new("\"t\"").insert(&batch(), &far).unwrap_err().contains("offset"));
        let mut late = message(1, b"x");
        late.origin_timestamp = Some(u64::MAX);
        assert!(DefaultLayout::new("\"t\"").insert(&batch(), &late).unwrap_err().contains("origin_timestamp"));
        late.origin_timestamp = None;
        assert_eq!(DefaultLayout::new("\"t\"").insert(&batch(), &late).unwrap().params[8], Value::Null);
    }
}
