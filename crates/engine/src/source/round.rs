//! One round of a source: an instance's life from the committed cursor to the end
//! of its loop. The supervisor (`crate::supervisor`) runs rounds until shutdown.
//!
//! The cursor is loaded from the state store at the start of every round (never kept
//! from the last instance: the store is the truth), the instance is opened with it,
//! and the source loop runs. After a graceful stop the guest is closed; after a trap
//! or too many failures the instance is simply dropped.

use super::SourceConnector;
use super::source_loop::SourceLoop;
use crate::cursor::StateError;
use crate::exit::Exit;
use crate::status::StartingFrom;
use crate::supervisor::{Round, RoundEnd, Supervised};
use ferry_config::{BackoffConfig, Limits};
use ferry_runtime::{PendingComponent, SourceWorld};

impl Supervised for SourceConnector {
    type World = SourceWorld;

    fn component(&self) -> &PendingComponent<SourceWorld> {
        &self.component
    }

    fn limits(&self) -> &Limits {
        &self.sandbox.limits
    }

    fn restart_backoff(&self) -> BackoffConfig {
        self.settings.restart_backoff
    }

    async fn run_round(&self, round: Round<'_, SourceWorld>) -> RoundEnd {
        let Round { runtime, component, status, shutdown, log, instance } = round;
        let failed = |reason: String| RoundEnd::Failed { reason, made_progress: false };
        let committed = match self.cursor.load().await {
            Ok(committed) => committed,
            Err(error @ StateError::Corrupt { .. }) => return RoundEnd::Refused(error.to_string()),
            Err(error) => return failed(format!("cannot load the committed cursor: {error}")),
        };
        status.starting(instance, StartingFrom::generation(committed.as_ref().map(|c| c.generation)));

        let mut guest = match runtime.instantiate(component, &self.sandbox, log, &status.meters().instance).await {
            Ok(guest) => guest,
            Err(error) => return failed(error.to_string()),
        };
        let state = committed.as_ref().map(|c| c.state.as_slice());
        if let Err(error) = guest.open(&self.plugin_config, state).await {
            if error.is_trap() {
                status.trapped(&error.to_string());
            }
            return failed(error.to_string());
        }
        status.running();

        let mut source_loop = SourceLoop {
            connector: self,
            instance: &mut guest,
            status,
            shutdown: shutdown.clone(),
            generation: committed.as_ref().map_or(0, |c| c.generation),
            committed: committed.map(|c| c.state),
            acked: 0,
        };
        let exit = source_loop.run().await;
        let made_progress = source_loop.acked > 0;
        if let Exit::Shutdown = exit
            && let Err(error) = guest.close().await
        {
            status.trapped(&error.to_string());
        }
        exit.round_end(status, made_progress)
    }
}
