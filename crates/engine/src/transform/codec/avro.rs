//! `schema = "avro"`: each payload one Avro datum (no container, no header) under
//! the stream's Avro schema, as Iggy's runtime writes and reads them.

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::types::Value as Avro;
use apache_avro::writer::datum::GenericDatumWriter;
use serde_json::Value as Json;

/// The Avro schema `text`, or why it is none.
pub fn parse(text: &str) -> Result<Schema, String> {
    Schema::parse_str(text).map_err(|e| format!("not an Avro schema: {e}"))
}

/// The JSON of the datum `payload`.
pub fn decode(schema: &Schema, payload: &[u8]) -> Result<Vec<u8>, String> {
    if payload.is_empty() {
        return Err("empty, and an Avro datum is never empty here".into());
    }
    let reader = GenericDatumReader::builder(schema).build().map_err(|e| format!("the Avro schema: {e}"))?;
    let mut rest = payload;
    let value = reader.read_value(&mut rest).map_err(|e| format!("not an Avro datum of the schema ({e})"))?;
    if !rest.is_empty() {
        return Err(format!("{} byte(s) after the Avro datum", rest.len()));
    }
    let json = Json::try_from(value).map_err(|e| format!("an Avro value JSON cannot hold ({e})"))?;
    Ok(serde_json::to_vec(&json).expect("JSON values serialize"))
}

/// The datum of the JSON `payload`, which must fit the schema.
pub fn encode(schema: &Schema, payload: &[u8]) -> Result<Vec<u8>, String> {
    let json = super::json(payload)?;
    let value = plain(json)?.resolve(schema).map_err(|e| format!("does not fit the Avro schema ({e})"))?;
    let writer = GenericDatumWriter::builder(schema).build().map_err(|e| format!("the Avro schema: {e}"))?;
    writer.write_value_to_vec(value).map_err(|e| format!("cannot be written as Avro ({e})"))
}

/// `json` as the Avro value of no schema in particular (objects as maps, integers
/// as longs), which `resolve` then fits to the schema: maps to records, longs to
/// ints, a value to the branch of a union it fits.
fn plain(json: Json) -> Result<Avro, String> {
    Ok(match json {
        Json::Null => Avro::Null,
        Json::Bool(b) => Avro::Boolean(b),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Avro::Long(i),
            (None, Some(f)) if n.is_f64() => Avro::Double(f),
            _ => return Err(format!("{n} is beyond what an Avro long holds")),
        },
        Json::String(s) => Avro::String(s),
        Json::Array(items) => Avro::Array(items.into_iter().map(plain).collect::<Result<_, _>>()?),
        Json::Object(fields) => {
            Avro::Map(fields.into_iter().map(|(k, v)| Ok((k, plain(v)?))).collect::<Result<_, String>>()?)
        }
    })
}
