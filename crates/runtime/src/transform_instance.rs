//! A transform's instance: the two calls of the `transform` interface, each under
//! the instance's limits (see [`super::instance`]).

use ferry_contract::wit::TransformComponent;
use ferry_contract::wit::transform_export::{Incoming, Outgoing};

use super::instance::{CallError, GuestStore, failed, within};

pub struct TransformInstance {
    guest: GuestStore,
    exports: TransformComponent,
}

impl TransformInstance {
    pub(super) fn new(guest: GuestStore, exports: TransformComponent) -> Self {
        TransformInstance { guest, exports }
    }

    pub async fn open(&mut self, config: &str) -> Result<(), CallError> {
        let timeout = self.guest.begin_call("open")?;
        let transform = self.exports.iggy_connector_transform();
        let result = within(timeout, "open", transform.call_open(self.guest.store(), config)).await;
        let result = self.guest.end_call(result);
        result?.map_err(|e| failed("open", e))
    }

    /// One entry per record of `records`, in order: the record as it goes on, or
    /// `None` where the transform drops it. How many entries there are is the
    /// caller's to check.
    pub async fn transform(&mut self, records: &[Incoming]) -> Result<Vec<Option<Outgoing>>, CallError> {
        let timeout = self.guest.begin_call("transform")?;
        let transform = self.exports.iggy_connector_transform();
        let result = within(timeout, "transform", transform.call_transform(self.guest.store(), records)).await;
        let result = self.guest.end_call(result);
        result?.map_err(|e| failed("transform", e))
    }
}
