//! Host-side bindings generated from the contract in `wit/`: one module per world,
//! sharing the `types`, `logging` and `postgres` interfaces (one set of Rust types
//! for what crosses the boundary, each import linked once for every guest).
//!
//! Exports are async so that a guest call yields to tokio whenever the guest blocks
//! in WASI (a clock wait, say) instead of holding a runtime thread.

mod source_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "source-connector",
        exports: { default: async },
        // PostgreSQL statements wait on the network: they yield to tokio.
        imports: { "iggy:connector/postgres": async },
        additional_derives: [PartialEq],
        with: { "iggy:connector/postgres.connection": crate::grants::postgres::PgConnection },
    });
}

mod sink_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "sink-connector",
        exports: { default: async },
        additional_derives: [PartialEq],
        with: {
            "iggy:connector/types": super::source_world::iggy::connector::types,
            "iggy:connector/logging": super::source_world::iggy::connector::logging,
            "iggy:connector/postgres": super::source_world::iggy::connector::postgres,
        },
    });
}

pub use sink_world::exports::iggy::connector::sink as sink_export;
pub use sink_world::{SinkConnector, SinkConnectorPre};
pub use source_world::exports::iggy::connector::source as source_export;
pub use source_world::iggy::connector::{logging, postgres, types};
pub use source_world::{SourceConnector, SourceConnectorPre};
