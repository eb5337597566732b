//! The servers one connector is granted, each with a small pool of the host's.

use std::collections::BTreeMap;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::config::SslMode;

use super::PostgresServer;
use super::tls::PgTls;

/// The servers one connector is granted, each with its pool (connections are made
/// when first used, so a server that is down does not stop the host from starting).
#[derive(Clone, Default)]
pub struct PgPools(Arc<BTreeMap<String, Served>>);

/// One server's pool, and its TLS (which a cancel request goes through too).
#[derive(Clone)]
pub(super) struct Served {
    pub pool: Pool,
    pub tls: Option<PgTls>,
}

impl PgPools {
    /// Pools for the servers `names` (a connector's `grants.postgres`), as `servers`
    /// define them; the error names what is wrong (an undefined name, a password that
    /// cannot be read).
    pub fn granted(names: &[String], servers: &BTreeMap<String, PostgresServer>) -> Result<PgPools, String> {
        let mut pools = BTreeMap::new();
        for name in names {
            let server =
                servers.get(name).ok_or_else(|| format!("grants.postgres: no [postgres.{name}] is defined"))?;
            let endpoint = server.endpoint().map_err(|p| format!("[postgres.{name}] {p}"))?;
            let mut config = tokio_postgres::Config::new();
            config
                .host(&endpoint.host)
                .port(endpoint.port)
                .dbname(&endpoint.database)
                .user(&endpoint.user)
                .connect_timeout(server.connect_timeout)
                .application_name("ferry");
            if let Some(password) = &endpoint.password {
                config.password(password);
            }
            let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
            let tls = if server.tls_required().map_err(|p| format!("[postgres.{name}] {p}"))? {
                config.ssl_mode(SslMode::Require);
                Some(PgTls::new(server.ca_file.as_ref()).map_err(|p| format!("[postgres.{name}] {p}"))?)
            } else {
                config.ssl_mode(SslMode::Disable);
                None
            };
            let manager = match &tls {
                Some(tls) => Manager::from_config(config, tls.clone(), manager_config),
                None => Manager::from_config(config, NoTls, manager_config),
            };
            let pool = Pool::builder(manager)
                .max_size(server.max_connections as usize)
                .build()
                .map_err(|e| format!("[postgres.{name}]: {e}"))?;
            pools.insert(name.clone(), Served { pool, tls });
        }
        Ok(PgPools(Arc::new(pools)))
    }

    pub(super) fn get(&self, name: &str) -> Option<&Served> {
        self.0.get(name)
    }
}

// Pools are compared and shown by the names they serve: what a sandbox grants.
impl std::fmt::Debug for PgPools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl PartialEq for PgPools {
    fn eq(&self, other: &Self) -> bool {
        self.0.keys().eq(other.0.keys())
    }
}

impl Eq for PgPools {}
