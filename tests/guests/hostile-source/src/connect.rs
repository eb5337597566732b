//! A TCP connection through WASI 0.2 sockets, which std cannot reach from
//! wasm32-wasip1: create a socket, connect it on the instance's network, send a
//! greeting. Every step's error is returned as text for the probe's record.

use std::net::SocketAddr;

use wasi::io::poll::Pollable;
use wasi::sockets::instance_network::instance_network;
use wasi::sockets::network::{ErrorCode, IpAddressFamily, IpSocketAddress, Ipv4SocketAddress, Ipv6SocketAddress};
use wasi::sockets::tcp_create_socket::create_tcp_socket;

/// What the probe sends, and the test's listener expects.
const GREETING: &[u8] = b"hello ferry";

/// Connect to `address` (`ip:port`) and send [`GREETING`].
pub fn say_hello(address: &str) -> Result<String, String> {
    let address: SocketAddr = address.parse().map_err(|e| format!("address {address:?}: {e}"))?;
    let (family, remote) = match address {
        SocketAddr::V4(v4) => {
            let [a, b, c, d] = v4.ip().octets();
            (IpAddressFamily::Ipv4, IpSocketAddress::Ipv4(Ipv4SocketAddress { port: v4.port(), address: (a, b, c, d) }))
        }
        SocketAddr::V6(v6) => {
            let [a, b, c, d, e, f, g, h] = v6.ip().segments();
            let remote = Ipv6SocketAddress {
                port: v6.port(),
                flow_info: v6.flowinfo(),
                address: (a, b, c, d, e, f, g, h),
                scope_id: v6.scope_id(),
            };
            (IpAddressFamily::Ipv6, IpSocketAddress::Ipv6(remote))
        }
    };
    let network = instance_network();
    let socket = create_tcp_socket(family).map_err(|e| format!("create_tcp_socket: {e}"))?;
    socket.start_connect(&network, remote).map_err(|e| format!("start_connect: {e}"))?;
    let ready: Pollable = socket.subscribe();
    let connected = loop {
        match socket.finish_connect() {
            Err(ErrorCode::WouldBlock) => ready.block(),
            other => break other,
        }
    };
    // Child resources go before their socket, as the component model requires.
    drop(ready);
    let (input, output) = connected.map_err(|e| format!("finish_connect: {e}"))?;
    let sent = output.blocking_write_and_flush(GREETING).map_err(|e| format!("write: {e}"));
    drop(input);
    drop(output);
    sent.map(|()| format!("sent {:?} to {address}", String::from_utf8_lossy(GREETING)))
}
