//! The sandbox: one wasmtime engine, components loaded and checked against the
//! contract, and instances created from them, each in a store of its own.

pub mod bindings;
pub mod context;
mod engine;
pub mod instance;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};

use crate::contract::{self, ComponentWorld, Contract, ContractError};
use crate::grants::{self, logging::GuestLog};
use bindings::SourceConnectorPre;
use context::GuestContext;
pub use instance::{CallError, SourceInstance};

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
}

impl Runtime {
    pub fn new() -> anyhow::Result<Runtime> {
        let engine = engine::new_engine()?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        bindings::logging::add_to_linker::<GuestContext, HasSelf<GuestContext>>(&mut linker, |ctx| ctx)?;
        Ok(Runtime { engine, linker, contract: Contract::load() })
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

    /// A fresh instance of `component`, logging through `log`.
    pub async fn instantiate(&self, component: &SourceComponent, log: GuestLog) -> Result<SourceInstance, CallError> {
        let context = GuestContext { wasi: grants::wasi_context(&log), table: ResourceTable::new(), log };
        let mut store = Store::new(&self.engine, context);
        let bindings = component
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|error| CallError::Trapped { call: "instantiate", error })?;
        Ok(SourceInstance::new(store, bindings))
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
