//! `[mysql.NAME]`: MySQL or MariaDB servers the operator defines by name. A connector
//! reaches one only when its grants list the name (`grants.mysql`); the guest never
//! sees where the server is or the password.
//!
//! ```toml
//! [mysql.shop]
//! host = "127.0.0.1"
//! port = 3306
//! user = "ferry"
//! password = { env = "SHOP_MYSQL_PASSWORD" }   # or { file = "secrets/shop-mysql" }
//! database = "shop"
//! connect_timeout = "5s"
//! ```

use std::time::Duration;

use serde::Deserialize;

use ferry_contract::settings::{self, SecretSource, duration};

/// One server, as the operator defined it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MysqlServer {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    pub user: String,
    /// The user's password, read by the host (never written in the config itself).
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// The database statements run in.
    pub database: String,
    /// How long connecting may take (also bounded by the connector's call deadline).
    #[serde(default = "default_connect_timeout", with = "duration")]
    pub connect_timeout: Duration,
}

fn default_port() -> u16 {
    3306
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

impl MysqlServer {
    /// Check the definition alone.
    pub(super) fn validate(&self) -> Result<(), String> {
        for (key, value) in [("host", &self.host), ("user", &self.user), ("database", &self.database)] {
            if value.is_empty() {
                return Err(format!("{key}: must not be empty"));
            }
        }
        settings::CALL_TIMEOUT.check(self.connect_timeout).map_err(|p| format!("connect_timeout: {p}"))?;
        Ok(())
    }

    /// The password, read; the error says what cannot be read.
    pub fn password(&self) -> Result<Option<String>, String> {
        self.password.as_ref().map(|secret| secret.read().map_err(|p| format!("password: {p}"))).transpose()
    }

    /// The secret values (the password): redacted from everything ferry shows.
    pub fn secrets(&self) -> Vec<String> {
        self.password().ok().flatten().into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MysqlServer, String> {
        let server: MysqlServer = toml::from_str(text).map_err(|e| e.to_string())?;
        server.validate()?;
        Ok(server)
    }

    #[test]
    fn a_server_takes_its_defaults_and_mistakes_name_their_key() {
        let server = parse("host = \"127.0.0.1\"\nuser = \"u\"\ndatabase = \"d\"").unwrap();
        assert_eq!((server.port, server.password()), (3306, Ok(None)));
        for (text, words) in [
            ("host = \"\"\nuser = \"u\"\ndatabase = \"d\"", "host: must not be empty"),
            ("host = \"h\"\nuser = \"u\"\ndatabase = \"\"", "database: must not be empty"),
            ("host = \"h\"\ndatabase = \"d\"", "missing field `user`"),
            ("host = \"h\"\nuser = \"u\"\ndatabase = \"d\"\nconnect_timeout = \"0s\"", "connect_timeout"),
            ("host = \"h\"\nuser = \"u\"\ndatabase = \"d\"\ntls = true", "unknown field `tls`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(words), "{text}: {error}");
        }
    }
}
