//! The contract's `mysql` import: MySQL and MariaDB servers the operator defined
//! (`[mysql.NAME]`), reachable by a connector only by the names in its `grants.mysql`,
//! through connections of the host's.
//!
//! Why the host and not the guest: as for PostgreSQL, a guest has no sockets and
//! should carry no driver; and a server reached through a name cannot be one the
//! operator did not mean, nor leak its address or password.
//!
//! * `config.rs`: `[mysql.NAME]`, a server as the operator defines it;
//! * `servers.rs`: the servers of one connector;
//! * `values.rs`: values across the boundary, both ways;
//! * `host.rs`: the interface's calls, each within the guest's call deadline.

mod config;
mod host;
mod servers;
mod values;

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_contract::settings::{SecretSource, valid_key};
use wasmtime::component::Linker;

pub use config::MysqlServer;
pub use servers::MysqlServers;

use crate::{Capability, GuestData, Import, InstanceBuilder, Verdict};

/// The capability: `grants.mysql`, names of the servers defined in `[mysql.NAME]`.
pub struct Mysql;

/// What one instance may do with MySQL: the servers its connector is granted.
pub struct MysqlState {
    servers: MysqlServers,
    /// The most a query's rows may take (the connector's `limits.max_batch_bytes`);
    /// a query past it fails, its rows not handed to the guest.
    max_result_bytes: u64,
}

impl Capability for Mysql {
    const NAME: &'static str = "mysql";
    type Grant = Vec<String>;
    type Section = BTreeMap<String, MysqlServer>;
    type Shared = MysqlServers;
    type State = MysqlState;

    fn validate_section(servers: &Self::Section) -> Result<(), String> {
        for (name, server) in servers {
            valid_key(name).map_err(|p| format!("[mysql.{name}]: the name {name:?} {p}"))?;
            server.validate().map_err(|p| format!("[mysql.{name}]: {p}"))?;
        }
        Ok(())
    }

    fn validate(names: &Vec<String>, servers: &Self::Section) -> Result<(), (&'static str, String)> {
        let Some(name) = names.iter().find(|name| !servers.contains_key(*name)) else { return Ok(()) };
        let defined: Vec<&str> = servers.keys().map(String::as_str).collect();
        let defined = if defined.is_empty() { "none".into() } else { defined.join(", ") };
        Err(("grants.mysql", format!("no [mysql.{name}] is defined (defined: {defined})")))
    }

    /// Each server's password file: resolved against the config's directory, and kept
    /// from every guest.
    fn section_paths(servers: &mut Self::Section) -> Vec<&mut PathBuf> {
        let password_files = servers.values_mut().filter_map(|server| match server.password.as_mut() {
            Some(SecretSource::File(path)) => Some(path),
            _ => None,
        });
        password_files.collect()
    }

    fn verdict(import: &Import<'_>, names: &Vec<String>) -> Option<Verdict> {
        import
            .is("iggy:connector", "mysql")
            .then(|| Verdict::by(!names.is_empty(), "grants.mysql", "no servers: grants.mysql is empty"))
    }

    fn prepare(names: &Vec<String>, servers: &Self::Section) -> Result<MysqlServers, String> {
        MysqlServers::granted(names, servers)
    }

    async fn instantiate(
        _: &Vec<String>,
        servers: &MysqlServers,
        instance: &mut InstanceBuilder<'_>,
    ) -> Result<MysqlState, String> {
        Ok(MysqlState { servers: servers.clone(), max_result_bytes: instance.limits.max_result_bytes })
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        host::link(linker)
    }

    fn secrets(names: &Vec<String>, servers: &Self::Section) -> Vec<String> {
        names.iter().filter_map(|name| servers.get(name)).flat_map(MysqlServer::secrets).collect()
    }

    /// The definition of each server granted and its password's value: a rotated
    /// password is a change.
    fn reach(names: &Vec<String>, servers: &Self::Section) -> String {
        let mut reach = String::new();
        for name in names {
            let server = servers.get(name);
            let password = server.map(MysqlServer::password);
            reach.push_str(&format!("{name} {server:?} {password:?}\n"));
        }
        reach
    }
}
