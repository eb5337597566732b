//! `/stats`: the process (CPU, resident memory, run time) and each connector's
//! counters, in the shape of Iggy's runtime (`process_id`, `cpu_usage`,
//! `memory_usage`, `sources_total`, `connectors[]` with `messages_produced` /
//! `messages_sent` for a source, `messages_consumed` / `messages_processed` for a
//! sink, `errors`), with Ferry's own counters beside them. A sink's
//! `messages_processed` are those its guest wrote; those it could never write are
//! its `dead_lettered`, counted apart.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::connectors::View;
use super::{Api, process};
use ferry_contract::Role;
use ferry_engine::status::{ConnectorStatus, now_micros};

pub(super) async fn stats(State(api): State<Arc<Api>>) -> Response {
    let usage = process::usage();
    let views = api.views(None);
    let count = |role: Role, running: bool| {
        views.iter().filter(|v| v.config.role() == role && (!running || v.healthy())).count()
    };
    let started = api.board.started_at_micros();
    let body = json!({
        "process_id": std::process::id(),
        "cpu_usage": api.cpu.percent_since_last(&usage),
        "cpu_seconds": usage.cpu_seconds,
        "memory_usage": usage.rss_bytes,
        "run_time": now_micros().saturating_sub(started) / 1_000_000,
        "start_time": started,
        "sources_total": count(Role::Source, false),
        "sources_running": count(Role::Source, true),
        "sinks_total": count(Role::Sink, false),
        "sinks_running": count(Role::Sink, true),
        "connectors": views.iter().map(connector).collect::<Vec<_>>(),
    });
    api.json(StatusCode::OK, body)
}

fn connector(view: &View) -> Value {
    let status = view.status_or_empty();
    let mut body = json!({
        "key": status.key,
        "name": status.name,
        "connector_type": status.role,
        "tenant": status.tenant,
        "status": view.phase(),
        "enabled": view.config.enabled(),
        "errors": errors(&status),
        "batches": status.batches_acked,
        "bytes": status.bytes_delivered,
        "nacks": status.nacks,
        "nacks_by_reason": status.nacks_by_reason,
        "traps": status.traps,
        "guest_errors": status.guest_errors,
        "restarts": status.instances.saturating_sub(1),
        "committed_generation": status.committed_generation,
        "log_lines_dropped": status.log_lines_dropped,
        "fuel_consumed": status.fuel_consumed,
        "messages_filtered": status.messages_filtered,
        "last_error": status.last_error,
    });
    let (polled, done) = match view.config.role() {
        Role::Source => ("messages_produced", "messages_sent"),
        Role::Sink => ("messages_consumed", "messages_processed"),
    };
    body[polled] = json!(status.messages_polled);
    body[done] = json!(status.messages_delivered);
    if view.config.role() == Role::Sink {
        body["dead_lettered"] = json!(status.dead_lettered);
    }
    body
}

/// Iggy's `errors`: everything that went wrong with a connector's batches or its
/// guest: NACKs (a sink's retries), guest errors and traps.
pub(super) fn errors(status: &ConnectorStatus) -> u64 {
    status.nacks + status.guest_errors + status.traps
}
