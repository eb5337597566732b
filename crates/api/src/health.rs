//! `/health` and `/ready`.
//!
//! `/health` is real: 200 only when every enabled connector is running or idle (or
//! paused by an operator: what was asked for is not a fault, and a liveness probe
//! that restarted ferry for it would silently resume it); otherwise 503, listing
//! each one that is not with its phase and last error (a connector starting, failed
//! and waiting to restart, refused, or stopped). Iggy's runtime answers
//! `{"status": "healthy"}`; Ferry adds the connectors.
//!
//! `/ready` is 200 once ferry has set every enabled connector going (each has been
//! through its first start: it runs, or it failed or was refused, which `/health`
//! reports) and until shutdown begins.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::Api;
use super::connectors::View;
use ferry_engine::status::Phase;

pub(super) async fn health(State(api): State<Arc<Api>>) -> Response {
    let views = api.views(None);
    let enabled: Vec<&View> = views.iter().filter(|v| v.config.enabled()).collect();
    let unhealthy: Vec<_> = enabled
        .iter()
        .filter(|view| !view.as_intended())
        .map(|view| {
            json!({
                "key": view.config.key(),
                "connector_type": view.config.role().noun(),
                "tenant": view.config.tenant(),
                "status": view.phase(),
                "last_error": view.status.as_ref().and_then(|s| s.last_error.clone()),
            })
        })
        .collect();
    if unhealthy.is_empty() {
        api.json(StatusCode::OK, json!({ "status": "healthy", "connectors": enabled.len() }))
    } else {
        let body = json!({ "status": "unhealthy", "connectors": enabled.len(), "not_running": unhealthy });
        api.json(StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

pub(super) async fn ready(State(api): State<Arc<Api>>) -> Response {
    if api.shutdown.is_requested() {
        return api.json(StatusCode::SERVICE_UNAVAILABLE, json!({ "status": "not-ready", "reason": "shutting down" }));
    }
    let views = api.views(None);
    let starting: Vec<&str> =
        views.iter().filter(|v| v.config.enabled() && first_start_pending(v)).map(|v| v.config.key()).collect();
    if starting.is_empty() {
        api.json(StatusCode::OK, json!({ "status": "ready" }))
    } else {
        let body = json!({ "status": "not-ready", "reason": "connectors are starting", "starting": starting });
        api.json(StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

/// Not on the board yet, or starting its first instance (compiling, opening).
fn first_start_pending(view: &View) -> bool {
    view.status.as_ref().is_none_or(|s| s.phase == Phase::Starting && s.instances <= 1)
}
