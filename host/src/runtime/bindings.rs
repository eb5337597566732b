//! Host-side bindings generated from the contract in `wit/`.
//!
//! Exports are async so that a guest call yields to tokio whenever the guest blocks
//! in WASI (a clock wait, say) instead of holding a runtime thread.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "source-connector",
    exports: { default: async },
});

pub use self::iggy::connector::logging;
pub use self::iggy::connector::types;
pub use exports::iggy::connector::source as source_export;
