//! Iggy's connectors runtime configuration, read as it is: the runtime's file
//! (`[iggy]`, `[http]`, `[state]`, `[connectors]` with the local provider's
//! `config_dir`) and the connector files in that directory, turned into the Ferry
//! config they mean, so that an Iggy user points `ferry run` at the files they
//! already have, and `ferry config from-iggy` prints that config to move to.
//!
//! Iggy's keys keep Iggy's meaning (its defaults, the active version of a connector,
//! a sink's default consumer group); Ferry's own keys may be added to the same files
//! (`[runtime]`, `[local_log]`, `[[tenants]]`, `[postgres.NAME]`, `[state] sync` in
//! the runtime's file; `limits`, `grants`, `secrets`, `tenant`, ... in a connector's);
//! what Ferry cannot honour yet is refused, naming the file and the key, never
//! skipped. A native plugin's `path` names a component by its connector's name (see
//! `components.rs`).
//!
//! * `runtime_file.rs`: the runtime's file, section by section;
//! * `connector_file.rs`: one connector file, and the active version of each key;
//! * `http_provider.rs`: the connectors' configs fetched from a URL (Iggy's HTTP
//!   provider) instead of read from `config_dir`;
//! * `components.rs`: the component a native plugin's `path` stands for;
//! * `postgres.rs`: Iggy's PostgreSQL connectors' `connection_string`, as a server
//!   the host serves them;
//! * `env.rs`: Iggy's `IGGY_CONNECTORS_*` environment overrides;
//! * `versions.rs`: every version of one connector's config, as Iggy's API shows them.

mod components;
mod connector_file;
mod env;
mod http_provider;
mod postgres;
mod runtime_file;
mod versions;

pub use versions::{ConfigVersion, versions};

use std::path::Path;

/// Whether `document` is an Iggy connectors runtime file: it has Iggy's
/// `[connectors]` section, which a Ferry config never has.
pub fn is_iggy_runtime(document: &toml::Table) -> bool {
    document.contains_key("connectors")
}

/// The Ferry config that the Iggy runtime file `file` (parsed as `document`) and the
/// connector files it names mean, as a TOML document; every problem names the file
/// it is in.
pub fn translate(file: &Path, document: toml::Table, vars: &[(String, String)]) -> Result<toml::Table, String> {
    let mut env = env::IggyEnv::new(vars);
    let ferry = runtime_file::translate(file, document, &mut env)?;
    env.finish()?;
    Ok(ferry)
}

/// The keys of one table of an Iggy file, taken one by one as they are understood,
/// so that whatever is left is a key nobody understood: an error naming it.
struct Keys {
    /// `<file>: [section]`, for errors.
    at: String,
    table: toml::Table,
}

impl Keys {
    /// The table `section` of `origin` (a file, or a fetched config).
    fn new(origin: impl std::fmt::Display, section: &str, table: toml::Table) -> Self {
        let at = match section {
            "" => origin.to_string(),
            section => format!("{origin}: {section}"),
        };
        Keys { at, table }
    }

    /// An error at this table's key `key`.
    fn error(&self, key: &str, problem: impl std::fmt::Display) -> String {
        format!("{} {key}: {problem}", self.at)
    }

    fn take(&mut self, key: &str) -> Option<toml::Value> {
        self.table.remove(key)
    }

    fn string(&mut self, key: &str) -> Result<Option<String>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.error(key, format!("expected a string, found {}", other.type_str()))),
        }
    }

    fn bool(&mut self, key: &str) -> Result<Option<bool>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(b)),
            Some(other) => Err(self.error(key, format!("expected true or false, found {}", other.type_str()))),
        }
    }

    fn table(&mut self, key: &str) -> Result<Option<toml::Table>, String> {
        match self.take(key) {
            None => Ok(None),
            Some(toml::Value::Table(t)) => Ok(Some(t)),
            Some(other) => Err(self.error(key, format!("expected a table, found {}", other.type_str()))),
        }
    }

    fn required<T>(&self, key: &str, value: Option<T>) -> Result<T, String> {
        value.ok_or_else(|| self.error(key, "missing (Iggy's runtime requires it too)"))
    }

    /// Whatever is left, handed on as it is (Ferry's own keys, checked where they
    /// land).
    fn rest(self) -> toml::Table {
        self.table
    }

    /// Nothing may be left.
    fn done(self, expected: &str) -> Result<(), String> {
        match self.table.keys().next() {
            None => Ok(()),
            Some(key) => Err(format!("{}: unknown key `{key}` (expected {expected})", self.at)),
        }
    }
}

/// A feature of Iggy's runtime that ferry does not have yet, as the error that says
/// so and what to do instead.
fn not_yet(at: String, what: &str, instead: &str) -> String {
    format!("{at}: {what}: ferry does not support this yet; {instead}")
}

/// When `text` (read from `file`) is an Iggy runtime file, the text of the Ferry
/// config it means with Iggy's overrides among `vars` applied (what `ferry config
/// from-iggy` prints, and `ferry run` runs).
pub fn as_ferry(file: &Path, text: &str, vars: &[(String, String)]) -> Result<Option<String>, String> {
    // A file that is not TOML is left to the Ferry parser, which says where.
    let Ok(document) = toml::from_str::<toml::Table>(text) else { return Ok(None) };
    if !is_iggy_runtime(&document) {
        return Ok(None);
    }
    let ferry = translate(file, document, vars)?;
    let text = toml::to_string(&ferry).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(Some(text))
}

#[cfg(test)]
mod tests;
