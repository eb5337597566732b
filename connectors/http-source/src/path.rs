//! JSONPath-style paths into an answer: `$` (the whole value), then `.name`,
//! `['name']` and `[index]` steps, as in `$.data.items` or `$['page-info'].next`.
//! The subset that names one value, which is all a records array or a cursor
//! needs; wildcards, filters and slices are refused when the config is read.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

/// One step into a value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A parsed path, and its text for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    text: String,
    steps: Vec<Step>,
}

impl Path {
    /// Parse `text`; the error says where it stops making sense.
    pub fn parse(text: &str) -> Result<Path, String> {
        let bad = |at: usize, why: &str| format!("{text:?} at byte {at}: {why}");
        let Some(mut rest) = text.strip_prefix('$') else {
            return Err(bad(0, "a path starts with `$`"));
        };
        let mut steps = Vec::new();
        while !rest.is_empty() {
            let at = text.len() - rest.len();
            if let Some(after) = rest.strip_prefix('.') {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                let name = &after[..end];
                if name.is_empty() || name == "*" {
                    return Err(bad(at, "`.` is followed by a field name"));
                }
                steps.push(Step::Key(name.to_string()));
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix("['") {
                let end = after.find("']").ok_or_else(|| bad(at, "`['` is closed by `']`"))?;
                steps.push(Step::Key(after[..end].to_string()));
                rest = &after[end + 2..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = after.find(']').ok_or_else(|| bad(at, "`[` is closed by `]`"))?;
                let index = after[..end]
                    .parse()
                    .map_err(|_| bad(at, "`[...]` holds an index (0, 1, ...) or a quoted name (['a b'])"))?;
                steps.push(Step::Index(index));
                rest = &after[end + 1..];
            } else {
                return Err(bad(at, "a step is `.name`, `['name']` or `[index]`"));
            }
        }
        Ok(Path { text: text.to_string(), steps })
    }

    /// The value at this path in `value`, if there is one.
    pub fn select<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.steps.iter().try_fold(value, |value, step| match step {
            Step::Key(key) => value.get(key),
            Step::Index(index) => value.get(index),
        })
    }

    /// The same, in an answer not parsed into values: each step parses only the
    /// level it goes through, and what it reaches stays the answer's own text.
    pub fn select_raw<'a>(&self, raw: &'a RawValue) -> Option<&'a RawValue> {
        self.steps.iter().try_fold(raw, |raw, step| match step {
            Step::Key(key) => serde_json::from_str::<BTreeMap<String, &RawValue>>(raw.get()).ok()?.remove(key),
            Step::Index(index) => serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok()?.get(*index).copied(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl<'de> serde::Deserialize<'de> for Path {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Path::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_of_step_reaches_its_value() {
        let value = json!({"data": {"items": [1, 2], "page-info": {"next": "x"}}});
        let select = |text: &str| Path::parse(text).unwrap().select(&value).cloned();
        assert_eq!(select("$"), Some(value.clone()));
        assert_eq!(select("$.data.items"), Some(json!([1, 2])));
        assert_eq!(select("$.data.items[1]"), Some(json!(2)));
        assert_eq!(select("$.data['page-info'].next"), Some(json!("x")));
        assert_eq!(select("$.data.missing"), None);
        assert_eq!(select("$.data.items[5]"), None);
        let text = r#"{"data": {"items": [1, {"n": 2.50}], "page-info": {"next": "x"}}}"#;
        let raw: &RawValue = serde_json::from_str(text).unwrap();
        let select_raw = |path: &str| Path::parse(path).unwrap().select_raw(raw).map(RawValue::get);
        assert_eq!(select_raw("$.data.items[1]"), Some(r#"{"n": 2.50}"#), "the answer's own text");
        assert_eq!(select_raw("$.data['page-info'].next"), Some(r#""x""#));
        assert_eq!(select_raw("$.data.items.x"), None);
    }

    #[test]
    fn what_is_not_a_path_is_refused_saying_where() {
        for (text, why) in [
            ("data.items", "starts with `$`"),
            ("$.", "field name"),
            ("$.*", "field name"),
            ("$[*]", "index"),
            ("$['a'", "closed by `']`"),
            ("$x", "a step is"),
        ] {
            let error = Path::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
    }
}
