//! The HTTP API of a running `ferry` (`[http]` in the config): what each connector is
//! doing, its committed state, and Prometheus metrics, for operators and their tools.
//!
//! Paths and shapes follow Iggy's connectors runtime where the concept is the same
//! (`/health`, `/stats`, `/sources`, `/sinks/{key}`, `/metrics`), so its users feel at
//! home. Everything here only reads: the status board (`crate::status`), the config,
//! and the state store through the same read-only path as `ferry state show`. One
//! file per concern:
//!
//! * `server.rs`: listening, the routes, stopping with the host's shutdown;
//! * `auth.rs`: the `api-key` header; `error.rs`: errors as JSON;
//! * `health.rs`: `/health`, `/ready`; `connectors.rs`: `/sources`, `/sinks`;
//! * `state.rs`: `/sources/{key}/state`, `/sinks/{key}/state`;
//! * `stats.rs` and `process.rs`: `/stats`, with the process's CPU and memory;
//! * `metrics.rs`: `/metrics`; `redact.rs`: no secret in any response;
//! * `tls.rs`: HTTPS, with `[http] tls`.

mod auth;
mod connectors;
mod error;
mod health;
mod metrics;
mod process;
mod redact;
mod server;
mod state;
mod stats;
mod tls;

use std::sync::Arc;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::config::Config;
use crate::shutdown::Shutdown;
use crate::status::StatusBoard;

pub use auth::HEADER as API_KEY_HEADER;
pub use server::{ApiServer, StartError, start};
pub use tls::certificate_chain;

/// What every handler works with.
pub(crate) struct Api {
    config: Arc<Config>,
    board: Arc<StatusBoard>,
    /// Removes every secret's value from what is answered.
    redactor: redact::Redactor,
    /// For `/ready`: a host that is shutting down is not ready.
    shutdown: Shutdown,
    /// For `/stats`: CPU used since the last look.
    cpu: process::CpuMeter,
    /// For `/metrics`: the board's counters and histograms, read at each scrape.
    registry: prometheus_client::registry::Registry,
}

impl Api {
    /// `value` as a JSON response, with every secret taken out.
    fn json(&self, status: StatusCode, mut value: serde_json::Value) -> Response {
        self.redactor.json(&mut value);
        (status, Json(value)).into_response()
    }
}
