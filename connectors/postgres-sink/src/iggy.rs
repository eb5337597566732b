//! Iggy's layout: the table Iggy's own PostgreSQL sink writes, for a sink moved from
//! Iggy's runtime with its `plugin_config` (`target_table`, `auto_create_table`,
//! `include_metadata`, `include_checksum`, `include_origin_timestamp`,
//! `payload_format`).
//!
//! The columns are Iggy's, in Iggy's order: `id DECIMAL(39, 0) PRIMARY KEY` (the
//! message id), with `include_metadata` `iggy_offset`, `iggy_timestamp`,
//! `iggy_stream`, `iggy_topic`, `iggy_partition_id`, with `include_checksum`
//! `iggy_checksum` (the Iggy server's checksum of the message, its 64 bits as a
//! BIGINT as Iggy's sink writes it; NULL for a message from the local log, which
//! keeps none), with `include_origin_timestamp` `iggy_origin_timestamp`, then
//! `payload` (`bytea`, `jsonb` or `text`) and `created_at`. One difference, on purpose: the insert is `ON CONFLICT (id) DO
//! NOTHING`, so a batch written again after a crash adds nothing (Iggy's fails on the
//! duplicate key and drops the batch).

use ferry_guest::bindings::iggy::connector::postgres::{Statement, Value};
use ferry_guest::{SinkBatch, StoredMessage};

use crate::message::is_jsonb;

/// How the payload is stored: Iggy's `payload_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadFormat {
    /// `bytea` (Iggy's default): the bytes as they are.
    Bytea,
    /// `json` or `jsonb`: a JSON document, stored as `jsonb`.
    Json,
    /// `text`: UTF-8 text.
    Text,
}

impl PayloadFormat {
    /// Iggy's names, in any case. Iggy's sink takes an unknown name for `bytea`;
    /// ferry refuses it, naming it.
    pub fn named(name: &str) -> Result<PayloadFormat, String> {
        match name.to_ascii_lowercase().as_str() {
            "bytea" => Ok(PayloadFormat::Bytea),
            "json" | "jsonb" => Ok(PayloadFormat::Json),
            "text" => Ok(PayloadFormat::Text),
            _ => Err(format!("{name:?} is none of \"bytea\", \"json\" (or \"jsonb\") and \"text\"")),
        }
    }

    fn sql_type(self) -> &'static str {
        match self {
            PayloadFormat::Bytea => "BYTEA",
            PayloadFormat::Json => "JSONB",
            PayloadFormat::Text => "TEXT",
        }
    }
}

/// Which of Iggy's optional columns the table has, and the payload's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Columns {
    pub metadata: bool,
    pub checksum: bool,
    pub origin_timestamp: bool,
    pub payload: PayloadFormat,
}

/// Iggy's layout's statements for one (quoted) table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IggyLayout {
    columns: Columns,
    create: String,
    insert: String,
}

impl IggyLayout {
    pub fn new(quoted_table: &str, columns: Columns) -> IggyLayout {
        let mut create = format!("CREATE TABLE IF NOT EXISTS {quoted_table} (id DECIMAL(39, 0) PRIMARY KEY");
        let mut names = String::from("id");
        if columns.metadata {
            create.push_str(
                ", iggy_offset BIGINT, iggy_timestamp TIMESTAMP WITH TIME ZONE, iggy_stream TEXT, iggy_topic TEXT, \
                 iggy_partition_id INTEGER",
            );
            names.push_str(", iggy_offset, iggy_timestamp, iggy_stream, iggy_topic, iggy_partition_id");
        }
        if columns.checksum {
            create.push_str(", iggy_checksum BIGINT");
            names.push_str(", iggy_checksum");
        }
        if columns.origin_timestamp {
            create.push_str(", iggy_origin_timestamp TIMESTAMP WITH TIME ZONE");
            names.push_str(", iggy_origin_timestamp");
        }
        create.push_str(&format!(
            ", payload {}, created_at TIMESTAMP WITH TIME ZONE DEFAULT NOW())",
            columns.payload.sql_type()
        ));
        names.push_str(", payload");
        let count = names.split(", ").count();
        let params: Vec<String> = (1..=count).map(|n| format!("${n}")).collect();
        // The id is bound as decimal text: a u128 fits no integer type PostgreSQL has.
        let insert = format!(
            "INSERT INTO {quoted_table} ({names}) VALUES ($1::numeric, {}) ON CONFLICT (id) DO NOTHING",
            params[1..].join(", ")
        );
        IggyLayout { columns, create, insert }
    }

    /// `CREATE TABLE IF NOT EXISTS`, as Iggy's sink creates it.
    pub fn create_table(&self) -> Statement {
        Statement { sql: self.create.clone(), params: Vec::new() }
    }

    /// The insert of `message`, a message of `batch`; an error says why the message
    /// can never be written.
    pub fn insert(&self, batch: &SinkBatch, message: &StoredMessage) -> Result<Statement, String> {
        // Asked of the host only for a table that has the column.
        let checksum = if self.columns.checksum { message.iggy_checksum() } else { None };
        self.insert_with_checksum(batch, message, checksum)
    }

    /// [`IggyLayout::insert`], with what the host said of the message's checksum.
    fn insert_with_checksum(
        &self,
        batch: &SinkBatch,
        message: &StoredMessage,
        checksum: Option<u64>,
    ) -> Result<Statement, String> {
        if message.id == 0 {
            return Err("the message has no id, and Iggy's layout keys each row by it (the id column)".into());
        }
        let mut params = vec![Value::Text(message.id.to_string())];
        if self.columns.metadata {
            let offset = i64::try_from(message.offset)
                .map_err(|_| format!("offset {} does not fit the BIGINT column iggy_offset", message.offset))?;
            params.extend([
                Value::Int(offset),
                timestamp(message.timestamp, "iggy_timestamp")?,
                Value::Text(batch.stream.clone()),
                Value::Text(batch.topic.clone()),
                Value::Int(i64::from(batch.partition)),
            ]);
        }
        if self.columns.checksum {
            // Its bits, as Iggy's sink binds it (`checksum as i64`): a checksum of 2^63
            // or more reads back negative, and casts back to the same u64.
            params.push(checksum.map_or(Value::Null, |checksum| Value::Int(checksum as i64)));
        }
        if self.columns.origin_timestamp {
            params.push(match message.origin_timestamp {
                Some(micros) => timestamp(micros, "iggy_origin_timestamp")?,
                None => Value::Null,
            });
        }
        params.push(match self.columns.payload {
            PayloadFormat::Bytea => Value::Bytes(message.payload.clone()),
            PayloadFormat::Json => {
                let text = std::str::from_utf8(&message.payload)
                    .map_err(|_| "the payload is not UTF-8, so not the JSON payload_format = \"json\" stores")?;
                // What jsonb takes: JSON without the escape \u0000.
                if !is_jsonb(text) {
                    return Err("the payload is not the JSON payload_format = \"json\" stores (jsonb)".into());
                }
                Value::Json(text.to_string())
            }
            PayloadFormat::Text => Value::Text(
                String::from_utf8(message.payload.clone())
                    .map_err(|_| "the payload is not the UTF-8 text payload_format = \"text\" stores")?,
            ),
        });
        Ok(Statement { sql: self.insert.clone(), params })
    }
}

/// `micros` since the epoch for the timestamptz `column`.
fn timestamp(micros: u64, column: &str) -> Result<Value, String> {
    i64::try_from(micros)
        .map(Value::Timestamp)
        .map_err(|_| format!("timestamp {micros} µs does not fit the column {column}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::tests::{batch, message};

    const ALL: Columns =
        Columns { metadata: true, checksum: true, origin_timestamp: true, payload: PayloadFormat::Bytea };

    #[test]
    fn the_table_is_iggys_and_a_message_written_again_adds_nothing() {
        let layout = IggyLayout::new("\"events\"", ALL);
        assert_eq!(
            layout.create_table().sql,
            "CREATE TABLE IF NOT EXISTS \"events\" (id DECIMAL(39, 0) PRIMARY KEY, iggy_offset BIGINT, iggy_timestamp \
             TIMESTAMP WITH TIME ZONE, iggy_stream TEXT, iggy_topic TEXT, iggy_partition_id INTEGER, \
             iggy_checksum BIGINT, iggy_origin_timestamp TIMESTAMP WITH TIME ZONE, payload BYTEA, created_at \
             TIMESTAMP WITH TIME ZONE DEFAULT NOW())"
        );
        let checksum = Some(u64::MAX - 1);
        let insert = layout.insert_with_checksum(&batch(), &message(u128::MAX, b"\x00\xff"), checksum).unwrap();
        assert_eq!(
            insert.sql,
            "INSERT INTO \"events\" (id, iggy_offset, iggy_timestamp, iggy_stream, iggy_topic, iggy_partition_id, \
             iggy_checksum, iggy_origin_timestamp, payload) VALUES ($1::numeric, $2, $3, $4, $5, $6, $7, $8, $9) ON \
             CONFLICT (id) DO NOTHING"
        );
        assert_eq!(
            insert.params,
            [
                Value::Text("340282366920938463463374607431768211455".into()),
                Value::Int(41),
                Value::Timestamp(1_700_000_000_000_000),
                Value::Text("app".into()),
                Value::Text("orders".into()),
                Value::Int(3),
                Value::Int(-2),
                Value::Timestamp(1_600_000_000_000_000),
                Value::Bytes(vec![0, 0xff]),
            ]
        );
        let from_the_local_log = layout.insert_with_checksum(&batch(), &message(1, b"x"), None).unwrap();
        assert_eq!(from_the_local_log.params[6], Value::Null, "no checksum: NULL");
    }

    #[test]
    fn columns_left_out_are_neither_created_nor_written() {
        let bare = Columns { metadata: false, checksum: false, origin_timestamp: false, payload: PayloadFormat::Text };
        let layout = IggyLayout::new("\"t\"", bare);
        assert!(layout.create_table().sql.contains("PRIMARY KEY, payload TEXT, created_at"), "{:?}", layout);
        let insert = layout.insert(&batch(), &message(7, "é".as_bytes())).unwrap();
        assert_eq!(insert.sql, "INSERT INTO \"t\" (id, payload) VALUES ($1::numeric, $2) ON CONFLICT (id) DO NOTHING");
        assert_eq!(insert.params, [Value::Text("7".into()), Value::Text("é".into())]);
        let json = IggyLayout::new("\"t\"", Columns { payload: PayloadFormat::Json, ..bare });
        assert!(json.create_table().sql.contains("payload JSONB"));
        assert_eq!(
            json.insert(&batch(), &message(7, b"{\"a\": 1}")).unwrap().params[1],
            Value::Json("{\"a\": 1}".into())
        );
    }

    #[test]
    fn a_message_the_layout_cannot_hold_is_explained() {
        let json = IggyLayout::new("\"t\"", Columns { payload: PayloadFormat::Json, ..ALL });
        assert!(json.insert(&batch(), &message(1, b"not json")).unwrap_err().contains("not the JSON"));
        assert!(json.insert(&batch(), &message(1, br#""a\u0000b""#)).unwrap_err().contains("jsonb"));
        let text = IggyLayout::new("\"t\"", Columns { payload: PayloadFormat::Text, ..ALL });
        assert!(text.insert(&batch(), &message(1, &[0xff])).unwrap_err().contains("UTF-8"));
        let layout = IggyLayout::new("\"t\"", ALL);
        assert!(layout.insert(&batch(), &message(0, b"x")).unwrap_err().contains("no id"));
        let mut late = message(1, b"x");
        late.origin_timestamp = None;
        assert_eq!(layout.insert(&batch(), &late).unwrap().params[7], Value::Null);
        assert_eq!(PayloadFormat::named("JSONB"), Ok(PayloadFormat::Json));
        assert!(PayloadFormat::named("xml").unwrap_err().contains("\"xml\""));
    }
}
