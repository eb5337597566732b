//! Network access: none. TCP, UDP and name lookup are refused, so a guest that tries
//! to connect anywhere gets `access-denied` from WASI.

use wasmtime_wasi::WasiCtxBuilder;

pub fn deny(builder: &mut WasiCtxBuilder) {
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(|_, _| Box::pin(async { false }));
}
