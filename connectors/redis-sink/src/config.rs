//! The sink's `plugin_config`, checked: every mistake names its key.

use serde::Deserialize;

use ferry_guest::Error;

use crate::template::Template;

/// What is written for each message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// `XADD` to the stream `key`, once per message id within `dedupe_window_ms`.
    Stream { max_len: Option<u64>, dedupe_window_ms: u64 },
    /// `SET key payload`, with `ttl_ms`.
    Set { ttl_ms: Option<u64> },
    /// `HSET key field value ...` of the payload's JSON object, with `ttl_ms`.
    Hash { ttl_ms: Option<u64> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub connection: String,
    pub key: Template,
    pub mode: Mode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    connection: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    max_len: Option<u64>,
    #[serde(default)]
    dedupe_window: Option<String>,
    #[serde(default)]
    ttl: Option<String>,
}

impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(deserializer)?;
        Config::check(raw).map_err(serde::de::Error::custom)
    }
}

impl Config {
    fn check(raw: Raw) -> Result<Config, Error> {
        if raw.connection.is_empty() {
            return Err(Error::msg("plugin_config.connection is empty: name a server in grants.redis"));
        }
        let millis = |key: &str, value: &Option<String>| -> Result<Option<u64>, Error> {
            value
                .as_deref()
                .map(|text| {
                    let duration = humantime::parse_duration(text)
                        .map_err(|p| Error::msg(format!("plugin_config.{key} {text:?}: {p}")))?;
                    match duration.as_millis() {
                        0 => Err(Error::msg(format!("plugin_config.{key} {text:?}: must be at least 1ms"))),
                        ms => Ok(ms as u64),
                    }
                })
                .transpose()
        };
        let mode_name = raw.mode.as_deref().unwrap_or("stream");
        let not_for = |key: &str| Error::msg(format!("plugin_config.{key} is not for mode = {mode_name:?}"));
        let mode = match mode_name {
            "stream" => {
                if raw.ttl.is_some() {
                    return Err(not_for("ttl"));
                }
                if raw.max_len == Some(0) {
                    return Err(Error::msg("plugin_config.max_len is 0: give at least 1, or leave it out"));
                }
                let window = millis("dedupe_window", &raw.dedupe_window)?.unwrap_or(24 * 3600 * 1000);
                Mode::Stream { max_len: raw.max_len, dedupe_window_ms: window }
            }
            "set" | "hash" => {
                if raw.max_len.is_some() {
                    return Err(not_for("max_len"));
                }
                if raw.dedupe_window.is_some() {
                    return Err(not_for("dedupe_window"));
                }
                let ttl_ms = millis("ttl", &raw.ttl)?;
                if mode_name == "set" { Mode::Set { ttl_ms } } else { Mode::Hash { ttl_ms } }
            }
            other => {
                return Err(Error::msg(format!(
                    "plugin_config.mode {other:?} is none of \"stream\", \"set\", \"hash\""
                )));
            }
        };
        let default_key =
            if matches!(mode, Mode::Stream { .. }) { "{stream}:{topic}" } else { "{stream}:{topic}:{id}" };
        let key = Template::parse(raw.key.as_deref().unwrap_or(default_key))
            .map_err(|p| Error::msg(format!("plugin_config.key: {p}")))?;
        Ok(Config { connection: raw.connection, key, mode })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Config, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_a_stream_per_topic_deduplicated_for_a_day() {
        let config = parse(r#"{"connection": "cache"}"#).unwrap();
        assert_eq!(config.mode, Mode::Stream { max_len: None, dedupe_window_ms: 86_400_000 });
        assert_eq!(config.key, Template::parse("{stream}:{topic}").unwrap());
        let set = parse(r#"{"connection": "cache", "mode": "set", "ttl": "90s"}"#).unwrap();
        assert_eq!(set.mode, Mode::Set { ttl_ms: Some(90_000) });
        assert_eq!(set.key, Template::parse("{stream}:{topic}:{id}").unwrap());
    }

    #[test]
    fn mistakes_name_their_key() {
        for (json, words) in [
            (r#"{}"#, "connection"),
            (r#"{"connection": ""}"#, "plugin_config.connection is empty"),
            (r#"{"connection": "c", "mode": "list"}"#, "plugin_config.mode \"list\""),
            (r#"{"connection": "c", "ttl": "1s"}"#, "plugin_config.ttl is not for mode = \"stream\""),
            (r#"{"connection": "c", "mode": "set", "max_len": 5}"#, "plugin_config.max_len is not for"),
            (r#"{"connection": "c", "max_len": 0}"#, "plugin_config.max_len is 0"),
            (r#"{"connection": "c", "dedupe_window": "soon"}"#, "plugin_config.dedupe_window \"soon\""),
            (r#"{"connection": "c", "key": "{nope}"}"#, "plugin_config.key"),
            (r#"{"connection": "c", "colour": 1}"#, "unknown field `colour`"),
        ] {
            let error = parse(json).unwrap_err();
            assert!(error.contains(words), "{json}: {error}");
        }
    }
}
