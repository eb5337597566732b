//! Environment variables: only those named in `grants.env`, with the host's values.
//!
//! The guest receives the list when it starts and reads it inside its own memory,
//! so the host cannot see (or log) a lookup of a variable it was not given: the
//! variable simply does not exist for the guest.

mod config;

use wasmtime_wasi::WasiCtxBuilder;

use crate::{Capability, Import, InstanceBuilder, NoSection, Verdict};

/// The capability: `grants.env`, the names of the variables passed through.
pub struct Env;

impl Capability for Env {
    const NAME: &'static str = "env";
    type Grant = Vec<String>;
    type Section = NoSection;
    type Shared = ();
    type State = ();

    fn validate(names: &Vec<String>, _: &NoSection) -> Result<(), (&'static str, String)> {
        config::validate(names).map_err(|problem| ("grants.env", problem))
    }

    fn verdict(import: &Import<'_>, names: &Vec<String>) -> Option<Verdict> {
        import
            .is("wasi:cli", "environment")
            .then(|| Verdict::by(!names.is_empty(), "grants.env", "no variables: grants.env is empty"))
    }

    async fn instantiate(names: &Vec<String>, _: &(), instance: &mut InstanceBuilder<'_>) -> Result<(), String> {
        grant(instance.wasi, names);
        Ok(())
    }
}

fn grant(builder: &mut WasiCtxBuilder, names: &[String]) {
    for name in names {
        match std::env::var(name) {
            Ok(value) => {
                builder.env(name, value);
            }
            Err(_) => tracing::warn!(target: "ferry::grants", "grants.env: {name} is not set on the host; not passed"),
        }
    }
}
