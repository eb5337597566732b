//! Mapped columns (`plugin_config.columns`): a message's metadata and payload fields
//! in columns of the operator's own table, and the statement that inserts them.
//!
//! The sink does not know the columns' types, and need not: it sends one JSON object
//! `{column: value}` per message and lets the server turn it into a row of the table,
//! `json_populate_record(NULL::table, $1::json)`, which reads each value with its
//! column's own input function (a timestamptz from an RFC 3339 string, a numeric
//! from a number digit for digit, a uuid, a date, an enum, a jsonb from an object,
//! ...). A value that does not convert is the server's refusal of that row, SQLSTATE
//! class 22, which `write.rs` rejects like any other. Payload values are copied as
//! their JSON text, never parsed into numbers, so no digit is lost on the way.
//!
//! The origin timestamp is the exception: it is a parameter of its own, a
//! timestamptz, because PostgreSQL reads no number as a time.

use std::collections::HashMap;

use ferry_guest::bindings::iggy::connector::postgres::{Statement, Value};
use ferry_guest::sql::quote_identifier;
use ferry_guest::{SinkBatch, StoredMessage, headers_json};
use serde_json::value::RawValue;

use crate::columns::{Mapping, Source};
use crate::message::{origin_timestamp, row_id};

/// The insert for one (quoted) table and mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedLayout {
    mapping: Mapping,
    insert: String,
    /// Whether `$2` (the origin timestamp) is in the statement.
    timestamp_param: bool,
}

/// A JSON object payload's fields, as their text.
type Fields<'a> = HashMap<String, &'a RawValue>;

impl MappedLayout {
    pub fn new(quoted_table: &str, mapping: Mapping) -> MappedLayout {
        // The names were checked when the configuration was read.
        let quote = |column: &String| quote_identifier(column).expect("a checked column name");
        let columns: Vec<String> = mapping.columns.iter().map(|(column, _)| quote(column)).collect();
        let values: Vec<String> = mapping
            .columns
            .iter()
            .zip(&columns)
            .map(|((_, source), quoted)| match source {
                Source::OriginTimestamp => "$2::timestamptz".to_string(),
                _ => format!("m.{quoted}"),
            })
            .collect();
        let conflict: Vec<String> = mapping.conflict.iter().map(quote).collect();
        // A message written before (a replay) collides on the conflict columns: its
        // row is left as it is, or, for an upsert, set to the same values again.
        let on_conflict = if mapping.upsert {
            let updates: Vec<String> = mapping
                .columns
                .iter()
                .zip(&columns)
                .filter(|((column, _), _)| !mapping.conflict.contains(column))
                .map(|(_, quoted)| format!("{quoted} = EXCLUDED.{quoted}"))
                .collect();
            format!("DO UPDATE SET {}", updates.join(", "))
        } else {
            "DO NOTHING".to_string()
        };
        let insert = format!(
            "INSERT INTO {quoted_table} ({}) SELECT {} FROM json_populate_record(NULL::{quoted_table}, $1::json) AS m \
             ON CONFLICT ({}) {on_conflict}",
            columns.join(", "),
            values.join(", "),
            conflict.join(", ")
        );
        let timestamp_param = mapping.columns.iter().any(|(_, source)| *source == Source::OriginTimestamp);
        MappedLayout { mapping, insert, timestamp_param }
    }

    /// The insert of `message`, a message of `batch`; an error says why it can never
    /// be written (a payload without the fields mapped, a timestamp out of range).
    pub fn insert(&self, batch: &SinkBatch, message: &StoredMessage) -> Result<Statement, String> {
        let payload = Payload::read(&message.payload, self.mapping.reads_fields())?;
        let mut object = String::from("{");
        let mut timestamp = Value::Null;
        for (column, source) in &self.mapping.columns {
            let value = match source {
                Source::OriginTimestamp => {
                    timestamp = origin_timestamp(message, column)?;
                    continue;
                }
                Source::Id => json_string(&row_id(batch, message)),
                Source::Stream => json_string(&batch.stream),
                Source::Topic => json_string(&batch.topic),
                Source::Partition => batch.partition.to_string(),
                Source::Offset => message.offset.to_string(),
                Source::Headers => headers_json(&message.headers).to_string(),
                Source::Payload => payload.whole(column)?.get().to_string(),
                Source::Field(path) => payload.field(path).map_or("null", RawValue::get).to_string(),
            };
            if object.len() > 1 {
                object.push(',');
            }
            object.push_str(&json_string(column));
            object.push(':');
            object.push_str(&value);
        }
        object.push('}');
        let mut params = vec![Value::Json(object)];
        if self.timestamp_param {
            params.push(timestamp);
        }
        Ok(Statement { sql: self.insert.clone(), params })
    }

    /// What the table needs: the columns, and a unique index for `ON CONFLICT`
    /// (without one the server refuses every insert, SQLSTATE 42P10).
    pub fn expected(&self) -> String {
        let columns: Vec<&str> = self.mapping.columns.iter().map(|(column, _)| column.as_str()).collect();
        format!(
            "with the mapped columns ({}) and a primary key or unique index on exactly ({})",
            columns.join(", "),
            self.mapping.conflict.join(", ")
        )
    }
}

/// The payload, read as far as the mapping needs it.
struct Payload<'a> {
    /// The whole payload, when it is JSON.
    whole: Result<&'a RawValue, String>,
    /// Its fields, when some column takes one (and then it is an object).
    fields: Fields<'a>,
}

impl<'a> Payload<'a> {
    /// Fails, saying why, when fields are mapped and the payload is no JSON object.
    fn read(payload: &'a [u8], reads_fields: bool) -> Result<Payload<'a>, String> {
        let whole = std::str::from_utf8(payload)
            .map_err(|_| "the payload is not UTF-8 text, so not JSON".to_string())
            .and_then(|text| {
                serde_json::from_str::<&RawValue>(text).map_err(|e| format!("the payload is not JSON ({e})"))
            });
        if !reads_fields {
            return Ok(Payload { whole, fields: Fields::new() });
        }
        let raw = whole.as_ref().map_err(|why| format!("{why}, and columns are mapped from its fields"))?;
        let fields = object(raw).ok_or_else(|| {
            format!("the payload is a JSON {}, not an object, and columns are mapped from its fields", kind(raw))
        })?;
        Ok(Payload { whole, fields })
    }

    /// The whole payload, for `column`: an error if it is not JSON.
    fn whole(&self, column: &str) -> Result<&'a RawValue, String> {
        self.whole
            .as_ref()
            .copied()
            .map_err(|why| format!("{why}, and the column `{column}` takes it whole (@payload)"))
    }

    /// The value at `path` (keys of objects, indices of arrays), or `None` when
    /// there is none: the column is then NULL.
    fn field(&self, path: &[String]) -> Option<&'a RawValue> {
        let (first, rest) = path.split_first()?;
        let mut value = *self.fields.get(first)?;
        for step in rest {
            value = match value.get().as_bytes().first()? {
                b'{' => *object(value)?.get(step)?,
                b'[' => {
                    // RFC 6901: a decimal index without leading zeros.
                    if step.is_empty() || (step.len() > 1 && step.starts_with('0')) {
                        return None;
                    }
                    let index: usize = step.parse().ok()?;
                    serde_json::from_str::<Vec<&RawValue>>(value.get()).ok()?.get(index).copied()?
                }
                _ => return None,
            };
        }
        Some(value)
    }
}

/// `value`'s fields, if it is an object.
fn object(value: &RawValue) -> Option<Fields<'_>> {
    serde_json::from_str(value.get()).ok()
}

/// What kind of JSON value `value` is, for a message.
fn kind(value: &RawValue) -> &'static str {
    match value.get().as_bytes().first() {
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "boolean",
        Some(b'n') => "null",
        _ => "number",
    }
}

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

#[cfg(test)]
mod tests {
    use ferry_guest::HeaderValue;
    use serde_json::json;

    use super::*;
    use crate::columns::Columns;
    use crate::message::tests::{batch, message};

    fn layout(columns: serde_json::Value, conflict: Option<&[&str]>, upsert: bool) -> MappedLayout {
        let columns: Columns = serde_json::from_value(columns).unwrap();
        let conflict = conflict.map(|c| c.iter().map(|s| s.to_string()).collect());
        let mapping = Mapping::check(Some(columns), conflict, upsert, false).unwrap().unwrap();
        MappedLayout::new(r#""shop"."Orders""#, mapping)
    }

    /// The JSON object of the insert of `payload`, parsed, and its other parameters.
    fn values(layout: &MappedLayout, payload: &[u8]) -> Result<(serde_json::Value, Vec<Value>), String> {
        let statement = layout.insert(&batch(), &message(7, payload))?;
        let Value::Json(object) = &statement.params[0] else { panic!("{:?}", statement.params) };
        Ok((serde_json::from_str(object).unwrap(), statement.params[1..].to_vec()))
    }

    #[test]
    fn the_insert_converts_through_the_tables_own_row_type_and_skips_what_is_there() {
        let insert = layout(json!({"id": "@id", "Customer": "customer", "total": "/total"}), None, false).insert;
        assert_eq!(
            insert,
            r#"INSERT INTO "shop"."Orders" ("id", "Customer", "total") SELECT m."id", m."Customer", m."total" FROM json_populate_record(NULL::"shop"."Orders", $1::json) AS m ON CONFLICT ("id") DO NOTHING"#
        );
    }

    #[test]
    fn an_upsert_updates_every_column_but_the_keys() {
        let insert = layout(
            json!({"order_id": "order_id", "status": "status", "at": "@origin_timestamp", "msg": "@id"}),
            Some(&["order_id"]),
            true,
        )
        .insert;
        assert!(insert.contains(r#"SELECT m."order_id", m."status", $2::timestamptz, m."msg" FROM"#), "{insert}");
        assert!(
            insert.ends_with(
                r#"ON CONFLICT ("order_id") DO UPDATE SET "status" = EXCLUDED."status", "at" = EXCLUDED."at", "msg" = EXCLUDED."msg""#
            ),
            "{insert}"
        );
    }

    #[test]
    fn every_source_has_its_value_and_payload_values_keep_their_text() {
        let layout = layout(
            json!({"key": "@id", "stream": "@stream", "topic": "@topic", "partition": "@partition",
                   "offset": "@offset", "headers": "@headers", "doc": "@payload", "at": "@origin_timestamp",
                   "amount": "amount", "sku": "/items/1/sku", "nested": "/details", "none": "/items/9",
                   "deep": "/amount/x", "lead": "/items/01", "odd": "/a~1b"}),
            None,
            false,
        );
        let payload = br#"{"amount": 12345678901234567890.1234567890, "items": [{"sku": "a"}, {"sku": "b\u00e9"}],
                          "details": {"gift": true}, "a/b": 5}"#;
        let (object, params) = values(&layout, payload).unwrap();
        assert_eq!(
            object,
            json!({"key": "7", "stream": "app", "topic": "orders", "partition": 3, "offset": 41,
                   "headers": {"kind": {"string": "order"}, "n": {"uint64": 5}},
                   "doc": serde_json::from_slice::<serde_json::Value>(payload).unwrap(),
                   "amount": 12345678901234567890.1234567890, "sku": "bé", "nested": {"gift": true},
                   "none": null, "deep": null, "lead": null, "odd": 5})
        );
        assert_eq!(params, [Value::Timestamp(1_600_000_000_000_000)], "the origin timestamp, as $2");
        let statement = layout.insert(&batch(), &message(7, payload)).unwrap();
        let Value::Json(text) = &statement.params[0] else { unreachable!() };
        assert!(text.contains(r#""amount":12345678901234567890.1234567890,"#), "every digit, as sent: {text}");
    }

    #[test]
    fn a_payload_that_is_no_object_is_refused_when_fields_are_mapped() {
        let fields = layout(json!({"id": "@id", "total": "total"}), None, false);
        for (payload, why) in [
            (&b"[1, 2]"[..], "the payload is a JSON array, not an object"),
            (b"\"text\"", "a JSON string, not an object"),
            (b"not json", "the payload is not JSON"),
            (&[0xff, 0xfe], "not UTF-8"),
        ] {
            let error = values(&fields, payload).unwrap_err();
            assert!(error.contains(why) && error.contains("mapped from its fields"), "{payload:?}: {error}");
        }
        // Without fields, any JSON payload will do, and only @payload needs JSON.
        let whole = layout(json!({"id": "@id", "doc": "@payload"}), None, false);
        assert_eq!(values(&whole, b"[1, 2]").unwrap().0, json!({"id": "7", "doc": [1, 2]}));
        let error = values(&whole, b"not json").unwrap_err();
        assert!(error.contains("not JSON") && error.contains("`doc` takes it whole (@payload)"), "{error}");
        let meta = layout(json!({"id": "@id", "offset": "@offset"}), None, false);
        assert_eq!(values(&meta, b"\xff").unwrap().0, json!({"id": "7", "offset": 41}));
    }

    #[test]
    fn a_message_without_an_origin_timestamp_or_headers_has_nulls_and_an_empty_object() {
        let layout = layout(json!({"id": "@id", "at": "@origin_timestamp", "h": "@headers"}), None, false);
        let mut bare = message(7, b"{}");
        bare.origin_timestamp = None;
        bare.headers = vec![("raw".into(), HeaderValue::Raw(vec![1]))];
        let statement = layout.insert(&batch(), &bare).unwrap();
        assert_eq!(statement.params, [Value::Json(r#"{"id":"7","h":{"raw":{"raw":"AQ=="}}}"#.into()), Value::Null]);
        bare.origin_timestamp = Some(u64::MAX);
        assert!(layout.insert(&batch(), &bare).unwrap_err().contains("timestamptz column `at`"));
    }

    #[test]
    fn the_table_hint_names_the_columns_and_the_keys() {
        let hint = layout(json!({"order_id": "order_id", "total": "total"}), Some(&["order_id"]), true).expected();
        assert!(hint.contains("(order_id, total)") && hint.contains("unique index on exactly (order_id)"), "{hint}");
    }
}
