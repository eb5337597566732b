//! A source built against `iggy:connector@0.1.0`, the contract before `batch.packed`
//! (its WIT kept as it was in `wit/` beside this crate): what a connector compiled
//! for an older ferry looks like to this one. Ferry must refuse it, naming both
//! versions (see the README's "Versions of the contract").

wit_bindgen::generate!({
    path: "wit",
    world: "source-connector",
});

use exports::iggy::connector::source::Guest;
use iggy::connector::types::{Batch, BatchResult, Error, Message};

struct OldSource;

impl Guest for OldSource {
    fn open(_config: String, _state: Option<Vec<u8>>) -> Result<(), Error> {
        Ok(())
    }

    fn poll() -> Result<Option<Batch>, Error> {
        let message = Message { id: None, headers: vec![], payload: b"old".to_vec(), origin_timestamp: None };
        Ok(Some(Batch { id: 1, messages: vec![message], staged_state: None }))
    }

    fn on_batch_result(_id: u64, _result: BatchResult) {}

    fn close() {}
}

export!(OldSource);
