//! `plugin_config.columns`: which value of a message goes into which column of the
//! table, and the columns that make writing a message again change nothing. Checked
//! whole before anything reaches the server; every mistake names its key.

use std::fmt;

use ferry_guest::Error;
use ferry_guest::sql::quote_identifier;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};

/// The metadata a column can take, by the name written after `@`.
const METADATA: [(&str, Source); 8] = [
    ("@id", Source::Id),
    ("@stream", Source::Stream),
    ("@topic", Source::Topic),
    ("@partition", Source::Partition),
    ("@offset", Source::Offset),
    ("@origin_timestamp", Source::OriginTimestamp),
    ("@headers", Source::Headers),
    ("@payload", Source::Payload),
];

/// PostgreSQL's longest identifier, in bytes: it cuts longer names short, and the
/// value for the column would then silently be NULL.
const MAX_IDENTIFIER: usize = 63;

/// Where a column's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The message id in decimal, as the default layout's `id`.
    Id,
    Stream,
    Topic,
    Partition,
    Offset,
    OriginTimestamp,
    /// The headers as JSON, as the default layout stores them.
    Headers,
    /// The whole payload, which must be JSON.
    Payload,
    /// A field of the JSON object payload: the keys (or array indices) from the top.
    Field(Vec<String>),
}

/// The checked mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Each column (unquoted) and its source, in the order configured.
    pub columns: Vec<(String, Source)>,
    /// The columns of `ON CONFLICT (...)`: a message written again collides on them.
    pub conflict: Vec<String>,
    /// Update the row that collides (`DO UPDATE`) rather than leave it (`DO NOTHING`).
    pub upsert: bool,
}

/// `plugin_config.columns` as written: the columns in order, and each source as
/// any JSON value (checked in [`Mapping::check`], naming the column).
#[derive(Debug, Default)]
pub struct Columns(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Columns {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ColumnsVisitor;

        impl<'de> Visitor<'de> for ColumnsVisitor {
            type Value = Columns;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of column = \"source\"")
            }

            // A JSON object may name a column twice; the last would silently win.
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Columns, A::Error> {
                let mut columns: Vec<(String, serde_json::Value)> = Vec::new();
                while let Some((column, source)) = map.next_entry::<String, serde_json::Value>()? {
                    if columns.iter().any(|(c, _)| *c == column) {
                        return Err(serde::de::Error::custom(format!(
                            "plugin_config.columns names the column `{column}` twice"
                        )));
                    }
                    columns.push((column, source));
                }
                Ok(Columns(columns))
            }
        }

        deserializer.deserialize_map(ColumnsVisitor)
    }
}

impl Mapping {
    /// The mapping, when `columns` is set; `conflict_columns` and `upsert` make sense
    /// only with it. `create_table` is refused with it: the sink cannot know the types
    /// the columns should have.
    pub fn check(
        columns: Option<Columns>,
        conflict_columns: Option<Vec<String>>,
        upsert: bool,
        create_table: bool,
    ) -> Result<Option<Mapping>, Error> {
        let Some(Columns(columns)) = columns else {
            if conflict_columns.is_some() || upsert {
                let key = if upsert { "upsert" } else { "conflict_columns" };
                return Err(Error::msg(format!(
                    "plugin_config.{key} applies to mapped columns: set plugin_config.columns too, or leave it \
                     out for the default layout (exactly once by id)"
                )));
            }
            return Ok(None);
        };
        if columns.is_empty() {
            return Err(Error::msg(
                "plugin_config.columns is empty: map at least one column, e.g. { order_id = \"order_id\", id = \"@id\" }",
            ));
        }
        if create_table {
            return Err(Error::msg(
                "plugin_config.create_table creates the default layout, and plugin_config.columns maps into a table \
                 of your own: create that table yourself (the sink cannot know the columns' types), with a unique \
                 index on the conflict columns, and leave create_table out",
            ));
        }
        let columns = columns
            .into_iter()
            .map(|(column, source)| {
                let checked = check_column(&column).and_then(|()| Source::parse(&source));
                checked
                    .map(|source| (column.clone(), source))
                    .map_err(|e| e.context(format!("plugin_config.columns.{column}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let conflict = match conflict_columns {
            Some(conflict) => check_conflict(&columns, conflict)?,
            None => {
                let ids: Vec<String> =
                    columns.iter().filter(|(_, source)| *source == Source::Id).map(|(c, _)| c.clone()).collect();
                if ids.is_empty() {
                    return Err(Error::msg(
                        "plugin_config.columns: map a column to \"@id\" or set conflict_columns, so that a batch \
                         written again inserts nothing new",
                    ));
                }
                ids
            }
        };
        if upsert && columns.iter().all(|(column, _)| conflict.contains(column)) {
            return Err(Error::msg(format!(
                "plugin_config.upsert: every mapped column is a conflict column ({}), so an upsert has nothing to \
                 update: map more columns, or leave upsert out",
                conflict.join(", ")
            )));
        }
        Ok(Some(Mapping { columns, conflict, upsert }))
    }

    /// Whether a column takes a field of the payload, which must then be an object.
    pub fn reads_fields(&self) -> bool {
        self.columns.iter().any(|(_, source)| matches!(source, Source::Field(_)))
    }
}

/// A column name the connector can quote and the server keeps whole.
fn check_column(column: &str) -> Result<(), Error> {
    quote_identifier(column)?;
    if column.len() > MAX_IDENTIFIER {
        return Err(Error::msg(format!(
            "the column name is longer than PostgreSQL's {MAX_IDENTIFIER} bytes, which it would cut short"
        )));
    }
    Ok(())
}

/// `conflict_columns`: each one a mapped column, once.
fn check_conflict(columns: &[(String, Source)], conflict: Vec<String>) -> Result<Vec<String>, Error> {
    if conflict.is_empty() {
        return Err(Error::msg(
            "plugin_config.conflict_columns is empty: name the mapped columns a unique index of the table covers",
        ));
    }
    for (i, name) in conflict.iter().enumerate() {
        if !columns.iter().any(|(column, _)| column == name) {
            return Err(Error::msg(format!(
                "plugin_config.conflict_columns: `{name}` is not a column of plugin_config.columns; a conflict \
                 column must be mapped, or every message would collide on its default"
            )));
        }
        if conflict[..i].contains(name) {
            return Err(Error::msg(format!("plugin_config.conflict_columns names `{name}` twice")));
        }
    }
    Ok(conflict)
}

impl Source {
    fn parse(source: &serde_json::Value) -> Result<Source, Error> {
        let Some(text) = source.as_str() else {
            return Err(Error::msg(format!(
                "must be a string (a payload field, a JSON pointer or @metadata), not {source}"
            )));
        };
        if text.is_empty() {
            return Err(Error::msg(format!(
                "is empty: name a payload field (`customer`), a JSON pointer (`/details/total`) or one of {}",
                metadata_names()
            )));
        }
        if text.starts_with('@') {
            return METADATA.iter().find(|(name, _)| *name == text).map(|(_, source)| source.clone()).ok_or_else(
                || {
                    Error::msg(format!(
                        "`{text}` is no metadata the sink knows: use one of {} (for a payload field whose name starts \
                         with @, write a pointer: `/{text}`)",
                        metadata_names()
                    ))
                },
            );
        }
        match text.strip_prefix('/') {
            Some(pointer) => {
                pointer.split('/').map(unescape).collect::<Result<_, _>>().map(Source::Field).map_err(|bad| {
                    Error::msg(format!("`{text}` is not a JSON pointer: `{bad}` (write `~0` for ~ and `~1` for /)"))
                })
            }
            None => Ok(Source::Field(vec![text.to_string()])),
        }
    }
}

/// A pointer's segment with `~1` and `~0` decoded; an `~` followed by anything else
/// is an error (RFC 6901).
fn unescape(segment: &str) -> Result<String, String> {
    let mut out = String::with_capacity(segment.len());
    let mut chars = segment.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('~'),
            Some('1') => out.push('/'),
            _ => return Err(segment.to_string()),
        }
    }
    Ok(out)
}

fn metadata_names() -> String {
    METADATA.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(columns: serde_json::Value, conflict: Option<&[&str]>, upsert: bool) -> Result<Mapping, String> {
        let columns: Columns = serde_json::from_value(columns).map_err(|e| e.to_string())?;
        let conflict = conflict.map(|c| c.iter().map(|s| s.to_string()).collect());
        Mapping::check(Some(columns), conflict, upsert, false).map(Option::unwrap).map_err(|e| e.to_string())
    }

    #[test]
    fn sources_are_metadata_fields_or_pointers_and_the_id_columns_are_the_default_keys() {
        let mapping = check(
            json!({"key": "@id", "customer": "customer", "first": "/items/0/sku", "odd": "/a~1b/~0c/", "at": "/@x",
                   "when": "@origin_timestamp", "doc": "@payload"}),
            None,
            false,
        )
        .unwrap();
        let sources: Vec<_> = mapping.columns.iter().map(|(c, s)| (c.as_str(), s.clone())).collect();
        let field = |path: &[&str]| Source::Field(path.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            sources,
            [
                ("key", Source::Id),
                ("customer", field(&["customer"])),
                ("first", field(&["items", "0", "sku"])),
                ("odd", field(&["a/b", "~c", ""])),
                ("at", field(&["@x"])),
                ("when", Source::OriginTimestamp),
                ("doc", Source::Payload),
            ],
            "in the order configured"
        );
        assert_eq!(mapping.conflict, ["key"]);
        assert!(mapping.reads_fields());
        assert!(!check(json!({"key": "@id", "doc": "@payload"}), None, false).unwrap().reads_fields());
    }

    #[test]
    fn conflict_columns_replace_the_default_and_upsert_needs_a_column_to_update() {
        let mapping = check(json!({"order_id": "order_id", "total": "/total"}), Some(&["order_id"]), true).unwrap();
        assert_eq!(mapping.conflict, ["order_id"]);
        assert!(mapping.upsert);
        let error = check(json!({"order_id": "order_id"}), Some(&["order_id"]), true).unwrap_err();
        assert!(error.contains("plugin_config.upsert") && error.contains("order_id"), "{error}");
    }

    #[test]
    fn mistakes_name_their_column_or_key() {
        let cases = [
            (json!({}), None, "plugin_config.columns is empty"),
            (json!({"a": "a"}), None, "map a column to \"@id\" or set conflict_columns"),
            (json!({"a": "@id", "b": ""}), None, "plugin_config.columns.b: is empty"),
            (json!({"a": "@id", "b": 3}), None, "plugin_config.columns.b: must be a string"),
            (json!({"a": "@id", "b": "@size"}), None, "plugin_config.columns.b: `@size` is no metadata"),
            (json!({"a": "@id", "b": "/x/~2"}), None, "plugin_config.columns.b: `/x/~2` is not a JSON pointer"),
            (json!({"a": "@id", "b\"c": "x"}), None, "plugin_config.columns.b\"c: `b\"c` has a double quote"),
            (json!({"a": "@id", "": "x"}), None, "plugin_config.columns.: is empty"),
            (json!({"a": "@id", "x".repeat(64): "x"}), None, "longer than PostgreSQL's 63 bytes"),
            (json!({"a": "@id"}), Some(&["b"][..]), "plugin_config.conflict_columns: `b` is not a column"),
            (json!({"a": "@id", "b": "b"}), Some(&["a", "a"][..]), "names `a` twice"),
            (json!({"a": "@id"}), Some(&[][..]), "plugin_config.conflict_columns is empty"),
            (json!(["a"]), None, "a table of column = \"source\""),
        ];
        for (columns, conflict, needle) in cases {
            let error = check(columns.clone(), conflict, false).unwrap_err();
            assert!(error.contains(needle), "{columns} {conflict:?}: {error}");
        }
        let twice = serde_json::from_str::<Columns>(r#"{"a": "@id", "a": "x"}"#).unwrap_err().to_string();
        assert!(twice.contains("names the column `a` twice"), "{twice}");
    }

    #[test]
    fn the_mapping_settings_need_columns_and_exclude_create_table() {
        let error = Mapping::check(None, None, true, false).unwrap_err().to_string();
        assert!(error.contains("plugin_config.upsert applies to mapped columns"), "{error}");
        let error = Mapping::check(None, Some(vec!["id".into()]), false, false).unwrap_err().to_string();
        assert!(error.contains("plugin_config.conflict_columns applies to mapped columns"), "{error}");
        assert_eq!(Mapping::check(None, None, false, true).unwrap(), None);
        let columns = serde_json::from_value(json!({"id": "@id"})).unwrap();
        let error = Mapping::check(Some(columns), None, false, true).unwrap_err().to_string();
        assert!(error.contains("create that table yourself"), "{error}");
    }
}
