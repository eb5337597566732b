//! The trait a sink author implements, and the answers it gives.

use std::fmt;

use serde::de::DeserializeOwned;

use crate::{Error, SinkBatch};

/// A sink connector: it writes the batches the host hands it, and says what became
/// of each one.
///
/// `write` must answer for every batch; the type makes that impossible to forget. The
/// host moves its offset past a batch only after [`Written::Ack`] (or
/// [`Written::Reject`]), so answer that only once the messages are *durably* written
/// (the transaction committed, the file fsynced). Until then the same messages come
/// again, after a retry, a trap or a restart: write idempotently, by
/// [`StoredMessage::id`](crate::StoredMessage::id) or by offset, if duplicates
/// matter.
pub trait Sink: Sized + 'static {
    /// The connector's settings, deserialized from its `plugin_config` (JSON).
    type Config: DeserializeOwned;

    /// Prepare the connector. An error stops this instance; the host retries with
    /// backoff.
    fn open(config: Self::Config) -> Result<Self, Error>;

    /// Write one batch. An `Err` is [`Written::Retry`] with the error's message: the
    /// host backs off and hands the same batch again.
    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error>;

    /// The connector is stopping gracefully, after the last batch was answered.
    fn close(&mut self) {}
}

/// What became of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Every message of the batch is durably written.
    Ack,
    /// Not every message was written (a connection dropped, a disk is full); hand me
    /// the same batch again later. The host logs the reason.
    Retry(String),
    /// The listed messages can never be written (poison); every other message of the
    /// batch is durably written. The host hands the listed ones to the dead-letter
    /// destination. An empty list is an [`Written::Ack`].
    Reject(Vec<Rejected>),
    /// Some message can never be written, the sink cannot tell which, and nothing of
    /// the batch was written. The host splits the batch until it isolates the bad
    /// message(s).
    Unwritable(String),
}

impl Written {
    /// [`Written::Retry`], with a reason for the operator's log.
    pub fn retry(reason: impl fmt::Display) -> Self {
        Written::Retry(reason.to_string())
    }

    /// [`Written::Unwritable`], with a reason for the operator's log.
    pub fn unwritable(reason: impl fmt::Display) -> Self {
        Written::Unwritable(reason.to_string())
    }

    /// [`Written::Reject`] of the messages at these indices of `batch.messages`, each
    /// with its reason.
    pub fn reject<R: fmt::Display>(rejected: impl IntoIterator<Item = (usize, R)>) -> Self {
        Written::Reject(rejected.into_iter().map(|(index, reason)| Rejected::new(index, reason)).collect())
    }
}

/// A message the sink can never write, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Its index in the batch's `messages` (not its offset).
    pub index: usize,
    pub reason: String,
}

impl Rejected {
    /// The message at `index` of the batch, rejected for `reason`.
    pub fn new(index: usize, reason: impl fmt::Display) -> Self {
        Rejected { index, reason: reason.to_string() }
    }
}
