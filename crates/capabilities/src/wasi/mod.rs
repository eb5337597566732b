//! What every guest has of WASI: the host's real clocks, a secure random source,
//! streams and polling, and `exit` (which ends the instance, as a trap). Harmless,
//! and needed by nearly every program. This capability also links all of WASI
//! preview 2 once: an interface no grant opens is linked too, with nothing behind it
//! (see the crate's documentation).

use wasmtime::component::Linker;

use crate::{Capability, GuestData, Import, InstanceBuilder, NoSection, Verdict};

/// The capability: always granted.
pub struct Wasi;

impl Capability for Wasi {
    const NAME: &'static str = "wasi";
    type Grant = ();
    type Section = NoSection;
    type Shared = ();
    type State = ();

    fn verdict(import: &Import<'_>, _: &()) -> Option<Verdict> {
        match (import.package, import.name) {
            ("wasi:clocks", _) | ("wasi:random", _) => Some(Verdict::Granted("always")),
            ("wasi:io", _) => Some(Verdict::Granted("always (streams and polling)")),
            ("wasi:cli", "exit") => Some(Verdict::Granted("ends the instance (a trap)")),
            _ => None,
        }
    }

    async fn instantiate(_: &(), _: &(), _: &mut InstanceBuilder<'_>) -> Result<(), String> {
        Ok(())
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        wasmtime_wasi::p2::add_to_linker_async(linker)
    }
}
