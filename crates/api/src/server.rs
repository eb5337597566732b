//! Listening, the routes, and stopping: the API is started by `ferry run` once the
//! host is set up, serves until the host's shutdown is requested, and then lets the
//! requests in flight finish.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::extract::FromRef;
use axum::middleware;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::{
    Api, auth, connector_config, connectors, control, cors, error, health, metrics, process, redact, state, stats, tls,
};
use ferry_config::{Config, HttpConfig};
use ferry_engine::shutdown::Shutdown;
use ferry_host::Host;

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

/// Listen on `[http] address` and serve the API over `host` (its status board, the
/// config in force, its control) until `shutdown`.
pub async fn start(http: &HttpConfig, host: &mut Host, shutdown: Shutdown) -> Result<ApiServer, StartError> {
    let Some(config_in_force) = host.config_in_force() else {
        return Err(StartError("the HTTP API needs a host started from a config file".to_string()));
    };
    let config = config_in_force.borrow().clone();
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
             and state, and pause, restart or reload them"
        );
    }
    let board = host.status();
    let api_key: Option<Arc<str>> = api_key.map(Arc::from);
    let api = Arc::new(Api {
        redactor: redact::Redactor::from_config(&config, api_key.as_deref()),
        config: config.clone(),
        registry: Arc::new(metrics::registry(board.clone())),
        board,
        shutdown: shutdown.clone(),
        cpu: Arc::new(process::CpuMeter::new()),
        control: host.control(),
        api_key: api_key.clone(),
    });
    let live = Live(Arc::new(RwLock::new(api)));
    tokio::spawn(follow_reloads(live.clone(), config_in_force, shutdown.clone()));
    let mut app = routes(live, api_key);
    // Outside the API key's check: a browser's preflight carries no key.
    if let Some(cors) = cors::layer(&http.cors).map_err(|p| StartError(format!("{file}: {p}")))? {
        app = app.layer(cors);
    }
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

/// The API over the config in force: handlers take an `Arc<Api>` (see the
/// `FromRef` below), which a reload replaces for the requests after it.
#[derive(Clone)]
struct Live(Arc<RwLock<Arc<Api>>>);

impl FromRef<Live> for Arc<Api> {
    fn from_ref(live: &Live) -> Arc<Api> {
        live.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Keep `live` on the config in force until `shutdown`.
async fn follow_reloads(live: Live, mut config_in_force: watch::Receiver<Arc<Config>>, mut shutdown: Shutdown) {
    loop {
        tokio::select! {
            changed = config_in_force.changed() => if changed.is_err() { return },
            _ = shutdown.requested() => return,
        }
        let config = config_in_force.borrow_and_update().clone();
        let mut api = live.0.write().unwrap_or_else(|e| e.into_inner());
        *api = Arc::new(api.with_config(config));
    }
}

/// Every endpoint, behind the API key: the reads, and next to them (same path, the
/// other method) the orders of `control.rs`.
fn routes(live: Live, api_key: Option<Arc<str>>) -> Router {
    Router::new()
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/stats", get(stats::stats))
        .route("/metrics", get(metrics::metrics))
        .route("/reload", post(control::reload))
        .route("/sources", get(connectors::sources))
        .route("/sources/{key}", get(connectors::source))
        .route("/sources/{key}/state", get(state::source_state).delete(control::reset_source_state))
        .route("/sources/{key}/configs/plugin", get(connector_config::source_plugin_config))
        .route("/sources/{key}/configs", get(connector_config::source_configs))
        .route("/sources/{key}/configs/active", get(connector_config::source_active_config))
        .route("/sources/{key}/configs/{version}", get(connector_config::source_config))
        .route("/sources/{key}/transforms", get(connector_config::source_transforms))
        .route("/sources/{key}/{action}", post(control::source_action))
        .route("/sinks", get(connectors::sinks))
        .route("/sinks/{key}", get(connectors::sink))
        .route("/sinks/{key}/state", get(state::sink_state).delete(control::reset_sink_state))
        .route("/sinks/{key}/configs/plugin", get(connector_config::sink_plugin_config))
        .route("/sinks/{key}/configs", get(connector_config::sink_configs))
        .route("/sinks/{key}/configs/active", get(connector_config::sink_active_config))
        .route("/sinks/{key}/configs/{version}", get(connector_config::sink_config))
        .route("/sinks/{key}/transforms", get(connector_config::sink_transforms))
        .route("/sinks/{key}/{action}", post(control::sink_action))
        .fallback(error::no_such_endpoint)
        .method_not_allowed_fallback(error::method_not_allowed)
        .with_state(live)
        .layer(middleware::from_fn_with_state(api_key, auth::require_key))
}
