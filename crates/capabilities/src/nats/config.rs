//! `[nats.NAME]`: NATS servers the operator defines by name. A connector reaches one
//! only when its grants list the name (`grants.nats`); the guest never sees where the
//! server is or its credentials.
//!
//! ```toml
//! [nats.events]
//! host = "127.0.0.1"
//! port = 4222
//! user = "ferry"                                # with password; or token
//! password = { env = "EVENTS_NATS_PASSWORD" }   # or { file = "secrets/events-nats" }
//! connect_timeout = "5s"
//! ```

use std::time::Duration;

use serde::Deserialize;

use ferry_contract::settings::{self, SecretSource, duration};

/// One NATS server, as the operator defined it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsServer {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default)]
    pub user: Option<String>,
    /// The user's password, read by the host (never written in the config itself).
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// A token instead of a user and password.
    #[serde(default)]
    pub token: Option<SecretSource>,
    /// How long connecting may take (also bounded by the connector's call deadline).
    #[serde(default = "default_connect_timeout", with = "duration")]
    pub connect_timeout: Duration,
}

fn default_port() -> u16 {
    4222
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

/// How the host signs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    None,
    UserAndPassword(String, String),
    Token(String),
}

impl NatsServer {
    /// Check the definition alone.
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.host.is_empty() {
            return Err("host: must not be empty".into());
        }
        match (&self.user, &self.password, &self.token) {
            (Some(_), Some(_), None) | (None, None, _) => {}
            (Some(_), None, _) => return Err("user: give its password too".into()),
            (None, Some(_), _) => return Err("password: give the user it is of".into()),
            (Some(_), Some(_), Some(_)) => return Err("token: give a user and password, or a token, not both".into()),
        }
        settings::CALL_TIMEOUT.check(self.connect_timeout).map_err(|p| format!("connect_timeout: {p}"))?;
        Ok(())
    }

    /// The credentials, their secrets read; the error names what cannot be read.
    pub fn credentials(&self) -> Result<Credentials, String> {
        Ok(match (&self.user, &self.password, &self.token) {
            (Some(user), Some(password), _) => {
                Credentials::UserAndPassword(user.clone(), password.read().map_err(|p| format!("password: {p}"))?)
            }
            (_, _, Some(token)) => Credentials::Token(token.read().map_err(|p| format!("token: {p}"))?),
            _ => Credentials::None,
        })
    }

    /// The secret values (password, token): redacted from everything ferry shows.
    pub fn secrets(&self) -> Vec<String> {
        match self.credentials() {
            Ok(Credentials::UserAndPassword(_, secret) | Credentials::Token(secret)) => vec![secret],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<NatsServer, String> {
        let server: NatsServer = toml::from_str(text).map_err(|e| e.to_string())?;
        server.validate()?;
        Ok(server)
    }

    #[test]
    fn a_server_takes_its_defaults_and_mistakes_name_their_key() {
        let server = parse("host = \"127.0.0.1\"").unwrap();
        assert_eq!((server.port, server.credentials()), (4222, Ok(Credentials::None)));
        for (text, words) in [
            ("host = \"\"", "host: must not be empty"),
            ("host = \"h\"\nuser = \"u\"", "user: give its password too"),
            ("host = \"h\"\npassword = { env = \"P\" }", "password: give the user"),
            ("host = \"h\"\nuser = \"u\"\npassword = { env = \"P\" }\ntoken = { env = \"T\" }", "not both"),
            ("host = \"h\"\nconnect_timeout = \"0s\"", "connect_timeout"),
            ("host = \"h\"\ntls = true", "unknown field `tls`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(words), "{text}: {error}");
        }
    }
}
