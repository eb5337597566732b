//! One live guest instance and the four calls of the contract.
//!
//! A call either returns what the guest returned, or fails with [`CallError`]:
//! the guest reported an error (the instance is fine), or it trapped (a panic,
//! `unreachable`, an out-of-bounds access, a host-side failure during the call). A
//! trapped instance is never called again: its state may be half-updated, so the
//! supervisor drops it and starts a new one from the committed cursor.

use wasmtime::Store;

use super::bindings::SourceConnector;
use super::bindings::types::{Batch, BatchResult};
use super::context::GuestContext;

/// How a guest call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The guest returned `err(error)`.
    #[error("`{call}` returned an error: {message}")]
    Failed { call: &'static str, message: String },
    /// The guest trapped; the instance is unusable.
    #[error("the guest trapped in `{call}`: {}", trap_summary(.error))]
    Trapped { call: &'static str, error: wasmtime::Error },
}

impl CallError {
    pub fn is_trap(&self) -> bool {
        matches!(self, CallError::Trapped { .. })
    }
}

/// The trap and the guest backtrace wasmtime attached, on one line.
fn trap_summary(error: &wasmtime::Error) -> String {
    let text = format!("{error:#}");
    text.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" | ")
}

/// A guest instance in its own store.
pub struct SourceInstance {
    store: Store<GuestContext>,
    bindings: SourceConnector,
}

impl SourceInstance {
    pub(super) fn new(store: Store<GuestContext>, bindings: SourceConnector) -> Self {
        SourceInstance { store, bindings }
    }

    pub async fn open(&mut self, config: &str, committed_state: Option<&[u8]>) -> Result<(), CallError> {
        let guest = self.bindings.iggy_connector_source();
        let result = guest
            .call_open(&mut self.store, config, committed_state)
            .await
            .map_err(|error| CallError::Trapped { call: "open", error })?;
        result.map_err(|e| CallError::Failed { call: "open", message: e.message })
    }

    pub async fn poll(&mut self) -> Result<Option<Batch>, CallError> {
        let guest = self.bindings.iggy_connector_source();
        let result =
            guest.call_poll(&mut self.store).await.map_err(|error| CallError::Trapped { call: "poll", error })?;
        result.map_err(|e| CallError::Failed { call: "poll", message: e.message })
    }

    pub async fn on_batch_result(&mut self, id: u64, result: &BatchResult) -> Result<(), CallError> {
        let guest = self.bindings.iggy_connector_source();
        guest
            .call_on_batch_result(&mut self.store, id, result)
            .await
            .map_err(|error| CallError::Trapped { call: "on-batch-result", error })
    }

    pub async fn close(&mut self) -> Result<(), CallError> {
        let guest = self.bindings.iggy_connector_source();
        guest.call_close(&mut self.store).await.map_err(|error| CallError::Trapped { call: "close", error })
    }
}
