//! The contract's `postgres` import: PostgreSQL servers the operator defined
//! (`[postgres.NAME]`), reachable by a connector only by the names in its
//! `grants.postgres`, through a small pool of the host's per connector.
//!
//! Why the host and not the guest: a guest has no sockets and, in most languages,
//! no driver; and a server reached through a name cannot be a server the operator
//! did not mean, nor leak its address or password to the guest.
//!
//! * `config.rs`: `[postgres.NAME]`, a server as the operator defines it;
//! * `pools.rs`: the pools of one connector, one per server it is granted;
//! * `host.rs`: the interface's calls, each within the guest's call deadline;
//! * `rows.rs`: a query's rows packed into one buffer as they arrive;
//! * `numeric.rs`: `numeric` carried exactly, as decimal text;
//! * `tls.rs`: TLS to a server (`tls = "require"`), its certificate always verified.

mod config;
mod host;
mod numeric;
mod pools;
mod rows;
mod tls;

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_contract::settings::{SecretSource, valid_key};
use wasmtime::component::Linker;

pub use config::{Endpoint, MAX_CONNECTIONS, PostgresServer, ServerUrl, TlsMode};
pub use host::PostgresView;
pub use pools::PgPools;

use crate::{Capability, GuestData, Import, InstanceBuilder, Verdict};

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01).
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// The capability: `grants.postgres`, names of the servers defined in the section
/// `[postgres.NAME]`.
pub struct Postgres;

/// What one instance may do with PostgreSQL.
pub struct PgState {
    pools: PgPools,
    /// The most a query's rows may take (the connector's `limits.max_batch_bytes`:
    /// what its memory is sized for); a bigger result is refused, not buffered.
    max_result_bytes: u64,
}

impl Capability for Postgres {
    const NAME: &'static str = "postgres";
    type Grant = Vec<String>;
    type Section = BTreeMap<String, PostgresServer>;
    type Shared = PgPools;
    type State = PgState;

    fn validate_section(servers: &Self::Section) -> Result<(), String> {
        for (name, server) in servers {
            valid_key(name).map_err(|p| format!("[postgres.{name}]: the name {name:?} {p}"))?;
            server.validate().map_err(|p| format!("[postgres.{name}]: {p}"))?;
        }
        Ok(())
    }

    fn validate(names: &Vec<String>, servers: &Self::Section) -> Result<(), (&'static str, String)> {
        let Some(name) = names.iter().find(|name| !servers.contains_key(*name)) else { return Ok(()) };
        let defined: Vec<&str> = servers.keys().map(String::as_str).collect();
        let defined = if defined.is_empty() { "none".into() } else { defined.join(", ") };
        Err(("grants.postgres", format!("no [postgres.{name}] is defined (defined: {defined})")))
    }

    /// Each server's password file and `ca_file`: resolved against the config's
    /// directory, and kept from every guest (whoever writes a CA file decides which
    /// server ferry trusts).
    fn section_paths(servers: &mut Self::Section) -> Vec<&mut PathBuf> {
        let mut paths = Vec::new();
        for server in servers.values_mut() {
            if let Some(SecretSource::File(path)) = server.password.as_mut() {
                paths.push(path);
            }
            if let Some(ServerUrl::Secret(SecretSource::File(path))) = server.url.as_mut() {
                paths.push(path);
            }
            paths.extend(server.ca_file.as_mut());
        }
        paths
    }

    fn verdict(import: &Import<'_>, names: &Vec<String>) -> Option<Verdict> {
        import
            .is("iggy:connector", "postgres")
            .then(|| Verdict::by(!names.is_empty(), "grants.postgres", "no servers: grants.postgres is empty"))
    }

    fn prepare(names: &Vec<String>, servers: &Self::Section) -> Result<PgPools, String> {
        PgPools::granted(names, servers)
    }

    async fn instantiate(
        _: &Vec<String>,
        pools: &PgPools,
        instance: &mut InstanceBuilder<'_>,
    ) -> Result<PgState, String> {
        Ok(PgState { pools: pools.clone(), max_result_bytes: instance.limits.max_result_bytes })
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        host::link(linker)
    }

    fn secrets(names: &Vec<String>, servers: &Self::Section) -> Vec<String> {
        // The password, also where a URL holds it (the rest of a URL is no secret,
        // and redacting it whole would take its scheme out of every answer).
        let granted = names.iter().filter_map(|name| servers.get(name));
        granted.filter_map(|server| server.endpoint().ok()?.password).collect()
    }

    /// The definition of each server granted, its password's value and its CA file's
    /// certificates: a rotated password or CA is a change.
    fn reach(names: &Vec<String>, servers: &Self::Section) -> String {
        let mut reach = String::new();
        for name in names {
            let server = servers.get(name);
            let password = server.map(|s| s.endpoint().map(|endpoint| endpoint.password));
            let ca = server.and_then(|s| s.ca_file.as_ref()).map(|path| tls::read_ca_file(path));
            reach.push_str(&format!("{name} {server:?} {password:?} {ca:?}\n"));
        }
        reach
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_ca_file_changes_what_a_grant_reaches() {
        let dir = std::env::temp_dir().join(format!("ferry-pg-reach-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        let pem = |body: &str| format!("-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n");
        let text =
            format!("[db]\nhost = \"h\"\ndatabase = \"d\"\nuser = \"u\"\nca_file = {:?}\n", ca.display().to_string());
        let servers: BTreeMap<String, PostgresServer> = toml::from_str(&text).unwrap();
        let names = vec!["db".to_string()];
        std::fs::write(&ca, pem("AAEC")).unwrap();
        let before = Postgres::reach(&names, &servers);
        std::fs::write(&ca, pem("AwQF")).unwrap();
        let after = Postgres::reach(&names, &servers);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_ne!(before, after, "a reload would keep trusting the old CA");
    }
}
