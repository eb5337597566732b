//! Durations in the config are written the way people say them: `"250ms"`, `"5s"`.
//!
//! Parsing never overflows (humantime refuses what a `Duration` cannot hold), but a
//! `Duration` can still be absurd; [`super::bounds`] decides what each key accepts.

use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    deserializer.deserialize_any(DurationVisitor)
}

/// How a duration is shown in messages: the way it would be written in the file.
pub fn show(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// A duration is a string with a unit; a bare number is an error that says so,
/// rather than serde's "invalid type".
struct DurationVisitor;

const HOW: &str = "write a number and a unit, e.g. \"250ms\", \"5s\", \"1m\"";

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a duration: {HOW}")
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Duration, E> {
        Err(E::custom(format!("invalid duration {number}: a duration needs a unit; {HOW}")))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Duration, E> {
        Err(E::custom(format!("invalid duration {number}: a duration needs a unit; {HOW}")))
    }

    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Duration, E> {
        Err(E::custom(format!("invalid duration {number}: a duration needs a unit; {HOW}")))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
        if text.trim_start().starts_with('-') {
            return Err(E::custom(format!("invalid duration {text:?}: a duration cannot be negative")));
        }
        humantime::parse_duration(text).map_err(|e| E::custom(format!("invalid duration {text:?} ({e}): {HOW}")))
    }
}

/// `Option<Duration>` written the same way.
pub mod optional {
    use std::time::Duration;

    use serde::Deserializer;

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
        super::deserialize(deserializer).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[derive(Debug, serde::Deserialize)]
    struct Holder {
        #[serde(with = "super")]
        after: Duration,
    }

    fn read(value: &str) -> Result<Duration, String> {
        toml::from_str::<Holder>(&format!("after = {value}")).map(|h| h.after).map_err(|e| e.to_string())
    }

    #[test]
    fn durations_need_a_unit_and_cannot_be_negative() {
        assert_eq!(read("\"250ms\""), Ok(Duration::from_millis(250)));
        assert_eq!(read("\"10000000000000000000s\""), Ok(Duration::from_secs(10_000_000_000_000_000_000)));
        let bare = read("5").unwrap_err();
        assert!(bare.contains("invalid duration 5: a duration needs a unit"), "{bare}");
        let negative = read("\"-5s\"").unwrap_err();
        assert!(negative.contains("a duration cannot be negative"), "{negative}");
        let overflow = read("\"100000000000000000000s\"").unwrap_err();
        assert!(overflow.contains("invalid duration \"100000000000000000000s\""), "{overflow}");
        assert!(read("true").unwrap_err().contains("a duration: write a number and a unit"));
    }
}
