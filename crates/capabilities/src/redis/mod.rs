//! The contract's `redis` import: Redis servers the operator defined
//! (`[redis.NAME]`), reachable by a connector only by the names in its
//! `grants.redis`, through connections of the host's.
//!
//! Why the host and not the guest: as for PostgreSQL, a guest has no sockets and
//! should carry no protocol client; and a server reached through a name cannot be one
//! the operator did not mean, nor leak its address or password to the guest.
//!
//! * `config.rs`: `[redis.NAME]`, a server as the operator defines it;
//! * `servers.rs`: the servers of one connector, a client each;
//! * `host.rs`: the interface's calls, each within the guest's call deadline, and
//!   replies flattened into the contract's `reply-item`s.

mod config;
mod host;
mod servers;

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_contract::settings::{SecretSource, valid_key};
use wasmtime::component::Linker;

pub use config::RedisServer;
pub use servers::RedisServers;

use crate::{Capability, GuestData, Import, InstanceBuilder, Verdict};

/// The capability: `grants.redis`, names of the servers defined in the section
/// `[redis.NAME]`.
pub struct Redis;

/// What one instance may do with Redis.
pub struct RedisState {
    servers: RedisServers,
    /// The most a reply may take (the connector's `limits.max_batch_bytes`); a
    /// bigger one is refused, not handed to the guest.
    max_result_bytes: u64,
}

impl Capability for Redis {
    const NAME: &'static str = "redis";
    type Grant = Vec<String>;
    type Section = BTreeMap<String, RedisServer>;
    type Shared = RedisServers;
    type State = RedisState;

    fn validate_section(servers: &Self::Section) -> Result<(), String> {
        for (name, server) in servers {
            valid_key(name).map_err(|p| format!("[redis.{name}]: the name {name:?} {p}"))?;
            server.validate().map_err(|p| format!("[redis.{name}]: {p}"))?;
        }
        Ok(())
    }

    fn validate(names: &Vec<String>, servers: &Self::Section) -> Result<(), (&'static str, String)> {
        let Some(name) = names.iter().find(|name| !servers.contains_key(*name)) else { return Ok(()) };
        let defined: Vec<&str> = servers.keys().map(String::as_str).collect();
        let defined = if defined.is_empty() { "none".into() } else { defined.join(", ") };
        Err(("grants.redis", format!("no [redis.{name}] is defined (defined: {defined})")))
    }

    /// Each server's password file: resolved against the config's directory, and
    /// kept from every guest.
    fn section_paths(servers: &mut Self::Section) -> Vec<&mut PathBuf> {
        let mut paths = Vec::new();
        for server in servers.values_mut() {
            if let Some(SecretSource::File(path)) = server.password.as_mut() {
                paths.push(path);
            }
        }
        paths
    }

    fn verdict(import: &Import<'_>, names: &Vec<String>) -> Option<Verdict> {
        import
            .is("iggy:connector", "redis")
            .then(|| Verdict::by(!names.is_empty(), "grants.redis", "no servers: grants.redis is empty"))
    }

    fn prepare(names: &Vec<String>, servers: &Self::Section) -> Result<RedisServers, String> {
        RedisServers::granted(names, servers)
    }

    async fn instantiate(
        _: &Vec<String>,
        servers: &RedisServers,
        instance: &mut InstanceBuilder<'_>,
    ) -> Result<RedisState, String> {
        Ok(RedisState { servers: servers.clone(), max_result_bytes: instance.limits.max_result_bytes })
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        host::link(linker)
    }

    fn secrets(names: &Vec<String>, servers: &Self::Section) -> Vec<String> {
        let granted = names.iter().filter_map(|name| servers.get(name));
        granted.filter_map(|server| server.password().ok().flatten()).collect()
    }

    /// The definition of each server granted and its password's value: a rotated
    /// password is a change.
    fn reach(names: &Vec<String>, servers: &Self::Section) -> String {
        let mut reach = String::new();
        for name in names {
            let server = servers.get(name);
            let password = server.map(RedisServer::password);
            reach.push_str(&format!("{name} {server:?} {password:?}\n"));
        }
        reach
    }
}
