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
//!
//! Or the whole server as one connection URL, as many tools take it (Iggy's
//! PostgreSQL connectors' `connection_string`):
//!
//! ```toml
//! [postgres.orders]
//! url = { env = "ORDERS_DATABASE_URL" }   # postgresql://user:password@host:port/database
//! ```
//!
//! A URL written in the config itself may not hold a password (ferry reads secrets
//! only from the environment or a file); one read from there may.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use ferry_contract::settings::{self, SecretSource, duration};

/// One PostgreSQL server, as the operator defined it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresServer {
    /// The whole server as a connection URL, instead of `host` ... `password`.
    #[serde(default)]
    pub url: Option<ServerUrl>,
    #[serde(default)]
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default)]
    pub database: String,
    #[serde(default)]
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

/// `url = "postgresql://..."` (without a password), or `url = { env = "NAME" }` /
/// `{ file = "PATH" }` (a secret: it may hold the password).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ServerUrl {
    Written(String),
    Secret(SecretSource),
}

/// Where and as whom to connect: the fields, or what the URL says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: Option<String>,
    /// `sslmode=require` (or `verify-ca`, `verify-full`) in the URL.
    pub url_requires_tls: bool,
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
        if self.url.is_some() {
            let beside = [
                ("host", !self.host.is_empty()),
                ("port", self.port != default_port()),
                ("database", !self.database.is_empty()),
                ("user", !self.user.is_empty()),
                ("password", self.password.is_some()),
            ];
            if let Some((key, _)) = beside.iter().find(|(_, given)| *given) {
                return Err(format!("url and {key}: the URL says where and as whom to connect; give one or the other"));
            }
            self.endpoint()?;
            self.tls_required()?;
        } else if self.host.is_empty() {
            return Err("host: must not be empty (or give the server as a url)".into());
        } else if self.database.is_empty() || self.user.is_empty() {
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
    pub fn tls_required(&self) -> Result<bool, String> {
        let url_requires_tls = self.url.is_some() && self.endpoint()?.url_requires_tls;
        match self.tls {
            Some(TlsMode::Disable) if url_requires_tls => {
                Err("url and tls: the URL's sslmode requires TLS and tls = \"disable\"".into())
            }
            Some(mode) => Ok(mode == TlsMode::Require),
            None => Ok(url_requires_tls || self.ca_file.is_some()),
        }
    }

    /// Where and as whom to connect; the password read from where it is kept. The
    /// error names the key and where a secret was looked for, never a byte of it.
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let (text, secret) = match &self.url {
            None => {
                let password = match &self.password {
                    Some(source) => Some(source.read().map_err(|p| format!("password: {p}"))?),
                    None => None,
                };
                return Ok(Endpoint {
                    host: self.host.clone(),
                    port: self.port,
                    database: self.database.clone(),
                    user: self.user.clone(),
                    password,
                    url_requires_tls: false,
                });
            }
            Some(ServerUrl::Written(text)) => (text.clone(), false),
            Some(ServerUrl::Secret(source)) => (source.read().map_err(|p| format!("url: {p}"))?, true),
        };
        parse_url(&text, secret).map_err(|p| format!("url: {p}"))
    }
}

/// A `postgres://` or `postgresql://` URL. `secret` says whether it was read from a
/// secret: a URL written in the config may not hold a password. Errors never show
/// the URL (it may hold one).
fn parse_url(text: &str, secret: bool) -> Result<Endpoint, String> {
    if !["postgresql://", "postgres://"].iter().any(|scheme| text.starts_with(scheme)) {
        return Err("not a PostgreSQL URL: it must begin with postgresql:// or postgres://".into());
    }
    let config: tokio_postgres::Config = text.parse().map_err(|e| format!("not a PostgreSQL URL: {e}"))?;
    let password = config.get_password().map(|p| String::from_utf8_lossy(p).into_owned());
    if password.is_some() && !secret {
        return Err("holds a password, and ferry never reads a secret written in the config: write url = { env = \
             \"NAME\" } (or { file = \"PATH\" }) and put the URL there"
            .into());
    }
    let host = match config.get_hosts() {
        [tokio_postgres::config::Host::Tcp(host)] => host.clone(),
        [] => return Err("names no host".into()),
        [_] => return Err("names a Unix socket: ferry connects over TCP only".into()),
        _ => return Err("names several hosts: name one".into()),
    };
    let port = match config.get_ports() {
        [] => default_port(),
        [port] => *port,
        _ => return Err("names several ports: name one".into()),
    };
    let database = config.get_dbname().ok_or("names no database (postgresql://user@host/DATABASE)")?.to_string();
    let user = config.get_user().ok_or("names no user (postgresql://USER@host/database)")?.to_string();
    let url_requires_tls = match config.get_ssl_mode() {
        tokio_postgres::config::SslMode::Require => true,
        tokio_postgres::config::SslMode::Disable => false,
        // `prefer` (the default) falls back to plain TCP when the server offers no
        // TLS: ferry never does that silently; the `tls` key decides.
        _ => false,
    };
    Ok(Endpoint { host, port, database, user, password, url_requires_tls })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(text: &str) -> PostgresServer {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_url_read_from_a_secret_says_where_and_as_whom_to_connect() {
        // SAFETY: the variable's name is this test's alone.
        unsafe { std::env::set_var("FERRY_TEST_PG_URL_1", "postgresql://app:s3cret@db.internal:6543/shop?sslmode=require") };
        let defined = server("url = { env = \"FERRY_TEST_PG_URL_1\" }");
        defined.validate().unwrap();
        let endpoint = defined.endpoint().unwrap();
        assert_eq!(
            endpoint,
            Endpoint {
                host: "db.internal".into(),
                port: 6543,
                database: "shop".into(),
                user: "app".into(),
                password: Some("s3cret".into()),
                url_requires_tls: true,
            }
        );
        assert_eq!(defined.tls_required(), Ok(true), "sslmode=require");
        let plain = server("url = \"postgres://app@localhost/shop\"");
        plain.validate().unwrap();
        assert_eq!(plain.endpoint().unwrap().port, 5432);
        assert_eq!(plain.endpoint().unwrap().password, None);
        assert_eq!(plain.tls_required(), Ok(false));
    }

    #[test]
    fn a_url_that_cannot_be_taken_is_refused_without_showing_it() {
        // SAFETY: the variable's name is this test's alone.
        unsafe { std::env::set_var("FERRY_TEST_PG_URL_2", "mysql://app:hunter2@db/shop") };
        let cases = [
            ("url = \"postgresql://app:hunter2@db/shop\"", "never reads a secret written in the config"),
            ("url = { env = \"FERRY_TEST_PG_URL_2\" }", "must begin with postgresql://"),
            ("url = { env = \"FERRY_TEST_PG_URL_UNSET\" }", "FERRY_TEST_PG_URL_UNSET is not set"),
            ("url = \"postgresql://app@db\"", "names no database"),
            ("url = \"postgresql://db/shop\"", "names no user"),
            ("url = \"postgresql://app@a,b/shop\"", "several hosts"),
            ("url = \"postgresql://app@db/shop\"\nhost = \"db\"", "url and host"),
            ("url = \"postgresql://app@db/shop\"\npassword = { env = \"X\" }", "url and password"),
        ];
        for (text, needle) in cases {
            let problem = server(text).validate().unwrap_err();
            assert!(problem.contains(needle), "{text}: {problem}");
            assert!(!problem.contains("hunter2"), "{text}: {problem}");
        }
        let demanding = server("url = \"postgresql://app@db/shop?sslmode=require\"\ntls = \"disable\"");
        assert!(demanding.tls_required().unwrap_err().contains("sslmode"));
    }
}
