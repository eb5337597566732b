//! The NATS source against a real NATS server with JetStream of the test's own
//! (`ferry_tests::nats_server`): every message of a stream arrives in the local log
//! exactly once and in order through `kill -9`s of ferry at random moments (a message
//! is acknowledged only after its batch was committed; at open the durable consumer is
//! made again from just after the cursor, so the batch in flight at the crash comes
//! first, at once), and through a `kill -9` of the server; a message that comes again
//! after its `ack_wait` ran out during retries is acknowledged, not delivered twice; a
//! stream that does not exist is refused at open, naming it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::capabilities::nats::{NatsServer as NatsSection, NatsServers};
use ferry::engine::source::SourceConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::NATS_SOURCE;
use ferry_tests::faults::FaultyTarget;
use ferry_tests::harness::{Harness, PATIENCE};
use ferry_tests::nats_server::NatsServer;
use ferry_tests::records::{assert_complete, seqs};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site, crash_plan};

/// Publish `{"seq": n}` for `seqs` to `subject`, each acknowledged by JetStream.
async fn publish(server: &NatsServer, subject: &str, seqs: std::ops::Range<u64>) {
    let jetstream = server.jetstream().await;
    let mut pending = Vec::new();
    for seq in seqs {
        let payload = json!({ "seq": seq }).to_string();
        pending.push(jetstream.publish(subject.to_string(), payload.into()).await.expect("published"));
    }
    for acknowledgement in pending {
        acknowledgement.await.expect("stored");
    }
}

/// How many messages the consumer `durable` of `stream` was delivered and has not
/// acknowledged.
async fn ack_pending(server: &NatsServer, stream: &str, durable: &str) -> usize {
    let stream = server.jetstream().await.get_stream(stream).await.expect("the stream");
    stream.consumer_info(durable).await.expect("the consumer").num_ack_pending
}

/// A `nats-source` `key` into topic `key` of the harness, granted `server` as `hub`.
fn source(h: &Harness, server: &NatsServer, key: &str, plugin_config: Value) -> SourceConnector {
    let mut config = json!({ "connection": "hub" });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut source = h.source(key, NATS_SOURCE, config);
    source.sandbox.grants.nats = vec!["hub".into()];
    let section: NatsSection = toml::from_str(&server.ferry_section("x", "UNUSED").replace("[nats.x]\n", "")).unwrap();
    let servers = BTreeMap::from([("hub".to_string(), section)]);
    source.sandbox.shared.nats = NatsServers::granted(&source.sandbox.grants.nats, &servers).unwrap();
    source
}

const COUNT: u64 = 600;

#[test]
fn every_message_arrives_once_and_in_order_through_kill_9s_of_ferry_at_random_moments() {
    let server = NatsServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        server.create_stream("ORDERS", &["orders.>"]).await;
        publish(&server, "orders.created", 0..COUNT).await;
    });
    let site = Site::new();
    // A long ack_wait: a message in flight at a crash must come again at once, from
    // the cursor, not after it.
    let config = site.config(
        "ferry.toml",
        &format!(
            r#"
[state]
path = "state"

[local_log]
path = "log"

{section}
[[sources]]
key = "orders"
path = "{NATS_SOURCE}"
poll_interval = "2ms"
streams = [{{ stream = "demo", topic = "orders" }}]
grants = {{ nats = ["hub"] }}
plugin_config = {{ connection = "hub", stream = "ORDERS", batch_size = 7, ack_wait_ms = 600000 }}
"#,
            section = server.ferry_section("hub", "UNUSED"),
        ),
    );
    let delivered = || {
        let path = LocalLog::topic_file(&site.log_dir(), "demo", "orders");
        if !path.exists() {
            return Vec::new();
        }
        seqs(&LocalLog::read_all(&site.log_dir(), "demo", "orders").unwrap())
    };
    let (rounds, mut rng) = crash_plan("nats_source::every_message_arrives_once");
    for _ in 0..rounds.min(6) {
        let mut run = Ferry::start(&config, &[]);
        run.kill_9_at_a_random_moment(&mut rng, &["key=orders", "running"]);
    }
    let mut run = Ferry::start(&config, &[]);
    // Running (its signals caught) before it is told to stop, even if the runs before
    // delivered everything.
    run.wait_for_line(&["key=orders", "running"]);
    until("every message in the log", || delivered().len() as u64 >= COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let seqs = delivered();
    assert_eq!(assert_complete(&seqs, COUNT), 0, "nothing delivered twice");
    assert_eq!(seqs, (0..COUNT).collect::<Vec<_>>(), "in the stream's order");
    assert_eq!(runtime.block_on(ack_pending(&server, "ORDERS", "ferry")), 0, "every message acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_mid_flow_is_waited_for_and_every_message_arrives_once() {
    let mut server = tokio::task::block_in_place(NatsServer::start);
    server.create_stream("EVENTS", &["events"]).await;
    publish(&server, "events", 0..200).await;
    let h = Harness::new();
    let mut running = h.start(vec![source(&h, &server, "events", json!({ "stream": "EVENTS", "batch_size": 10 }))]);
    running.wait_for("a batch", |e| matches!(e, Event::Acked { key, .. } if &**key == "events")).await;
    tokio::task::block_in_place(|| server.kill_9());
    running
        .wait_for(
            "a failed poll while it is down",
            |e| matches!(e, Event::GuestError { key, .. } | Event::Trapped { key, .. } if &**key == "events"),
        )
        .await;
    tokio::task::block_in_place(|| server.restart());
    publish(&server, "events", 200..300).await;
    let records = || seqs(&h.records("events"));
    running.wait_for("every message", |_| records().len() >= 300).await;
    running.stop().await;

    let seqs = records();
    assert_eq!(assert_complete(&seqs, 300), 0, "once each: {seqs:?}");
    assert_eq!(ack_pending(&server, "EVENTS", "ferry").await, 0, "every message acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_comes_again_after_its_ack_wait_during_retries_is_not_delivered_twice() {
    let server = tokio::task::block_in_place(NatsServer::start);
    server.create_stream("EVENTS", &["events"]).await;
    publish(&server, "events", 0..30).await;
    let h = Harness::new();
    // The first batch's deliveries fail for longer than the ack_wait: the server
    // gives its messages out again meanwhile, and the source sees them come again.
    let ack_wait = Duration::from_millis(300);
    let plugin_config = json!({ "stream": "EVENTS", "batch_size": 10, "ack_wait_ms": ack_wait.as_millis() as u64 });
    let mut source = source(&h, &server, "events", plugin_config);
    let target = FaultyTarget::new(h.log.clone());
    target.set_failing(true);
    source.target = target.clone() as Arc<_>;
    let started = Instant::now();
    let mut running = h.start(vec![source]);
    running
        .wait_for("retries past two ack_waits", |_| target.refused().len() >= 3 && started.elapsed() > ack_wait * 2)
        .await;
    target.set_failing(false);
    running.wait_for("every message", |_| h.records("events").len() >= 30).await;
    publish(&server, "events", 30..40).await;
    running.wait_for("the messages after", |_| h.records("events").len() >= 40).await;
    let deadline = Instant::now() + PATIENCE;
    while ack_pending(&server, "EVENTS", "ferry").await != 0 {
        assert!(Instant::now() < deadline, "every message acknowledged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // By the source's own acknowledgements, not by a restart making the consumer again.
    let status = running.status.get("events").unwrap();
    assert_eq!((status.traps, status.guest_errors, status.instances), (0, 0, 1), "{status:?}");
    running.stop().await;

    assert!(target.refused().iter().all(|batch| *batch == (0..10).collect::<Vec<_>>()), "the same batch each time");
    let seqs = seqs(&h.records("events"));
    assert_eq!(assert_complete(&seqs, 40), 0, "once each: {seqs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_does_not_exist_is_refused_at_open_naming_it() {
    let server = tokio::task::block_in_place(NatsServer::start);
    let h = Harness::new();
    let mut running = h.start(vec![source(&h, &server, "orders", json!({ "stream": "NOPE" }))]);
    let event = running
        .wait_for(
            "the open to fail",
            |e| matches!(e, Event::GuestError { key, .. } | Event::Failed { key, .. } if &**key == "orders"),
        )
        .await;
    running.stop().await;
    let said = format!("{event:?}");
    assert!(said.contains("nats `hub`") && said.contains("the stream \\\"NOPE\\\""), "{said}");
    assert!(h.records("orders").is_empty());
}
