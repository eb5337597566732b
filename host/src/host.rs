//! The host: the connectors of a config, each wired to its component, target and
//! state, run side by side until shutdown.
//!
//! Everything that can be checked before running is checked in [`Host::from_config`]
//! (every component against the contract, every state file for corruption, every
//! lock), so that bad input stops `ferry run` at once with an error naming it.
//! Compiling is the exception: it can take long, and a component built to exhaust the
//! compiler must cost only its own connectors, so every component compiles in the
//! background (bounded, see [`crate::runtime::compile`]) while the others start, and
//! a component that cannot be compiled refuses the connectors that use it. What goes
//! wrong later (a trap, a failing target) is one connector's problem, handled by its
//! supervisor.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::config::{Allocator, ByteSize, Config, ConfigError, ConnectorConfig, IggyConfig};
use crate::delivery::Target;
use crate::iggy::IggyTarget;
use crate::local_log::LocalLog;
use crate::runtime::{
    CheckedComponent, Compiler, ConnectorComponent, EngineOptions, LoadError, PendingComponent, PoolSize, Runtime,
    Sandbox, SourceWorld, World,
};
use crate::shutdown::{self, Shutdown};
use crate::source::{SourceConnector, SourceSettings};
use crate::state::{StateDir, StateError};
use crate::status::{self, Reporter, StatusBoard};
use crate::supervisor::supervise;

/// What stops a host from starting. (The problems are parts of the message, not
/// error sources, so that a report of the chain says each thing once.)
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("connector `{key}`: {problem}")]
    Component { key: String, problem: LoadError },
    #[error("connector `{key}`: {problem}")]
    State { key: String, problem: StateError },
    #[error("connector `{key}`: {problem}")]
    Log { key: String, problem: crate::local_log::LogCheckError },
    #[error("cannot start the WebAssembly runtime: {0}")]
    Runtime(String),
    #[error("{0}")]
    Iggy(String),
}

/// How a run ended.
#[derive(Debug, Default)]
pub struct RunReport {
    /// Connectors that had not settled when the grace period ran out; their last
    /// batch was not committed and will be produced again on the next start.
    pub unsettled: Vec<String>,
}

pub struct Host {
    runtime: Arc<Runtime>,
    connectors: Vec<(SourceConnector, Option<String>)>,
    status: Arc<StatusBoard>,
    grace_period: Duration,
    progress_interval: Duration,
    status_file: Option<PathBuf>,
}

impl Host {
    /// An empty host on `runtime`; add connectors with [`Host::add_source`].
    pub fn new(runtime: Arc<Runtime>) -> Host {
        Host {
            runtime,
            connectors: Vec::new(),
            status: StatusBoard::new(),
            grace_period: Duration::from_secs(10),
            progress_interval: Duration::from_secs(10),
            status_file: None,
        }
    }

    /// The host `config` describes, every part of it checked, its components
    /// compiled by `compiler` (in the background: see [`PendingComponent`]).
    pub fn from_config(config: &Config, compiler: Compiler) -> Result<Host, SetupError> {
        let options = engine_options(config);
        let runtime = Runtime::with_options(&options).map_err(|e| runtime_error(&options, e))?;
        let runtime = Arc::new(runtime.with_compiler(compiler));
        let mut host = Host::new(runtime.clone());
        host.grace_period = config.runtime.shutdown_grace_period;
        host.progress_interval = config.runtime.progress_interval;
        host.status_file = Some(status::status_file_path(&config.state.path));

        // Iggy when configured; the local log otherwise.
        let target: Arc<dyn Target> = match &config.iggy {
            Some(iggy) => {
                tracing::info!(address = %iggy.address, transport = ?iggy.transport, "delivering to Iggy");
                start_iggy(config, iggy, "[iggy]")?
            }
            None => {
                tracing::info!(path = %config.local_log.path.display(), "delivering to the local log");
                Arc::new(LocalLog::new(&config.local_log.path))
            }
        };
        // A tenant with credentials of its own gets a connection of its own, so the
        // server's permissions for that user decide what its connectors reach.
        let mut tenant_targets: HashMap<&str, Arc<dyn Target>> = HashMap::new();
        for tenant in &config.tenants {
            if let (Some(iggy), Some(own)) = (&config.iggy, &tenant.iggy) {
                let iggy = iggy.with_credentials_of(own);
                let at = format!("[[tenants]] `{}`: [tenants.iggy]", tenant.key);
                tracing::info!(tenant = %tenant.key, "delivering to Iggy with the tenant's own credentials");
                tenant_targets.insert(&tenant.key, start_iggy(config, &iggy, &at)?);
            }
        }
        let mut state_dirs: HashMap<PathBuf, StateDir> = HashMap::new();
        let mut components: HashMap<PathBuf, PendingComponent<SourceWorld>> = HashMap::new();
        for source in config.sources.iter().filter(|s| s.enabled) {
            let component = match components.get(&source.path) {
                Some(component) => component.clone(),
                None => {
                    let checked = runtime
                        .check::<SourceWorld>(&source.path, config.runtime.max_component_bytes.bytes())
                        .map_err(|problem| SetupError::Component { key: source.key.clone(), problem })?;
                    let span = status::connector_span(&source.key, source.tenant.as_deref());
                    let component = compile_in_background(runtime.clone(), checked).instrument(span);
                    let component = PendingComponent::spawn(source.path.clone(), component);
                    components.insert(source.path.clone(), component.clone());
                    component
                }
            };
            // Secrets first: a missing one must not leave a state directory behind.
            let plugin_config = source.plugin_config_json().map_err(|problem| ConfigError {
                file: config.file.clone(),
                problem: format!("sources (key `{}`): {problem}", source.key),
            })?;
            let state_dir = config.state_dir_of(source);
            refuse_stranded_cursor(config, source).map_err(SetupError::Config)?;
            let states = state_dirs.entry(state_dir.clone()).or_insert_with(|| StateDir::new(&state_dir));
            let cursor =
                states.open(&source.key).map_err(|problem| SetupError::State { key: source.key.clone(), problem })?;
            LocalLog::verify_cursor(config, &source.key, &cursor)
                .map_err(|problem| SetupError::Log { key: source.key.clone(), problem })?;
            let tenant = source.tenant.as_deref();
            let connector = SourceConnector {
                key: source.key.as_str().into(),
                tenant: tenant.map(Into::into),
                component,
                plugin_config,
                streams: source.streams.clone().into(),
                settings: SourceSettings::from_config(source),
                sandbox: Sandbox { limits: source.limits.clone(), grants: source.grants.clone() },
                target: tenant.and_then(|t| tenant_targets.get(t)).unwrap_or(&target).clone(),
                cursor: Arc::new(cursor),
            };
            host.add_source(connector, source.name.clone());
        }
        Ok(host)
    }

    /// The runtime the connectors run on.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    pub fn add_source(&mut self, connector: SourceConnector, name: Option<String>) {
        self.connectors.push((connector, name));
    }

    pub fn set_grace_period(&mut self, grace_period: Duration) {
        self.grace_period = grace_period;
    }

    /// The status board (subscribe to it for events).
    pub fn status(&self) -> Arc<StatusBoard> {
        self.status.clone()
    }

    pub fn connector_count(&self) -> usize {
        self.connectors.len()
    }

    /// Run every connector until `shutdown`, then give them the grace period to settle.
    pub async fn run(self, mut shutdown: Shutdown) -> RunReport {
        let (stop_helpers, helpers_shutdown) = shutdown::channel();
        let mut helpers = Vec::new();
        if let Some(path) = &self.status_file {
            helpers.push(tokio::spawn(status::keep_written(
                self.status.clone(),
                path.clone(),
                helpers_shutdown.clone(),
            )));
        }
        helpers.push(tokio::spawn(status::log_progress(self.status.clone(), self.progress_interval, helpers_shutdown)));

        let mut tasks = Vec::new();
        for (connector, name) in self.connectors {
            let key = connector.key.clone();
            let tenant = connector.tenant.clone();
            let span = status::connector_span(&key, tenant.as_deref());
            let reporter = self.status.reporter(&key, name, tenant.as_deref());
            let supervisor = tokio::spawn(
                supervise(self.runtime.clone(), connector, reporter.clone(), shutdown.clone()).instrument(span),
            );
            let abort = supervisor.abort_handle();
            tasks.push((key, tokio::spawn(report_a_crash(supervisor, reporter)), abort));
        }
        tracing::info!("{} connector(s) running", tasks.len());

        shutdown.requested().await;
        tracing::info!(grace_period = ?self.grace_period, "shutting down: letting outstanding batches settle");
        let now = tokio::time::Instant::now();
        // A grace period too long to add up is as good as forever.
        let deadline = now.checked_add(self.grace_period).unwrap_or(now + Duration::from_secs(86_400 * 365));
        let mut report = RunReport::default();
        for (key, mut task, supervisor) in tasks {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                supervisor.abort();
                tracing::warn!(key = %key, "did not settle within the grace period; its last batch will be produced again");
                report.unsettled.push(key.to_string());
            }
        }
        stop_helpers.trigger();
        for helper in helpers {
            let _ = helper.await;
        }
        if let Some(path) = &self.status_file
            && let Err(e) = status::write_final(&self.status, path)
        {
            tracing::warn!("cannot write the status file: {e}");
        }
        report
    }
}

/// The engine the config needs: fuel metering only if some connector asks for it,
/// and a pool sized for the enabled connectors.
pub fn engine_options(config: &Config) -> EngineOptions {
    EngineOptions {
        fuel: config.connectors().any(|c| c.enabled() && c.limits().fuel.is_some()),
        allocator: config.runtime.allocator,
        pool: PoolSize { instances: config.pool_slots(), max_memory_bytes: config.largest_memory().bytes() },
    }
}

/// Compile a checked component, saying so in the log (inside the span of the first
/// connector that uses it).
async fn compile_in_background<W: World>(
    runtime: Arc<Runtime>,
    checked: CheckedComponent<W>,
) -> Result<Arc<ConnectorComponent<W>>, LoadError> {
    let started = std::time::Instant::now();
    tracing::info!(path = %checked.path().display(), "compiling component");
    let compiled = runtime.compile(checked).await;
    if compiled.is_ok() {
        tracing::info!("component compiled in {:.0?}", started.elapsed());
    }
    compiled
}

/// Wait for a connector's supervisor; if it died of a panic (a bug in ferry), say so
/// in its status instead of letting it look alive.
async fn report_a_crash(supervisor: tokio::task::JoinHandle<()>, reporter: Reporter) {
    if let Err(error) = supervisor.await
        && error.is_panic()
    {
        let panic = error.into_panic();
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        reporter.crashed(&message);
    }
}

/// Why the runtime could not start, naming the setting behind it when there is one.
fn runtime_error(options: &EngineOptions, error: anyhow::Error) -> SetupError {
    if options.allocator == Allocator::Pooling {
        return SetupError::Runtime(format!(
            "[runtime] allocator = \"pooling\" reserves {} instance slots of up to {} each (the largest \
             limits.memory) up front, and this machine cannot: {error:#}; lower limits.memory, run fewer \
             connectors, or use allocator = \"on-demand\"",
            options.pool.instances,
            ByteSize(options.pool.max_memory_bytes),
        ));
    }
    SetupError::Runtime(format!("{error:#}"))
}

fn start_iggy(config: &Config, iggy: &IggyConfig, at: &str) -> Result<Arc<dyn Target>, SetupError> {
    let target =
        IggyTarget::start(iggy).map_err(|e| SetupError::Iggy(format!("{}: {at}: {e}", config.file.display())))?;
    Ok(Arc::new(target))
}

/// A connector moved into a tenant whose cursor is still where it was committed
/// before (the top of the state directory) would start from scratch and deliver
/// everything again: refuse, and say how to move it.
fn refuse_stranded_cursor(config: &Config, source: &crate::config::SourceConfig) -> Result<(), ConfigError> {
    let Some(tenant) = &source.tenant else { return Ok(()) };
    let top = StateDir::new(&config.state.path);
    let own = StateDir::new(config.state_dir_of(source));
    let at_top = top.keys().map(|keys| keys.contains(&source.key)).unwrap_or(false);
    let in_own = own.keys().map(|keys| keys.contains(&source.key)).unwrap_or(false);
    if at_top && !in_own {
        return Err(ConfigError {
            file: config.file.clone(),
            problem: format!(
                "connector `{}` belongs to tenant `{tenant}`, whose cursors live in {}, but its committed cursor is \
                 in {} (from before it had a tenant); move {key}.sqlite there (or `ferry state reset` it) so that it \
                 does not start from scratch",
                source.key,
                config.state_dir_of(source).display(),
                config.state.path.display(),
                key = source.key,
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_the_machine_cannot_reserve_names_the_setting() {
        // A million slots of 4 GiB: more address space than any machine has.
        let options = EngineOptions {
            allocator: Allocator::Pooling,
            pool: PoolSize { instances: 1 << 20, max_memory_bytes: 4 << 30 },
            ..EngineOptions::default()
        };
        let error = Runtime::with_options(&options).err().expect("the reservation fails");
        let message = runtime_error(&options, error).to_string();
        assert!(
            message.contains("[runtime] allocator = \"pooling\" reserves 1048576 instance slots of up to 4 GiB"),
            "{message}"
        );
        assert!(message.contains("allocator = \"on-demand\""), "{message}");
    }
}
