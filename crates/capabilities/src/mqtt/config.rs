//! `[mqtt.NAME]`: MQTT brokers the operator defines by name. A connector reaches one
//! only when its grants list the name (`grants.mqtt`); the guest never sees where the
//! broker is or its credentials.
//!
//! ```toml
//! [mqtt.sensors]
//! host = "127.0.0.1"
//! port = 1883
//! user = "ferry"                                # with password
//! password = { env = "SENSORS_MQTT_PASSWORD" }  # or { file = "secrets/sensors-mqtt" }
//! connect_timeout = "5s"
//! keep_alive = "30s"
//! ```

use std::time::Duration;

use serde::Deserialize;

use ferry_contract::settings::{self, SecretSource, duration};

/// One MQTT broker, as the operator defined it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttBroker {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default)]
    pub user: Option<String>,
    /// The user's password, read by the host (never written in the config itself).
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// How long connecting may take (also bounded by the connector's call deadline).
    #[serde(default = "default_connect_timeout", with = "duration")]
    pub connect_timeout: Duration,
    /// How often the connection is kept alive with a ping when nothing else is sent.
    #[serde(default = "default_keep_alive", with = "duration")]
    pub keep_alive: Duration,
}

fn default_port() -> u16 {
    1883
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_keep_alive() -> Duration {
    Duration::from_secs(30)
}

impl MqttBroker {
    /// Check the definition alone.
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.host.is_empty() {
            return Err("host: must not be empty".into());
        }
        match (&self.user, &self.password) {
            (Some(_), None) => return Err("user: give its password too".into()),
            (None, Some(_)) => return Err("password: give the user it is of".into()),
            _ => {}
        }
        settings::CALL_TIMEOUT.check(self.connect_timeout).map_err(|p| format!("connect_timeout: {p}"))?;
        if !(5..=3600).contains(&self.keep_alive.as_secs()) {
            return Err(format!("keep_alive: {:?} is not between 5s and 1h", self.keep_alive));
        }
        Ok(())
    }

    /// The user and password, the password read; the error says what cannot be read.
    pub fn credentials(&self) -> Result<Option<(String, String)>, String> {
        match (&self.user, &self.password) {
            (Some(user), Some(password)) => {
                Ok(Some((user.clone(), password.read().map_err(|p| format!("password: {p}"))?)))
            }
            _ => Ok(None),
        }
    }

    /// The secret values (the password): redacted from everything ferry shows.
    pub fn secrets(&self) -> Vec<String> {
        match self.credentials() {
            Ok(Some((_, password))) => vec![password],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MqttBroker, String> {
        let broker: MqttBroker = toml::from_str(text).map_err(|e| e.to_string())?;
        broker.validate()?;
        Ok(broker)
    }

    #[test]
    fn a_broker_takes_its_defaults_and_mistakes_name_their_key() {
        let broker = parse("host = \"127.0.0.1\"").unwrap();
        assert_eq!((broker.port, broker.keep_alive, broker.credentials()), (1883, Duration::from_secs(30), Ok(None)));
        for (text, words) in [
            ("host = \"\"", "host: must not be empty"),
            ("host = \"h\"\nuser = \"u\"", "user: give its password too"),
            ("host = \"h\"\npassword = { env = \"P\" }", "password: give the user"),
            ("host = \"h\"\nconnect_timeout = \"0s\"", "connect_timeout"),
            ("host = \"h\"\nkeep_alive = \"1s\"", "keep_alive"),
            ("host = \"h\"\ntoken = { env = \"T\" }", "unknown field `token`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(words), "{text}: {error}");
        }
    }
}
