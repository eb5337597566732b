//! Iggy's environment overrides, with Iggy's names: `IGGY_CONNECTORS_<SECTION>_<KEY>`
//! for a key of the runtime file (`IGGY_CONNECTORS_IGGY_ADDRESS`,
//! `IGGY_CONNECTORS_HTTP_TLS_ENABLED`), `IGGY_CONNECTORS_<SOURCE|SINK>_<KEY>_<FIELD>`
//! for a connector file's (`..._SINK_STDOUT_STREAMS_0_TOPICS`, every version of
//! that key), and `..._PLUGIN_CONFIG_<FIELD>` for one of its `plugin_config` (a flat
//! key, lower-cased). Values are typed as Iggy types them: `[a,b]` a list, `true` /
//! `false`, a number, else a string; an empty value is no override.
//!
//! Iggy's runtime warns of a variable it does not know and goes on; ferry refuses
//! it, naming it, since it was meant to change something.

use std::collections::{BTreeMap, BTreeSet};

/// The runtime file's keys that a variable may set, by their path.
const RUNTIME_KEYS: &[&str] = &[
    "http.enabled",
    "http.address",
    "http.api_key",
    "http.cors.enabled",
    "http.cors.allowed_methods",
    "http.cors.allowed_origins",
    "http.cors.allowed_headers",
    "http.cors.exposed_headers",
    "http.cors.allow_credentials",
    "http.cors.allow_private_network",
    "http.tls.enabled",
    "http.tls.cert_file",
    "http.tls.key_file",
    "http.metrics.enabled",
    "http.metrics.endpoint",
    "iggy.address",
    "iggy.username",
    "iggy.password",
    "iggy.token",
    "iggy.tls.enabled",
    "iggy.tls.ca_file",
    "iggy.tls.domain",
    "state.path",
    "connectors.config_type",
    "connectors.config_dir",
    "connectors.base_url",
    "connectors.timeout",
    "telemetry.enabled",
    "telemetry.service_name",
    "telemetry.logs.transport",
    "telemetry.logs.endpoint",
    "telemetry.traces.transport",
    "telemetry.traces.endpoint",
    "logging.format",
];

/// A connector file's keys that a variable may set.
const CONNECTOR_KEYS: &[&str] = &["enabled", "name", "path", "version", "verbose", "benchmark", "plugin_config_format"];

/// The keys of a `[[streams]]` entry that a variable may set.
const STREAM_KEYS: &[&str] = &[
    "stream",
    "topic",
    "topics",
    "schema",
    "batch_length",
    "poll_interval",
    "consumer_group",
    "linger_time",
    "avro_schema_json",
    "avro_schema_path",
];

const PREFIX: &str = "IGGY_CONNECTORS_";

/// Variables Iggy's runtime reads itself, not as overrides.
const NOT_OVERRIDES: &[&str] = &["IGGY_CONNECTORS_CONFIG_PATH", "IGGY_CONNECTORS_ENV_PATH"];

/// The `IGGY_CONNECTORS_*` variables, and which of them were applied.
pub(super) struct IggyEnv {
    vars: BTreeMap<String, String>,
    /// A connector's variable applies to every version of its key, so it stays
    /// after it was applied once.
    applied: BTreeSet<String>,
}

impl IggyEnv {
    pub fn new(vars: &[(String, String)]) -> IggyEnv {
        let overrides = vars.iter().filter(|(name, value)| {
            name.starts_with(PREFIX) && !NOT_OVERRIDES.contains(&name.as_str()) && !value.is_empty()
        });
        IggyEnv { vars: overrides.cloned().collect(), applied: BTreeSet::new() }
    }

    /// Apply the variables naming keys of the runtime file to `document`.
    pub fn apply_runtime(&mut self, document: &mut toml::Table) -> Result<(), String> {
        for path in RUNTIME_KEYS {
            let name = format!("{PREFIX}{}", path.replace('.', "_").to_ascii_uppercase());
            if let Some(value) = self.vars.get(&name) {
                set(document, path, typed(value)).map_err(|p| format!("{name}: {p}"))?;
                self.applied.insert(name);
            }
        }
        Ok(())
    }

    /// Apply the variables naming keys of the connector `key` of `role` (`source`
    /// or `sink`) to its file's `table`.
    pub fn apply_connector(&mut self, role: &str, key: &str, table: &mut toml::Table) -> Result<(), String> {
        let prefix = format!("{PREFIX}{}_{}_", role.to_ascii_uppercase(), key.to_ascii_uppercase());
        for (name, value) in self.vars.iter().filter(|(name, _)| name.starts_with(&prefix)) {
            let Some(path) = connector_path(&name[prefix.len()..]) else { continue };
            // A connection string holds a password: the config keeps where it is, so
            // that ferry reads it as a secret and never prints it.
            let value = match path.as_str() {
                "plugin_config.connection_string" => {
                    toml::Value::Table(toml::Table::from_iter([("env".to_string(), toml::Value::String(name.clone()))]))
                }
                _ => typed(value),
            };
            set(table, &path, value).map_err(|p| format!("{name}: {p}"))?;
            self.applied.insert(name.clone());
        }
        Ok(())
    }

    /// Every variable was applied, or it is refused, naming it.
    pub fn finish(self) -> Result<(), String> {
        match self.vars.keys().find(|name| !self.applied.contains(*name)) {
            None => Ok(()),
            Some(name) => Err(format!(
                "the environment variable {name} overrides nothing: it names no key of the runtime file and no \
                 field of a connector ({PREFIX}<SOURCE|SINK>_<KEY>_<FIELD>)"
            )),
        }
    }
}

/// Where a connector variable's field (`STREAMS_0_TOPICS`) goes in its file.
fn connector_path(field: &str) -> Option<String> {
    let lower = field.to_ascii_lowercase();
    if CONNECTOR_KEYS.contains(&lower.as_str()) {
        return Some(lower);
    }
    if let Some(key) = lower.strip_prefix("plugin_config_").filter(|k| !k.is_empty()) {
        // A flat key, as Iggy's runtime sets it: `..._PLUGIN_CONFIG_HEADERS_X` is `headers_x`.
        return Some(format!("plugin_config.{}", key.replace('.', "_")));
    }
    let rest = lower.strip_prefix("streams_")?;
    let (index, key) = rest.split_once('_')?;
    let index: usize = index.parse().ok()?;
    STREAM_KEYS.contains(&key).then(|| format!("streams.{index}.{key}"))
}

/// `value` typed as Iggy's runtime types it.
fn typed(value: &str) -> toml::Value {
    let value = value.trim();
    if let Some(items) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        let items = items.split(',').map(str::trim).filter(|item| !item.is_empty());
        return toml::Value::Array(items.map(typed).collect());
    }
    match value {
        "true" => true.into(),
        "false" => false.into(),
        _ => value
            .parse::<i64>()
            .map(toml::Value::from)
            .or_else(|_| value.parse::<f64>().map(toml::Value::from))
            .unwrap_or_else(|_| value.into()),
    }
}

/// Set the key at `path` (`a.b.c`, a number indexing an array of tables, one past
/// its end adding one) of `table` to `value`.
fn set(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), String> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().expect("a path has a key");
    let mut at = table;
    let mut parts = parts.into_iter().peekable();
    while let Some(part) = parts.next() {
        let next_is_index = parts.peek().is_some_and(|p| p.parse::<usize>().is_ok());
        let entry = at.entry(part).or_insert_with(|| match next_is_index {
            true => toml::Value::Array(Vec::new()),
            false => toml::Value::Table(toml::Table::new()),
        });
        at = match entry {
            toml::Value::Table(inner) => inner,
            toml::Value::Array(list) => {
                let index: usize =
                    parts.next().and_then(|i| i.parse().ok()).ok_or_else(|| format!("`{part}` is a list"))?;
                if index == list.len() {
                    list.push(toml::Value::Table(toml::Table::new()));
                }
                let entries = list.len();
                match list.get_mut(index) {
                    Some(toml::Value::Table(inner)) => inner,
                    Some(_) => return Err(format!("`{part}` {index} is not a table")),
                    None => return Err(format!("`{part}` has {entries} entries, not {}", index + 1)),
                }
            }
            other => return Err(format!("`{part}` is a {}, not a table", other.type_str())),
        };
    }
    at.insert(last.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_typed_as_iggy_types_them_and_fields_land_where_iggy_puts_them() {
        assert_eq!(typed("[a, b]"), toml::Value::Array(vec!["a".into(), "b".into()]));
        assert_eq!(
            (typed("true"), typed("42"), typed("0.5"), typed("5ms")),
            (true.into(), 42.into(), 0.5.into(), "5ms".into())
        );
        assert_eq!(connector_path("STREAMS_0_TOPICS").as_deref(), Some("streams.0.topics"));
        assert_eq!(connector_path("PLUGIN_CONFIG_PRINT_PAYLOAD").as_deref(), Some("plugin_config.print_payload"));
        assert_eq!(connector_path("ENABLED").as_deref(), Some("enabled"));
        assert_eq!(connector_path("STREAMS_X_TOPICS"), None);
        assert_eq!(connector_path("LIMITS"), None);
    }

    #[test]
    fn a_connection_string_override_is_kept_as_where_it_is_never_as_its_value() {
        let name = "IGGY_CONNECTORS_SINK_PG_PLUGIN_CONFIG_CONNECTION_STRING";
        let mut env = IggyEnv::new(&[(name.to_string(), "postgresql://u:secret@h/d".to_string())]);
        let mut table: toml::Table = toml::from_str("[plugin_config]\nconnection_string = \"file's\"").unwrap();
        env.apply_connector("sink", "pg", &mut table).unwrap();
        env.finish().unwrap();
        let expected: toml::Table = toml::from_str(&format!("env = \"{name}\"")).unwrap();
        assert_eq!(table["plugin_config"]["connection_string"], toml::Value::Table(expected));
        assert!(!toml::to_string(&table).unwrap().contains("secret"));
    }
}
