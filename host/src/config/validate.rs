//! Checks that serde cannot express: unique keys, names safe to use as file names,
//! values in range. Each problem names the connector and the key.

use std::collections::HashMap;

use super::{BackoffConfig, Config, SourceConfig};

/// Connector keys name files and log spans: keep them to a safe alphabet.
pub fn valid_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 64 {
        return Err("must be 1 to 64 characters".into());
    }
    if let Some(c) = key.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
        return Err(format!("contains {c:?}; use letters, digits, `-` and `_`"));
    }
    Ok(())
}

/// Stream and topic names become directory and file names in the local log.
pub fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 255 {
        return Err("must be 1 to 255 characters".into());
    }
    if name.starts_with('.') {
        return Err("must not start with `.`".into());
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        return Err(format!("contains {c:?}; use letters, digits, `-`, `_` and `.`"));
    }
    Ok(())
}

pub fn validate(config: &Config) -> Result<(), String> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (index, source) in config.sources.iter().enumerate() {
        let at = |what: &str, problem: String| format!("sources[{index}] (key `{}`): {what}: {problem}", source.key);
        valid_key(&source.key).map_err(|p| format!("sources[{index}]: key {:?} {p}", source.key))?;
        if let Some(first) = seen.insert(&source.key, index) {
            return Err(at("key", format!("already used by sources[{first}]; keys must be unique")));
        }
        validate_source(source).map_err(|(what, problem)| at(what, problem))?;
    }
    Ok(())
}

fn validate_source(source: &SourceConfig) -> Result<(), (&'static str, String)> {
    if source.enabled && source.streams.is_empty() {
        return Err(("streams", "at least one [[sources.streams]] entry is required".into()));
    }
    for stream in &source.streams {
        valid_name(&stream.stream).map_err(|p| ("streams.stream", format!("{:?} {p}", stream.stream)))?;
        valid_name(&stream.topic).map_err(|p| ("streams.topic", format!("{:?} {p}", stream.topic)))?;
    }
    for (i, stream) in source.streams.iter().enumerate() {
        if let Some(create) = &stream.create {
            if create.partitions == 0 {
                return Err(("streams.create.partitions", "must be at least 1".into()));
            }
            if create.messages_required_to_save == Some(0) {
                return Err(("streams.create.messages_required_to_save", "must be at least 1".into()));
            }
        }
        if let super::Partitioning::Header(key) = &stream.partitioning
            && key.is_empty()
        {
            return Err(("streams.partitioning.header", "names no header".into()));
        }
        let same = |other: &super::StreamConfig| other.stream == stream.stream && other.topic == stream.topic;
        if source.streams[..i].iter().any(same) {
            return Err(("streams", format!("{}/{} is listed twice", stream.stream, stream.topic)));
        }
    }
    if source.poll_interval.is_zero() {
        return Err(("poll_interval", "must be greater than zero".into()));
    }
    if source.delivery_timeout.is_zero() {
        return Err(("delivery_timeout", "must be greater than zero".into()));
    }
    if source.max_consecutive_nacks == 0 {
        return Err(("max_consecutive_nacks", "must be at least 1".into()));
    }
    check_backoff(&source.nack_backoff).map_err(|p| ("nack_backoff", p))?;
    check_backoff(&source.restart_backoff).map_err(|p| ("restart_backoff", p))?;
    Ok(())
}

pub(super) fn check_backoff(backoff: &BackoffConfig) -> Result<(), String> {
    if backoff.initial.is_zero() {
        return Err("initial must be greater than zero".into());
    }
    if backoff.initial > backoff.max {
        return Err(format!("initial ({:?}) is greater than max ({:?})", backoff.initial, backoff.max));
    }
    Ok(())
}
