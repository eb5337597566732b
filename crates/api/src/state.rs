//! `/sources/{key}/state` and `/sinks/{key}/state`: the committed cursor of a source,
//! the stored offsets of a sink, read from the state store as `ferry state show`
//! reads them (read-only; it works while the connector commits). The state is shown
//! as bytes (base64) and, when it is UTF-8, as text; a sink's offsets also as the
//! JSON they are (`{"stream/topic": offset}`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use super::Api;
use super::error::ApiError;
use ferry_contract::Role;
use ferry_engine::cursor::Committed;
use ferry_engine::status::format_micros;

pub(super) async fn source_state(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    state(api, Role::Source, key).await
}

pub(super) async fn sink_state(State(api): State<Arc<Api>>, Path(key): Path<String>) -> Response {
    state(api, Role::Sink, key).await
}

async fn state(api: Arc<Api>, role: Role, key: String) -> Response {
    let read = api.blocking(move |api| {
        let connector = api.find(role, &key)?;
        let committed = api
            .committed(connector)
            .map_err(|e| ApiError::internal(format!("connector `{key}`: cannot read its state: {e}")))?;
        let mut body = json!({
            "key": connector.key(),
            "connector_type": role.noun(),
            "committed": committed.as_ref().map(|c| describe(api, role, c)),
        });
        if role == Role::Sink && api.config.iggy.is_some() {
            body["note"] =
                json!("this sink reads from Iggy: its offsets are stored on the server, not in ferry's state store");
        }
        Ok::<_, ApiError>(body)
    });
    match read.await.and_then(|body| body) {
        Ok(body) => api.json(StatusCode::OK, body),
        Err(error) => error.into_response(),
    }
}

/// A committed state: its generation and time, the state itself, and the receipt.
fn describe(api: &Api, role: Role, committed: &Committed) -> Value {
    let (state, redacted) = api.redactor.bytes(&committed.state);
    let text = std::str::from_utf8(&state).ok();
    let mut body = json!({
        "generation": committed.generation,
        "committed_at": format_micros(committed.committed_at_micros),
        "committed_at_micros": committed.committed_at_micros,
        "state_base64": base64::engine::general_purpose::STANDARD.encode(&state),
        "state_text": text,
        "delivered": committed.receipt.marks,
    });
    if redacted {
        body["redacted"] = json!(true);
    }
    if role == Role::Sink {
        body["offsets"] = text.and_then(|t| serde_json::from_str::<Value>(t).ok()).unwrap_or(Value::Null);
    }
    body
}
