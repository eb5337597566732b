//! What a guest's store holds: its WASI context (built from its grants), its table of
//! handles, every capability's state of this instance, and the limits it runs under.
//! One per instance; nothing in it is shared with another guest.
//!
//! Capabilities see it only through [`GuestData`]: they link against that trait and
//! never name this type.

use ferry_capabilities::{Guest, GuestData, States};
use ferry_contract::StoredChecksums;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use super::limits::{CallClock, MemoryLimiter};

pub struct GuestContext {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) states: States,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) clock: CallClock,
    /// A sink's: the checksums of the batch it is handed (see `stored_checksums`).
    pub(crate) checksums: StoredChecksums,
}

impl WasiView for GuestContext {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for GuestContext {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.states.network.http_view(&mut self.table)
    }
}

impl GuestData for GuestContext {
    fn guest(&mut self) -> Guest<'_> {
        Guest { states: &mut self.states, table: &mut self.table, remaining: self.clock.remaining() }
    }
}
