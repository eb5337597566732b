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
//! tls = "require"                              # default: "require" with a ca_file, else "disable"
//! ca_file = "certs/orders-ca.pem"              # default: the system's trusted roots
//! ```

use std::path::PathBuf;
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
    /// Whether the connection is inside TLS; when it is, the server's certificate is
    /// always verified (see `tls.rs`). Default: required when a `ca_file` is given.
    #[serde(default)]
    pub tls: Option<TlsMode>,
    /// The certificates (PEM) the server's must chain to, instead of the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

/// `tls = "disable" | "require"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Plain TCP: for a server on this machine or a network of the operator's own.
    Disable,
    /// TLS, or no connection: a server that offers none is refused, and so is a
    /// certificate that does not chain to the trusted roots or name the host.
    Require,
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
        if let Some(ca_file) = &self.ca_file {
            if self.tls == Some(TlsMode::Disable) {
                return Err(format!(
                    "ca_file: {} is given with tls = \"disable\": remove it, or require TLS",
                    ca_file.display()
                ));
            }
            // Read now, so that a missing or malformed file stops the start, naming it.
            super::tls::read_ca_file(ca_file)?;
        }
        Ok(())
    }

    /// Whether connections to this server must be inside TLS.
    pub fn tls_required(&self) -> bool {
        match self.tls {
            Some(mode) => mode == TlsMode::Require,
            None => self.ca_file.is_some(),
        }
    }
}
