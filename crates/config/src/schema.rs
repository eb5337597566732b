//! A stream's `schema`: how the payloads in its log are encoded, as Iggy's
//! connectors runtime names it (`json`, `raw`, `text`, `proto`, `flat_buffer`,
//! `avro`), and where an Avro schema comes from.
//!
//! ```toml
//! [[sinks.streams]]
//! stream = "orders"
//! topics = ["created"]
//! schema = "avro"                       # the guest gets each record as JSON
//! avro_schema_path = "order.avsc"       # or avro_schema_json = '{"type": "record", ...}'
//! ```
//!
//! On a source's stream the schema is what the guest's records are encoded *to*
//! before delivery; on a sink's, what stored records are decoded *from* before the
//! guest gets them (the engine's `transform::codec` does both). Without a `schema`
//! ferry carries payloads as they are, as it always has.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// `schema = "..."`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Schema {
    Json,
    Raw,
    Text,
    Proto,
    FlatBuffer,
    Avro,
}

impl Schema {
    /// Its name in a config.
    pub fn name(self) -> &'static str {
        match self {
            Schema::Json => "json",
            Schema::Raw => "raw",
            Schema::Text => "text",
            Schema::Proto => "proto",
            Schema::FlatBuffer => "flat_buffer",
            Schema::Avro => "avro",
        }
    }

    /// The schema named `name`, or a sentence naming the ones there are.
    pub fn named(name: &str) -> Result<Schema, String> {
        const ALL: [Schema; 6] =
            [Schema::Json, Schema::Raw, Schema::Text, Schema::Proto, Schema::FlatBuffer, Schema::Avro];
        ALL.into_iter()
            .find(|schema| schema.name() == name)
            .ok_or_else(|| format!("{name:?} is none of json, raw, text, proto, flat_buffer, avro"))
    }
}

/// Where an Avro schema comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AvroSchema {
    /// `avro_schema_json`: the schema itself.
    Json(String),
    /// `avro_schema_path`: a file holding it (relative to the config file).
    Path(PathBuf),
}

/// A stream's schema and, for `avro`, where its Avro schema comes from: what the
/// codec is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSchema {
    pub schema: Schema,
    pub avro: Option<AvroSchema>,
}

/// The schema set by a stream's `schema`, `avro_schema_json` and `avro_schema_path`
/// (none without a `schema`), or what is wrong with them: the key and the problem.
pub fn stream_schema(
    schema: Option<Schema>,
    avro_json: Option<&str>,
    avro_path: Option<&Path>,
) -> Result<Option<StreamSchema>, (&'static str, String)> {
    let avro = match (avro_json, avro_path) {
        (Some(_), Some(_)) => {
            return Err(("avro_schema_json", "and avro_schema_path are both set; give the schema one way".into()));
        }
        (Some(json), None) => Some(AvroSchema::Json(json.to_string())),
        (None, Some(path)) => Some(AvroSchema::Path(path.to_path_buf())),
        (None, None) => None,
    };
    match (schema, avro) {
        (None, None) => Ok(None),
        (Some(Schema::Avro), None) => Err((
            "schema",
            "\"avro\" needs the Avro schema its records are written with: avro_schema_json or avro_schema_path".into(),
        )),
        (Some(Schema::Avro), avro) => Ok(Some(StreamSchema { schema: Schema::Avro, avro })),
        (other, Some(_)) => Err((
            "avro_schema_json",
            format!(
                "(or avro_schema_path) is for schema = \"avro\", and this stream's schema is {}",
                other.map_or("not set", Schema::name)
            ),
        )),
        (Some(schema), None) => Ok(Some(StreamSchema { schema, avro: None })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streams_schema_keys_are_checked_together() {
        assert_eq!(stream_schema(None, None, None), Ok(None));
        assert_eq!(
            stream_schema(Some(Schema::Proto), None, None),
            Ok(Some(StreamSchema { schema: Schema::Proto, avro: None }))
        );
        assert_eq!(
            stream_schema(Some(Schema::Avro), Some("\"long\""), None),
            Ok(Some(StreamSchema { schema: Schema::Avro, avro: Some(AvroSchema::Json("\"long\"".into())) }))
        );
        let (key, problem) = stream_schema(Some(Schema::Avro), None, None).unwrap_err();
        assert_eq!(key, "schema");
        assert!(problem.contains("avro_schema_json or avro_schema_path"), "{problem}");
        let (key, problem) = stream_schema(Some(Schema::Json), None, Some(Path::new("a.avsc"))).unwrap_err();
        assert_eq!(key, "avro_schema_json");
        assert!(problem.contains("schema is json"), "{problem}");
        let (_, problem) = stream_schema(Some(Schema::Avro), Some("{}"), Some(Path::new("a.avsc"))).unwrap_err();
        assert!(problem.contains("both set"), "{problem}");
        assert_eq!(Schema::named("flat_buffer"), Ok(Schema::FlatBuffer));
        assert!(Schema::named("protobuf").unwrap_err().contains("none of json"));
    }
}
