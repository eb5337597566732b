//! The NATS sink against a real NATS server with JetStream of the test's own
//! (`ferry_tests::nats_server`): every message stored once, through a `kill -9` of
//! ferry and one of the server mid-flow (`Nats-Msg-Id` makes the stream take a
//! message published again only once); a replay stores nothing and is acknowledged; a
//! message the server refuses (bigger than its `max_payload`) dead-lettered with the
//! reason; a subject no stream takes waited on, said, nothing dead-lettered, until the
//! stream is made; a server not granted refused before any connection; a wrong
//! password said and nothing published until it is right.

use std::collections::BTreeMap;

use ferry::capabilities::nats::{NatsServer as NatsSection, NatsServers};
use ferry::engine::sink::SinkConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{NATS_SINK, RANDOM_SOURCE};
use ferry_tests::harness::{Harness, Running};
use ferry_tests::nats_server::{MAX_PAYLOAD, NatsServer, PASSWORD};
use ferry_tests::records::seq_messages;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use crate::sinks::{drain_orders as drain, wait_written_orders as wait_written};

/// A `nats-sink` `key` reading topic `orders`, granted `server` as `events`, with
/// `plugin_config` added; its dead letters into topic `orders-dead`. Its password, if
/// the server has one, is read from `FERRY_TEST_NATS_PASSWORD` now.
fn sink(h: &Harness, server: &NatsServer, key: &str, plugin_config: Value) -> SinkConnector {
    let mut config = json!({ "connection": "events" });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut sink = h.sink(key, NATS_SINK, config, &["orders"]);
    sink.dead_letters = Some(h.dead_letters("orders-dead"));
    sink.sandbox.grants.nats = vec!["events".into()];
    let text = server.ferry_section("x", "FERRY_TEST_NATS_PASSWORD").replace("[nats.x]\n", "");
    let section: NatsSection = toml::from_str(&text).unwrap();
    let servers = BTreeMap::from([("events".to_string(), section)]);
    sink.sandbox.shared.nats = NatsServers::granted(&sink.sandbox.grants.nats, &servers).unwrap();
    sink
}

/// The `seq` of each message of the stream `name`, with how many messages hold it.
async fn seqs(server: &NatsServer, name: &str) -> BTreeMap<u64, usize> {
    let mut seqs = BTreeMap::new();
    for message in server.messages(name).await {
        let payload: Value = serde_json::from_slice(&message.payload).unwrap();
        *seqs.entry(payload["seq"].as_u64().unwrap()).or_insert(0) += 1;
    }
    seqs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_stores_nothing_and_a_message_too_big_is_dead_lettered() {
    let server = tokio::task::block_in_place(NatsServer::start);
    server.create_stream("ORDERS", &["test.orders"]).await;
    let h = Harness::new();
    let mut messages = seq_messages(0..20);
    messages[5].payload = format!(r#"{{"seq":5,"pad":"{}"}}"#, "x".repeat(MAX_PAYLOAD)).into_bytes().into();
    h.append("orders", messages).await;
    drain(&h, sink(&h, &server, "publisher", json!({})), 20).await;

    let stored = seqs(&server, "ORDERS").await;
    let expected: Vec<u64> = (0..20).filter(|s| *s != 5).collect();
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), expected, "every message but the big one");
    assert!(stored.values().all(|n| *n == 1), "once each: {stored:?}");
    let first = &server.messages("ORDERS").await[0];
    let header = |name: &str| first.headers.get(name).map(|v| v.as_str().to_string());
    assert_eq!((header("Iggy-Topic"), header("Iggy-Offset")), (Some("orders".into()), Some("0".into())));
    assert!(header("Nats-Msg-Id").is_some_and(|id| id.parse::<u128>().is_ok_and(|id| id != 0)));
    let dead = h.records("orders-dead");
    assert_eq!(dead.len(), 1);
    let reason = dead[0].headers.as_ref().unwrap()["ferry-dead-letter-reason"]["string"].as_str().unwrap().to_string();
    assert!(reason.contains("the server refused it") && reason.contains("max payload"), "{reason}");

    // The same messages again, from the start (another sink's position): nothing stored.
    drain(&h, sink(&h, &server, "publisher-again", json!({})), 20).await;
    assert_eq!(seqs(&server, "ORDERS").await, stored, "a replay within the window stores nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_no_stream_takes_is_waited_on_until_the_stream_is_made() {
    let server = tokio::task::block_in_place(NatsServer::start);
    let h = Harness::new();
    h.append("orders", seq_messages(0..10)).await;
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink(&h, &server, "waiting", json!({}))]));
    let event = running.wait_for("the retry", |e| matches!(e, Event::Retried { key, .. } if &**key == "waiting")).await;
    assert!(format!("{event:?}").contains("no JetStream stream takes the subject \\\"test.orders\\\""), "{event:?}");
    server.create_stream("ORDERS", &["test.*"]).await;
    wait_written(&mut running, "waiting", 10).await;
    running.stop().await;
    assert_eq!(seqs(&server, "ORDERS").await.len(), 10);
    assert!(h.records("orders-dead").is_empty(), "nothing dead-lettered while it waited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_not_granted_is_refused_before_any_connection() {
    let server = tokio::task::block_in_place(NatsServer::start);
    let h = Harness::new();
    h.append("orders", seq_messages(0..3)).await;
    let before = tokio::task::block_in_place(|| server.connections_taken());
    let refused = sink(&h, &server, "ungranted", json!({ "connection": "elsewhere" }));
    let mut running = Running::start(h.host_with(Vec::new(), vec![refused]));
    let event =
        running.wait_for("the open to fail", |e| matches!(e, Event::Failed { key, .. } if &**key == "ungranted")).await;
    running.stop().await;
    assert!(format!("{event:?}").contains("not in this connector's grants.nats"), "{event:?}");
    assert_eq!(tokio::task::block_in_place(|| server.connections_taken()), before, "ferry never connected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_said_and_nothing_is_published_until_it_is_right() {
    let server = tokio::task::block_in_place(NatsServer::start_with_password);
    server.create_stream("ORDERS", &["test.orders"]).await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..10)).await;
    // SAFETY: the variable is this test's alone; nothing else reads it concurrently.
    unsafe { std::env::set_var("FERRY_TEST_NATS_PASSWORD", "wrong") };
    let wrong = sink(&h, &server, "locked-out", json!({}));
    unsafe { std::env::set_var("FERRY_TEST_NATS_PASSWORD", PASSWORD) };
    let mut running = Running::start(h.host_with(Vec::new(), vec![wrong]));
    let event =
        running.wait_for("the refusal", |e| matches!(e, Event::Retried { key, .. } if &**key == "locked-out")).await;
    running.stop().await;
    assert!(format!("{event:?}").to_lowercase().contains("authorization"), "{event:?}");
    assert!(seqs(&server, "ORDERS").await.is_empty(), "nothing published");
    assert!(h.records("orders-dead").is_empty(), "nothing dead-lettered");

    drain(&h, sink(&h, &server, "let-in", json!({})), 10).await;
    assert_eq!(seqs(&server, "ORDERS").await.len(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_killed_mid_flow_is_waited_for_and_every_message_is_stored_once() {
    const COUNT: u64 = 300;
    let mut server = tokio::task::block_in_place(NatsServer::start);
    server.create_stream("ORDERS", &["test.orders"]).await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..COUNT)).await;
    let mut flowing = sink(&h, &server, "steady", json!({}));
    flowing.settings.batch_length = 10;
    let mut running = Running::start(h.host_with(Vec::new(), vec![flowing]));
    wait_written(&mut running, "steady", 50).await;
    tokio::task::block_in_place(|| server.kill_9());
    running
        .wait_for("a retry while it is down", |e| matches!(e, Event::Retried { key, .. } if &**key == "steady"))
        .await;
    tokio::task::block_in_place(|| server.restart());
    wait_written(&mut running, "steady", COUNT).await;
    running.stop().await;

    let stored = seqs(&server, "ORDERS").await;
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>());
    assert!(stored.values().all(|n| *n == 1), "once each, through the kill: {stored:?}");
}

const COUNT: u64 = 400;

#[test]
fn every_message_is_stored_once_through_a_kill_9_of_ferry() {
    let server = NatsServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(server.create_stream("FEED", &["demo.feed"]));
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
key = "publisher"
path = "{NATS_SINK}"
poll_interval = "2ms"
batch_length = 20
retry_backoff = {{ initial = "5ms", max = "50ms" }}
streams = [{{ stream = "demo", topics = ["feed"] }}]
dead_letters = {{ stream = "dead", topic = "publisher" }}
grants = {{ nats = ["events"] }}
plugin_config = {{ connection = "events" }}
"#,
            section = server.ferry_section("events", "UNUSED"),
        ),
    );
    let count = || runtime.block_on(seqs(&server, "FEED")).len() as u64;
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=publisher", "running"]);
    until("a hundred messages", || count() >= 100);
    run.kill_9();
    let before_the_kill = count();
    let mut run = Ferry::start(&config, &[]);
    run.wait_for_line(&["key=publisher", "running"]);
    until("every message", || count() >= COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let stored = runtime.block_on(seqs(&server, "FEED"));
    assert_eq!(stored.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>());
    assert!(stored.values().all(|n| *n == 1), "once each, through the kill: {stored:?}");
    assert!(before_the_kill < COUNT, "the kill landed mid-flow");
    assert!(!LocalLog::topic_file(&site.log_dir(), "dead", "publisher").exists(), "nothing dead-lettered");
}
