//! What a guest's store holds: its WASI context (built from its grants), its resource
//! table, its log, and the limits it runs under. One per instance; nothing in it is
//! shared with another guest.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::limits::{CallClock, MemoryLimiter};
use crate::grants::http::HttpGrant;
use crate::grants::logging::GuestLog;
use crate::grants::postgres::PgAccess;

pub struct GuestContext {
    pub(crate) wasi: WasiCtx,
    pub(crate) http: WasiHttpCtx,
    pub(crate) http_grant: HttpGrant,
    pub(crate) table: ResourceTable,
    pub(crate) log: GuestLog,
    pub(crate) postgres: PgAccess,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) clock: CallClock,
}

impl WasiView for GuestContext {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for GuestContext {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.http_grant }
    }
}
