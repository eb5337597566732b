//! Committed cursors: where each source is, saved only after its batch was delivered.
//!
//! The source loop sees a connector's store through [`CursorStore`]; the one `ferry`
//! uses is [`StateDir`], a directory whose cursor database holds the cursors of its
//! connectors, written by one thread that commits what arrives together in one
//! transaction. A tenant's state lives apart from another's, in a directory of its
//! own; a damaged cursor stops its connector alone (each row has its checksum).
//!
//! With each cursor the store keeps the receipt of the delivery it followed: where
//! that batch left each log. It is the cursor's claim about the log ("everything up
//! to here was delivered"), checked against the log before the connector starts.

mod committer;
mod database;
mod dir;
mod legacy;

use async_trait::async_trait;

use crate::delivery::Receipt;

pub use dir::{ConnectorState, Durability, StateDir};

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

impl From<crate::sqlite::StoreError> for StateError {
    fn from(error: crate::sqlite::StoreError) -> Self {
        match error {
            crate::sqlite::StoreError::Corrupt { path, detail } => {
                StateError::Corrupt { path: path.display().to_string(), detail }
            }
            other => StateError::Io(other.to_string()),
        }
    }
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
