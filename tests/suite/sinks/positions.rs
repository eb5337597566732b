//! A sink's positions in the local log, kept in its state file: each topic's stays
//! where it was committed, whatever the config reads now; an instance says where it
//! starts from; positions that are not a sink's are named and left alone.

use std::collections::BTreeMap;

use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::Receipt;
use ferry::engine::status::{Event, Phase};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::{positions, seq_messages};
use ferry_tests::sink_output::faulty_sink_written;
use serde_json::json;

use super::faulty_sink;

/// Run sink `key` (a faulty sink reading `topics`) until it has stored each position
/// of `until` (`(topic, end)`), then stop it; the positions it committed.
pub(super) async fn run_until(
    h: &Harness,
    key: &'static str,
    topics: &[&str],
    until: &[(&str, u64)],
) -> BTreeMap<String, u64> {
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

/// Committed state that is not a sink's positions refuses the sink at once (no
/// restarts against it), names what is there, and is left exactly as it was.
async fn refused_over(foreign: &[u8], expected: &str) {
    let h = Harness::new();
    h.append("t", seq_messages(0..5)).await;
    h.cursor("confused").commit(foreign.to_vec(), Receipt::default()).await.unwrap();
    let (sink, out) = faulty_sink(&h, "confused", &["t"], json!({}));
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));
    let Event::Refused { reason, .. } = running
        .wait_for("the sink to be refused", |e| matches!(e, Event::Refused { key, .. } if &**key == "confused"))
        .await
    else {
        unreachable!()
    };
    assert!(reason.starts_with("the committed state is not a sink's positions"), "{reason}");
    assert!(reason.contains(expected), "the error says what is wrong ({expected}): {reason}");
    assert!(reason.contains(&*String::from_utf8_lossy(foreign)), "the error shows what is there: {reason}");
    let status = running.status.clone();
    running.stop().await;
    assert_eq!(status.get("confused").unwrap().phase, Phase::Refused);
    let committed = h.committed("confused").unwrap();
    assert_eq!((committed.generation, committed.state), (1, foreign.to_vec()), "nothing reset, nothing overwritten");
    assert!(faulty_sink_written(&out).is_empty(), "nothing read from a position it cannot trust");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_that_is_not_json_positions_refuses_the_sink_and_is_left_alone() {
    refused_over(b"[1, 2]", "invalid type").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positions_that_name_no_stream_and_topic_refuse_the_sink_and_are_left_alone() {
    // A map of numbers, as a source's cursor could be: not a sink's all the same.
    refused_over(br#"{"rows": 12}"#, r#""rows" does not name a stream/topic"#).await;
}
