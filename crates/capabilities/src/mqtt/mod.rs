//! The contract's `mqtt` import: MQTT brokers the operator defined (`[mqtt.NAME]`),
//! reachable by a connector only by the names in its `grants.mqtt`, through sessions
//! of the host's; what a guest does there is publish, subscribe, receive, and
//! acknowledge what it received once it is safe.
//!
//! Why the host and not the guest: as for PostgreSQL, Redis and NATS, a guest has no
//! sockets and should carry no protocol client; and a broker reached through a name
//! cannot be one the operator did not mean, nor leak its address or credentials.
//!
//! * `config.rs`: `[mqtt.NAME]`, a broker as the operator defines it;
//! * `brokers.rs`: the brokers of one connector;
//! * `session.rs`: one session's connection, driven only inside the guest's calls;
//! * `host.rs`: the interface's calls, each within the guest's call deadline.

mod brokers;
mod config;
mod host;
mod session;

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_contract::settings::{SecretSource, valid_key};
use wasmtime::component::Linker;

pub use brokers::MqttBrokers;
pub use config::MqttBroker;

use crate::{Capability, GuestData, Import, InstanceBuilder, Verdict};

/// The capability: `grants.mqtt`, names of the brokers defined in `[mqtt.NAME]`.
pub struct Mqtt;

/// What one instance may do with MQTT: the brokers its connector is granted.
pub struct MqttState {
    brokers: MqttBrokers,
}

impl Capability for Mqtt {
    const NAME: &'static str = "mqtt";
    type Grant = Vec<String>;
    type Section = BTreeMap<String, MqttBroker>;
    type Shared = MqttBrokers;
    type State = MqttState;

    fn validate_section(brokers: &Self::Section) -> Result<(), String> {
        for (name, broker) in brokers {
            valid_key(name).map_err(|p| format!("[mqtt.{name}]: the name {name:?} {p}"))?;
            broker.validate().map_err(|p| format!("[mqtt.{name}]: {p}"))?;
        }
        Ok(())
    }

    fn validate(names: &Vec<String>, brokers: &Self::Section) -> Result<(), (&'static str, String)> {
        let Some(name) = names.iter().find(|name| !brokers.contains_key(*name)) else { return Ok(()) };
        let defined: Vec<&str> = brokers.keys().map(String::as_str).collect();
        let defined = if defined.is_empty() { "none".into() } else { defined.join(", ") };
        Err(("grants.mqtt", format!("no [mqtt.{name}] is defined (defined: {defined})")))
    }

    /// Each broker's password file: resolved against the config's directory, and kept
    /// from every guest.
    fn section_paths(brokers: &mut Self::Section) -> Vec<&mut PathBuf> {
        let password_files = brokers.values_mut().filter_map(|broker| match broker.password.as_mut() {
            Some(SecretSource::File(path)) => Some(path),
            _ => None,
        });
        password_files.collect()
    }

    fn verdict(import: &Import<'_>, names: &Vec<String>) -> Option<Verdict> {
        import
            .is("iggy:connector", "mqtt")
            .then(|| Verdict::by(!names.is_empty(), "grants.mqtt", "no brokers: grants.mqtt is empty"))
    }

    fn prepare(names: &Vec<String>, brokers: &Self::Section) -> Result<MqttBrokers, String> {
        MqttBrokers::granted(names, brokers)
    }

    async fn instantiate(_: &Vec<String>, brokers: &MqttBrokers, _: &mut InstanceBuilder<'_>) -> Result<MqttState, String> {
        Ok(MqttState { brokers: brokers.clone() })
    }

    fn link<T: GuestData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        host::link(linker)
    }

    fn secrets(names: &Vec<String>, brokers: &Self::Section) -> Vec<String> {
        names.iter().filter_map(|name| brokers.get(name)).flat_map(MqttBroker::secrets).collect()
    }

    /// The definition of each broker granted and its password's value: a rotated
    /// password is a change.
    fn reach(names: &Vec<String>, brokers: &Self::Section) -> String {
        let mut reach = String::new();
        for name in names {
            let broker = brokers.get(name);
            let credentials = broker.map(MqttBroker::credentials);
            reach.push_str(&format!("{name} {broker:?} {credentials:?}\n"));
        }
        reach
    }
}
