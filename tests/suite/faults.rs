//! Failures on the way out: the target refuses, the target hangs, the state store
//! refuses. Each must be a NACK that the guest hears, the committed cursor must not
//! move while it lasts, and the flow must resume by itself when it clears.

use std::sync::Arc;
use std::time::Duration;

use ferry::contract::NackReason;
use ferry::engine::status::Event;
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::faults::{FaultyCursor, FaultyTarget, GatedTarget};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::{assert_complete, next_seq, seqs};
use serde_json::json;

pub fn is_nack(key: &'static str, reason: NackReason) -> impl FnMut(&Event) -> bool {
    move |e| matches!(e, Event::Nacked { key: k, reason: r, .. } if &**k == key && *r == reason)
}

pub async fn wait_generation(running: &mut Running, key: &'static str, at_least: u64) {
    running
        .wait_for(
            "ACKs",
            |e| matches!(e, Event::Acked { key: k, generation: Some(g), .. } if &**k == key && *g >= at_least),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delivery_is_nacked_and_the_same_records_come_again() {
    let h = Harness::new();
    let target = FaultyTarget::new(h.log.clone());
    let mut source = h.source("refused", RANDOM_SOURCE, json!({ "messages_per_batch": 5, "max_count": 100 }));
    source.target = target.clone();
    let mut running = h.start(vec![source]);

    wait_generation(&mut running, "refused", 3).await;
    target.set_failing(true);
    running.wait_for("a NACK", is_nack("refused", NackReason::DeliveryFailed)).await;
    let before = (h.committed("refused"), h.state_bytes("refused"));
    for _ in 0..3 {
        running.wait_for("more NACKs", is_nack("refused", NackReason::DeliveryFailed)).await;
    }
    let after = (h.committed("refused"), h.state_bytes("refused"));
    assert_eq!(before, after, "NACKs must leave the committed cursor and its file untouched");

    let refused = target.refused();
    assert!(refused.len() >= 4, "{refused:?}");
    assert!(refused.windows(2).all(|w| w[0] == w[1]), "the guest must produce the same records again: {refused:?}");
    let committed = after.0.expect("committed before the fault");
    assert_eq!(refused[0][0], next_seq(&committed.state), "re-produced from the committed cursor");
    let heard = capture().guest_lines("refused");
    assert!(
        heard.iter().any(|l| l.contains("not acknowledged (delivery failed")),
        "the guest heard the NACK: {heard:?}"
    );

    target.set_failing(false);
    running.wait_idle("refused").await;
    assert_eq!(seqs(&h.records("refused")), (0..100).collect::<Vec<_>>(), "nothing lost, nothing doubled");
    assert_eq!(next_seq(&h.committed("refused").unwrap().state), 100);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_that_hangs_times_out_as_a_nack() {
    let h = Harness::new();
    let gate = GatedTarget::new(h.log.clone());
    let mut source = h.source("hang", RANDOM_SOURCE, json!({ "messages_per_batch": 4, "max_count": 40 }));
    source.target = gate.clone();
    source.settings.delivery_timeout = Duration::from_millis(150);
    let mut running = h.start(vec![source]);

    let event = running.wait_for("a time-out", is_nack("hang", NackReason::TimedOut)).await;
    let Event::Nacked { detail, .. } = event else { unreachable!() };
    assert!(detail.contains("150ms"), "{detail}");
    running.wait_for("another time-out", is_nack("hang", NackReason::TimedOut)).await;
    assert_eq!(h.committed("hang"), None, "nothing committed while deliveries hang");
    assert!(h.records("hang").is_empty());

    gate.release(1_000_000);
    running.wait_idle("hang").await;
    assert_eq!(seqs(&h.records("hang")), (0..40).collect::<Vec<_>>());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_state_save_is_nacked_and_the_batch_is_produced_again_but_appended_once() {
    let h = Harness::new();
    let mut source = h.source("unsaved", RANDOM_SOURCE, json!({ "messages_per_batch": 5, "max_count": 100 }));
    let cursor = FaultyCursor::new(source.cursor.clone());
    source.cursor = cursor.clone();
    let mut running = h.start(vec![source]);

    wait_generation(&mut running, "unsaved", 2).await;
    cursor.set_failing(true);
    running.wait_for("a NACK", is_nack("unsaved", NackReason::StateSaveFailed)).await;
    let before = (h.committed("unsaved"), h.state_bytes("unsaved"));
    for _ in 0..3 {
        running.wait_for("more NACKs", is_nack("unsaved", NackReason::StateSaveFailed)).await;
    }
    assert_eq!(before, (h.committed("unsaved"), h.state_bytes("unsaved")), "the cursor did not move");
    let heard = capture().guest_lines("unsaved");
    assert!(heard.iter().any(|l| l.contains("not acknowledged (state save failed")), "{heard:?}");

    cursor.set_failing(false);
    running.wait_idle("unsaved").await;
    let nacks = running.status.get("unsaved").unwrap().nacks;
    assert!(nacks >= 4, "{nacks} NACKs");
    // Each NACKed batch had been delivered before its save failed, and was produced
    // again; the local log kept it with its cursor, so it was not appended twice.
    let duplicates = assert_complete(&seqs(&h.records("unsaved")), 100);
    assert_eq!(duplicates, 0, "a batch the log already held was appended again");
    assert_eq!(next_seq(&h.committed("unsaved").unwrap().state), 100);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_nacks_in_a_row_fail_the_connector_and_it_restarts_from_committed_state() {
    let h = Harness::new();
    let target = FaultyTarget::new(h.log.clone());
    let mut source = h.source("flaky", RANDOM_SOURCE, json!({ "messages_per_batch": 5, "max_count": 50 }));
    source.target = target.clone() as Arc<_>;
    source.settings.max_consecutive_nacks = 3;
    let mut running = h.start(vec![source]);

    wait_generation(&mut running, "flaky", 2).await;
    target.set_failing(true);
    let event = running
        .wait_for("the connector to fail", |e| matches!(e, Event::Failed { key, .. } if &**key == "flaky"))
        .await;
    let Event::Failed { reason, .. } = event else { unreachable!() };
    assert!(reason.contains("3 NACKs or guest errors in a row; the last: NACK delivery-failed"), "{reason}");
    running.wait_for("a restart", |e| matches!(e, Event::Started { key, instance: 2 } if &**key == "flaky")).await;
    target.set_failing(false);
    running.wait_idle("flaky").await;
    assert_eq!(seqs(&h.records("flaky")), (0..50).collect::<Vec<_>>());
    running.stop().await;
}

/// A target with a bug: it panics.
struct PanickingTarget;

#[async_trait::async_trait]
impl ferry::engine::delivery::Target for PanickingTarget {
    async fn deliver(
        &self,
        _: ferry::engine::delivery::Delivery,
    ) -> Result<ferry::engine::delivery::Receipt, ferry::engine::delivery::DeliveryError> {
        panic!("a bug in a target")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connector_whose_task_dies_shows_as_failed_and_its_neighbour_goes_on() {
    let h = Harness::new();
    let mut broken = h.source("broken", RANDOM_SOURCE, json!({ "messages_per_batch": 5, "max_count": 100 }));
    broken.target = Arc::new(PanickingTarget);
    let neighbour = h.source("fine", RANDOM_SOURCE, json!({ "messages_per_batch": 5, "max_count": 100 }));
    let mut running = h.start(vec![broken, neighbour]);
    let (mut failure, mut neighbour_idle) = (None, false);
    while failure.is_none() || !neighbour_idle {
        match running.wait_for("the broken task's failure and the neighbour's idle", |_| true).await {
            Event::Failed { key, reason } if &*key == "broken" => failure = Some(reason),
            Event::Idle { key } if &*key == "fine" => neighbour_idle = true,
            _ => {}
        }
    }
    let reason = failure.unwrap();
    assert!(reason.contains("panicked") && reason.contains("a bug in a target"), "{reason}");
    let status = running.status.get("broken").unwrap();
    assert_eq!(status.phase, ferry::engine::status::Phase::Failed, "a dead task must not look alive: {status:?}");
    assert!(h.committed("broken").is_none(), "nothing was delivered, so nothing is committed");
    assert_complete(&seqs(&h.records("fine")), 100);
    let report = running.stop().await;
    assert!(report.unsettled.is_empty(), "{report:?}");
}
