//! Checks that serde cannot express: unique keys, names safe to use as file names,
//! values in range. Each problem names the connector and the key.

use std::collections::HashMap;

use super::{BackoffConfig, ByteSize, Config, Grants, Limits, SourceConfig};

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
    let mut tenants: HashMap<&str, usize> = HashMap::new();
    for (index, tenant) in config.tenants.iter().enumerate() {
        valid_key(&tenant.key).map_err(|p| format!("tenants[{index}]: key {:?} {p}", tenant.key))?;
        if let Some(first) = tenants.insert(&tenant.key, index) {
            return Err(format!("tenants[{index}]: key `{}` is already used by tenants[{first}]", tenant.key));
        }
        if tenant.iggy.is_some() && config.iggy.is_none() {
            return Err(format!("tenants[{index}] (key `{}`): [tenants.iggy] needs an [iggy] section", tenant.key));
        }
        if let (Some(iggy), Some(own)) = (&config.iggy, &tenant.iggy) {
            iggy.with_credentials_of(own)
                .credentials()
                .map_err(|p| format!("tenants[{index}] (key `{}`): [tenants.iggy]: {p}", tenant.key))?;
        }
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (index, source) in config.sources.iter().enumerate() {
        let at = |what: &str, problem: String| format!("sources[{index}] (key `{}`): {what}: {problem}", source.key);
        valid_key(&source.key).map_err(|p| format!("sources[{index}]: key {:?} {p}", source.key))?;
        if let Some(first) = seen.insert(&source.key, index) {
            return Err(at("key", format!("already used by sources[{first}]; keys must be unique")));
        }
        if let Some(tenant) = &source.tenant
            && !tenants.contains_key(tenant.as_str())
        {
            return Err(at("tenant", format!("no [[tenants]] entry has key `{tenant}`")));
        }
        validate_source(source).map_err(|(what, problem)| at(what, problem))?;
    }
    validate_tenant_totals(config)
}

/// Each tenant's connector count and total memory within its limits.
fn validate_tenant_totals(config: &Config) -> Result<(), String> {
    for tenant in &config.tenants {
        let members: Vec<_> =
            config.sources.iter().filter(|s| s.enabled && s.tenant.as_deref() == Some(&tenant.key)).collect();
        if let Some(max) = tenant.max_connectors
            && members.len() > max as usize
        {
            return Err(format!(
                "tenant `{}` has {} enabled connectors, more than its max_connectors ({max})",
                tenant.key,
                members.len()
            ));
        }
        if let Some(max) = tenant.max_memory {
            let total: u64 = members.iter().map(|s| s.limits.memory.bytes()).sum();
            if total > max.bytes() {
                return Err(format!(
                    "tenant `{}`: its connectors' limits.memory add up to {}, more than its max_memory ({max})",
                    tenant.key,
                    ByteSize(total)
                ));
            }
        }
    }
    Ok(())
}

fn validate_limits(limits: &Limits) -> Result<(), (&'static str, String)> {
    if limits.memory < ByteSize::mib(1) {
        return Err((
            "limits.memory",
            format!("{} is too small to run any component; give at least 1 MiB", limits.memory),
        ));
    }
    if limits.call_timeout.is_zero() {
        return Err(("limits.call_timeout", "must be greater than zero".into()));
    }
    let nonzero = [
        ("limits.instances", u64::from(limits.instances)),
        ("limits.tables", u64::from(limits.tables)),
        ("limits.memories", u64::from(limits.memories)),
        ("limits.max_messages_per_batch", u64::from(limits.max_messages_per_batch)),
        ("limits.max_batch_bytes", limits.max_batch_bytes.bytes()),
        ("limits.max_message_bytes", limits.max_message_bytes.bytes()),
        ("limits.max_headers_per_message", u64::from(limits.max_headers_per_message)),
        ("limits.max_header_bytes", limits.max_header_bytes.bytes()),
        ("limits.max_state_bytes", limits.max_state_bytes.bytes()),
        ("limits.log_lines_per_second", u64::from(limits.log_lines_per_second)),
        ("limits.log_burst", u64::from(limits.log_burst)),
    ];
    if let Some((key, _)) = nonzero.iter().find(|(_, value)| *value == 0) {
        return Err((key, "must be greater than zero".into()));
    }
    if limits.fuel == Some(0) {
        return Err(("limits.fuel", "must be greater than zero (leave it out for no metering)".into()));
    }
    Ok(())
}

fn validate_grants(grants: &Grants) -> Result<(), (&'static str, String)> {
    for name in &grants.env {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(("grants.env", format!("{name:?} is not an environment variable name")));
        }
    }
    for dir in &grants.dirs {
        if !dir.guest.starts_with('/') {
            return Err(("grants.dirs.guest", format!("{:?} must be an absolute path, like \"/data\"", dir.guest)));
        }
        match std::fs::metadata(&dir.host) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(("grants.dirs.host", format!("{} is not a directory", dir.host.display()))),
            Err(e) => return Err(("grants.dirs.host", format!("{}: {e}", dir.host.display()))),
        }
    }
    for entry in &grants.network {
        super::split_host_port(entry).map_err(|p| ("grants.network", p))?;
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
    validate_limits(&source.limits)?;
    validate_grants(&source.grants)?;
    if let Some(plugin_config) = &source.plugin_config
        && let Some(name) = source.secrets.keys().find(|name| plugin_config.contains_key(name.as_str()))
    {
        return Err(("secrets", format!("`{name}` is also a key of plugin_config; a secret must not overwrite it")));
    }
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
