//! The trait a connector author implements, and the values it deals in.

use serde::{Serialize, de::DeserializeOwned};

use crate::{Error, Message, PackedMessages};

/// A source connector.
///
/// The SDK calls `poll` with the *committed* cursor: the one the host last saved
/// after a successful delivery. Return the next messages and the cursor that points
/// just after them. Do not keep your own notion of "where I am" in `self`: after a
/// NACK the SDK hands you the committed cursor again and expects the same records,
/// and after a crash a new instance starts from that cursor too.
pub trait Source: Sized + 'static {
    /// The connector's settings, deserialized from its `plugin_config` (JSON).
    type Config: DeserializeOwned;

    /// Where the connector is. `Default` is the cursor of a connector that never
    /// committed anything. Stored as JSON by the host.
    type Cursor: Serialize + DeserializeOwned + Default;

    /// Prepare the connector, given its config and the committed cursor.
    fn open(config: Self::Config, cursor: &Self::Cursor) -> Result<Self, Error>;

    /// The next batch after `cursor`, or `None` when there is nothing to deliver now.
    fn poll(&mut self, cursor: &Self::Cursor) -> Result<Option<Batch<Self::Cursor>>, Error>;

    /// The host acknowledged a batch: its cursor, `committed`, is now the committed
    /// one. Override this to act on what was delivered (delete or mark rows at the
    /// origin). Nothing here can undo the delivery, so a failure is yours to log and
    /// retry; the next `poll` sees `committed` and can finish what this left undone.
    fn on_ack(&mut self, _committed: &Self::Cursor) {}

    /// The host did not acknowledge a batch. The SDK has already dropped its cursor
    /// and logged the reason; override this to react (release a lease, count errors).
    fn on_nack(&mut self, _nack: &Nack) {}

    /// The connector is stopping gracefully.
    fn close(&mut self) {}
}

/// What `poll` returns: messages, and the cursor to commit once they are delivered.
///
/// The messages come as values (`messages`, the simple form), or written straight
/// into the form the host takes (`packed`, for a source that makes many small
/// messages and would rather not make a [`Message`] for each); both go, `messages`
/// first.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch<C> {
    pub messages: Vec<Message>,
    pub packed: PackedMessages,
    pub next: C,
}

impl<C> Batch<C> {
    /// A batch of `messages` after which the connector is at `next`.
    pub fn new(messages: Vec<Message>, next: C) -> Self {
        Batch { messages, packed: PackedMessages::new(), next }
    }

    /// A batch of the messages written into `packed`, after which the connector is
    /// at `next`.
    pub fn from_packed(packed: PackedMessages, next: C) -> Self {
        Batch { messages: Vec::new(), packed, next }
    }
}

/// Why the host did not acknowledge a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackReason {
    DeliveryFailed,
    StateSaveFailed,
    TimedOut,
    Rejected,
}

/// A NACK as the host reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    pub reason: NackReason,
    pub detail: String,
}

impl std::fmt::Display for Nack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reason = match self.reason {
            NackReason::DeliveryFailed => "delivery failed",
            NackReason::StateSaveFailed => "state save failed",
            NackReason::TimedOut => "timed out",
            NackReason::Rejected => "rejected by the host",
        };
        if self.detail.is_empty() { f.write_str(reason) } else { write!(f, "{reason}: {}", self.detail) }
    }
}
