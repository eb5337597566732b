//! Listening, the routes, and stopping: the API is started by `ferry run` once the
//! host is set up, serves until the host's shutdown is requested, and then lets the
//! requests in flight finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::middleware;
use axum::routing::get;
use tokio::net::TcpListener;

use super::{Api, auth, connectors, error, health, metrics, process, redact, state, stats, tls};
use crate::config::{Config, HttpConfig};
use crate::shutdown::Shutdown;
use crate::status::StatusBoard;

/// How long requests in flight may take to finish once shutdown is requested.
const DRAIN: Duration = Duration::from_secs(5);

/// Why the API could not start; it names the config file and the key.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(String);

/// The running API.
pub struct ApiServer {
    address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ApiServer {
    /// Where it listens (the port the system chose, for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Wait until it stopped (after shutdown was requested), for at most a few
    /// seconds: a client that keeps its connection busy must not hold ferry up.
    pub async fn stopped(mut self) {
        if tokio::time::timeout(DRAIN, &mut self.task).await.is_err() {
            self.task.abort();
            tracing::warn!("the HTTP API did not finish its requests within {DRAIN:?}; they were cut off");
        }
    }
}

/// Listen on `[http] address` and serve the API over `board` until `shutdown`.
pub async fn start(
    config: &Config,
    http: &HttpConfig,
    board: Arc<StatusBoard>,
    shutdown: Shutdown,
) -> Result<ApiServer, StartError> {
    let file = config.file.display();
    let api_key = http.read_api_key().map_err(|p| StartError(format!("{file}: {p}")))?;
    let tls = http.tls.as_ref().map(tls::server_config).transpose().map_err(|p| StartError(format!("{file}: {p}")))?;
    let listener = TcpListener::bind(&http.address)
        .await
        .map_err(|e| StartError(format!("{file}: [http] address: cannot listen on {}: {e}", http.address)))?;
    let address = listener
        .local_addr()
        .map_err(|e| StartError(format!("{file}: [http] address: cannot tell where it listens: {e}")))?;
    if api_key.is_none() && !address.ip().is_loopback() {
        tracing::warn!(
            "the HTTP API on {address} has no api_key: anyone who reaches it can read every connector's status \
             and state"
        );
    }
    let api = Arc::new(Api {
        config: Arc::new(config.clone()),
        redactor: redact::Redactor::from_config(config, api_key.as_deref()),
        registry: metrics::registry(board.clone()),
        board,
        shutdown: shutdown.clone(),
        cpu: process::CpuMeter::new(),
    });
    let app = routes(api, api_key.map(Arc::from));
    let task = match tls {
        None => {
            tracing::info!("HTTP API listening on http://{address}");
            tokio::spawn(serve(listener, app, shutdown))
        }
        Some(tls) => {
            tracing::info!("HTTP API listening on https://{address}");
            tokio::spawn(serve(tls::TlsListener::new(listener, address, tls), app, shutdown))
        }
    };
    Ok(ApiServer { address, task })
}

/// Serve `app` on `listener` until `shutdown`, then let the requests in flight finish.
async fn serve<L: axum::serve::Listener>(listener: L, app: Router, mut shutdown: Shutdown)
where
    L::Addr: std::fmt::Debug,
{
    let served = axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.requested().await });
    if let Err(e) = served.await {
        tracing::error!("the HTTP API stopped: {e}");
    }
}

/// Every endpoint, behind the API key. All of them only read. Endpoints that steer
/// a connector (`POST /sources/{key}/restart`, `/pause`, `/resume`, `DELETE
/// /sources/{key}/state`, `POST /reload`) belong in a module of their own, added
/// here with `post`/`delete` next to the `get` of the same path.
fn routes(api: Arc<Api>, api_key: Option<Arc<str>>) -> Router {
    Router::new()
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/stats", get(stats::stats))
        .route("/metrics", get(metrics::metrics))
        .route("/sources", get(connectors::sources))
        .route("/sources/{key}", get(connectors::source))
        .route("/sources/{key}/state", get(state::source_state))
        .route("/sinks", get(connectors::sinks))
        .route("/sinks/{key}", get(connectors::sink))
        .route("/sinks/{key}/state", get(state::sink_state))
        .fallback(error::no_such_endpoint)
        .method_not_allowed_fallback(error::method_not_allowed)
        .with_state(api)
        .layer(middleware::from_fn_with_state(api_key, auth::require_key))
}
