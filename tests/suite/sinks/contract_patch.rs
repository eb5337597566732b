//! A sink built against the previous patch release of the contract (0.2.0, before
//! `stored-checksums`) runs on this host unchanged: the README's promise that a patch
//! release only adds what a guest may ignore.

use ferry_tests::components::CONTRACT_0_2_0_SINK;
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::seq_messages;
use serde_json::json;

use super::{committed_position, written};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_built_against_the_previous_patch_release_runs_and_its_offsets_are_stored() {
    assert_ne!(ferry::contract::VERSION, "0.2.0", "this host is a later patch release than the guest");
    let h = Harness::new();
    h.append("older", seq_messages(0..4)).await;
    let sink = h.sink("old-sink", CONTRACT_0_2_0_SINK, json!({}), &["older"]);
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));

    running.wait_for("the batch settled", written("old-sink", 4)).await;
    let report = running.stop().await;

    assert!(report.unsettled.is_empty(), "{:?}", report.unsettled);
    assert_eq!(committed_position(&h, "old-sink", "older"), Some(4));
    let heard = capture().guest_lines("old-sink");
    assert!(heard.iter().any(|line| line == "wrote offsets 0,1,2,3"), "its 0.2.0 logging import works: {heard:?}");
}
