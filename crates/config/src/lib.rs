//! # ferry-config: the configuration file as data
//!
//! The configuration file: one TOML document describing the host and its connectors.
//!
//! Names follow Iggy's connectors runtime where the concept is the same (`key`,
//! `enabled`, `path`, `[[streams]]` with `stream`/`topic`, `plugin_config`), so its
//! users feel at home. Every table rejects unknown keys: a typo must be an error that
//! names the file and the key, not a setting silently ignored. Relative paths are
//! resolved against the directory of the file, not the working directory, so the
//! same file works wherever `ferry` is started from.
//!
//! ```toml
//! [state]
//! path = "data/state"            # committed cursors, one file per connector
//!
//! [local_log]
//! path = "data/log"              # the embedded delivery target
//!
//! [[sources]]
//! key = "random"
//! path = "random_source.wasm"
//! poll_interval = "100ms"
//!
//! [[sources.streams]]
//! stream = "demo"
//! topic = "random"
//!
//! [sources.plugin_config]        # handed to the guest as JSON
//! messages_per_batch = 10
//! ```

mod compile_cache;
mod connector;
mod env;
mod host_paths;
mod http;
mod iggy;
pub mod iggy_runtime;
mod limits;
pub mod schema;
mod sink;
mod source;
mod tenant;
pub mod transforms;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_contract::Durability;
use ferry_contract::files;
use ferry_contract::settings::duration;
pub use ferry_contract::settings::{BackoffConfig, ByteSize, SecretSource};
use serde::Deserialize;

pub use compile_cache::CompileCacheSetting;
pub use connector::{ConnectorConfig, PluginConfigFormat};
pub use env::ENV_PREFIX;
pub use ferry_capabilities::{Grants, Sections};
pub use http::{CorsConfig, HttpConfig, HttpTls};
pub use iggy::{Credentials, IggyConfig, Secret, TlsConfig, Transport};
pub use limits::Limits;
pub use sink::{SinkConfig, SinkStreamConfig};
pub use source::{CreateTopic, Partitioning, SourceConfig, StreamConfig};
pub use tenant::{TenantConfig, TenantIggy};
pub use transforms::Transforms;
pub use validate::MAX_PARTITIONS_COUNT;

/// The config file `ferry run DIR` reads in a directory.
pub const DIR_CONFIG: &str = "config.toml";

/// The most a config file may hold: `ferry run /dev/zero` must not read forever, and
/// no honest config comes near it.
pub const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// A problem with the configuration, naming the file and what is wrong in it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", file.display())]
pub struct ConfigError {
    pub file: PathBuf,
    pub problem: String,
}

/// The whole configuration.
///
/// Every key of the file is one of the fields below or the host-wide section of a
/// capability (`[postgres.NAME]`, read into [`Config::sections`]); any other is an
/// error that names it. (The fields are not `deny_unknown_fields`: the capabilities'
/// sections are listed by `ferry-capabilities`, not here; see [`Config::parse`].)
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    #[serde(default)]
    pub runtime: RuntimeConfig,
    #[serde(default)]
    pub state: StateConfig,
    #[serde(default)]
    pub local_log: LocalLogConfig,
    /// When present, sources deliver to this Iggy server instead of the local log.
    #[serde(default)]
    pub iggy: Option<IggyConfig>,
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
    #[serde(default)]
    pub sources: Vec<SourceConfig>,
    #[serde(default)]
    pub sinks: Vec<SinkConfig>,
    /// The HTTP API and metrics, when present.
    #[serde(default)]
    pub http: Option<HttpConfig>,
    /// The capabilities' host-wide sections (PostgreSQL servers by name, for the
    /// connectors granted them).
    #[serde(skip)]
    pub sections: Sections,
    /// The file this came from.
    #[serde(skip)]
    pub file: PathBuf,
    /// Every top-level key that is none of the fields above: a capability's section,
    /// or a mistake.
    #[serde(flatten)]
    other_keys: BTreeMap<String, toml::Value>,
}

/// The top-level keys of [`Config`]'s own fields, for the error that names an unknown one.
const FIELDS: &[&str] = &["runtime", "state", "local_log", "iggy", "tenants", "sources", "sinks", "http"];

/// `[runtime]`: how the host as a whole behaves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// How long a graceful shutdown waits for outstanding batches to settle.
    #[serde(with = "duration")]
    pub shutdown_grace_period: Duration,
    /// How often each busy connector logs a progress line.
    #[serde(with = "duration")]
    pub progress_interval: Duration,
    /// How instance memory is allocated: `on-demand` (mmap per instance) or
    /// `pooling` (slots reserved up front, reused on every restart).
    pub allocator: Allocator,
    /// The largest component file ferry reads; a bigger one is refused before it is
    /// read (a component is read into memory whole, then compiled).
    pub max_component_bytes: ByteSize,
    /// How long compiling one component may take. Components are untrusted input to
    /// the compiler, so they are compiled in a child process bounded by this and by
    /// `compile_memory`.
    #[serde(with = "duration")]
    pub compile_timeout: Duration,
    /// The data memory (heap and private mappings) the compiling child process may use.
    pub compile_memory: ByteSize,
    /// Where compiled components are kept between runs (see [`Config::compile_cache_dir`]).
    pub compile_cache: CompileCacheSetting,
    /// How `ferry run` writes its log lines: `text` for people, `json` (one object a
    /// line) for a log collector.
    pub log_format: LogFormat,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            shutdown_grace_period: Duration::from_secs(10),
            progress_interval: Duration::from_secs(10),
            allocator: Allocator::default(),
            max_component_bytes: ByteSize::mib(64),
            compile_timeout: Duration::from_secs(60),
            compile_memory: ByteSize::gib(2),
            compile_cache: CompileCacheSetting::Default,
            log_format: LogFormat::Text,
        }
    }
}

/// `[runtime] log_format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `[runtime] allocator`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Allocator {
    #[default]
    OnDemand,
    Pooling,
}

/// `[state]`: where committed cursors live, and how they reach the disk.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    pub path: PathBuf,
    /// `every-batch`: each commit is on disk (fsynced) before the batch is ACKed.
    /// `interval`: each commit survives a crash of ferry at once, and is on disk
    /// within `sync_interval` (a power loss can take the cursor back that far:
    /// duplicates, never loss, with a target at least as durable).
    pub sync: StateSync,
    #[serde(with = "duration")]
    pub sync_interval: Duration,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig { path: PathBuf::from("state"), sync: StateSync::EveryBatch, sync_interval: Duration::from_secs(1) }
    }
}

/// `[state] sync`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateSync {
    #[default]
    EveryBatch,
    Interval,
}

impl StateConfig {
    /// How committed cursors reach the disk.
    pub fn durability(&self) -> Durability {
        match self.sync {
            StateSync::EveryBatch => Durability::EveryCommit,
            StateSync::Interval => Durability::Interval(self.sync_interval),
        }
    }
}

/// `[local_log]`: the embedded target used when no other target is configured.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocalLogConfig {
    pub path: PathBuf,
}

impl Default for LocalLogConfig {
    fn default() -> Self {
        LocalLogConfig { path: PathBuf::from("log") }
    }
}

impl Config {
    /// Read, override from the environment, and validate the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::load_with_env(path, std::env::vars())
    }

    /// [`Config::load`] with the environment given explicitly (for tests).
    pub fn load_with_env(path: &Path, vars: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let error = |problem: String| ConfigError { file: path.to_path_buf(), problem };
        // A directory, as an Iggy user has one: its `config.toml` (Iggy's runtime
        // file beside its `config_dir`, or a Ferry config).
        if path.is_dir() {
            let file = path.join(DIR_CONFIG);
            if !file.is_file() {
                return Err(error(format!(
                    "a directory without a {DIR_CONFIG}: give the config file, or the directory of Iggy's \
                     connectors runtime holding its {DIR_CONFIG}"
                )));
            }
            return Self::load_with_env(&file, vars);
        }
        let text = files::read_regular_text(path, MAX_CONFIG_BYTES, "the config file", "the limit for a config file")
            .map_err(|e| error(format!("cannot read the file: {}", e.problem)))?;
        Self::parse(path, &text, vars)
    }

    /// Parse `text` as if read from `path`.
    pub fn parse(
        path: &Path,
        text: &str,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let error = |problem: String| ConfigError { file: path.to_path_buf(), problem };
        // An Iggy connectors runtime file is read as the Ferry config it means.
        let vars: Vec<(String, String)> = vars.into_iter().collect();
        let translated;
        let text = match iggy_runtime::as_ferry(path, text, &vars).map_err(error)? {
            Some(ferry) => {
                translated = ferry;
                translated.as_str()
            }
            None => text,
        };
        // First the file alone, so that its mistakes are reported with line and column:
        // the config's own fields, then the capabilities' sections from the same text.
        let parsed = |e: toml::de::Error| error(e.to_string().trim_end().to_string());
        let mut config: Config = toml::from_str(text).map_err(parsed)?;
        config.sections = toml::from_str(text).map_err(parsed)?;
        let overrides = env::overrides(vars).map_err(error)?;
        if !overrides.is_empty() {
            let mut document: toml::Table = toml::from_str(text).map_err(|e| error(e.to_string()))?;
            for o in &overrides {
                o.apply(&mut document).map_err(error)?;
            }
            let applied = |e: toml::de::Error| {
                let names: Vec<_> = overrides.iter().map(|o| o.variable.as_str()).collect();
                error(format!("after applying {}: {}", names.join(", "), e.to_string().trim_end()))
            };
            config = Config::deserialize(toml::Value::Table(document.clone())).map_err(applied)?;
            config.sections = Sections::deserialize(toml::Value::Table(document)).map_err(applied)?;
        }
        if let Some(key) = config.other_keys.keys().find(|key| !ferry_capabilities::GRANTED.contains(&key.as_str())) {
            return Err(error(unknown_key(text, key)));
        }
        config.file = path.to_path_buf();
        config.resolve_paths();
        if let Some(iggy) = &config.iggy {
            iggy.validate().map_err(|p| error(format!("[iggy]: {p}")))?;
        }
        if let Some(http) = &config.http {
            http.validate().map_err(|p| error(format!("[http] {p}")))?;
        }
        validate::validate(&config).map_err(error)?;
        Ok(config)
    }

    /// The directory relative paths in the file are resolved against.
    pub fn base_dir(&self) -> PathBuf {
        match self.file.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    fn resolve_paths(&mut self) {
        let base = self.base_dir();
        let resolve = |path: &mut PathBuf| {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        };
        resolve(&mut self.state.path);
        resolve(&mut self.local_log.path);
        if let CompileCacheSetting::Dir(dir) = &mut self.runtime.compile_cache {
            resolve(dir);
        }
        if let Some(iggy) = &mut self.iggy {
            for path in [iggy.tls.ca_file.as_mut(), iggy.token_file.as_mut()].into_iter().flatten() {
                resolve(path);
            }
        }
        let sources = self.sources.iter_mut().map(|s| s as &mut dyn ConnectorConfig);
        for connector in sources.chain(self.sinks.iter_mut().map(|s| s as &mut dyn ConnectorConfig)) {
            connector.paths_mut().into_iter().for_each(resolve);
        }
        for tenant in &mut self.tenants {
            if let Some(path) = tenant.iggy.as_mut().and_then(|i| i.token_file.as_mut()) {
                resolve(path);
            }
        }
        self.sections.paths_mut().into_iter().for_each(resolve);
        if let Some(http) = &mut self.http {
            if let Some(SecretSource::File(path)) = &mut http.api_key {
                resolve(path);
            }
            if let Some(tls) = &mut http.tls {
                resolve(&mut tls.cert_file);
                resolve(&mut tls.key_file);
            }
        }
    }

    /// The source with this key.
    pub fn source(&self, key: &str) -> Option<&SourceConfig> {
        self.sources.iter().find(|s| s.key == key)
    }

    /// The sink with this key.
    pub fn sink(&self, key: &str) -> Option<&SinkConfig> {
        self.sinks.iter().find(|s| s.key == key)
    }

    /// Every connector, sources then sinks.
    pub fn connectors(&self) -> impl Iterator<Item = &dyn ConnectorConfig> {
        let sources = self.sources.iter().map(|s| s as &dyn ConnectorConfig);
        sources.chain(self.sinks.iter().map(|s| s as &dyn ConnectorConfig))
    }

    /// Every connector with where it is in the file (`sources[0]`, `sinks[2]`), for errors.
    pub(crate) fn connectors_with_places(&self) -> impl Iterator<Item = (String, &dyn ConnectorConfig)> {
        let sources =
            self.sources.iter().enumerate().map(|(i, s)| (format!("sources[{i}]"), s as &dyn ConnectorConfig));
        sources.chain(self.sinks.iter().enumerate().map(|(i, s)| (format!("sinks[{i}]"), s as &dyn ConnectorConfig)))
    }

    /// Every secret value of the config that can be read now: the connectors'
    /// `[secrets]`, the secrets their grants reach (PostgreSQL passwords), the Iggy
    /// credentials (the host's and the tenants') and the API key. What guest text
    /// and API answers are cleaned of (`ferry_contract::secrets`).
    pub fn secret_values(&self) -> Vec<String> {
        let mut secrets: Vec<String> = Vec::new();
        for connector in self.connectors() {
            secrets.extend(connector.secrets().values().filter_map(|source| source.read().ok()));
            secrets.extend(connector.grants().secrets(&self.sections));
        }
        if let Some(iggy) = &self.iggy {
            let tenants = self.tenants.iter().filter_map(|t| t.iggy.as_ref()).map(|own| iggy.with_credentials_of(own));
            for credentials in std::iter::once(iggy.clone()).chain(tenants).filter_map(|i| i.credentials().ok()) {
                secrets.push(match credentials {
                    Credentials::UsernamePassword { password, .. } => password.expose().to_string(),
                    Credentials::Token(token) => token.expose().to_string(),
                });
            }
        }
        if let Some(http) = &self.http {
            secrets.extend(http.read_api_key().ok().flatten());
        }
        secrets
    }

    /// The connector with this key, of whatever role.
    pub fn connector(&self, key: &str) -> Option<&dyn ConnectorConfig> {
        self.connectors().find(|c| c.key() == key)
    }

    /// The tenant with this key.
    pub fn tenant(&self, key: &str) -> Option<&TenantConfig> {
        self.tenants.iter().find(|t| t.key == key)
    }

    /// The slots the pooling allocator reserves: one live instance per enabled
    /// connector, and room for a restart to begin before the old instance is gone.
    pub fn pool_slots(&self) -> u32 {
        let enabled = self.connectors().filter(|c| c.enabled()).count();
        u32::try_from(enabled).unwrap_or(u32::MAX).saturating_mul(2).saturating_add(4)
    }

    /// The largest `limits.memory` of the enabled connectors: the size of each pool
    /// slot (the default limit when none is enabled).
    pub fn largest_memory(&self) -> ByteSize {
        let enabled = self.connectors().filter(|c| c.enabled());
        enabled.map(|c| c.limits().memory).max().unwrap_or(Limits::default().memory)
    }

    /// Where the committed state of `connector` lives: the tenant's namespace, or
    /// the top of the state directory for connectors without a tenant.
    pub fn state_dir_of(&self, connector: &dyn ConnectorConfig) -> PathBuf {
        match connector.tenant() {
            Some(tenant) => self.state.path.join("tenants").join(tenant),
            None => self.state.path.clone(),
        }
    }
}

/// The error for a top-level key that is neither a field of [`Config`] nor a
/// capability's section, at its line when it can be found.
fn unknown_key(text: &str, key: &str) -> String {
    let expected: Vec<String> = FIELDS.iter().chain(ferry_capabilities::GRANTED).map(|k| format!("`{k}`")).collect();
    let at = text.lines().position(|line| {
        let line = line.trim_start().trim_start_matches('[').trim_start_matches('"').trim_start();
        line.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with(['=', '.', ']', '"']))
    });
    let at = at.map(|index| format!("line {}: ", index + 1)).unwrap_or_default();
    format!("{at}unknown field `{key}`, expected one of {}", expected.join(", "))
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
