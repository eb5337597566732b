//! A JSON record read in one pass, without building it as a `serde_json::Value`: the
//! keys the config names (the measurement, the timestamp, the tags) kept, the fields
//! written straight into line protocol as they are met, everything else skipped. A
//! record is mapped for every message, so this is the sink's hot path.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::config::Config;
use crate::escape::{escaped, quoted};

/// The values of a record's keys the config names.
pub struct Record {
    pub measurement: Option<Value>,
    pub timestamp: Option<Value>,
    /// In the order of `config.tags`.
    pub tags: Vec<Option<Value>>,
}

/// Read `payload`, which must be a JSON object; with `fields`, append `,key=value`
/// for each field the config writes.
pub fn read(config: &Config, payload: &[u8], fields: Option<&mut String>, only: &[String]) -> Result<Record, String> {
    let mut problem = None;
    let mut deserializer = serde_json::Deserializer::from_slice(payload);
    let reader = Reader { config, fields, only, problem: &mut problem };
    let read = reader.deserialize(&mut deserializer).and_then(|record| deserializer.end().map(|()| record));
    read.map_err(|error| {
        if let Some(problem) = problem {
            return problem;
        }
        match serde_json::from_slice::<Value>(payload) {
            Err(_) => format!("its payload is not JSON: {error}"),
            Ok(value) => format!("its payload is JSON but not an object (a {}): it has no keys to map", kind(&value)),
        }
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

struct Reader<'a> {
    config: &'a Config,
    fields: Option<&'a mut String>,
    /// The fields to write (every one not used otherwise when empty).
    only: &'a [String],
    /// Why the record cannot be mapped, when that is what stopped the read.
    problem: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Reader<'_> {
    type Value = Record;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Record, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Reader<'_> {
    type Value = Record;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Record, A::Error> {
        let config = self.config;
        let mut record = Record { measurement: None, timestamp: None, tags: vec![None; config.tags.len()] };
        while let Some(Key(key)) = map.next_key()? {
            if config.measurement_field.as_deref() == Some(&key) {
                record.measurement = Some(map.next_value()?);
            } else if config.timestamp_field.as_deref() == Some(&key) {
                record.timestamp = Some(map.next_value()?);
            } else if let Some(at) = config.tags.iter().position(|tag| *tag == key) {
                record.tags[at] = Some(map.next_value()?);
            } else if let Some(out) = self.fields.as_deref_mut()
                && (self.only.is_empty() || self.only.iter().any(|field| *field == key))
            {
                let mark = out.len();
                out.push(',');
                if let Err(why) = escaped(out, "a field key", &key, &[',', '=', ' ']) {
                    *self.problem = Some(why);
                    return Err(de::Error::custom("a field key line protocol cannot carry"));
                }
                out.push('=');
                if !map.next_value_seed(FieldValue(out))? {
                    out.truncate(mark);
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(record)
    }
}

/// A key, borrowed from the payload when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_string())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// A field's value written as line protocol types it: an integer with `i`, a float,
/// a boolean, a string in quotes, an object or array as its JSON text. `false`: a
/// null, nothing written.
struct FieldValue<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for FieldValue<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldValue<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<bool, E> {
        self.0.push_str(if value { "true" } else { "false" });
        Ok(true)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<bool, E> {
        write!(self.0, "{value}i").expect("writing to a String");
        Ok(true)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<bool, E> {
        match i64::try_from(value) {
            Ok(value) => self.visit_i64(value),
            // Past i64 (a 1.x server has no unsigned fields by default): a float.
            Err(_) => self.visit_f64(value as f64),
        }
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<bool, E> {
        // `Debug` keeps a float a float: `2.0`, never `2`.
        write!(self.0, "{value:?}").expect("writing to a String");
        Ok(true)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<bool, E> {
        quoted(self.0, value);
        Ok(true)
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        let value = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        quoted(self.0, &value.to_string());
        Ok(true)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        quoted(self.0, &value.to_string());
        Ok(true)
    }
}
