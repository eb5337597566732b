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

mod bounds;
mod bytesize;
mod duration;
mod env;
mod iggy;
mod sandbox;
mod tenant;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::files;

pub use bounds::MAX_POOL_RESERVATION;
pub use bytesize::ByteSize;
pub use env::ENV_PREFIX;
pub use iggy::{Credentials, IggyConfig, Secret, TlsConfig, Transport};
pub use sandbox::{DirGrant, Grants, Limits, SecretSource, split_host_port};
pub use tenant::{TenantConfig, TenantIggy};

/// The most a config file may hold: `ferry run /dev/zero` must not read forever, and
/// no honest config comes near it.
pub const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;

/// The most a secret's or a token's file may hold: a secret is a line, not a document.
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// A problem with the configuration, naming the file and what is wrong in it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", file.display())]
pub struct ConfigError {
    pub file: PathBuf,
    pub problem: String,
}

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
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
    /// The file this came from.
    #[serde(skip)]
    pub file: PathBuf,
}

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
        }
    }
}

/// `[runtime] allocator`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Allocator {
    #[default]
    OnDemand,
    Pooling,
}

/// `[state]`: where committed cursors live.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    pub path: PathBuf,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig { path: PathBuf::from("state") }
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

/// `[[sources]]`: one source connector.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Unique name of the connector; names its state and its log lines.
    pub key: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A display name for status output.
    #[serde(default)]
    pub name: Option<String>,
    /// The `[[tenants]]` entry this connector belongs to.
    #[serde(default)]
    pub tenant: Option<String>,
    /// The component (`.wasm`) implementing the source world.
    pub path: PathBuf,
    /// Where its batches go. Every batch goes to every entry.
    #[serde(default)]
    pub streams: Vec<StreamConfig>,
    /// Settings for the guest, handed to its `open` as JSON.
    #[serde(default)]
    pub plugin_config: Option<toml::Table>,
    /// How long to wait before polling again after the guest had nothing.
    #[serde(default = "default_poll_interval", with = "duration")]
    pub poll_interval: Duration,
    /// How long one delivery may take before it counts as failed (NACK `timed-out`).
    #[serde(default = "default_delivery_timeout", with = "duration")]
    pub delivery_timeout: Duration,
    /// After this many NACKs or guest errors in a row the connector is marked failed
    /// and restarted from its committed state.
    #[serde(default = "default_max_consecutive_nacks")]
    pub max_consecutive_nacks: u32,
    /// The pause after a NACK before polling again.
    #[serde(default = "default_nack_backoff")]
    pub nack_backoff: BackoffConfig,
    /// The pause before restarting a failed or trapped instance.
    #[serde(default = "default_restart_backoff")]
    pub restart_backoff: BackoffConfig,
    /// What the guest may use: memory, time, batch sizes, log lines.
    #[serde(default)]
    pub limits: Limits,
    /// What the guest may reach beyond clocks, random and its log (nothing by default).
    #[serde(default)]
    pub grants: Grants,
    /// Values the host reads and adds to `plugin_config` under these names.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretSource>,
}

/// A capped exponential backoff: `initial`, doubling up to `max`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BackoffConfig {
    #[serde(with = "duration")]
    pub initial: Duration,
    #[serde(with = "duration")]
    pub max: Duration,
}

/// `[[sources.streams]]`: a stream and topic a source delivers to.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    pub stream: String,
    pub topic: String,
    /// Which partition of the topic each message goes to (Iggy only).
    #[serde(default)]
    pub partitioning: Partitioning,
    /// Create the stream and topic when they do not exist (Iggy only). Without it, a
    /// missing stream or topic is an error.
    #[serde(default)]
    pub create: Option<CreateTopic>,
}

impl StreamConfig {
    /// A stream/topic with default partitioning and no auto-creation.
    pub fn new(stream: impl Into<String>, topic: impl Into<String>) -> Self {
        StreamConfig { stream: stream.into(), topic: topic.into(), partitioning: Partitioning::Balanced, create: None }
    }
}

/// `partitioning = "balanced" | "message_id" | { partition_id = N } | { header = "KEY" }`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Partitioning {
    /// The server spreads batches over the partitions.
    #[default]
    Balanced,
    /// Every message to this partition.
    PartitionId(u32),
    /// The message id is the partitioning key: the same id, the same partition.
    MessageId,
    /// The value of this header is the partitioning key; a message without it is
    /// refused.
    Header(String),
}

/// `create = { partitions = 3, retention = "7d" }`: what to create when missing.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CreateTopic {
    #[serde(default = "one")]
    pub partitions: u32,
    /// How long messages are kept; absent means the server's default.
    #[serde(default, with = "duration::optional")]
    pub retention: Option<Duration>,
    /// Whether the server fsyncs what it writes to the topic (absent: the server's
    /// default, no).
    #[serde(default)]
    pub enforce_fsync: Option<bool>,
    /// After how many messages the server writes the topic to disk (absent: the
    /// server's default, 1024). The server acknowledges a send once it holds it in
    /// memory, so only with `enforce_fsync = true` and `messages_required_to_save = 1`
    /// does every delivered batch survive the *server* being killed.
    #[serde(default)]
    pub messages_required_to_save: Option<u32>,
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

fn default_poll_interval() -> Duration {
    Duration::from_millis(100)
}

fn default_delivery_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_max_consecutive_nacks() -> u32 {
    5
}

fn default_nack_backoff() -> BackoffConfig {
    BackoffConfig { initial: Duration::from_millis(100), max: Duration::from_secs(10) }
}

fn default_restart_backoff() -> BackoffConfig {
    BackoffConfig { initial: Duration::from_millis(500), max: Duration::from_secs(30) }
}

impl Config {
    /// Read, override from the environment, and validate the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::load_with_env(path, std::env::vars())
    }

    /// [`Config::load`] with the environment given explicitly (for tests).
    pub fn load_with_env(path: &Path, vars: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let error = |problem: String| ConfigError { file: path.to_path_buf(), problem };
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
        // First the file alone, so that its mistakes are reported with line and column.
        let mut config: Config = toml::from_str(text).map_err(|e| error(e.to_string().trim_end().to_string()))?;
        let overrides = env::overrides(vars).map_err(error)?;
        if !overrides.is_empty() {
            let mut document: toml::Table = toml::from_str(text).map_err(|e| error(e.to_string()))?;
            for o in &overrides {
                o.apply(&mut document).map_err(error)?;
            }
            config = Config::deserialize(toml::Value::Table(document)).map_err(|e| {
                let names: Vec<_> = overrides.iter().map(|o| o.variable.as_str()).collect();
                error(format!("after applying {}: {}", names.join(", "), e.to_string().trim_end()))
            })?;
        }
        config.file = path.to_path_buf();
        config.resolve_paths();
        if let Some(iggy) = &config.iggy {
            iggy.validate().map_err(|p| error(format!("[iggy]: {p}")))?;
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
        if let Some(iggy) = &mut self.iggy {
            for path in [iggy.tls.ca_file.as_mut(), iggy.token_file.as_mut()].into_iter().flatten() {
                resolve(path);
            }
        }
        for source in &mut self.sources {
            resolve(&mut source.path);
            for dir in &mut source.grants.dirs {
                resolve(&mut dir.host);
            }
            for secret in source.secrets.values_mut() {
                if let SecretSource::File(path) = secret {
                    resolve(path);
                }
            }
        }
        for tenant in &mut self.tenants {
            if let Some(path) = tenant.iggy.as_mut().and_then(|i| i.token_file.as_mut()) {
                resolve(path);
            }
        }
    }

    /// The source with this key.
    pub fn source(&self, key: &str) -> Option<&SourceConfig> {
        self.sources.iter().find(|s| s.key == key)
    }

    /// The tenant with this key.
    pub fn tenant(&self, key: &str) -> Option<&TenantConfig> {
        self.tenants.iter().find(|t| t.key == key)
    }

    /// The slots the pooling allocator reserves: one live instance per enabled
    /// connector, and room for a restart to begin before the old instance is gone.
    pub fn pool_slots(&self) -> u32 {
        let enabled = self.sources.iter().filter(|s| s.enabled).count();
        u32::try_from(enabled).unwrap_or(u32::MAX).saturating_mul(2).saturating_add(4)
    }

    /// The largest `limits.memory` of the enabled connectors: the size of each pool
    /// slot (the default limit when none is enabled).
    pub fn largest_memory(&self) -> ByteSize {
        let enabled = self.sources.iter().filter(|s| s.enabled);
        enabled.map(|s| s.limits.memory).max().unwrap_or(Limits::default().memory)
    }

    /// Where the committed cursor of `source` lives: the tenant's namespace, or the
    /// top of the state directory for connectors without a tenant.
    pub fn state_dir_of(&self, source: &SourceConfig) -> PathBuf {
        match &source.tenant {
            Some(tenant) => self.state.path.join("tenants").join(tenant),
            None => self.state.path.clone(),
        }
    }
}

impl SourceConfig {
    /// The guest's `plugin_config` as the JSON document its `open` receives, with
    /// its secrets read and added. The error names the secret and where it was
    /// looked for, never a value.
    pub fn plugin_config_json(&self) -> Result<String, String> {
        let mut document = match &self.plugin_config {
            Some(table) => serde_json::to_value(table).map_err(|e| format!("plugin_config: {e}"))?,
            None => serde_json::Value::Object(Default::default()),
        };
        let object = document.as_object_mut().expect("a TOML table becomes a JSON object");
        for (name, source) in &self.secrets {
            let value = match source {
                SecretSource::Env(variable) => std::env::var(variable)
                    .map_err(|_| format!("secrets.{name}: the environment variable {variable} is not set"))?,
                SecretSource::File(path) => {
                    let text = read_secret_file(path).map_err(|problem| format!("secrets.{name}: {problem}"))?;
                    text.strip_suffix('\n').unwrap_or(&text).to_string()
                }
            };
            object.insert(name.clone(), serde_json::Value::String(value));
        }
        Ok(document.to_string())
    }
}

/// Read a file holding a secret (`secrets.x = { file = ... }`, `token_file`): a
/// regular file, at most [`MAX_SECRET_BYTES`], UTF-8. The error names the path and
/// the problem, never a byte of what the file holds.
fn read_secret_file(path: &Path) -> Result<String, String> {
    files::read_regular_text(path, MAX_SECRET_BYTES, "secret", "the limit for a secret's file")
        .map_err(|e| format!("{}: {}", e.path.display(), e.problem))
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
