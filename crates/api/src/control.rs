//! The endpoints that steer: `POST /sources/{key}/pause`, `/resume`, `/restart`
//! (and the same under `/sinks`), `DELETE /sources/{key}/state` (and the sinks'),
//! and `POST /reload`. Each hands an order to the host's control and answers when it
//! has been carried out (a pause once the outstanding batch has settled) with what
//! happened, or with why nothing did: 404 for an unknown connector or action, 409
//! when the connector is not in a state for it (a state reset under a running
//! connector), 422 for a new config that was refused, 503 while ferry shuts down.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::Api;
use super::error::ApiError;
use ferry_contract::Role;
use ferry_host::control::{Action, Applied, Refusal, RefusalKind, Reloaded};

pub(super) async fn source_action(
    State(api): State<Arc<Api>>,
    Path((key, action)): Path<(String, String)>,
) -> Response {
    act(api, Role::Source, key, &action).await
}

pub(super) async fn sink_action(State(api): State<Arc<Api>>, Path((key, action)): Path<(String, String)>) -> Response {
    act(api, Role::Sink, key, &action).await
}

pub(super) async fn reset_source_state(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    answer(&api, api.control.act(Role::Source, &api.ferry_key(Role::Source, &key), Action::ResetState).await)
}

pub(super) async fn reset_sink_state(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    answer(&api, api.control.act(Role::Sink, &api.ferry_key(Role::Sink, &key), Action::ResetState).await)
}

pub(super) async fn reload(State(api): State<Arc<Api>>) -> Response {
    match api.control.reload().await {
        Ok(reloaded) => api.json(StatusCode::OK, describe(&reloaded)),
        Err(refusal) => refused(&api, refusal),
    }
}

async fn act(api: Arc<Api>, role: Role, key: String, action: &str) -> Response {
    let action = match action {
        "pause" => Action::Pause,
        "resume" => Action::Resume,
        "restart" => Action::Restart,
        other => {
            let message = format!("no action `{other}`: POST /{}s/{key}/pause, /resume or /restart", role.noun());
            return ApiError::not_found(message).into_response();
        }
    };
    answer(&api, api.control.act(role, &api.ferry_key(role, &key), action).await)
}

fn answer(api: &Api, result: Result<Applied, Refusal>) -> Response {
    match result {
        Ok(applied) => api.json(
            StatusCode::OK,
            json!({ "key": applied.key, "status": applied.phase.as_str(), "message": applied.message }),
        ),
        Err(refusal) => refused(api, refusal),
    }
}

fn refused(api: &Api, refusal: Refusal) -> Response {
    let status = match refusal.kind {
        RefusalKind::NotFound => StatusCode::NOT_FOUND,
        RefusalKind::Conflict => StatusCode::CONFLICT,
        RefusalKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
        RefusalKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    };
    // The message may quote the config (a guest's error, a secret's source).
    api.json(status, json!({ "error": refusal.message }))
}

fn describe(reloaded: &Reloaded) -> serde_json::Value {
    json!({
        "added": reloaded.added,
        "removed": reloaded.removed,
        "changed": reloaded.changed,
        "unchanged": reloaded.unchanged,
        "unsettled": reloaded.unsettled,
        "failed": reloaded.failed.iter().map(|(key, error)| json!({ "key": key, "error": error })).collect::<Vec<_>>(),
    })
}
