//! # ferry-host: every layer wired together for `ferry run`
//!
//! The host: the connectors of a config, each wired to its component, its input or
//! target, and its state (see `wiring.rs`), run side by side until shutdown, and
//! steered meanwhile (see `control.rs`: pause, resume, restart, reset a state,
//! reload the config).
//!
//! Everything that can be checked before running is checked in [`Host::from_config`]
//! (every component against the contract, every state file for corruption, every
//! lock), so that bad input stops `ferry run` at once with an error naming it.
//! Compiling is the exception: it can take long, and a component built to exhaust the
//! compiler must cost only its own connectors, so every component compiles in the
//! background (bounded, see [`ferry_runtime::compile`]) while the others start, and
//! a component that cannot be compiled refuses the connectors that use it. What goes
//! wrong later (a trap, a failing target) is one connector's problem, handled by its
//! supervisor.
//!
//! * `fleet.rs`: the connectors and their tasks, each stoppable on its own;
//! * `wiring.rs`: a config's connectors joined to components, targets and state;
//! * `fingerprint.rs`: what a connector is made of, which a reload compares;
//! * `control.rs`: the orders a running host takes; `act.rs` carries out those
//!   about one connector, `reload.rs` a reload.

mod act;
pub mod control;
mod fingerprint;
mod fleet;
mod reload;
mod wiring;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

pub use control::Control;
use control::Order;
use ferry_config::{Config, ConfigError};
use ferry_engine::cursor::StateError;
use ferry_engine::shutdown::{self, Shutdown};
use ferry_engine::sink::SinkConnector;
use ferry_engine::source::SourceConnector;
use ferry_engine::status::{self, StatusBoard};
use ferry_runtime::{LoadError, Runtime};
use fleet::Fleet;
pub use wiring::engine_options;
use wiring::{Reloadable, Wired};

/// What stops a host from starting. (The problems are parts of the message, not
/// error sources, so that a report of the chain says each thing once.)
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("connector `{key}`: {problem}")]
    Component { key: String, problem: LoadError },
    #[error("connector `{key}`: {problem}")]
    Compile { key: String, problem: Arc<LoadError> },
    #[error("connector `{key}`: {problem}")]
    State { key: String, problem: StateError },
    /// The states taken could not be put on disk (see `Wiring::sync_states`).
    #[error("cannot sync the state directory {}: {problem}", dir.display())]
    StateSync { dir: std::path::PathBuf, problem: StateError },
    #[error("connector `{key}`: {problem}")]
    Log { key: String, problem: ferry_store::local_log::LogCheckError },
    #[error("cannot start the WebAssembly runtime: {0}")]
    Runtime(String),
    #[error("{0}")]
    Iggy(String),
}

/// How a run ended.
#[derive(Debug, Default)]
pub struct RunReport {
    /// Connectors that had not settled when the grace period ran out; their last
    /// batch was not committed and will be produced again on the next start.
    pub unsettled: Vec<String>,
}

pub struct Host {
    runtime: Arc<Runtime>,
    fleet: Fleet,
    status: Arc<StatusBoard>,
    grace_period: Duration,
    progress_interval: Duration,
    status_file: Option<PathBuf>,
    /// The config and wiring of a host built from a config file; a host put
    /// together by hand (tests, benchmarks) can be steered but not reloaded.
    reloadable: Option<Reloadable>,
    /// The config in force, for readers that follow reloads (the HTTP API).
    config_in_force: Option<watch::Sender<Arc<Config>>>,
    control: Control,
    orders: mpsc::Receiver<Order>,
}

impl Host {
    /// An empty host on `runtime`; add connectors with [`Host::add_source`] and
    /// [`Host::add_sink`].
    pub fn new(runtime: Arc<Runtime>) -> Host {
        let status = StatusBoard::new();
        let (control, orders) = control::channel();
        Host {
            fleet: Fleet::new(runtime.clone(), status.clone()),
            runtime,
            status,
            grace_period: Duration::from_secs(10),
            progress_interval: Duration::from_secs(10),
            status_file: None,
            reloadable: None,
            config_in_force: None,
            control,
            orders,
        }
    }

    /// The runtime the connectors run on.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    pub fn add_source(&mut self, connector: SourceConnector, name: Option<String>) {
        self.fleet.add(Wired::Source(connector, name), None);
    }

    pub fn add_sink(&mut self, connector: SinkConnector, name: Option<String>) {
        self.fleet.add(Wired::Sink(connector, name), None);
    }

    pub fn set_grace_period(&mut self, grace_period: Duration) {
        self.grace_period = grace_period;
    }

    /// The status board (subscribe to it for events).
    pub fn status(&self) -> Arc<StatusBoard> {
        self.status.clone()
    }

    /// What steers the host once it runs.
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// The config in force, from now on and after every reload (`None` for a host
    /// put together by hand).
    pub fn config_in_force(&mut self) -> Option<watch::Receiver<Arc<Config>>> {
        let config = self.reloadable.as_ref()?.config.clone();
        Some(self.config_in_force.get_or_insert_with(|| watch::channel(config).0).subscribe())
    }

    pub fn connector_count(&self) -> usize {
        self.fleet.len()
    }

    /// Run every connector until `shutdown`, obeying the orders of its [`Control`]
    /// meanwhile, then give them the grace period to settle.
    pub async fn run(mut self, mut shutdown: Shutdown) -> RunReport {
        let (stop_helpers, helpers_shutdown) = shutdown::channel();
        let mut helpers = Vec::new();
        if let Some(path) = &self.status_file {
            helpers.push(tokio::spawn(status::keep_written(
                self.status.clone(),
                path.clone(),
                helpers_shutdown.clone(),
            )));
        }
        helpers.push(tokio::spawn(status::log_progress(self.status.clone(), self.progress_interval, helpers_shutdown)));

        self.fleet.start_all(&shutdown);
        tracing::info!("{} connector(s) running", self.fleet.len());
        loop {
            tokio::select! {
                _ = shutdown.requested() => break,
                Some(order) = self.orders.recv() => self.obey(order, &shutdown).await,
            }
        }

        tracing::info!(grace_period = ?self.grace_period, "shutting down: letting outstanding batches settle");
        let report = RunReport { unsettled: self.fleet.stop_all(self.grace_period).await };
        stop_helpers.trigger();
        for helper in helpers {
            let _ = helper.await;
        }
        if let Some(path) = &self.status_file
            && let Err(e) = status::write_final(&self.status, path)
        {
            tracing::warn!("cannot write the status file: {e}");
        }
        report
    }

    /// Carry out one order and answer it. (The one who asked may have gone; the
    /// order is carried out all the same.)
    async fn obey(&mut self, order: Order, shutdown: &Shutdown) {
        match order {
            Order::Act { role, key, action, answer } => {
                let _ = answer.send(self.act(role, &key, action, shutdown).await);
            }
            Order::Reload { answer } => {
                let _ = answer.send(self.reload(shutdown).await);
            }
        }
    }
}
