//! The runtime's own file, section by section, as Ferry's sections: `[iggy]` (Iggy's
//! defaults when absent: `localhost:8090`, `iggy`/`iggy`; a `token` of `file:PATH`
//! read from that file), `[http]` (on at `127.0.0.1:8081` unless disabled, as in
//! Iggy), `[state]` (`local_state` by default), `[connectors]` (the local provider's
//! `config_dir`, or the HTTP provider's `base_url`), `[telemetry]` and `[logging]` where they ask for nothing ferry
//! lacks. Every other top-level section is Ferry's own and is passed on as it is.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ferry_contract::Role;

use super::components::Components;
use super::connector_file;
use super::env::IggyEnv;
use super::http_provider::HttpProvider;
use super::postgres;
use super::{Keys, not_yet};

/// The Ferry config `document`, the runtime file `file`, means.
pub(super) fn translate(file: &Path, mut document: toml::Table, env: &mut IggyEnv) -> Result<toml::Table, String> {
    env.apply_runtime(&mut document)?;
    let base = base_dir(file);
    let mut ferry = toml::Table::new();
    let (provider, components) = connectors_section(file, &base, &mut document)?;

    ferry.insert("iggy".into(), iggy(file, take_table(file, &mut document, "iggy")?.unwrap_or_default())?.into());
    if let Some(http) = http(file, take_table(file, &mut document, "http")?.unwrap_or_default())? {
        ferry.insert("http".into(), http.into());
    }
    let state = state(file, take_table(file, &mut document, "state")?.unwrap_or_default())?;
    ferry.insert("state".into(), state.into());
    let log_format = telemetry_and_logging(file, &mut document)?;
    // Ferry's own sections, as they are: `Config` refuses one it does not know.
    ferry.extend(document);
    if let Some(format) = log_format {
        let runtime = ferry.entry("runtime").or_insert_with(|| toml::Table::new().into());
        let runtime = runtime.as_table_mut().ok_or_else(|| format!("{}: `runtime` must be a table", file.display()))?;
        runtime.insert("log_format".into(), format.into());
    }

    let connectors = match provider {
        Provider::Local(config_dir) => connector_file::active(&connector_dir(&base, &config_dir)?, env)?,
        Provider::Http(http) => connector_file::fetched(http.fetch_active(&base)?, env)?,
    };
    let source_keys: BTreeSet<String> = connectors
        .iter()
        .filter(|c| c.role == Role::Source)
        .filter_map(|c| c.entry.get("key").and_then(toml::Value::as_str).map(str::to_string))
        .collect();
    for connector in connectors {
        let role = connector.role.noun();
        let mut entry = connector.entry;
        // Iggy's keys are one namespace per role, ferry's one for all (its state,
        // status, logs and metrics are by key): a sink sharing its key with a source
        // is `KEY-sink` to ferry, and still KEY to Iggy's routes of the API.
        let key = entry.get("key").and_then(toml::Value::as_str).unwrap_or_default().to_string();
        if connector.role == Role::Sink && source_keys.contains(&key) {
            entry.insert("key".into(), format!("{key}-sink").into());
            entry.insert("iggy_key".into(), key.into());
        }
        let component = components.find(&connector.plugin_path, connector.enabled);
        let component = component.map_err(|problem| format!("{}: path: {problem}", connector.origin))?;
        let name = component.file_stem().and_then(|stem| stem.to_str()).unwrap_or_default().replace('-', "_");
        postgres::serve_connection_string(&connector.origin, &name, connector.role, &mut entry, &mut ferry)?;
        entry.insert("path".into(), component.display().to_string().into());
        let list = ferry.entry(format!("{role}s")).or_insert_with(|| toml::Value::Array(Vec::new()));
        match list {
            toml::Value::Array(list) => list.push(entry.into()),
            _ => return Err(format!("{}: `{role}s` must be an array of tables", file.display())),
        }
    }
    Ok(ferry)
}

/// The directory relative paths of the runtime file `file` are resolved against.
pub(super) fn base_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `[connectors]` of `document` (taken out of it): where the connectors' configs
/// come from, and where their components are.
pub(super) fn connectors_section(
    file: &Path,
    base: &Path,
    document: &mut toml::Table,
) -> Result<(Provider, Components), String> {
    let connectors = take_table(file, document, "connectors")?.unwrap_or_default();
    let mut keys = Keys::new(file.display(), "[connectors]", connectors);
    let config_type = keys.string("config_type")?;
    let components = Components::new(base, keys.string("components_dir")?.as_deref());
    let provider = match config_type.as_deref().unwrap_or("local") {
        "local" => {
            let config_dir = keys.string("config_dir")?.filter(|dir| !dir.is_empty());
            let config_dir =
                config_dir.ok_or_else(|| keys.error("config_dir", "must name the directory of the connector files"))?;
            keys.done("config_type, config_dir, and ferry's components_dir")?;
            Provider::Local(config_dir)
        }
        "http" => Provider::Http(HttpProvider::new(keys.rest())?),
        other => return Err(keys.error("config_type", format!("{other:?} is neither \"local\" nor \"http\""))),
    };
    Ok((provider, components))
}

/// Where the connectors' configs come from: Iggy's two providers.
pub(super) enum Provider {
    /// The files of `config_dir`.
    Local(String),
    /// A config server's answer.
    Http(HttpProvider),
}

/// `config_dir`, relative to the runtime file's directory (ferry's rule for every
/// path), or else to the working directory (Iggy's).
pub(super) fn connector_dir(base: &Path, config_dir: &str) -> Result<PathBuf, String> {
    let written = Path::new(config_dir);
    let candidates = if written.is_absolute() {
        vec![written.to_path_buf()]
    } else {
        vec![base.join(written), written.to_path_buf()]
    };
    candidates.iter().find(|dir| dir.is_dir()).cloned().ok_or_else(|| {
        let tried: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
        format!("[connectors] config_dir {config_dir:?}: no such directory (looked at {})", tried.join(" and "))
    })
}

fn take_table(file: &Path, document: &mut toml::Table, name: &str) -> Result<Option<toml::Table>, String> {
    match document.remove(name) {
        None => Ok(None),
        Some(toml::Value::Table(table)) => Ok(Some(table)),
        Some(other) => Err(format!("{}: `{name}` must be a table, found {}", file.display(), other.type_str())),
    }
}

/// `[iggy]`, with Iggy's defaults, as Ferry's `[iggy]` (whose other keys may be
/// added: `transport`, `token_env`, `connect_timeout`, ...).
fn iggy(file: &Path, table: toml::Table) -> Result<toml::Table, String> {
    let mut keys = Keys::new(file.display(), "[iggy]", table);
    let address = keys.string("address")?.unwrap_or_else(|| "localhost:8090".into());
    let token = keys.string("token")?.filter(|token| !token.is_empty());
    let username = keys.string("username")?;
    let password = keys.take("password");
    let tls = keys.table("tls")?;
    let mut iggy = keys.rest();
    iggy.insert("address".into(), address.into());
    match token {
        // A token is used instead of the username and password.
        Some(token) => match token.strip_prefix("file:") {
            Some(path) => iggy.insert("token_file".into(), expand_home(path).into()),
            None => iggy.insert("token".into(), token.into()),
        },
        None => {
            iggy.insert("username".into(), username.unwrap_or_else(|| "iggy".into()).into());
            iggy.insert("password".into(), password.unwrap_or_else(|| "iggy".into()));
            None
        }
    };
    if let Some(tls) = tls {
        let mut keys = Keys::new(file.display(), "[iggy.tls]", tls);
        if keys.bool("enabled")?.unwrap_or(false) {
            let mut tls = toml::Table::new();
            tls.insert("enabled".into(), true.into());
            let ca_file = keys.string("ca_file")?;
            tls.insert("ca_file".into(), keys.required("ca_file", ca_file)?.into());
            if let Some(domain) = keys.string("domain")?.filter(|d| !d.is_empty()) {
                tls.insert("domain".into(), domain.into());
            }
            tls.extend(keys.rest());
            iggy.insert("tls".into(), tls.into());
        }
    }
    Ok(iggy)
}

/// `~/...` as Iggy reads a token file's path.
fn expand_home(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => path.to_string(),
    }
}

/// `[http]` as Ferry's (none when disabled). Iggy serves its API unless told not to.
fn http(file: &Path, table: toml::Table) -> Result<Option<toml::Table>, String> {
    let mut keys = Keys::new(file.display(), "[http]", table);
    if !keys.bool("enabled")?.unwrap_or(true) {
        return Ok(None);
    }
    let mut http = toml::Table::new();
    let address = keys.string("address")?.unwrap_or_else(|| crate::http::DEFAULT_ADDRESS.into());
    http.insert("address".into(), address.into());
    match keys.take("api_key") {
        None => {}
        Some(toml::Value::String(key)) if key.is_empty() => {}
        Some(toml::Value::String(_)) => {
            return Err(keys.error(
                "api_key",
                "ferry never reads a secret written in the config: write api_key = { env = \"NAME\" } or \
                 { file = \"PATH\" } (this file may use either)",
            ));
        }
        Some(source) => {
            http.insert("api_key".into(), source);
        }
    }
    // Ferry's `[http.cors]` has Iggy's keys.
    if let Some(cors) = keys.table("cors")? {
        http.insert("cors".into(), cors.into());
    }
    if let Some(metrics) = keys.table("metrics")? {
        let mut metrics = Keys::new(file.display(), "[http.metrics]", metrics);
        // Ferry serves its metrics at /metrics whether or not they are asked for.
        metrics.bool("enabled")?;
        if let Some(endpoint) = metrics.string("endpoint")?.filter(|e| e != "/metrics") {
            return Err(not_yet(
                metrics.error("endpoint", format!("{endpoint:?}")),
                "metrics elsewhere than /metrics",
                "use endpoint = \"/metrics\"",
            ));
        }
        metrics.done("enabled, endpoint")?;
    }
    if let Some(tls) = keys.table("tls")? {
        let mut keys = Keys::new(file.display(), "[http.tls]", tls);
        if keys.bool("enabled")?.unwrap_or(false) {
            let (cert_file, key_file) = (keys.string("cert_file")?, keys.string("key_file")?);
            let mut tls = toml::Table::new();
            tls.insert("cert_file".into(), keys.required("cert_file", cert_file)?.into());
            tls.insert("key_file".into(), keys.required("key_file", key_file)?.into());
            http.insert("tls".into(), tls.into());
        }
    }
    keys.done("enabled, address, api_key, cors, metrics, tls")?;
    Ok(Some(http))
}

/// `[state]` as Ferry's: `path` (`local_state` by default) and ferry's own keys;
/// Iggy's `storage = "file"` is what ferry does, `"http"` (connector state kept by an
/// HTTP service) it does not.
fn state(file: &Path, table: toml::Table) -> Result<toml::Table, String> {
    let mut keys = Keys::new(file.display(), "[state]", table);
    match keys.string("storage")?.map(|s| s.to_ascii_lowercase()).as_deref() {
        None | Some("file") => {}
        Some("http") => {
            return Err(not_yet(
                keys.error("storage", "\"http\""),
                "connector state kept by an HTTP service",
                "use storage = \"file\" (ferry keeps each connector's committed state in its state directory)",
            ));
        }
        Some(other) => return Err(keys.error("storage", format!("{other:?} is neither \"file\" nor \"http\""))),
    }
    // Iggy's settings of that service, which means nothing without it.
    if let Some(http) = keys.table("http")?
        && http.get("url").and_then(toml::Value::as_str).is_some_and(|url| !url.is_empty())
    {
        return Err(keys.error("http.url", "is for storage = \"http\", which ferry does not support yet; remove it"));
    }
    let mut state = keys.rest();
    state.entry("path").or_insert_with(|| "local_state".into());
    Ok(state)
}

/// `[telemetry]` and `[logging]`: accepted where they ask for what ferry does; the
/// log format Iggy's `[logging] format` asks for (`text` or `json`), as ferry's
/// `[runtime] log_format`.
fn telemetry_and_logging(file: &Path, document: &mut toml::Table) -> Result<Option<String>, String> {
    if let Some(telemetry) = take_table(file, document, "telemetry")? {
        let mut keys = Keys::new(file.display(), "[telemetry]", telemetry);
        if keys.bool("enabled")?.unwrap_or(false) {
            return Err(not_yet(keys.error("enabled", "true"), "OpenTelemetry export", "set enabled = false"));
        }
    }
    let Some(logging) = take_table(file, document, "logging")? else { return Ok(None) };
    let mut keys = Keys::new(file.display(), "[logging]", logging);
    // Iggy reads it whatever its case.
    let format = keys.string("format")?.map(|format| format.to_ascii_lowercase());
    if let Some(other) = format.as_deref().filter(|format| !["text", "json"].contains(format)) {
        return Err(keys.error("format", format!("{other:?} is neither \"text\" nor \"json\"")));
    }
    keys.done("format")?;
    Ok(format)
}
