//! The MQTT source against a real broker of the test's own (`ferry_tests::mqtt_server`,
//! Debian's mosquitto), fed by a publisher of the test's own: every message arrives in
//! the local log through `kill -9`s of ferry at random moments (the session is
//! persistent, and a message is acknowledged only after its batch was committed), a
//! message delivered twice only when a kill fell between a commit and its
//! acknowledgement (counted, at most a batch per kill); through the broker stopped
//! mid-flow and started again; and a NACKed batch comes again whole, nothing twice.

use std::sync::Arc;

use ferry::engine::source::SourceConnector;
use ferry::engine::status::Event;
use ferry::store::local_log::LocalLog;
use ferry_tests::components::MQTT_SOURCE;
use ferry_tests::faults::FaultyTarget;
use ferry_tests::harness::Harness;
use ferry_tests::mqtt_server::{MqttServer, PASSWORD};
use ferry_tests::records::seqs;
use nix::sys::signal::Signal;
use rumqttc::{Event as MqttEvent, Packet, QoS};
use serde_json::{Value, json};

use crate::iggy_sinks::until;
use crate::mqtt_sink::{PASSWORD_ENV, client, granted, password_set};
use crate::process::{Ferry, Site, crash_plan};

/// Publish `{"seq": n}` for `seqs` to `topic` at QoS 1, each acknowledged by the broker.
async fn publish(server: &MqttServer, topic: &str, seqs: std::ops::Range<u64>) {
    let (publisher, mut events) = client(server, "ferry-test-publisher", false);
    let count = seqs.end - seqs.start;
    for seq in seqs {
        let payload = json!({ "seq": seq }).to_string();
        publisher.publish(topic, QoS::AtLeastOnce, false, payload).await.expect("queued");
    }
    let mut acknowledged = 0;
    while acknowledged < count {
        if let MqttEvent::Incoming(Packet::PubAck(_)) = events.poll().await.expect("the test's publisher") {
            acknowledged += 1;
        }
    }
}

/// A `mqtt-source` `key` into topic `key` of the harness, granted `server` as `hub`.
fn source(h: &Harness, server: &MqttServer, key: &str, plugin_config: Value) -> SourceConnector {
    password_set();
    let mut config = json!({ "connection": "hub", "client_id": key, "topics": ["sensors/#"] });
    config.as_object_mut().unwrap().extend(plugin_config.as_object().unwrap().clone());
    let mut source = h.source(key, MQTT_SOURCE, config);
    source.sandbox.grants.mqtt = vec!["hub".into()];
    source.sandbox.shared.mqtt = granted(server, PASSWORD_ENV);
    source
}

const COUNT: u64 = 600;
const BATCH: u64 = 7;

#[test]
fn every_message_arrives_through_kill_9s_of_ferry_at_random_moments_twice_only_between_commit_and_ack() {
    let server = MqttServer::start_with_password();
    let runtime = tokio::runtime::Runtime::new().unwrap();
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
key = "sensors"
path = "{MQTT_SOURCE}"
poll_interval = "2ms"
streams = [{{ stream = "demo", topic = "sensors" }}]
grants = {{ mqtt = ["hub"] }}
plugin_config = {{ connection = "hub", client_id = "ferry-sensors", topics = ["sensors/+/reading"], batch_size = {BATCH} }}
"#,
            section = server.ferry_section("hub", PASSWORD_ENV),
        ),
    );
    let env = [(PASSWORD_ENV, PASSWORD)];
    let delivered = || {
        let path = LocalLog::topic_file(&site.log_dir(), "demo", "sensors");
        if !path.exists() {
            return Vec::new();
        }
        seqs(&LocalLog::read_all(&site.log_dir(), "demo", "sensors").unwrap())
    };
    // The session is made (and subscribed) by the first run; the broker keeps what is
    // published for it from then on, whether ferry runs or not.
    let mut run = Ferry::start(&config, &env);
    run.wait_for_line(&["key=sensors", "subscribed to sensors/+/reading"]);
    runtime.block_on(publish(&server, "sensors/a/reading", 0..COUNT));
    let (rounds, mut rng) = crash_plan("mqtt_source::every_message_arrives");
    let mut kills = 0;
    for _ in 0..rounds.min(6) {
        run.kill_9_at_a_random_moment(&mut rng, &["key=sensors", "running"]);
        kills += 1;
        run = Ferry::start(&config, &env);
    }
    run.wait_for_line(&["key=sensors", "running"]);
    until("every message in the log", || {
        delivered().iter().collect::<std::collections::BTreeSet<_>>().len() as u64 >= COUNT
    });
    run.signal(Signal::SIGTERM);
    assert!(run.wait().success(), "{}", run.log());

    let seqs = delivered();
    let mut unique = seqs.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique, (0..COUNT).collect::<Vec<_>>(), "every message");
    let twice = seqs.len() as u64 - COUNT;
    assert!(twice <= kills * BATCH, "{twice} delivered twice: at most a batch per kill ({kills} kills)");
    eprintln!("mqtt_source: {twice} message(s) delivered twice over {kills} kills");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_stopped_mid_flow_is_waited_for_and_every_message_arrives() {
    let mut server = tokio::task::block_in_place(MqttServer::start_with_password);
    let h = Harness::new();
    let mut running = h.start(vec![source(&h, &server, "sensors", json!({ "batch_size": 10 }))]);
    running.wait_for("subscribed and idle", |e| matches!(e, Event::Idle { key } if &**key == "sensors")).await;
    publish(&server, "sensors/b", 0..200).await;
    running.wait_for("a batch", |e| matches!(e, Event::Acked { key, .. } if &**key == "sensors")).await;
    tokio::task::block_in_place(|| server.stop());
    running
        .wait_for(
            "a failed poll while it is down",
            |e| matches!(e, Event::GuestError { key, .. } if &**key == "sensors"),
        )
        .await;
    tokio::task::block_in_place(|| server.restart());
    publish(&server, "sensors/b", 200..300).await;
    let records = || seqs(&h.records("sensors"));
    running
        .wait_for("every message", |_| records().iter().collect::<std::collections::BTreeSet<_>>().len() >= 300)
        .await;
    running.stop().await;

    let seqs = records();
    let mut unique = seqs.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique, (0..300).collect::<Vec<_>>(), "every message");
    assert!(seqs.len() <= 300 + 10, "at most the batch in flight again: {} records", seqs.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_batch_comes_again_whole_and_nothing_twice() {
    let server = tokio::task::block_in_place(MqttServer::start_with_password);
    let h = Harness::new();
    let mut source = source(&h, &server, "sensors", json!({ "batch_size": 10 }));
    let target = FaultyTarget::new(h.log.clone());
    source.target = target.clone() as Arc<_>;
    let mut running = h.start(vec![source]);
    running.wait_for("subscribed and idle", |e| matches!(e, Event::Idle { key } if &**key == "sensors")).await;
    target.set_failing(true);
    publish(&server, "sensors/c", 0..30).await;
    running.wait_for("three refusals", |_| target.refused().len() >= 3).await;
    target.set_failing(false);
    running.wait_for("every message", |_| h.records("sensors").len() >= 30).await;
    running.stop().await;

    let refused = target.refused();
    assert!(refused.windows(2).all(|pair| pair[0] == pair[1]), "the same batch each time: {refused:?}");
    assert_eq!(seqs(&h.records("sensors")), (0..30).collect::<Vec<_>>(), "every message once, in order");
}
