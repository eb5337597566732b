//! `cargo bench -p ferry-tests --bench mqtt_source`: the MQTT source reading a
//! persistent session's messages at QoS 1 into the local log, next to a native
//! program doing the same job in the same run, against the same broker (Debian's
//! `mosquitto`, started here with a user and password, saving its state only when it
//! stops).
//!
//! Each run has a session of its own (client id `ferry-100-0`, clean session off) and
//! a topic of its own: the session is made and subscribed (QoS 1) first, then the
//! broker queues the ~100-byte JSON messages published to the topic for it, and then
//! the side runs until it has read them all:
//!
//! * ferry: the `mqtt-source` component run by the host's source loop: per poll the
//!   guest receives up to a batch through the host's `mqtt` import (waiting up to
//!   `wait_ms` = 10 ms for the first message, then taking what was already read),
//!   makes a message of each (two headers, no id: the host derives the ids from the
//!   connector and the committed cursor) and returns the batch with its cursor; the
//!   host appends it to the local log with the staged cursor in one transaction and
//!   commits the cursor, then the guest acknowledges the batch: the host sends a
//!   PUBACK for each message and confirms them with a ping answered after them.
//! * native: a loop doing the same per batch with `rumqttc` (one connection with the
//!   host's options, manual acknowledgements): the same receive, the same messages,
//!   their ids derived by the host's own function (`batch::assign_ids`, from the same
//!   connector key and cursor), the same two calls into ferry's `LocalLog` and
//!   `LoggedCursor` the source loop makes, and the same PUBACKs and ping.
//!
//! Both stop at the first receive that finds nothing within 10 ms. Checked after each
//! shape: each round's two logs hold every message once, the same payloads and ids in
//! the same order. Three rounds (`FERRY_BENCH_ROUNDS`), taking turns to go first; the
//! medians and the ratio `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` reads a
//! fifth.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::capabilities::mqtt::{MqttBroker, MqttBrokers};
use ferry::config::StreamConfig;
use ferry::contract::{Durability, Header, HeaderValue, Message};
use ferry::engine::batch::{IdSource, assign_ids};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, StagedCursor, Target};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::runtime::{Runtime, Sandbox, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry_tests::bench::{self, Measured, compare, time_source};
use ferry_tests::components::MQTT_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::created_stream;
use ferry_tests::mqtt_server::{MqttServer, PASSWORD, USER};
use rumqttc::{AsyncClient, Event, EventLoop, MqttOptions, Packet, PubAck, Publish, QoS};
use serde_json::json;

/// Messages a batch, and messages in all (times the scale).
const SHAPES: &[(u64, u64)] = &[(100, 20_000), (1000, 50_000)];
const KEY: &str = "mqtt";
const STREAM: &str = "bench";
/// `[state] sync = "interval"`, as in the other source benchmarks.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));
/// How long a receive waits for a first message, on both sides (the source's `wait_ms`).
const WAIT: Duration = Duration::from_millis(10);
/// The variable the broker's section reads its password from.
const PASSWORD_ENV: &str = "FERRY_BENCH_MQTT_PASSWORD";

fn main() {
    let scale = bench::scale();
    let server = MqttServer::start_saving_on_stop();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    let component = runtime.load_source(Path::new(MQTT_SOURCE)).expect("the source loads");
    let dir = tempfile::tempdir().unwrap();
    println!("the broker: mosquitto; each side {} times per shape, taking turns", bench::rounds());
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(batch * 20);
        let shape = Shape { batch, messages };
        let ferry = |run| {
            let name = session("ferry", shape, run);
            tokio.block_on(queued(&server, &name, messages));
            ferry_source(&tokio, &runtime, &component, &server, &name, dir.path(), shape)
        };
        let native = |run| {
            let name = session("native", shape, run);
            tokio.block_on(queued(&server, &name, messages));
            let (log, cursor) = logged(dir.path(), &name);
            let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &name)].into();
            let elapsed = tokio.block_on(async {
                let work = native_source(server.port(), name.clone(), log, streams, cursor, shape);
                tokio::spawn(work).await.expect("the native source")
            });
            Measured::after_first(shape.messages, shape.batch, elapsed)
        };
        let (ferry, native) = compare(ferry, native);
        for run in 0..bench::rounds() {
            check_same_logs(dir.path(), shape, run);
        }
        bench::print_row(batch, messages, &ferry, &native);
    }
}

#[derive(Clone, Copy)]
struct Shape {
    batch: u64,
    messages: u64,
}

/// A run's client id, and the name of its topic in the local log.
fn session(side: &str, shape: Shape, run: u32) -> String {
    format!("{side}-{}-{run}", shape.batch)
}

/// The MQTT topic a run's session reads.
fn topic(session: &str) -> String {
    format!("bench/{session}")
}

/// A client of the benchmark's own (QoS 1 publishes up to the broker's window in flight).
fn client(server: &MqttServer, id: &str, persistent: bool) -> (AsyncClient, EventLoop) {
    let mut options = MqttOptions::new(id, "127.0.0.1", server.port());
    options
        .set_keep_alive(Duration::from_secs(30))
        .set_clean_session(!persistent)
        .set_inflight(1000)
        .set_credentials(USER, PASSWORD);
    AsyncClient::new(options, 2000)
}

/// The session `name` made and subscribed to its topic at QoS 1, then left; then
/// `messages` ~100-byte JSON messages published to the topic at QoS 1, each
/// acknowledged by the broker, so that the broker holds them for the session.
async fn queued(server: &MqttServer, name: &str, messages: u64) {
    let (session, mut events) = client(server, name, true);
    session.subscribe(topic(name), QoS::AtLeastOnce).await.expect("subscribing");
    loop {
        if let Event::Incoming(Packet::SubAck(_)) = events.poll().await.expect("the session connects") {
            break;
        }
    }
    session.disconnect().await.expect("disconnecting");
    // Until the broker has closed the connection: the session is offline from then on.
    closed(&mut events).await;

    let (publisher, mut events) = client(server, "bench-publisher", false);
    let text = "x".repeat(70);
    let mut seq = 0;
    while seq < messages {
        let chunk = (messages - seq).min(1000);
        for n in seq..seq + chunk {
            let payload = json!({ "seq": n, "text": text }).to_string();
            publisher.try_publish(topic(name), QoS::AtLeastOnce, false, payload).expect("queued");
        }
        let mut acknowledged = 0;
        while acknowledged < chunk {
            if let Event::Incoming(Packet::PubAck(_)) = events.poll().await.expect("the publisher's connection") {
                acknowledged += 1;
            }
        }
        seq += chunk;
    }
    publisher.disconnect().await.expect("disconnecting");
    closed(&mut events).await;
}

/// Drive `events` (a `DISCONNECT` queued) until the broker has closed the connection.
async fn closed(events: &mut EventLoop) {
    let closing = async { while events.poll().await.is_ok() {} };
    tokio::time::timeout(Duration::from_secs(10), closing).await.expect("the broker closes the connection");
}

fn logged(dir: &Path, name: &str) -> (Arc<LocalLog>, LoggedCursor) {
    bench::logged_run(dir, name, KEY, STREAM, INTERVAL)
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

fn ferry_source(
    tokio: &tokio::runtime::Runtime,
    runtime: &Arc<Runtime>,
    component: &Arc<SourceComponent>,
    server: &MqttServer,
    name: &str,
    dir: &Path,
    shape: Shape,
) -> Measured {
    let (log, cursor) = logged(dir, name);
    let mut sandbox = Sandbox::default();
    sandbox.grants.mqtt = vec!["bench".into()];
    sandbox.shared.mqtt = granted(server);
    let plugin_config = json!({
        "connection": "bench",
        "client_id": name,
        "topics": [topic(name)],
        "qos": 1,
        "batch_size": shape.batch,
        "wait_ms": WAIT.as_millis() as u64,
    });
    let connector = SourceConnector {
        key: KEY.into(),
        tenant: None,
        component: component.clone().into(),
        plugin_config: plugin_config.to_string(),
        streams: vec![created_stream(STREAM, name)].into(),
        settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
        sandbox,
        target: log,
        transforms: None,
        cursor: Arc::new(cursor),
    };
    let elapsed = tokio.block_on(time_source(runtime, connector));
    Measured::after_first(shape.messages, shape.batch, elapsed)
}

/// Round `run`'s two logs hold every message once, the same payloads and ids in the
/// same order.
fn check_same_logs(dir: &Path, shape: Shape, run: u32) {
    let names = (session("ferry", shape, run), session("native", shape, run));
    let ferry = bench::check_same_logs(dir, STREAM, (&names.0, &names.1), shape.messages, true);
    let seqs = ferry_tests::records::seqs(&ferry);
    assert!(seqs.iter().copied().eq(0..shape.messages), "round {run}: every message once, in order");
}

/// The native side's connection, as the host's session drives one: publishes that
/// arrive while it waits for something else are kept, in order, for the next receive.
struct Connection {
    client: AsyncClient,
    events: EventLoop,
    arrived: VecDeque<Publish>,
}

impl Connection {
    /// A persistent session `client_id` with manual acknowledgements, connected with
    /// the host's options and subscribed to `topic` at QoS 1 (as the guest does at open).
    async fn open(port: u16, client_id: &str, topic: &str) -> Connection {
        let mut options = MqttOptions::new(client_id, "127.0.0.1", port);
        options
            .set_keep_alive(Duration::from_secs(30))
            .set_clean_session(false)
            .set_manual_acks(true)
            .set_max_packet_size(16 << 20, 16 << 20)
            .set_credentials(USER, PASSWORD);
        let (client, mut events) = AsyncClient::new(options, 1024);
        events.network_options.set_tcp_nodelay(true);
        let mut connection = Connection { client, events, arrived: VecDeque::new() };
        loop {
            if let Some(Event::Incoming(Packet::ConnAck(_))) = connection.poll().await {
                break;
            }
        }
        connection.client.subscribe(topic, QoS::AtLeastOnce).await.expect("subscribing");
        loop {
            if let Some(Event::Incoming(Packet::SubAck(_))) = connection.poll().await {
                return connection;
            }
        }
    }

    /// The next event; a message received is kept, and returned as `None`.
    async fn poll(&mut self) -> Option<Event> {
        match self.events.poll().await.expect("the native side's connection") {
            Event::Incoming(Packet::Publish(publish)) => {
                self.arrived.push_back(publish);
                None
            }
            event => Some(event),
        }
    }

    /// Up to `max` messages: waits up to `wait` for the first, then takes what was
    /// already read.
    async fn receive(&mut self, max: usize, wait: Duration) -> Vec<Publish> {
        let deadline = tokio::time::Instant::now() + wait;
        while self.arrived.len() < max {
            if !self.arrived.is_empty() && self.events.state.events.is_empty() {
                break;
            }
            if tokio::time::timeout_at(deadline, self.poll()).await.is_err() {
                break;
            }
        }
        let count = self.arrived.len().min(max);
        self.arrived.drain(..count).collect()
    }

    /// A PUBACK for each of `publishes`, then a ping answered after them: the broker
    /// took them. Written straight into the connection with one flush, as the host does.
    async fn acknowledge(&mut self, publishes: &[Publish]) {
        while self.events.state.await_pingresp {
            self.poll().await;
        }
        let network = self.events.network.as_mut().expect("connected");
        for publish in publishes {
            network.write(Packet::PubAck(PubAck::new(publish.pkid))).await.expect("acknowledging");
        }
        network.write(Packet::PingReq).await.expect("the ping");
        network.flush().await.expect("acknowledging");
        loop {
            if let Some(Event::Incoming(Packet::PingResp)) = self.poll().await {
                return;
            }
        }
    }
}

/// The same job natively, through the session `name`.
async fn native_source(
    port: u16,
    name: String,
    log: Arc<LocalLog>,
    streams: Arc<[StreamConfig]>,
    cursor: LoggedCursor,
    shape: Shape,
) -> Duration {
    let mut connection = Connection::open(port, &name, &topic(&name)).await;
    let connector: Arc<str> = KEY.into();
    let (mut generation, mut delivered, mut committed, mut start) = (0u64, 0u64, None::<Vec<u8>>, None);
    loop {
        let received = connection.receive(shape.batch as usize, WAIT).await;
        if received.is_empty() {
            break;
        }
        let mut messages: Vec<Message> = received
            .iter()
            .map(|publish| Message {
                id: None,
                headers: vec![
                    Header { key: "mqtt_topic".into(), value: HeaderValue::String(publish.topic.clone()) },
                    Header { key: "mqtt_qos".into(), value: HeaderValue::Uint8(publish.qos as u8) },
                ],
                payload: publish.payload.clone(),
                origin_timestamp: None,
            })
            .collect();
        assign_ids(&mut messages, IdSource::Cursor { connector: KEY, committed_before: committed.as_deref() });
        delivered += messages.len() as u64;
        let state = serde_json::to_vec(&json!({ "delivered": delivered })).unwrap();
        let delivery = Delivery {
            connector: connector.clone(),
            streams: streams.clone(),
            messages: Arc::new(messages),
            cursor: Some(StagedCursor { lineage: cursor.lineage(), generation: generation + 1, state: state.clone() }),
        };
        let receipt = log.deliver(delivery).await.expect("appending to the log");
        generation = cursor.commit(state.clone(), receipt).await.expect("committing the cursor").generation;
        committed = Some(state);
        // The clock starts where ferry's does: at its first ACK event, which the host
        // reports once the batch is committed, before the guest acknowledges it to the
        // broker. (Started after the acknowledgement, it left out of the native side what
        // ferry's clock counted: with MQTT, the first acknowledgement reads the broker's
        // whole backlog, 142 ms of a 270 ms run.)
        start.get_or_insert_with(Instant::now);
        connection.acknowledge(&received).await;
    }
    start.expect("at least one batch").elapsed()
}
