//! A sink built against `iggy:connector@0.2.0`, the contract before `stored-checksums`
//! (its WIT kept as it was in `wit/` beside this crate): what a connector compiled
//! for the previous patch release looks like to this host, which must run it (see the
//! README's "Versions of the contract"). It logs, through the 0.2.0 `logging` import,
//! the offsets of each batch it is handed, and acknowledges it.

wit_bindgen::generate!({
    path: "wit",
    world: "sink-connector",
});

use exports::iggy::connector::sink::{Guest, SinkBatch, WriteResult};
use iggy::connector::logging::{Level, log};
use iggy::connector::types::Error;

struct OldSink;

impl Guest for OldSink {
    fn open(_config: String) -> Result<(), Error> {
        Ok(())
    }

    fn write(batch: SinkBatch) -> WriteResult {
        let offsets: Vec<String> = batch.messages.iter().map(|m| m.offset.to_string()).collect();
        log(Level::Info, &format!("wrote offsets {}", offsets.join(",")));
        WriteResult::Ack
    }

    fn close() {}
}

export!(OldSink);
