//! Checks that serde cannot express: unique keys, names safe to use as file names,
//! values in range ([`ferry_contract::settings`]), paths that are what they should be. Each
//! problem names the connector and the key.

use std::collections::HashMap;

use ferry_contract::Role;
use ferry_contract::files;
use ferry_contract::settings::{self, ByteSize, duration::show, valid_key, valid_name};

use super::env::variable_form;
use super::{Allocator, BackoffConfig, Config, ConnectorConfig, Limits, RuntimeConfig, SinkConfig, SourceConfig};

/// The most partitions an Iggy topic may have (the server's `MAX_PARTITIONS_COUNT`;
/// `ferry-iggy` checks that the two agree, so that this crate need not build Iggy's).
pub const MAX_PARTITIONS_COUNT: u32 = 1000;

pub fn validate(config: &Config) -> Result<(), String> {
    validate_runtime(&config.runtime)?;
    validate_directories(config)?;
    config.sections.validate()?;
    for (index, tenant) in config.tenants.iter().enumerate() {
        valid_key(&tenant.key).map_err(|p| format!("tenants[{index}]: key {:?} {p}", tenant.key))?;
    }
    distinct_keys(config.tenants.iter().enumerate().map(|(i, t)| (format!("tenants[{i}]"), t.key.as_str())))?;
    for (index, tenant) in config.tenants.iter().enumerate() {
        let at = |what: &str, problem: String| format!("tenants[{index}] (key `{}`): {what}: {problem}", tenant.key);
        if let Some(max) = tenant.max_memory {
            settings::TENANT_MEMORY.check(max).map_err(|p| at("max_memory", p))?;
        }
        if tenant.iggy.is_some() && config.iggy.is_none() {
            return Err(format!("tenants[{index}] (key `{}`): [tenants.iggy] needs an [iggy] section", tenant.key));
        }
        if let (Some(iggy), Some(own)) = (&config.iggy, &tenant.iggy) {
            iggy.with_credentials_of(own).credentials().map_err(|p| at("[tenants.iggy]", p))?;
        }
    }
    // Sources and sinks share one namespace of keys: state files, status and log
    // lines are named by them.
    let places: Vec<(String, &dyn ConnectorConfig)> = config.connectors_with_places().collect();
    for (place, connector) in &places {
        valid_key(connector.key()).map_err(|p| format!("{place}: key {:?} {p}", connector.key()))?;
    }
    distinct_keys(places.iter().map(|(place, c)| (place.clone(), c.key())))?;
    // Iggy's keys are one namespace per role: its routes of the API find one
    // connector of the role by one.
    for role in [Role::Source, Role::Sink] {
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for (place, connector) in places.iter().filter(|(_, c)| c.role() == role) {
            let mut names = vec![connector.iggy_key()];
            if connector.key() != connector.iggy_key() {
                names.push(connector.key());
            }
            for name in names {
                if let Some(first) = seen.insert(name, place) {
                    return Err(format!(
                        "{place} (key `{}`): iggy_key: `{name}` names {first} too (its key or iggy_key); Iggy's \
                         routes of the API would not know which",
                        connector.key(),
                    ));
                }
            }
        }
    }
    for (place, connector) in &places {
        let at = |what: &str, problem: String| format!("{place} (key `{}`): {what}: {problem}", connector.key());
        if let Some(tenant) = connector.tenant()
            && config.tenant(tenant).is_none()
        {
            return Err(at("tenant", format!("no [[tenants]] entry has key `{tenant}`")));
        }
        validate_connector(*connector).map_err(|(what, problem)| at(what, problem))?;
        connector.grants().validate(&config.sections).map_err(|(what, problem)| at(what, problem))?;
    }
    for (index, source) in config.sources.iter().enumerate() {
        let at = |what: &str, problem: String| format!("sources[{index}] (key `{}`): {what}: {problem}", source.key);
        validate_source(source).map_err(|(what, problem)| at(what, problem))?;
    }
    for (index, sink) in config.sinks.iter().enumerate() {
        let at = |what: &str, problem: String| format!("sinks[{index}] (key `{}`): {what}: {problem}", sink.key);
        validate_sink(sink).map_err(|(what, problem)| at(what, problem))?;
    }
    validate_tenant_totals(config)?;
    super::host_paths::validate(config)?;
    validate_pool(config)
}

/// Keys that must name one thing each: connector keys (one namespace for every kind
/// of connector) or tenant keys, given as `(where, key)` like `("sources[0]", "a-b")`.
/// Besides exact duplicates this refuses keys that differ only in case or in `-`
/// against `_` (`a-b` and `a_b`, `Orders` and `orders`): an environment override
/// names both the same way (`FERRY__SOURCES__A_B__...`), so a secret meant for one
/// could be handed to the other, and a case-insensitive disk gives both one state file.
pub fn distinct_keys<'a>(entries: impl IntoIterator<Item = (String, &'a str)>) -> Result<(), String> {
    let mut seen: HashMap<String, (String, &str)> = HashMap::new();
    for (place, key) in entries {
        let form = variable_form(key);
        if let Some((first, other)) = seen.get(&form) {
            let problem = if *other == key {
                format!("already used by {first}; keys must be unique")
            } else {
                format!(
                    "`{key}` and `{other}` ({first}) are one name to an environment override (…__{form}__…) and to \
                     a case-insensitive disk; keys must differ by more than case and `-`/`_`"
                )
            };
            return Err(format!("{place} (key `{key}`): key: {problem}"));
        }
        seen.insert(form, (place, key));
    }
    Ok(())
}

/// `[runtime]`: durations and sizes within their bounds.
fn validate_runtime(runtime: &RuntimeConfig) -> Result<(), String> {
    let at = |(key, problem): (&str, String)| format!("[runtime] {key}: {problem}");
    settings::check_all(&[
        ("shutdown_grace_period", runtime.shutdown_grace_period, settings::GRACE),
        ("progress_interval", runtime.progress_interval, settings::PROGRESS),
        ("compile_timeout", runtime.compile_timeout, settings::COMPILE_TIMEOUT),
    ])
    .map_err(at)?;
    settings::check_all(&[
        ("max_component_bytes", runtime.max_component_bytes, settings::COMPONENT_BYTES),
        ("compile_memory", runtime.compile_memory, settings::COMPILE_MEMORY),
    ])
    .map_err(at)
}

/// The state and log directories are directories, or absent (ferry creates them):
/// `/dev/null` is neither.
fn validate_directories(config: &Config) -> Result<(), String> {
    for (path, key) in [(&config.state.path, "[state] path"), (&config.local_log.path, "[local_log] path")] {
        files::directory_or_absent(path, key).map_err(|e| format!("{key}: {}: {}", e.path.display(), e.problem))?;
    }
    Ok(())
}

/// The pooling allocator reserves its slots up front: refuse a reservation no machine
/// has the address space for, naming what it is made of.
fn validate_pool(config: &Config) -> Result<(), String> {
    if config.runtime.allocator != Allocator::Pooling {
        return Ok(());
    }
    let (slots, memory) = (config.pool_slots(), config.largest_memory());
    let reservation = u64::from(slots).checked_mul(memory.bytes()).map(ByteSize);
    match reservation {
        Some(total) if total <= settings::MAX_POOL_RESERVATION => Ok(()),
        _ => Err(format!(
            "[runtime] allocator: \"pooling\" would reserve {slots} slots (2 per enabled connector + 4) of {memory} \
             (the largest limits.memory), more than the maximum, {}; lower limits.memory or use \"on-demand\"",
            settings::MAX_POOL_RESERVATION
        )),
    }
}

/// Each tenant's connector count and total memory within its limits.
fn validate_tenant_totals(config: &Config) -> Result<(), String> {
    for tenant in &config.tenants {
        let members: Vec<_> =
            config.connectors().filter(|c| c.enabled() && c.tenant() == Some(tenant.key.as_str())).collect();
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
            let total = members.iter().fold(0u64, |sum, c| sum.saturating_add(c.limits().memory.bytes()));
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
    settings::check_all(&[
        ("limits.memory", limits.memory, settings::MEMORY),
        ("limits.max_batch_bytes", limits.max_batch_bytes, settings::BATCH_BYTES),
        ("limits.max_message_bytes", limits.max_message_bytes, settings::BATCH_BYTES),
        ("limits.max_header_bytes", limits.max_header_bytes, settings::BATCH_BYTES),
        ("limits.max_state_bytes", limits.max_state_bytes, settings::STATE_BYTES),
    ])?;
    let nonzero = [
        ("limits.instances", u64::from(limits.instances)),
        ("limits.tables", u64::from(limits.tables)),
        ("limits.memories", u64::from(limits.memories)),
        ("limits.max_messages_per_batch", u64::from(limits.max_messages_per_batch)),
        ("limits.max_headers_per_message", u64::from(limits.max_headers_per_message)),
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
            if create.partitions > MAX_PARTITIONS_COUNT {
                return Err((
                    "streams.create.partitions",
                    format!("{} is more than an Iggy topic may have, {MAX_PARTITIONS_COUNT}", create.partitions),
                ));
            }
            if create.messages_required_to_save == Some(0) {
                return Err(("streams.create.messages_required_to_save", "must be at least 1".into()));
            }
            if let Some(retention) = create.retention {
                settings::RETENTION.check(retention).map_err(|p| ("streams.create.retention", p))?;
            }
        }
        if let super::Partitioning::Header(key) = &stream.partitioning
            && key.is_empty()
        {
            return Err(("streams.partitioning.header", "names no header".into()));
        }
        stream.schema().map_err(|(key, problem)| (schema_key(key), problem))?;
        if source.streams[..i].iter().any(|other| other.schema() != stream.schema()) {
            return Err((
                "streams.schema",
                format!(
                    "{}/{} is given a schema unlike the entries before it; a source's records are encoded once, \
                     for every stream it delivers to",
                    stream.stream, stream.topic
                ),
            ));
        }
        let same = |other: &super::StreamConfig| other.stream == stream.stream && other.topic == stream.topic;
        if source.streams[..i].iter().any(same) {
            return Err(("streams", format!("{}/{} is listed twice", stream.stream, stream.topic)));
        }
    }
    check_backoff(&source.nack_backoff).map_err(|p| ("nack_backoff", p))?;
    Ok(())
}

/// A stream's schema key, as an error names it.
fn schema_key(key: &str) -> &'static str {
    match key {
        "schema" => "streams.schema",
        _ => "streams.avro_schema_json",
    }
}

fn validate_sink(sink: &SinkConfig) -> Result<(), (&'static str, String)> {
    if sink.enabled && sink.topics().next().is_none() {
        return Err(("streams", "at least one [[sinks.streams]] entry with topics is required".into()));
    }
    let mut seen = Vec::new();
    for (stream, topic) in sink.topics() {
        valid_name(stream).map_err(|p| ("streams.stream", format!("{stream:?} {p}")))?;
        valid_name(topic).map_err(|p| ("streams.topics", format!("{topic:?} {p}")))?;
        if seen.contains(&(stream, topic)) {
            return Err(("streams", format!("{stream}/{topic} is listed twice")));
        }
        seen.push((stream, topic));
    }
    for stream in &sink.streams {
        stream.schema().map_err(|(key, problem)| (schema_key(key), problem))?;
    }
    if sink.batch_length == 0 {
        return Err(("batch_length", "must be at least 1".into()));
    }
    if sink.batch_length > sink.limits.max_messages_per_batch {
        return Err((
            "batch_length",
            format!(
                "{} is more than limits.max_messages_per_batch ({}), the most a batch may hold",
                sink.batch_length, sink.limits.max_messages_per_batch
            ),
        ));
    }
    if let Some(group) = &sink.consumer_group {
        valid_name(group).map_err(|p| ("consumer_group", format!("{group:?} {p}")))?;
    }
    if let Some(dead) = &sink.dead_letters {
        if dead.schema.is_some() || dead.avro_schema_json.is_some() || dead.avro_schema_path.is_some() {
            return Err((
                "dead_letters.schema",
                "is not taken: a dead letter is the message as it was stored, with headers saying why".into(),
            ));
        }
        valid_name(&dead.stream).map_err(|p| ("dead_letters.stream", format!("{:?} {p}", dead.stream)))?;
        valid_name(&dead.topic).map_err(|p| ("dead_letters.topic", format!("{:?} {p}", dead.topic)))?;
        if seen.contains(&(dead.stream.as_str(), dead.topic.as_str())) {
            return Err((
                "dead_letters",
                format!(
                    "{}/{} is also a topic the sink reads: its dead letters would come back to it",
                    dead.stream, dead.topic
                ),
            ));
        }
    }
    check_backoff(&sink.retry_backoff).map_err(|p| ("retry_backoff", p))?;
    Ok(())
}

/// What every connector has, whatever its role.
fn validate_connector(connector: &dyn ConnectorConfig) -> Result<(), (&'static str, String)> {
    settings::check_all(&[
        ("poll_interval", connector.poll_interval(), settings::TIMER),
        ("delivery_timeout", connector.delivery_timeout(), settings::TIMER),
        ("limits.call_timeout", connector.limits().call_timeout, settings::CALL_TIMEOUT),
    ])?;
    if connector.max_consecutive_nacks() == 0 {
        return Err(("max_consecutive_nacks", "must be at least 1".into()));
    }
    check_backoff(&connector.restart_backoff()).map_err(|p| ("restart_backoff", p))?;
    validate_limits(connector.limits())?;
    if let Some(plugin_config) = connector.plugin_config()
        && let Some(name) = connector.secrets().keys().find(|name| set_in(plugin_config, name))
    {
        return Err(("secrets", format!("`{name}` is also a key of plugin_config; a secret must not overwrite it")));
    }
    if let Some(name) = connector.secrets().keys().find(|name| name.split('.').any(str::is_empty)) {
        return Err(("secrets", format!("`{name}`: a secret names a key, or `table.key`, with no empty part")));
    }
    Ok(())
}

/// Whether `plugin_config` has a value at the dotted path `name` (`headers.Authorization`).
fn set_in(plugin_config: &toml::Table, name: &str) -> bool {
    let mut parts = name.split('.');
    let Some(first) = parts.next() else { return false };
    let mut value = plugin_config.get(first);
    for part in parts {
        value = value.and_then(|v| v.as_table()).and_then(|table| table.get(part));
    }
    value.is_some()
}

/// `initial` and `max` within [`settings::TIMER`], `initial` not above `max`.
pub(super) fn check_backoff(backoff: &BackoffConfig) -> Result<(), String> {
    settings::check_all(&[("initial", backoff.initial, settings::TIMER), ("max", backoff.max, settings::TIMER)])
        .map_err(|(key, problem)| format!("{key}: {problem}"))?;
    if backoff.initial > backoff.max {
        return Err(format!("initial ({}) is greater than max ({})", show(backoff.initial), show(backoff.max)));
    }
    Ok(())
}
