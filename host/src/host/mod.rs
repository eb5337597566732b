//! The host: the connectors of a config, each wired to its component, its input or
//! target, and its state (see `wiring.rs`), run side by side until shutdown.
//!
//! Everything that can be checked before running is checked in [`Host::from_config`]
//! (every component against the contract, every state file for corruption, every
//! lock), so that bad input stops `ferry run` at once with an error naming it.
//! Compiling is the exception: it can take long, and a component built to exhaust the
//! compiler must cost only its own connectors, so every component compiles in the
//! background (bounded, see [`crate::runtime::compile`]) while the others start, and
//! a component that cannot be compiled refuses the connectors that use it. What goes
//! wrong later (a trap, a failing target) is one connector's problem, handled by its
//! supervisor.

mod wiring;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::config::ConfigError;
use crate::runtime::{LoadError, Runtime, World};
use crate::shutdown::{self, Shutdown};
use crate::sink::SinkConnector;
use crate::source::SourceConnector;
use crate::state::StateError;
use crate::status::{self, Reporter, StatusBoard};
use crate::supervisor::{Supervised, supervise};
pub use wiring::engine_options;

/// What stops a host from starting. (The problems are parts of the message, not
/// error sources, so that a report of the chain says each thing once.)
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("connector `{key}`: {problem}")]
    Component { key: String, problem: LoadError },
    #[error("connector `{key}`: {problem}")]
    State { key: String, problem: StateError },
    #[error("connector `{key}`: {problem}")]
    Log { key: String, problem: crate::local_log::LogCheckError },
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
    sources: Vec<(SourceConnector, Option<String>)>,
    sinks: Vec<(SinkConnector, Option<String>)>,
    status: Arc<StatusBoard>,
    grace_period: Duration,
    progress_interval: Duration,
    status_file: Option<PathBuf>,
}

impl Host {
    /// An empty host on `runtime`; add connectors with [`Host::add_source`] and
    /// [`Host::add_sink`].
    pub fn new(runtime: Arc<Runtime>) -> Host {
        Host {
            runtime,
            sources: Vec::new(),
            sinks: Vec::new(),
            status: StatusBoard::new(),
            grace_period: Duration::from_secs(10),
            progress_interval: Duration::from_secs(10),
            status_file: None,
        }
    }

    /// The runtime the connectors run on.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    pub fn add_source(&mut self, connector: SourceConnector, name: Option<String>) {
        self.sources.push((connector, name));
    }

    pub fn add_sink(&mut self, connector: SinkConnector, name: Option<String>) {
        self.sinks.push((connector, name));
    }

    pub fn set_grace_period(&mut self, grace_period: Duration) {
        self.grace_period = grace_period;
    }

    /// The status board (subscribe to it for events).
    pub fn status(&self) -> Arc<StatusBoard> {
        self.status.clone()
    }

    pub fn connector_count(&self) -> usize {
        self.sources.len() + self.sinks.len()
    }

    /// Run every connector until `shutdown`, then give them the grace period to settle.
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

        let mut tasks = Vec::new();
        for (connector, name) in std::mem::take(&mut self.sources) {
            let (key, tenant) = (connector.key.clone(), connector.tenant.clone());
            tasks.push(self.spawn(connector, key, tenant, name, &shutdown));
        }
        for (connector, name) in std::mem::take(&mut self.sinks) {
            let (key, tenant) = (connector.key.clone(), connector.tenant.clone());
            tasks.push(self.spawn(connector, key, tenant, name, &shutdown));
        }
        tracing::info!("{} connector(s) running", tasks.len());

        shutdown.requested().await;
        tracing::info!(grace_period = ?self.grace_period, "shutting down: letting outstanding batches settle");
        let now = tokio::time::Instant::now();
        // A grace period too long to add up is as good as forever.
        let deadline = now.checked_add(self.grace_period).unwrap_or(now + Duration::from_secs(86_400 * 365));
        let mut report = RunReport::default();
        for (key, mut task, supervisor) in tasks {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                supervisor.abort();
                tracing::warn!(key = %key, "did not settle within the grace period; its last batch will be produced again");
                report.unsettled.push(key.to_string());
            }
        }
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
}

impl Host {
    /// Start supervising `connector` in its span: the task that reports its end, and
    /// the handle that aborts it.
    fn spawn<C: Supervised>(
        &self,
        connector: C,
        key: Arc<str>,
        tenant: Option<Arc<str>>,
        name: Option<String>,
        shutdown: &Shutdown,
    ) -> Connector {
        let span = status::connector_span(&key, tenant.as_deref());
        let reporter = self.status.reporter(&key, <C::World as World>::ROLE, name, tenant.as_deref());
        let supervisor = tokio::spawn(
            supervise(self.runtime.clone(), connector, reporter.clone(), shutdown.clone()).instrument(span),
        );
        let abort = supervisor.abort_handle();
        (key, tokio::spawn(report_a_crash(supervisor, reporter)), abort)
    }
}

/// A connector's task: its key, the task that ends when its supervisor does, and
/// what aborts the supervisor.
type Connector = (Arc<str>, tokio::task::JoinHandle<()>, tokio::task::AbortHandle);

/// Wait for a connector's supervisor; if it died of a panic (a bug in ferry), say so
/// in its status instead of letting it look alive.
async fn report_a_crash(supervisor: tokio::task::JoinHandle<()>, reporter: Reporter) {
    if let Err(error) = supervisor.await
        && error.is_panic()
    {
        let panic = error.into_panic();
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        reporter.crashed(&message);
    }
}
