//! A sink that sends every message to an HTTP endpoint through `wasi:http` (the
//! endpoint's `host:port` granted in `grants.network`), configured with the keys and
//! defaults of Iggy's HTTP sink, so that its `plugin_config` moves over unchanged.
//!
//! `batch_mode` says how messages become requests: `individual` (one request per
//! message, its JSON the body), `ndjson` or `json_array` (one request per batch),
//! `raw` (one request per message, its bytes as they are). A batch is acknowledged
//! only once every request for it was answered with a success code, so a message is
//! never lost: what is not answered is handed again (at least once). Every request
//! carries an `Idempotency-Key` made from its messages' stable ids (the same on
//! every replay), so an endpoint that honours it writes each message once.
//!
//! What becomes of an answer (`send.rs`): a success code is written; 429, 5xx or no
//! answer are tried again within the call (`max_retries`, `retry_delay` times
//! `retry_backoff_multiplier` up to `max_retry_delay`, `Retry-After` honoured), and
//! then the whole batch is handed again later by the host; 401/403/407 are handed
//! again too (the credentials, not the message, are wrong); any other answer (400,
//! 404, 413, 422, ...) means the server will never take that body: in the
//! per-message modes that message goes to the dead letters with the answer as its
//! reason, in the batch modes the host splits the batch until the message the server
//! refuses is alone. A body over `max_payload_size_bytes` is refused the same way,
//! without being sent.
//!
//! `plugin_config` (Iggy's keys and defaults; the table is in the README):
//! `url` (required), `method` (`POST`), `headers`, `timeout` (`30s`), `batch_mode`
//! (`individual`), `include_metadata` (true), `include_checksum` (false: Iggy's
//! checksum of a message read from Iggy), `include_origin_timestamp` (false),
//! `max_payload_size_bytes` (10 MiB, 0 for none), `success_status_codes` (200, 201,
//! 202, 204), `max_retries` (3), `retry_delay` (`1s`), `retry_backoff_multiplier`
//! (2), `max_retry_delay` (`30s`), `health_check_enabled` (false) with
//! `health_check_method` (`HEAD`), `verbose_logging` (false), `max_connections`
//! (accepted; the host keeps the connection), and ferry's `idempotency_key` (true).
//! `tls_danger_accept_invalid_certs = true` is refused, naming why.

mod body;
mod config;
mod send;

use ferry_guest::{Error, Rejected, Sink, SinkBatch, Written};

use crate::config::{BatchMode, Config};
use crate::send::{Sent, Transport, Wasi};

struct HttpSink<T = Wasi> {
    config: Config,
    transport: T,
}

impl<T: Transport + Default + 'static> Sink for HttpSink<T> {
    type Config = Config;

    fn open(config: Config) -> Result<Self, Error> {
        let mut sink = HttpSink { config, transport: T::default() };
        if let Some(method) = sink.config.health_check.clone() {
            let mut request = ferry_guest::http::Request::new(method.clone(), sink.config.url.clone());
            request.timeout = Some(sink.config.timeout);
            match sink.transport.send(&request) {
                Ok(response) if response.status < 400 => {}
                Ok(response) => {
                    return Err(Error::msg(format!(
                        "health check {method} {}: HTTP {}",
                        sink.config.url, response.status
                    )));
                }
                Err(error) => return Err(Error::msg(format!("health check {method} {}: {error}", sink.config.url))),
            }
        }
        ferry_guest::info!("http sink: {} {} ({:?})", sink.config.method, sink.config.url, sink.config.batch_mode);
        Ok(sink)
    }

    fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
        match self.config.batch_mode {
            BatchMode::Individual | BatchMode::Raw => Ok(self.each(batch)),
            BatchMode::Ndjson | BatchMode::JsonArray => Ok(self.whole(batch)),
        }
    }
}

impl<T: Transport> HttpSink<T> {
    /// One request per message; the ones the server refuses, rejected with its answer.
    fn each(&mut self, batch: &SinkBatch) -> Written {
        let mut rejected = Vec::new();
        for (index, message) in batch.messages.iter().enumerate() {
            let body = body::one(&self.config, batch, message);
            if let Some(over) = self.over_size(&body) {
                rejected.push(Rejected::new(index, over));
                continue;
            }
            let key = self.key(&[message.id]);
            match send::send(&self.config, &mut self.transport, body, &key) {
                Sent::Written => {}
                Sent::Refused(answer) => rejected.push(Rejected::new(index, answer)),
                Sent::Later(why) => return Written::retry(format!("message at offset {}: {why}", message.offset)),
            }
        }
        if rejected.is_empty() { Written::Ack } else { Written::Reject(rejected) }
    }

    /// One request for the whole batch; refused, the host splits it until the
    /// message the server refuses is alone.
    fn whole(&mut self, batch: &SinkBatch) -> Written {
        let body = body::many(&self.config, batch, &batch.messages);
        let refused = |why: String| {
            if batch.messages.len() == 1 {
                Written::Reject(vec![Rejected::new(0, why)])
            } else {
                Written::unwritable(why)
            }
        };
        if let Some(over) = self.over_size(&body) {
            return refused(over);
        }
        let ids: Vec<u128> = batch.messages.iter().map(|m| m.id).collect();
        let key = self.key(&ids);
        match send::send(&self.config, &mut self.transport, body, &key) {
            Sent::Written => Written::Ack,
            Sent::Refused(answer) => refused(answer),
            Sent::Later(why) => Written::retry(why),
        }
    }

    /// Why `body` is not sent: over `max_payload_size_bytes`.
    fn over_size(&self, body: &[u8]) -> Option<String> {
        let max = self.config.max_payload_size_bytes;
        (max > 0 && body.len() as u64 > max)
            .then(|| format!("a body of {} bytes is over max_payload_size_bytes ({max})", body.len()))
    }

    /// The `Idempotency-Key` of a request for the messages `ids`: the id of one, the
    /// first and last ids and the count of several (the same batch replayed has the
    /// same key).
    fn key(&self, ids: &[u128]) -> Vec<(String, String)> {
        if !self.config.idempotency_key {
            return Vec::new();
        }
        let key = match ids {
            [one] => format!("{one:032x}"),
            [first, .., last] => format!("{first:032x}-{last:032x}-{}", ids.len()),
            [] => return Vec::new(),
        };
        vec![("Idempotency-Key".into(), key)]
    }
}

ferry_guest::export_sink!(HttpSink);

#[cfg(test)]
mod tests;
