//! The Kafka sink against a real Kafka-protocol broker of the test's own (tansu,
//! `ferry_tests::kafka_broker`): every message stored with its headers and keyed by
//! its stable id, and one too large for the cluster dead-lettered with the reason; a
//! topic that does not exist waited on, said, nothing dead-lettered, until it is made;
//! nothing lost through a `kill -9` of the broker and one of ferry mid-flow (Kafka
//! keeps no ids across producers: what a replay stores again is counted, at most the
//! batches in flight, each copy with the same `Iggy-Id`); a cluster not granted
//! refused before any connection; a refused password said at once, nothing stored
//! until the password is right.

use std::collections::BTreeMap;
use std::net::TcpListener;

use ferry::capabilities::kafka::{KafkaCluster, KafkaClusters};
use ferry::engine::sink::SinkConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{KAFKA_SINK, RANDOM_SOURCE};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::kafka_broker::{KafkaBroker, PASSWORD, Record};
use ferry_tests::records::{seq_messages, seq_of};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use crate::sinks::{drain_orders as drain, wait_written_orders as wait_written};

/// A `kafka-sink` `key` reading topic `orders`, granted `broker` as `events`, with
/// `plugin_config` added; its dead letters into topic `orders-dead`.
fn sink(h: &Harness, broker: &KafkaBroker, key: &str, plugin_config: Value) -> SinkConnector {
    sink_of(h, &broker.ferry_section("x"), key, plugin_config)
}

/// [`sink`] of the cluster `section` defines (as `[kafka.x]`).
fn sink_of(h: &Harness, section: &str, key: &str, plugin_config: Value) -> SinkConnector {
    let mut config = json!({ "connection": "events" });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut sink = h.sink(key, KAFKA_SINK, config, &["orders"]);
    sink.dead_letters = Some(h.dead_letters("orders-dead"));
    sink.sandbox.grants.kafka = vec!["events".into()];
    let section: KafkaCluster = toml::from_str(&section.replace("[kafka.x]\n", "")).unwrap();
    let clusters = BTreeMap::from([("events".to_string(), section)]);
    sink.sandbox.shared.kafka = KafkaClusters::granted(&sink.sandbox.grants.kafka, &clusters).unwrap();
    sink
}

/// How many records of `records` hold each `seq`.
fn seq_counts(records: &[Record]) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for record in records {
        *counts.entry(seq_of(&record.payload)).or_insert(0) += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_stored_keyed_by_id_with_headers_and_one_too_large_is_dead_lettered() {
    let broker = tokio::task::block_in_place(KafkaBroker::start);
    broker.create_topic("test.orders", 2).await;
    let h = Harness::new();
    let mut messages = seq_messages(0..20);
    // Past librdkafka's message.max.bytes (1,000,000), which a cluster takes by default.
    messages[5].payload = format!(r#"{{"seq":5,"pad":"{}"}}"#, "x".repeat(1_100_000)).into_bytes().into();
    h.append("orders", messages).await;
    drain(&h, sink(&h, &broker, "producer", json!({})), 20).await;

    let records = tokio::task::block_in_place(|| broker.read_all("test.orders"));
    let stored = seq_counts(&records);
    let expected: Vec<u64> = (0..20).filter(|s| *s != 5).collect();
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), expected, "every message but the big one");
    assert!(stored.values().all(|n| *n == 1), "once each: {stored:?}");
    let first = records.iter().find(|r| seq_of(&r.payload) == 0).unwrap();
    assert_eq!((first.header("Iggy-Topic"), first.header("Iggy-Offset")), (Some("orders".into()), Some("0".into())));
    let id = first.header("Iggy-Id").expect("an Iggy-Id header");
    assert_eq!(id, "1", "the message's own id");
    assert_eq!(first.key.as_deref(), Some(id.as_bytes()), "keyed by its id");
    let partitions: std::collections::BTreeSet<i32> = records.iter().map(|r| r.partition).collect();
    assert_eq!(partitions.len(), 2, "spread over the partitions by key");
    let dead = h.records("orders-dead");
    assert_eq!(dead.len(), 1);
    let reason = dead[0].headers.as_ref().unwrap()["ferry-dead-letter-reason"]["string"].as_str().unwrap().to_string();
    assert!(reason.contains("the cluster refused it") && reason.to_lowercase().contains("too large"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_that_does_not_exist_is_waited_on_until_it_is_made() {
    let broker = tokio::task::block_in_place(KafkaBroker::start);
    let h = Harness::new();
    h.append("orders", seq_messages(0..10)).await;
    let mut waiting = sink(&h, &broker, "waiting", json!({ "topic": "later" }));
    waiting.sandbox.limits.call_timeout = std::time::Duration::from_secs(2);
    let mut running = Running::start(h.host_with(Vec::new(), vec![waiting]));
    let event = running.wait_for("a retry", |e| matches!(e, Event::Retried { key, .. } if &**key == "waiting")).await;
    assert!(format!("{event:?}").contains("kafka `events`"), "{event:?}");
    broker.create_topic("later", 1).await;
    wait_written(&mut running, "waiting", 10).await;
    running.stop().await;

    let stored = seq_counts(&tokio::task::block_in_place(|| broker.read_all("later")));
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
    assert!(stored.values().all(|n| *n == 1), "the waiting batch's copies were not all sent: {stored:?}");
    assert!(h.records("orders-dead").is_empty(), "nothing dead-lettered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_not_granted_is_refused_before_any_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let h = Harness::new();
    h.append("orders", seq_messages(0..3)).await;
    let mut refused = h.sink("ungranted", KAFKA_SINK, json!({ "connection": "elsewhere" }), &["orders"]);
    let section: KafkaCluster = toml::from_str(&format!("brokers = [\"{}\"]", listener.local_addr().unwrap())).unwrap();
    refused.sandbox.shared.kafka =
        KafkaClusters::granted(&[], &BTreeMap::from([("elsewhere".to_string(), section)])).unwrap();
    let mut running = Running::start(h.host_with(Vec::new(), vec![refused]));
    let event =
        running.wait_for("the open to fail", |e| matches!(e, Event::Failed { key, .. } if &**key == "ungranted")).await;
    running.stop().await;
    assert!(format!("{event:?}").contains("not in this connector's grants.kafka"), "{event:?}");
    assert!(listener.accept().is_err(), "nothing connected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_password_is_said_at_once_and_nothing_is_stored_until_it_is_right() {
    const WRONG: &str = "not-the-password-3";
    let broker = tokio::task::block_in_place(KafkaBroker::start_with_user);
    broker.create_topic("test.orders", 1).await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..10)).await;
    // SAFETY: these variables are this test's alone.
    unsafe {
        std::env::set_var("FERRY_TEST_KAFKA_WRONG_PASSWORD", WRONG);
        std::env::set_var("FERRY_TEST_KAFKA_PASSWORD", PASSWORD);
    }
    let section = broker.ferry_section_as_user("x", "FERRY_TEST_KAFKA_WRONG_PASSWORD");
    let mut wrong = sink_of(&h, &section, "locked-out", json!({}));
    // Long enough that only the refusal, not the deadline, can end the call.
    wrong.sandbox.limits.call_timeout = std::time::Duration::from_secs(60);
    let mut running = Running::start(h.host_with(Vec::new(), vec![wrong]));
    let event =
        running.wait_for("the refusal", |e| matches!(e, Event::Retried { key, .. } if &**key == "locked-out")).await;
    running.stop().await;
    let said = format!("{event:?}");
    assert!(
        said.contains("kafka `events`")
            && said.contains("the cluster refused the login of user `ferry` (SCRAM-SHA-512)"),
        "{said}"
    );
    assert!(!said.contains("timed out") && !said.contains(WRONG), "{said}");
    assert!(tokio::task::block_in_place(|| broker.read_all("test.orders")).is_empty(), "nothing stored");
    assert!(h.records("orders-dead").is_empty(), "nothing dead-lettered");

    let section = broker.ferry_section_as_user("x", "FERRY_TEST_KAFKA_PASSWORD");
    drain(&h, sink_of(&h, &section, "let-in", json!({})), 10).await;
    let stored = seq_counts(&tokio::task::block_in_place(|| broker.read_all("test.orders")));
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), (0..10).collect::<Vec<_>>(), "every message");
    assert!(stored.values().all(|n| *n == 1), "once each: {stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_killed_mid_flow_is_waited_for_and_nothing_is_lost() {
    const COUNT: u64 = 300;
    let mut broker = tokio::task::block_in_place(KafkaBroker::start);
    broker.create_topic("test.orders", 1).await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..COUNT)).await;
    let mut flowing = sink(&h, &broker, "steady", json!({}));
    flowing.settings.batch_length = 10;
    let mut running = Running::start(h.host_with(Vec::new(), vec![flowing]));
    wait_written(&mut running, "steady", 50).await;
    tokio::task::block_in_place(|| broker.kill_9());
    tokio::task::block_in_place(|| broker.restart());
    wait_written(&mut running, "steady", COUNT).await;
    running.stop().await;

    let stored = seq_counts(&tokio::task::block_in_place(|| broker.read_all("test.orders")));
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>(), "nothing lost");
    let twice: usize = stored.values().map(|n| n - 1).sum();
    eprintln!("kafka sink, broker killed: {twice} message(s) stored twice");
    assert!(twice <= 10, "at most the batch in flight again: {twice}");
}

const COUNT: u64 = 2000;

#[test]
fn nothing_is_lost_through_a_kill_9_of_ferry_and_a_replay_is_at_most_the_batch_in_flight() {
    let broker = KafkaBroker::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(broker.create_topic("demo.feed", 2));
    let site = Site::new();
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
key = "feed"
path = "{RANDOM_SOURCE}"
poll_interval = "1ms"
streams = [{{ stream = "demo", topic = "feed" }}]
plugin_config = {{ max_count = {COUNT}, messages_per_batch = 2, interval = "5ms", payload_size = 40 }}

[[sinks]]
key = "producer"
path = "{KAFKA_SINK}"
poll_interval = "2ms"
batch_length = 20
retry_backoff = {{ initial = "5ms", max = "50ms" }}
streams = [{{ stream = "demo", topics = ["feed"] }}]
dead_letters = {{ stream = "dead", topic = "producer" }}
grants = {{ kafka = ["events"] }}
plugin_config = {{ connection = "events" }}
"#,
            section = broker.ferry_section("events"),
        ),
    );
    let stored = || seq_counts(&broker.read_all("demo.feed"));
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=producer", "running"]);
    until("a hundred messages", || stored().len() >= 100);
    run.kill_9();
    let before_the_kill = stored().len() as u64;
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=producer", "running"]);
    until("every message", || stored().len() as u64 >= COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let stored = stored();
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>(), "nothing lost");
    let twice: usize = stored.values().map(|n| n - 1).sum();
    eprintln!("kafka sink, ferry killed: {twice} message(s) stored twice");
    assert!(twice <= 20, "at most the batch in flight (batch_length 20) again: {twice}");
    assert!(before_the_kill < COUNT, "the kill landed mid-flow");
    assert!(!LocalLog::topic_file(&site.log_dir(), "dead", "producer").exists(), "nothing dead-lettered");
}
