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
pub struct Shutdown {
    own: watch::Receiver<bool>,
    /// A shutdown this one is part of (the host's, for a connector's): when it is
    /// requested, so is this one, at that moment.
    outer: Option<Box<Shutdown>>,
}

/// A trigger and the first of its observers (clone it for more).
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown { own: rx, outer: None })
}

/// A trigger of its own whose observers also stop when `outer` is requested: a
/// connector's stop, which an operator pulls for that connector alone and the host's
/// shutdown pulls for all of them. The host's reaches them the moment it is
/// requested, not when the host gets round to it: a loop that looks between two
/// batches must not start one more in between.
pub fn channel_within(outer: &Shutdown) -> (ShutdownTrigger, Shutdown) {
    let (trigger, mut shutdown) = channel();
    shutdown.outer = Some(Box::new(outer.clone()));
    (trigger, shutdown)
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// Another observer of this trigger.
    pub fn subscribe(&self) -> Shutdown {
        Shutdown { own: self.0.subscribe(), outer: None }
    }
}

impl Shutdown {
    pub fn is_requested(&self) -> bool {
        *self.own.borrow() || self.outer.as_ref().is_some_and(|outer| outer.is_requested())
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
        let Shutdown { own, outer } = self;
        let outer = async {
            match outer {
                Some(outer) => Box::pin(outer.requested()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = own.wait_for(|stop| *stop) => {}
            () = outer => {}
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_shutdown_within_another_is_requested_the_moment_the_outer_one_is() {
        let (host, host_shutdown) = channel();
        let (connector, mut connector_shutdown) = channel_within(&host_shutdown);
        let (_other, other_shutdown) = channel_within(&host_shutdown);
        assert!(!connector_shutdown.is_requested());

        host.trigger();
        assert!(connector_shutdown.is_requested(), "seen at once, with nothing awaited in between");
        assert!(other_shutdown.is_requested());
        connector_shutdown.requested().await;
        drop(connector);
    }

    #[tokio::test]
    async fn a_shutdown_within_another_can_be_requested_alone() {
        let (_host, host_shutdown) = channel();
        let (connector, mut connector_shutdown) = channel_within(&host_shutdown);
        let (_other, other_shutdown) = channel_within(&host_shutdown);

        connector.trigger();
        connector_shutdown.requested().await;
        assert!(connector_shutdown.is_requested());
        assert!(!other_shutdown.is_requested(), "a sibling goes on");
        assert!(!host_shutdown.is_requested(), "the host goes on");
    }
}
