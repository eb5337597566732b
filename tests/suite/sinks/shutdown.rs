//! A sink's graceful shutdown: the batch in flight settles and its offset is stored,
//! nothing more is read, a retry's backoff is not waited out, and the guest is
//! closed. (SIGTERM to a ferry process with sinks: `cli.rs`.)

use std::time::Duration;

use ferry::config::BackoffConfig;
use ferry::engine::status::{Event, Phase};
use ferry_tests::faults::GatedCursor;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::{positions, seq_messages};
use ferry_tests::sink_output::faulty_sink_written;
use serde_json::json;

use super::{committed_position, faulty_sink, faulty_sink_keeping};

/// Whether the guest of `key` logged that it is closing (the SDK does, in `close`).
fn closed(key: &str) -> bool {
    capture().guest_lines(key).iter().any(|line| line == "closing")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_batch_in_flight_settle_then_closes_the_sink() {
    let h = Harness::new();
    h.append("closing", seq_messages(0..25)).await;
    let gate = GatedCursor::new(h.cursor("closer"));
    let (sink, out) = faulty_sink_keeping(&h, "closer", &["closing"], json!({}), gate.clone());
    let running = Running::start(h.host_with(Vec::new(), vec![sink]));

    // The guest acked the first batch; its offset is on its way to the state.
    let committing = gate.next_arrival().await;
    running.request_stop();
    assert!(!closed("closer"), "the guest is not closed while its batch is in flight");
    gate.release(1);
    let status = running.status.clone();
    let report = running.finished().await;

    assert!(report.unsettled.is_empty(), "{:?}", report.unsettled);
    assert_eq!(positions(&committing).get("test/closing"), Some(&10));
    assert_eq!(committed_position(&h, "closer", "closing"), Some(10), "the batch in flight settled");
    assert_eq!(faulty_sink_written(&out), (0..10).collect::<Vec<_>>(), "nothing read after the shutdown request");
    assert!(closed("closer"), "close() was called: {:?}", capture().guest_lines("closer"));
    assert_eq!(status.get("closer").unwrap().phase, Phase::Stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cuts_a_retry_backoff_short_stores_nothing_and_closes_the_sink() {
    let h = Harness::new();
    h.append("waiting", seq_messages(0..5)).await;
    let (mut sink, out) = faulty_sink(&h, "patient", &["waiting"], json!({ "retry_times": 1000 }));
    let minute = Duration::from_secs(60);
    sink.settings.retry_backoff = BackoffConfig { initial: minute, max: minute };
    let mut host = h.host_with(Vec::new(), vec![sink]);
    // Shorter than the backoff: a loop that waited it out would not settle in time.
    host.set_grace_period(Duration::from_secs(20));
    let mut running = Running::start(host);

    running.wait_for("a retry", |e| matches!(e, Event::Retried { key, .. } if &**key == "patient")).await;
    let report = running.stop().await;
    assert!(report.unsettled.is_empty(), "the retry's backoff held up the shutdown: {:?}", report.unsettled);
    assert_eq!(h.committed("patient"), None, "nothing was acked, nothing is stored");
    assert!(faulty_sink_written(&out).is_empty());
    assert!(closed("patient"), "close() was called: {:?}", capture().guest_lines("patient"));
}
