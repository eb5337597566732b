//! Delivery: where a source's batches go. A [`Target`] takes a whole batch and says,
//! once, whether all of it was durably accepted: the source loop commits the cursor
//! only on `Ok`. With `Ok` comes a [`Receipt`]: where the batch left each log that
//! knows its offsets, which the source loop commits with the cursor, so that a log
//! that later lost records the cursor counts as delivered is noticed (see
//! `LocalLog::verify_cursor`).
//!
//! The targets are `IggyTarget` (an Apache Iggy server, in `ferry-iggy`) and
//! `LocalLog` (the embedded default when none is configured, no server needed, in
//! `ferry-store`), each beside the store it writes to; [`NullTarget`] accepts
//! everything and keeps nothing, for benchmarks.

mod null;

use std::sync::Arc;

use async_trait::async_trait;

use crate::status::Stage;
use ferry_config::StreamConfig;
use ferry_contract::Message;

pub use null::NullTarget;

/// One batch on its way to a target. Cheap to clone: everything is shared.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The connector that produced it.
    pub connector: Arc<str>,
    /// Every stream/topic it must reach; delivered means delivered to all of them.
    pub streams: Arc<[StreamConfig]>,
    /// The messages, in order.
    pub messages: Arc<Vec<Message>>,
    /// The cursor the batch stages, if it stages one (a source's batch): a target that
    /// can keep it in the same transaction as the messages does (the local log), so
    /// that what was delivered and where the source is cannot part in a crash.
    pub cursor: Option<StagedCursor>,
}

/// A batch's staged cursor, as a target keeps it beside the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedCursor {
    /// The cursor store's lineage (see [`crate::cursor::CursorStore::lineage`]).
    pub lineage: u128,
    /// The generation its commit will have: one more than the committed cursor's.
    pub generation: u64,
    /// The bytes the guest staged.
    pub state: Vec<u8>,
}

/// A delivery that did not (entirely) succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// The target could not take the batch now (unreachable, refused, failed);
    /// the same batch may well succeed later.
    #[error("{0}")]
    Failed(String),
    /// The target cannot take this batch as it is (a message it cannot represent):
    /// the host rejects the batch.
    #[error("{0}")]
    Rejected(String),
}

/// What a target says about a batch it accepted: for each stream/topic whose offsets
/// it knows, where that log ended after the batch. Empty from targets that do not
/// keep offsets ferry can check (Iggy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Receipt {
    pub marks: Vec<LogMark>,
}

/// A position in one stream/topic of a log: every record below offset `end` is
/// behind the mark.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogMark {
    pub stream: String,
    pub topic: String,
    pub end: u64,
    /// The identity of the log's file the mark was taken in (the local log draws one
    /// for each topic file it creates), when known: offsets restart in a file deleted
    /// and created anew, so a mark is only good in the file it was taken in. `None`
    /// in the marks of an older ferry, and of a source's deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_id: Option<String>,
}

impl LogMark {
    /// A mark with no identity of the file.
    pub fn new(stream: impl Into<String>, topic: impl Into<String>, end: u64) -> Self {
        LogMark { stream: stream.into(), topic: topic.into(), end, log_id: None }
    }
}

impl std::fmt::Display for LogMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (offsets below {})", self.stream, self.topic, self.end)
    }
}

#[async_trait]
pub trait Target: Send + Sync {
    /// Deliver the batch to every stream of `delivery`. `Ok` means durably accepted
    /// by all of them, with the receipt; on `Err` some may have accepted it (the batch
    /// will be produced again: duplicates are allowed, loss is not). The target takes
    /// the batch, so that one handing the payloads on to a client of its own (Iggy's)
    /// moves them instead of sharing each one for the length of a send.
    async fn deliver(&self, delivery: Delivery) -> Result<Receipt, DeliveryError>;

    /// The stage its deliveries are timed as: [`Stage::Deliver`], or Iggy's
    /// `iggy_send` for an Iggy server.
    fn stage(&self) -> Stage {
        Stage::Deliver
    }
}
