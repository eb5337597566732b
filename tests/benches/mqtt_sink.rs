//! `cargo bench -p ferry-tests --bench mqtt_sink`: the MQTT sink draining the local
//! log into an MQTT broker at QoS 1, next to a native program doing the same job in
//! the same run, against the same broker.
//!
//! The broker is Debian's `mosquitto` started by the benchmark
//! (`ferry_tests::mqtt_server`, with a user and password, saving its state only when
//! it stops). For each batch size, with a topic of ~100-byte JSON records filled
//! first, each run publishing to a topic of its own (`bench/ferry-100-0`) with a
//! client id of its own (a clean session):
//!
//! * ferry: the `mqtt-sink` component reading the topic through the host's sink loop
//!   (read a batch, lift it into the guest, which makes each message and publishes the
//!   batch through the host's `mqtt` import: every publish sent, then every PUBACK
//!   awaited), then the position stored in the state file;
//! * native: a loop reading the same batches with the same reader, publishing the same
//!   payloads at QoS 1 with `rumqttc` the same way (one connection made with the host's
//!   options, its in-flight window included; every publish of the batch queued, then
//!   the event loop driven until each went out and each PUBACK came), then storing the
//!   position the same way.
//!
//! Checked after each run: a reader of the run's own (a persistent session
//! subscribed to the run's topic at QoS 1 before it) received every message of the
//! topic once, in order. The reader is offline while a side runs, so the broker
//! only queues the run's messages for it and forwards them after the clock stopped:
//! a subscriber taking them as they come shared the 2 cores with both sides and the
//! broker, and moved the ratio of a round's pair from 0.64 to 1.19. Three rounds each
//! (`FERRY_BENCH_ROUNDS`), taking turns to go first; the medians and the ratio
//! `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` writes a fifth.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::capabilities::mqtt::{MqttBroker, MqttBrokers};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{LogMark, Receipt};
use ferry::engine::sink::SinkConnector;
use ferry::runtime::{Runtime, Sandbox, SinkWorld};
use ferry::store::local_log::{LocalLogInput, TopicReader};
use ferry::store::state::StateDir;
use ferry_tests::bench::{self, Measured, SinkEnd, compare, fill_local_log, time_sink};
use ferry_tests::components::MQTT_SINK;
use ferry_tests::harness::quick_sink_settings;
use ferry_tests::mqtt_server::{MqttServer, PASSWORD, USER};
use ferry_tests::records::seq_of;
use rumqttc::{AsyncClient, Event, EventLoop, MqttOptions, Outgoing, Packet, QoS};
use serde_json::json;

/// Messages a batch, messages in all (times the scale).
const SHAPES: &[(u32, u64)] = &[(100, 20_000), (1000, 50_000)];
const PAYLOAD: usize = 100;
/// The variable the broker's section reads its password from.
const PASSWORD_ENV: &str = "FERRY_BENCH_MQTT_PASSWORD";
/// How long the reader may take to receive a run's messages.
const PATIENCE: Duration = Duration::from_secs(60);

fn main() {
    let scale = ferry_tests::bench::scale();
    let server = MqttServer::start_saving_on_stop();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!("the broker: mosquitto; each side {} times, taking turns", ferry_tests::bench::rounds());
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        tokio.block_on(fill_local_log(&dir.path().join("log"), messages, PAYLOAD));
        let ferry = |run| {
            let name = format!("ferry-{batch}-{run}");
            let reader = tokio.block_on(Reader::subscribe(&server, &topic(&name)));
            let measured = tokio.block_on(ferry_sink(&runtime, dir.path(), &server, &name, batch, messages));
            tokio.block_on(reader.check(messages));
            measured
        };
        let native = |run| {
            let name = format!("native-{batch}-{run}");
            let reader = tokio.block_on(Reader::subscribe(&server, &topic(&name)));
            let measured = tokio.block_on(native_sink(dir.path(), &server, &name, batch, messages));
            tokio.block_on(reader.check(messages));
            measured
        };
        let (ferry, native) = compare(ferry, native);
        bench::print_row(batch, messages, &ferry, &native);
    }
}

/// The topic a run publishes to (each run takes its own).
fn topic(name: &str) -> String {
    format!("bench/{name}")
}

/// The reader of a run: a persistent session of its own subscribed to the run's topic
/// at QoS 1, connected only to take what the run published.
struct Reader {
    options: MqttOptions,
    topic: String,
}

impl Reader {
    /// Subscribe the session, then leave it: the broker queues what is published.
    async fn subscribe(server: &MqttServer, topic: &str) -> Reader {
        let mut options = MqttOptions::new(format!("reader-{}", topic.replace('/', "-")), "127.0.0.1", server.port());
        options.set_keep_alive(Duration::from_secs(30)).set_clean_session(false).set_credentials(USER, PASSWORD);
        let reader = Reader { options, topic: topic.to_string() };
        let (client, mut events) = AsyncClient::new(reader.options.clone(), 1024);
        // `topic/#` is the topic and those under it: the mark's.
        client.subscribe(format!("{topic}/#"), QoS::AtLeastOnce).await.expect("subscribing");
        loop {
            if let Event::Incoming(Packet::SubAck(_)) = events.poll().await.expect("the reader connects") {
                break;
            }
        }
        leave(client, events).await;
        reader
    }

    /// The reader receives every message of its topic once, in order (the `seq`s
    /// `0..messages`). It publishes a mark to `topic/mark` first,
    /// which the broker queues behind everything the run published: once the mark
    /// comes back, nothing of the run can still come (a message twice included), and
    /// everything before it has been acknowledged, so none comes again.
    async fn check(&self, messages: u64) {
        let (topic, mark) = (&self.topic, format!("{}/mark", self.topic));
        let (client, mut events) = AsyncClient::new(self.options.clone(), 1024);
        client.publish(&mark, QoS::AtLeastOnce, false, topic.as_bytes().to_vec()).await.expect("the mark queued");
        let mut seqs = Vec::new();
        let received = async {
            loop {
                if let Event::Incoming(Packet::Publish(publish)) = events.poll().await.expect("the reader's connection")
                {
                    if publish.topic == mark {
                        return;
                    }
                    assert_eq!(&publish.topic, topic, "a message of another topic");
                    seqs.push(seq_of(&publish.payload));
                }
            }
        };
        if tokio::time::timeout(PATIENCE, received).await.is_err() {
            panic!("{topic}: the reader received {} of {messages} messages and not the mark", seqs.len());
        }
        leave(client, events).await;
        assert_eq!(seqs.len() as u64, messages, "{topic}: every message once");
        assert!(seqs.iter().copied().eq(0..messages), "{topic}: every message in order");
    }
}

/// Disconnect cleanly: the DISCONNECT sent, the session kept by the broker.
async fn leave(client: AsyncClient, mut events: EventLoop) {
    client.disconnect().await.expect("disconnecting");
    loop {
        match events.poll().await {
            Ok(Event::Outgoing(Outgoing::Disconnect)) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The broker as `[mqtt.bench]` defines it, granted to a connector.
fn granted(server: &MqttServer) -> MqttBrokers {
    // SAFETY: set before any thread reads the environment for it, always to the same value.
    unsafe { std::env::set_var(PASSWORD_ENV, PASSWORD) };
    let section: MqttBroker =
        toml::from_str(&server.ferry_section("x", PASSWORD_ENV).replace("[mqtt.x]\n", "")).unwrap();
    let brokers = BTreeMap::from([("bench".to_string(), section)]);
    MqttBrokers::granted(&["bench".to_string()], &brokers).unwrap()
}

async fn ferry_sink(
    runtime: &Arc<Runtime>,
    dir: &Path,
    server: &MqttServer,
    name: &str,
    batch: u32,
    messages: u64,
) -> Measured {
    let state = StateDir::new(dir.join("state")).open(name).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    let mut sandbox = Sandbox::default();
    sandbox.grants.mqtt = vec!["bench".into()];
    sandbox.shared.mqtt = granted(server);
    let connector = SinkConnector {
        key: name.into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(MQTT_SINK)).expect("the sink loads").into(),
        plugin_config: json!({ "connection": "bench", "client_id": name, "topic": topic(name), "qos": 1 }).to_string(),
        settings: ferry::engine::sink::SinkSettings {
            poll_interval: Duration::from_millis(1),
            batch_length: batch,
            ..quick_sink_settings()
        },
        sandbox,
        input,
        transforms: None,
        dead_letters: None,
    };
    let elapsed = time_sink(runtime, connector, messages, SinkEnd::Drained).await;
    Measured::after_first(messages, u64::from(batch), elapsed)
}

/// A connection as the host's session makes one for a sink (a clean session; its
/// keep-alive, packet sizes, queue and in-flight window), connected.
async fn connected(server: &MqttServer, client_id: &str) -> (AsyncClient, EventLoop) {
    let mut options = MqttOptions::new(client_id, "127.0.0.1", server.port());
    options
        .set_keep_alive(Duration::from_secs(30))
        .set_clean_session(true)
        .set_manual_acks(true)
        .set_max_packet_size(16 << 20, 16 << 20)
        .set_credentials(USER, PASSWORD);
    let (client, mut events) = AsyncClient::new(options, 1024);
    events.network_options.set_tcp_nodelay(true);
    loop {
        if let Event::Incoming(Packet::ConnAck(_)) = events.poll().await.expect("the native side connects") {
            return (client, events);
        }
    }
}

/// The same job natively: the same reader, payloads, publishes and position store.
async fn native_sink(dir: &Path, server: &MqttServer, name: &str, batch: u32, messages: u64) -> Measured {
    let state = StateDir::new(dir.join("state")).open(name).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let (client, mut events) = connected(server, name).await;
    let topic = topic(name);
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        for record in &records {
            client.try_publish(topic.as_str(), QoS::AtLeastOnce, false, record.payload.to_vec()).expect("queued");
        }
        // Each publish goes out, then its PUBACK comes.
        let (mut sent, mut acknowledged) = (0, 0);
        while sent < records.len() || acknowledged < records.len() {
            match events.poll().await.expect("the native side's connection") {
                Event::Outgoing(Outgoing::Publish(_)) => sent += 1,
                Event::Incoming(Packet::PubAck(_)) => acknowledged += 1,
                _ => {}
            }
        }
        at = records.last().map_or(at, |r| r.offset + 1);
        let positions = serde_json::to_vec(&json!({ "bench/t": at })).unwrap();
        let receipt = Receipt { marks: vec![LogMark::new("bench", "t", at)] };
        state.commit(positions, receipt).await.expect("storing the position");
        if start.is_none() {
            start = Some(Instant::now());
        } else {
            batches += 1;
        }
    }
    Measured { messages: messages - u64::from(batch), batches, elapsed: start.unwrap().elapsed() }
}
