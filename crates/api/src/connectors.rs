//! `/sources`, `/sources/{key}`, `/sinks`, `/sinks/{key}`: each connector's phase,
//! tenant, counters, last error and committed generation and time, as Iggy's runtime
//! lists its connectors (`key`, `name`, `path`, `enabled`, `running`) with Ferry's
//! status on top (the fields of `ferry status --json`).
//!
//! The status comes from the board; the committed generation and time from the
//! state store, read as `ferry state show` reads it (read-only, while the connector
//! commits). A connector of the config that is not on the board is `disabled`, or
//! `not-started` (ferry is still setting up).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Api;
use super::error::ApiError;
use ferry_config::ConnectorConfig;
use ferry_contract::Role;
use ferry_engine::cursor::{Committed, StateError};
use ferry_engine::status::{ConnectorStatus, format_micros};
use ferry_store::state::StateDir;

/// A connector of the config, with its status if it is on the board.
pub(super) struct View<'a> {
    pub config: &'a dyn ConnectorConfig,
    pub status: Option<ConnectorStatus>,
}

impl View<'_> {
    /// Its phase, or what keeps it off the board.
    pub fn phase(&self) -> &'static str {
        match &self.status {
            Some(status) => status.phase.as_str(),
            None if !self.config.enabled() => "disabled",
            None => "not-started",
        }
    }

    /// Running or idle.
    pub fn healthy(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.phase.is_healthy())
    }

    /// Running, idle, or paused by an operator.
    pub fn as_intended(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.phase.is_as_intended())
    }

    /// Its status, or an empty one naming it when it is not on the board.
    pub fn status_or_empty(&self) -> ConnectorStatus {
        self.status.clone().unwrap_or_else(|| ConnectorStatus {
            key: self.config.key().to_string(),
            role: self.config.role().noun().to_string(),
            name: self.config.name().map(str::to_string),
            tenant: self.config.tenant().map(str::to_string),
            ..Default::default()
        })
    }
}

impl Api {
    /// Every connector of the config of `role` (both roles for `None`), with its status.
    pub(super) fn views(&self, role: Option<Role>) -> Vec<View<'_>> {
        let connectors = self.config.connectors().filter(|c| role.is_none_or(|r| c.role() == r));
        connectors.map(|config| View { config, status: self.board.get(config.key()) }).collect()
    }

    /// The connector `key` of `role`, or an error saying what it is instead.
    pub(super) fn find(&self, role: Role, key: &str) -> Result<&dyn ConnectorConfig, ApiError> {
        // Iggy's key, when ferry's differs (a sink sharing its key with a source in
        // Iggy's files): Iggy's dashboards ask by it.
        let by_iggy_key = || self.config.connectors().find(|c| c.role() == role && c.iggy_key() == key);
        if let Some(connector) = self.config.connector(key).filter(|c| c.role() == role).or_else(by_iggy_key) {
            return Ok(connector);
        }
        match self.config.connector(key) {
            Some(connector) if connector.role() == role => Ok(connector),
            Some(connector) => {
                let is = connector.role().noun();
                Err(ApiError::not_found(format!("`{key}` is a {is}, not a {}: see /{is}s/{key}", role.noun())))
            }
            None => Err(ApiError::not_found(format!("no {} has the key `{key}`", role.noun()))),
        }
    }

    /// Ferry's key of the `role` connector the path names `key`: the same, or the
    /// key of the one whose Iggy key it is.
    pub(super) fn ferry_key(&self, role: Role, key: &str) -> String {
        self.find(role, key).map_or_else(|_| key.to_string(), |connector| connector.key().to_string())
    }

    /// `connector`'s committed state, read from the store without taking it.
    pub(super) fn committed(&self, connector: &dyn ConnectorConfig) -> Result<Option<Committed>, StateError> {
        StateDir::new(self.config.state_dir_of(connector)).read(connector.key())
    }

    /// Run `work` (which reads state files) off the async workers.
    pub(super) async fn blocking<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Api) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let api = self.clone();
        tokio::task::spawn_blocking(move || work(&api))
            .await
            .map_err(|e| ApiError::internal(format!("reading the state failed: {e}")))
    }
}

pub(super) async fn sources(State(api): State<Arc<Api>>) -> Response {
    list(api, Role::Source).await
}

pub(super) async fn sinks(State(api): State<Arc<Api>>) -> Response {
    list(api, Role::Sink).await
}

pub(super) async fn source(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    one(api, Role::Source, key).await
}

pub(super) async fn sink(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    one(api, Role::Sink, key).await
}

async fn list(api: Arc<Api>, role: Role) -> Response {
    let listed =
        api.blocking(move |api| Value::Array(api.views(Some(role)).iter().map(|view| summary(api, view)).collect()));
    match listed.await {
        Ok(body) => api.json(StatusCode::OK, body),
        Err(error) => error.into_response(),
    }
}

async fn one(api: Arc<Api>, role: Role, key: String) -> Response {
    let found = api.blocking(move |api| {
        let connector = api.find(role, &key)?;
        let view = View { config: connector, status: api.board.get(connector.key()) };
        let mut body = summary(api, &view);
        body["streams"] = streams(api, connector, role);
        Ok::<_, ApiError>(body)
    });
    match found.await.and_then(|body| body) {
        Ok(body) => api.json(StatusCode::OK, body),
        Err(error) => error.into_response(),
    }
}

/// One connector: its status (as in the status file), and what the config and the
/// state store add.
fn summary(api: &Api, view: &View) -> Value {
    let status = view.status_or_empty();
    let restarts = status.instances.saturating_sub(1);
    let mut body = serde_json::to_value(&status).unwrap_or_else(|_| json!({}));
    body["status"] = json!(view.phase());
    body["enabled"] = json!(view.config.enabled());
    body["running"] = json!(view.healthy());
    body["path"] = json!(view.config.path().display().to_string());
    body["restarts"] = json!(restarts);
    body["committed"] = match api.committed(view.config) {
        Ok(None) => Value::Null,
        Ok(Some(committed)) => json!({
            "generation": committed.generation,
            "committed_at": format_micros(committed.committed_at_micros),
            "committed_at_micros": committed.committed_at_micros,
        }),
        Err(error) => json!({ "error": error.to_string() }),
    };
    body
}

/// What a connector reads or writes: a source's streams and topics, a sink's.
fn streams(api: &Api, connector: &dyn ConnectorConfig, role: Role) -> Value {
    let key = connector.key();
    match role {
        Role::Source => api.config.source(key).map_or(Value::Null, |source| {
            source.streams.iter().map(|s| json!({ "stream": s.stream, "topic": s.topic })).collect()
        }),
        Role::Sink => api.config.sink(key).map_or(Value::Null, |sink| {
            sink.topics().map(|(stream, topic)| json!({ "stream": stream, "topic": topic })).collect()
        }),
    }
}
