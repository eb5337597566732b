//! Bindings generated from the contract in `wit/`, the one source of truth for what
//! crosses the boundary. Authors rarely need them directly: [`crate::Source`] and
//! [`crate::export_source!`] wrap them.

wit_bindgen::generate!({
    path: "../wit",
    world: "source-connector",
    pub_export_macro: true,
    export_macro_name: "__export_source_connector",
    default_bindings_module: "ferry_guest::bindings",
});
