//! The MQTT brokers one connector is granted: how to reach each (a connection is made
//! when a guest first uses its session, so a broker that is down does not stop the
//! host from starting).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::MqttBroker;

/// The brokers one connector is granted, by name.
#[derive(Clone, Default)]
pub struct MqttBrokers(Arc<BTreeMap<String, Reached>>);

/// One broker: where it is, who signs in, and the connection's timings.
#[derive(Clone)]
pub(super) struct Reached {
    pub host: String,
    pub port: u16,
    pub credentials: Option<(String, String)>,
    pub connect_timeout: Duration,
    pub keep_alive: Duration,
}

impl MqttBrokers {
    /// The brokers `names` (a connector's `grants.mqtt`), as `brokers` define them;
    /// the error names what is wrong (an undefined name, a secret that cannot be read).
    pub fn granted(names: &[String], brokers: &BTreeMap<String, MqttBroker>) -> Result<MqttBrokers, String> {
        let mut reached = BTreeMap::new();
        for name in names {
            let broker = brokers.get(name).ok_or_else(|| format!("grants.mqtt: no [mqtt.{name}] is defined"))?;
            let credentials = broker.credentials().map_err(|p| format!("[mqtt.{name}] {p}"))?;
            let broker = Reached {
                host: broker.host.clone(),
                port: broker.port,
                credentials,
                connect_timeout: broker.connect_timeout,
                keep_alive: broker.keep_alive,
            };
            reached.insert(name.clone(), broker);
        }
        Ok(MqttBrokers(Arc::new(reached)))
    }

    pub(super) fn get(&self, name: &str) -> Option<&Reached> {
        self.0.get(name)
    }
}

// Compared and shown by the names they serve: what a sandbox grants.
impl std::fmt::Debug for MqttBrokers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl PartialEq for MqttBrokers {
    fn eq(&self, other: &Self) -> bool {
        self.0.keys().eq(other.0.keys())
    }
}

impl Eq for MqttBrokers {}
