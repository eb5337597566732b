//! The Kafka source's `plugin_config`, checked before anything is read.

use serde::Deserialize;

/// The most messages a batch may take.
pub const MAX_BATCH_SIZE: u32 = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The `[kafka.NAME]` granted to the connector.
    pub connection: String,
    /// The topics read, every partition of each.
    pub topics: Vec<String>,
    /// The consumer group whose offsets are committed (and read, with no cursor).
    #[serde(default = "default_group")]
    pub group: String,
    /// The most messages a batch takes.
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    /// How long a poll waits for a first message before it says there is none.
    #[serde(default = "default_fetch_wait_ms")]
    pub fetch_wait_ms: u32,
    /// Where a partition with no cursor and no committed offset starts: `earliest` or
    /// `latest`.
    #[serde(default = "default_start")]
    pub start: String,
}

fn default_group() -> String {
    "ferry".into()
}

fn default_batch_size() -> u32 {
    100
}

fn default_fetch_wait_ms() -> u32 {
    100
}

fn default_start() -> String {
    "earliest".into()
}

impl Config {
    /// What is wrong with it, naming the key.
    pub fn check(&self) -> Result<(), String> {
        for (key, value) in [("connection", &self.connection), ("group", &self.group)] {
            if value.is_empty() {
                return Err(format!("plugin_config.{key} is empty"));
            }
        }
        if self.topics.is_empty() {
            return Err("plugin_config.topics is empty: name the topics to read".into());
        }
        // Kafka's topic names: ASCII letters, digits, `.`, `_` and `-`, at most 249.
        for topic in &self.topics {
            let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
            if topic.is_empty() || topic.len() > 249 || !topic.chars().all(legal) {
                return Err(format!(
                    "plugin_config.topics: {topic:?} is not a Kafka topic name (1 to 249 of ASCII letters, digits, '.', '_', '-')"
                ));
            }
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(format!("plugin_config.batch_size {} is not between 1 and {MAX_BATCH_SIZE}", self.batch_size));
        }
        if !(1..=10_000).contains(&self.fetch_wait_ms) {
            return Err(format!("plugin_config.fetch_wait_ms {} is not between 1 and 10000", self.fetch_wait_ms));
        }
        if self.start != "earliest" && self.start != "latest" {
            return Err(format!(
                "plugin_config.start {:?} is neither \"earliest\" (every message kept) nor \"latest\" (only messages produced from now on)",
                self.start
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
        let good = config(serde_json::json!({ "connection": "hub", "topics": ["orders"] })).unwrap();
        assert_eq!(
            (good.group.as_str(), good.batch_size, good.fetch_wait_ms, good.start.as_str()),
            ("ferry", 100, 100, "earliest")
        );
        for (json, named) in [
            (serde_json::json!({ "connection": "", "topics": ["t"] }), "plugin_config.connection is empty"),
            (serde_json::json!({ "connection": "hub", "topics": [] }), "plugin_config.topics is empty"),
            (serde_json::json!({ "connection": "hub", "topics": ["a b"] }), "plugin_config.topics: \"a b\""),
            (serde_json::json!({ "connection": "hub", "topics": ["t"], "group": "" }), "plugin_config.group is empty"),
            (
                serde_json::json!({ "connection": "hub", "topics": ["t"], "batch_size": 0 }),
                "plugin_config.batch_size 0",
            ),
            (
                serde_json::json!({ "connection": "hub", "topics": ["t"], "fetch_wait_ms": 0 }),
                "plugin_config.fetch_wait_ms 0",
            ),
            (
                serde_json::json!({ "connection": "hub", "topics": ["t"], "start": "first" }),
                "plugin_config.start \"first\"",
            ),
            (serde_json::json!({ "connection": "hub", "topic": "t", "topics": ["t"] }), "unknown field `topic`"),
        ] {
            let problem = config(json).unwrap_err();
            assert!(problem.contains(named), "{problem} should name {named}");
        }
    }
}
