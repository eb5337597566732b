//! The one wasmtime engine every connector shares: compiled code is shared, stores
//! (one per instance) are not.
//!
//! Interruption is by epoch: a background thread advances the engine's epoch every
//! [`EPOCH_TICK`], and each store decides at a tick whether its call has run too long
//! (see [`super::limits`]). Fuel metering slows every guest down, so it is compiled in
//! only when some connector sets `limits.fuel`.

use wasmtime::{Config, Engine, EngineWeak, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use super::limits::EPOCH_TICK;
use ferry_config::Allocator;

/// How the engine is built.
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineOptions {
    /// Compile fuel metering in (needed by any connector with `limits.fuel`).
    pub fuel: bool,
    pub allocator: Allocator,
    /// For the pooling allocator: how many instances may live at once, and the
    /// largest memory one may have.
    pub pool: PoolSize,
}

/// The size of the pooling allocator's reservation.
#[derive(Debug, Clone, Copy)]
pub struct PoolSize {
    pub instances: u32,
    pub max_memory_bytes: u64,
}

impl Default for PoolSize {
    fn default() -> Self {
        PoolSize { instances: 100, max_memory_bytes: 64 << 20 }
    }
}

/// An engine for components, compiling with Cranelift at full optimisation.
pub fn new_engine(options: &EngineOptions) -> wasmtime::Result<Engine> {
    let mut config = compiling_config(options.fuel);
    if options.allocator == Allocator::Pooling {
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(options.pool)));
    }
    let engine = Engine::new(&config)?;
    start_epoch_ticker(engine.weak());
    Ok(engine)
}

/// An engine that only compiles, for the child process of
/// [`super::compile::Compiler::Isolated`]. What it produces loads into an engine of
/// [`new_engine`] with the same `fuel`: the allocator does not change the code.
pub fn compiling_engine(fuel: bool) -> wasmtime::Result<Engine> {
    Engine::new(&compiling_config(fuel))
}

/// Everything about the engine that decides the compiled code.
fn compiling_config(fuel: bool) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.cranelift_opt_level(OptLevel::Speed);
    config.epoch_interruption(true);
    config.consume_fuel(fuel);
    // Fewer memory mappings per instance, so that ten thousand connectors stay under
    // the kernel's limit of mappings per process (`vm.max_map_count`, 65530 by
    // default): no guard region before each linear memory (the one after it is
    // what bounds checks rely on), and the initial memory copied in rather than
    // mapped copy-on-write from an image (a mapping of its own, for the few pages a
    // connector's data segments hold).
    config.guard_before_linear_memory(false);
    config.memory_init_cow(false);
    config
}

/// Slots for `pool.instances` component instances. A Rust guest built with the
/// preview1 adapter is a handful of core instances with up to three memories and
/// tables; the pool allows eight of each per component so that other guests fit too.
fn pooling(pool: PoolSize) -> PoolingAllocationConfig {
    const PER_COMPONENT: u32 = 8;
    let mut config = PoolingAllocationConfig::new();
    let slots = pool.instances.max(1);
    config
        .total_component_instances(slots)
        .total_core_instances(slots * PER_COMPONENT)
        .total_memories(slots * PER_COMPONENT)
        .total_tables(slots * PER_COMPONENT)
        .max_memories_per_component(PER_COMPONENT)
        .max_tables_per_component(PER_COMPONENT)
        .max_core_instances_per_component(PER_COMPONENT * 2)
        .max_memory_size(usize::try_from(pool.max_memory_bytes).unwrap_or(usize::MAX))
        .table_elements(100_000);
    config
}

/// Advance the epoch every tick for as long as the engine lives.
fn start_epoch_ticker(engine: EngineWeak) {
    std::thread::Builder::new()
        .name("ferry-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })
        .expect("spawning the epoch thread");
}
