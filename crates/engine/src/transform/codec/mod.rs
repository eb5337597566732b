//! Codecs: a stream's `schema` made into what encodes a source's records before
//! delivery and decodes a sink's records before the guest gets them, in the
//! layouts Iggy's connectors runtime uses, so that either side of a pipeline may
//! be Iggy's runtime or ferry:
//!
//! * `json`: the payload must be JSON; it is carried as it is;
//! * `text`: the payload must be UTF-8; carried as it is;
//! * `raw`: anything, as it is (no codec);
//! * `proto` (`proto.rs`): a `google.protobuf.Any`, decoded to
//!   `{"type_url", "value": base64}`;
//! * `flat_buffer` (`flatbuffer.rs`): a FlatBuffer, decoded to
//!   `{"buffer_size", "has_root_table", "raw_data_base64"}` (Iggy's runtime has no
//!   FlatBuffers schema to read fields with either);
//! * `avro` (`avro.rs`): one Avro datum under the stream's Avro schema, decoded to
//!   the JSON of its value.
//!
//! A record a codec cannot decode or encode is never dropped (Iggy's runtime drops
//! it, logging an error): the chain reports it, with why, so that a sink's goes to
//! its dead letters and a source's batch is NACKed as rejected.

mod avro;
mod flatbuffer;
mod proto;

use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use ferry_config::schema::{AvroSchema, Schema};

/// One stream schema's encoder and decoder.
#[derive(Debug, Clone)]
pub enum Codec {
    Json,
    Text,
    Proto,
    FlatBuffer,
    Avro(Arc<apache_avro::Schema>),
}

impl Codec {
    /// The codec of `schema` (none for `raw`: payloads are carried as they are);
    /// `avro_schema` is the text of the Avro schema, which `avro` needs.
    pub fn new(schema: Schema, avro_schema: Option<&str>) -> Result<Option<Codec>, String> {
        Ok(Some(match schema {
            Schema::Raw => return Ok(None),
            Schema::Json => Codec::Json,
            Schema::Text => Codec::Text,
            Schema::Proto => Codec::Proto,
            Schema::FlatBuffer => Codec::FlatBuffer,
            Schema::Avro => {
                let text = avro_schema.ok_or("schema = \"avro\" needs an Avro schema")?;
                Codec::Avro(Arc::new(avro::parse(text)?))
            }
        }))
    }

    /// The codec of a stream's (or a converting transform's) `schema`, its Avro
    /// schema read from its file where it names one.
    pub fn of(schema: Schema, avro: Option<&AvroSchema>) -> Result<Option<Codec>, String> {
        match avro {
            Some(AvroSchema::Path(path)) => Codec::new(schema, Some(&read_schema(path)?))
                .map_err(|problem| format!("{}: {problem}", path.display())),
            Some(AvroSchema::Json(json)) => Codec::new(schema, Some(json)),
            None => Codec::new(schema, None),
        }
    }

    /// Its schema's name.
    pub fn name(&self) -> &'static str {
        match self {
            Codec::Json => "json",
            Codec::Text => "text",
            Codec::Proto => "proto",
            Codec::FlatBuffer => "flat_buffer",
            Codec::Avro(_) => "avro",
        }
    }

    /// What a sink's guest gets for a stored `payload`: `None` when that is the
    /// payload itself, JSON for the binary schemas; or why it is not of this schema.
    pub fn decode(&self, payload: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self {
            Codec::Json => json(payload).map(|_| None),
            Codec::Text => text(payload).map(|_| None),
            Codec::Proto => proto::decode(payload).map(Some),
            Codec::FlatBuffer => flatbuffer::decode(payload).map(Some),
            Codec::Avro(schema) => avro::decode(schema, payload).map(Some),
        }
    }

    /// What is delivered for a source's record `payload` (the guest's JSON, for the
    /// binary schemas): `None` when that is the payload itself; or why it cannot be.
    pub fn encode(&self, payload: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self {
            Codec::Json => json(payload).map(|_| None),
            Codec::Text => text(payload).map(|_| None),
            Codec::Proto => Ok(Some(proto::encode(payload))),
            Codec::FlatBuffer => Ok(Some(flatbuffer::encode(payload))),
            Codec::Avro(schema) => avro::encode(schema, payload).map(Some),
        }
    }
}

/// The most an Avro schema file may hold: no schema comes near it.
const MAX_SCHEMA_BYTES: u64 = 4 * 1024 * 1024;

/// The text of the Avro schema file `path`.
fn read_schema(path: &Path) -> Result<String, String> {
    let cannot = |e: std::io::Error| format!("cannot read the Avro schema {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut text = String::new();
    file.take(MAX_SCHEMA_BYTES + 1).read_to_string(&mut text).map_err(cannot)?;
    if text.len() as u64 > MAX_SCHEMA_BYTES {
        return Err(format!("the Avro schema {} is over {MAX_SCHEMA_BYTES} bytes", path.display()));
    }
    Ok(text)
}

/// `payload` as JSON, or why it is not.
fn json(payload: &[u8]) -> Result<serde_json::Value, String> {
    serde_json::from_slice(payload).map_err(|e| format!("not JSON ({e})"))
}

fn text(payload: &[u8]) -> Result<(), String> {
    std::str::from_utf8(payload).map(drop).map_err(|e| format!("not UTF-8 text ({e})"))
}

#[cfg(test)]
mod tests;
