//! The Kafka source against a real Kafka-protocol broker of the test's own (tansu,
//! `ferry_tests::kafka_broker`): every message of a three-partition topic arrives in
//! the local log exactly once, each partition's in order, through `kill -9`s of ferry
//! at random moments, with the group's offsets committed to the end afterwards; the
//! broker killed mid-flow is waited for; a NACKed batch comes again the same, without
//! a restart; a group's committed offsets are where a source without a cursor starts
//! (a consumer group moved to ferry); a topic that does not exist is refused at open,
//! naming it; a cluster not granted is refused before any connection.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;

use ferry::capabilities::kafka::{KafkaCluster, KafkaClusters};
use ferry::engine::source::SourceConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::{LocalLog, Record};
use ferry_tests::components::KAFKA_SOURCE;
use ferry_tests::faults::FaultyTarget;
use ferry_tests::harness::Harness;
use ferry_tests::kafka_broker::{KafkaBroker, PASSWORD};
use ferry_tests::logs::capture;
use ferry_tests::records::{assert_complete, seq_of, seqs};
use nix::sys::signal::Signal;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site, crash_plan};

/// `{"seq": n}` for every n of `seqs`, keyed `k{n}` (spread over the partitions by
/// the key's hash; each partition's seqs rise, as one producer sent them).
async fn produce(broker: &KafkaBroker, topic: &str, seqs: std::ops::Range<u64>) {
    let payloads: Vec<Vec<u8>> = seqs.clone().map(|seq| json!({ "seq": seq }).to_string().into_bytes()).collect();
    let first = seqs.start as usize;
    broker.produce(topic, &payloads, |i| format!("k{}", first + i)).await;
}

/// The partition a record came from (its `kafka_partition` header).
fn partition_of(record: &Record) -> i64 {
    record.headers.as_ref().and_then(|h| h["kafka_partition"]["int32"].as_i64()).expect("a kafka_partition header")
}

/// Each partition's seqs rise: the order Kafka keeps, kept.
fn assert_in_partition_order(records: &[Record]) {
    let mut last: BTreeMap<i64, u64> = BTreeMap::new();
    for record in records {
        let seq = seq_of(&record.payload);
        if let Some(before) = last.insert(partition_of(record), seq) {
            assert!(seq > before, "partition {}: {seq} after {before}", partition_of(record));
        }
    }
}

/// A `kafka-source` `key` into topic `key` of the harness, granted `broker` as `hub`.
fn source(h: &Harness, broker: &KafkaBroker, key: &str, plugin_config: Value) -> SourceConnector {
    source_of(h, &broker.ferry_section("x"), key, plugin_config)
}

/// [`source`] of the cluster `section` defines (as `[kafka.x]`).
fn source_of(h: &Harness, section: &str, key: &str, plugin_config: Value) -> SourceConnector {
    let mut config = json!({ "connection": "hub" });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut source = h.source(key, KAFKA_SOURCE, config);
    source.sandbox.grants.kafka = vec!["hub".into()];
    let section: KafkaCluster = toml::from_str(&section.replace("[kafka.x]\n", "")).unwrap();
    let clusters = BTreeMap::from([("hub".to_string(), section)]);
    source.sandbox.shared.kafka = KafkaClusters::granted(&source.sandbox.grants.kafka, &clusters).unwrap();
    source
}

const COUNT: u64 = 6000;

#[test]
fn every_message_arrives_once_in_partition_order_through_kill_9s_of_ferry_at_random_moments() {
    let broker = KafkaBroker::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        broker.create_topic("orders", 3).await;
        produce(&broker, "orders", 0..COUNT).await;
    });
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
key = "orders"
path = "{KAFKA_SOURCE}"
poll_interval = "2ms"
streams = [{{ stream = "demo", topic = "orders" }}]
grants = {{ kafka = ["hub"] }}
plugin_config = {{ connection = "hub", topics = ["orders"], group = "migrated", batch_size = 10 }}
"#,
            section = broker.ferry_section("hub"),
        ),
    );
    let delivered = || {
        let path = LocalLog::topic_file(&site.log_dir(), "demo", "orders");
        if !path.exists() {
            return Vec::new();
        }
        LocalLog::read_all(&site.log_dir(), "demo", "orders").unwrap()
    };
    let (rounds, mut rng) = crash_plan("kafka_source::every_message_arrives_once");
    let mut mid_flow = 0;
    for _ in 0..rounds.min(8) {
        let before = delivered().len();
        let mut run = Ferry::start(&config, &[]);
        // One time in five during start-up; the others up to 300 ms after the round's
        // first batch is in the log (librdkafka's first fetch, after connecting and
        // looking up offsets, takes longer than the moments drawn).
        if rng.u8(0..5) > 0 {
            until("a batch of this round", || delivered().len() > before || delivered().len() as u64 >= COUNT);
        }
        std::thread::sleep(std::time::Duration::from_millis(rng.u64(0..300)));
        run.kill_9();
        let after = delivered().len();
        eprintln!("kafka source: {before} -> {after}");
        if after > before && (after as u64) < COUNT {
            mid_flow += 1;
        }
    }
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=orders", "running"]);
    until("every message in the log", || delivered().len() as u64 >= COUNT);
    // The group's offsets follow the cursor: committed after the last batch's ACK.
    until("the group's offsets at the end", || {
        let committed = broker.committed("migrated", "orders", 3);
        let stored: BTreeMap<i64, usize> = delivered().iter().fold(BTreeMap::new(), |mut n, r| {
            *n.entry(partition_of(r)).or_insert(0) += 1;
            n
        });
        committed
            .iter()
            .enumerate()
            .all(|(p, c)| c.unwrap_or(0) == stored.get(&(p as i64)).copied().unwrap_or(0) as i64)
    });
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let records = delivered();
    eprintln!("kafka source: {mid_flow} kill(s) landed mid-flow");
    assert!(mid_flow > 0, "no kill landed while messages were flowing");
    assert_eq!(assert_complete(&seqs(&records), COUNT), 0, "nothing delivered twice");
    assert_in_partition_order(&records);
    let partitions: std::collections::BTreeSet<i64> = records.iter().map(partition_of).collect();
    assert_eq!(partitions.len(), 3, "every partition read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_killed_mid_flow_is_waited_for_and_every_message_arrives_once() {
    let mut broker = tokio::task::block_in_place(KafkaBroker::start);
    broker.create_topic("events", 2).await;
    produce(&broker, "events", 0..200).await;
    let h = Harness::new();
    let mut running = h.start(vec![source(&h, &broker, "events", json!({ "topics": ["events"], "batch_size": 10 }))]);
    running.wait_for("a batch", |e| matches!(e, Event::Acked { key, .. } if &**key == "events")).await;
    tokio::task::block_in_place(|| broker.kill_9());
    tokio::task::block_in_place(|| broker.restart());
    produce(&broker, "events", 200..300).await;
    let records = || seqs(&h.records("events"));
    running.wait_for("every message", |_| records().len() >= 300).await;
    running.stop().await;

    assert_eq!(assert_complete(&records(), 300), 0, "once each: {:?}", records());
    assert_in_partition_order(&h.records("events"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_batch_comes_again_the_same_and_nothing_twice() {
    let broker = tokio::task::block_in_place(KafkaBroker::start);
    broker.create_topic("events", 1).await;
    produce(&broker, "events", 0..30).await;
    let h = Harness::new();
    let mut source = source(&h, &broker, "events", json!({ "topics": ["events"], "batch_size": 10 }));
    let target = FaultyTarget::new(h.log.clone());
    target.set_failing(true);
    source.target = target.clone() as Arc<_>;
    let mut running = h.start(vec![source]);
    running.wait_for("three refusals", |_| target.refused().len() >= 3).await;
    assert_eq!(broker.committed("ferry", "events", 1), [None], "nothing committed while refused");
    target.set_failing(false);
    running.wait_for("every message", |_| h.records("events").len() >= 30).await;
    produce(&broker, "events", 30..40).await;
    running.wait_for("the messages after", |_| h.records("events").len() >= 40).await;
    // By the source's own redelivery, not by a restart.
    let status = running.status.get("events").unwrap();
    assert_eq!((status.traps, status.guest_errors, status.instances), (0, 0, 1), "{status:?}");
    running.stop().await;

    assert!(target.refused().iter().all(|batch| *batch == (0..10).collect::<Vec<_>>()), "the same batch each time");
    assert_eq!(assert_complete(&seqs(&h.records("events")), 40), 0, "once each");
    // Sent after each ACK, not awaited: committed to the end soon after.
    until("the group's offset at the end", || broker.committed("ferry", "events", 1) == [Some(40)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_moved_from_kafka_consumers_resumes_at_its_committed_offsets() {
    let broker = tokio::task::block_in_place(KafkaBroker::start);
    broker.create_topic("events", 1).await;
    produce(&broker, "events", 0..50).await;
    // A Kafka consumer of the group read and committed the first 20.
    tokio::task::block_in_place(|| {
        let consumer: BaseConsumer = broker.client_config().set("group.id", "legacy").create().unwrap();
        let mut offsets = TopicPartitionList::new();
        offsets.add_partition_offset("events", 0, Offset::Offset(20)).unwrap();
        consumer.commit(&offsets, CommitMode::Sync).unwrap();
    });
    let h = Harness::new();
    let config = json!({ "topics": ["events"], "group": "legacy", "batch_size": 8 });
    let mut running = h.start(vec![source(&h, &broker, "legacy-events", config)]);
    running.wait_for("the rest", |_| h.records("legacy-events").len() >= 30).await;
    running.stop().await;
    assert_eq!(seqs(&h.records("legacy-events")), (20..50).collect::<Vec<_>>(), "from the group's offset on, in order");
    let heard = capture().guest_lines("legacy-events");
    assert!(heard.iter().any(|line| line.contains("events/0 from offset 20")), "the start is said: {heard:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_that_does_not_exist_is_refused_at_open_naming_it() {
    let broker = tokio::task::block_in_place(KafkaBroker::start);
    let h = Harness::new();
    let mut running = h.start(vec![source(&h, &broker, "orders", json!({ "topics": ["nope"] }))]);
    let event = running
        .wait_for(
            "the open to fail",
            |e| matches!(e, Event::GuestError { key, .. } | Event::Failed { key, .. } if &**key == "orders"),
        )
        .await;
    running.stop().await;
    let said = format!("{event:?}");
    assert!(said.contains("kafka `hub`") && said.contains("the topic \\\"nope\\\""), "{said}");
    assert!(h.records("orders").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_password_is_said_at_open_and_nothing_is_read_until_it_is_right() {
    const WRONG: &str = "not-the-password-4";
    let broker = tokio::task::block_in_place(KafkaBroker::start_with_user);
    broker.create_topic("events", 1).await;
    produce(&broker, "events", 0..10).await;
    let h = Harness::new();
    // SAFETY: these variables are this test's alone.
    unsafe {
        std::env::set_var("FERRY_TEST_KAFKA_SOURCE_WRONG_PASSWORD", WRONG);
        std::env::set_var("FERRY_TEST_KAFKA_SOURCE_PASSWORD", PASSWORD);
    }
    let section = broker.ferry_section_as_user("x", "FERRY_TEST_KAFKA_SOURCE_WRONG_PASSWORD");
    let mut wrong = source_of(&h, &section, "locked-out", json!({ "topics": ["events"] }));
    // Long enough that only the refusal, not the deadline, can end the call.
    wrong.sandbox.limits.call_timeout = std::time::Duration::from_secs(60);
    let mut running = h.start(vec![wrong]);
    let event = running
        .wait_for(
            "the open to fail",
            |e| matches!(e, Event::GuestError { key, .. } | Event::Failed { key, .. } if &**key == "locked-out"),
        )
        .await;
    running.stop().await;
    let said = format!("{event:?}");
    assert!(
        said.contains("kafka `hub`") && said.contains("the cluster refused the login of user `ferry` (SCRAM-SHA-512)"),
        "{said}"
    );
    assert!(!said.contains("timed out") && !said.contains(WRONG), "{said}");
    assert!(h.records("locked-out").is_empty(), "nothing read");

    let section = broker.ferry_section_as_user("x", "FERRY_TEST_KAFKA_SOURCE_PASSWORD");
    let mut running =
        h.start(vec![source_of(&h, &section, "let-in", json!({ "topics": ["events"], "group": "let-in" }))]);
    running.wait_for("every message", |_| h.records("let-in").len() >= 10).await;
    running.stop().await;
    assert_eq!(seqs(&h.records("let-in")), (0..10).collect::<Vec<_>>(), "every message once, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_not_granted_is_refused_before_any_connection() {
    // A listener standing in for where the cluster would be: it counts who comes.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let h = Harness::new();
    let mut refused = h.source("ungranted", KAFKA_SOURCE, json!({ "connection": "elsewhere", "topics": ["t"] }));
    let section: KafkaCluster = toml::from_str(&format!("brokers = [\"{}\"]", listener.local_addr().unwrap())).unwrap();
    let clusters = BTreeMap::from([("elsewhere".to_string(), section)]);
    // Defined, but not in the connector's grants.
    refused.sandbox.shared.kafka = KafkaClusters::granted(&[], &clusters).unwrap();
    let mut running = h.start(vec![refused]);
    let event = running
        .wait_for(
            "the open to fail",
            |e| matches!(e, Event::GuestError { key, .. } | Event::Failed { key, .. } if &**key == "ungranted"),
        )
        .await;
    running.stop().await;
    assert!(format!("{event:?}").contains("not in this connector's grants.kafka"), "{event:?}");
    assert!(listener.accept().is_err(), "nothing connected");
}
