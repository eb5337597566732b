//! Steering a running host: pause, resume or restart one connector, reset its
//! state, reload the config. The HTTP API and SIGHUP hold a [`Control`]; the host's
//! run loop obeys one order at a time (see `Host::run`), so that two operators
//! cannot, say, reset a connector's state while a reload restarts it.
//!
//! Every answer says what happened or, as a [`Refusal`], why nothing did.

use tokio::sync::{mpsc, oneshot};

use ferry_contract::Role;
use ferry_engine::status::Phase;

/// What can be done to one connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Let the outstanding batch settle, close the guest, poll no more until resumed.
    Pause,
    /// Start a paused connector again, from its committed state.
    Resume,
    /// Let the outstanding batch settle, then start a fresh instance from the
    /// committed state (a paused connector is started).
    Restart,
    /// Move the committed state aside (kept, as `ferry state reset` does), so that
    /// the connector starts from scratch when next started. Only while it is paused
    /// or stopped: never under a running connector.
    ResetState,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Restart => "restart",
            Action::ResetState => "reset its state",
        }
    }
}

/// What an action did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub key: String,
    /// Its phase now.
    pub phase: Phase,
    /// What happened, for a person.
    pub message: String,
}

/// What a reload did, by connector key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Drained, closed and started again with the new config or component, from
    /// the same committed state.
    pub changed: Vec<String>,
    /// Not touched.
    pub unchanged: Vec<String>,
    /// Connectors whose outstanding batch did not settle within the grace period
    /// while they were being stopped; that batch is produced (or read) again.
    pub unsettled: Vec<String>,
    /// Connectors that were stopped for the change but could not be started again,
    /// with why (their status says so too).
    pub failed: Vec<(String, String)>,
}

/// Why an order was not carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// No such connector (of that role).
    NotFound,
    /// Not in a state where this can be done (resetting a running connector's state).
    Conflict,
    /// The new config or a component of it is invalid; everything runs as before.
    Invalid,
    /// Ferry is shutting down, or this host cannot do it at all.
    Unavailable,
}

impl Refusal {
    pub fn new(kind: RefusalKind, message: impl Into<String>) -> Self {
        Refusal { kind, message: message.into() }
    }
}

/// An order, with where its answer goes.
pub(super) enum Order {
    Act { role: Role, key: String, action: Action, answer: oneshot::Sender<Result<Applied, Refusal>> },
    Reload { answer: oneshot::Sender<Result<Reloaded, Refusal>> },
}

/// Sends orders to a running host. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Control(mpsc::Sender<Order>);

/// Orders are obeyed one at a time; a few may wait.
const QUEUE: usize = 16;

pub(super) fn channel() -> (Control, mpsc::Receiver<Order>) {
    let (sender, receiver) = mpsc::channel(QUEUE);
    (Control(sender), receiver)
}

impl Control {
    /// Do `action` to the `role` connector `key`, once the host gets to it; resolves
    /// when it is done (a pause once the outstanding batch has settled).
    pub async fn act(&self, role: Role, key: &str, action: Action) -> Result<Applied, Refusal> {
        let (answer, answered) = oneshot::channel();
        self.send(Order::Act { role, key: key.to_string(), action, answer }, answered).await
    }

    /// Read the config file again and apply what changed (see `host::reload`).
    pub async fn reload(&self) -> Result<Reloaded, Refusal> {
        let (answer, answered) = oneshot::channel();
        self.send(Order::Reload { answer }, answered).await
    }

    async fn send<T>(&self, order: Order, answered: oneshot::Receiver<Result<T, Refusal>>) -> Result<T, Refusal> {
        let stopping = || Refusal::new(RefusalKind::Unavailable, "ferry is shutting down");
        self.0.send(order).await.map_err(|_| stopping())?;
        answered.await.map_err(|_| stopping())?
    }
}
