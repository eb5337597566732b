//! What every connector's config has, whatever its role: a key, a component, a
//! tenant, a sandbox (limits, grants, secrets), settings for the guest, and how it is
//! restarted. Sources and sinks declare their tables with [`connector_config!`],
//! which puts these fields in front of their own, so that each table still refuses
//! unknown keys (serde cannot flatten a shared struct into a table that does), and
//! everything about the shared part (defaults, validation, the guest's JSON config)
//! is written once, against [`ConnectorConfig`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_contract::Role;
use ferry_contract::settings::SecretSource;

use super::{BackoffConfig, Grants, Limits};

/// Declares a connector's config table: the fields every connector has, then
/// `$own`, and [`ConnectorConfig`] for it.
macro_rules! connector_config {
    (
        $(#[$meta:meta])*
        pub struct $name:ident ($role:expr) {
            $( $(#[$own_meta:meta])* pub $own:ident : $own_ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Unique name of the connector (among sources and sinks); names its
            /// state and its log lines.
            pub key: String,
            #[serde(default = "crate::connector::yes")]
            pub enabled: bool,
            /// A display name for status output.
            #[serde(default)]
            pub name: Option<String>,
            /// The `[[tenants]]` entry this connector belongs to.
            #[serde(default)]
            pub tenant: Option<String>,
            /// The component (`.wasm`) implementing the connector's world.
            pub path: std::path::PathBuf,
            /// Settings for the guest, handed to its `open` as JSON.
            #[serde(default)]
            pub plugin_config: Option<toml::Table>,
            /// The format the API shows `plugin_config` in by default (Iggy's key;
            /// the guest always gets JSON).
            #[serde(default)]
            pub plugin_config_format: Option<crate::PluginConfigFormat>,
            /// How long to wait before polling again after there was nothing.
            #[serde(default = "crate::connector::default_poll_interval", with = "ferry_contract::settings::duration")]
            pub poll_interval: std::time::Duration,
            /// How long one delivery may take before it counts as failed.
            #[serde(default = "crate::connector::default_delivery_timeout", with = "ferry_contract::settings::duration")]
            pub delivery_timeout: std::time::Duration,
            /// After this many failures in a row (NACKs, retries, guest errors) the
            /// connector is marked failed and restarted from its committed state.
            #[serde(default = "crate::connector::default_max_consecutive_nacks")]
            pub max_consecutive_nacks: u32,
            /// The pause before restarting a failed or trapped instance.
            #[serde(default = "crate::connector::default_restart_backoff")]
            pub restart_backoff: crate::BackoffConfig,
            /// What the guest may use: memory, time, batch sizes, log lines.
            #[serde(default)]
            pub limits: crate::Limits,
            /// What the guest may reach beyond clocks, random and its log (nothing by
            /// default).
            #[serde(default)]
            pub grants: crate::Grants,
            /// Values the host reads and adds to `plugin_config` under these names.
            #[serde(default)]
            pub secrets: std::collections::BTreeMap<String, ferry_contract::settings::SecretSource>,
            /// Log each batch it settles at info level, not debug (Iggy's `verbose`).
            #[serde(default)]
            pub verbose: bool,
            /// Log one line per settled batch with its stage times, on the target
            /// `iggy_connectors::benchmark` (Iggy's `benchmark`).
            #[serde(default)]
            pub benchmark: bool,
            /// The key Iggy's runtime knows it by, when ferry's differs: ferry's keys
            /// are one namespace, Iggy's one per role, so of a source and a sink of
            /// one key in Iggy's files the sink is `KEY-sink` here. Iggy's routes of
            /// the API (`/sinks/KEY/...`) answer by it.
            #[serde(default)]
            pub iggy_key: Option<String>,
            /// Changes to each record (Iggy's field transforms, and transform
            /// components), in the order written: after the guest, for a source;
            /// before it, for a sink.
            #[serde(default)]
            pub transforms: crate::Transforms,
            $( $(#[$own_meta])* pub $own : $own_ty, )*
        }

        impl crate::ConnectorConfig for $name {
            fn role(&self) -> ferry_contract::Role {
                $role
            }
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
            fn key(&self) -> &str {
                &self.key
            }
            fn iggy_key(&self) -> &str {
                self.iggy_key.as_deref().unwrap_or(&self.key)
            }
            fn enabled(&self) -> bool {
                self.enabled
            }
            fn name(&self) -> Option<&str> {
                self.name.as_deref()
            }
            fn tenant(&self) -> Option<&str> {
                self.tenant.as_deref()
            }
            fn path(&self) -> &std::path::Path {
                &self.path
            }
            fn plugin_config(&self) -> Option<&toml::Table> {
                self.plugin_config.as_ref()
            }
            fn poll_interval(&self) -> std::time::Duration {
                self.poll_interval
            }
            fn delivery_timeout(&self) -> std::time::Duration {
                self.delivery_timeout
            }
            fn max_consecutive_nacks(&self) -> u32 {
                self.max_consecutive_nacks
            }
            fn restart_backoff(&self) -> crate::BackoffConfig {
                self.restart_backoff
            }
            fn limits(&self) -> &crate::Limits {
                &self.limits
            }
            fn grants(&self) -> &crate::Grants {
                &self.grants
            }
            fn secrets(&self) -> &std::collections::BTreeMap<String, ferry_contract::settings::SecretSource> {
                &self.secrets
            }
            fn transforms(&self) -> &crate::Transforms {
                &self.transforms
            }
            fn verbose(&self) -> bool {
                self.verbose
            }
            fn plugin_config_format(&self) -> Option<crate::PluginConfigFormat> {
                self.plugin_config_format
            }
            fn schema_files(&self) -> Vec<&std::path::Path> {
                let streams = self.streams.iter().filter_map(|stream| stream.avro_schema_path.as_deref());
                let converters = self.transforms.0.iter().filter_map(|transform| match transform {
                    crate::transforms::Transform::Convert(crate::transforms::ConvertTransform {
                        avro: Some(crate::schema::AvroSchema::Path(path)),
                        ..
                    }) => Some(path.as_path()),
                    _ => None,
                });
                streams.chain(converters).collect()
            }
            fn paths_mut(&mut self) -> Vec<&mut std::path::PathBuf> {
                let mut paths = vec![&mut self.path];
                paths.extend(self.grants.paths_mut());
                paths.extend(self.transforms.paths_mut());
                paths.extend(self.streams.iter_mut().filter_map(|stream| stream.avro_schema_path.as_mut()));
                paths.extend(self.secrets.values_mut().filter_map(|secret| match secret {
                    ferry_contract::settings::SecretSource::File(path) => Some(path),
                    ferry_contract::settings::SecretSource::Env(_) => None,
                }));
                paths
            }
        }
    };
}

pub(crate) use connector_config;

/// The part of a connector's config every role has. (`Debug` shows all of it: a
/// reload compares connectors by it, see `ferry_host`'s `fingerprint.rs`.)
pub trait ConnectorConfig: std::fmt::Debug + Send + Sync {
    fn role(&self) -> Role;
    /// The whole config of its role (a `SourceConfig` or a `SinkConfig`), without
    /// looking it up by key among thousands.
    fn as_any(&self) -> &dyn std::any::Any;
    fn key(&self) -> &str;
    /// The key Iggy's runtime knows it by: its `iggy_key`, else its key.
    fn iggy_key(&self) -> &str;
    fn enabled(&self) -> bool;
    fn name(&self) -> Option<&str>;
    fn tenant(&self) -> Option<&str>;
    fn path(&self) -> &Path;
    fn plugin_config(&self) -> Option<&toml::Table>;
    fn poll_interval(&self) -> Duration;
    fn delivery_timeout(&self) -> Duration;
    fn max_consecutive_nacks(&self) -> u32;
    fn restart_backoff(&self) -> BackoffConfig;
    fn limits(&self) -> &Limits;
    fn grants(&self) -> &Grants;
    fn secrets(&self) -> &BTreeMap<String, SecretSource>;
    /// The record transforms, in the order they run.
    fn transforms(&self) -> &crate::Transforms;
    /// Whether each batch it settles is logged at info level.
    fn verbose(&self) -> bool;
    /// The format the API shows its `plugin_config` in by default.
    fn plugin_config_format(&self) -> Option<crate::PluginConfigFormat>;
    /// Every path in it, to resolve against the config file's directory.
    fn paths_mut(&mut self) -> Vec<&mut PathBuf>;
    /// The Avro schema files its streams and converting transforms read.
    fn schema_files(&self) -> Vec<&std::path::Path>;

    /// The guest's `plugin_config` as the JSON document its `open` receives, with
    /// its secrets read and added: a secret named `a.b` goes into table `a` under
    /// `b` (`"headers.Authorization"`: a header whose value is a secret). The error
    /// names the secret and where it was looked for, never a value.
    fn plugin_config_json(&self) -> Result<String, String> {
        let mut document = match self.plugin_config() {
            Some(table) => serde_json::to_value(table).map_err(|e| format!("plugin_config: {e}"))?,
            None => serde_json::Value::Object(Default::default()),
        };
        for (name, source) in self.secrets() {
            let value = source.read().map_err(|problem| format!("secrets.{name}: {problem}"))?;
            let mut path: Vec<&str> = name.split('.').collect();
            let leaf = path.pop().expect("split gives one part at least");
            let mut table = &mut document;
            for (depth, part) in path.iter().enumerate() {
                let object = table.as_object_mut().ok_or_else(|| {
                    format!("secrets.{name}: plugin_config.{} is not a table", path[..depth].join("."))
                })?;
                table = object.entry(part.to_string()).or_insert_with(|| serde_json::Value::Object(Default::default()));
            }
            let object = table
                .as_object_mut()
                .ok_or_else(|| format!("secrets.{name}: plugin_config.{} is not a table", path.join(".")))?;
            object.insert(leaf.to_string(), serde_json::Value::String(value));
        }
        Ok(document.to_string())
    }
}

pub(crate) fn yes() -> bool {
    true
}

pub(crate) fn default_poll_interval() -> Duration {
    Duration::from_millis(100)
}

pub(crate) fn default_delivery_timeout() -> Duration {
    Duration::from_secs(5)
}

pub(crate) fn default_max_consecutive_nacks() -> u32 {
    5
}

pub(crate) fn default_restart_backoff() -> BackoffConfig {
    BackoffConfig { initial: Duration::from_millis(500), max: Duration::from_secs(30) }
}

/// The backoff after a NACK (sources) or a retry (sinks).
pub(crate) fn default_retry_backoff() -> BackoffConfig {
    BackoffConfig { initial: Duration::from_millis(100), max: Duration::from_secs(10) }
}

/// `plugin_config_format`: how the API writes a connector's `plugin_config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginConfigFormat {
    Json,
    Yaml,
    Toml,
    Text,
}

impl PluginConfigFormat {
    /// `?format=` as written (any case).
    pub fn parse(text: &str) -> Option<PluginConfigFormat> {
        match text.to_ascii_lowercase().as_str() {
            "json" => Some(PluginConfigFormat::Json),
            "yaml" => Some(PluginConfigFormat::Yaml),
            "toml" => Some(PluginConfigFormat::Toml),
            "text" => Some(PluginConfigFormat::Text),
            _ => None,
        }
    }
}
