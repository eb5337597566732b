//! Durations in the config are written the way people say them: `"250ms"`, `"5s"`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "invalid duration {text:?} ({e}): write a number and a unit, e.g. \"250ms\", \"5s\", \"1m\""
        ))
    })
}

/// `Option<Duration>` written the same way.
pub mod optional {
    use std::time::Duration;

    use serde::Deserializer;

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
        super::deserialize(deserializer).map(Some)
    }
}
