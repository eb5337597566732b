//! A source's instance: the four calls of the `source` interface, each under the
//! instance's limits (see [`super::instance`]).

use ferry_contract::wit::SourceConnector;
use ferry_contract::wit::types::{Batch, BatchResult};

use super::instance::{CallError, GuestStore, failed, within};

pub struct SourceInstance {
    guest: GuestStore,
    exports: SourceConnector,
}

impl SourceInstance {
    pub(super) fn new(guest: GuestStore, exports: SourceConnector) -> Self {
        SourceInstance { guest, exports }
    }

    pub async fn open(&mut self, config: &str, committed_state: Option<&[u8]>) -> Result<(), CallError> {
        let timeout = self.guest.begin_call("open")?;
        let source = self.exports.iggy_connector_source();
        let result = within(timeout, "open", source.call_open(self.guest.store(), config, committed_state)).await;
        let result = self.guest.end_call(result);
        result?.map_err(|e| failed("open", e))
    }

    pub async fn poll(&mut self) -> Result<Option<Batch>, CallError> {
        let timeout = self.guest.begin_call("poll")?;
        let source = self.exports.iggy_connector_source();
        let result = within(timeout, "poll", source.call_poll(self.guest.store())).await;
        let result = self.guest.end_call(result);
        result?.map_err(|e| failed("poll", e))
    }

    pub async fn on_batch_result(&mut self, id: u64, result: &BatchResult) -> Result<(), CallError> {
        let timeout = self.guest.begin_call("on-batch-result")?;
        let source = self.exports.iggy_connector_source();
        let call = source.call_on_batch_result(self.guest.store(), id, result);
        let outcome = within(timeout, "on-batch-result", call).await;
        self.guest.end_call(outcome)
    }

    pub async fn close(&mut self) -> Result<(), CallError> {
        let timeout = self.guest.begin_call("close")?;
        let source = self.exports.iggy_connector_source();
        let outcome = within(timeout, "close", source.call_close(self.guest.store())).await;
        self.guest.end_call(outcome)
    }
}
