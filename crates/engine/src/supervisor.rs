//! The supervisor: keeps one connector running, instance after instance, whatever
//! its role.
//!
//! First it waits for the connector's component to be compiled (a component that
//! cannot be refuses this connector alone). Then, round after round, the connector
//! starts a fresh instance from its committed state (never from memory: the store is
//! the truth), opens it and runs its loop (see `source::round` and `sink::round`).
//! When a round ends with a trap or too many failures, the instance is dropped and,
//! after a capped exponential backoff, the next round begins. Backoff starts afresh
//! once an instance has made progress. State that cannot be trusted (corrupt) stops
//! the connector for good: nothing is silently reset, an operator decides.

use std::sync::Arc;

use crate::shutdown::Shutdown;
use crate::status::Reporter;
use ferry_capabilities::logging::{GuestLog, LogBudget};
use ferry_config::{BackoffConfig, Limits};
use ferry_contract::settings::Backoff;
use ferry_runtime::{ConnectorComponent, PendingComponent, Runtime, World};

/// A connector the supervisor can keep running.
pub trait Supervised: Send + Sync + 'static {
    type World: World;

    /// Its component, compiled or on its way.
    fn component(&self) -> &PendingComponent<Self::World>;

    /// Its limits (the log budget of all its instances comes from them).
    fn limits(&self) -> &Limits;

    fn restart_backoff(&self) -> BackoffConfig;

    /// One instance's life: from the committed state to the end of its loop.
    fn run_round(&self, round: Round<'_, Self::World>) -> impl Future<Output = RoundEnd> + Send;
}

/// What a round has to work with.
pub struct Round<'a, W: World> {
    pub runtime: &'a Runtime,
    pub component: &'a ConnectorComponent<W>,
    pub status: &'a Reporter,
    pub shutdown: &'a Shutdown,
    /// Where its guest's log lines go.
    pub log: GuestLog,
    /// 1 for the first instance.
    pub instance: u64,
}

/// How a round ended.
pub enum RoundEnd {
    /// Shut down gracefully.
    Stopped,
    /// This instance failed; try another.
    Failed { reason: String, made_progress: bool },
    /// Do not try again.
    Refused(String),
}

/// Run `connector` until shutdown. Call inside the connector's tracing span.
pub async fn supervise<C: Supervised>(runtime: Arc<Runtime>, connector: C, status: Reporter, mut shutdown: Shutdown) {
    let component = tokio::select! {
        compiled = connector.component().get() => match compiled {
            Ok(component) => component,
            Err(error) => return status.refused(&error.to_string()),
        },
        _ = shutdown.requested() => return status.stopped(),
    };
    let mut restart_backoff = Backoff::new(connector.restart_backoff());
    let limits = connector.limits();
    // One log budget for every instance: restarting must not refill it.
    let log_budget =
        LogBudget::new(limits.log_lines_per_second, limits.log_burst, status.meters().log_lines_dropped.clone());
    // Counting on from the instances before (a restart by an operator, a reload).
    let mut instance = status.instances();
    while !shutdown.is_requested() {
        instance += 1;
        let log = GuestLog::new(tracing::Span::current(), log_budget.clone());
        let round =
            Round { runtime: &runtime, component: &component, status: &status, shutdown: &shutdown, log, instance };
        let reason = match connector.run_round(round).await {
            RoundEnd::Stopped => break,
            RoundEnd::Refused(reason) => return status.refused(&reason),
            RoundEnd::Failed { reason, made_progress } => {
                if made_progress {
                    restart_backoff.reset();
                }
                reason
            }
        };
        let delay = restart_backoff.next_delay();
        status.failed(&reason, delay);
        shutdown.pause(delay).await;
    }
    status.stopped();
}
