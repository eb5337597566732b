//! What [`crate::export_source!`] expands to call: one [`Driver`] per instance, plus
//! the log lines an operator wants to see. Not public API.

use std::cell::RefCell;

use crate::bindings::iggy::connector::types as wire;
use crate::{Driver, Settled, Source};

/// The driver of this instance; empty until `open`.
pub struct Slot<S: Source>(RefCell<Option<Driver<S>>>);

impl<S: Source> Default for Slot<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Source> Slot<S> {
    pub const fn new() -> Self {
        Slot(RefCell::new(None))
    }

    pub fn open(&self, config: &str, committed_state: Option<&[u8]>) -> Result<(), wire::Error> {
        let mut slot = self.0.borrow_mut();
        if slot.is_some() {
            return Err(crate::Error::msg("open called twice on one instance").into());
        }
        let driver = Driver::open(config, committed_state)?;
        crate::debug!("opened at committed cursor {}", driver.committed_json());
        *slot = Some(driver);
        Ok(())
    }

    pub fn poll(&self) -> Result<Option<wire::Batch>, wire::Error> {
        let mut slot = self.0.borrow_mut();
        let driver = slot.as_mut().ok_or_else(|| crate::Error::msg("poll called before open"))?;
        Ok(driver.poll()?)
    }

    pub fn on_batch_result(&self, id: u64, result: wire::BatchResult) {
        let mut slot = self.0.borrow_mut();
        let Some(driver) = slot.as_mut() else {
            crate::error!("result for batch {id} before open; ignored");
            return;
        };
        match driver.on_batch_result(id, result) {
            Settled::Committed { .. } => {}
            Settled::Dropped { id, nack } => crate::warn!(
                "batch {id} not acknowledged ({nack}); producing it again from committed cursor {}",
                driver.committed_json()
            ),
            Settled::Unexpected { id, outstanding } => {
                crate::error!("result for batch {id}, but the outstanding batch is {outstanding:?}; ignored")
            }
        }
    }

    pub fn close(&self) {
        if let Some(driver) = self.0.borrow_mut().take() {
            crate::info!("closing at committed cursor {}", driver.committed_json());
            driver.close();
        }
    }
}
