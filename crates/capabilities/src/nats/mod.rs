//! The contract's `nats` import: NATS servers the operator defined (`[nats.NAME]`),
//! reachable by a connector only by the names in its `grants.nats`, through
//! connections of the host's; what a guest does there is publish to JetStream and
//! read through durable pull consumers.
//!
//! Why the host and not the guest: as for PostgreSQL and Redis, a guest has no sockets
//! and should carry no protocol client; and a server reached through a name cannot be
//! one the operator did not mean, nor leak its address or credentials to the guest.
//!
//! * `config.rs`: `[nats.NAME]`, a server as the operator defines it;
//! * `servers.rs`: the servers of one connector;
//! * `consumers.rs`: durable pull consumers, made, read and acknowledged;
//! * `host.rs`: the interface's calls, each within the guest's call deadline.

mod config;
mod consumers;
mod host;
mod servers;

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_contract::settings::{SecretSource, valid_key};
use wasmtime::component::Linker;

pub use config::{Credentials, NatsServer};
pub use servers::NatsServers;

use crate::{Capability, GuestData, Import, InstanceBuilder, Verdict};

/// The capability: `grants.nats`, names of the servers defined in `[nats.NAME]`.
pub struct Nats;

/// What one instance may do with NATS: the servers its connector is granted.
pub struct NatsState {
    servers: NatsServers,
}

impl Capability for Nats {
    const NAME: &'static str = "nats";
    type Grant = Vec<String>;
    type Section = BTreeMap<String, NatsServer>;
    type Shared = NatsServers;
    type State = NatsState;

    fn validate_section(servers: &Self::Section) -> Result<(), String> {
        for (name, server) in servers {
            valid_key(name).map_err(|p| format!("[nats.{name}]: the name {name:?} {p}"))?;
            server.validate().map_err(|p| format!("[nats.{name}]: {p}"))?;
        }
        Ok(())
    }

    fn validate(names: &Vec<String>, servers: &Self::Section) -> Result<(), (&'static str, String)> {
        let Some(name) = names.iter().find(|name| !servers.contains_key(*name)) else { return Ok(()) };
        let defined: Vec<&str> = servers.keys().map(String::as_str).collect();
        let defined = if defined.is_empty() { "none".into() } else { defined.join(", ") };
        Err(("grants.nats", format!("no [nats.{name}] is defined (defined: {defined})")))
    }

    /// Each server's password and token files: resolved against the config's
    /// directory, and kept from every guest.
    fn section_paths(servers: &mut Self::Section) -> Vec<&mut PathBuf> {
        let mut paths = Vec::new();
        for server in servers.values_mut() {
            for secret in [server.password.as_mut(), server.token.as_mut()].into_iter().flatten() {
                if let SecretSource::File(path) = secret {
                    paths.push(path);
                }
            }
        }
        paths
    }

    fn verdict(import: &Import<'_>, names: &Vec<String>) -> Option<Verdict> {
        import
            .is("iggy:connector", "nats")
            .then(|| Verdict::by(!names.is_empty(), "grants.nats", "no servers: grants.nats is empty"))
    }

    fn prepare(names: &Vec<String>, servers: &Self::Section) -> Result<NatsServers, String> {
        NatsServers::granted(names, servers)
    }

    async fn instantiate(_: &Vec<String>, servers: &NatsServers, _: &mut InstanceBuilder<'_>) -> Result<NatsState, String> {
        Ok(NatsState { servers: servers.clone() })
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        host::link(linker)
    }

    fn secrets(names: &Vec<String>, servers: &Self::Section) -> Vec<String> {
        names.iter().filter_map(|name| servers.get(name)).flat_map(NatsServer::secrets).collect()
    }

    /// The definition of each server granted and its secrets' values: a rotated
    /// password or token is a change.
    fn reach(names: &Vec<String>, servers: &Self::Section) -> String {
        let mut reach = String::new();
        for name in names {
            let server = servers.get(name);
            let credentials = server.map(NatsServer::credentials);
            reach.push_str(&format!("{name} {server:?} {credentials:?}\n"));
        }
        reach
    }
}
