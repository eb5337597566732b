//! The sandbox: one wasmtime engine, components loaded and checked against the
//! contract, and instances created from them, each in a store of its own, under its
//! connector's limits and with only its grants.

pub mod bindings;
pub mod context;
mod engine;
pub mod instance;
pub mod limits;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};

use crate::config::{Grants, Limits};
use crate::contract::{self, ComponentWorld, Contract, ContractError};
use crate::grants::{self, logging::GuestLog};
use bindings::SourceConnectorPre;
use context::GuestContext;
pub use engine::{EngineOptions, PoolSize};
pub use instance::{CallError, SourceInstance};
use limits::{CallClock, MemoryLimiter};

/// What one connector's instances may use and reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    pub limits: Limits,
    pub grants: Grants,
}

/// Why a component cannot be used as a source. Always names the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: cannot read the component: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: {source}", path.display())]
    Contract { path: PathBuf, source: ContractError },
    #[error("{}: the component does not compile: {message}", path.display())]
    Compile { path: PathBuf, message: String },
    #[error("{}: the component needs an import this host does not provide: {message}", path.display())]
    Link { path: PathBuf, message: String },
}

/// A source component, compiled and checked, ready to be instantiated any number of
/// times (every restart makes a fresh instance from it).
pub struct SourceComponent {
    path: PathBuf,
    pre: SourceConnectorPre<GuestContext>,
    imports: Vec<String>,
}

impl SourceComponent {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the component imports (interfaces and functions), by name.
    pub fn imports(&self) -> &[String] {
        &self.imports
    }
}

/// The engine, the linker every guest is linked with, and the contract.
pub struct Runtime {
    engine: Engine,
    linker: Linker<GuestContext>,
    contract: Contract,
    meters_fuel: bool,
}

impl Runtime {
    /// A runtime with the default engine: no fuel metering, on-demand allocation.
    pub fn new() -> anyhow::Result<Runtime> {
        Self::with_options(&EngineOptions::default())
    }

    pub fn with_options(options: &EngineOptions) -> anyhow::Result<Runtime> {
        let engine = engine::new_engine(options)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        bindings::logging::add_to_linker::<GuestContext, HasSelf<GuestContext>>(&mut linker, |ctx| ctx)?;
        Ok(Runtime { engine, linker, contract: Contract::load(), meters_fuel: options.fuel })
    }

    /// Whether this engine meters fuel (so `limits.fuel` can be honoured).
    pub fn meters_fuel(&self) -> bool {
        self.meters_fuel
    }

    /// Read, check and compile the component at `path`.
    pub fn load_source(&self, path: &Path) -> Result<Arc<SourceComponent>, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read { path: path.to_path_buf(), source })?;
        let world = inspect(&bytes).map_err(|source| LoadError::Contract { path: path.to_path_buf(), source })?;
        contract::check_source(&world, &self.contract)
            .map_err(|source| LoadError::Contract { path: path.to_path_buf(), source })?;
        let component = Component::new(&self.engine, &bytes)
            .map_err(|e| LoadError::Compile { path: path.to_path_buf(), message: format!("{e:#}") })?;
        let link_error = |e: wasmtime::Error| LoadError::Link { path: path.to_path_buf(), message: format!("{e:#}") };
        let instance_pre = self.linker.instantiate_pre(&component).map_err(link_error)?;
        let pre = SourceConnectorPre::new(instance_pre).map_err(link_error)?;
        Ok(Arc::new(SourceComponent { path: path.to_path_buf(), pre, imports: world.imports() }))
    }

    /// A fresh instance of `component` in `sandbox`, logging through `log`, adding
    /// the fuel its calls burn to `fuel_consumed`.
    pub async fn instantiate(
        &self,
        component: &SourceComponent,
        sandbox: &Sandbox,
        log: GuestLog,
        fuel_consumed: Arc<AtomicU64>,
    ) -> Result<SourceInstance, CallError> {
        let trapped = |error| CallError::Trapped { call: "instantiate", error };
        let fuel_per_call = match (self.meters_fuel, sandbox.limits.fuel) {
            (true, fuel) => Some(fuel.unwrap_or(u64::MAX)),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(trapped(wasmtime::Error::msg("limits.fuel is set but this runtime does not meter fuel")));
            }
        };
        let (wasi, http_grant) =
            grants::wasi_context(&sandbox.grants, &log).await.map_err(|p| trapped(wasmtime::Error::msg(p)))?;
        let context = GuestContext {
            wasi,
            http: wasmtime_wasi_http::WasiHttpCtx::new(),
            http_grant,
            table: ResourceTable::new(),
            log,
            limiter: MemoryLimiter::new(&sandbox.limits),
            clock: CallClock::new(sandbox.limits.call_timeout),
        };
        let mut store = Store::new(&self.engine, context);
        store.limiter(|context| &mut context.limiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|context| context.data().clock.on_tick());
        if let Some(fuel) = fuel_per_call {
            store.set_fuel(fuel).map_err(trapped)?;
        }
        store.data_mut().clock.start();
        let bindings = component.pre.instantiate_async(&mut store).await.map_err(trapped)?;
        Ok(SourceInstance::new(store, bindings, fuel_per_call, fuel_consumed))
    }

    /// The contract this runtime checks components against.
    pub fn contract(&self) -> &Contract {
        &self.contract
    }
}

/// Decode what a component claims to be, without compiling it.
pub fn inspect(bytes: &[u8]) -> Result<ComponentWorld, ContractError> {
    ComponentWorld::decode(bytes)
}
