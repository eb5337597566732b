//! Wiring: the connectors a config describes, each joined to its compiled component,
//! its target or input, its dead letters, and its state, with everything that can be
//! checked before running checked, so that `ferry run` stops at once, naming the
//! problem, rather than failing later.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tracing::Instrument;

use super::{Host, SetupError};
use crate::config::{Allocator, ByteSize, Config, ConfigError, ConnectorConfig, IggyConfig, SinkConfig};
use crate::delivery::Target;
use crate::grants::postgres::PgPools;
use crate::iggy::{IggyInput, IggyTarget, Reading};
use crate::local_log::{LocalLog, LocalLogInput};
use crate::runtime::{
    CheckedComponent, Compiler, ConnectorComponent, EngineOptions, LoadError, PendingComponent, PoolSize, Runtime,
    Sandbox, SinkWorld, SourceWorld, World,
};
use crate::sink::{DeadLetters, Input, SinkConnector, SinkSettings};
use crate::source::{SourceConnector, SourceSettings};
use crate::state::{ConnectorStateFile, StateDir};
use crate::status;

impl Host {
    /// The host `config` describes, every part of it checked, its components
    /// compiled by `compiler` (in the background: see [`PendingComponent`]).
    pub fn from_config(config: &Config, compiler: Compiler) -> Result<Host, SetupError> {
        let options = engine_options(config);
        let runtime = Runtime::with_options(&options).map_err(|e| runtime_error(&options, e))?;
        let mut runtime = runtime.with_compiler(compiler);
        if let Some(dir) = config.compile_cache_dir() {
            runtime = runtime.with_compile_cache(dir);
        }
        let runtime = Arc::new(runtime);
        let mut host = Host::new(runtime.clone());
        host.grace_period = config.runtime.shutdown_grace_period;
        host.progress_interval = config.runtime.progress_interval;
        host.status_file = Some(status::status_file_path(&config.state.path));

        let mut wiring = Wiring::new(config, runtime)?;
        // Everything that can refuse the config is checked for every connector before
        // any state is taken, so that a refusal leaves no state file behind.
        let sources = config.sources.iter().filter(|s| s.enabled);
        let sources: Vec<_> =
            sources.map(|s| wiring.check::<SourceWorld>(s).map(|c| (s, c))).collect::<Result<_, _>>()?;
        let sinks = config.sinks.iter().filter(|s| s.enabled);
        let sinks: Vec<_> = sinks.map(|s| wiring.check::<SinkWorld>(s).map(|c| (s, c))).collect::<Result<_, _>>()?;

        for (source, Checked { component, plugin_config, postgres }) in sources {
            let connector = SourceConnector {
                key: source.key.as_str().into(),
                tenant: source.tenant.as_deref().map(Into::into),
                component,
                plugin_config,
                streams: source.streams.clone().into(),
                settings: SourceSettings::from_config(source),
                sandbox: Sandbox { limits: source.limits.clone(), grants: source.grants.clone(), postgres },
                target: wiring.target_of(source),
                cursor: Arc::new(wiring.state_of(source)?),
            };
            host.add_source(connector, source.name.clone());
        }
        for (sink, Checked { component, plugin_config, postgres }) in sinks {
            let topics = sink.topics().map(|(stream, topic)| (stream.to_string(), topic.to_string())).collect();
            let state = wiring.state_of(sink)?;
            let connector = SinkConnector {
                key: sink.key.as_str().into(),
                tenant: sink.tenant.as_deref().map(Into::into),
                component,
                plugin_config,
                settings: SinkSettings::from_config(sink),
                sandbox: Sandbox { limits: sink.limits.clone(), grants: sink.grants.clone(), postgres },
                input: wiring.input_of(sink, topics, state),
                dead_letters: sink
                    .dead_letters
                    .as_ref()
                    .map(|stream| DeadLetters { target: wiring.target_of(sink), stream: vec![stream.clone()].into() }),
            };
            host.add_sink(connector, sink.name.clone());
        }
        Ok(host)
    }
}

/// What is known of a connector once everything about it that can be checked
/// without taking its state was.
struct Checked<W: World> {
    component: PendingComponent<W>,
    /// The guest's JSON config, with its secrets.
    plugin_config: String,
    /// The PostgreSQL servers it is granted, with its pools.
    postgres: PgPools,
}

/// What connectors share while they are wired: the runtime, the targets, the state
/// directories, and the components compiled so far.
struct Wiring<'a> {
    config: &'a Config,
    runtime: Arc<Runtime>,
    /// The server, when `[iggy]` is configured; the local log is used otherwise.
    iggy: Option<Arc<IggyTarget>>,
    /// A tenant with Iggy credentials of its own gets a connection of its own, so the
    /// server's permissions for that user decide what its connectors reach.
    tenant_iggy: HashMap<&'a str, Arc<IggyTarget>>,
    local_log: Arc<LocalLog>,
    state_dirs: HashMap<PathBuf, StateDir>,
    /// Components by file: connectors sharing one share its compile.
    sources: HashMap<PathBuf, PendingComponent<SourceWorld>>,
    sinks: HashMap<PathBuf, PendingComponent<SinkWorld>>,
}

impl<'a> Wiring<'a> {
    fn new(config: &'a Config, runtime: Arc<Runtime>) -> Result<Self, SetupError> {
        let iggy = match &config.iggy {
            Some(iggy) => {
                tracing::info!(address = %iggy.address, transport = ?iggy.transport, "connectors use Iggy");
                Some(start_iggy(config, iggy, "[iggy]")?)
            }
            None => {
                tracing::info!(path = %config.local_log.path.display(), "connectors use the local log");
                None
            }
        };
        let mut tenant_iggy = HashMap::new();
        for tenant in &config.tenants {
            if let (Some(iggy), Some(own)) = (&config.iggy, &tenant.iggy) {
                let iggy = iggy.with_credentials_of(own);
                let at = format!("[[tenants]] `{}`: [tenants.iggy]", tenant.key);
                tracing::info!(tenant = %tenant.key, "the tenant's connectors use Iggy with its own credentials");
                tenant_iggy.insert(tenant.key.as_str(), start_iggy(config, &iggy, &at)?);
            }
        }
        Ok(Wiring {
            config,
            runtime,
            iggy,
            tenant_iggy,
            local_log: Arc::new(LocalLog::new(&config.local_log.path)),
            state_dirs: HashMap::new(),
            sources: HashMap::new(),
            sinks: HashMap::new(),
        })
    }

    /// Check `connector` without touching its state: its component (compiled in the
    /// background, once per file), its secrets, and where its state must be.
    fn check<W: Compiled>(&mut self, connector: &dyn ConnectorConfig) -> Result<Checked<W>, SetupError> {
        let component = self.component(connector)?;
        let (config, key) = (self.config, connector.key());
        let plugin_config = connector.plugin_config_json().map_err(|problem| ConfigError {
            file: config.file.clone(),
            problem: format!("{}s (key `{key}`): {problem}", connector.role()),
        })?;
        let postgres = PgPools::granted(connector.grants(), &config.postgres).map_err(|problem| ConfigError {
            file: config.file.clone(),
            problem: format!("{}s (key `{key}`): {problem}", connector.role()),
        })?;
        refuse_stranded_state(config, connector).map_err(SetupError::Config)?;
        Ok(Checked { component, plugin_config, postgres })
    }

    /// The component of `connector`, checked now and compiled in the background (once
    /// per file).
    fn component<W: Compiled>(&mut self, connector: &dyn ConnectorConfig) -> Result<PendingComponent<W>, SetupError> {
        let path = connector.path().to_path_buf();
        if let Some(component) = W::compiled(self).get(&path) {
            return Ok(component.clone());
        }
        let max = self.config.runtime.max_component_bytes.bytes();
        let key = connector.key().to_string();
        let checked = self.runtime.check::<W>(&path, max).map_err(|problem| SetupError::Component { key, problem })?;
        let span = status::connector_span(connector.key(), connector.tenant());
        let compiling = compile_in_background(self.runtime.clone(), checked).instrument(span);
        let component = PendingComponent::spawn(path.clone(), compiling);
        W::compiled(self).insert(path, component.clone());
        Ok(component)
    }

    /// The connector's state, taken for this process and checked against the local log.
    fn state_of(&mut self, connector: &dyn ConnectorConfig) -> Result<ConnectorStateFile, SetupError> {
        let (config, key) = (self.config, connector.key());
        let state_dir = config.state_dir_of(connector);
        let states = self.state_dirs.entry(state_dir.clone()).or_insert_with(|| StateDir::new(&state_dir));
        let state = states.open(key).map_err(|problem| SetupError::State { key: key.to_string(), problem })?;
        LocalLog::verify_cursor(config, key, &state)
            .map_err(|problem| SetupError::Log { key: key.to_string(), problem })?;
        Ok(state)
    }

    /// The Iggy server as `connector` reaches it: with its tenant's own credentials,
    /// or the host's; `None` without `[iggy]`.
    fn iggy_of(&self, connector: &dyn ConnectorConfig) -> Option<&Arc<IggyTarget>> {
        connector.tenant().and_then(|t| self.tenant_iggy.get(t)).or(self.iggy.as_ref())
    }

    /// Where `connector` delivers (a source's batches, a sink's dead letters).
    fn target_of(&self, connector: &dyn ConnectorConfig) -> Arc<dyn Target> {
        match self.iggy_of(connector) {
            Some(iggy) => iggy.clone(),
            None => self.local_log.clone(),
        }
    }

    /// What `sink` reads `topics` from: Iggy (alone, or in its consumer group), or the
    /// local log with its positions in `state`.
    fn input_of(&self, sink: &SinkConfig, topics: Vec<(String, String)>, state: ConnectorStateFile) -> Arc<dyn Input> {
        match self.iggy_of(sink) {
            Some(iggy) => {
                let reading = match &sink.consumer_group {
                    Some(group) => Reading::InGroup(group.clone()),
                    None => Reading::Alone(sink.consumer_name()),
                };
                Arc::new(IggyInput::new(iggy.connection(), topics, reading))
            }
            None => Arc::new(LocalLogInput::new(&self.config.local_log.path, topics, Arc::new(state))),
        }
    }
}

/// A world whose compiled components the wiring keeps, one map per world.
trait Compiled: World + Sized {
    fn compiled<'w>(wiring: &'w mut Wiring<'_>) -> &'w mut HashMap<PathBuf, PendingComponent<Self>>;
}

impl Compiled for SourceWorld {
    fn compiled<'w>(wiring: &'w mut Wiring<'_>) -> &'w mut HashMap<PathBuf, PendingComponent<Self>> {
        &mut wiring.sources
    }
}

impl Compiled for SinkWorld {
    fn compiled<'w>(wiring: &'w mut Wiring<'_>) -> &'w mut HashMap<PathBuf, PendingComponent<Self>> {
        &mut wiring.sinks
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

/// Compile a checked component (the runtime says in the log how it went, inside the
/// span of the first connector that uses it).
async fn compile_in_background<W: World>(
    runtime: Arc<Runtime>,
    checked: CheckedComponent<W>,
) -> Result<Arc<ConnectorComponent<W>>, LoadError> {
    runtime.compile(checked).await.map(|compiled| compiled.component)
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

fn start_iggy(config: &Config, iggy: &IggyConfig, at: &str) -> Result<Arc<IggyTarget>, SetupError> {
    let target =
        IggyTarget::start(iggy).map_err(|e| SetupError::Iggy(format!("{}: {at}: {e}", config.file.display())))?;
    Ok(Arc::new(target))
}

/// A connector moved into a tenant whose state is still where it was committed
/// before (the top of the state directory) would start from scratch and deliver
/// everything again: refuse, and say how to move it.
fn refuse_stranded_state(config: &Config, connector: &dyn ConnectorConfig) -> Result<(), ConfigError> {
    let (Some(tenant), key) = (connector.tenant(), connector.key()) else { return Ok(()) };
    let top = StateDir::new(&config.state.path);
    let own = StateDir::new(config.state_dir_of(connector));
    let holds = |dir: &StateDir| dir.keys().map(|keys| keys.iter().any(|k| k == key)).unwrap_or(false);
    if holds(&top) && !holds(&own) {
        return Err(ConfigError {
            file: config.file.clone(),
            problem: format!(
                "connector `{key}` belongs to tenant `{tenant}`, whose cursors live in {}, but its committed cursor is \
                 in {} (from before it had a tenant); move {key}.sqlite there (or `ferry state reset` it) so that it \
                 does not start from scratch",
                config.state_dir_of(connector).display(),
                config.state.path.display(),
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
