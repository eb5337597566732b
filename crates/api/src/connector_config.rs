//! `/sources/{key}/configs/plugin`, `/sinks/{key}/configs/plugin`,
//! `/sources/{key}/transforms` and `/sinks/{key}/transforms`: a connector's
//! `plugin_config` and transforms in force, as Iggy's runtime shows them. The plugin
//! config is written as `?format=` asks (`json`, `yaml`, `toml` or `text`; by default
//! the connector's `plugin_config_format`, else TOML, as in Iggy), with every secret
//! the host knows taken out like any answer.
//!
//! `/sources/{key}/configs`, `.../configs/active` and `.../configs/{version}`: the
//! versions of a connector's config that Iggy's runtime files hold (read from them at
//! each request), each with `active`; a connector of a Ferry config has none (404
//! saying so).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Api;
use super::error::ApiError;
use ferry_config::{PluginConfigFormat, iggy_runtime};
use ferry_contract::Role;

/// `?format=`.
#[derive(Deserialize)]
pub(super) struct Format {
    format: Option<String>,
}

pub(super) async fn source_plugin_config(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
    Query(format): Query<Format>,
) -> Response {
    plugin_config(&api, Role::Source, &key, format).unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn sink_plugin_config(
    State(api): State<Arc<Api>>,
    Path(key): Path<String>,
    Query(format): Query<Format>,
) -> Response {
    plugin_config(&api, Role::Sink, &key, format).unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn source_transforms(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    transforms(&api, Role::Source, &key).unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn sink_transforms(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    transforms(&api, Role::Sink, &key).unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn source_configs(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    configs(api, Role::Source, key, Which::All).await
}

pub(super) async fn sink_configs(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    configs(api, Role::Sink, key, Which::All).await
}

pub(super) async fn source_active_config(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    configs(api, Role::Source, key, Which::Active).await
}

pub(super) async fn sink_active_config(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    configs(api, Role::Sink, key, Which::Active).await
}

pub(super) async fn source_config(
    State(api): State<Arc<Api>>,
    Path((key, version)): Path<(String, String)>,
) -> Response {
    configs(api, Role::Source, key, Which::Version(version)).await
}

pub(super) async fn sink_config(State(api): State<Arc<Api>>, Path((key, version)): Path<(String, String)>) -> Response {
    configs(api, Role::Sink, key, Which::Version(version)).await
}

/// Which versions of a config to show.
enum Which {
    All,
    Active,
    /// As written in the path.
    Version(String),
}

/// The versions asked for, each as Iggy's config with `active`.
async fn configs(api: Arc<Api>, role: Role, key: String, which: Which) -> Response {
    let shown = api.blocking(move |api| {
        let iggy_key = api.find(role, &key)?.iggy_key().to_string();
        let vars: Vec<(String, String)> = std::env::vars().collect();
        let versions = iggy_runtime::versions(&api.config.file, role, &iggy_key, &vars).map_err(ApiError::not_found)?;
        let shown = |v: &iggy_runtime::ConfigVersion| {
            let mut config = v.config.clone();
            config["active"] = json!(v.active);
            config
        };
        match which {
            Which::All => Ok(Value::Array(versions.iter().map(shown).collect())),
            Which::Active => versions
                .iter()
                .find(|v| v.active)
                .map(shown)
                .ok_or_else(|| ApiError::not_found(format!("no version of `{key}` is active"))),
            Which::Version(version) => {
                let number = version.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("{version:?} is not a version (a number, `active` or `plugin`)"))
                })?;
                versions.iter().find(|v| v.version == number).map(shown).ok_or_else(|| {
                    let have: Vec<String> = versions.iter().map(|v| v.version.to_string()).collect();
                    ApiError::not_found(format!("`{key}` has no version {number} (it has {})", have.join(", ")))
                })
            }
        }
    });
    match shown.await.and_then(|shown| shown) {
        Ok(body) => api.json(StatusCode::OK, body),
        Err(error) => error.into_response(),
    }
}

/// The connector's `plugin_config` in the format asked for; 404 when it has none, as
/// in Iggy.
fn plugin_config(api: &Api, role: Role, key: &str, Format { format }: Format) -> Result<Response, ApiError> {
    let connector = api.find(role, key)?;
    let Some(plugin_config) = connector.plugin_config() else {
        return Err(ApiError::not_found(format!("the {} `{key}` has no plugin_config", role.noun())));
    };
    let format = match format {
        None => connector.plugin_config_format().unwrap_or(PluginConfigFormat::Toml),
        Some(written) => PluginConfigFormat::parse(&written)
            .ok_or_else(|| ApiError::bad_request(format!("format {written:?} is none of json, yaml, toml, text")))?,
    };
    let (content_type, written) = match format {
        PluginConfigFormat::Json => {
            ("application/json", serde_json::to_string(plugin_config).map_err(|e| e.to_string()))
        }
        PluginConfigFormat::Yaml => {
            ("application/yaml", serde_yaml_ng::to_string(plugin_config).map_err(|e| e.to_string()))
        }
        PluginConfigFormat::Toml => ("application/toml", toml::to_string(plugin_config).map_err(|e| e.to_string())),
        PluginConfigFormat::Text => ("text/plain", serde_json::to_string(plugin_config).map_err(|e| e.to_string())),
    };
    let written =
        written.map_err(|e| ApiError::internal(format!("cannot write the plugin_config as {format:?}: {e}")))?;
    let body = api.redactor.text(&written).into_owned();
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response())
}

/// The connector's transforms, in the order they run: `[{"type", "config"}]`.
fn transforms(api: &Api, role: Role, key: &str) -> Result<Response, ApiError> {
    let connector = api.find(role, key)?;
    let shown: Vec<Value> = connector
        .transforms()
        .0
        .iter()
        .map(|transform| json!({ "type": transform.name(), "config": transform.settings() }))
        .collect();
    Ok(api.json(StatusCode::OK, Value::Array(shown)))
}
