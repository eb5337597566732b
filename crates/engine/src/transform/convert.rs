//! Iggy's converting transforms (`proto_convert`, `flat_buffer_convert`,
//! `avro_convert`): a record decoded from one format and encoded as another, with
//! the codecs a stream's `schema` uses, its fields renamed on the way where it is a
//! JSON object.

use ferry_config::transforms::ConvertTransform;
use serde_json::Value;

use super::codec::Codec;

/// A converting transform, ready to run.
#[derive(Debug)]
pub struct Convert {
    pub name: &'static str,
    /// Decodes what the record is (none: JSON, text or raw bytes, as they are).
    from: Option<Codec>,
    /// Encodes what it becomes (none: as it is).
    to: Option<Codec>,
    field_mappings: Vec<(String, String)>,
}

impl Convert {
    /// The converter `transform` configures, or why its Avro schema is unusable.
    pub fn new(transform: &ConvertTransform) -> Result<Convert, String> {
        let ConvertTransform { name, source_format, target_format, field_mappings, avro } = transform;
        let codec =
            |schema| Codec::of(schema, avro.as_ref()).map_err(|problem| format!("transforms.{name}: {problem}"));
        // The same format on both sides: nothing to decode or encode.
        let (from, to) = if source_format == target_format {
            (None, None)
        } else {
            (codec(*source_format)?, codec(*target_format)?)
        };
        Ok(Convert { name, from, to, field_mappings: field_mappings.clone() })
    }

    /// `payload` converted (`None`: unchanged), or why it cannot be.
    pub fn apply(&self, payload: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let mut converted = None;
        if let Some(from) = &self.from {
            converted =
                from.decode(payload).map_err(|problem| format!("cannot be read as {}: {problem}", from.name()))?;
        }
        if !self.field_mappings.is_empty() {
            converted = self.rename(converted.as_deref().unwrap_or(payload)).or(converted);
        }
        if let Some(to) = &self.to {
            let current = converted.as_deref().unwrap_or(payload);
            if let Some(encoded) =
                to.encode(current).map_err(|problem| format!("cannot be written as {}: {problem}", to.name()))?
            {
                converted = Some(encoded);
            }
        }
        Ok(converted)
    }

    /// `payload` with its fields renamed, when it is a JSON object.
    fn rename(&self, payload: &[u8]) -> Option<Vec<u8>> {
        let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(payload) else { return None };
        let new_name = |key: String| match self.field_mappings.iter().find(|(from, _)| *from == key) {
            Some((_, to)) => to.clone(),
            None => key,
        };
        let renamed: serde_json::Map<String, Value> = fields.into_iter().map(|(k, v)| (new_name(k), v)).collect();
        Some(serde_json::to_vec(&renamed).expect("a JSON object serializes"))
    }
}
