//! The sink side of the contract: config, one batch in, one answer out, and the
//! checks that keep an answer the host would refuse from ever reaching it.
//!
//! Plain Rust with no host calls, so it is tested natively (see the tests at the
//! bottom); the exported component only adds logging around it.

use crate::bindings::sink::exports::iggy::connector::sink as wire;
use crate::{Error, Rejected, Sink, SinkBatch, Written};

/// Drives a [`Sink`] through the host's protocol.
pub struct SinkDriver<K: Sink> {
    sink: K,
}

/// The answer for one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What the host is told.
    pub result: wire::WriteResult,
    /// Set when the sink's own answer could not be passed on (a bug in the connector)
    /// and was turned into a retry: why, for an error line in the log.
    pub overruled: Option<String>,
}

impl Answer {
    fn told(result: wire::WriteResult) -> Self {
        Answer { result, overruled: None }
    }
}

impl<K: Sink> SinkDriver<K> {
    /// Parse the config, then open the sink.
    pub fn open(config_json: &str) -> Result<Self, Error> {
        let config =
            serde_json::from_str(config_json).map_err(|e| Error::msg(format!("invalid plugin_config: {e}")))?;
        Ok(SinkDriver { sink: K::open(config)? })
    }

    /// Hand one batch to the sink and turn its answer into the host's.
    pub fn write(&mut self, batch: wire::SinkBatch) -> Answer {
        let batch = SinkBatch::from(batch);
        if batch.messages.is_empty() {
            // The contract promises a batch is never empty; should one come, there is
            // nothing to write, and the sink need not handle the case.
            return Answer::told(wire::WriteResult::Ack);
        }
        match self.sink.write(&batch) {
            Ok(Written::Ack) => Answer::told(wire::WriteResult::Ack),
            Ok(Written::Retry(reason)) => Answer::told(wire::WriteResult::Retry(reason)),
            Ok(Written::Unwritable(reason)) => Answer::told(wire::WriteResult::Unwritable(reason)),
            Ok(Written::Reject(rejected)) => reject(&batch, rejected),
            Err(error) => Answer::told(wire::WriteResult::Retry(error.message().to_string())),
        }
    }

    /// The sink, for tests and inspection.
    pub fn sink(&self) -> &K {
        &self.sink
    }

    /// Close the sink.
    pub fn close(mut self) {
        self.sink.close();
    }
}

/// A reject list as the host accepts it: every index inside the batch, each once, in
/// order (two reasons for one message are joined). An index outside the batch is a
/// bug the host would refuse; it becomes a retry that says so, since passing the
/// others on would silently write off a message the sink meant to reject.
fn reject(batch: &SinkBatch, mut rejected: Vec<Rejected>) -> Answer {
    if rejected.is_empty() {
        return Answer::told(wire::WriteResult::Ack);
    }
    let len = batch.messages.len();
    if let Some(bad) = rejected.iter().find(|r| r.index >= len) {
        let first = batch.messages[0].offset;
        let why = format!(
            "the sink rejected the message at index {} ({:?}), but the batch has {len} message(s) \
             (offsets {first} to {}): retrying the batch; this is a bug in the connector",
            bad.index,
            bad.reason,
            batch.messages[len - 1].offset,
        );
        return Answer { result: wire::WriteResult::Retry(why.clone()), overruled: Some(why) };
    }
    rejected.sort_by_key(|r| r.index);
    let mut merged: Vec<wire::Rejected> = Vec::with_capacity(rejected.len());
    for Rejected { index, reason } in rejected {
        // `index < len`, and a batch's length fits the contract's u32.
        let index = index as u32;
        match merged.last_mut() {
            Some(last) if last.index == index => {
                last.reason.push_str("; ");
                last.reason.push_str(&reason);
            }
            _ => merged.push(wire::Rejected { index, reason }),
        }
    }
    Answer::told(wire::WriteResult::Reject(merged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::iggy::connector::types as types_wire;
    use crate::message::wire_u128;
    use crate::{HeaderValue, StoredMessage};

    /// Answers what its config says, and remembers every batch it saw.
    struct Scripted {
        answer: Result<Written, Error>,
        seen: Vec<SinkBatch>,
    }

    std::thread_local! {
        /// Whether a `Scripted` sink of this test's thread was closed.
        static CLOSED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    #[derive(serde::Deserialize)]
    struct Script {
        fail_open: bool,
    }

    impl Sink for Scripted {
        type Config = Script;

        fn open(config: Script) -> Result<Self, Error> {
            if config.fail_open {
                return Err(Error::msg("configured to refuse"));
            }
            Ok(Scripted { answer: Ok(Written::Ack), seen: Vec::new() })
        }

        fn write(&mut self, batch: &SinkBatch) -> Result<Written, Error> {
            self.seen.push(batch.clone());
            self.answer.clone()
        }

        fn close(&mut self) {
            CLOSED.set(true);
        }
    }

    fn driver(answer: Result<Written, Error>) -> SinkDriver<Scripted> {
        let mut driver = SinkDriver::<Scripted>::open(r#"{"fail_open": false}"#).unwrap();
        driver.sink.answer = answer;
        driver
    }

    /// A batch of `n` messages of partition 3 from offset 10.
    fn batch(n: u64) -> wire::SinkBatch {
        wire::SinkBatch {
            stream: "s".into(),
            topic: "t".into(),
            partition: 3,
            messages: (10..10 + n)
                .map(|offset| wire::StoredMessage {
                    offset,
                    id: wire_u128(u128::MAX - u128::from(offset)),
                    timestamp: 1_000 + offset,
                    origin_timestamp: (offset % 2 == 0).then_some(offset),
                    headers: vec![types_wire::Header {
                        key: "k".into(),
                        value: types_wire::HeaderValue::Int128(types_wire::Int128 { high: -1, low: u64::MAX }),
                    }],
                    payload: format!("m{offset}").into_bytes(),
                })
                .collect(),
        }
    }

    #[test]
    fn the_sink_sees_the_batch_in_friendly_types() {
        let mut driver = driver(Ok(Written::Ack));
        assert_eq!(driver.write(batch(2)), Answer::told(wire::WriteResult::Ack));
        let seen = &driver.sink().seen[0];
        assert_eq!((seen.stream.as_str(), seen.topic.as_str(), seen.partition), ("s", "t", 3));
        assert_eq!(
            seen.messages[1],
            StoredMessage {
                offset: 11,
                id: u128::MAX - 11,
                timestamp: 1_011,
                origin_timestamp: None,
                headers: vec![("k".into(), HeaderValue::Int128(-1))],
                payload: b"m11".to_vec(),
            }
        );
        assert_eq!(seen.messages[0].origin_timestamp, Some(10));
        assert_eq!(seen.messages[0].payload_str(), Some("m10"));
        assert_eq!(seen.messages[0].header("k"), Some(&HeaderValue::Int128(-1)));
        assert_eq!(seen.messages[0].header("other"), None);
    }

    #[test]
    fn verdicts_reach_the_host_as_they_were_given() {
        let cases = [
            (Written::retry("disk full"), wire::WriteResult::Retry("disk full".into())),
            (Written::unwritable("bad row"), wire::WriteResult::Unwritable("bad row".into())),
            (
                Written::reject([(1, "poison")]),
                wire::WriteResult::Reject(vec![wire::Rejected { index: 1, reason: "poison".into() }]),
            ),
        ];
        for (written, expected) in cases {
            let mut driver = driver(Ok(written));
            assert_eq!(driver.write(batch(3)), Answer::told(expected));
        }
    }

    #[test]
    fn an_error_from_write_is_a_retry_with_its_message() {
        let mut driver = driver(Err(Error::msg("connection reset").context("inserting")));
        assert_eq!(
            driver.write(batch(1)),
            Answer::told(wire::WriteResult::Retry("inserting: connection reset".into()))
        );
    }

    #[test]
    fn an_empty_reject_list_is_an_ack() {
        let mut driver = driver(Ok(Written::Reject(Vec::new())));
        assert_eq!(driver.write(batch(2)), Answer::told(wire::WriteResult::Ack));
    }

    #[test]
    fn rejects_are_put_in_order_and_a_repeated_index_is_sent_once() {
        let mut driver = driver(Ok(Written::reject([(2, "b"), (0, "a"), (2, "c")])));
        let expected = wire::WriteResult::Reject(vec![
            wire::Rejected { index: 0, reason: "a".into() },
            wire::Rejected { index: 2, reason: "b; c".into() },
        ]);
        assert_eq!(driver.write(batch(3)), Answer::told(expected));
    }

    #[test]
    fn a_reject_index_outside_the_batch_never_reaches_the_host() {
        // Index 3 of a 3-message batch is one past the end; 0 is fine but must not be
        // passed on alone, or the message at 3 (which does not exist) would be lost.
        let mut driver = driver(Ok(Written::reject([(0, "fine"), (3, "off by one")])));
        let answer = driver.write(batch(3));
        let why = answer.overruled.clone().expect("the verdict is overruled");
        assert_eq!(answer.result, wire::WriteResult::Retry(why.clone()));
        for needle in ["index 3", "\"off by one\"", "3 message(s)", "offsets 10 to 12", "bug in the connector"] {
            assert!(why.contains(needle), "{needle:?} missing from {why:?}");
        }
    }

    #[test]
    fn an_empty_batch_is_acknowledged_without_bothering_the_sink() {
        let mut driver = driver(Ok(Written::retry("never")));
        assert_eq!(driver.write(batch(0)), Answer::told(wire::WriteResult::Ack));
        assert!(driver.sink().seen.is_empty());
    }

    #[test]
    fn bad_config_and_a_refused_open_are_errors_that_say_which() {
        let config = SinkDriver::<Scripted>::open(r#"{"fail_open": "yes"}"#).err().unwrap();
        assert!(config.message().contains("invalid plugin_config"), "{config}");
        let refused = SinkDriver::<Scripted>::open(r#"{"fail_open": true}"#).err().unwrap();
        assert_eq!(refused.message(), "configured to refuse");
    }

    #[test]
    fn close_reaches_the_sink() {
        driver(Ok(Written::Ack)).close();
        assert!(CLOSED.get());
    }
}
