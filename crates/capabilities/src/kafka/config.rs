//! `[kafka.NAME]`: Kafka clusters the operator defines by name. A connector reaches
//! one only when its grants list the name (`grants.kafka`); the guest never sees where
//! the brokers are or the credentials.
//!
//! ```toml
//! [kafka.events]
//! brokers = ["10.0.0.5:9092", "10.0.0.6:9092"]
//! user = "ferry"                                 # SASL, with password
//! password = { env = "EVENTS_KAFKA_PASSWORD" }   # or { file = "secrets/events-kafka" }
//! mechanism = "SCRAM-SHA-512"                    # or SCRAM-SHA-256; PLAIN by default
//! connect_timeout = "5s"
//! properties = { "compression.type" = "lz4" }    # librdkafka's own, passed through
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use ferry_contract::settings::{self, SecretSource, duration};

/// librdkafka properties the host sets itself, for the guarantees it gives: an
/// operator's `properties` may not change them.
pub const HOST_PROPERTIES: [&str; 12] = [
    "bootstrap.servers",
    "group.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "enable.idempotence",
    "acks",
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
];

/// One Kafka cluster, as the operator defined it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaCluster {
    /// Bootstrap brokers, `host:port` each.
    pub brokers: Vec<String>,
    /// The SASL user (with `password`); none: no authentication.
    #[serde(default)]
    pub user: Option<String>,
    /// The user's password, read by the host (never written in the config itself).
    #[serde(default)]
    pub password: Option<SecretSource>,
    /// How the user proves it is who it says (`PLAIN` when not given).
    #[serde(default)]
    pub mechanism: Option<Mechanism>,
    /// How long connecting to a broker may take (also bounded by the call deadline).
    #[serde(default = "default_connect_timeout", with = "duration")]
    pub connect_timeout: Duration,
    /// More librdkafka properties for both clients (compression, buffering), as text.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// A SASL mechanism librdkafka speaks. SCRAM sends a proof of the password, never the
/// password itself, so it is the one to choose where the cluster offers it (over a
/// connection without TLS above all); PLAIN sends the password as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum Mechanism {
    #[default]
    #[serde(rename = "PLAIN")]
    Plain,
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl Mechanism {
    /// Its name, as librdkafka's `sasl.mechanism` and the config take it.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

impl KafkaCluster {
    /// Check the definition alone.
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.brokers.is_empty() {
            return Err("brokers: name at least one broker (\"host:port\")".into());
        }
        for broker in &self.brokers {
            let port = broker.rsplit_once(':').map(|(host, port)| (host, port.parse::<u16>()));
            if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) || broker.contains(',') {
                return Err(format!("brokers: {broker:?} is not \"host:port\""));
            }
        }
        match (&self.user, &self.password) {
            (Some(_), None) => return Err("user: give its password too".into()),
            (None, Some(_)) => return Err("password: give the user it is of".into()),
            _ => {}
        }
        if let (None, Some(mechanism)) = (&self.user, self.mechanism) {
            return Err(format!("mechanism: {:?} needs the user and password it authenticates", mechanism.name()));
        }
        settings::CALL_TIMEOUT.check(self.connect_timeout).map_err(|p| format!("connect_timeout: {p}"))?;
        if let Some(name) = self.properties.keys().find(|name| HOST_PROPERTIES.contains(&name.as_str())) {
            return Err(format!(
                "properties: {name:?} is set by ferry itself (for its guarantees, or from the keys above) and cannot be overridden"
            ));
        }
        Ok(())
    }

    /// The user and password, the password read; the error names what cannot be read.
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

    fn parse(text: &str) -> Result<KafkaCluster, String> {
        let cluster: KafkaCluster = toml::from_str(text).map_err(|e| e.to_string())?;
        cluster.validate()?;
        Ok(cluster)
    }

    #[test]
    fn a_cluster_takes_its_defaults_and_mistakes_name_their_key() {
        let cluster = parse("brokers = [\"127.0.0.1:9092\"]").unwrap();
        assert_eq!((cluster.connect_timeout, cluster.credentials()), (Duration::from_secs(5), Ok(None)));
        for (text, words) in [
            ("brokers = []", "brokers: name at least one"),
            ("brokers = [\"localhost\"]", "\"localhost\" is not \"host:port\""),
            ("brokers = [\"a:1,b:2\"]", "is not \"host:port\""),
            ("brokers = [\":9092\"]", "is not \"host:port\""),
            ("brokers = [\"h:1\"]\nuser = \"u\"", "user: give its password too"),
            ("brokers = [\"h:1\"]\npassword = { env = \"P\" }", "password: give the user"),
            ("brokers = [\"h:1\"]\nmechanism = \"SCRAM-SHA-256\"", "mechanism: \"SCRAM-SHA-256\" needs the user"),
            ("brokers = [\"h:1\"]\nmechanism = \"GSSAPI\"", "unknown variant `GSSAPI`, expected one of `PLAIN`"),
            ("brokers = [\"h:1\"]\nproperties = { \"sasl.mechanism\" = \"PLAIN\" }", "\"sasl.mechanism\" is set by ferry"),
            ("brokers = [\"h:1\"]\nconnect_timeout = \"0s\"", "connect_timeout"),
            ("brokers = [\"h:1\"]\nproperties = { \"enable.auto.commit\" = \"true\" }", "\"enable.auto.commit\" is set by ferry"),
            ("brokers = [\"h:1\"]\ntls = true", "unknown field `tls`"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(words), "{text}: {error}");
        }
    }
}
