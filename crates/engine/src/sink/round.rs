//! One round of a sink: an instance's life from the committed positions to the end
//! of its loop. The supervisor (`crate::supervisor`) runs rounds until shutdown.
//!
//! A reader is opened from the committed positions at the start of every round (a
//! new instance reads again what the last one did not settle), the instance is
//! opened, and the sink loop runs. After a graceful stop the guest is closed; after a
//! trap or too many failures the instance is simply dropped.

use super::SinkConnector;
use super::input::OpenError;
use super::sink_loop::SinkLoop;
use crate::exit::Exit;
use crate::supervisor::{Round, RoundEnd, Supervised};
use ferry_config::{BackoffConfig, Limits};
use ferry_runtime::{PendingComponent, SinkWorld};

impl Supervised for SinkConnector {
    type World = SinkWorld;

    fn component(&self) -> &PendingComponent<SinkWorld> {
        &self.component
    }

    fn limits(&self) -> &Limits {
        &self.sandbox.limits
    }

    fn restart_backoff(&self) -> BackoffConfig {
        self.settings.restart_backoff
    }

    async fn run_round(&self, round: Round<'_, SinkWorld>) -> RoundEnd {
        let Round { runtime, component, status, shutdown, log, instance } = round;
        let failed = |reason: String| RoundEnd::Failed { reason, made_progress: false };
        let mut reader = match self.input.open().await {
            Ok(reader) => reader,
            Err(OpenError::Untrusted(reason)) => return RoundEnd::Refused(reason),
            Err(OpenError::Failed(error)) => return failed(format!("cannot open the input: {error}")),
        };
        status.starting(instance, reader.starting_from());

        let mut guest = match runtime.instantiate(component, &self.sandbox, log, &status.meters().instance).await {
            Ok(guest) => guest,
            Err(error) => return failed(error.to_string()),
        };
        if let Err(error) = guest.open(&self.plugin_config).await {
            if error.is_trap() {
                status.trapped(&error.to_string());
            }
            return failed(error.to_string());
        }
        status.running();

        let mut sink_loop = SinkLoop {
            connector: self,
            instance: &mut guest,
            reader: reader.as_mut(),
            status,
            shutdown: shutdown.clone(),
            settled: 0,
        };
        let exit = sink_loop.run().await;
        let made_progress = sink_loop.settled > 0;
        if let Exit::Shutdown = exit
            && let Err(error) = guest.close().await
        {
            status.trapped(&error.to_string());
        }
        exit.round_end(status, made_progress)
    }
}
