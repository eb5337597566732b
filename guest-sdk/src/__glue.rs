//! What [`crate::export_source!`], [`crate::export_sink!`] and
//! [`crate::export_transform!`] expand to call: one
//! driver per instance, plus the log lines an operator wants to see. Not public API.

use std::cell::RefCell;

use crate::bindings::iggy::connector::types as wire;
use crate::bindings::sink::exports::iggy::connector::sink as sink_wire;
use crate::bindings::transform::exports::iggy::connector::transform as transform_wire;
use crate::{Driver, Settled, Sink, SinkDriver, Source, Transform, TransformDriver};

/// The driver of this instance; empty until `open`.
pub struct Slot<D>(RefCell<Option<D>>);

impl<D> Default for Slot<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D> Slot<D> {
    pub const fn new() -> Self {
        Slot(RefCell::new(None))
    }

    /// Open the driver, once per instance.
    fn fill(&self, open: impl FnOnce() -> Result<D, crate::Error>) -> Result<(), wire::Error> {
        let mut slot = self.0.borrow_mut();
        if slot.is_some() {
            return Err(crate::Error::msg("open called twice on one instance").into());
        }
        *slot = Some(open()?);
        Ok(())
    }

    /// Run `call` on the open driver, or say that `what` came before `open`.
    fn with<R>(&self, what: &str, call: impl FnOnce(&mut D) -> R) -> Result<R, crate::Error> {
        let mut slot = self.0.borrow_mut();
        let driver = slot.as_mut().ok_or_else(|| crate::Error::msg(format!("{what} called before open")))?;
        Ok(call(driver))
    }

    fn take(&self) -> Option<D> {
        self.0.borrow_mut().take()
    }
}

impl<S: Source> Slot<Driver<S>> {
    pub fn open(&self, config: &str, committed_state: Option<&[u8]>) -> Result<(), wire::Error> {
        self.fill(|| {
            let driver = Driver::open(config, committed_state)?;
            crate::debug!("opened at committed cursor {}", driver.committed_json());
            Ok(driver)
        })
    }

    pub fn poll(&self) -> Result<Option<wire::Batch>, wire::Error> {
        Ok(self.with("poll", |driver| driver.poll())??)
    }

    pub fn on_batch_result(&self, id: u64, result: wire::BatchResult) {
        let settled = self.with("on-batch-result", |driver| match driver.on_batch_result(id, result) {
            Settled::Committed { .. } => {}
            Settled::Dropped { id, nack } => crate::warn!(
                "batch {id} not acknowledged ({nack}); producing it again from committed cursor {}",
                driver.committed_json()
            ),
            Settled::Unexpected { id, outstanding } => {
                crate::error!("result for batch {id}, but the outstanding batch is {outstanding:?}; ignored")
            }
        });
        if settled.is_err() {
            crate::error!("result for batch {id} before open; ignored");
        }
    }

    pub fn close(&self) {
        if let Some(driver) = self.take() {
            crate::info!("closing at committed cursor {}", driver.committed_json());
            driver.close();
        }
    }
}

impl<K: Sink> Slot<SinkDriver<K>> {
    pub fn open(&self, config: &str) -> Result<(), wire::Error> {
        self.fill(|| {
            let driver = SinkDriver::open(config)?;
            crate::debug!("sink opened");
            Ok(driver)
        })
    }

    pub fn write(&self, batch: sink_wire::SinkBatch) -> sink_wire::WriteResult {
        match self.with("write", |driver| driver.write(batch)) {
            Ok(answer) => {
                if let Some(why) = answer.overruled {
                    crate::error!("{why}");
                }
                answer.result
            }
            Err(error) => sink_wire::WriteResult::Retry(error.message().to_string()),
        }
    }

    pub fn close(&self) {
        if let Some(driver) = self.take() {
            crate::info!("closing");
            driver.close();
        }
    }
}

impl<T: Transform> Slot<TransformDriver<T>> {
    pub fn open(&self, config: &str) -> Result<(), wire::Error> {
        self.fill(|| {
            let driver = TransformDriver::open(config)?;
            crate::debug!("transform opened");
            Ok(driver)
        })
    }

    pub fn transform(
        &self,
        records: Vec<transform_wire::Incoming>,
    ) -> Result<Vec<Option<transform_wire::Outgoing>>, wire::Error> {
        Ok(self.with("transform", |driver| driver.transform(records))??)
    }
}
