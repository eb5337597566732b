//! Bindings generated from the contract in `wit/`, the one source of truth for what
//! crosses the boundary. Authors rarely need them directly: [`crate::Source`],
//! [`crate::Sink`] and their `export_*!` macros wrap them.
//!
//! Three worlds, one set of shared types. The `source-connector` world is generated at
//! the root of this module, with the `types`, `logging` and `postgres` interfaces; the
//! `sink-connector` world is generated in [`sink`] and the `transform-component`
//! world in [`transform`], each reusing them (wit-bindgen's `with`), so a header value, an error or a log call is one Rust type whichever
//! world a connector implements. Each world's export macro carries the description
//! of its own exports (`pub_export_macro`), while this library only describes the
//! imports: a source component declares `source`, a sink component `sink`, and
//! neither has to implement the other.

wit_bindgen::generate!({
    path: "../wit",
    world: "source-connector",
    additional_derives: [PartialEq],
    pub_export_macro: true,
    export_macro_name: "__export_source_connector",
    default_bindings_module: "ferry_guest::bindings",
});

/// The `sink-connector` world, sharing `types`, `logging` and `postgres` with the
/// source world.
pub mod sink {
    wit_bindgen::generate!({
        path: "../wit",
        world: "sink-connector",
        additional_derives: [PartialEq],
        with: {
            "iggy:connector/types@0.2.1": crate::bindings::iggy::connector::types,
            "iggy:connector/logging@0.2.1": crate::bindings::iggy::connector::logging,
            "iggy:connector/postgres@0.2.1": crate::bindings::iggy::connector::postgres,
            "iggy:connector/redis@0.2.1": crate::bindings::iggy::connector::redis,
            "iggy:connector/nats@0.2.1": crate::bindings::iggy::connector::nats,
            "iggy:connector/mqtt@0.2.1": crate::bindings::iggy::connector::mqtt,
            "iggy:connector/mysql@0.2.1": crate::bindings::iggy::connector::mysql,
            "iggy:connector/kafka@0.2.1": crate::bindings::iggy::connector::kafka,
        },
        pub_export_macro: true,
        export_macro_name: "__export_sink_connector",
        default_bindings_module: "ferry_guest::bindings::sink",
    });
}

/// The `transform-component` world, sharing `types` and `logging` with the source
/// world.
pub mod transform {
    wit_bindgen::generate!({
        path: "../wit",
        world: "transform-component",
        additional_derives: [PartialEq],
        with: {
            "iggy:connector/types@0.2.1": crate::bindings::iggy::connector::types,
            "iggy:connector/logging@0.2.1": crate::bindings::iggy::connector::logging,
        },
        pub_export_macro: true,
        export_macro_name: "__export_transform_component",
        default_bindings_module: "ferry_guest::bindings::transform",
    });
}
