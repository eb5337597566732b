//! `transforms`: changes to each record's JSON fields between a source and its
//! delivery, or between a sink's input and the sink, written as Iggy's connectors
//! runtime writes them (`[transforms.add_fields]` in a connector file, or
//! `[sources.transforms.add_fields]` in a Ferry config):
//!
//! ```toml
//! [sinks.transforms.unwrap_envelope]
//! enabled = true
//! field = "data"
//!
//! [sinks.transforms.add_fields]
//! enabled = true
//! fields = [{ key = "source", value.static = "orders" }, { key = "seen_at", value.computed = "timestamp_millis" }]
//! ```
//!
//! The five field transforms Iggy has: `add_fields`, `delete_fields`,
//! `update_fields`, `filter_fields`, `unwrap_envelope`. Each acts on the top-level
//! fields of a record that is a JSON object and leaves any other record as it is;
//! none drops a record.
//!
//! Beyond Iggy, a transform can be a component (`wit/transform.wit`), under a name
//! of the user's choosing, which may drop records as well as change them:
//!
//! ```toml
//! [sources.transforms.redact]
//! enabled = true
//! component = "transforms/redact.wasm"
//! plugin_config = { fields = ["email"] }
//! ```
//!
//! They all run in the order written (Iggy's runtime runs its own in an order of its
//! hash map's choosing). This is the config as data; what each does to a record is
//! in `ferry-engine`'s `transform`.

use crate::schema::{AvroSchema, Schema};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// The enabled transforms of one connector, in the order written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transforms(pub Vec<Transform>);

impl Transforms {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The component files of its component transforms, for resolving relative ones.
    pub fn paths_mut(&mut self) -> impl Iterator<Item = &mut std::path::PathBuf> {
        self.0.iter_mut().filter_map(|transform| match transform {
            Transform::Component(component) => Some(&mut component.component),
            Transform::Convert(ConvertTransform { avro: Some(AvroSchema::Path(path)), .. }) => Some(path),
            _ => None,
        })
    }

    /// Its component transforms.
    pub fn components(&self) -> impl Iterator<Item = &ComponentTransform> {
        self.0.iter().filter_map(|transform| match transform {
            Transform::Component(component) => Some(component),
            _ => None,
        })
    }
}

/// One transform and its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Transform {
    /// Set each field (added, or overwritten).
    AddFields(Vec<SetField>),
    /// Remove these fields, where present.
    DeleteFields(Vec<String>),
    /// Set each field where its condition holds.
    UpdateFields(Vec<SetField>),
    /// Keep or drop fields by name and value.
    FilterFields(FilterFields),
    /// Replace the record by the value of this field, where present.
    UnwrapEnvelope(String),
    /// Iggy's `proto_convert`, `flat_buffer_convert`, `avro_convert`: each record
    /// decoded from one format and encoded as another.
    Convert(ConvertTransform),
    /// A transform component, which may drop records too.
    Component(ComponentTransform),
}

/// `[transforms.avro_convert]` (or `proto_convert`, `flat_buffer_convert`), as Iggy
/// writes it: `source_format`, `target_format` (`json`, `raw`, `text` or the
/// converter's own format), `field_mappings` (a record's top-level fields renamed on
/// the way, where it is JSON), and for `avro_convert` its Avro schema (`schema_json`
/// or `schema_path`). Ferry converts with the codecs a stream's `schema` uses (see
/// `schema.rs`), so a converter does exactly what that schema does.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertTransform {
    /// `proto_convert`, `flat_buffer_convert` or `avro_convert`.
    pub name: &'static str,
    pub source_format: Schema,
    pub target_format: Schema,
    /// Old name to new name, in the order written.
    pub field_mappings: Vec<(String, String)>,
    /// `avro_convert`'s schema.
    pub avro: Option<AvroSchema>,
}

impl ConvertTransform {
    /// The format it converts from or to besides JSON, text and raw bytes.
    fn format(name: &str) -> Option<Schema> {
        match name {
            "proto_convert" => Some(Schema::Proto),
            "flat_buffer_convert" => Some(Schema::FlatBuffer),
            "avro_convert" => Some(Schema::Avro),
            _ => None,
        }
    }
}

/// `[transforms.NAME]` with a `component`: a transform written as a component of
/// `wit/transform.wit`, run sandboxed under its connector's limits, granted nothing.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentTransform {
    /// The name it has in the config (`NAME`): what its errors and the log call it.
    #[serde(skip)]
    pub name: String,
    /// The component file; a relative path is resolved against the config file's
    /// directory, as a connector's `path` is.
    pub component: std::path::PathBuf,
    /// Handed to its `open`, as JSON (`{}` when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_config: Option<toml::Table>,
}

impl ComponentTransform {
    /// Its `plugin_config` as the JSON its `open` receives.
    pub fn plugin_config_json(&self) -> String {
        let table = self.plugin_config.clone().unwrap_or_default();
        serde_json::to_string(&table).expect("a TOML table serializes as JSON")
    }
}

impl Transform {
    /// Its name, as Iggy's runtime names it (a component's, as the config names it).
    pub fn name(&self) -> &str {
        match self {
            Transform::Component(component) => &component.name,
            Transform::AddFields(_) => "add_fields",
            Transform::DeleteFields(_) => "delete_fields",
            Transform::UpdateFields(_) => "update_fields",
            Transform::FilterFields(_) => "filter_fields",
            Transform::UnwrapEnvelope(_) => "unwrap_envelope",
            Transform::Convert(convert) => convert.name,
        }
    }

    /// Its settings as Iggy's runtime writes them (`enabled` and the rest), as JSON:
    /// what its API shows.
    pub fn settings(&self) -> serde_json::Value {
        let settings = match self {
            Transform::AddFields(fields) | Transform::UpdateFields(fields) => serde_json::json!({ "fields": fields }),
            Transform::DeleteFields(names) => serde_json::json!({ "fields": names }),
            Transform::FilterFields(filter) => serde_json::to_value(filter).unwrap_or_default(),
            Transform::UnwrapEnvelope(field) => serde_json::json!({ "field": field }),
            Transform::Component(component) => serde_json::to_value(component).unwrap_or_default(),
            Transform::Convert(convert) => {
                let mut settings = serde_json::json!({
                    "source_format": convert.source_format.name(),
                    "target_format": convert.target_format.name(),
                });
                if !convert.field_mappings.is_empty() {
                    let mappings: serde_json::Map<_, _> =
                        convert.field_mappings.iter().map(|(from, to)| (from.clone(), to.clone().into())).collect();
                    settings["field_mappings"] = mappings.into();
                }
                match &convert.avro {
                    Some(AvroSchema::Json(json)) => settings["schema_json"] = json.clone().into(),
                    Some(AvroSchema::Path(path)) => settings["schema_path"] = path.display().to_string().into(),
                    None => {}
                }
                settings
            }
        };
        let mut shown = serde_json::json!({ "enabled": true });
        if let (Some(shown), serde_json::Value::Object(settings)) = (shown.as_object_mut(), settings) {
            shown.extend(settings);
        }
        shown
    }
}

/// A field to set, and when.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SetField {
    pub key: String,
    pub value: FieldValue,
    /// `update_fields` only (`add_fields` always sets).
    #[serde(default, skip_serializing_if = "Condition::is_always")]
    pub condition: Condition,
}

/// `value.static = ...` or `value.computed = "..."`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FieldValue {
    /// This value, as written.
    Static(serde_json::Value),
    /// Worked out again for every record.
    Computed(Computed),
}

/// The values a field can be computed as: the time the record was transformed, or
/// a new UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Computed {
    /// RFC 3339, UTC: `2026-12-06T17:46:11.123456789+00:00`.
    DateTime,
    TimestampNanos,
    TimestampMicros,
    TimestampMillis,
    TimestampSeconds,
    UuidV4,
    UuidV7,
}

/// When `update_fields` sets a field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    #[default]
    Always,
    KeyExists,
    KeyNotExists,
}

impl Condition {
    fn is_always(&self) -> bool {
        *self == Condition::Always
    }
}

/// `filter_fields`: a field named in `keep_fields` is kept; any other is kept when
/// it matches one of `patterns` (`include_matching = true`, the default), or when it
/// matches none (`false`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FilterFields {
    #[serde(default)]
    pub keep_fields: Vec<String>,
    #[serde(default)]
    pub patterns: Vec<FieldPattern>,
    #[serde(default = "yes")]
    pub include_matching: bool,
}

fn yes() -> bool {
    true
}

/// A field matches when its key matches `key_pattern` and its value `value_pattern`
/// (a part not given matches anything).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FieldPattern {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_pattern: Option<KeyPattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_pattern: Option<ValuePattern>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum KeyPattern {
    Exact(String),
    StartsWith(String),
    EndsWith(String),
    Contains(String),
    /// Found anywhere in the key (`^...$` for the whole key).
    Regex(Regex),
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ValuePattern {
    Equals(serde_json::Value),
    /// A string containing this.
    Contains(String),
    /// A string in which this is found.
    Regex(Regex),
    /// Numbers, integers as well as floats (Iggy's runtime compares floats only).
    GreaterThan(f64),
    LessThan(f64),
    /// `[low, high]`, both included.
    Between(f64, f64),
    IsNull,
    IsNotNull,
    IsString,
    IsNumber,
    IsBoolean,
    IsObject,
    IsArray,
}

/// A regex pattern (the `regex` crate's syntax, as Iggy's), compiled where the
/// config is read, so that a bad one is named there.
#[derive(Clone)]
pub struct Regex(pub regex::Regex);

impl PartialEq for Regex {
    fn eq(&self, other: &Regex) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl std::fmt::Debug for Regex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0.as_str())
    }
}

impl Serialize for Regex {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.as_str())
    }
}

impl<'de> Deserialize<'de> for Regex {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let pattern = String::deserialize(deserializer)?;
        regex::Regex::new(&pattern).map(Regex).map_err(|e| de::Error::custom(format!("invalid regex {pattern:?}: {e}")))
    }
}

const KNOWN: &str = "add_fields, delete_fields, update_fields, filter_fields, unwrap_envelope, proto_convert, \
                     flat_buffer_convert, avro_convert";

impl<'de> Deserialize<'de> for Transforms {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TransformsVisitor)
    }
}

struct TransformsVisitor;

impl<'de> Visitor<'de> for TransformsVisitor {
    type Value = Transforms;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a table of transforms by name ({KNOWN})")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Transforms, A::Error> {
        let mut transforms = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let table: toml::Table = map.next_value()?;
            if let Some(transform) = transform(&name, table).map_err(de::Error::custom)? {
                transforms.push(transform);
            }
        }
        Ok(Transforms(transforms))
    }
}

/// `[transforms.NAME]`: the transform, or none when it is not enabled.
fn transform(name: &str, mut table: toml::Table) -> Result<Option<Transform>, String> {
    let at = format!("transforms.{name}");
    match table.remove("enabled") {
        Some(toml::Value::Boolean(true)) => {}
        Some(toml::Value::Boolean(false)) => return Ok(None),
        Some(other) => return Err(format!("{at}.enabled: expected true or false, found {}", other.type_str())),
        None => return Err(format!("{at}.enabled: missing (true or false; Iggy's runtime requires it too)")),
    }
    if let Some(format) = ConvertTransform::format(name) {
        return convert(&at, name, format, table).map(|convert| Some(Transform::Convert(convert)));
    }
    let settings = |table: toml::Table| -> Result<Settings, String> {
        Settings::deserialize(toml::Value::Table(table)).map_err(|e| format!("{at}: {}", e.message()))
    };
    let transform = match name {
        "add_fields" | "update_fields" => {
            let Settings { fields, .. } = settings(only(&at, table, &["fields"])?)?;
            let fields = fields.unwrap_or_default();
            let fields: Vec<SetField> = fields
                .into_iter()
                .enumerate()
                .map(|(i, field)| {
                    SetField::deserialize(field).map_err(|e| format!("{at}.fields[{i}]: {}", e.message()))
                })
                .collect::<Result<_, _>>()?;
            if name == "add_fields" {
                if let Some(i) = fields.iter().position(|f| f.condition != Condition::Always) {
                    return Err(format!("{at}.fields[{i}].condition: only update_fields sets fields by a condition"));
                }
                Transform::AddFields(fields)
            } else {
                Transform::UpdateFields(fields)
            }
        }
        "delete_fields" => {
            let Settings { fields, .. } = settings(only(&at, table, &["fields"])?)?;
            let names = fields
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(i, field)| match field {
                    toml::Value::String(name) => Ok(name),
                    other => Err(format!("{at}.fields[{i}]: expected a field's name, found {}", other.type_str())),
                })
                .collect::<Result<_, _>>()?;
            Transform::DeleteFields(names)
        }
        "filter_fields" => {
            let filter =
                FilterFields::deserialize(toml::Value::Table(table)).map_err(|e| format!("{at}: {}", e.message()))?;
            for (i, pattern) in filter.patterns.iter().enumerate() {
                if let Some(ValuePattern::Between(low, high)) = pattern.value_pattern
                    && low > high
                {
                    return Err(format!("{at}.patterns[{i}].value_pattern.between: [{low}, {high}] is empty"));
                }
            }
            Transform::FilterFields(filter)
        }
        "unwrap_envelope" => {
            let Settings { field, .. } = settings(only(&at, table, &["field"])?)?;
            match field {
                Some(field) if !field.is_empty() => Transform::UnwrapEnvelope(field),
                _ => return Err(format!("{at}.field: must name the field whose value is the record")),
            }
        }
        _ if table.contains_key("component") => {
            let mut component = ComponentTransform::deserialize(toml::Value::Table(table))
                .map_err(|e| format!("{at}: {}", e.message()))?;
            if component.component.as_os_str().is_empty() {
                return Err(format!("{at}.component: must name the transform's component file"));
            }
            component.name = name.to_string();
            Transform::Component(component)
        }
        other => {
            return Err(format!(
                "transforms.{other}: unknown transform (ferry has {KNOWN}; a transform of your own names its \
                 `component` file)"
            ));
        }
    };
    Ok(Some(transform))
}

/// A converting transform's settings: the conversions its codecs can make, refused
/// by name where Iggy's settings ask for what ferry does not do.
fn convert(at: &str, name: &str, format: Schema, table: toml::Table) -> Result<ConvertTransform, String> {
    let name = match name {
        "proto_convert" => "proto_convert",
        "flat_buffer_convert" => "flat_buffer_convert",
        _ => "avro_convert",
    };
    let mut keys = vec!["source_format", "target_format", "field_mappings", "conversion_options"];
    if format == Schema::Avro {
        keys.extend(["schema_json", "schema_path"]);
    }
    let refused = match format {
        // Iggy's schema-driven protobuf (a .proto file compiled at load): ferry has
        // the `Any` wrapper only, which is what Iggy's runtime decodes streams with.
        Schema::Proto => &["schema_path", "message_type", "descriptor_set", "schema_registry_url", "include_paths"][..],
        Schema::FlatBuffer => &["schema_path", "root_table_name", "include_paths"][..],
        _ => &[][..],
    };
    if let Some(key) = table.keys().find(|key| refused.contains(&key.as_str())) {
        return Err(format!(
            "{at}.{key}: ferry does not support this yet (it converts {} with {}); remove the key",
            format.name(),
            if format == Schema::Proto {
                "the Any wrapper, as a stream's schema = \"proto\" does"
            } else {
                "the layout a stream's schema uses"
            }
        ));
    }
    let mut table = only(at, table, &keys)?;
    let format_of = |table: &mut toml::Table, key: &str| -> Result<Schema, String> {
        match table.remove(key) {
            Some(toml::Value::String(value)) => {
                Schema::named(&value).map_err(|problem| format!("{at}.{key}: {problem}"))
            }
            Some(other) => Err(format!("{at}.{key}: expected a format's name, found {}", other.type_str())),
            None => Err(format!("{at}.{key}: missing (Iggy's runtime requires it too)")),
        }
    };
    let source_format = format_of(&mut table, "source_format")?;
    let target_format = format_of(&mut table, "target_format")?;
    let plain = |schema: Schema| matches!(schema, Schema::Json | Schema::Text | Schema::Raw);
    let pair_is_known = source_format == target_format
        || (source_format == format && plain(target_format))
        || (plain(source_format) && target_format == format);
    if !pair_is_known {
        return Err(format!(
            "{at}: converting {} to {} is not something {name} does; it converts between {} and json, text or raw",
            source_format.name(),
            target_format.name(),
            format.name()
        ));
    }
    let field_mappings = match table.remove("field_mappings") {
        None => Vec::new(),
        Some(toml::Value::Table(mappings)) => mappings
            .into_iter()
            .map(|(from, to)| match to {
                toml::Value::String(to) => Ok((from, to)),
                other => Err(format!("{at}.field_mappings.{from}: expected the new name, found {}", other.type_str())),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(format!("{at}.field_mappings: expected a table of old = \"new\", found {}", other.type_str()));
        }
    };
    if let Some(options) = table.remove("conversion_options") {
        // Iggy's options change how JSON is shown (pretty_json) or what is checked;
        // none changes a record's content, and ferry writes compact JSON.
        let toml::Value::Table(options) = options else {
            return Err(format!("{at}.conversion_options: expected a table"));
        };
        if let Some(key) = options.keys().find(|key| {
            key.as_str() != "strict_mode" && key.as_str() != "validate_messages" && key.as_str() != "verify_buffers"
        }) {
            return Err(format!(
                "{at}.conversion_options.{key}: ferry does not support this (it writes compact JSON, and checks every record); remove the key"
            ));
        }
    }
    let avro = match (table.remove("schema_json"), table.remove("schema_path")) {
        (Some(toml::Value::String(json)), None) => Some(AvroSchema::Json(json)),
        (None, Some(toml::Value::String(path))) => Some(AvroSchema::Path(path.into())),
        (None, None) if format == Schema::Avro && source_format != target_format => {
            return Err(format!("{at}: needs the Avro schema: schema_json or schema_path"));
        }
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(format!("{at}.schema_json: and schema_path are both set; give the schema one way"));
        }
        _ => return Err(format!("{at}.schema_json: expected a string (the schema, or the path of its file)")),
    };
    Ok(ConvertTransform { name, source_format, target_format, field_mappings, avro })
}

/// The keys a transform's table may hold besides `enabled`.
#[derive(Deserialize)]
struct Settings {
    fields: Option<Vec<toml::Value>>,
    field: Option<String>,
}

/// `table`, refusing a key not among `allowed`.
fn only(at: &str, table: toml::Table, allowed: &[&str]) -> Result<toml::Table, String> {
    match table.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!("{at}: unknown key `{key}` (expected enabled, {})", allowed.join(", "))),
        None => Ok(table),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Transforms, String> {
        #[derive(Deserialize)]
        struct Holder {
            transforms: Transforms,
        }
        toml::from_str::<Holder>(text).map(|h| h.transforms).map_err(|e| e.to_string())
    }

    #[test]
    fn transforms_are_read_as_iggy_writes_them_in_the_order_written_and_disabled_ones_left_out() {
        let transforms = read(
            r#"
[transforms.unwrap_envelope]
enabled = true
field = "data"

[transforms.add_fields]
enabled = true
fields = [{ key = "source", value.static = "orders" }, { key = "at", value.computed = "timestamp_millis" }]

[transforms.delete_fields]
enabled = false
fields = ["secret"]

[transforms.update_fields]
enabled = true
[[transforms.update_fields.fields]]
key = "status"
value.static = 7
condition = "key_exists"

[transforms.filter_fields]
enabled = true
keep_fields = ["id"]
include_matching = false
patterns = [{ key_pattern.regex = "^tmp_" }, { value_pattern = "is_null" }, { value_pattern.between = [1.0, 9.5] }]
"#,
        )
        .unwrap();
        let names: Vec<&str> = transforms
            .0
            .iter()
            .map(|t| match t {
                Transform::UnwrapEnvelope(_) => "unwrap_envelope",
                Transform::AddFields(_) => "add_fields",
                Transform::UpdateFields(_) => "update_fields",
                Transform::FilterFields(_) => "filter_fields",
                Transform::DeleteFields(_) => "delete_fields",
                Transform::Component(_) | Transform::Convert(_) => "another",
            })
            .collect();
        assert_eq!(names, ["unwrap_envelope", "add_fields", "update_fields", "filter_fields"]);
        let Transform::AddFields(fields) = &transforms.0[1] else { unreachable!() };
        assert_eq!(fields[0].value, FieldValue::Static("orders".into()));
        assert_eq!(fields[1].value, FieldValue::Computed(Computed::TimestampMillis));
        let Transform::UpdateFields(fields) = &transforms.0[2] else { unreachable!() };
        assert_eq!((fields[0].condition, &fields[0].value), (Condition::KeyExists, &FieldValue::Static(7.into())));
        let Transform::FilterFields(filter) = &transforms.0[3] else { unreachable!() };
        assert!(!filter.include_matching);
        assert_eq!(filter.patterns[2].value_pattern, Some(ValuePattern::Between(1.0, 9.5)));
    }

    #[test]
    fn settings_are_shown_as_written_and_read_back_the_same() {
        let text = r#"
[transforms.update_fields]
enabled = true
fields = [{ key = "a", value.computed = "uuid_v7", condition = "key_not_exists" }, { key = "b", value.static = [1] }]

[transforms.filter_fields]
enabled = true
patterns = [{ key_pattern.regex = "^x" }, { value_pattern = "is_null" }, { value_pattern.between = [1.0, 2.5] }]
"#;
        let transforms = read(text).unwrap();
        let shown: Vec<(&str, serde_json::Value)> = transforms.0.iter().map(|t| (t.name(), t.settings())).collect();
        assert_eq!(shown[0].0, "update_fields");
        assert_eq!(
            shown[0].1,
            serde_json::json!({"enabled": true, "fields": [
                {"key": "a", "value": {"computed": "uuid_v7"}, "condition": "key_not_exists"},
                {"key": "b", "value": {"static": [1]}}]})
        );
        assert_eq!(
            shown[1].1,
            serde_json::json!({"enabled": true, "include_matching": true, "keep_fields": [], "patterns": [
                {"key_pattern": {"regex": "^x"}}, {"value_pattern": "is_null"},
                {"value_pattern": {"between": [1.0, 2.5]}}]})
        );
        // What is shown reads back as the same transforms.
        let mut again = toml::Table::new();
        for (name, settings) in shown {
            again.insert(name.to_string(), toml::Value::try_from(settings).unwrap());
        }
        let again: Transforms = toml::Value::Table(again).try_into().unwrap();
        assert_eq!(again, transforms);
    }

    #[test]
    fn a_mistake_in_a_transform_names_it_and_the_key() {
        for (text, words) in [
            ("[transforms.add_fields]\nfields = []", "transforms.add_fields.enabled: missing"),
            ("[transforms.rename_fields]\nenabled = true", "transforms.rename_fields: unknown transform"),
            ("[transforms.rename_fields]\nenabled = true", "names its `component` file"),
            ("[transforms.mine]\nenabled = true\ncomponent = \"\"", "transforms.mine.component: must name"),
            (
                "[transforms.mine]\nenabled = true\ncomponent = \"m.wasm\"\nconfig = {}",
                "transforms.mine: unknown field `config`",
            ),
            ("[transforms.add_fields]\nenabled = true\ncomponent = \"m.wasm\"", "unknown key `component`"),
            ("[transforms.proto_convert]\nenabled = true", "transforms.proto_convert.source_format: missing"),
            (
                "[transforms.proto_convert]\nenabled = true\nsource_format = \"proto\"\ntarget_format = \"json\"\n\
                 message_type = \"a.B\"",
                "transforms.proto_convert.message_type: ferry does not support this yet",
            ),
            (
                "[transforms.avro_convert]\nenabled = true\nsource_format = \"avro\"\ntarget_format = \"proto\"",
                "converting avro to proto is not something avro_convert does",
            ),
            (
                "[transforms.avro_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"avro\"",
                "transforms.avro_convert: needs the Avro schema",
            ),
            (
                "[transforms.flat_buffer_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \
                 \"flatbuffer\"",
                "transforms.flat_buffer_convert.target_format: \"flatbuffer\" is none of",
            ),
            (
                "[transforms.avro_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"json\"\n\
                 conversion_options = { pretty_json = true }",
                "conversion_options.pretty_json: ferry does not support this",
            ),
            ("[transforms.unwrap_envelope]\nenabled = true\nfield = \"\"", "transforms.unwrap_envelope.field: must"),
            ("[transforms.delete_fields]\nenabled = true\nfield = [\"a\"]", "unknown key `field`"),
            (
                "[transforms.add_fields]\nenabled = true\nfields = [{ key = \"a\", value.computed = \"uuid_v9\" }]",
                "transforms.add_fields.fields[0]: unknown variant `uuid_v9`",
            ),
            (
                "[transforms.add_fields]\nenabled = true\nfields = [{ key = \"a\", value.static = 1, condition = \
                 \"key_exists\" }]",
                "only update_fields sets fields by a condition",
            ),
            (
                "[transforms.filter_fields]\nenabled = true\npatterns = [{ key_pattern.regex = \"(\" }]",
                "transforms.filter_fields: invalid regex \"(\": regex parse error",
            ),
            (
                "[transforms.filter_fields]\nenabled = true\npatterns = [{ value_pattern.between = [9.0, 1.0] }]",
                "between: [9, 1] is empty",
            ),
        ] {
            let error = read(text).unwrap_err();
            assert!(error.contains(words), "{text}: {error}");
        }
    }

    #[test]
    fn iggys_converting_transforms_are_read_with_their_formats_mappings_and_schema() {
        let transforms = read(
            "[transforms.avro_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"avro\"\n\
             schema_path = \"order.avsc\"\nfield_mappings = { id = \"seq\" }\n\
             conversion_options = { strict_mode = true }\n\
             [transforms.flat_buffer_convert]\nenabled = true\nsource_format = \"flat_buffer\"\n\
             target_format = \"text\"",
        )
        .unwrap();
        assert_eq!(
            transforms.0,
            vec![
                Transform::Convert(ConvertTransform {
                    name: "avro_convert",
                    source_format: Schema::Json,
                    target_format: Schema::Avro,
                    field_mappings: vec![("id".into(), "seq".into())],
                    avro: Some(AvroSchema::Path("order.avsc".into())),
                }),
                Transform::Convert(ConvertTransform {
                    name: "flat_buffer_convert",
                    source_format: Schema::FlatBuffer,
                    target_format: Schema::Text,
                    field_mappings: vec![],
                    avro: None,
                }),
            ]
        );
        assert_eq!(
            transforms.0[0].settings(),
            serde_json::json!({"enabled": true, "source_format": "json", "target_format": "avro",
                "field_mappings": {"id": "seq"}, "schema_path": "order.avsc"})
        );
    }

    #[test]
    fn a_transform_of_ones_own_is_a_component_run_in_its_place_in_the_chain() {
        let transforms = read(
            r#"
[transforms.add_fields]
enabled = true
fields = [{ key = "source", value.static = "orders" }]

[transforms.redact]
enabled = true
component = "transforms/redact.wasm"
plugin_config = { fields = ["email"] }

[transforms.off]
enabled = false
component = "off.wasm"
"#,
        )
        .unwrap();
        assert_eq!(transforms.0.len(), 2, "the disabled component is left out");
        let Transform::Component(redact) = &transforms.0[1] else { panic!("{:?}", transforms.0[1]) };
        assert_eq!((redact.name.as_str(), redact.component.to_str()), ("redact", Some("transforms/redact.wasm")));
        assert_eq!(redact.plugin_config_json(), r#"{"fields":["email"]}"#);
        assert_eq!(transforms.0[1].name(), "redact");
        assert_eq!(
            transforms.0[1].settings(),
            serde_json::json!({ "enabled": true, "component": "transforms/redact.wasm", "plugin_config": { "fields": ["email"] } })
        );
        let mut transforms = transforms;
        assert_eq!(transforms.paths_mut().count(), 1);
        assert_eq!(transforms.components().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["redact"]);
    }
}
