//! Raw sockets: TCP connections to the `host:port` pairs in `grants.network`,
//! nothing else.
//!
//! Names are resolved when an instance starts, and the guest may connect to exactly
//! the addresses they resolved to: the check is on the address the socket is about
//! to use, so a guest cannot reach another host by resolving a name of its own (or
//! by DNS answers changing under it). Listening, accepting and UDP are never
//! granted. Every refused attempt is logged with the connector's key; the guest gets
//! `access-denied`, an error it can handle.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::sockets::SocketAddrUse;

use super::config::split_host_port;

/// The addresses a guest may connect to.
#[derive(Debug, Default)]
pub struct AllowedAddrs(HashSet<SocketAddr>);

impl AllowedAddrs {
    pub fn contains(&self, addr: &SocketAddr) -> bool {
        self.0.contains(addr)
    }
}

/// Resolve the grants. A name that does not resolve grants nothing (and is logged):
/// the instance still starts, and its connects fail as denied.
pub(super) async fn resolve(grants: &[String]) -> AllowedAddrs {
    let mut allowed = HashSet::new();
    for entry in grants {
        let Ok((host, port)) = split_host_port(entry) else { continue };
        match tokio::net::lookup_host((host, port)).await {
            Ok(addrs) => allowed.extend(addrs),
            Err(e) => tracing::warn!(target: "ferry::grants", "grants.network: cannot resolve {entry}: {e}"),
        }
    }
    AllowedAddrs(allowed)
}

/// Let the guest open TCP connections to `allowed`. TCP stays switched on even with
/// nothing granted, so that every attempt reaches the address check and is logged
/// (with TCP off the guest would be refused before the host could see where it was
/// going). Name lookup is on only with a grant: it is a way out too (DNS), and a
/// guest with nowhere to connect has no name to look up.
pub(super) fn grant(builder: &mut WasiCtxBuilder, grants: &[String], allowed: Arc<AllowedAddrs>) {
    let span = tracing::Span::current();
    let lookup = !grants.is_empty();
    builder.allow_tcp(true).allow_udp(false).allow_ip_name_lookup(lookup).socket_addr_check(move |addr, usage| {
        let verdict = permits(&allowed, addr, usage);
        if !verdict {
            let _entered = span.enter();
            tracing::warn!(
                target: "ferry::grants",
                "denied: {} {addr} is not granted (grants.network)",
                describe(usage),
            );
        }
        Box::pin(async move { verdict })
    });
}

fn permits(allowed: &AllowedAddrs, addr: SocketAddr, usage: SocketAddrUse) -> bool {
    match usage {
        SocketAddrUse::TcpConnect => allowed.contains(&addr),
        // The implicit bind of a connecting socket (the wildcard address, port 0): it
        // reaches nothing by itself, and refusing it would hide where the guest was
        // going behind a refused bind.
        SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
        _ => false,
    }
}

fn describe(usage: SocketAddrUse) -> &'static str {
    match usage {
        SocketAddrUse::TcpBind => "binding a TCP socket to",
        SocketAddrUse::TcpListen => "listening on",
        SocketAddrUse::TcpAccept => "accepting a connection from",
        SocketAddrUse::TcpConnect => "connecting to",
        SocketAddrUse::UdpBind => "binding a UDP socket to",
        SocketAddrUse::UdpSend => "sending a datagram to",
        SocketAddrUse::UdpReceive => "receiving a datagram from",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_granted_addresses_may_be_connected_to() {
        let allowed = AllowedAddrs(["127.0.0.1:9000".parse().unwrap()].into_iter().collect());
        assert!(permits(&allowed, "127.0.0.1:9000".parse().unwrap(), SocketAddrUse::TcpConnect));
        assert!(!permits(&allowed, "127.0.0.1:9001".parse().unwrap(), SocketAddrUse::TcpConnect));
        assert!(!permits(&allowed, "10.0.0.1:9000".parse().unwrap(), SocketAddrUse::TcpConnect));
        assert!(permits(&allowed, "0.0.0.0:0".parse().unwrap(), SocketAddrUse::TcpBind));
        assert!(!permits(&allowed, "0.0.0.0:8080".parse().unwrap(), SocketAddrUse::TcpBind));
        assert!(!permits(&allowed, "0.0.0.0:0".parse().unwrap(), SocketAddrUse::TcpListen));
        assert!(!permits(&allowed, "127.0.0.1:9000".parse().unwrap(), SocketAddrUse::UdpSend));
        let nothing = AllowedAddrs::default();
        assert!(!permits(&nothing, "127.0.0.1:9000".parse().unwrap(), SocketAddrUse::TcpConnect));
    }
}
