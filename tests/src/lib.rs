//! Helpers for Ferry's end-to-end suite and benchmarks: the components built from this
//! workspace (by `build.rs`), a host wired to a temporary directory, fault-injecting
//! targets and state stores, a capture of the log, and ways to wait for events
//! instead of sleeping.

pub mod bench;
pub mod clickhouse_server;
pub mod faults;
pub mod harness;
pub mod http_client;
pub mod iggy_server;
pub mod influxdb_server;
pub mod kafka_broker;
pub mod logs;
pub mod mariadb_server;
pub mod mqtt_server;
pub mod nats_server;
pub mod postgres_server;
pub mod raw_component;
pub mod records;
pub mod redis_server;
pub mod server_process;
pub mod sink_output;
pub mod tmux;

/// Paths of the components built from this workspace's guest crates.
pub mod components {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

/// A TCP port on 127.0.0.1 that nothing listens on right now, for a server a test
/// starts. Another process may take it before the server binds it; servers that
/// can tell say so and are started on another.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}
