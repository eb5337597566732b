//! The pooling allocator (`[runtime] allocator = "pooling"`): instance slots are
//! reserved up front and reused, so restarts must give their slot back, and a host
//! whose pool is too small must say so rather than hang.

use std::time::Duration;

use ferry::config::{Allocator, BackoffConfig};
use ferry::engine::status::Event;
use ferry::runtime::{EngineOptions, PoolSize};
use ferry_tests::components::{FAULTY_SOURCE, RANDOM_SOURCE};
use ferry_tests::harness::Harness;
use ferry_tests::records::seqs;
use serde_json::json;

fn pooled(instances: u32) -> Harness {
    let pool = PoolSize { instances, max_memory_bytes: 64 << 20 };
    Harness::with_engine(&EngineOptions { allocator: Allocator::Pooling, pool, ..EngineOptions::default() })
}

const QUICK_RESTART: BackoffConfig = BackoffConfig { initial: Duration::from_millis(5), max: Duration::from_millis(5) };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_reuse_pool_slots_more_often_than_the_pool_has_them() {
    // Three slots; the trapper alone goes through seven instances.
    let h = pooled(3);
    let config = json!({ "messages_per_batch": 5, "max_count": 60, "trap_on_poll": 3 });
    let mut trapper = h.source("trapper", FAULTY_SOURCE, config);
    trapper.settings.restart_backoff = QUICK_RESTART;
    let steady = h.source("steady", RANDOM_SOURCE, json!({ "messages_per_batch": 1, "max_count": 200 }));
    let mut running = h.start(vec![trapper, steady]);
    let mut traps = 0;
    let mut idle = std::collections::HashSet::new();
    while idle.len() < 2 {
        match running.wait_for("both connectors to finish", |_| true).await {
            Event::Trapped { key, .. } if &*key == "trapper" => traps += 1,
            Event::Failed { key, reason } if &*key == "steady" => panic!("the neighbour failed: {reason}"),
            Event::Idle { key } => {
                idle.insert(key.to_string());
            }
            _ => {}
        }
    }
    running.stop().await;
    assert!(traps >= 5, "the trapper went through more instances than the pool has slots: {traps} traps");
    let trapper: std::collections::BTreeSet<u64> = seqs(&h.records("trapper")).into_iter().collect();
    assert_eq!(trapper, (0..60).collect(), "every seq of the trapper, no gap");
    assert_eq!(seqs(&h.records("steady")), (0..200).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_too_small_for_its_connectors_is_a_failure_that_says_so() {
    let h = pooled(1);
    let first = h.source("first", RANDOM_SOURCE, json!({ "messages_per_batch": 1, "interval": "1ms" }));
    let mut second = h.source("second", RANDOM_SOURCE, json!({ "messages_per_batch": 1, "max_count": 5 }));
    second.settings.restart_backoff = QUICK_RESTART;
    let mut running = h.start(vec![first, second]);
    // Whichever connector got the one slot delivers; the other fails, naming the pool.
    let failure =
        running.wait_for("a connector to fail for want of a slot", |e| matches!(e, Event::Failed { .. })).await;
    let Event::Failed { key, reason } = failure else { unreachable!() };
    assert!(reason.contains("instance") && reason.contains("limit"), "{key}: {reason}");
    let other = if &*key == "first" { "second" } else { "first" };
    running
        .wait_for(
            "the connector with the slot to deliver",
            |e| matches!(e, Event::Acked { key, .. } if &**key == other),
        )
        .await;
    running.stop().await;
}
