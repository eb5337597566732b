//! `[postgres.NAME]`: PostgreSQL servers the operator defines by name. A connector
//! reaches one only when its grants list the name (`grants.postgres`); the guest
//! never sees where the server is or the password.
//!
//! ```toml
//! [postgres.orders]
//! host = "127.0.0.1"
//! port = 5432
//! database = "shop"
//! user = "ferry"
//! password = { env = "ORDERS_DB_PASSWORD" }   # or { file = "secrets/orders-db" }
//! max_connections = 2                          # per connector granted it
//! connect_timeout = "5s"
//! ```

use std::time::Duration;

use serde::Deserialize;

use ferry_contract::settings::{self, SecretSource, duration};

/// One PostgreSQL server, as the operator defined it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresServer {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    pub database: String,
    pub user: String,
    /// Where the host reads the password (never written in the config itself).
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// Connections each connector granted this server may hold at once.
    #[serde(default = "default_max_connections")]
    pub max_connections: u32,
    /// How long connecting may take (also bounded by the connector's call deadline).
    #[serde(default = "default_connect_timeout", with = "duration")]
    pub connect_timeout: Duration,
}

fn default_port() -> u16 {
    5432
}

fn default_max_connections() -> u32 {
    2
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

/// The most connections one connector may hold to one server: a pool is per
/// connector, and the server's own `max_connections` (100 by default) is shared by
/// every connector granted it.
pub const MAX_CONNECTIONS: u32 = 16;

impl PostgresServer {
    /// Check the definition alone.
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.host.is_empty() {
            return Err("host: must not be empty".into());
        }
        if self.database.is_empty() || self.user.is_empty() {
            return Err("database and user: must not be empty".into());
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(format!("max_connections: {} is not between 1 and {MAX_CONNECTIONS}", self.max_connections));
        }
        settings::CALL_TIMEOUT.check(self.connect_timeout).map_err(|p| format!("connect_timeout: {p}"))?;
        Ok(())
    }
}
