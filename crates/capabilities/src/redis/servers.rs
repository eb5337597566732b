//! The Redis servers one connector is granted, each a client of the host's (which
//! connects when first used, so a server that is down does not stop the host from
//! starting).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo};

use super::RedisServer;

/// The servers one connector is granted, by name.
#[derive(Clone, Default)]
pub struct RedisServers(Arc<BTreeMap<String, Served>>);

/// One server: its client and how long connecting may take.
#[derive(Clone)]
pub(super) struct Served {
    pub client: redis::Client,
    pub connect_timeout: Duration,
}

impl RedisServers {
    /// Clients for the servers `names` (a connector's `grants.redis`), as `servers`
    /// define them; the error names what is wrong (an undefined name, a password
    /// that cannot be read).
    pub fn granted(names: &[String], servers: &BTreeMap<String, RedisServer>) -> Result<RedisServers, String> {
        let mut served = BTreeMap::new();
        for name in names {
            let server = servers.get(name).ok_or_else(|| format!("grants.redis: no [redis.{name}] is defined"))?;
            let password = server.password().map_err(|p| format!("[redis.{name}] {p}"))?;
            let mut settings = RedisConnectionInfo::default().set_db(server.database);
            if let Some(user) = &server.user {
                settings = settings.set_username(user);
            }
            if let Some(password) = &password {
                settings = settings.set_password(password);
            }
            let info = ConnectionAddr::Tcp(server.host.clone(), server.port)
                .into_connection_info()
                .map_err(|e| format!("[redis.{name}]: {e}"))?
                .set_redis_settings(settings);
            let client = redis::Client::open(info).map_err(|e| format!("[redis.{name}]: {e}"))?;
            served.insert(name.clone(), Served { client, connect_timeout: server.connect_timeout });
        }
        Ok(RedisServers(Arc::new(served)))
    }

    pub(super) fn get(&self, name: &str) -> Option<&Served> {
        self.0.get(name)
    }
}

// Compared and shown by the names they serve: what a sandbox grants.
impl std::fmt::Debug for RedisServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl PartialEq for RedisServers {
    fn eq(&self, other: &Self) -> bool {
        self.0.keys().eq(other.0.keys())
    }
}

impl Eq for RedisServers {}
