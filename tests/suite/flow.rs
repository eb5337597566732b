//! The ACK path: batches flow, the committed cursor follows each one, and the log
//! holds every `seq` exactly once.

use ferry::engine::status::Event;
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::harness::Harness;
use ferry_tests::records::{next_seq, seqs};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_batch_is_delivered_once_and_the_cursor_follows_each() {
    let h = Harness::new();
    let source = h.source("flow", RANDOM_SOURCE, json!({ "messages_per_batch": 7, "max_count": 70 }));
    let mut running = h.start(vec![source]);

    for expected in 1..=10 {
        let event = running.wait_for("an ACK", |e| matches!(e, Event::Acked { .. })).await;
        let Event::Acked { generation, messages, .. } = event else { unreachable!() };
        assert_eq!(generation, Some(expected), "each ACK commits the next generation");
        assert_eq!(messages, 7);
        // What another process reads is never ahead of what was delivered.
        let committed = h.committed("flow").expect("committed after an ACK");
        assert!(committed.generation >= expected);
        assert_eq!(next_seq(&committed.state), 7 * committed.generation);
        assert!(h.records("flow").len() as u64 >= 7 * committed.generation);
    }
    running.wait_idle("flow").await;

    let committed = h.committed("flow").unwrap();
    assert_eq!((committed.generation, next_seq(&committed.state)), (10, 70));
    assert_eq!(seqs(&h.records("flow")), (0..70).collect::<Vec<_>>(), "every seq once, in order");
    let status = running.status.get("flow").unwrap();
    assert_eq!((status.batches_acked, status.messages_delivered, status.nacks), (10, 70, 0));
    assert!(running.stop().await.unsettled.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_batches_in_a_row_do_not_wedge() {
    let h = Harness::new();
    let source = h.source("many", RANDOM_SOURCE, json!({ "messages_per_batch": 1, "max_count": 600 }));
    let mut running = h.start(vec![source]);
    running.wait_idle("many").await;
    let committed = h.committed("many").unwrap();
    assert_eq!((committed.generation, next_seq(&committed.state)), (600, 600));
    assert_eq!(seqs(&h.records("many")), (0..600).collect::<Vec<_>>());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_host_continues_from_the_committed_cursor() {
    let h = Harness::new();
    let first = h.source("resume", RANDOM_SOURCE, json!({ "messages_per_batch": 10, "max_count": 50 }));
    let mut running = h.start(vec![first]);
    running.wait_idle("resume").await;
    running.stop().await;

    // Same connector, a larger max_count: it must pick up at 50, not at 0.
    let second = h.source("resume", RANDOM_SOURCE, json!({ "messages_per_batch": 10, "max_count": 80 }));
    let mut running = h.start(vec![second]);
    running.wait_idle("resume").await;
    running.stop().await;
    assert_eq!(seqs(&h.records("resume")), (0..80).collect::<Vec<_>>());
    assert_eq!(h.committed("resume").unwrap().generation, 8);
}
