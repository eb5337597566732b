//! `[iggy]`: deliver to an Apache Iggy server instead of the local log.
//!
//! ```toml
//! [iggy]
//! address = "127.0.0.1:8090"
//! transport = "tcp"            # tcp (default), quic, http
//! username = "iggy"            # with password, or one of token / token_file / token_env
//! password = "iggy"
//! no_delay = true              # TCP_NODELAY; Ferry awaits every send, so keep it on
//! ```
//!
//! Secrets (`password`, `token`) are never printed: their `Debug` is `***`. They can
//! come from the environment (`FERRY__IGGY__PASSWORD`, or `token_env`) or a file
//! (`token_file`) so that none needs to be written into the config.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use ferry_contract::files;
use ferry_contract::settings::{self, duration, read_secret_file};

use super::BackoffConfig;

/// The most a `tls.ca_file` may hold: a bundle of certificates is a few hundred KiB.
const MAX_CA_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// A value that must not appear in logs or error messages.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for handing to the client.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// How to reach the server.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    #[default]
    Tcp,
    Quic,
    Http,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IggyConfig {
    /// `host:port` for TCP and QUIC, a URL (`http://host:port`) for HTTP.
    #[serde(default = "default_address")]
    pub address: String,
    #[serde(default)]
    pub transport: Transport,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<Secret>,
    /// A personal access token, instead of username and password.
    #[serde(default)]
    pub token: Option<Secret>,
    /// A file holding the personal access token.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// An environment variable holding the personal access token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// Disable Nagle's algorithm on the TCP socket. Ferry waits for the server's
    /// answer to every batch, so with it off each batch waits for the delayed ACK.
    #[serde(default = "yes")]
    pub no_delay: bool,
    /// How long connecting and signing in may take.
    #[serde(default = "default_connect_timeout", with = "duration")]
    pub connect_timeout: Duration,
    /// The pause between connection attempts while the server is unreachable.
    #[serde(default = "default_reconnect_backoff")]
    pub reconnect_backoff: BackoffConfig,
    #[serde(default)]
    pub tls: TlsConfig,
}

/// `[iggy.tls]`, for TCP (QUIC always uses TLS and takes `domain` as server name).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    pub enabled: bool,
    pub ca_file: Option<PathBuf>,
    /// The name to verify the certificate against (default: the host of `address`).
    pub domain: Option<String>,
    pub validate_certificate: bool,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig { enabled: false, ca_file: None, domain: None, validate_certificate: true }
    }
}

/// How Ferry signs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    UsernamePassword { username: String, password: Secret },
    Token(Secret),
}

impl Credentials {
    /// Who is signing in, for log lines (never the secret).
    pub fn describe(&self) -> String {
        match self {
            Credentials::UsernamePassword { username, .. } => format!("user `{username}`"),
            Credentials::Token(_) => "a personal access token".to_string(),
        }
    }
}

fn yes() -> bool {
    true
}

fn default_address() -> String {
    "127.0.0.1:8090".to_string()
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_reconnect_backoff() -> BackoffConfig {
    BackoffConfig { initial: Duration::from_millis(200), max: Duration::from_secs(10) }
}

impl IggyConfig {
    /// The credentials this config names: exactly one way to sign in, its secret
    /// read from the file or variable it names.
    pub fn credentials(&self) -> Result<Credentials, String> {
        let ways = [self.password.is_some(), self.token.is_some(), self.token_file.is_some(), self.token_env.is_some()];
        match ways.iter().filter(|w| **w).count() {
            0 => return Err("no credentials: set username and password, or token, token_file or token_env".into()),
            1 => {}
            _ => return Err("more than one of password, token, token_file and token_env is set; keep one".into()),
        }
        if let Some(password) = &self.password {
            let username = self.username.clone().ok_or("password is set but username is not")?;
            return Ok(Credentials::UsernamePassword { username, password: password.clone() });
        }
        if self.username.is_some() {
            return Err("username is set without a password (a token needs no username)".into());
        }
        if let Some(token) = &self.token {
            return Ok(Credentials::Token(token.clone()));
        }
        if let Some(path) = &self.token_file {
            let text = read_secret_file(path).map_err(|problem| format!("token_file: {problem}"))?;
            let token = text.trim();
            if token.is_empty() {
                return Err(format!("token_file {} is empty", path.display()));
            }
            return Ok(Credentials::Token(Secret::new(token)));
        }
        let variable = self.token_env.as_deref().unwrap_or_default();
        match std::env::var(variable) {
            Ok(token) if !token.trim().is_empty() => Ok(Credentials::Token(Secret::new(token.trim()))),
            Ok(_) => Err(format!("token_env: the environment variable {variable} is empty")),
            Err(_) => Err(format!("token_env: the environment variable {variable} is not set")),
        }
    }

    /// This server, signed in to with a tenant's own credentials.
    pub fn with_credentials_of(&self, tenant: &super::TenantIggy) -> IggyConfig {
        IggyConfig {
            username: tenant.username.clone(),
            password: tenant.password.clone(),
            token: tenant.token.clone(),
            token_file: tenant.token_file.clone(),
            token_env: tenant.token_env.clone(),
            ..self.clone()
        }
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        if self.address.trim().is_empty() {
            return Err("address is empty".into());
        }
        if self.transport == Transport::Http && !self.address.starts_with("http") {
            return Err(format!(
                "transport is http, so address must be a URL like http://127.0.0.1:3000, not {:?}",
                self.address
            ));
        }
        settings::TIMER.check(self.connect_timeout).map_err(|p| format!("connect_timeout: {p}"))?;
        super::validate::check_backoff(&self.reconnect_backoff).map_err(|p| format!("reconnect_backoff: {p}"))?;
        if let Some(ca_file) = &self.tls.ca_file {
            // The client reads it when it connects, blocking; a device or a pipe named
            // here would hang every connection attempt, so it is checked now.
            files::read_regular(ca_file, MAX_CA_FILE_BYTES, "CA file", "the limit for a CA file")
                .map_err(|e| format!("tls.ca_file: {}: {}", e.path.display(), e.problem))?;
        }
        self.credentials().map(|_| ())
    }
}
