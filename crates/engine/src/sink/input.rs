//! Where a sink's messages come from, and where its progress is kept.
//!
//! An [`Input`] is the sink's side of a log: the local log (positions kept in
//! Ferry's state store, `LocalLogInput` in `ferry-store`) or an Iggy server (offsets
//! kept by the server, for the sink's consumer or group, `IggyInput` in `ferry-iggy`).
//! Every instance of a sink opens a [`Reader`] from the committed positions, so a
//! restarted instance reads again exactly what was not settled.

use async_trait::async_trait;

use crate::status::StartingFrom;
use ferry_contract::{StoredChecksums, header_size};

pub use ferry_contract::wit::sink_export::{SinkBatch, StoredMessage};

/// Reading the input, or storing a position, failed (for now: it is tried again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Why a reader could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// For now: the next instance tries again.
    #[error(transparent)]
    Failed(#[from] InputError),
    /// The committed positions cannot be trusted (corrupt, or not a sink's): the
    /// connector is refused, nothing is overwritten, an operator decides.
    #[error("{0}")]
    Untrusted(String),
}

#[async_trait]
pub trait Input: Send + Sync {
    /// A reader from the committed positions.
    async fn open(&self) -> Result<Box<dyn Reader>, OpenError>;
}

#[async_trait]
pub trait Reader: Send {
    /// Where this reader started: positions of Ferry's state store (and their
    /// generation), or offsets kept elsewhere; for the instance's first log line and
    /// its status.
    fn starting_from(&self) -> StartingFrom;

    /// The next batch after what this reader read: consecutive messages of one
    /// partition, within `budget` (see [`Budget::trim`]), or a message that cannot be
    /// handed over as it is stored (see [`Unreadable`]), or `None` when there is
    /// nothing now.
    async fn next(&mut self, budget: Budget) -> Result<Option<Read>, InputError>;

    /// Store, durably, that every message of `batch` is settled: the position of its
    /// partition moves past it. Until this returns `Ok`, the batch is read again by
    /// the next reader. `Ok` carries the generation of the stored positions when the
    /// store counts them (Ferry's state store does; Iggy does not).
    async fn commit(&mut self, batch: &SinkBatch) -> Result<Option<u64>, InputError>;
}

/// What a reader read next.
#[derive(Debug, Clone)]
pub enum Read {
    /// A batch, and Iggy's checksums of its messages (none from the local log).
    Batch(SinkBatch, StoredChecksums),
    Unreadable(Unreadable),
}

/// A stored message that cannot be handed to the guest as it is stored (its headers
/// do not parse, say). Its partition reads nothing past it until it is settled: sent
/// to the dead letters and committed like a batch, or skipped by an operator. It is
/// never dropped unsaid.
#[derive(Debug, Clone)]
pub struct Unreadable {
    /// The message alone, as a batch: its id, payload and timestamps, without what
    /// cannot be read.
    pub batch: SinkBatch,
    /// What is wrong with it, for its dead letter and the log.
    pub reason: String,
    /// What an operator does to skip it when there is nowhere to put it (a command).
    pub skip: String,
}

impl Unreadable {
    /// Its offset.
    pub fn offset(&self) -> u64 {
        self.batch.messages.first().map_or(0, |m| m.offset)
    }
}

/// How much one batch may hold: `messages` (the sink's `batch_length`) and `bytes` of
/// payloads and headers (its `limits.max_batch_bytes`, which is what the guest's
/// memory is sized for). A batch always holds at least one message, so that a
/// message bigger than the budget is handed over alone rather than never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub messages: u32,
    pub bytes: u64,
}

impl Budget {
    /// Keep the longest prefix of `batch` within the byte budget (at least one message).
    pub fn trim(&self, batch: &mut SinkBatch) {
        let mut total = 0u64;
        let keep = batch
            .messages
            .iter()
            .position(|m| {
                total += m.payload.len() as u64 + m.headers.iter().map(header_size).sum::<u64>();
                total > self.bytes
            })
            .unwrap_or(batch.messages.len())
            .max(1);
        batch.messages.truncate(keep);
    }
}

/// The offset after `batch`'s last message: the position a commit stores.
pub fn end_of(batch: &SinkBatch) -> u64 {
    batch.messages.last().map_or(0, |m| m.offset + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_contract::Uint128;

    fn batch(sizes: &[usize]) -> SinkBatch {
        let message = |(offset, size): (usize, &usize)| StoredMessage {
            offset: offset as u64,
            id: Uint128::from(0),
            timestamp: 0,
            origin_timestamp: None,
            headers: vec![],
            payload: vec![0; *size],
        };
        SinkBatch {
            stream: "s".into(),
            topic: "t".into(),
            partition: 0,
            messages: sizes.iter().enumerate().map(message).collect(),
        }
    }

    #[test]
    fn a_batch_is_trimmed_to_its_byte_budget_but_never_to_nothing() {
        let budget = Budget { messages: 100, bytes: 10 };
        let mut fits = batch(&[4, 6, 1]);
        budget.trim(&mut fits);
        assert_eq!(fits.messages.len(), 2, "4 + 6 fit, the third would pass 10");
        let mut big = batch(&[50, 1]);
        budget.trim(&mut big);
        assert_eq!(big.messages.len(), 1, "a message over the budget goes alone");
        assert_eq!(end_of(&big), 1);
    }
}
