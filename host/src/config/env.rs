//! Environment overrides, so secrets need not be written into the file.
//!
//! `FERRY__<SECTION>__<KEY>=value` sets `[section] key = value`; the path may go as
//! deep as needed. Sources are addressed by their `key`:
//! `FERRY__SOURCES__RANDOM__PLUGIN_CONFIG__API_TOKEN=...` sets
//! `plugin_config.api_token` of the source whose key is `random`. Segments match
//! existing keys case-insensitively (`-` and `_` alike); a key that does not exist yet
//! is created in lower case. The value keeps the type of the value it replaces
//! (integer, float, boolean, string). For a key the file does not set, the value is
//! read as a TOML value when it is one (`9`, `true`, `"0123"` quoted to stay a
//! string) and as a plain string otherwise.

/// The prefix of override variables. Double underscore, so that `FERRY_LOG` and
/// friends are not mistaken for overrides.
pub const ENV_PREFIX: &str = "FERRY__";

/// One `FERRY__...` variable.
#[derive(Debug, Clone)]
pub struct Override {
    pub variable: String,
    path: Vec<String>,
    value: String,
}

/// The override variables among `vars`, in a stable order.
pub fn overrides(vars: impl IntoIterator<Item = (String, String)>) -> Vec<Override> {
    let mut found: Vec<Override> = vars
        .into_iter()
        .filter_map(|(variable, value)| {
            let rest = variable.strip_prefix(ENV_PREFIX)?;
            let path = rest.split("__").map(str::to_string).collect();
            Some(Override { variable, path, value })
        })
        .collect();
    found.sort_by(|a, b| a.variable.cmp(&b.variable));
    found
}

fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.chars().zip(b.chars()).all(|(x, y)| {
            let norm = |c: char| if c == '-' { '_' } else { c.to_ascii_lowercase() };
            norm(x) == norm(y)
        })
}

impl Override {
    /// Write this override into the parsed document.
    pub fn apply(&self, document: &mut toml::Table) -> Result<(), String> {
        let fail = |what: String| format!("environment variable {}: {what}", self.variable);
        if self.path.iter().any(|s| s.is_empty()) {
            return Err(fail("empty path segment (write FERRY__SECTION__KEY)".into()));
        }
        let mut table = document;
        let mut segments = self.path.as_slice();
        while let [segment, rest @ ..] = segments {
            if rest.is_empty() {
                let existing = table.keys().find(|k| same_key(k, segment)).cloned();
                let key = existing.unwrap_or_else(|| segment.to_ascii_lowercase());
                let value = typed_like(table.get(&key), &self.value).map_err(fail)?;
                table.insert(key, value);
                return Ok(());
            }
            if same_key(segment, "sources") && !rest.is_empty() && rest.len() >= 2 {
                // `SOURCES__<connector key>__...`: find that entry of the array.
                let sources = table
                    .get_mut("sources")
                    .and_then(|v| v.as_array_mut())
                    .ok_or_else(|| fail("the file has no [[sources]]".into()))?;
                let wanted = &rest[0];
                let entry = sources
                    .iter_mut()
                    .filter_map(|v| v.as_table_mut())
                    .find(|t| t.get("key").and_then(|k| k.as_str()).is_some_and(|k| same_key(k, wanted)))
                    .ok_or_else(|| fail(format!("no source has the key `{}`", wanted.to_ascii_lowercase())))?;
                table = entry;
                segments = &rest[1..];
                continue;
            }
            let existing = table.keys().find(|k| same_key(k, segment)).cloned();
            let key = existing.unwrap_or_else(|| segment.to_ascii_lowercase());
            let next = table.entry(key.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = next.as_table_mut().ok_or_else(|| fail(format!("`{key}` is a value, not a table")))?;
            segments = rest;
        }
        Ok(())
    }
}

fn typed_like(existing: Option<&toml::Value>, text: &str) -> Result<toml::Value, String> {
    Ok(match existing {
        Some(toml::Value::Integer(_)) => {
            toml::Value::Integer(text.parse().map_err(|_| format!("expected an integer, found {text:?}"))?)
        }
        Some(toml::Value::Float(_)) => {
            toml::Value::Float(text.parse().map_err(|_| format!("expected a number, found {text:?}"))?)
        }
        Some(toml::Value::Boolean(_)) => {
            toml::Value::Boolean(text.parse().map_err(|_| format!("expected true or false, found {text:?}"))?)
        }
        Some(toml::Value::Table(_)) | Some(toml::Value::Array(_)) => {
            return Err("replaces a table or an array, which an environment variable cannot".into());
        }
        Some(toml::Value::String(_)) => toml::Value::String(text.to_string()),
        _ => {
            let parsed = toml::from_str::<toml::Table>(&format!("value = {text}")).ok();
            parsed.and_then(|mut t| t.remove("value")).unwrap_or_else(|| toml::Value::String(text.to_string()))
        }
    })
}
