//! Environment overrides, so secrets need not be written into the file.
//!
//! `FERRY__<SECTION>__<KEY>=value` sets `[section] key = value`; the path may go as
//! deep as needed. Entries of a list of tables (`[[sources]]`, `[[tenants]]`) are
//! addressed by their `key`: `FERRY__SOURCES__RANDOM__PLUGIN_CONFIG__API_TOKEN=...`
//! sets `plugin_config.api_token` of the source whose key is `random`.
//!
//! Variable names are written in capitals and have no `-`, so a segment matches a
//! key of the file when both have the same [`variable_form`] (`a-b`, `A_B` and `a_b`
//! are all `A_B`). Overrides carry secrets, and a secret must never reach a place it
//! was not meant for: a segment that matches two keys of a table (`api-token` and
//! `api_token`) or two entries of a list is an error naming both, and so are two
//! variables for the same place. (Validation refuses connector and tenant keys that
//! differ only in this way in the first place, see `validate::distinct_keys`.)
//!
//! A key that does not exist yet is created in lower case. The value keeps the type
//! of the value it replaces (integer, float, boolean, string). For a key the file does
//! not set, the value is read as a TOML value when it is one (`9`, `true`, `"0123"`
//! quoted to stay a string) and as a plain string otherwise.

use std::collections::HashMap;

/// The prefix of override variables. Double underscore, so that `FERRY_LOG` and
/// friends are not mistaken for overrides.
pub const ENV_PREFIX: &str = "FERRY__";

/// The top-level lists whose entries overrides address by `key`. Naming one the file
/// does not have is an error saying so, rather than a table created in its place.
const KEYED_LISTS: &[&str] = &["sources", "sinks", "tenants"];

/// One `FERRY__...` variable.
#[derive(Debug, Clone)]
pub struct Override {
    pub variable: String,
    path: Vec<String>,
    value: String,
}

/// How a key is written in a variable name: upper case, `-` as `_`. Two keys with the
/// same form cannot be told apart by an override.
pub fn variable_form(key: &str) -> String {
    key.chars().map(|c| if c == '-' { '_' } else { c.to_ascii_uppercase() }).collect()
}

/// The override variables among `vars`, in a stable order. Two variables for the same
/// place (`FERRY__STATE__PATH` and `FERRY__state__path`) are an error: which one won
/// would be an accident of sorting.
pub fn overrides(vars: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Override>, String> {
    let mut found: Vec<Override> = vars
        .into_iter()
        .filter_map(|(variable, value)| {
            let rest = variable.strip_prefix(ENV_PREFIX)?;
            let path = rest.split("__").map(str::to_string).collect();
            Some(Override { variable, path, value })
        })
        .collect();
    found.sort_by(|a, b| a.variable.cmp(&b.variable));
    let mut places: HashMap<Vec<String>, &str> = HashMap::new();
    for o in &found {
        let place = o.path.iter().map(|s| variable_form(s)).collect();
        if let Some(first) = places.insert(place, &o.variable) {
            return Err(format!("environment variables {first} and {} set the same key; keep one", o.variable));
        }
    }
    Ok(found)
}

impl Override {
    /// Write this override into the parsed document.
    pub fn apply(&self, document: &mut toml::Table) -> Result<(), String> {
        let fail = |what: String| format!("environment variable {}: {what}", self.variable);
        if self.path.iter().any(|s| s.is_empty()) {
            return Err(fail("empty path segment (write FERRY__SECTION__KEY)".into()));
        }
        let mut table = document;
        let mut rest = self.path.as_slice();
        let mut top = true;
        while let [segment, tail @ ..] = rest {
            let existing = only_match(table.keys(), segment).map_err(fail)?;
            if tail.is_empty() {
                let key = existing.unwrap_or_else(|| segment.to_ascii_lowercase());
                let value = typed_like(table.get(&key), &self.value).map_err(fail)?;
                table.insert(key, value);
                return Ok(());
            }
            if top && existing.is_none() && KEYED_LISTS.iter().any(|list| variable_form(list) == variable_form(segment))
            {
                return Err(fail(format!("the file has no [[{}]]", segment.to_ascii_lowercase())));
            }
            top = false;
            let key = existing.unwrap_or_else(|| segment.to_ascii_lowercase());
            match table.entry(key.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
                toml::Value::Table(next) => {
                    table = next;
                    rest = tail;
                }
                toml::Value::Array(entries) => {
                    // `<list>__<entry key>__<setting>...`: the entry is named by its key.
                    let (Some(wanted), Some(setting)) = (tail.first(), tail.get(1)) else {
                        return Err(fail(format!("names an entry of `{key}`, not a setting in it")));
                    };
                    if tail.len() == 2 && variable_form(setting) == "KEY" {
                        // Other overrides find the entry by its key: renaming it would
                        // make what they address depend on the order they are applied in.
                        return Err(fail(format!("the key of a `{key}` entry cannot be overridden")));
                    }
                    table = only_entry(entries, &key, wanted).map_err(fail)?;
                    rest = &tail[1..];
                }
                _ => return Err(fail(format!("`{key}` is a value, not a table"))),
            }
        }
        Ok(())
    }
}

/// The one key among `keys` that `segment` names, if any; two are an error.
fn only_match<'a>(keys: impl Iterator<Item = &'a String>, segment: &str) -> Result<Option<String>, String> {
    let form = variable_form(segment);
    let matching: Vec<&String> = keys.filter(|k| variable_form(k) == form).collect();
    match matching.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.to_string())),
        [a, b, ..] => Err(format!(
            "{form} matches both `{a}` and `{b}`, so it could set either; rename one of them so that they \
             differ by more than case and `-`/`_`"
        )),
    }
}

/// The one entry of the list `name` whose `key` is `wanted`.
fn only_entry<'a>(entries: &'a mut [toml::Value], name: &str, wanted: &str) -> Result<&'a mut toml::Table, String> {
    let form = variable_form(wanted);
    let key_of = |entry: &toml::Value| entry.get("key").and_then(|k| k.as_str()).map(str::to_string);
    let keys: Vec<Option<String>> = entries.iter().map(key_of).collect();
    let matching: Vec<usize> =
        (0..keys.len()).filter(|&i| keys[i].as_deref().is_some_and(|k| variable_form(k) == form)).collect();
    match matching.as_slice() {
        [] if keys.iter().all(Option::is_none) => {
            Err(format!("the entries of `{name}` have no `key`, so a variable cannot address one"))
        }
        [] => Err(format!("no [[{name}]] entry has the key `{}`", wanted.to_ascii_lowercase())),
        [one] => entries[*one].as_table_mut().ok_or_else(|| format!("`{name}` entry {one} is not a table")),
        [a, b, ..] => Err(format!(
            "{form} matches both [[{name}]] entries `{}` and `{}`, so it could set either",
            keys[*a].as_deref().unwrap_or_default(),
            keys[*b].as_deref().unwrap_or_default(),
        )),
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
