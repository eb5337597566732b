//! Wiring: the connectors a config describes, each joined to its compiled component,
//! its target or input, its dead letters, and its state, with everything that can be
//! checked before running checked, so that `ferry run` stops at once, naming the
//! problem, rather than failing later.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use tracing::Instrument;

use super::fingerprint::{Digest, Fingerprint, fingerprint};
use super::{Host, SetupError};
use ferry_capabilities::Shared;
use ferry_capabilities::logging::{GuestLog, LogBudget};
use ferry_config::{Allocator, ByteSize, Config, ConfigError, ConnectorConfig, IggyConfig, SinkConfig, SourceConfig};
use ferry_contract::Durability;
use ferry_contract::Role;
use ferry_engine::cursor::CursorStore;
use ferry_engine::delivery::Target;
use ferry_engine::sink::{DeadLetters, Input, SinkConnector, SinkSettings};
use ferry_engine::source::{SourceConnector, SourceSettings};
use ferry_engine::status;
use ferry_engine::transform::codec::Codec;
use ferry_engine::transform::{Chain, ComponentLink, Schemas};
use ferry_iggy::{IggyInput, IggyTarget, Reading};
use ferry_runtime::{
    CheckedComponent, Compiler, ConnectorComponent, EngineOptions, InstanceMeters, LoadError, PendingComponent,
    PoolSize, Runtime, Sandbox, SinkWorld, SourceWorld, TransformWorld, World,
};
use ferry_store::local_log::{LocalLog, LocalLogInput, LoggedCursor};
use ferry_store::state::{ConnectorState, StateDir};
use sha2::{Digest as _, Sha256};

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

        let mut wiring = Wiring::new(config, runtime, options)?;
        // Everything that can refuse the config is checked for every connector before
        // any state is taken, so that a refusal leaves no state file behind.
        let enabled = config.connectors().filter(|c| c.enabled());
        let checked: Vec<_> = enabled.map(|c| wiring.check(config, c)).collect::<Result<_, _>>()?;
        for checked in checked {
            let fingerprint = checked.fingerprint;
            let wired = wiring.wire(config, checked)?;
            host.fleet.add(wired, Some(fingerprint));
        }
        wiring.sync_states()?;
        for (dir, key) in [(&config.state.path, "[state] path"), (&config.local_log.path, "[local_log] path")] {
            if let Some(mode) = ferry_contract::files::open_to_others(dir) {
                tracing::warn!(
                    "{key} {} is writable by its group or by others (mode {mode:o}): whoever can write there can \
                     change the cursors and records ferry trusts; `chmod go-w` it",
                    dir.display()
                );
            }
        }
        // Whatever a guest says is cleaned of every secret the config holds.
        ferry_contract::secrets::set(ferry_contract::secrets::Secrets::new(config.secret_values()));
        host.reloadable = Some(Reloadable { config: Arc::new(config.clone()), wiring });
        Ok(host)
    }
}

/// A connector ready to run: its component, its sandbox, its target or input, its
/// state taken for this process.
pub enum Wired {
    Source(SourceConnector, Option<String>),
    Sink(SinkConnector, Option<String>),
}

impl Wired {
    pub fn key(&self) -> &Arc<str> {
        match self {
            Wired::Source(source, _) => &source.key,
            Wired::Sink(sink, _) => &sink.key,
        }
    }

    pub fn role(&self) -> Role {
        match self {
            Wired::Source(..) => Role::Source,
            Wired::Sink(..) => Role::Sink,
        }
    }

    pub fn tenant(&self) -> Option<&str> {
        match self {
            Wired::Source(source, _) => source.tenant.as_deref(),
            Wired::Sink(sink, _) => sink.tenant.as_deref(),
        }
    }

    /// Whether each batch it settles is logged at info level.
    pub fn verbose(&self) -> bool {
        match self {
            Wired::Source(source, _) => source.settings.verbose,
            Wired::Sink(sink, _) => sink.settings.verbose,
        }
    }

    /// Whether each batch it settles is logged with its stage times (Iggy's
    /// `benchmark`).
    pub fn benchmark(&self) -> bool {
        match self {
            Wired::Source(source, _) => source.settings.benchmark,
            Wired::Sink(sink, _) => sink.settings.benchmark,
        }
    }

    /// Its display name.
    pub fn name(&self) -> Option<String> {
        match self {
            Wired::Source(_, name) | Wired::Sink(_, name) => name.clone(),
        }
    }
}

/// A connector of the config checked without touching its state: everything about
/// it that can refuse the config, and what it needs to be wired.
pub(super) struct Checked<'c> {
    pub key: &'c str,
    /// What it is made of (see [`fingerprint`]): a reload restarts it only if this
    /// changes.
    pub fingerprint: Fingerprint,
    role: CheckedRole<'c>,
}

enum CheckedRole<'c> {
    Source(&'c SourceConfig, Parts<SourceWorld>),
    Sink(&'c SinkConfig, Parts<SinkWorld>),
}

/// The parts of a connector that do not depend on its state.
struct Parts<W: World> {
    component: PendingComponent<W>,
    /// The guest's JSON config, with its secrets.
    plugin_config: String,
    /// What its instances share of its grants (the pools of its PostgreSQL servers).
    shared: Shared,
    /// Its transforms, each component among them compiling.
    transforms: Option<Arc<Chain>>,
    /// Its transform components, to wait for with its own.
    transform_components: Vec<PendingComponent<TransformWorld>>,
}

impl Checked<'_> {
    /// Wait until its component is compiled, or say why it cannot be.
    pub async fn compiled(&self) -> Result<(), SetupError> {
        let failed = |problem: Arc<LoadError>| SetupError::Compile { key: self.key.to_string(), problem };
        let transforms = match &self.role {
            CheckedRole::Source(_, parts) => {
                parts.component.get().await.map_err(failed)?;
                &parts.transform_components
            }
            CheckedRole::Sink(_, parts) => {
                parts.component.get().await.map_err(failed)?;
                &parts.transform_components
            }
        };
        for transform in transforms {
            transform.get().await.map_err(failed)?;
        }
        Ok(())
    }
}

/// A host built from a config: the config its connectors run, and the wiring that
/// can wire more of them (a reload, a reset of a connector's state).
pub(super) struct Reloadable {
    pub config: Arc<Config>,
    pub wiring: Wiring,
}

/// What connectors share while they are wired: the runtime, the targets, the state
/// directories, and the components compiled so far. It lives as long as the host,
/// so that a reload reuses all of it.
pub(super) struct Wiring {
    runtime: Arc<Runtime>,
    /// The engine's settings: a reload that needs others needs a restart.
    pub engine: EngineOptions,
    /// The server, when `[iggy]` is configured; the local log is used otherwise.
    iggy: Option<Arc<IggyTarget>>,
    /// A tenant with Iggy credentials of its own gets a connection of its own, so the
    /// server's permissions for that user decide what its connectors reach.
    tenant_iggy: HashMap<String, Arc<IggyTarget>>,
    local_log: Arc<LocalLog>,
    state_dirs: HashMap<PathBuf, StateDir>,
    /// Components by file, with the digest of what was compiled and the pass that
    /// last checked it: connectors sharing one share its compile, and a file whose
    /// content changed is compiled again.
    sources: HashMap<PathBuf, Known<SourceWorld>>,
    sinks: HashMap<PathBuf, Known<SinkWorld>>,
    transforms: HashMap<PathBuf, Known<TransformWorld>>,
    /// Which reading of the config this is (see [`Wiring::begin_pass`]).
    pass: u64,
    /// The keys with a state at the top of the state directory, as read in a pass.
    top_keys: Option<(u64, HashSet<String>)>,
}

/// A component file as the wiring knows it.
struct Known<W: World> {
    digest: Digest,
    component: PendingComponent<W>,
    /// The pass that last read and checked the file.
    checked_in: u64,
}

impl Wiring {
    fn new(config: &Config, runtime: Arc<Runtime>, engine: EngineOptions) -> Result<Self, SetupError> {
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
                tenant_iggy.insert(tenant.key.clone(), start_iggy(config, &iggy, &at)?);
            }
        }
        Ok(Wiring {
            runtime,
            engine,
            iggy,
            tenant_iggy,
            local_log: Arc::new(LocalLog::new(&config.local_log.path)),
            state_dirs: HashMap::new(),
            sources: HashMap::new(),
            sinks: HashMap::new(),
            transforms: HashMap::new(),
            pass: 0,
            top_keys: None,
        })
    }

    /// Start another reading of the config (a reload): component files are read and
    /// checked again, once each however many connectors share one, since they may
    /// have changed since the last reading.
    pub fn begin_pass(&mut self) {
        self.pass += 1;
    }

    /// Check `connector` of `config` without touching its state: its component
    /// (compiled in the background, once per file and content), its secrets, its
    /// grants, and where its state must be.
    pub fn check<'c>(
        &mut self,
        config: &'c Config,
        connector: &'c dyn ConnectorConfig,
    ) -> Result<Checked<'c>, SetupError> {
        let key = connector.key();
        let role = match connector.role() {
            Role::Source => {
                let source = connector.as_any().downcast_ref::<SourceConfig>().expect("a source's config");
                let (digest, parts) = self.parts::<SourceWorld>(config, connector)?;
                (digest, CheckedRole::Source(source, parts))
            }
            Role::Sink => {
                let sink = connector.as_any().downcast_ref::<SinkConfig>().expect("a sink's config");
                let (digest, parts) = self.parts::<SinkWorld>(config, connector)?;
                (digest, CheckedRole::Sink(sink, parts))
            }
        };
        let (digest, role) = role;
        Ok(Checked { key, fingerprint: fingerprint(config, connector, &digest), role })
    }

    fn parts<W: Compiled>(
        &mut self,
        config: &Config,
        connector: &dyn ConnectorConfig,
    ) -> Result<(Digest, Parts<W>), SetupError> {
        let (digest, component) = self.component(config, connector, connector.path())?;
        let key = connector.key();
        let refuse = |problem: String| ConfigError {
            file: config.file.clone(),
            problem: format!("{}s (key `{key}`): {problem}", connector.role()),
        };
        let plugin_config = connector.plugin_config_json().map_err(refuse)?;
        let shared = connector.grants().prepare(&config.sections).map_err(refuse)?;
        let (digest, transforms, transform_components) = self.transforms(config, connector, digest)?;
        Ok((digest, Parts { component, plugin_config, shared, transforms, transform_components }))
    }

    /// The chain of `connector`'s transforms, its components checked now and
    /// compiled in the background; and the digest of its component with theirs, so
    /// that a changed transform component restarts it at a reload.
    #[allow(clippy::type_complexity)]
    fn transforms(
        &mut self,
        config: &Config,
        connector: &dyn ConnectorConfig,
        digest: Digest,
    ) -> Result<(Digest, Option<Arc<Chain>>, Vec<PendingComponent<TransformWorld>>), SetupError> {
        let mut components = HashMap::new();
        let mut digests = vec![digest];
        for transform in connector.transforms().components() {
            let (digest, component) = self.component::<TransformWorld>(config, connector, &transform.component)?;
            digests.push(digest);
            components.insert(transform.name.clone(), component);
        }
        let limits = connector.limits().clone();
        let span = status::connector_span(connector.key(), connector.tenant());
        let key = connector.key();
        let refuse = |problem: String| ConfigError {
            file: config.file.clone(),
            problem: format!("{}s (key `{key}`): {problem}", connector.role()),
        };
        let schemas = schemas(connector).map_err(refuse)?;
        let chain = Chain::new(schemas, connector.transforms(), |transform| {
            let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let budget = LogBudget::new(limits.log_lines_per_second, limits.log_burst, dropped);
            ComponentLink {
                name: transform.name.clone(),
                runtime: self.runtime.clone(),
                component: components[&transform.name].clone(),
                // Its connector's limits, and no grants.
                sandbox: Sandbox { limits: limits.clone(), ..Sandbox::default() },
                plugin_config: transform.plugin_config_json(),
                log: GuestLog::new(span.clone(), budget),
                meters: InstanceMeters::default(),
                instance: tokio::sync::Mutex::new(None),
            }
        })
        .map_err(refuse)?;
        // A connector without transform components keeps the digest of its own.
        let digest = match digests.as_slice() {
            [own] => *own,
            all => all.iter().fold(Sha256::new(), |hasher, digest| hasher.chain_update(digest)).finalize().into(),
        };
        Ok((digest, chain.map(Arc::new), components.into_values().collect()))
    }

    /// The component at `path` (`connector`'s own, or one of its transforms'),
    /// checked now and compiled in the background (once per file and content).
    fn component<W: Compiled>(
        &mut self,
        config: &Config,
        connector: &dyn ConnectorConfig,
        path: &std::path::Path,
    ) -> Result<(Digest, PendingComponent<W>), SetupError> {
        let path = path.to_path_buf();
        let pass = self.pass;
        if let Some(known) = W::compiled(self).get(&path)
            && known.checked_in == pass
        {
            return Ok((known.digest, known.component.clone()));
        }
        let max = config.runtime.max_component_bytes.bytes();
        let key = connector.key().to_string();
        let checked = self.runtime.check::<W>(&path, max).map_err(|problem| SetupError::Component { key, problem })?;
        let digest = checked.digest();
        if let Some(known) = W::compiled(self).get_mut(&path)
            && known.digest == digest
        {
            known.checked_in = pass;
            return Ok((digest, known.component.clone()));
        }
        let span = status::connector_span(connector.key(), connector.tenant());
        let compiling = compile_in_background(self.runtime.clone(), checked).instrument(span);
        let component = PendingComponent::spawn(path.clone(), compiling);
        W::compiled(self).insert(path, Known { digest, component: component.clone(), checked_in: pass });
        Ok((digest, component))
    }

    /// Take the state of the connector `checked` for this process and join it to its
    /// target or input: ready to run.
    pub fn wire(&mut self, config: &Config, checked: Checked<'_>) -> Result<Wired, SetupError> {
        Ok(match checked.role {
            CheckedRole::Source(source, parts) => {
                let cursor = self.state_of(config, source)?;
                Wired::Source(self.source(source, parts, cursor), source.name.clone())
            }
            CheckedRole::Sink(sink, parts) => {
                let state = self.state_of(config, sink)?;
                Wired::Sink(self.sink(config, sink, parts, state), sink.name.clone())
            }
        })
    }

    /// `wired` again, with its state moved aside first (see [`StateDir::reset`]): the
    /// same component and settings, starting from scratch. Its state is given up
    /// before it is reset (the reset needs the lock), then taken again; where the old
    /// state is kept is returned.
    pub fn reset_state(
        &mut self,
        config: &Config,
        wired: Wired,
    ) -> (Result<Vec<String>, String>, Result<Wired, SetupError>) {
        let key = wired.key().clone();
        let connector = config.connector(&key).expect("a connector the host runs is in its config");
        let states = self.states_of(config, connector).clone();
        match wired {
            Wired::Source(source, name) => {
                let SourceConnector {
                    key,
                    tenant,
                    component,
                    plugin_config,
                    streams,
                    settings,
                    sandbox,
                    target,
                    transforms,
                    cursor,
                } = source;
                drop(cursor);
                let reset = states.reset(&key).map_err(|e| e.to_string());
                let source_config = config.source(&key).expect("a source the host runs is in its config");
                let rewired = self.state_of(config, connector).map(|file| {
                    let cursor = self.cursor_of(source_config, file);
                    let source = SourceConnector {
                        key,
                        tenant,
                        component,
                        plugin_config,
                        streams,
                        settings,
                        sandbox,
                        target,
                        transforms,
                        cursor,
                    };
                    Wired::Source(source, name)
                });
                (reset, rewired)
            }
            Wired::Sink(sink, name) => {
                let SinkConnector {
                    key,
                    tenant,
                    component,
                    plugin_config,
                    settings,
                    sandbox,
                    input,
                    transforms,
                    dead_letters,
                } = sink;
                drop(input);
                let reset = states.reset(&key).map_err(|e| e.to_string());
                let sink_config = config.sink(&key).expect("a sink the host runs is in its config");
                let rewired = self.state_of(config, connector).map(|state| {
                    let input = self.input_of(config, sink_config, state);
                    let sink = SinkConnector {
                        key,
                        tenant,
                        component,
                        plugin_config,
                        settings,
                        sandbox,
                        input,
                        transforms,
                        dead_letters,
                    };
                    Wired::Sink(sink, name)
                });
                (reset, rewired)
            }
        }
    }

    fn source(&self, source: &SourceConfig, parts: Parts<SourceWorld>, cursor: ConnectorState) -> SourceConnector {
        let Parts { component, plugin_config, shared, transforms, .. } = parts;
        SourceConnector {
            key: source.key.as_str().into(),
            tenant: source.tenant.as_deref().map(Into::into),
            component,
            plugin_config,
            streams: source.streams.clone().into(),
            settings: SourceSettings::from_config(source),
            sandbox: Sandbox { limits: source.limits.clone(), grants: source.grants.clone(), shared },
            target: self.target_of(source),
            transforms,
            cursor: self.cursor_of(source, cursor),
        }
    }

    /// A source's cursor: its state file, and into the local log the cursors the log
    /// keeps beside the batches too (see [`LoggedCursor`]).
    fn cursor_of(&self, source: &SourceConfig, file: ConnectorState) -> Arc<dyn CursorStore> {
        if self.iggy_of(source).is_some() {
            return Arc::new(file);
        }
        let topics = source.streams.iter().map(|s| (s.stream.clone(), s.topic.clone())).collect();
        Arc::new(LoggedCursor::new(file, &source.key, &self.local_log, topics))
    }

    /// Whether `connector` is a source delivering to the local log, which keeps its
    /// cursor in the same transaction as its batches: its state file then need not be
    /// synced at every commit (the log is, and is where a lost commit is found again).
    fn keeps_cursor_in_log(&self, connector: &dyn ConnectorConfig) -> bool {
        connector.role() == Role::Source && self.iggy_of(connector).is_none()
    }

    fn sink(
        &self,
        config: &Config,
        sink: &SinkConfig,
        parts: Parts<SinkWorld>,
        state: ConnectorState,
    ) -> SinkConnector {
        let Parts { component, plugin_config, shared, transforms, .. } = parts;
        SinkConnector {
            key: sink.key.as_str().into(),
            tenant: sink.tenant.as_deref().map(Into::into),
            component,
            plugin_config,
            settings: SinkSettings::from_config(sink),
            sandbox: Sandbox { limits: sink.limits.clone(), grants: sink.grants.clone(), shared },
            input: self.input_of(config, sink, state),
            transforms,
            dead_letters: sink
                .dead_letters
                .as_ref()
                .map(|stream| DeadLetters { target: self.target_of(sink), stream: vec![stream.clone()].into() }),
        }
    }

    /// The connector's state, taken for this process and checked against the local log.
    fn state_of(&mut self, config: &Config, connector: &dyn ConnectorConfig) -> Result<ConnectorState, SetupError> {
        let key = connector.key();
        let own_durability = match self.keeps_cursor_in_log(connector) {
            true => Durability::Interval(config.state.sync_interval),
            false => config.state.durability(),
        };
        let states = self.states_of(config, connector).clone();
        let state = match connector.tenant().is_some() && self.held_at_the_top(config, key)? {
            // Committed before it had a tenant, its state is at the top: it moves
            // along rather than starting from scratch.
            true => states.open_moving_from(key, own_durability, &StateDir::new(&config.state.path)),
            false => states.open_with(key, own_durability),
        };
        let state = state.map_err(|problem| SetupError::State { key: key.to_string(), problem })?;
        self.local_log
            .verify_cursor(config, key, connector.role(), &state)
            .map_err(|problem| SetupError::Log { key: key.to_string(), problem })?;
        Ok(state)
    }

    /// Whether the top of the state directory holds a state of `key` (read once per
    /// pass, not once per connector).
    fn held_at_the_top(&mut self, config: &Config, key: &str) -> Result<bool, SetupError> {
        if self.top_keys.as_ref().is_none_or(|(pass, _)| *pass != self.pass) {
            let keys = StateDir::new(&config.state.path)
                .keys()
                .map_err(|problem| SetupError::State { key: key.to_string(), problem })?;
            self.top_keys = Some((self.pass, keys.into_iter().collect()));
        }
        Ok(self.top_keys.as_ref().is_some_and(|(_, keys)| keys.contains(key)))
    }

    /// The state directory of `connector`, one value per directory so that its
    /// connectors share one writer of its cursor database.
    fn states_of(&mut self, config: &Config, connector: &dyn ConnectorConfig) -> &StateDir {
        let dir = config.state_dir_of(connector);
        let durability = config.state.durability();
        self.state_dirs.entry(dir.clone()).or_insert_with(|| StateDir::new(&dir).with_durability(durability))
    }

    /// Put on disk what taking states committed without an fsync (new lineages): one
    /// fsync per state directory, before any connector taken starts.
    pub fn sync_states(&self) -> Result<(), SetupError> {
        for states in self.state_dirs.values() {
            states.sync().map_err(|problem| SetupError::StateSync { dir: states.path().to_path_buf(), problem })?;
        }
        Ok(())
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

    /// Whether `sink` reads from Iggy, whose server keeps its offsets (not ferry's
    /// state store).
    pub fn reads_from_iggy(&self, sink: &dyn ConnectorConfig) -> bool {
        self.iggy_of(sink).is_some()
    }

    /// What `sink` reads its topics from: Iggy (alone, or in its consumer group), or
    /// the local log with its positions in `state`.
    fn input_of(&self, config: &Config, sink: &SinkConfig, state: ConnectorState) -> Arc<dyn Input> {
        let topics = sink.topics().map(|(stream, topic)| (stream.to_string(), topic.to_string())).collect();
        match self.iggy_of(sink) {
            Some(iggy) => {
                let reading = match &sink.consumer_group {
                    Some(group) => Reading::InGroup(group.clone()),
                    None => Reading::Alone(sink.consumer_name()),
                };
                Arc::new(IggyInput::new(iggy.connection(), topics, reading))
            }
            None => Arc::new(
                LocalLogInput::new(&sink.key, &config.local_log.path, topics, Arc::new(state))
                    .in_config_file(&config.file),
            ),
        }
    }
}

/// A world whose compiled components the wiring keeps, one map per world.
trait Compiled: World + Sized {
    fn compiled(wiring: &mut Wiring) -> &mut HashMap<PathBuf, Known<Self>>;
}

impl Compiled for SourceWorld {
    fn compiled(wiring: &mut Wiring) -> &mut HashMap<PathBuf, Known<Self>> {
        &mut wiring.sources
    }
}

impl Compiled for SinkWorld {
    fn compiled(wiring: &mut Wiring) -> &mut HashMap<PathBuf, Known<Self>> {
        &mut wiring.sinks
    }
}

impl Compiled for TransformWorld {
    fn compiled(wiring: &mut Wiring) -> &mut HashMap<PathBuf, Known<Self>> {
        &mut wiring.transforms
    }
}

/// The engine the config needs: fuel metering only if some connector asks for it,
/// and a pool sized for the enabled connectors.
/// The codecs of `connector`'s stream schemas: a source's one encoder, a sink's
/// decoder for each topic it reads; or why an Avro schema is unusable.
fn schemas(connector: &dyn ConnectorConfig) -> Result<Schemas, String> {
    let codec = |schema: Option<ferry_config::schema::StreamSchema>| -> Result<Option<Codec>, String> {
        let Some(schema) = schema else { return Ok(None) };
        Codec::of(schema.schema, schema.avro.as_ref())
    };
    // The config was validated: its schema keys are consistent.
    let checked =
        |schema: Result<_, (&str, String)>| schema.map_err(|(key, problem)| format!("streams.{key}: {problem}"));
    if let Some(source) = connector.as_any().downcast_ref::<SourceConfig>() {
        let Some(stream) = source.streams.first() else { return Ok(Schemas::None) };
        return Ok(codec(checked(stream.schema())?)
            .map_err(|problem| format!("streams {}/{}: {problem}", stream.stream, stream.topic))?
            .map_or(Schemas::None, Schemas::Encode));
    }
    let Some(sink) = connector.as_any().downcast_ref::<SinkConfig>() else { return Ok(Schemas::None) };
    let mut codecs = HashMap::new();
    for stream in &sink.streams {
        let Some(codec) =
            codec(checked(stream.schema())?).map_err(|problem| format!("streams {}: {problem}", stream.stream))?
        else {
            continue;
        };
        for topic in &stream.topics {
            codecs.insert((stream.stream.clone(), topic.clone()), codec.clone());
        }
    }
    Ok(if codecs.is_empty() { Schemas::None } else { Schemas::Decode(codecs) })
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_reserves_what_the_config_checked_and_meters_fuel_only_when_asked() {
        let mut text = String::from("[runtime]\nallocator = \"pooling\"\n");
        for (i, memory) in ["64MiB", "1GiB", "8GiB"].iter().enumerate() {
            text += &format!(
                "[[sources]]\nkey = \"s{i}\"\npath = \"s.wasm\"\nstreams = [{{ stream = \"s\", topic = \"t\" }}]\n\
                 limits = {{ memory = \"{memory}\" }}\n"
            );
        }
        let config = Config::parse(std::path::Path::new("ferry.toml"), &text, Vec::new()).unwrap();
        let options = engine_options(&config);
        assert_eq!(options.pool.instances, config.pool_slots());
        assert_eq!((options.pool.instances, options.pool.max_memory_bytes), (10, ByteSize::gib(8).bytes()));
        assert_eq!(options.allocator, Allocator::Pooling);
        assert!(!options.fuel);
        let metered = text.replace("memory = \"64MiB\"", "memory = \"64MiB\", fuel = 1000");
        assert!(engine_options(&Config::parse(std::path::Path::new("ferry.toml"), &metered, Vec::new()).unwrap()).fuel);
    }

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
