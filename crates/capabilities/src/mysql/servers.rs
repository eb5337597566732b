//! The MySQL servers one connector is granted: how to reach each (a connection is made
//! when a guest first uses it, so a server that is down does not stop the host from
//! starting).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mysql_async::{Opts, OptsBuilder};

use super::MysqlServer;

/// The servers one connector is granted, by name.
#[derive(Clone, Default)]
pub struct MysqlServers(Arc<BTreeMap<String, Reached>>);

/// One server: the client's options, and how long connecting may take.
#[derive(Clone)]
pub(super) struct Reached {
    pub options: Opts,
    pub connect_timeout: Duration,
}

impl MysqlServers {
    /// The servers `names` (a connector's `grants.mysql`), as `servers` define them;
    /// the error names what is wrong (an undefined name, a password that cannot be read).
    pub fn granted(names: &[String], servers: &BTreeMap<String, MysqlServer>) -> Result<MysqlServers, String> {
        let mut reached = BTreeMap::new();
        for name in names {
            let server = servers.get(name).ok_or_else(|| format!("grants.mysql: no [mysql.{name}] is defined"))?;
            let password = server.password().map_err(|p| format!("[mysql.{name}] {p}"))?;
            let options = OptsBuilder::default()
                .ip_or_hostname(server.host.clone())
                .tcp_port(server.port)
                .user(Some(server.user.clone()))
                .pass(password)
                .db_name(Some(server.database.clone()))
                .prefer_socket(false)
                .stmt_cache_size(256usize);
            let connect_timeout = server.connect_timeout;
            reached.insert(name.clone(), Reached { options: Opts::from(options), connect_timeout });
        }
        Ok(MysqlServers(Arc::new(reached)))
    }

    pub(super) fn get(&self, name: &str) -> Option<&Reached> {
        self.0.get(name)
    }
}

// Compared and shown by the names they serve: what a sandbox grants.
impl std::fmt::Debug for MysqlServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl PartialEq for MysqlServers {
    fn eq(&self, other: &Self) -> bool {
        self.0.keys().eq(other.0.keys())
    }
}

impl Eq for MysqlServers {}
