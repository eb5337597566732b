//! `[redis.NAME]`: Redis servers the operator defines by name. A connector reaches
//! one only when its grants list the name (`grants.redis`); the guest never sees
//! where the server is or the password.
//!
//! ```toml
//! [redis.cache]
//! host = "127.0.0.1"
//! port = 6379
//! database = 0
//! user = "ferry"                               # an ACL user; default: the server's default user
//! password = { env = "CACHE_REDIS_PASSWORD" }  # or { file = "secrets/cache-redis" }
//! connect_timeout = "5s"
//! ```

use std::time::Duration;

use serde::Deserialize;

use ferry_contract::settings::{self, SecretSource, duration};

/// One Redis server, as the operator defined it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisServer {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    /// The logical database (`SELECT n`).
    #[serde(default)]
    pub database: i64,
    /// An ACL user (Redis 6 and later); without one, the server's default user.
    #[serde(default)]
    pub user: Option<String>,
    /// Where the host reads the password (never written in the config itself).
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// How long connecting may take (also bounded by the connector's call deadline).
    #[serde(default = "default_connect_timeout", with = "duration")]
    pub connect_timeout: Duration,
}

fn default_port() -> u16 {
    6379
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

impl RedisServer {
    /// Check the definition alone.
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.host.is_empty() {
            return Err("host: must not be empty".into());
        }
        if self.database < 0 {
            return Err(format!("database: {} is negative", self.database));
        }
        if self.user.as_deref() == Some("") {
            return Err("user: must not be empty (leave it out for the server's default user)".into());
        }
        settings::CALL_TIMEOUT.check(self.connect_timeout).map_err(|p| format!("connect_timeout: {p}"))?;
        Ok(())
    }

    /// The password's value, if one is given; the error names what cannot be read.
    pub fn password(&self) -> Result<Option<String>, String> {
        match &self.password {
            Some(source) => source.read().map(Some).map_err(|p| format!("password: {p}")),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RedisServer, String> {
        let server: RedisServer = toml::from_str(text).map_err(|e| e.to_string())?;
        server.validate()?;
        Ok(server)
    }

    #[test]
    fn a_server_takes_its_defaults_and_mistakes_name_their_key() {
        let server = parse("host = \"127.0.0.1\"").unwrap();
        assert_eq!((server.port, server.database, server.connect_timeout), (6379, 0, Duration::from_secs(5)));
        assert_eq!(server.password(), Ok(None));
        for (text, words) in [
            ("host = \"\"", "host: must not be empty"),
            ("host = \"h\"\ndatabase = -1", "database: -1 is negative"),
            ("host = \"h\"\nuser = \"\"", "user: must not be empty"),
            ("host = \"h\"\nconnect_timeout = \"0s\"", "connect_timeout"),
            ("host = \"h\"\npassword = \"written\"", "password"),
            ("host = \"h\"\ntls = true", "unknown field `tls`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(words), "{text}: {error}");
        }
    }
}
