//! The source's `plugin_config`, checked: every mistake names its key.

use serde::Deserialize;

/// The most entries one read (one batch) may take.
pub const MAX_BATCH_SIZE: u32 = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The `[redis.NAME]` granted to the connector.
    pub connection: String,
    /// The stream's key.
    pub stream: String,
    #[serde(default = "default_group")]
    pub group: String,
    #[serde(default = "default_consumer")]
    pub consumer: String,
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    /// Where a group made by the connector starts: `0` (every entry) or `$` (only new ones).
    #[serde(default = "default_start")]
    pub start: String,
    #[serde(default = "default_payload_field")]
    pub payload_field: String,
}

fn default_group() -> String {
    "ferry".into()
}

fn default_consumer() -> String {
    "ferry".into()
}

fn default_batch_size() -> u32 {
    100
}

fn default_start() -> String {
    "0".into()
}

fn default_payload_field() -> String {
    "payload".into()
}

impl Config {
    pub fn check(&self) -> Result<(), String> {
        for (key, value) in [
            ("connection", &self.connection),
            ("stream", &self.stream),
            ("group", &self.group),
            ("consumer", &self.consumer),
            ("payload_field", &self.payload_field),
        ] {
            if value.is_empty() {
                return Err(format!("plugin_config.{key} is empty"));
            }
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(format!("plugin_config.batch_size {} is not between 1 and {MAX_BATCH_SIZE}", self.batch_size));
        }
        if self.start != "0" && self.start != "$" {
            return Err(format!(
                "plugin_config.start {:?} is neither \"0\" (every entry) nor \"$\" (only new ones)",
                self.start
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Config, String> {
        let config: Config = serde_json::from_str(json).map_err(|e| e.to_string())?;
        config.check()?;
        Ok(config)
    }

    #[test]
    fn defaults_and_mistakes() {
        let config = parse(r#"{"connection": "cache", "stream": "events"}"#).unwrap();
        assert_eq!((config.group.as_str(), config.batch_size, config.start.as_str()), ("ferry", 100, "0"));
        for (json, words) in [
            (r#"{"connection": "cache"}"#, "stream"),
            (r#"{"connection": "", "stream": "s"}"#, "plugin_config.connection is empty"),
            (r#"{"connection": "c", "stream": "s", "batch_size": 0}"#, "plugin_config.batch_size 0"),
            (r#"{"connection": "c", "stream": "s", "start": "1-0"}"#, "plugin_config.start \"1-0\""),
            (r#"{"connection": "c", "stream": "s", "block": 1}"#, "unknown field `block`"),
        ] {
            let error = parse(json).unwrap_err();
            assert!(error.contains(words), "{json}: {error}");
        }
    }
}
