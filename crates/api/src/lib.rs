//! # ferry-api: the HTTP API and metrics
//!
//! The HTTP API of a running `ferry` (`[http]` in the config): what each connector is
//! doing, its committed state, and Prometheus metrics, for operators and their tools.
//!
//! Paths and shapes follow Iggy's connectors runtime where the concept is the same
//! (`/health`, `/stats`, `/sources`, `/sinks/{key}`, `/metrics`), so its users feel at
//! home. The handlers read the status board (`ferry_engine::status`), the config in force
//! (it follows reloads), and the state store through the same read-only path as
//! `ferry state show`; the endpoints that steer (`control.rs`) hand orders to the
//! host's [`Control`] and answer what it did. One file per concern:
//!
//! * `server.rs`: listening, the routes, stopping with the host's shutdown;
//! * `auth.rs`: the `api-key` header; `error.rs`: errors as JSON;
//! * `health.rs`: `/health`, `/ready`; `connectors.rs`: `/sources`, `/sinks`;
//! * `state.rs`: `/sources/{key}/state`, `/sinks/{key}/state`;
//! * `control.rs`: `POST .../pause`, `/resume`, `/restart`, `DELETE .../state`,
//!   `POST /reload`;
//! * `stats.rs` and `process.rs`: `/stats`, with the process's CPU and memory;
//! * `metrics.rs`: `/metrics`; `redact.rs`: no secret in any response;
//! * `tls.rs`: HTTPS, with `[http] tls`.

mod auth;
mod connector_config;
mod connectors;
mod control;
mod cors;
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

use ferry_config::Config;
use ferry_engine::shutdown::Shutdown;
use ferry_engine::status::StatusBoard;
use ferry_host::Control;

pub use auth::HEADER as API_KEY_HEADER;
pub use server::{ApiServer, StartError, start};
pub use tls::certificate_chain;

/// What every handler works with: the config in force and what follows from it,
/// and what stays the same across reloads.
pub(crate) struct Api {
    config: Arc<Config>,
    /// Removes every secret's value from what is answered (the secrets of the
    /// config in force).
    redactor: redact::Redactor,
    board: Arc<StatusBoard>,
    /// For `/ready`: a host that is shutting down is not ready.
    shutdown: Shutdown,
    /// For `/stats`: CPU used since the last look.
    cpu: Arc<process::CpuMeter>,
    /// For `/metrics`: the board's counters and histograms, read at each scrape.
    registry: Arc<prometheus_client::registry::Registry>,
    /// Where the steering endpoints send their orders.
    control: Control,
    /// The API key, which the redactor also takes out of answers.
    api_key: Option<Arc<str>>,
}

impl Api {
    /// The same API over the config `config` (after a reload).
    fn with_config(&self, config: Arc<Config>) -> Api {
        Api {
            redactor: redact::Redactor::from_config(&config, self.api_key.as_deref()),
            config,
            board: self.board.clone(),
            shutdown: self.shutdown.clone(),
            cpu: self.cpu.clone(),
            registry: self.registry.clone(),
            control: self.control.clone(),
            api_key: self.api_key.clone(),
        }
    }

    /// `value` as a JSON response, with every secret taken out.
    fn json(&self, status: StatusCode, mut value: serde_json::Value) -> Response {
        self.redactor.json(&mut value);
        (status, Json(value)).into_response()
    }
}
