//! # ferry-conformance: the kit behind `ferry test`
//!
//! The conformance kit behind `ferry test`: it drives one component through the
//! hard cases of the contract (`wit/source.wit`, `wit/sink.wit`) and reports, check
//! by check, which rule the component keeps and which it breaks.
//!
//! A source is run on fresh instances of the real runtime (same engine, limits,
//! grants and call wrappers as `ferry run`), with the committed cursor kept here in
//! memory: no Iggy, no local log, no state file. See `source.rs` for the order of
//! the checks, `replay.rs` and `restart.rs` for the hard cases, `sink.rs` for sinks.

mod driver;
mod history;
mod records;
mod replay;
mod report;
mod restart;
mod sink;
mod source;

use std::sync::Arc;
use std::time::Duration;

use ferry_capabilities::logging::{GuestLog, LogBudget};
use ferry_runtime::{
    CallError, ConnectorComponent, InstanceMeters, Runtime, Sandbox, SinkComponent, SourceComponent, World,
};
pub use report::{Check, Report, Verdict};

/// How the component under test runs.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The `plugin_config` its `open` receives, as JSON.
    pub plugin_config: String,
    pub sandbox: Sandbox,
    /// How long to wait after a poll that returned nothing before polling again.
    pub poll_interval: Duration,
}

impl Default for Setup {
    /// What a connector gets when its config says nothing: `plugin_config = {}`,
    /// default limits, no grants, polled again 100 ms after nothing (the default
    /// `poll_interval`).
    fn default() -> Self {
        Setup { plugin_config: "{}".into(), sandbox: Sandbox::default(), poll_interval: Duration::from_millis(100) }
    }
}

/// Every check of a source; see `source.rs`.
pub async fn test_source(runtime: &Runtime, component: &SourceComponent, setup: &Setup) -> Report {
    let mut report = Report::default();
    source::check(&Subject::new(runtime, component, setup), &mut report).await;
    report
}

/// Every check of a sink; see `sink.rs`.
pub async fn test_sink(runtime: &Runtime, component: &SinkComponent, setup: &Setup) -> Report {
    let mut report = Report::default();
    sink::check(&Subject::new(runtime, component, setup), &mut report).await;
    report
}

/// The component under test, and what makes a fresh instance of it.
struct Subject<'a, W: World> {
    runtime: &'a Runtime,
    component: &'a ConnectorComponent<W>,
    setup: &'a Setup,
    meters: InstanceMeters,
    /// One log budget for every instance, as the supervisor keeps one per connector.
    log_budget: Arc<LogBudget>,
}

impl<'a, W: World> Subject<'a, W> {
    fn new(runtime: &'a Runtime, component: &'a ConnectorComponent<W>, setup: &'a Setup) -> Self {
        let limits = &setup.sandbox.limits;
        let meters = InstanceMeters::default();
        let log_budget = LogBudget::new(limits.log_lines_per_second, limits.log_burst, Default::default());
        Subject { runtime, component, setup, meters, log_budget }
    }

    /// A fresh instance, in the connector's sandbox, logging under `ferry test`.
    async fn instance(&self) -> Result<W::Instance, CallError> {
        let log = GuestLog::new(tracing::info_span!("ferry_test"), self.log_budget.clone());
        self.runtime.instantiate(self.component, &self.setup.sandbox, log, &self.meters).await
    }
}
