//! A sink's positions in the local log, kept in its state file: each topic's stays
//! where it was committed, whatever the config reads now; an instance says where it
//! starts from; positions that are not a sink's are named and left alone.

use std::collections::BTreeMap;

use ferry::delivery::Receipt;
use ferry::state::CursorStore;
use ferry::status::Event;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::{positions, seq_messages};
use ferry_tests::sink_output::faulty_sink_written;
use serde_json::json;

use super::faulty_sink;

/// Run sink `key` (a faulty sink reading `topics`) until it has stored each position
/// of `until` (`(topic, end)`), then stop it; the positions it committed.
async fn run_until(h: &Harness, key: &'static str, topics: &[&str], until: &[(&str, u64)]) -> BTreeMap<String, u64> {
    let (sink, _) = faulty_sink(h, key, topics, json!({}));
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));
    running.wait_for(&format!("{key} to start"), |e| matches!(e, Event::Started { key: k, .. } if &**k == key)).await;
    for (topic, end) in until {
        running
            .wait_for(&format!("{key} to store {topic} at {end}"), |e| {
                matches!(e, Event::Written { key: k, topic: t, end: e, .. } if &**k == key && t == topic && e == end)
            })
            .await;
    }
    running.stop().await;
    positions(&h.committed(key).expect("committed").state)
}

fn at(entries: &[(&str, u64)]) -> BTreeMap<String, u64> {
    entries.iter().map(|(topic, end)| (format!("test/{topic}"), *end)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_left_out_of_the_config_for_a_while_keeps_its_position() {
    let h = Harness::new();
    h.append("a", seq_messages(0..5)).await;
    h.append("b", seq_messages(100..105)).await;
    let stored = run_until(&h, "reader", &["a", "b"], &[("a", 5), ("b", 5)]).await;
    assert_eq!(stored, at(&[("a", 5), ("b", 5)]));

    // A while with `b` out of the config: its position is not the sink's to forget.
    h.append("a", seq_messages(5..8)).await;
    let stored = run_until(&h, "reader", &["a"], &[("a", 8)]).await;
    assert_eq!(stored, at(&[("a", 8), ("b", 5)]), "the position of a topic not read now is kept");

    // `b` back: it goes on from where it was.
    h.append("b", seq_messages(105..108)).await;
    let stored = run_until(&h, "reader", &["a", "b"], &[("b", 8)]).await;
    assert_eq!(stored, at(&[("a", 8), ("b", 8)]));
    let mut written = faulty_sink_written(&h.dir.path().join("reader-out"));
    written.sort_unstable();
    let expected: Vec<u64> = (0..8).chain(100..108).collect();
    assert_eq!(written, expected, "every message written once: none of `b` again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_instance_says_it_starts_from_the_committed_positions() {
    let h = Harness::new();
    h.append("t", seq_messages(0..5)).await;
    run_until(&h, "resumer", &["t"], &[("t", 5)]).await;
    run_until(&h, "resumer", &["t"], &[]).await;
    let starts: Vec<String> =
        capture().of("resumer").into_iter().map(|l| l.message).filter(|m| m.starts_with("starting")).collect();
    assert_eq!(starts, ["starting with no committed cursor (first run)", "starting from committed cursor"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positions_that_are_not_a_sinks_are_named_and_left_alone() {
    let h = Harness::new();
    h.append("t", seq_messages(0..5)).await;
    let foreign = b"[1, 2]".to_vec();
    h.cursor("confused").commit(foreign.clone(), Receipt::default()).await.unwrap();
    let (sink, out) = faulty_sink(&h, "confused", &["t"], json!({}));
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));
    for _ in 0..2 {
        let Event::Failed { reason, .. } = running
            .wait_for("the sink to fail", |e| matches!(e, Event::Failed { key, .. } if &**key == "confused"))
            .await
        else {
            unreachable!()
        };
        assert!(reason.starts_with("cannot open the input: the committed positions are not this input's"), "{reason}");
        assert!(reason.ends_with("[1, 2]"), "the error shows what is there: {reason}");
    }
    running.stop().await;
    let committed = h.committed("confused").unwrap();
    assert_eq!((committed.generation, committed.state), (1, foreign), "nothing reset, nothing overwritten");
    assert!(faulty_sink_written(&out).is_empty(), "nothing read from a position it cannot trust");
}
