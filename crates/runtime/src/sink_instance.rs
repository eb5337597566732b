//! A sink's instance: the three calls of the `sink` interface, each under the
//! instance's limits (see [`super::instance`]).

use ferry_contract::StoredChecksums;
use ferry_contract::wit::SinkConnector;
use ferry_contract::wit::sink_export::{SinkBatch, WriteResult};

use super::instance::{CallError, GuestStore, failed, within};

pub struct SinkInstance {
    guest: GuestStore,
    exports: SinkConnector,
}

impl SinkInstance {
    pub(super) fn new(guest: GuestStore, exports: SinkConnector) -> Self {
        SinkInstance { guest, exports }
    }

    pub async fn open(&mut self, config: &str) -> Result<(), CallError> {
        let timeout = self.guest.begin_call("open")?;
        let sink = self.exports.iggy_connector_sink();
        let result = within(timeout, "open", sink.call_open(self.guest.store(), config)).await;
        let result = self.guest.end_call(result);
        result?.map_err(|e| failed("open", e))
    }

    /// The checksums of the batch read (which every `write` until the next batch's
    /// is a part of), for the guest's `stored-checksums` import.
    pub fn hand_checksums(&mut self, checksums: StoredChecksums) {
        self.guest.store().data_mut().checksums = checksums;
    }

    pub async fn write(&mut self, batch: &SinkBatch) -> Result<WriteResult, CallError> {
        let timeout = self.guest.begin_call("write")?;
        let sink = self.exports.iggy_connector_sink();
        let result = within(timeout, "write", sink.call_write(self.guest.store(), batch)).await;
        self.guest.end_call(result)
    }

    pub async fn close(&mut self) -> Result<(), CallError> {
        let timeout = self.guest.begin_call("close")?;
        let sink = self.exports.iggy_connector_sink();
        let outcome = within(timeout, "close", sink.call_close(self.guest.store())).await;
        self.guest.end_call(outcome)
    }
}
