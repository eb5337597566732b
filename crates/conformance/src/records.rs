//! Records as the kit compares them: what must be the same when a source produces
//! them again from the same committed cursor (rules 3 and 4), and where two runs of
//! records first differ.
//!
//! Only the payload and the id are compared. Headers and the origin timestamp may
//! honestly change from one production to the next (a "fetched at" time), and the
//! batch boundaries too (a source may batch by size or time): records are compared
//! one by one over those both runs produced.

use ferry_contract::Message;
use ferry_contract::guest_text;

/// How much of a payload a report shows.
const SHOWN_PAYLOAD: usize = 80;

/// One record, as far as replaying it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The id the guest gave, if any (0 counts as none, as the host reads it: the
    /// host derives the same id for the same cursor and index).
    pub id: Option<u128>,
    pub payload: Vec<u8>,
}

impl Record {
    pub fn of(message: &Message) -> Record {
        let id = message.id.as_ref().map(|id| id.get()).filter(|&id| id != 0);
        Record { id, payload: message.payload.to_vec() }
    }

    /// Every record of `messages`.
    pub fn all(messages: &[Message]) -> Vec<Record> {
        messages.iter().map(Record::of).collect()
    }
}

/// Where two runs of records first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The index of the first record that differs.
    pub index: usize,
    /// What differs: `payload`, `id`, or `record` when one run has none.
    pub field: &'static str,
    pub before: String,
    pub now: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "record {}: {} was {}, now {}", self.index, self.field, self.before, self.now)
    }
}

/// The first difference between `before` and `now`, over the records both hold;
/// `None` when they agree. A run that has no record while the other has some
/// differs at record 0.
pub fn first_difference(before: &[Record], now: &[Record]) -> Option<Difference> {
    match (before.first(), now.first()) {
        (None, None) => return None,
        (Some(record), None) => {
            return Some(Difference { index: 0, field: "record", before: show(record), now: "no record".into() });
        }
        (None, Some(record)) => {
            return Some(Difference { index: 0, field: "record", before: "no record".into(), now: show(record) });
        }
        (Some(_), Some(_)) => {}
    }
    before.iter().zip(now).enumerate().find_map(|(index, (before, now))| {
        if before.payload != now.payload {
            Some(Difference { index, field: "payload", before: payload(&before.payload), now: payload(&now.payload) })
        } else if before.id != now.id {
            Some(Difference { index, field: "id", before: id(before.id), now: id(now.id) })
        } else {
            None
        }
    })
}

fn show(record: &Record) -> String {
    format!("{} (id {})", payload(&record.payload), id(record.id))
}

/// A payload as text, quoted and cut short; control characters made visible.
fn payload(bytes: &[u8]) -> String {
    format!("`{}`", guest_text::clean(&String::from_utf8_lossy(bytes), SHOWN_PAYLOAD))
}

fn id(id: Option<u128>) -> String {
    id.map_or_else(|| "none".into(), |id| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: Option<u128>, payload: &str) -> Record {
        Record { id, payload: payload.as_bytes().to_vec() }
    }

    #[test]
    fn the_same_records_do_not_differ_even_in_batches_of_other_sizes() {
        let before = [record(None, "a"), record(Some(7), "b"), record(None, "c")];
        assert_eq!(first_difference(&before, &before), None);
        assert_eq!(first_difference(&before, &before[..2]), None);
        assert_eq!(first_difference(&before[..1], &before), None);
        assert_eq!(first_difference(&[], &[]), None);
    }

    #[test]
    fn the_first_differing_record_is_named_with_what_differs() {
        let before = [record(None, "{\"seq\":5}"), record(Some(1), "{\"seq\":6}")];
        let skipped = [record(None, "{\"seq\":5}"), record(Some(1), "{\"seq\":11}")];
        let difference = first_difference(&before, &skipped).unwrap();
        assert_eq!(difference.to_string(), "record 1: payload was `{\"seq\":6}`, now `{\"seq\":11}`");

        let renumbered = [record(None, "{\"seq\":5}"), record(Some(2), "{\"seq\":6}")];
        let difference = first_difference(&before, &renumbered).unwrap();
        assert_eq!(difference.to_string(), "record 1: id was 1, now 2");
    }

    #[test]
    fn nothing_against_something_differs_at_the_first_record() {
        let some = [record(Some(3), "x")];
        assert_eq!(first_difference(&some, &[]).unwrap().to_string(), "record 0: record was `x` (id 3), now no record");
        assert_eq!(first_difference(&[], &some).unwrap().index, 0);
    }

    #[test]
    fn an_id_of_zero_is_no_id() {
        use ferry_contract::{Message, Uint128};
        let message =
            |id| Message { id, headers: vec![], payload: bytes::Bytes::from_static(b"p"), origin_timestamp: None };
        assert_eq!(Record::of(&message(Some(Uint128::from(0u128)))), Record::of(&message(None)));
        assert_eq!(Record::of(&message(Some(Uint128::from(9u128)))).id, Some(9));
    }
}
