//! The NATS servers one connector is granted: how to reach each (a connection is made
//! when a guest first uses it, so a server that is down does not stop the host from
//! starting).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{Credentials, NatsServer};

/// The servers one connector is granted, by name.
#[derive(Clone, Default)]
pub struct NatsServers(Arc<BTreeMap<String, Served>>);

/// One server: its address, credentials and connect timeout.
#[derive(Clone)]
pub(super) struct Served {
    pub address: String,
    pub credentials: Credentials,
    pub connect_timeout: Duration,
}

impl NatsServers {
    /// The servers `names` (a connector's `grants.nats`), as `servers` define them;
    /// the error names what is wrong (an undefined name, a secret that cannot be read).
    pub fn granted(names: &[String], servers: &BTreeMap<String, NatsServer>) -> Result<NatsServers, String> {
        let mut served = BTreeMap::new();
        for name in names {
            let server = servers.get(name).ok_or_else(|| format!("grants.nats: no [nats.{name}] is defined"))?;
            let credentials = server.credentials().map_err(|p| format!("[nats.{name}] {p}"))?;
            let address = format!("nats://{}:{}", server.host, server.port);
            served.insert(name.clone(), Served { address, credentials, connect_timeout: server.connect_timeout });
        }
        Ok(NatsServers(Arc::new(served)))
    }

    pub(super) fn get(&self, name: &str) -> Option<&Served> {
        self.0.get(name)
    }
}

// Compared and shown by the names they serve: what a sandbox grants.
impl std::fmt::Debug for NatsServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl PartialEq for NatsServers {
    fn eq(&self, other: &Self) -> bool {
        self.0.keys().eq(other.0.keys())
    }
}

impl Eq for NatsServers {}
