//! The MQTT source's `plugin_config`, checked before anything is subscribed to.

use ferry_guest::bindings::iggy::connector::mqtt::Qos;
use serde::Deserialize;

/// The most messages a batch may take.
pub const MAX_BATCH_SIZE: u32 = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    connection: String,
    client_id: String,
    topics: Vec<String>,
    #[serde(default = "default_qos")]
    qos: u8,
    #[serde(default = "default_batch_size")]
    batch_size: u32,
    #[serde(default = "default_wait_ms")]
    wait_ms: u32,
}

fn default_qos() -> u8 {
    1
}

fn default_batch_size() -> u32 {
    100
}

fn default_wait_ms() -> u32 {
    10
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub connection: String,
    pub client_id: String,
    pub topics: Vec<String>,
    pub qos: Qos,
    pub batch_size: u32,
    pub wait_ms: u32,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        let qos = match raw.qos {
            1 => Qos::AtLeastOnce,
            2 => Qos::ExactlyOnce,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "plugin_config.qos {other} is neither 1 nor 2: at QoS 0 the broker does not keep what ferry has not taken"
                )));
            }
        };
        let Raw { connection, client_id, topics, batch_size, wait_ms, .. } = raw;
        Ok(Config { connection, client_id, topics, qos, batch_size, wait_ms })
    }
}

impl Config {
    /// What is wrong with it, naming the key.
    pub fn check(&self) -> Result<(), String> {
        if self.connection.is_empty() {
            return Err("plugin_config.connection is empty: name a broker in grants.mqtt".into());
        }
        if self.client_id.is_empty() {
            return Err("plugin_config.client_id is empty: the broker keeps the session under it".into());
        }
        if self.topics.is_empty() {
            return Err("plugin_config.topics is empty: name a topic filter to subscribe to".into());
        }
        for filter in &self.topics {
            check_filter(filter).map_err(|p| format!("plugin_config.topics: {filter:?} {p}"))?;
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(format!("plugin_config.batch_size {} is not between 1 and {MAX_BATCH_SIZE}", self.batch_size));
        }
        if self.wait_ms > 1000 {
            return Err(format!("plugin_config.wait_ms {} is over 1000", self.wait_ms));
        }
        Ok(())
    }
}

/// MQTT's rules for a filter: not empty; `#` only as the last level, alone; `+` only
/// as a whole level.
fn check_filter(filter: &str) -> Result<(), String> {
    if filter.is_empty() {
        return Err("is empty".into());
    }
    let levels: Vec<&str> = filter.split('/').collect();
    for (index, level) in levels.iter().enumerate() {
        if level.contains('#') && (*level != "#" || index != levels.len() - 1) {
            return Err("has a # that is not the whole last level".into());
        }
        if level.contains('+') && *level != "+" {
            return Err("has a + that is not a whole level".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: serde_json::Value) -> Result<Config, String> {
        let config: Config = serde_json::from_value(json).map_err(|e| e.to_string())?;
        config.check().map(|()| config)
    }

    #[test]
    fn defaults_and_every_bad_key_is_named() {
        let good =
            config(serde_json::json!({ "connection": "hub", "client_id": "c", "topics": ["sensors/+/t", "a/#"] }))
                .unwrap();
        assert_eq!((good.qos, good.batch_size, good.wait_ms), (Qos::AtLeastOnce, 100, 10));
        let base = |extra: serde_json::Value| {
            let mut json = serde_json::json!({ "connection": "hub", "client_id": "c", "topics": ["t"] });
            json.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            json
        };
        for (json, named) in [
            (base(serde_json::json!({ "connection": "" })), "plugin_config.connection is empty"),
            (base(serde_json::json!({ "client_id": "" })), "plugin_config.client_id is empty"),
            (base(serde_json::json!({ "topics": [] })), "plugin_config.topics is empty"),
            (base(serde_json::json!({ "topics": ["a/#/b"] })), "\"a/#/b\" has a #"),
            (base(serde_json::json!({ "topics": ["a/b+"] })), "\"a/b+\" has a +"),
            (base(serde_json::json!({ "qos": 0 })), "plugin_config.qos 0"),
            (base(serde_json::json!({ "batch_size": 0 })), "plugin_config.batch_size 0"),
            (base(serde_json::json!({ "wait_ms": 5000 })), "plugin_config.wait_ms 5000"),
            (base(serde_json::json!({ "topic": "x" })), "unknown field `topic`"),
        ] {
            let problem = config(json).unwrap_err();
            assert!(problem.contains(named), "{problem} should name {named}");
        }
    }
}
