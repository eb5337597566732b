//! How the host stops: one trigger, observed by every task.
//!
//! SIGINT or SIGTERM pulls the trigger. Source loops stop *polling* but let the batch
//! they hold settle (delivered and committed, or NACKed), then close their guest;
//! the host waits for that up to the grace period. A second signal stops at once.

use tokio::sync::watch;

/// Pulls the trigger.
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<bool>);

/// Tells a task whether, or when, to stop.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// A trigger and the first of its observers (clone it for more).
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown(rx))
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// Another observer of this trigger.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}

impl Shutdown {
    pub fn is_requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Wait `duration`, or less if shutdown is requested meanwhile.
    pub async fn pause(&mut self, duration: std::time::Duration) {
        tokio::select! {
            _ = tokio::time::sleep(duration) => {}
            _ = self.requested() => {}
        }
    }

    /// Resolves once shutdown is requested (at once if it already was). If the
    /// trigger is dropped without firing, that counts as a request too: nobody is
    /// left who could stop us otherwise.
    pub async fn requested(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// SIGINT and SIGTERM, caught from the moment this is made: made first thing in
/// `ferry run`, so that a signal during set-up (connecting, compiling) stops ferry
/// cleanly rather than killing it by the default action.
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn listen() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
    }

    /// Resolves with the name of the next SIGINT or SIGTERM (at once for one
    /// received since the last call).
    pub async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }
}
