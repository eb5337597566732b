//! Each answer a sink can give, and each way it can fail, with what the host must do:
//! `retry` hands the same messages again and leaves the offset; a trap restarts
//! from the committed offset and costs no neighbour anything; `reject` dead-letters
//! the poison messages before the offset moves; `unwritable` is bisected down to the
//! poison messages; a poison message with nowhere to put it (no dead letters) is
//! retried, never dropped.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry::config::BackoffConfig;
use ferry::contract::{Header, HeaderValue};
use ferry::engine::sink::DeadLetters;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::faults::{FaultyTarget, GatedCursor};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::records::{positions, seq_messages, seq_of, seqs};
use ferry_tests::sink_output::faulty_sink_written;
use serde_json::json;

use super::{committed_position, faulty_sink, faulty_sink_keeping, written};

/// The events of `key` in `events` that `pick` picks something out of.
fn of<T>(events: &[Event], key: &str, pick: impl Fn(&Event) -> Option<T>) -> Vec<T> {
    events.iter().filter(|e| e.key() == key).filter_map(pick).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_batch_comes_again_and_its_offset_moves_only_after_the_ack() {
    let h = Harness::new();
    h.append("retried", seq_messages(0..25)).await;
    // Every commit waits at the gate: the test looks at the state while the sink loop
    // is held between the guest's answer and the commit.
    let gate = GatedCursor::new(h.cursor("retrier"));
    let (sink, out) = faulty_sink_keeping(&h, "retrier", &["retried"], json!({ "retry_times": 3 }), gate.clone());
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));

    let mut stored = None;
    for (start, end) in [(0, 10), (10, 20), (20, 25)] {
        let committing = gate.next_arrival().await;
        assert_eq!(positions(&committing), BTreeMap::from([("test/retried".to_string(), end)]));
        // Everything the loop reported before it reached the commit is in.
        let retries = of(&running.drain(), "retrier", |e| match e {
            Event::Retried { reason, .. } => Some(reason.clone()),
            _ => None,
        });
        let expected: Vec<String> =
            (1..=3).map(|n| format!("configured to retry ({n} of 3) the batch at offset {start}")).collect();
        assert_eq!(retries, expected, "the same batch, three times, before its offset is stored");
        assert_eq!(
            committed_position(&h, "retrier", "retried"),
            stored,
            "the state on disk did not move while the guest retried"
        );
        // A retry writes nothing; the ack wrote the batch, once.
        assert_eq!(faulty_sink_written(&out), (0..end).collect::<Vec<_>>());
        gate.release(1);
        running.wait_for("the batch to settle", written("retrier", end)).await;
        assert_eq!(committed_position(&h, "retrier", "retried"), Some(end));
        stored = Some(end);
    }

    let status = running.status.get("retrier").unwrap();
    assert_eq!(
        (status.nacks, status.consecutive_nacks, status.batches_acked, status.messages_delivered),
        (9, 0, 3, 25),
        "status counts each retry: {status:?}"
    );
    assert_eq!(status.last_error.as_deref(), Some("retry: configured to retry (3 of 3) the batch at offset 20"));
    running.stop().await;
    assert_eq!(faulty_sink_written(&out), (0..25).collect::<Vec<_>>(), "everything written once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_mid_batch_restarts_from_the_committed_offset_while_a_neighbour_keeps_writing() {
    let h = Harness::new();
    h.append("trapped", seq_messages(0..30)).await;
    let (mut trapper, trapper_out) = faulty_sink(&h, "trapper", &["trapped"], json!({ "trap_on_seq": 15 }));
    // Down for a second after the trap: the neighbour writes hundreds of batches
    // meanwhile, so this is not a race.
    trapper.settings.restart_backoff = BackoffConfig { initial: Duration::from_secs(1), max: Duration::from_secs(1) };
    let feed = h.source("feed", RANDOM_SOURCE, json!({ "messages_per_batch": 5, "interval": "5ms" }));
    let (steady, steady_out) = faulty_sink(&h, "steady", &["feed"], json!({}));
    let mut running = Running::start(h.host_with(vec![feed], vec![trapper, steady]));

    let mut seen = Vec::new();
    let mut done = written("trapper", 30);
    running
        .wait_for("the trapper to write everything", |e| {
            seen.push(e.clone());
            done(e)
        })
        .await;
    let at = |what: &str, matches: &dyn Fn(&Event) -> bool| {
        seen.iter().position(matches).unwrap_or_else(|| panic!("no {what} among {seen:#?}"))
    };
    let trap = at("trap", &|e| matches!(e, Event::Trapped { key, .. } if &**key == "trapper"));
    let restart = at("restart", &|e| matches!(e, Event::Started { key, instance: 2 } if &**key == "trapper"));
    let trapper_batches = |events: &[Event]| {
        of(events, "trapper", |e| match e {
            Event::Written { end, messages, .. } => Some((*end, *messages)),
            _ => None,
        })
    };
    assert_eq!(trapper_batches(&seen[..trap]), [(10, 10)], "the first batch was written before the trap");
    assert!(trap < restart);
    assert_eq!(
        trapper_batches(&seen[restart..]),
        [(20, 10), (30, 10)],
        "the restarted instance read the trapped batch again, whole, from the committed offset"
    );
    let neighbour = of(&seen[trap..restart], "steady", |e| matches!(e, Event::Written { .. }).then_some(()));
    assert!(!neighbour.is_empty(), "the neighbour wrote nothing while the trapper was down");

    assert!(trapper_out.join("trapped-15").exists(), "the guest trapped where it was told to");
    assert_eq!(faulty_sink_written(&trapper_out), (0..30).collect::<Vec<_>>(), "nothing lost, nothing twice");
    assert_eq!(committed_position(&h, "trapper", "trapped"), Some(30));
    let trapper = running.status.get("trapper").unwrap();
    assert_eq!((trapper.traps, trapper.instances), (1, 2), "{trapper:?}");
    let steady = running.status.get("steady").unwrap();
    assert_eq!((steady.traps, steady.instances), (0, 1), "{steady:?}");
    running.stop().await;

    // A graceful stop settles the neighbour's batch in flight: what it wrote is what
    // it committed, each message once.
    let steady_end = committed_position(&h, "steady", "feed").expect("the neighbour committed");
    assert_eq!(faulty_sink_written(&steady_out), (0..steady_end).collect::<Vec<_>>(), "the neighbour lost nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_message_is_dead_lettered_with_where_it_came_from_before_the_offset_moves() {
    let h = Harness::new();
    let mut messages = seq_messages(0..10);
    messages[6].headers = vec![Header { key: "customer".into(), value: HeaderValue::Uint64(42) }];
    messages[6].origin_timestamp = Some(1_234_567);
    h.append("orders", messages).await;
    let (mut sink, out) = faulty_sink(&h, "picky", &["orders"], json!({ "reject_seqs": [6] }));
    let destination = FaultyTarget::new(h.log.clone());
    destination.set_failing(true);
    sink.dead_letters = Some(DeadLetters { target: destination.clone(), ..h.dead_letters("dead") });
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));

    for _ in 0..3 {
        running
            .wait_for("a failed delivery of the dead letter", |e| {
                matches!(e, Event::InputFailed { key, detail }
                    if &**key == "picky" && detail.contains("cannot deliver 1 dead letter(s)"))
            })
            .await;
    }
    assert_eq!(h.committed("picky"), None, "the offset waits for the dead letters");
    let refused = destination.refused();
    assert!(refused.len() >= 3 && refused.iter().all(|seqs| seqs == &[6]), "{refused:?}");
    let others = [0, 1, 2, 3, 4, 5, 7, 8, 9];
    assert_eq!(faulty_sink_written(&out), others, "the guest wrote the others once and is not asked again");

    destination.set_failing(false);
    running
        .wait_for(
            "the batch to settle",
            |e| matches!(e, Event::Written { key, end: 10, messages: 10, dead: 1, .. } if &**key == "picky"),
        )
        .await;
    assert_eq!(committed_position(&h, "picky", "orders"), Some(10), "the offset moved past the batch");
    let letters = h.records("dead");
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!((letter.id, seq_of(&letter.payload), letter.origin_timestamp), (Some(7), 6, Some(1_234_567)));
    assert_eq!(letter.connector, "picky");
    let expected = json!({
        "customer": { "uint64": 42 },
        "ferry-dead-letter-connector": { "string": "picky" },
        "ferry-dead-letter-reason": { "string": "poison seq 6" },
        "ferry-dead-letter-stream": { "string": "test" },
        "ferry-dead-letter-topic": { "string": "orders" },
        "ferry-dead-letter-partition": { "uint32": 0 },
        "ferry-dead-letter-offset": { "uint64": 6 },
    });
    assert_eq!(letter.headers.as_ref(), Some(&expected));
    let status = running.status.get("picky").unwrap();
    assert_eq!((status.dead_lettered, status.messages_delivered, status.nacks), (1, 9, 0), "{status:?}");
    running.stop().await;
    assert_eq!(faulty_sink_written(&out), others, "every other message written exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwritable_batches_are_split_until_each_poison_message_is_alone() {
    let h = Harness::new();
    h.append("mixed", seq_messages(0..40)).await;
    let poison = [3, 17, 18, 39];
    let (mut sink, out) = faulty_sink(&h, "bisector", &["mixed"], json!({ "unwritable_seqs": poison }));
    sink.settings.batch_length = 20;
    sink.dead_letters = Some(h.dead_letters("poison"));
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));

    let mut seen = Vec::new();
    let mut done = written("bisector", 40);
    running
        .wait_for("everything to settle", |e| {
            seen.push(e.clone());
            done(e)
        })
        .await;
    let settled = of(&seen, "bisector", |e| match e {
        Event::Written { end, messages, dead, .. } => Some((*end, *messages, *dead)),
        _ => None,
    });
    assert_eq!(settled, [(20, 20, 3), (40, 20, 1)]);
    assert_eq!(committed_position(&h, "bisector", "mixed"), Some(40), "the offset moved past both batches");

    let letters = h.records("poison");
    assert_eq!(seqs(&letters), poison, "exactly the poison messages are dead letters");
    for letter in &letters {
        let headers = letter.headers.as_ref().expect("a dead letter has headers");
        assert_eq!(headers["ferry-dead-letter-reason"], json!({ "string": "poison somewhere" }));
        assert_eq!(headers["ferry-dead-letter-offset"], json!({ "uint64": seq_of(&letter.payload) }));
    }
    let good: Vec<u64> = (0..40).filter(|seq| !poison.contains(seq)).collect();
    assert_eq!(faulty_sink_written(&out), good, "every good message written once, in order, and no poison");
    let status = running.status.get("bisector").unwrap();
    assert_eq!((status.dead_lettered, status.nacks), (4, 0), "{status:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_with_no_dead_letters_is_retried_and_never_dropped() {
    let h = Harness::new();
    h.append("kept", seq_messages(0..20)).await;
    // `reject`: the guest wrote the others each time, and is handed them again.
    let rejecting = never_dropped(&h, "stubborn", json!({ "reject_seqs": [15] }), "(the first: poison seq 15)").await;
    assert!(rejecting.iter().filter(|seq| **seq == 16).count() >= 6, "{rejecting:?}");
    // `unwritable`: no bisection, nowhere to put what it would isolate.
    let unwritable = never_dropped(&h, "obstinate", json!({ "unwritable_seqs": [15] }), "(poison somewhere)").await;
    assert_eq!(unwritable, (0..10).collect::<Vec<_>>(), "nothing of the batch with the poison is written");

    let topics: Vec<String> = LocalLog::topics(h.log.dir()).unwrap().into_iter().map(|t| t.topic).collect();
    assert_eq!(topics, ["kept"], "the message went nowhere else");
}

/// Run sink `key`, a faulty sink with `modes` that can never write seq 15 of
/// `test/kept` (0..20) and no dead letters, with `max_consecutive_nacks = 3`, through
/// two failed instances; check that its offset stayed before the batch holding 15 and
/// its state file did not change, and that the failure says `why` and that no
/// dead_letters are configured. What the guest wrote.
async fn never_dropped(h: &Harness, key: &'static str, modes: serde_json::Value, why: &str) -> Vec<u64> {
    let (mut sink, out) = faulty_sink(h, key, &["kept"], modes);
    sink.settings.max_consecutive_nacks = 3;
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));

    running.wait_for("the first batch", written(key, 10)).await;
    let before = (h.committed(key), h.state_bytes(key));
    assert_eq!(committed_position(h, key, "kept"), Some(10));
    let is_failed = |e: &Event| matches!(e, Event::Failed { key: k, .. } if &**k == key);
    let Event::Failed { reason, .. } = running.wait_for("the connector to fail", is_failed).await else {
        unreachable!()
    };
    assert!(reason.starts_with("3 retries or read failures in a row; the last: retry: "), "{reason}");
    assert!(reason.contains(why) && reason.contains("no dead_letters are configured"), "{reason}");
    running.wait_for("the restart", |e| matches!(e, Event::Started { key: k, instance: 2 } if &**k == key)).await;
    running.wait_for("the restarted instance to fail too", is_failed).await;
    assert_eq!(before, (h.committed(key), h.state_bytes(key)), "the state file did not change");
    let status = running.status.get(key).unwrap();
    assert!(status.nacks >= 6 && status.instances >= 2 && status.dead_lettered == 0, "{status:?}");
    running.stop().await;

    assert_eq!(committed_position(h, key, "kept"), Some(10), "the offset never passed the message");
    let written = faulty_sink_written(&out);
    assert!(!written.contains(&15), "{written:?}");
    assert_eq!(written.iter().filter(|seq| **seq < 10).count(), 10, "the first batch written once: {written:?}");
    written
}
