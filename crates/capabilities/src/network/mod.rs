//! Outbound network: TCP connections ([`sockets`]) and outgoing `wasi:http` requests
//! ([`http`]) to the `host:port` pairs in `grants.network`, nothing else. One grant
//! for both, checked the same way: by the addresses its names resolved to when the
//! instance started.

mod config;
mod http;
mod pool;
mod sockets;

use std::sync::Arc;

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView};

use crate::{Capability, GuestData, Import, InstanceBuilder, NoSection, Verdict};

/// The capability: `grants.network`, the `host:port` pairs a guest may reach.
pub struct Network;

/// What one instance keeps: its `wasi:http` context, and the hooks that check every
/// request against the grant.
pub struct NetworkState {
    http: WasiHttpCtx,
    hooks: http::HttpGrant,
}

impl NetworkState {
    /// The `wasi:http` view of an instance with this state and `table` (the runtime's
    /// `WasiHttpView`).
    pub fn http_view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView { ctx: &mut self.http, table, hooks: &mut self.hooks }
    }
}

impl Capability for Network {
    const NAME: &'static str = "network";
    type Grant = Vec<String>;
    type Section = NoSection;
    type Shared = ();
    type State = NetworkState;

    fn validate(entries: &Vec<String>, _: &NoSection) -> Result<(), (&'static str, String)> {
        config::validate(entries).map_err(|problem| ("grants.network", problem))
    }

    fn verdict(import: &Import<'_>, entries: &Vec<String>) -> Option<Verdict> {
        let granted = || Verdict::by(!entries.is_empty(), "grants.network", "no addresses: grants.network is empty");
        match (import.package, import.name) {
            ("wasi:sockets", "udp" | "udp-create-socket") => Some(Verdict::Denied("UDP is never granted")),
            ("wasi:sockets", _) | ("wasi:http", "outgoing-handler" | "types") => Some(granted()),
            _ => None,
        }
    }

    async fn instantiate(
        entries: &Vec<String>,
        _: &(),
        instance: &mut InstanceBuilder<'_>,
    ) -> Result<NetworkState, String> {
        let allowed = Arc::new(sockets::resolve(entries).await);
        sockets::grant(instance.wasi, entries, allowed.clone());
        Ok(NetworkState { http: WasiHttpCtx::new(), hooks: http::HttpGrant::new(allowed) })
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
    }
}
