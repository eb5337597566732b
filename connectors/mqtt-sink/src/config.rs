//! The MQTT sink's `plugin_config`, checked before anything is published, and the
//! rules of a topic one publishes to.

use ferry_guest::BatchTemplate;
use ferry_guest::bindings::iggy::connector::mqtt::Qos;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    connection: String,
    client_id: String,
    #[serde(default)]
    topic: Option<String>,
    #[serde(default = "default_qos")]
    qos: u8,
    #[serde(default)]
    retain: bool,
    #[serde(default = "default_max_payload")]
    max_payload: usize,
}

fn default_qos() -> u8 {
    1
}

fn default_max_payload() -> usize {
    256 * 1024
}

/// The largest payload MQTT can carry, less room for the topic.
const MQTT_MAX_PAYLOAD: usize = 256 * 1024 * 1024 - 65_536;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub connection: String,
    pub client_id: String,
    pub topic: BatchTemplate,
    pub qos: Qos,
    pub retain: bool,
    pub max_payload: usize,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        let text = raw.topic.as_deref().unwrap_or("{stream}/{topic}");
        let topic =
            BatchTemplate::parse(text).map_err(|p| serde::de::Error::custom(format!("plugin_config.topic: {p}")))?;
        let qos = match raw.qos {
            1 => Qos::AtLeastOnce,
            2 => Qos::ExactlyOnce,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "plugin_config.qos {other} is neither 1 (at least once) nor 2 (exactly once per publish): QoS 0 could lose messages"
                )));
            }
        };
        let config = Config {
            connection: raw.connection,
            client_id: raw.client_id,
            topic,
            qos,
            retain: raw.retain,
            max_payload: raw.max_payload,
        };
        Ok(config)
    }
}

impl Config {
    /// What is wrong with it, naming the key.
    pub fn check(&self) -> Result<(), String> {
        if self.connection.is_empty() {
            return Err("plugin_config.connection is empty: name a broker in grants.mqtt".into());
        }
        if self.client_id.is_empty() {
            return Err("plugin_config.client_id is empty".into());
        }
        check_topic(&self.topic.sample()).map_err(|p| format!("plugin_config.topic {p}"))?;
        if !(1..=MQTT_MAX_PAYLOAD).contains(&self.max_payload) {
            return Err(format!(
                "plugin_config.max_payload {} is not between 1 and {MQTT_MAX_PAYLOAD}",
                self.max_payload
            ));
        }
        Ok(())
    }
}

/// Whether `topic` can be published to: not empty, no wildcard (`+`, `#`), no NUL.
pub fn check_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() {
        return Err("is empty".into());
    }
    if topic.contains(['+', '#', '\0']) {
        return Err("holds a wildcard (+ or #) or a NUL, which a published topic cannot".into());
    }
    if topic.len() > 65_535 {
        return Err("is longer than 65,535 bytes".into());
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
        let good = config(serde_json::json!({ "connection": "hub", "client_id": "c" })).unwrap();
        assert_eq!((good.qos, good.retain, good.max_payload), (Qos::AtLeastOnce, false, 262_144));
        assert_eq!(good.topic.sample(), "x/x");
        for (json, named) in [
            (serde_json::json!({ "connection": "", "client_id": "c" }), "plugin_config.connection is empty"),
            (serde_json::json!({ "connection": "hub", "client_id": "" }), "plugin_config.client_id is empty"),
            (serde_json::json!({ "connection": "hub", "client_id": "c", "qos": 0 }), "plugin_config.qos 0"),
            (serde_json::json!({ "connection": "hub", "client_id": "c", "topic": "a/#" }), "plugin_config.topic"),
            (serde_json::json!({ "connection": "hub", "client_id": "c", "topic": "{x}" }), "plugin_config.topic"),
            (
                serde_json::json!({ "connection": "hub", "client_id": "c", "max_payload": 0 }),
                "plugin_config.max_payload 0",
            ),
            (serde_json::json!({ "connection": "hub" }), "missing field `client_id`"),
        ] {
            let problem = config(json).unwrap_err();
            assert!(problem.contains(named), "{problem} should name {named}");
        }
        assert!(check_topic("sensors/+/t").is_err() && check_topic("").is_err() && check_topic("a/b").is_ok());
    }
}
