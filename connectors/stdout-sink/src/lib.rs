//! A sink that prints every message it receives on standard output, one JSON object
//! per line, and acknowledges every batch: the way to see what a topic carries.
//!
//! The host logs a guest's standard output under the connector's key (rate-limited,
//! so a busy topic prints a sample, not everything). Each line is what
//! [`SinkBatch::message_json`] makes of a message, the same shape as `ferry log read`
//! and the file sink: `stream`, `topic`, `partition`, `offset`, `id` (a decimal
//! string), `timestamp`, `origin_timestamp`, `headers` (`{"key": {"<kind>": value}}`),
//! and `payload` when it is text or `payload_base64` when it is not.
//!
//! `plugin_config`: none (an empty object, or absent).

use std::io::Write;

use ferry_guest::{Error, Sink, SinkBatch, Written};
use serde::Deserialize;

/// No settings; unknown keys are refused, so a typo does not pass for a setting.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {}

struct StdoutSink;

impl Sink for StdoutSink {
    type Config = Config;

    fn open(_config: Config) -> Result<Self, Error> {
        ferry_guest::info!("stdout sink: printing every message");
        Ok(StdoutSink)
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        let mut out = std::io::stdout().lock();
        for message in &batch.messages {
            writeln!(out, "{}", batch.message_json(message)).map_err(|e| Error::msg(e).context("writing to stdout"))?;
        }
        out.flush().map_err(|e| Error::msg(e).context("flushing stdout"))?;
        Ok(Written::Ack)
    }
}

ferry_guest::export_sink!(StdoutSink);
