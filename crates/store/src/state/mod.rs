//! Committed cursors: where each source is, saved only after its batch was delivered.
//!
//! The source loop sees a connector's store through `ferry_engine`'s `CursorStore`;
//! the one `ferry` uses is [`StateDir`], a directory whose cursor database holds the cursors of its
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

use ferry_contract::Durability;
use ferry_engine::cursor::{Committed, StateError};

pub use dir::{ConnectorState, StateDir};

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
