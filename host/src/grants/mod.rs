//! What a guest may reach beyond its own memory: deny by default.
//!
//! Each capability is its own module, composed here into the guest's WASI context:
//!
//! * [`logging`]: the contract's logging import, into the host log under the
//!   connector's key (always granted: it is how a guest talks to the operator);
//! * [`stdio`]: standard output and error, also into the host log (a panic message
//!   lands there); standard input is closed;
//! * clocks and random: the host's real clocks and a secure RNG (always granted,
//!   harmless and needed by nearly every program);
//! * [`network`]: sockets and name lookup, denied;
//! * environment variables, arguments and directories: none exist for the guest.
//!
//! Every WASI interface is *linked* (a component built for wasm32-wasip1 imports
//! filesystem and sockets whether it uses them or not), but an ungranted one has
//! nothing behind it: no preopened directory to open a file in, no address a
//! socket may connect to. The guest gets an ordinary error it can handle.

pub mod logging;
pub mod network;
pub mod stdio;

use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

use self::logging::GuestLog;

/// The WASI context of one guest instance.
pub fn wasi_context(log: &GuestLog) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    stdio::grant(&mut builder, log);
    network::deny(&mut builder);
    builder.build()
}
