//! Environment variables: only those named in `grants.env`, with the host's values.
//!
//! The guest receives the list when it starts and reads it inside its own memory,
//! so the host cannot see (or log) a lookup of a variable it was not given: the
//! variable simply does not exist for the guest.

use wasmtime_wasi::WasiCtxBuilder;

pub fn grant(builder: &mut WasiCtxBuilder, names: &[String]) {
    for name in names {
        match std::env::var(name) {
            Ok(value) => {
                builder.env(name, value);
            }
            Err(_) => tracing::warn!(target: "ferry::grants", "grants.env: {name} is not set on the host; not passed"),
        }
    }
}
