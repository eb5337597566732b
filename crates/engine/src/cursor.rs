//! The port between a source and where its cursor is kept: the source loop commits
//! through a [`CursorStore`] and never knows what is behind it (Ferry's state
//! directory, `ferry-store`; a target that keeps cursors beside its batches).

use async_trait::async_trait;

use crate::delivery::Receipt;

/// A committed cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The bytes the guest staged, exactly.
    pub state: Vec<u8>,
    /// How many commits this connector has made (1 for the first).
    pub generation: u64,
    /// When, in microseconds since the Unix epoch.
    pub committed_at_micros: u64,
    /// Where the delivery of the batch this cursor follows left each log.
    pub receipt: Receipt,
}

/// Why a cursor could not be loaded or saved.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StateError {
    /// The state exists but cannot be trusted. Nothing was changed; an operator
    /// decides (`ferry state show`, `ferry state reset`).
    #[error("{path}: corrupt state: {detail}")]
    Corrupt { path: String, detail: String },
    /// Another process (a running `ferry`) holds this connector's state.
    #[error("the state of connector `{key}` is in use by {holder} ({path}); is that ferry still running?")]
    Locked { key: String, path: String, holder: String },
    /// Reading or writing failed.
    #[error("{0}")]
    Io(String),
}

/// The committed cursor of one connector.
#[async_trait]
pub trait CursorStore: Send + Sync {
    /// The last committed cursor, or `None` if the connector never committed one.
    async fn load(&self) -> Result<Option<Committed>, StateError>;

    /// Durably replace the committed cursor with `state`, and the receipt with that of
    /// the delivery it follows. When this returns `Ok`, a crash at any later instant
    /// still finds both; when it returns `Err`, the previous cursor is still the
    /// committed one.
    async fn commit(&self, state: Vec<u8>, receipt: Receipt) -> Result<Committed, StateError>;

    /// Which life of this cursor it is: a number fixed when the store was created and
    /// drawn anew when it is reset. A target that keeps cursors beside what it
    /// delivered keeps it with them, so that a cursor of an earlier life is never
    /// taken for this one's.
    fn lineage(&self) -> u128;
}
