//! The checks of a sink, on one instance: `open` (rule 1); a small synthetic batch
//! written, whose answer must be well-formed (a `reject` names messages of the
//! batch, each once); the same batch written again, as after a crash before the
//! offset was stored (rule 3), whose answer must agree with the first; `close`
//! (rule 5).
//!
//! Whether a replay is written idempotently (no duplicate where the sink writes)
//! only the sink's destination can tell: the kit checks what it can see, that the
//! sink answers a replay as it answered the original.

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Subject;
use super::report::Report;
use ferry_contract::wit::sink_export::{SinkBatch, StoredMessage, WriteResult};
use ferry_contract::{Header, HeaderValue, Uint128};
use ferry_runtime::SinkWorld;

/// How many messages the synthetic batch holds.
const MESSAGES: u64 = 3;

pub(super) async fn check(subject: &Subject<'_, SinkWorld>, report: &mut Report) {
    let opened = async {
        let mut sink = subject.instance().await?;
        sink.open(&subject.setup.plugin_config).await?;
        Ok::<_, ferry_runtime::CallError>(sink)
    };
    let mut sink = match opened.await {
        Ok(sink) => sink,
        Err(error) => return report.fail("open", "1", format!("{error}; nothing else can be checked")),
    };
    report.ok("open", "1", "opened");

    let batch = synthetic_batch();
    let first = match sink.write(&batch).await {
        Ok(answer) => judge(&answer, batch.messages.len()),
        Err(error) => return report.fail("write", "2", error.to_string()),
    };
    let size = batch.messages.len();
    match &first {
        Answer::Written(rejected) if rejected.is_empty() => {
            report.ok("write", "3", format!("answered ack for a batch of {size} messages"))
        }
        Answer::Written(rejected) => report.ok(
            "write",
            "3",
            format!("answered reject for messages {} of a batch of {size}; the rest written", list(rejected)),
        ),
        Answer::Retry(what) | Answer::Unwritable(what) => report.warn(
            "write",
            "3",
            format!("{what}: the kit cannot check more (can it reach what it writes to under this config?)"),
        ),
        Answer::Invalid(why) => report.fail("write", "3", why.clone()),
    }

    if let Answer::Written(rejected_first) = &first {
        match sink.write(&batch).await {
            Ok(answer) => replayed(rejected_first, judge(&answer, size), report),
            Err(error) => return report.fail("write again", "3", error.to_string()),
        }
    }

    match sink.close().await {
        Ok(()) => report.ok("close", "5", "closed after its last batch was answered; no call followed"),
        Err(error) => report.fail("close", "5", error.to_string()),
    }
}

/// What a `write` answer says, once checked against the batch it answers.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// `ack` (no index) or `reject` of these messages: the batch is settled.
    Written(BTreeSet<u32>),
    /// `retry`, as text: nothing settled, ask again later.
    Retry(String),
    /// `unwritable`, as text: nothing written.
    Unwritable(String),
    /// An answer the contract does not allow.
    Invalid(String),
}

fn judge(answer: &WriteResult, size: usize) -> Answer {
    match answer {
        WriteResult::Ack => Answer::Written(BTreeSet::new()),
        WriteResult::Retry(reason) => Answer::Retry(format!("answered retry ({reason})")),
        WriteResult::Unwritable(reason) => Answer::Unwritable(format!("answered unwritable ({reason})")),
        WriteResult::Reject(rejected) => {
            let mut indexes = BTreeSet::new();
            for rejected in rejected {
                if rejected.index as usize >= size {
                    return Answer::Invalid(format!(
                        "rejected message {} of a batch of {size}: no such message",
                        rejected.index
                    ));
                }
                if !indexes.insert(rejected.index) {
                    return Answer::Invalid(format!("rejected message {} twice", rejected.index));
                }
            }
            Answer::Written(indexes)
        }
    }
}

/// Rule 3: the same batch again must be answered as the first time.
fn replayed(rejected_first: &BTreeSet<u32>, again: Answer, report: &mut Report) {
    let name = "write again";
    match again {
        Answer::Written(rejected) if &rejected == rejected_first => {
            report.ok(name, "3", "the same batch written again was answered as the first time")
        }
        Answer::Written(rejected) => report.fail(
            name,
            "3",
            format!(
                "the same batch written again was answered differently: rejected {} the first time, {} now",
                list(rejected_first),
                list(&rejected)
            ),
        ),
        Answer::Retry(what) => {
            report.warn(name, "3", format!("the same batch written again {what}: the kit cannot check more"))
        }
        Answer::Unwritable(what) => report.fail(
            name,
            "3",
            format!("the same batch written again {what}, when it had been written the first time"),
        ),
        Answer::Invalid(why) => report.fail(name, "3", why),
    }
}

/// `none`, or `0, 2`.
fn list(indexes: &BTreeSet<u32>) -> String {
    if indexes.is_empty() {
        return "none".into();
    }
    indexes.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// A few messages such as a source of JSON records leaves in a topic: ids, typed
/// headers, JSON payloads with a `seq`.
fn synthetic_batch() -> SinkBatch {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
    let messages = (0..MESSAGES)
        .map(|seq| StoredMessage {
            offset: seq,
            id: Uint128::from(u128::from(seq) + 1),
            timestamp: now,
            origin_timestamp: Some(now),
            headers: vec![
                Header { key: "origin".into(), value: HeaderValue::String("ferry test".into()) },
                Header { key: "seq".into(), value: HeaderValue::Uint64(seq) },
            ],
            payload: format!("{{\"seq\":{seq},\"text\":\"ferry test\"}}").into_bytes(),
        })
        .collect();
    SinkBatch { stream: "ferry-test".into(), topic: "conformance".into(), partition: 0, messages }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_contract::wit::sink_export::Rejected;

    fn reject(indexes: &[u32]) -> WriteResult {
        WriteResult::Reject(indexes.iter().map(|&index| Rejected { index, reason: "poison".into() }).collect())
    }

    #[test]
    fn a_reject_must_name_messages_of_the_batch_each_once() {
        assert_eq!(judge(&WriteResult::Ack, 3), Answer::Written(BTreeSet::new()));
        assert_eq!(judge(&reject(&[2, 0]), 3), Answer::Written(BTreeSet::from([0, 2])));
        assert_eq!(
            judge(&reject(&[3]), 3),
            Answer::Invalid("rejected message 3 of a batch of 3: no such message".into())
        );
        assert_eq!(judge(&reject(&[1, 1]), 3), Answer::Invalid("rejected message 1 twice".into()));
        assert_eq!(judge(&WriteResult::Retry("later".into()), 3), Answer::Retry("answered retry (later)".into()));
    }

    #[test]
    fn a_replay_must_be_answered_as_the_first_write() {
        let mut report = Report::default();
        replayed(&BTreeSet::from([1]), Answer::Written(BTreeSet::from([1])), &mut report);
        replayed(&BTreeSet::new(), Answer::Written(BTreeSet::from([0])), &mut report);
        replayed(&BTreeSet::new(), Answer::Unwritable("answered unwritable (x)".into()), &mut report);
        let lines: Vec<String> = report.checks().iter().map(ToString::to_string).collect();
        assert_eq!(lines[0], "ok    write again (rule 3): the same batch written again was answered as the first time");
        assert_eq!(
            lines[1],
            "FAIL  write again (rule 3): the same batch written again was answered differently: rejected none the \
             first time, 0 now"
        );
        assert!(lines[2].starts_with("FAIL  write again (rule 3): the same batch written again answered unwritable"));
    }
}
