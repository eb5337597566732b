//! The contract machinery: committed vs staged cursor, one outstanding batch, ids.
//!
//! This is plain Rust with no host calls, so it is tested natively (see the tests at
//! the bottom); the exported component only adds logging around it.

use crate::bindings::iggy::connector::types as wire;
use crate::packed;
use crate::{Error, Nack, NackReason, Source};

/// Drives a [`Source`] through the host's protocol.
pub struct Driver<S: Source> {
    source: S,
    /// The cursor of the last acknowledged batch: what `poll` always starts from.
    committed: S::Cursor,
    /// The batch the host has but has not reported on yet, with its cursor.
    outstanding: Option<Outstanding<S::Cursor>>,
    next_batch_id: u64,
}

struct Outstanding<C> {
    id: u64,
    staged: C,
}

/// What became of a batch result the host reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// ACK: the batch's cursor is now the committed one.
    Committed { id: u64 },
    /// NACK: the batch's cursor was dropped; the next poll produces the same records.
    Dropped { id: u64, nack: Nack },
    /// A result for a batch that is not the outstanding one (a host bug). Ignored.
    Unexpected { id: u64, outstanding: Option<u64> },
}

impl<S: Source> Driver<S> {
    /// Parse the config and the committed cursor, then open the source.
    pub fn open(config_json: &str, committed_state: Option<&[u8]>) -> Result<Self, Error> {
        let config =
            serde_json::from_str(config_json).map_err(|e| Error::msg(format!("invalid plugin_config: {e}")))?;
        let committed = match committed_state {
            None => S::Cursor::default(),
            Some(bytes) => serde_json::from_slice(bytes).map_err(|e| {
                Error::msg(format!(
                    "the committed state is not a cursor of this connector ({e}): {}",
                    String::from_utf8_lossy(bytes)
                ))
            })?,
        };
        let source = S::open(config, &committed)?;
        Ok(Driver { source, committed, outstanding: None, next_batch_id: 1 })
    }

    /// Ask the source for the batch after the committed cursor and stage its cursor.
    pub fn poll(&mut self) -> Result<Option<wire::Batch>, Error> {
        if let Some(outstanding) = &self.outstanding {
            return Err(Error::msg(format!(
                "poll called while batch {} is outstanding: the host must report its result first",
                outstanding.id
            )));
        }
        let Some(batch) = self.source.poll(&self.committed)? else {
            return Ok(None);
        };
        let staged_state =
            serde_json::to_vec(&batch.next).map_err(|e| Error::msg(format!("cannot serialize the cursor: {e}")))?;
        let id = self.next_batch_id;
        self.next_batch_id += 1;
        self.outstanding = Some(Outstanding { id, staged: batch.next });
        let (messages, packed) = packed::to_wire(batch.messages, batch.packed);
        Ok(Some(wire::Batch { id, messages, packed, staged_state: Some(staged_state) }))
    }

    /// Apply the host's verdict on the outstanding batch.
    pub fn on_batch_result(&mut self, id: u64, result: wire::BatchResult) -> Settled {
        match self.outstanding.take() {
            Some(outstanding) if outstanding.id == id => match result {
                wire::BatchResult::Ack => {
                    self.committed = outstanding.staged;
                    self.source.on_ack(&self.committed);
                    Settled::Committed { id }
                }
                wire::BatchResult::Nack(nack) => {
                    let nack = Nack { reason: nack.reason.into(), detail: nack.detail };
                    self.source.on_nack(&nack);
                    Settled::Dropped { id, nack }
                }
            },
            other => {
                let outstanding = other.as_ref().map(|o| o.id);
                self.outstanding = other;
                Settled::Unexpected { id, outstanding }
            }
        }
    }

    /// The committed cursor.
    pub fn committed(&self) -> &S::Cursor {
        &self.committed
    }

    /// The committed cursor as the JSON the host stores, for log lines.
    pub fn committed_json(&self) -> String {
        serde_json::to_string(&self.committed).unwrap_or_else(|e| format!("<unprintable: {e}>"))
    }

    /// Close the source.
    pub fn close(mut self) {
        self.source.close();
    }
}

impl From<wire::NackReason> for NackReason {
    fn from(reason: wire::NackReason) -> Self {
        match reason {
            wire::NackReason::DeliveryFailed => NackReason::DeliveryFailed,
            wire::NackReason::StateSaveFailed => NackReason::StateSaveFailed,
            wire::NackReason::TimedOut => NackReason::TimedOut,
            wire::NackReason::Rejected => NackReason::Rejected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, Message};

    /// Counts up from the cursor, `per_batch` numbers at a time; remembers ACKs and
    /// NACKs.
    struct Counter {
        per_batch: u64,
        acks: Vec<u64>,
        nacks: Vec<Nack>,
    }

    impl Source for Counter {
        type Config = serde_json::Value;
        type Cursor = u64;

        fn open(config: Self::Config, _cursor: &u64) -> Result<Self, Error> {
            let per_batch = config["per_batch"].as_u64().ok_or_else(|| Error::msg("per_batch"))?;
            Ok(Counter { per_batch, acks: Vec::new(), nacks: Vec::new() })
        }

        fn poll(&mut self, next: &u64) -> Result<Option<Batch<u64>>, Error> {
            let messages = (*next..*next + self.per_batch).map(|n| Message::new(n.to_string())).collect();
            Ok(Some(Batch::new(messages, *next + self.per_batch)))
        }

        fn on_ack(&mut self, committed: &u64) {
            self.acks.push(*committed);
        }

        fn on_nack(&mut self, nack: &Nack) {
            self.nacks.push(nack.clone());
        }
    }

    fn payloads(batch: &wire::Batch) -> Vec<String> {
        assert!(batch.messages.is_empty(), "small batches go packed");
        crate::messages_of(batch).unwrap().into_iter().map(|m| String::from_utf8(m.payload).unwrap()).collect()
    }

    fn nack(reason: wire::NackReason) -> wire::BatchResult {
        wire::BatchResult::Nack(wire::Nack { reason, detail: "test".into() })
    }

    #[test]
    fn opens_from_the_committed_state() {
        let driver = Driver::<Counter>::open(r#"{"per_batch": 2}"#, Some(b"40")).unwrap();
        assert_eq!(*driver.committed(), 40);
        let fresh = Driver::<Counter>::open(r#"{"per_batch": 2}"#, None).unwrap();
        assert_eq!(*fresh.committed(), 0);
    }

    #[test]
    fn bad_config_and_bad_state_are_errors_that_say_which() {
        let config = Driver::<Counter>::open("not json", None).err().unwrap();
        assert!(config.message().contains("invalid plugin_config"), "{config}");
        let state = Driver::<Counter>::open(r#"{"per_batch": 2}"#, Some(b"{\"x\":1}")).err().unwrap();
        assert!(state.message().contains("committed state"), "{state}");
    }

    #[test]
    fn ack_commits_the_staged_cursor() {
        let mut driver = Driver::<Counter>::open(r#"{"per_batch": 3}"#, None).unwrap();
        let batch = driver.poll().unwrap().unwrap();
        assert_eq!(payloads(&batch), ["0", "1", "2"]);
        assert_eq!(batch.staged_state.as_deref(), Some(&b"3"[..]));
        assert_eq!(*driver.committed(), 0, "staged, not committed, before the result");
        assert_eq!(driver.on_batch_result(batch.id, wire::BatchResult::Ack), Settled::Committed { id: batch.id });
        assert_eq!(*driver.committed(), 3);
        assert_eq!(driver.source.acks, [3], "the source hears of the ACK with the cursor now committed");
        let next = driver.poll().unwrap().unwrap();
        assert_eq!(payloads(&next), ["3", "4", "5"]);
        assert_ne!(next.id, batch.id);
    }

    #[test]
    fn nack_drops_the_staged_cursor_and_the_same_records_come_again() {
        let mut driver = Driver::<Counter>::open(r#"{"per_batch": 2}"#, Some(b"10")).unwrap();
        let first = driver.poll().unwrap().unwrap();
        let settled = driver.on_batch_result(first.id, nack(wire::NackReason::DeliveryFailed));
        assert!(matches!(settled, Settled::Dropped { id, .. } if id == first.id));
        assert_eq!(*driver.committed(), 10);
        let again = driver.poll().unwrap().unwrap();
        assert_eq!(payloads(&again), payloads(&first));
        assert_eq!(driver.source.nacks.len(), 1);
        assert_eq!(driver.source.nacks[0].reason, NackReason::DeliveryFailed);
        assert!(driver.source.acks.is_empty(), "a NACK is never reported as an ACK");
    }

    #[test]
    fn no_second_poll_while_a_batch_is_outstanding() {
        let mut driver = Driver::<Counter>::open(r#"{"per_batch": 1}"#, None).unwrap();
        let batch = driver.poll().unwrap().unwrap();
        let error = driver.poll().unwrap_err();
        assert!(error.message().contains("outstanding"), "{error}");
        // The outstanding batch survives the refused poll.
        assert_eq!(driver.on_batch_result(batch.id, wire::BatchResult::Ack), Settled::Committed { id: batch.id });
    }

    #[test]
    fn a_result_for_another_batch_is_ignored() {
        let mut driver = Driver::<Counter>::open(r#"{"per_batch": 1}"#, None).unwrap();
        let batch = driver.poll().unwrap().unwrap();
        let wrong = driver.on_batch_result(batch.id + 7, wire::BatchResult::Ack);
        assert_eq!(wrong, Settled::Unexpected { id: batch.id + 7, outstanding: Some(batch.id) });
        assert_eq!(*driver.committed(), 0, "a stray ACK must not commit anything");
        assert!(driver.source.acks.is_empty(), "nor reach the source");
        assert_eq!(driver.on_batch_result(batch.id, wire::BatchResult::Ack), Settled::Committed { id: batch.id });
        assert_eq!(
            driver.on_batch_result(batch.id, wire::BatchResult::Ack),
            Settled::Unexpected { id: batch.id, outstanding: None },
            "a repeated result is not applied twice"
        );
        assert_eq!(*driver.committed(), 1);
        assert_eq!(driver.source.acks, [1]);
    }
}
