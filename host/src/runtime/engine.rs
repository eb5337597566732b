//! The one wasmtime engine every connector shares: compiled code is shared, stores
//! (one per instance) are not.

use wasmtime::{Config, Engine, OptLevel};

/// An engine for components, compiling with Cranelift at full optimisation.
pub fn new_engine() -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.cranelift_opt_level(OptLevel::Speed);
    Engine::new(&config)
}
