//! # ferry-runtime: the sandbox
//!
//! One wasmtime engine, components loaded and checked against the contract, and
//! instances created from them, each in a store of its own, under its connector's
//! limits and with only its grants (the capabilities of `ferry-capabilities`, linked
//! once per engine and made once per instance). What an instance is *for* (the
//! loops that poll and write) is the business of `ferry-engine`, above.

pub mod compile;
pub mod compile_cache;
pub mod context;
mod engine;
pub mod instance;
pub mod limits;
mod pending;
mod sink_instance;
mod source_instance;
mod stored_checksums;
mod transform_instance;
mod world;

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_capabilities::logging::GuestLog;
use ferry_capabilities::{Grants, InstanceBuilder, InstanceLimits, Shared};
use ferry_config::Limits;
use ferry_contract::files::{self, FileError};
use ferry_contract::{self as contract, ComponentWorld, Contract, ContractError, StoredChecksums};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};

pub use compile::{CompileFailure, Compiler, Isolation};
use compile_cache::{CompileCache, EntryKey, Lookup};
use context::GuestContext;
pub use engine::{EngineOptions, PoolSize};
pub use instance::{CallError, GuestStore};
pub use limits::InstanceMeters;
use limits::{CallClock, MemoryLimiter};
pub use pending::PendingComponent;
pub use sink_instance::SinkInstance;
pub use source_instance::SourceInstance;
pub use transform_instance::TransformInstance;
pub use world::{SinkWorld, SourceWorld, TransformWorld, World};

/// What one connector's instances may use and reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    pub limits: Limits,
    pub grants: Grants,
    /// What its instances share of the capabilities granted (`Grants::prepare`):
    /// the pools of the PostgreSQL servers it may reach, say.
    pub shared: Shared,
}

/// Why a component cannot be used. Always names the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Read(FileError),
    #[error("{}: {problem}", path.display())]
    Contract { path: PathBuf, problem: ContractError },
    #[error("{}: the component does not compile: {message}", path.display())]
    Compile { path: PathBuf, message: String },
    #[error("{}: {failure}", path.display())]
    Bounded { path: PathBuf, failure: CompileFailure },
    #[error("{}: the component needs an import this host does not provide: {message}", path.display())]
    Link { path: PathBuf, message: String },
}

/// A component read and checked against the contract of world `W`, not compiled yet.
pub struct CheckedComponent<W> {
    path: PathBuf,
    bytes: Vec<u8>,
    imports: Vec<String>,
    world: PhantomData<W>,
}

impl<W> CheckedComponent<W> {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SHA-256 of its bytes: what tells a changed component from the same one.
    pub fn digest(&self) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(&self.bytes).into()
    }
}

/// A component of world `W` (a connector, or a transform), compiled, checked and linked, ready to be
/// instantiated any number of times (every restart makes a fresh instance from it).
pub struct ConnectorComponent<W: World> {
    path: PathBuf,
    pre: W::Pre,
    imports: Vec<String>,
}

impl<W: World> ConnectorComponent<W> {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the component imports (interfaces and functions), by name.
    pub fn imports(&self) -> &[String] {
        &self.imports
    }
}

pub type SourceComponent = ConnectorComponent<SourceWorld>;
pub type SinkComponent = ConnectorComponent<SinkWorld>;
pub type TransformComponent = ConnectorComponent<TransformWorld>;

/// The largest component [`Runtime::load`] reads (trusted callers; `ferry run`
/// takes `[runtime] max_component_bytes`).
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// The engine, the linker every guest is linked with, the contract, and how
/// components get compiled.
pub struct Runtime {
    engine: Engine,
    linker: Linker<GuestContext>,
    contract: Contract,
    meters_fuel: bool,
    compiler: Compiler,
    /// Compiled components kept on disk, when configured.
    cache: Option<CompileCache>,
}

/// A component compiled (or found compiled) and linked, and how it came to be.
pub struct Compiled<W: World> {
    pub component: Arc<ConnectorComponent<W>>,
    pub provenance: Provenance,
    /// From the component's bytes to the linked component.
    pub elapsed: Duration,
}

/// Where a compiled component came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provenance {
    /// Loaded from this entry of the compile cache; nothing was compiled.
    CacheHit { entry: PathBuf },
    /// Compiled now.
    Compiled { cache: Caching },
}

/// What became of a component compiled now, as far as the compile cache goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caching {
    /// There is no compile cache.
    Off,
    /// Kept in this entry for the next time.
    Stored { entry: PathBuf },
    /// Not kept, for this reason (logged as a warning).
    Failed(String),
}

impl Runtime {
    /// A runtime with the default engine: no fuel metering, on-demand allocation,
    /// components compiled in-process.
    pub fn new() -> anyhow::Result<Runtime> {
        Self::with_options(&EngineOptions::default())
    }

    pub fn with_options(options: &EngineOptions) -> anyhow::Result<Runtime> {
        let engine = engine::new_engine(options)?;
        let mut linker = Linker::new(&engine);
        ferry_capabilities::link_all(&mut linker)?;
        stored_checksums::link(&mut linker)?;
        Ok(Runtime {
            engine,
            linker,
            contract: Contract::load(),
            meters_fuel: options.fuel,
            compiler: Compiler::InProcess,
            cache: None,
        })
    }

    /// Compile components with `compiler` from now on.
    pub fn with_compiler(mut self, compiler: Compiler) -> Runtime {
        self.compiler = compiler;
        self
    }

    /// Keep compiled components in `dir`, and load them from there rather than
    /// compile them again (see [`compile_cache`] for what the key covers and whom the
    /// directory must be trusted by).
    pub fn with_compile_cache(mut self, dir: PathBuf) -> Runtime {
        self.cache = Some(CompileCache::new(dir, &self.engine, self.meters_fuel));
        self
    }

    /// Whether this engine meters fuel (so `limits.fuel` can be honoured).
    pub fn meters_fuel(&self) -> bool {
        self.meters_fuel
    }

    /// Read the component at `path` (a regular file of at most `max_bytes`) and check
    /// it against the contract of world `W`, without compiling it: cheap, so that a
    /// component of the wrong kind stops `ferry run` before anything starts.
    pub fn check<W: World>(&self, path: &Path, max_bytes: u64) -> Result<CheckedComponent<W>, LoadError> {
        let bytes = files::read_regular(path, max_bytes, "the component", "[runtime] max_component_bytes")
            .map_err(LoadError::Read)?;
        let contract_error = |problem| LoadError::Contract { path: path.to_path_buf(), problem };
        let world = inspect(&bytes).map_err(contract_error)?;
        contract::check(&world, &self.contract, W::KIND).map_err(contract_error)?;
        Ok(CheckedComponent { path: path.to_path_buf(), bytes, imports: world.imports(), world: PhantomData })
    }

    /// Compile a checked component with this runtime's compiler, or load it from the
    /// compile cache, and link it. Says in the log which it was, and how long it took.
    pub async fn compile<W: World>(&self, checked: CheckedComponent<W>) -> Result<Compiled<W>, LoadError> {
        let started = Instant::now();
        let CheckedComponent { path, bytes, imports, .. } = checked;
        let (component, provenance) = self.compile_cached(&path, bytes).await?;
        let shown = path.display().to_string();
        let component = self.link(path, component, imports)?;
        let elapsed = started.elapsed();
        match &provenance {
            Provenance::CacheHit { entry } => tracing::info!(
                path = shown,
                entry = %entry.display(),
                "component loaded from the compile cache in {elapsed:.1?} (cache hit)"
            ),
            Provenance::Compiled { cache: Caching::Stored { entry } } => {
                tracing::info!(entry = %entry.display(), "component compiled in {elapsed:.1?}, and cached")
            }
            Provenance::Compiled { cache: Caching::Off } => {
                tracing::info!("component compiled in {elapsed:.1?} (compile cache off)")
            }
            Provenance::Compiled { cache: Caching::Failed(problem) } => {
                tracing::warn!("component compiled in {elapsed:.1?}, but not cached: {problem}")
            }
        }
        Ok(Compiled { component, provenance, elapsed })
    }

    /// The component `bytes` (read from `path`) from the compile cache, or compiled
    /// and stored there. A cache that cannot be used is never a reason to refuse the
    /// component: it is compiled as if there were no cache.
    async fn compile_cached(&self, path: &Path, bytes: Vec<u8>) -> Result<(Component, Provenance), LoadError> {
        let Some(cache) = self.cache.clone() else {
            tracing::info!(path = %path.display(), "compiling component");
            let (component, _) = self.compile_now(path, bytes, false).await?;
            return Ok((component, Provenance::Compiled { cache: Caching::Off }));
        };
        let (bytes, key, lookup) = blocking(path, move || {
            let key = cache.key(&bytes);
            let lookup = cache.lookup(&key);
            (bytes, key, lookup)
        })
        .await?;
        let entry = key.path().display().to_string();
        // Why the cache cannot be used at all, if it cannot.
        let unusable = match lookup {
            Lookup::Hit(artifact) => {
                // SAFETY: the entry is in a directory only ferry's user can write
                // (checked by `lookup`; the operator is trusted to keep it so, see
                // `compile_cache`), under the key of exactly these bytes and this
                // engine's settings, and its checksum matches what our own compiler
                // wrote; wasmtime checks its own header and the engine again.
                let engine = self.engine.clone();
                let loaded = blocking(path, move || unsafe { Component::deserialize(&engine, artifact.bytes()) });
                match loaded.await? {
                    Ok(component) => {
                        return Ok((component, Provenance::CacheHit { entry: key.path().to_path_buf() }));
                    }
                    Err(e) => {
                        tracing::warn!(%entry, "compile cache entry cannot be loaded ({e:#}): compiling again, and replacing it");
                        None
                    }
                }
            }
            Lookup::Miss => None,
            Lookup::Damaged(problem) => {
                tracing::warn!(%entry, "compile cache entry is damaged ({problem}): compiling again, and replacing it");
                None
            }
            Lookup::Unusable(problem) => Some(problem),
        };
        tracing::info!(path = %path.display(), "compiling component (not in the compile cache)");
        let (component, artifact) = self.compile_now(path, bytes, unusable.is_none()).await?;
        let caching = match (unusable, artifact) {
            (Some(problem), _) => Caching::Failed(problem),
            (None, Some(artifact)) => self.store(path, key, artifact).await,
            (None, None) => Caching::Failed("the compiler gave no artifact to keep".into()),
        };
        Ok((component, Provenance::Compiled { cache: caching }))
    }

    /// Keep `artifact` under `key`; what became of it.
    async fn store(&self, path: &Path, key: EntryKey, artifact: Vec<u8>) -> Caching {
        let Some(cache) = self.cache.clone() else { return Caching::Off };
        let stored = blocking(path, move || cache.store(&key, &artifact).map(|()| key.path().to_path_buf())).await;
        match stored {
            Ok(Ok(entry)) => Caching::Stored { entry },
            Ok(Err(problem)) => Caching::Failed(problem),
            Err(problem) => Caching::Failed(problem.to_string()),
        }
    }

    /// Compile `bytes` with this runtime's compiler; with the serialized artifact
    /// too when `serialized` is asked for (to be cached).
    async fn compile_now(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        serialized: bool,
    ) -> Result<(Component, Option<Vec<u8>>), LoadError> {
        let compile_error = |message| LoadError::Compile { path: path.to_path_buf(), message };
        match &self.compiler {
            Compiler::InProcess => {
                let engine = self.engine.clone();
                blocking(path, move || {
                    let component = Component::new(&engine, &bytes)?;
                    let artifact = if serialized { Some(component.serialize()?) } else { None };
                    Ok::<_, wasmtime::Error>((component, artifact))
                })
                .await?
                .map_err(|e| compile_error(format!("{e:#}")))
            }
            Compiler::Isolated(isolation) => {
                let artifact = isolation.compile(&bytes, self.meters_fuel).await.map_err(|failure| match failure {
                    CompileFailure::Invalid(message) => compile_error(message),
                    failure => LoadError::Bounded { path: path.to_path_buf(), failure },
                })?;
                // SAFETY: the artifact was just made by our own binary's compiler (the
                // child process), for an engine configured like this one, and wasmtime
                // checks that configuration before loading it.
                let component = unsafe { Component::deserialize(&self.engine, &artifact) }
                    .map_err(|e| compile_error(format!("{e:#}")))?;
                Ok((component, serialized.then_some(artifact)))
            }
        }
    }

    /// Read, check and compile the component at `path`, in this process: for
    /// components the caller trusts (tests, benchmarks, tools).
    pub fn load<W: World>(&self, path: &Path) -> Result<Arc<ConnectorComponent<W>>, LoadError> {
        let CheckedComponent { path, bytes, imports, .. } = self.check::<W>(path, MAX_COMPONENT_BYTES)?;
        let component = Component::new(&self.engine, &bytes)
            .map_err(|e| LoadError::Compile { path: path.clone(), message: format!("{e:#}") })?;
        self.link(path, component, imports)
    }

    /// [`Runtime::load`] for a source.
    pub fn load_source(&self, path: &Path) -> Result<Arc<SourceComponent>, LoadError> {
        self.load::<SourceWorld>(path)
    }

    fn link<W: World>(
        &self,
        path: PathBuf,
        component: Component,
        imports: Vec<String>,
    ) -> Result<Arc<ConnectorComponent<W>>, LoadError> {
        let link_error = |e: wasmtime::Error| LoadError::Link { path: path.clone(), message: format!("{e:#}") };
        let instance_pre = self.linker.instantiate_pre(&component).map_err(link_error)?;
        let pre = W::prepare(instance_pre).map_err(link_error)?;
        Ok(Arc::new(ConnectorComponent { path, pre, imports }))
    }

    /// A fresh instance of `component` in `sandbox`, logging through `log`,
    /// counting what it uses (fuel, memory) in `meters`.
    pub async fn instantiate<W: World>(
        &self,
        component: &ConnectorComponent<W>,
        sandbox: &Sandbox,
        log: GuestLog,
        meters: &InstanceMeters,
    ) -> Result<W::Instance, CallError> {
        let trapped = |error| CallError::Trapped { call: "instantiate", error };
        let fuel_per_call = match (self.meters_fuel, sandbox.limits.fuel) {
            (true, fuel) => Some(fuel.unwrap_or(u64::MAX)),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(trapped(wasmtime::Error::msg("limits.fuel is set but this runtime does not meter fuel")));
            }
        };
        let mut wasi = wasmtime_wasi::WasiCtxBuilder::new();
        let limits = InstanceLimits { max_result_bytes: sandbox.limits.max_batch_bytes.bytes() };
        let mut builder = InstanceBuilder { wasi: &mut wasi, log: &log, limits };
        let states = ferry_capabilities::instantiate(&sandbox.grants, &sandbox.shared, &mut builder)
            .await
            .map_err(|p| trapped(wasmtime::Error::msg(p)))?;
        let context = GuestContext {
            wasi: wasi.build(),
            table: resource_table(),
            states,
            limiter: MemoryLimiter::new(&sandbox.limits, meters.memory_in_use.clone()),
            clock: CallClock::new(sandbox.limits.call_timeout),
            checksums: StoredChecksums::default(),
        };
        let mut store = Store::new(&self.engine, context);
        store.limiter(|context| &mut context.limiter);
        store.set_hostcall_fuel(limits::hostcall_fuel(&sandbox.limits));
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|context| context.data().clock.on_tick());
        if let Some(fuel) = fuel_per_call {
            store.set_fuel(fuel).map_err(trapped)?;
        }
        store.data_mut().clock.start();
        W::instantiate(&component.pre, GuestStore::new(store, fuel_per_call, meters.fuel_consumed.clone())).await
    }

    /// The contract this runtime checks components against.
    pub fn contract(&self) -> &Contract {
        &self.contract
    }
}

/// Run `work` (file I/O, hashing, compiling) on tokio's blocking threads.
async fn blocking<T: Send + 'static>(path: &Path, work: impl FnOnce() -> T + Send + 'static) -> Result<T, LoadError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| LoadError::Compile { path: path.to_path_buf(), message: format!("the compile task failed: {e}") })
}

/// Decode what a component claims to be, without compiling it.
pub fn inspect(bytes: &[u8]) -> Result<ComponentWorld, ContractError> {
    ComponentWorld::decode(bytes)
}

/// The most handles (WASI streams, pollables, HTTP requests, PostgreSQL connections)
/// one instance may hold at once. Each costs the host memory, and a guest that keeps
/// opening without dropping would otherwise grow the host by wasmtime's default of a
/// million entries per instance; a connector doing real work holds a few dozen.
pub const MAX_HANDLES: usize = 10_000;

/// An instance's table of handles, bounded by [`MAX_HANDLES`]: past it, opening
/// another fails (as an error value where the import has one, else a trap).
fn resource_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_HANDLES);
    table
}
