//! What a guest's store holds: its WASI context (built from its grants), its resource
//! table, and its log. One per instance; nothing in it is shared with another guest.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::grants::logging::GuestLog;

pub struct GuestContext {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) log: GuestLog,
}

impl WasiView for GuestContext {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}
