//! The supervisor: keeps one connector running, instance after instance.
//!
//! First it waits for the connector's component to be compiled (a component that
//! cannot be refuses this connector alone). Each round loads the committed cursor from the state store (never from memory:
//! the store is the truth), starts a fresh instance, opens it with that cursor and
//! runs the source loop. When the loop ends with a trap or too many failures, the
//! instance is dropped and, after a capped exponential backoff, the next round
//! begins. Backoff starts afresh once an instance has delivered something. State that
//! cannot be trusted (corrupt) stops the connector for good: nothing is silently
//! reset, an operator decides.

use std::sync::Arc;

use super::SourceConnector;
use super::source_loop::{Exit, SourceLoop};
use crate::backoff::Backoff;
use crate::grants::logging::{GuestLog, LogBudget};
use crate::runtime::{Runtime, SourceComponent};
use crate::shutdown::Shutdown;
use crate::state::StateError;
use crate::status::Reporter;

/// Run `connector` until shutdown. Call inside the connector's tracing span.
pub async fn supervise(runtime: Arc<Runtime>, connector: SourceConnector, status: Reporter, mut shutdown: Shutdown) {
    let component = tokio::select! {
        compiled = connector.component.get() => match compiled {
            Ok(component) => component,
            Err(error) => return status.refused(&error.to_string()),
        },
        _ = shutdown.requested() => return status.stopped(),
    };
    let mut restart_backoff = Backoff::new(connector.settings.restart_backoff);
    let limits = &connector.sandbox.limits;
    // One log budget for every instance: restarting must not refill it.
    let log_budget =
        LogBudget::new(limits.log_lines_per_second, limits.log_burst, status.meters().log_lines_dropped.clone());
    let mut instances = 0;
    while !shutdown.is_requested() {
        instances += 1;
        let log = GuestLog::new(tracing::Span::current(), log_budget.clone());
        let reason = match run_instance(&runtime, &component, &connector, &status, &shutdown, log, instances).await {
            Round::Stopped => break,
            Round::Refused(reason) => {
                status.refused(&reason);
                return;
            }
            Round::Failed { reason, made_progress } => {
                if made_progress {
                    restart_backoff.reset();
                }
                reason
            }
        };
        let delay = restart_backoff.next_delay();
        status.failed(&reason, delay);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.requested() => {}
        }
    }
    status.stopped();
}

enum Round {
    /// Shut down gracefully.
    Stopped,
    /// This instance failed; try another.
    Failed { reason: String, made_progress: bool },
    /// Do not try again.
    Refused(String),
}

async fn run_instance(
    runtime: &Runtime,
    component: &SourceComponent,
    connector: &SourceConnector,
    status: &Reporter,
    shutdown: &Shutdown,
    log: GuestLog,
    instance_number: u64,
) -> Round {
    let failed = |reason: String| Round::Failed { reason, made_progress: false };
    let committed = match connector.cursor.load().await {
        Ok(committed) => committed,
        Err(error @ StateError::Corrupt { .. }) => return Round::Refused(error.to_string()),
        Err(error) => return failed(format!("cannot load the committed cursor: {error}")),
    };
    status.starting(instance_number, committed.as_ref().map(|c| c.generation));

    let fuel_meter = status.meters().fuel_consumed.clone();
    let mut instance = match runtime.instantiate(component, &connector.sandbox, log, fuel_meter).await {
        Ok(instance) => instance,
        Err(error) => return failed(error.to_string()),
    };
    let state = committed.as_ref().map(|c| c.state.as_slice());
    if let Err(error) = instance.open(&connector.plugin_config, state).await {
        if error.is_trap() {
            status.trapped(&error.to_string());
        }
        return failed(error.to_string());
    }
    status.running();

    let mut source_loop = SourceLoop {
        connector,
        instance: &mut instance,
        status,
        shutdown: shutdown.clone(),
        committed: committed.map(|c| c.state),
        acked: 0,
    };
    let exit = source_loop.run().await;
    let made_progress = source_loop.acked > 0;
    match exit {
        Exit::Shutdown => {
            if let Err(error) = instance.close().await {
                status.trapped(&error.to_string());
            }
            Round::Stopped
        }
        Exit::Failed { reason } => Round::Failed { reason, made_progress },
        Exit::Trapped(error) => {
            let reason = error.to_string();
            status.trapped(&reason);
            Round::Failed { reason, made_progress }
        }
    }
}
