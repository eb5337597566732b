//! The contract in `wit/`, compiled into the host twice: as text (for the check that
//! a component keeps it, [`crate::check`]) and as Rust bindings, one module per world,
//! sharing the imported interfaces (one set of Rust types for what crosses the
//! boundary, each import linked once for every guest).
//!
//! The bindings name no host type: a resource an interface hands out (a PostgreSQL
//! connection) is bindgen's placeholder here, and the capability that serves it keeps
//! its own value behind the handle (see `ferry-capabilities`). So this crate sits at
//! the bottom, and every layer above can speak the contract's types.
//!
//! Exports are async so that a guest call yields to tokio whenever the guest blocks
//! in WASI (a clock wait, say) instead of holding a runtime thread.

/// Every `.wit` file of the contract, by name, as compiled into this host.
pub const WIT_FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/wit_files.rs"));

mod source_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "source-connector",
        // Every import of the contract is async: a capability that waits on the network
        // (a PostgreSQL statement) yields to tokio instead of holding a runtime thread.
        exports: { default: async },
        imports: { default: async },
        additional_derives: [PartialEq],
    });
}

mod sink_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "sink-connector",
        exports: { default: async },
        additional_derives: [PartialEq],
        // The imports it shares with the source world are the source world's, one set
        // of types for both; `stored-checksums` is the sink's own.
        with: {
            "iggy:connector/types": super::source_world::iggy::connector::types,
            "iggy:connector/logging": super::source_world::iggy::connector::logging,
            "iggy:connector/postgres": super::source_world::iggy::connector::postgres,
            "iggy:connector/redis": super::source_world::iggy::connector::redis,
            "iggy:connector/nats": super::source_world::iggy::connector::nats,
            "iggy:connector/mqtt": super::source_world::iggy::connector::mqtt,
            "iggy:connector/mysql": super::source_world::iggy::connector::mysql,
            "iggy:connector/kafka": super::source_world::iggy::connector::kafka,
        },
    });
}

mod transform_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "transform-component",
        exports: { default: async },
        additional_derives: [PartialEq],
        with: { "iggy:connector": super::source_world::iggy::connector },
    });
}

pub use sink_world::exports::iggy::connector::sink as sink_export;
pub use sink_world::iggy::connector::stored_checksums;
pub use sink_world::{SinkConnector, SinkConnectorPre};
pub use source_world::exports::iggy::connector::source as source_export;
pub use source_world::iggy::connector::{kafka, logging, mqtt, mysql, nats, postgres, redis, types};
pub use source_world::{SourceConnector, SourceConnectorPre};
pub use transform_world::exports::iggy::connector::transform as transform_export;
pub use transform_world::{TransformComponent, TransformComponentPre};
