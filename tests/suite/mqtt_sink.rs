//! The MQTT sink against a real broker of the test's own (`ferry_tests::mqtt_server`,
//! Debian's mosquitto), read by a subscriber of the test's own: every message
//! published, in order, through a `kill -9` of ferry (at least once: the batch in
//! flight may be published twice, and no more), and through the broker stopped
//! mid-flow and started again; a payload over `max_payload` dead-lettered with the
//! reason, the rest published; a broker not granted refused before any connection;
//! refused credentials said and nothing published until they are right.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry::capabilities::mqtt::{MqttBroker, MqttBrokers};
use ferry::engine::sink::SinkConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::{MQTT_SINK, RANDOM_SOURCE};
use ferry_tests::harness::{Harness, PATIENCE, Running};
use ferry_tests::mqtt_server::{MqttServer, PASSWORD, USER};
use ferry_tests::records::{seq_messages, seq_of};
use nix::sys::signal::Signal;
use rumqttc::{AsyncClient, Event as MqttEvent, MqttOptions, Packet, QoS};
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::process::{Ferry, Site};
use crate::sinks::{drain_orders as drain, wait_written_orders as wait_written};

/// The broker `server` as `[mqtt.NAME]` defines it, its password (if it has one)
/// read from the environment variable `password_env`.
pub(crate) fn section(server: &MqttServer, password_env: &str) -> MqttBroker {
    toml::from_str(&server.ferry_section("x", password_env).replace("[mqtt.x]\n", "")).unwrap()
}

/// `brokers` granted as `hub`.
pub(crate) fn granted(server: &MqttServer, password_env: &str) -> MqttBrokers {
    let brokers = BTreeMap::from([("hub".to_string(), section(server, password_env))]);
    MqttBrokers::granted(&["hub".to_string()], &brokers).unwrap()
}

/// The test's own client of `server` (as [`USER`] if it has a password), and its
/// event loop driven on the current runtime until the client is dropped.
pub(crate) fn client(server: &MqttServer, id: &str, persistent: bool) -> (AsyncClient, rumqttc::EventLoop) {
    let mut options = MqttOptions::new(id, "127.0.0.1", server.port());
    options.set_clean_session(!persistent).set_keep_alive(Duration::from_secs(30)).set_inflight(1000);
    options.set_credentials(USER, PASSWORD);
    AsyncClient::new(options, 10_000)
}

/// What a subscriber of `filter` (QoS 1, a session of its own) received: each
/// message's `seq`, in order. Subscribed before this returns.
pub(crate) async fn subscriber(server: &MqttServer, filter: &str) -> Arc<Mutex<Vec<u64>>> {
    let (client, mut events) = client(server, "ferry-test-reader", true);
    client.subscribe(filter, QoS::AtLeastOnce).await.unwrap();
    loop {
        if let MqttEvent::Incoming(Packet::SubAck(_)) = events.poll().await.expect("the test's subscriber connects") {
            break;
        }
    }
    let received = Arc::new(Mutex::new(Vec::new()));
    let seen = received.clone();
    tokio::spawn(async move {
        let _client = client;
        loop {
            match events.poll().await {
                Ok(MqttEvent::Incoming(Packet::Publish(publish))) => {
                    seen.lock().unwrap().push(seq_of(&publish.payload))
                }
                Ok(_) => {}
                // The broker stopped by the test: its session waits for us.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    });
    received
}

/// The variable the tests' configs read the broker's password from.
pub(crate) const PASSWORD_ENV: &str = "FERRY_TEST_MQTT_PASSWORD";

/// Set [`PASSWORD_ENV`] to [`PASSWORD`].
pub(crate) fn password_set() {
    // SAFETY: every test of this binary that touches it sets the same value.
    unsafe { std::env::set_var(PASSWORD_ENV, PASSWORD) };
}

/// A `mqtt-sink` `key` reading topic `orders`, granted `server` as `hub` (its
/// password from `password_env`), with `plugin_config` added; its dead letters into
/// topic `orders-dead`.
fn sink_with(h: &Harness, server: &MqttServer, key: &str, plugin_config: Value, password_env: &str) -> SinkConnector {
    let mut config = json!({ "connection": "hub", "client_id": key });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut sink = h.sink(key, MQTT_SINK, config, &["orders"]);
    sink.dead_letters = Some(h.dead_letters("orders-dead"));
    sink.sandbox.grants.mqtt = vec!["hub".into()];
    sink.sandbox.shared.mqtt = granted(server, password_env);
    sink
}

fn sink(h: &Harness, server: &MqttServer, key: &str, plugin_config: Value) -> SinkConnector {
    password_set();
    sink_with(h, server, key, plugin_config, PASSWORD_ENV)
}

/// Wait (checking every 50 ms, up to [`PATIENCE`]) until `done` holds.
pub(crate) async fn until_async(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each seq of `received`, with how many times it came.
fn counted(received: &Mutex<Vec<u64>>) -> BTreeMap<u64, usize> {
    let mut seqs = BTreeMap::new();
    for seq in received.lock().unwrap().iter() {
        *seqs.entry(*seq).or_insert(0) += 1;
    }
    seqs
}

const COUNT: u64 = 400;

#[test]
fn every_message_is_published_through_a_kill_9_of_ferry_the_batch_in_flight_at_most_twice() {
    let server = MqttServer::start_with_password();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let received = runtime.block_on(subscriber(&server, "demo/#"));
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
path = "{MQTT_SINK}"
poll_interval = "2ms"
batch_length = 20
retry_backoff = {{ initial = "5ms", max = "50ms" }}
streams = [{{ stream = "demo", topics = ["feed"] }}]
dead_letters = {{ stream = "dead", topic = "publisher" }}
grants = {{ mqtt = ["hub"] }}
plugin_config = {{ connection = "hub", client_id = "ferry-publisher" }}
"#,
            section = server.ferry_section("hub", PASSWORD_ENV),
        ),
    );
    let env = [(PASSWORD_ENV, PASSWORD)];
    let mut run = Ferry::start(&config, &env);
    run.wait_for_line(&["key=publisher", "running"]);
    until("a hundred messages", || received.lock().unwrap().len() >= 100);
    run.kill_9();
    let before_the_kill = received.lock().unwrap().len() as u64;
    let mut run = Ferry::start(&config, &env);
    run.wait_for_line(&["key=publisher", "running"]);
    until("every message", || counted(&received).len() as u64 >= COUNT);
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let seqs = counted(&received);
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), (0..COUNT).collect::<Vec<_>>());
    let twice: Vec<u64> = seqs.iter().filter(|(_, n)| **n > 1).map(|(seq, _)| *seq).collect();
    assert!(twice.len() <= 20 && seqs.values().all(|n| *n <= 2), "at most the batch in flight again: {twice:?}");
    assert!(before_the_kill < COUNT, "the kill landed mid-flow");
    assert!(!LocalLog::topic_file(&site.log_dir(), "dead", "publisher").exists(), "nothing dead-lettered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_stopped_mid_flow_is_waited_for_and_every_message_is_published() {
    let mut server = tokio::task::block_in_place(MqttServer::start_with_password);
    let received = subscriber(&server, "app/orders").await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..100)).await;
    let sink = sink(&h, &server, "publisher", json!({ "topic": "app/{topic}" }));
    let mut running = Running::start(h.host_with(Vec::new(), vec![sink]));
    wait_written(&mut running, "publisher", 100).await;
    tokio::task::block_in_place(|| server.stop());
    h.append("orders", seq_messages(100..200)).await;
    running
        .wait_for(
            "a failed write while it is down",
            |e| matches!(e, Event::Retried { key, .. } if &**key == "publisher"),
        )
        .await;
    tokio::task::block_in_place(|| server.restart());
    wait_written(&mut running, "publisher", 200).await;
    running.stop().await;
    until_async("every message at the subscriber", || counted(&received).len() >= 200).await;

    let seqs = counted(&received);
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), (0..200).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_over_max_payload_is_dead_lettered_with_the_reason_and_the_rest_published() {
    let server = tokio::task::block_in_place(MqttServer::start_with_password);
    let received = subscriber(&server, "#").await;
    let h = Harness::new();
    let mut messages = seq_messages(0..10);
    messages[3].payload = format!(r#"{{"seq":3,"pad":"{}"}}"#, "x".repeat(2000)).into_bytes().into();
    h.append("orders", messages).await;
    drain(&h, sink(&h, &server, "publisher", json!({ "topic": "app/{topic}", "max_payload": 1000 })), 10).await;
    let dead = h.records("orders-dead");
    assert_eq!(dead.len(), 1, "the big one");
    let reason = |record: &ferry::store::local_log::Record| {
        record.headers.as_ref().unwrap()["ferry-dead-letter-reason"]["string"].as_str().unwrap().to_string()
    };
    assert!(reason(&dead[0]).contains("over max_payload (1000)"), "{}", reason(&dead[0]));
    until_async("nine messages at the subscriber", || received.lock().unwrap().len() >= 9).await;
    assert_eq!(counted(&received).keys().copied().collect::<Vec<_>>(), [0, 1, 2, 4, 5, 6, 7, 8, 9]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_not_granted_is_refused_before_any_connection() {
    let server = tokio::task::block_in_place(MqttServer::start_with_password);
    let h = Harness::new();
    h.append("orders", seq_messages(0..3)).await;
    let refused = sink(&h, &server, "ungranted", json!({ "connection": "elsewhere" }));
    let mut running = Running::start(h.host_with(Vec::new(), vec![refused]));
    let event =
        running.wait_for("the open to fail", |e| matches!(e, Event::Failed { key, .. } if &**key == "ungranted")).await;
    running.stop().await;
    assert!(format!("{event:?}").contains("not in this connector's grants.mqtt"), "{event:?}");
    assert!(!server.log().contains("ungranted"), "the broker never saw the client:\n{}", server.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_said_and_nothing_is_published_until_it_is_right() {
    let server = tokio::task::block_in_place(MqttServer::start_with_password);
    let received = subscriber(&server, "#").await;
    let h = Harness::new();
    h.append("orders", seq_messages(0..10)).await;
    // SAFETY: this variable is this test's alone.
    unsafe { std::env::set_var("FERRY_TEST_MQTT_WRONG_PASSWORD", "wrong") };
    let wrong = sink_with(&h, &server, "locked-out", json!({}), "FERRY_TEST_MQTT_WRONG_PASSWORD");
    let mut running = Running::start(h.host_with(Vec::new(), vec![wrong]));
    let event =
        running.wait_for("the refusal", |e| matches!(e, Event::Retried { key, .. } if &**key == "locked-out")).await;
    running.stop().await;
    assert!(format!("{event:?}").contains("refused the session"), "{event:?}");
    assert!(received.lock().unwrap().is_empty(), "nothing published");
    assert!(h.records("orders-dead").is_empty(), "nothing dead-lettered");

    drain(&h, sink(&h, &server, "let-in", json!({})), 10).await;
    until_async("every message at the subscriber", || received.lock().unwrap().len() >= 10).await;
    assert_eq!(counted(&received).keys().copied().collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
}
