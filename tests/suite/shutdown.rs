//! Graceful shutdown: polling stops, the batch in flight settles, guests are closed.

use std::time::Duration;

use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::faults::GatedTarget;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::{next_seq, seqs};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::process::{Ferry, Site, random_source_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_batch_in_flight_settle_then_closes_the_guest() {
    let h = Harness::new();
    let gate = GatedTarget::new(h.log.clone());
    let mut source = h.source("inflight", RANDOM_SOURCE, json!({ "messages_per_batch": 6 }));
    source.target = gate.clone();
    let running = h.start(vec![source]);

    let in_flight = gate.next_arrival().await;
    running.request_stop();
    // Let everything through: after shutdown no new batch may be polled, so only the
    // one in flight can arrive.
    gate.release(1000);
    let report = running.finished().await;
    assert!(report.unsettled.is_empty());

    assert_eq!(in_flight, (0..6).collect::<Vec<_>>());
    let committed = h.committed("inflight").expect("the batch in flight was committed");
    assert_eq!((committed.generation, next_seq(&committed.state)), (1, 6));
    assert_eq!(seqs(&h.records("inflight")), in_flight, "nothing polled after the shutdown request");
    let heard = capture().guest_lines("inflight");
    assert!(
        heard.iter().any(|l| l == r#"closing at committed cursor {"next_seq":6}"#),
        "close() was called: {heard:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_does_not_settle_within_the_grace_period_is_reported_and_not_committed() {
    let h = Harness::new();
    let gate = GatedTarget::new(h.log.clone());
    let mut source = h.source("stuck", RANDOM_SOURCE, json!({ "messages_per_batch": 3 }));
    source.target = gate.clone();
    let mut host = h.host(vec![source]);
    host.set_grace_period(Duration::from_millis(200));
    let running = Running::start(host);

    gate.next_arrival().await;
    let report = running.stop().await;
    assert_eq!(report.unsettled, ["stuck"]);
    assert_eq!(h.committed("stuck"), None, "an unsettled batch is not committed");
}

#[test]
fn sigterm_with_batches_flowing_settles_and_exits_0() {
    let site = Site::new();
    let config = site.config("ferry.toml", &random_source_config("term", "messages_per_batch = 50"));
    let mut ferry = Ferry::start(&config, &[("FERRY_LOG", "info,ferry_engine::status=debug")]);
    ferry.wait_for_line(&["key=term", "batch delivered", "generation=5"]);
    ferry.signal(Signal::SIGTERM);
    let status = ferry.wait();
    assert!(status.success(), "exit status {status}; log:\n{}", ferry.log());

    let log = ferry.log();
    let closing = log.lines().find(|l| l.contains("closing at committed cursor")).expect("close() was called");
    let closed_at: u64 = closing.rsplit("\"next_seq\":").next().unwrap().trim_end_matches('}').parse().unwrap();
    let committed = site.states().read("term").unwrap().unwrap();
    assert_eq!(next_seq(&committed.state), closed_at);
    let records = ferry::store::local_log::LocalLog::read_all(&site.log_dir(), "demo", "term").unwrap();
    // Settled means: every delivered record is committed, and nothing beyond.
    assert_eq!(seqs(&records), (0..closed_at).collect::<Vec<_>>());
    assert!(log.contains("all connectors stopped cleanly"));
}

#[test]
fn sigterm_while_ferry_is_still_setting_up_stops_it_cleanly() {
    let site = Site::new();
    let config = site.config("ferry.toml", &random_source_config("early", "messages_per_batch = 50"));
    let mut ferry = Ferry::start(&config, &[]);
    // The first line of set-up: components are still to be read, checked and
    // compiled, state to be opened.
    ferry.wait_for_line(&["connectors use the local log"]);
    ferry.signal(Signal::SIGTERM);
    let status = ferry.wait();
    assert!(status.success(), "exit status {status}: killed rather than stopped? log:\n{}", ferry.log());
    let log = ferry.log();
    assert!(log.contains("SIGTERM received: stopping"), "{log}");
    assert!(log.contains("all connectors stopped cleanly"), "{log}");
}
