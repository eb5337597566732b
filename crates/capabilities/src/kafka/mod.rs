//! The contract's `kafka` import: Kafka clusters the operator defined
//! (`[kafka.NAME]`), reachable by a connector only by the names in its
//! `grants.kafka`, through clients of the host's (librdkafka, through `rdkafka`);
//! what a guest does there is produce, and read assigned partitions as a consumer
//! group whose offsets it commits itself.
//!
//! Why the host and not the guest: as for PostgreSQL and NATS, a guest has no sockets
//! and should carry no protocol client; and a cluster reached through a name cannot be
//! one the operator did not mean, nor leak its address or credentials to the guest.
//!
//! * `config.rs`: `[kafka.NAME]`, a cluster as the operator defines it;
//! * `clusters.rs`: the clusters of one connector;
//! * `consumer.rs`: a consumer of assigned partitions: assigned, read, committed;
//! * `login.rs`: a refused login, which librdkafka tells no call of, kept for them;
//! * `packed.rs`: messages packed into one buffer, as fetched and as produced;
//! * `host.rs`: the interface's calls, each within the guest's call deadline.

mod clusters;
mod config;
mod consumer;
mod host;
mod login;
mod packed;

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_contract::settings::{SecretSource, valid_key};
use wasmtime::component::Linker;

pub use clusters::KafkaClusters;
pub use config::{KafkaCluster, Mechanism};

use crate::{Capability, GuestData, Import, InstanceBuilder, Verdict};

/// The capability: `grants.kafka`, names of the clusters defined in `[kafka.NAME]`.
pub struct Kafka;

/// What one instance may do with Kafka: the clusters its connector is granted.
pub struct KafkaState {
    clusters: KafkaClusters,
}

impl Capability for Kafka {
    const NAME: &'static str = "kafka";
    type Grant = Vec<String>;
    type Section = BTreeMap<String, KafkaCluster>;
    type Shared = KafkaClusters;
    type State = KafkaState;

    fn validate_section(clusters: &Self::Section) -> Result<(), String> {
        for (name, cluster) in clusters {
            valid_key(name).map_err(|p| format!("[kafka.{name}]: the name {name:?} {p}"))?;
            cluster.validate().map_err(|p| format!("[kafka.{name}]: {p}"))?;
        }
        Ok(())
    }

    fn validate(names: &Vec<String>, clusters: &Self::Section) -> Result<(), (&'static str, String)> {
        let Some(name) = names.iter().find(|name| !clusters.contains_key(*name)) else { return Ok(()) };
        let defined: Vec<&str> = clusters.keys().map(String::as_str).collect();
        let defined = if defined.is_empty() { "none".into() } else { defined.join(", ") };
        Err(("grants.kafka", format!("no [kafka.{name}] is defined (defined: {defined})")))
    }

    /// Each cluster's password file: resolved against the config's directory, and
    /// kept from every guest.
    fn section_paths(clusters: &mut Self::Section) -> Vec<&mut PathBuf> {
        let mut paths = Vec::new();
        for cluster in clusters.values_mut() {
            if let Some(SecretSource::File(path)) = cluster.password.as_mut() {
                paths.push(path);
            }
        }
        paths
    }

    fn verdict(import: &Import<'_>, names: &Vec<String>) -> Option<Verdict> {
        import
            .is("iggy:connector", "kafka")
            .then(|| Verdict::by(!names.is_empty(), "grants.kafka", "no clusters: grants.kafka is empty"))
    }

    fn prepare(names: &Vec<String>, clusters: &Self::Section) -> Result<KafkaClusters, String> {
        KafkaClusters::granted(names, clusters)
    }

    async fn instantiate(
        _: &Vec<String>,
        clusters: &KafkaClusters,
        _: &mut InstanceBuilder<'_>,
    ) -> Result<KafkaState, String> {
        Ok(KafkaState { clusters: clusters.clone() })
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        host::link(linker)
    }

    fn secrets(names: &Vec<String>, clusters: &Self::Section) -> Vec<String> {
        names.iter().filter_map(|name| clusters.get(name)).flat_map(KafkaCluster::secrets).collect()
    }

    /// The definition of each cluster granted and its password's value: a rotated
    /// password is a change.
    fn reach(names: &Vec<String>, clusters: &Self::Section) -> String {
        let mut reach = String::new();
        for name in names {
            let cluster = clusters.get(name);
            let credentials = cluster.map(KafkaCluster::credentials);
            reach.push_str(&format!("{name} {cluster:?} {credentials:?}\n"));
        }
        reach
    }
}
