//! A guest that traps, returns errors or refuses to open loses its instance, never
//! the host: it restarts from its committed cursor, and a well-behaved connector in
//! the same host keeps delivering meanwhile.

use std::time::Duration;

use ferry::config::BackoffConfig;
use ferry::engine::status::Event;
use ferry_tests::components::{FAULTY_SOURCE, RANDOM_SOURCE};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::logs::capture;
use ferry_tests::records::seqs;
use serde_json::json;

/// Restart after a fixed 100 ms: long enough to see the neighbour deliver meanwhile.
const RESTART: BackoffConfig = BackoffConfig { initial: Duration::from_millis(100), max: Duration::from_millis(100) };

/// What happened while following the events until `key` went idle.
#[derive(Default, Debug)]
struct Watched {
    traps: u32,
    failures: u32,
    guest_errors: u32,
    instances: u64,
    /// ACKs of the neighbour between a failure of `key` and its next start.
    neighbour_acks_while_down: u32,
}

async fn watch_until_idle(running: &mut Running, key: &str, neighbour: &str) -> Watched {
    let mut watched = Watched::default();
    let mut down = false;
    loop {
        let event = running.wait_for(&format!("{key} to finish"), |_| true).await;
        match &event {
            Event::Trapped { key: k, .. } if &**k == key => watched.traps += 1,
            Event::GuestError { key: k, .. } if &**k == key => watched.guest_errors += 1,
            Event::Failed { key: k, .. } if &**k == key => {
                watched.failures += 1;
                down = true;
            }
            Event::Started { key: k, instance } if &**k == key => {
                watched.instances = *instance;
                down = false;
            }
            Event::Acked { key: k, .. } if &**k == neighbour && down => watched.neighbour_acks_while_down += 1,
            Event::Idle { key: k } if &**k == key => return watched,
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_guest_is_restarted_from_committed_state_and_its_neighbour_keeps_going() {
    let h = Harness::new();
    let config = json!({ "messages_per_batch": 5, "max_count": 60, "trap_on_poll": 3 });
    let mut trapper = h.source("trapper", FAULTY_SOURCE, config);
    trapper.settings.restart_backoff = RESTART;
    let steady = h.source("steady", RANDOM_SOURCE, json!({ "messages_per_batch": 1, "interval": "1ms" }));
    let mut running = h.start(vec![trapper, steady]);

    let watched = watch_until_idle(&mut running, "trapper", "steady").await;
    // Each instance delivers two batches and traps on its third poll: 12 batches, 6 traps.
    assert_eq!(watched.traps, 6, "{watched:?}");
    assert_eq!(watched.instances, 7, "{watched:?}");
    assert!(watched.neighbour_acks_while_down > 0, "the neighbour must deliver while the trapper is down: {watched:?}");
    // A trap in `poll` has no batch outstanding: nothing is delivered twice.
    assert_eq!(seqs(&h.records("trapper")), (0..60).collect::<Vec<_>>());

    let lines = capture().of("trapper");
    let guest = capture().guest_lines("trapper");
    assert!(
        guest.iter().any(|l| l.contains("panicked at")),
        "the guest's panic is in the log under its key: {guest:?}"
    );
    assert!(guest.iter().any(|l| l == "faulty source: configured to trap on poll 3"), "{guest:?}");
    assert!(lines.iter().any(|l| l.message.contains("the guest trapped in `poll`")));
    let status = running.status.get("trapper").unwrap();
    assert_eq!(status.traps, 6);
    assert!(running.status.get("steady").unwrap().batches_acked > 0);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_keeps_returning_errors_is_failed_and_restarted() {
    let h = Harness::new();
    let config = json!({ "messages_per_batch": 5, "max_count": 40, "fail_from_poll": 3 });
    let mut failing = h.source("erring", FAULTY_SOURCE, config);
    failing.settings.max_consecutive_nacks = 2;
    failing.settings.restart_backoff = RESTART;
    let steady = h.source("steady2", RANDOM_SOURCE, json!({ "messages_per_batch": 1, "interval": "1ms" }));
    let mut running = h.start(vec![failing, steady]);

    let watched = watch_until_idle(&mut running, "erring", "steady2").await;
    // 8 batches, two per instance; each instance then errs twice and is failed.
    assert_eq!(watched.failures, 4, "{watched:?}");
    assert_eq!(watched.guest_errors, 8, "{watched:?}");
    assert_eq!(watched.traps, 0, "an error is not a trap");
    assert!(watched.neighbour_acks_while_down > 0, "{watched:?}");
    assert_eq!(seqs(&h.records("erring")), (0..40).collect::<Vec<_>>());
    let lines = capture().of("erring");
    assert!(lines.iter().any(|l| l.message.contains("guest error: configured to fail from poll 3")));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_cannot_open_keeps_retrying_without_harming_its_neighbour() {
    let h = Harness::new();
    let mut closed = h.source("closed", FAULTY_SOURCE, json!({ "max_count": 10, "fail_open": true }));
    closed.settings.restart_backoff =
        BackoffConfig { initial: Duration::from_millis(10), max: Duration::from_millis(40) };
    let steady = h.source("steady3", RANDOM_SOURCE, json!({ "messages_per_batch": 2, "max_count": 200 }));
    let mut running = h.start(vec![closed, steady]);

    for _ in 0..3 {
        let event =
            running.wait_for("a failed open", |e| matches!(e, Event::Failed { key, .. } if &**key == "closed")).await;
        let Event::Failed { reason, .. } = event else { unreachable!() };
        assert!(reason.contains("`open` returned an error: configured to refuse to open"), "{reason}");
    }
    running.wait_idle("steady3").await;
    assert_eq!(seqs(&h.records("steady3")), (0..200).collect::<Vec<_>>());
    assert_eq!(h.committed("closed"), None);
    running.stop().await;
}
