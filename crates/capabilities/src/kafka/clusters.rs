//! The Kafka clusters one connector is granted: how to reach each, as librdkafka
//! properties (clients are made when a guest first uses them, so a cluster that is down
//! does not stop the host from starting).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::KafkaCluster;

/// The clusters one connector is granted, by name.
#[derive(Clone, Default)]
pub struct KafkaClusters(Arc<BTreeMap<String, Served>>);

/// One cluster: the properties every client of it starts from.
#[derive(Clone)]
pub(super) struct Served {
    pub brokers: String,
    pub properties: Vec<(String, String)>,
}

impl KafkaClusters {
    /// The clusters `names` (a connector's `grants.kafka`), as `clusters` define them;
    /// the error names what is wrong (an undefined name, a secret that cannot be read).
    pub fn granted(names: &[String], clusters: &BTreeMap<String, KafkaCluster>) -> Result<KafkaClusters, String> {
        let mut served = BTreeMap::new();
        for name in names {
            let cluster = clusters.get(name).ok_or_else(|| format!("grants.kafka: no [kafka.{name}] is defined"))?;
            let brokers = cluster.brokers.join(",");
            let timeout_ms = cluster.connect_timeout.as_millis().to_string();
            let mut properties = vec![
                ("bootstrap.servers".to_string(), brokers.clone()),
                ("client.id".to_string(), "ferry".to_string()),
                ("socket.connection.setup.timeout.ms".to_string(), timeout_ms),
            ];
            match cluster.credentials().map_err(|p| format!("[kafka.{name}] {p}"))? {
                Some((user, password)) => properties.extend([
                    ("security.protocol".to_string(), "SASL_PLAINTEXT".to_string()),
                    ("sasl.mechanism".to_string(), cluster.mechanism.unwrap_or_default().name().to_string()),
                    ("sasl.username".to_string(), user),
                    ("sasl.password".to_string(), password),
                ]),
                None => properties.push(("security.protocol".to_string(), "PLAINTEXT".to_string())),
            }
            properties.extend(cluster.properties.iter().map(|(name, value)| (name.clone(), value.clone())));
            served.insert(name.clone(), Served { brokers, properties });
        }
        Ok(KafkaClusters(Arc::new(served)))
    }

    pub(super) fn get(&self, name: &str) -> Option<&Served> {
        self.0.get(name)
    }
}

// Compared and shown by the names they serve: what a sandbox grants.
impl std::fmt::Debug for KafkaClusters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl PartialEq for KafkaClusters {
    fn eq(&self, other: &Self) -> bool {
        self.0.keys().eq(other.0.keys())
    }
}

impl Eq for KafkaClusters {}
