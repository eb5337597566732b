//! A connector file of Iggy's local provider, and which version of each key is
//! active.
//!
//! As Iggy's runtime reads `config_dir`: every `*.toml` file at its top (not a dot
//! file, not `Cargo.toml`), whatever its name; `type`, `key` and `version` come from
//! the content. Of several versions of one key, the one `.active_versions.toml` pins
//! (`[sources] KEY = N`, `[sinks] KEY = N`) is active, else the highest. Where Iggy
//! would quietly drop a connector or pick one of two (a pin to a version no file has,
//! two files with one version, several `[[streams]]` of a source, of which Iggy uses
//! the last), ferry refuses, naming the files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferry_contract::Role;
use serde::Deserialize as _;

use super::Keys;
use super::env::IggyEnv;
use super::http_provider::FetchedConfig;
use crate::schema::Schema;
use crate::{SinkConfig, SourceConfig};

/// The most connector files a directory may hold: a directory of a million files is
/// a mistake, not a config.
const MAX_FILES: usize = 10_000;

/// One connector's active version, as a Ferry `[[sources]]` or `[[sinks]]` entry.
pub(super) struct Connector {
    pub role: Role,
    /// Where it came from (a file, or the URL and key it was fetched as), for errors.
    pub origin: String,
    pub enabled: bool,
    /// Its `path` as written: a native plugin, or a component.
    pub plugin_path: String,
    /// The entry, without `path`.
    pub entry: toml::Table,
}

/// The active version of every connector in `dir`, by role and key.
pub(super) fn active(dir: &Path, env: &mut IggyEnv) -> Result<Vec<Connector>, String> {
    let mut versions: BTreeMap<(&str, String), BTreeMap<u64, Connector>> = BTreeMap::new();
    for file in connector_files(dir)? {
        let (role, key, version, connector) = read(&file, env)?;
        let known = versions.entry((role.noun(), key.clone())).or_default();
        if let Some(other) = known.get(&version) {
            return Err(format!(
                "{} and {}: both are version {version} of the {} `{key}`; give one another version",
                other.origin,
                file.display(),
                role.noun()
            ));
        }
        known.insert(version, connector);
    }
    let pins = pins(dir)?;
    let mut active = Vec::new();
    for ((role, key), mut known) in versions {
        let version = active_version(dir, &pins, role, &key, known.keys().copied())?;
        active.push(known.remove(&version).expect("the version is known"));
    }
    Ok(active)
}

/// Every version of the `role` `key` in `dir` (the file's table, with Iggy's
/// overrides), and which is active.
pub(super) fn versions_of(
    dir: &Path,
    role: Role,
    key: &str,
    env: &mut IggyEnv,
) -> Result<(Vec<(u64, toml::Table)>, u64), String> {
    let mut found = BTreeMap::new();
    for file in connector_files(dir)? {
        let table = read_table(&file, env)?;
        let named = |name: &str| table.get(name).and_then(toml::Value::as_str);
        if named("type") != Some(role.noun()) || named("key") != Some(key) {
            continue;
        }
        let version = table.get("version").and_then(toml::Value::as_integer).and_then(|v| u64::try_from(v).ok());
        let version = version.ok_or_else(|| format!("{} version: not a version number", file.display()))?;
        found.insert(version, table);
    }
    if found.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let active = active_version(dir, &pins(dir)?, role.noun(), key, found.keys().copied())?;
    Ok((found.into_iter().collect(), active))
}

/// Of `versions` (not none) of the `role` `key`, the one `pins` pins, else the highest.
fn active_version(
    dir: &Path,
    pins: &BTreeMap<(&'static str, String), u64>,
    role: &str,
    key: &str,
    versions: impl Iterator<Item = u64>,
) -> Result<u64, String> {
    let versions: Vec<u64> = versions.collect();
    match pins.get(&(role, key.to_string())).copied() {
        Some(version) if !versions.contains(&version) => {
            let have: Vec<String> = versions.iter().map(u64::to_string).collect();
            Err(format!(
                "{}: [{role}s] {key} = {version}, but no file in {} is version {version} of `{key}` (there are \
                 versions {})",
                dir.join(ACTIVE_VERSIONS).display(),
                dir.display(),
                have.join(", ")
            ))
        }
        Some(version) => Ok(version),
        None => Ok(versions.iter().copied().max().expect("a key has at least one version")),
    }
}

/// The file that pins versions, as Iggy's runtime writes it.
const ACTIVE_VERSIONS: &str = ".active_versions.toml";

/// The files of `dir` Iggy's local provider reads, by name.
fn connector_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: cannot list the directory: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: cannot list the directory: {e}", dir.display()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let read = path.extension().is_some_and(|e| e == "toml")
            && !name.starts_with('.')
            && !name.eq_ignore_ascii_case("cargo.toml")
            && path.is_file();
        if read {
            files.push(path);
        }
        if files.len() > MAX_FILES {
            return Err(format!("{}: more than {MAX_FILES} connector files", dir.display()));
        }
    }
    files.sort();
    Ok(files)
}

/// `.active_versions.toml`, by role and key.
fn pins(dir: &Path) -> Result<BTreeMap<(&'static str, String), u64>, String> {
    let file = dir.join(ACTIVE_VERSIONS);
    if !file.exists() {
        return Ok(BTreeMap::new());
    }
    let text = ferry_contract::files::read_regular_text(&file, crate::MAX_CONFIG_BYTES, "the file", "the limit")
        .map_err(|e| format!("{}: {}", file.display(), e.problem))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {}", file.display(), e.to_string().trim()))?;
    let mut pins = BTreeMap::new();
    for (section, role) in [("sources", Role::Source.noun()), ("sinks", Role::Sink.noun())] {
        let Some(keys) = table.get(section) else { continue };
        let keys = keys.as_table().ok_or_else(|| format!("{}: [{section}] must be a table", file.display()))?;
        for (key, version) in keys {
            let version = version.as_integer().and_then(|v| u64::try_from(v).ok());
            let version =
                version.ok_or_else(|| format!("{}: [{section}] {key}: not a version number", file.display()))?;
            pins.insert((role, key.clone()), version);
        }
    }
    Ok(pins)
}

/// The connectors Iggy's HTTP provider answered with: one active config per key.
pub(super) fn fetched(configs: Vec<FetchedConfig>, env: &mut IggyEnv) -> Result<Vec<Connector>, String> {
    let mut connectors = Vec::new();
    for FetchedConfig { origin, mut table } in configs {
        overrides(&origin, &mut table, env)?;
        connectors.push(connector(&origin, table)?.3);
    }
    Ok(connectors)
}

/// One connector file: its role, key and version, and what it means to ferry.
fn read(file: &Path, env: &mut IggyEnv) -> Result<(Role, String, u64, Connector), String> {
    connector(&file.display().to_string(), read_table(file, env)?)
}

/// One connector file's table, with Iggy's overrides for its key.
fn read_table(file: &Path, env: &mut IggyEnv) -> Result<toml::Table, String> {
    let text = ferry_contract::files::read_regular_text(file, crate::MAX_CONFIG_BYTES, "the file", "the limit")
        .map_err(|e| format!("{}: {}", file.display(), e.problem))?;
    let mut table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {}", file.display(), e.to_string().trim()))?;
    overrides(&file.display().to_string(), &mut table, env)?;
    Ok(table)
}

/// Iggy's overrides for a connector's key (of every version), by its type and key as
/// written.
fn overrides(origin: &str, table: &mut toml::Table, env: &mut IggyEnv) -> Result<(), String> {
    let named = |name: &str| table.get(name).and_then(toml::Value::as_str).map(str::to_string);
    if let (Some(role), Some(key)) = (named("type"), named("key")) {
        env.apply_connector(&role, &key, table).map_err(|p| format!("{origin}: {p}"))?;
    }
    Ok(())
}

/// One connector's config, as a file holds it (or its JSON form, fetched): its role,
/// key and version, and what it means to ferry; `origin` names it in errors.
fn connector(origin: &str, table: toml::Table) -> Result<(Role, String, u64, Connector), String> {
    let mut keys = Keys::new(origin, "", table);
    let role = match keys.string("type")?.as_deref() {
        Some("source") => Role::Source,
        Some("sink") => Role::Sink,
        Some(other) => return Err(keys.error("type", format!("{other:?} is neither \"source\" nor \"sink\""))),
        None => return Err(keys.error("type", "missing: \"source\" or \"sink\"")),
    };
    let key = keys.string("key")?;
    let key = keys.required("key", key)?;
    let enabled = keys.bool("enabled")?;
    let enabled = keys.required("enabled", enabled)?;
    let version = match keys.take("version") {
        Some(toml::Value::Integer(v)) if v >= 0 => v as u64,
        Some(other) => return Err(keys.error("version", format!("{other} is not a version number"))),
        None => return Err(keys.error("version", "missing (Iggy's runtime requires it too)")),
    };
    let name = keys.string("name")?;
    let name = keys.required("name", name)?;
    let path = keys.string("path")?;
    let plugin_path = keys.required("path", path)?;
    // `verbose` and `benchmark` stay: ferry's connectors take them.
    // `plugin_config_format` stays: the format the API shows plugin_config in.
    // `[transforms.*]` stays as it is: ferry's connectors take Iggy's transforms.
    let streams = match keys.take("streams") {
        Some(toml::Value::Array(streams)) => streams,
        Some(other) => {
            return Err(keys.error("streams", format!("expected [[streams]] tables, found {}", other.type_str())));
        }
        None => return Err(keys.error("streams", "missing (Iggy's runtime requires it too)")),
    };
    let streams = streams
        .into_iter()
        .enumerate()
        .map(|(i, s)| match s {
            toml::Value::Table(t) => Ok(Keys::new(origin, &format!("[[streams]] {}", i + 1), t)),
            other => Err(format!("{origin}: [[streams]] {}: expected a table, found {}", i + 1, other.type_str())),
        })
        .collect::<Result<Vec<_>, _>>()?;

    // What is left is ferry's own (limits, grants, secrets, tenant, plugin_config, ...).
    let mut entry = keys.rest();
    entry.insert("key".into(), key.clone().into());
    entry.insert("enabled".into(), enabled.into());
    entry.insert("name".into(), name.into());
    match role {
        Role::Source => source_streams(origin, &key, streams, &mut entry)?,
        Role::Sink => sink_streams(&key, streams, &mut entry)?,
    }
    // Checked here, so that a mistake names this file: the path is checked later.
    let mut checked = entry.clone();
    checked.insert("path".into(), "component.wasm".into());
    let problem = |e: toml::de::Error| format!("{origin}: {}", e.message());
    let schemas = match role {
        Role::Source => {
            let source = SourceConfig::deserialize(toml::Value::Table(checked)).map_err(problem)?;
            source.streams.iter().map(|stream| stream.schema()).collect::<Vec<_>>()
        }
        Role::Sink => {
            let sink = SinkConfig::deserialize(toml::Value::Table(checked)).map_err(problem)?;
            sink.streams.iter().map(|stream| stream.schema()).collect()
        }
    };
    if let Some((i, Err((key, problem)))) = schemas.into_iter().enumerate().find(|(_, schema)| schema.is_err()) {
        return Err(format!("{origin}: [[streams]] {} {key}: {problem}", i + 1));
    }
    Ok((role, key, version, Connector { role, origin: origin.to_string(), enabled, plugin_path, entry }))
}

/// A stream's `schema`, which Iggy's runtime requires: ferry's streams take it as
/// it is (and `avro_schema_json` / `avro_schema_path` with it).
fn schema(stream: &mut Keys) -> Result<(), String> {
    let schema = stream.string("schema")?;
    let schema = stream.required("schema", schema)?;
    Schema::named(&schema).map_err(|problem| stream.error("schema", problem))?;
    stream.table.insert("schema".into(), schema.into());
    Ok(())
}

/// A source's one `[[streams]]`: where it delivers.
fn source_streams(origin: &str, key: &str, streams: Vec<Keys>, entry: &mut toml::Table) -> Result<(), String> {
    let mut streams = streams.into_iter();
    let (Some(mut stream), None) = (streams.next(), streams.next()) else {
        return Err(format!(
            "{origin}: the source `{key}` needs exactly one [[streams]] entry (Iggy's runtime delivers to the last of \
             several, and to none of none)"
        ));
    };
    schema(&mut stream)?;
    // The producer's own batching: ferry sends each batch the guest returns whole, at once.
    stream.take("batch_length");
    stream.take("linger_time");
    let out = stream.rest();
    for required in ["stream", "topic"] {
        if !out.contains_key(required) {
            return Err(format!("{origin}: [[streams]] {required}: missing"));
        }
    }
    entry.insert("streams".into(), toml::Value::Array(vec![out.into()]));
    Ok(())
}

/// A sink's `[[streams]]`: what it reads, in one consumer group (Iggy's default
/// `iggy-connect-sink-KEY`, so a sink moved from Iggy's runtime goes on from the
/// offsets it stored there), in batches of `batch_length` (1000), polling every
/// `poll_interval` (5 ms).
fn sink_streams(key: &str, streams: Vec<Keys>, entry: &mut toml::Table) -> Result<(), String> {
    let mut settings: Option<(toml::Value, toml::Value, toml::Value)> = None;
    let mut out = Vec::new();
    for mut stream in streams {
        schema(&mut stream)?;
        let these = (
            stream.take("batch_length").unwrap_or(toml::Value::Integer(1000)),
            stream.take("poll_interval").unwrap_or_else(|| "5ms".into()),
            stream.take("consumer_group").unwrap_or_else(|| format!("iggy-connect-sink-{key}").into()),
        );
        match &settings {
            Some(first) if *first != these => {
                return Err(stream.error(
                    "batch_length, poll_interval, consumer_group",
                    "differ from the first [[streams]] entry's; ferry reads all of a sink's topics with one \
                     setting of each",
                ));
            }
            _ => settings = Some(these),
        }
        out.push(toml::Value::Table(stream.rest()));
    }
    if let Some((batch_length, poll_interval, consumer_group)) = settings {
        entry.insert("batch_length".into(), batch_length);
        entry.insert("poll_interval".into(), poll_interval);
        entry.insert("consumer_group".into(), consumer_group);
    }
    entry.insert("streams".into(), toml::Value::Array(out));
    Ok(())
}
