//! Where a sink's messages come from, and where its progress is kept.
//!
//! An [`Input`] is the sink's side of a log: the local log (positions kept in
//! Ferry's state store, see `crate::local_log::input`) or an Iggy server (offsets
//! kept by its consumer group, see `crate::iggy::consumer`). Every instance of a
//! sink opens a [`Reader`] from the committed positions, so a restarted instance
//! reads again exactly what was not settled.

use async_trait::async_trait;

pub use crate::runtime::bindings::sink_export::{SinkBatch, StoredMessage};

/// Reading the input, or storing a position, failed (for now: it is tried again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

#[async_trait]
pub trait Input: Send + Sync {
    /// A reader from the committed positions.
    async fn open(&self) -> Result<Box<dyn Reader>, InputError>;
}

#[async_trait]
pub trait Reader: Send {
    /// The generation of the positions this reader started from, when the store
    /// counts them (Ferry's state store does; Iggy does not): where an instance
    /// starts, for its first log line and its status.
    fn generation(&self) -> Option<u64> {
        None
    }

    /// The next batch after what this reader read: at most `max` consecutive
    /// messages of one partition, or `None` when there is nothing now.
    async fn next(&mut self, max: u32) -> Result<Option<SinkBatch>, InputError>;

    /// Store, durably, that every message of `batch` is settled: the position of its
    /// partition moves past it. Until this returns `Ok`, the batch is read again by
    /// the next reader. `Ok` carries the generation of the stored positions when the
    /// store counts them (Ferry's state store does; Iggy does not).
    async fn commit(&mut self, batch: &SinkBatch) -> Result<Option<u64>, InputError>;
}

/// The offset after `batch`'s last message: the position a commit stores.
pub fn end_of(batch: &SinkBatch) -> u64 {
    batch.messages.last().map_or(0, |m| m.offset + 1)
}
