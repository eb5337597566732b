//! The NATS source's `plugin_config`, checked before anything is read.

use serde::Deserialize;

/// The most messages a batch may take.
pub const MAX_BATCH_SIZE: u32 = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The `[nats.NAME]` granted to the connector.
    pub connection: String,
    /// The JetStream stream read.
    pub stream: String,
    /// The durable consumer's name.
    #[serde(default = "default_durable")]
    pub durable: String,
    /// Only messages whose subject matches it.
    #[serde(default)]
    pub filter_subject: Option<String>,
    /// The most messages a batch takes; also the consumer's `max_ack_pending`.
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    /// How long the server waits for an acknowledgement before delivering again.
    #[serde(default = "default_ack_wait_ms")]
    pub ack_wait_ms: u32,
    /// Where a connector with no cursor and no consumer starts: `all` or `new`.
    #[serde(default = "default_deliver")]
    pub deliver: String,
}

fn default_durable() -> String {
    "ferry".into()
}

fn default_batch_size() -> u32 {
    100
}

fn default_ack_wait_ms() -> u32 {
    30_000
}

fn default_deliver() -> String {
    "all".into()
}

impl Config {
    /// What is wrong with it, naming the key.
    pub fn check(&self) -> Result<(), String> {
        for (key, value) in [("connection", &self.connection), ("stream", &self.stream), ("durable", &self.durable)] {
            if value.is_empty() {
                return Err(format!("plugin_config.{key} is empty"));
            }
        }
        // JetStream's names: no spaces, dots or wildcards (they are subject tokens).
        for (key, value) in [("stream", &self.stream), ("durable", &self.durable)] {
            if let Some(bad) = value.chars().find(|c| c.is_whitespace() || matches!(c, '.' | '*' | '>')) {
                return Err(format!("plugin_config.{key} {value:?} has {bad:?}, which a JetStream name cannot have"));
            }
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(format!("plugin_config.batch_size {} is not between 1 and {MAX_BATCH_SIZE}", self.batch_size));
        }
        if self.ack_wait_ms < 100 {
            return Err(format!("plugin_config.ack_wait_ms {} is under 100 ms", self.ack_wait_ms));
        }
        if self.deliver != "all" && self.deliver != "new" {
            return Err(format!(
                "plugin_config.deliver {:?} is neither \"all\" (every message of the stream) nor \"new\" (only messages stored from now on)",
                self.deliver
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    fn config(json: serde_json::Value) -> Result<Config, String> {
        let config: Config = serde_json::from_value(json).map_err(|e| e.to_string())?;
        config.check().map(|()| config)
    }

    #[test]
    fn defaults_and_every_bad_key_is_named() {
        let good = config(serde_json::json!({ "connection": "hub", "stream": "ORDERS" })).unwrap();
        assert_eq!(
            (good.durable.as_str(), good.batch_size, good.ack_wait_ms, good.deliver.as_str()),
            ("ferry", 100, 30_000, "all")
        );
        for (json, named) in [
            (serde_json::json!({ "connection": "", "stream": "S" }), "plugin_config.connection is empty"),
            (serde_json::json!({ "connection": "hub", "stream": "a.b" }), "plugin_config.stream \"a.b\""),
            (serde_json::json!({ "connection": "hub", "stream": "S", "durable": "x y" }), "plugin_config.durable"),
            (serde_json::json!({ "connection": "hub", "stream": "S", "batch_size": 0 }), "plugin_config.batch_size 0"),
            (
                serde_json::json!({ "connection": "hub", "stream": "S", "ack_wait_ms": 5 }),
                "plugin_config.ack_wait_ms 5",
            ),
            (
                serde_json::json!({ "connection": "hub", "stream": "S", "deliver": "last" }),
                "plugin_config.deliver \"last\"",
            ),
            (serde_json::json!({ "connection": "hub", "stream": "S", "subject": "x" }), "unknown field `subject`"),
        ] {
            let problem = config(json).unwrap_err();
            assert!(problem.contains(named), "{problem} should name {named}");
        }
    }
}
