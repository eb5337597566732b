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

/// Resolves with the name of the first SIGINT or SIGTERM received.
pub async fn signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(tokio::select! {
        _ = interrupt.recv() => "SIGINT",
        _ = terminate.recv() => "SIGTERM",
    })
}
