//! `cargo bench -p ferry-tests --bench kafka_source`: the Kafka source reading a topic
//! into the local log, next to a native program doing the same job in the same run,
//! against the same broker (tansu, started here: `ferry_tests::kafka_broker`). The way
//! from Kafka to Iggy: how fast it goes.
//!
//! The topic (one partition, so that both logs can be compared in order) holds
//! ~100-byte JSON messages. Each run reads it from the start as a consumer group of
//! its own:
//!
//! * ferry: the `kafka-source` component run by the host's source loop: per poll the
//!   guest fetches up to a batch through the host's `kafka` import (librdkafka, the
//!   partition assigned, what it has fetched taken at once), makes a message of each
//!   (its id from the topic, partition and offset, four headers, the timestamp) and
//!   returns the batch with its cursor; the host appends it to the local log with the
//!   staged cursor in one transaction and commits the cursor; then the guest sends
//!   the group's offset to be committed (librdkafka's asynchronous commit).
//! * native: a loop doing the same per batch with `rdkafka` (one consumer, the same
//!   properties): the same fetch, the same messages and cursor, the same two calls
//!   into ferry's `LocalLog` and `LoggedCursor` the source loop makes, and the same
//!   asynchronous commit of the group's offset.
//!
//! Both clocks start at the first batch's commit and stop at the first fetch that
//! finds nothing once every message is in the log (librdkafka's fetches from tansu
//! can find nothing for a moment mid-topic). Checked after each shape: both logs
//! hold every message once, the same payloads and ids in the same order. Three rounds
//! (`FERRY_BENCH_ROUNDS`), taking turns to go first; the medians and the ratio
//! `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` reads a fifth.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::capabilities::kafka::KafkaClusters;
use ferry::config::StreamConfig;
use ferry::contract::{Durability, Header, HeaderValue, Message, Uint128};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, StagedCursor, Target};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::runtime::{Runtime, Sandbox, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry_tests::bench::{self, Measured, compare, time_source_to};
use ferry_tests::components::KAFKA_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::created_stream;
use ferry_tests::kafka_broker::KafkaBroker;
use futures::FutureExt;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Message as _};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;

/// Messages a batch, and messages in all (times the scale).
const SHAPES: &[(u64, u64)] = &[(100, 50_000), (1000, 100_000)];
const KEY: &str = "kafka";
const STREAM: &str = "bench";
/// The source's default `fetch_wait_ms`: how long the last, empty, fetch waits.
const FETCH_WAIT: Duration = Duration::from_millis(100);
/// `[state] sync = "interval"`, as in the other source benchmarks.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));

fn main() {
    let scale = bench::scale();
    let broker = KafkaBroker::start();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    let component = runtime.load_source(Path::new(KAFKA_SOURCE)).expect("the source loads");
    let dir = tempfile::tempdir().unwrap();
    println!("the broker: tansu 0.6 (SQLite); each side {} times per shape, taking turns", bench::rounds());
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(batch * 20);
        let topic = format!("bench{batch}");
        tokio.block_on(fill(&broker, &topic, messages));
        let shape = Shape { batch, messages };
        let ferry = |run| ferry_source(&tokio, &runtime, &component, &broker, &topic, dir.path(), shape, run);
        let native = |run| {
            let group = group("native", shape, run);
            let (log, cursor) = logged(dir.path(), &group);
            let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &group)].into();
            let elapsed = tokio.block_on(async {
                let consumer: StreamConsumer = broker
                    .client_config()
                    .set("group.id", &group)
                    .set("enable.auto.commit", "false")
                    .set("enable.auto.offset.store", "false")
                    .set("enable.partition.eof", "false")
                    .set("auto.offset.reset", "earliest")
                    .create()
                    .expect("a consumer");
                let work = native_source(consumer, topic.clone(), log, streams, cursor, shape);
                tokio::spawn(work).await.expect("the native source")
            });
            Measured::after_first(shape.messages, shape.batch, elapsed)
        };
        let (ferry, native) = compare(ferry, native);
        let names = (group("ferry", shape, 0), group("native", shape, 0));
        bench::check_same_logs(dir.path(), STREAM, (&names.0, &names.1), shape.messages, true);
        bench::print_row(batch, messages, &ferry, &native);
    }
}

#[derive(Clone, Copy)]
struct Shape {
    batch: u64,
    messages: u64,
}

/// `messages` ~100-byte JSON messages in a new one-partition topic `topic`.
async fn fill(broker: &KafkaBroker, topic: &str, messages: u64) {
    broker.create_topic(topic, 1).await;
    let text = "x".repeat(70);
    for chunk in (0..messages).collect::<Vec<_>>().chunks(5000) {
        let payloads: Vec<Vec<u8>> =
            chunk.iter().map(|seq| json!({ "seq": seq, "text": text }).to_string().into_bytes()).collect();
        let first = chunk[0];
        broker.produce(topic, &payloads, |i| format!("k{}", first + i as u64)).await;
    }
}

fn group(side: &str, shape: Shape, run: u32) -> String {
    format!("{side}-{}-{run}", shape.batch)
}

fn logged(dir: &Path, name: &str) -> (Arc<LocalLog>, LoggedCursor) {
    bench::logged_run(dir, name, KEY, STREAM, INTERVAL)
}

#[allow(clippy::too_many_arguments)]
fn ferry_source(
    tokio: &tokio::runtime::Runtime,
    runtime: &Arc<Runtime>,
    component: &Arc<SourceComponent>,
    broker: &KafkaBroker,
    topic: &str,
    dir: &Path,
    shape: Shape,
    run: u32,
) -> Measured {
    let group = group("ferry", shape, run);
    let (log, cursor) = logged(dir, &group);
    let mut sandbox = Sandbox::default();
    sandbox.grants.kafka = vec!["bench".into()];
    let section = toml::from_str(&broker.ferry_section("x").replace("[kafka.x]\n", "")).unwrap();
    let clusters = BTreeMap::from([("bench".to_string(), section)]);
    sandbox.shared.kafka = KafkaClusters::granted(&sandbox.grants.kafka, &clusters).unwrap();
    let plugin_config = json!({ "connection": "bench", "topics": [topic], "group": group, "batch_size": shape.batch });
    let connector = SourceConnector {
        key: KEY.into(),
        tenant: None,
        component: component.clone().into(),
        plugin_config: plugin_config.to_string(),
        streams: vec![created_stream(STREAM, &group)].into(),
        settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
        sandbox,
        target: log,
        transforms: None,
        cursor: Arc::new(cursor),
    };
    let elapsed = tokio.block_on(time_source_to(runtime, connector, shape.messages));
    Measured::after_first(shape.messages, shape.batch, elapsed)
}

/// The id the source gives the message at `offset` of `topic`'s `partition`
/// (`ferry_guest::row::stable_id`, of the kind `k`).
fn message_id(topic: &str, partition: i32, offset: i64) -> u128 {
    let mut input = Vec::with_capacity(topic.len() + 21);
    input.extend_from_slice(&(topic.len() as u64).to_le_bytes());
    input.extend_from_slice(topic.as_bytes());
    input.push(b'k');
    input.extend_from_slice(&partition.to_le_bytes());
    input.extend_from_slice(&offset.to_le_bytes());
    xxhash_rust::xxh3::xxh3_128(&input).max(1)
}

/// The message the source makes of `consumed`.
fn message(consumed: &BorrowedMessage<'_>) -> Message {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let mut headers = vec![
        Header { key: "kafka_topic".into(), value: HeaderValue::String(consumed.topic().to_string()) },
        Header { key: "kafka_partition".into(), value: HeaderValue::Int32(consumed.partition()) },
        Header { key: "kafka_offset".into(), value: HeaderValue::Int64(consumed.offset()) },
    ];
    if let Some(key) = consumed.key() {
        headers.push(Header { key: "kafka_key".into(), value: HeaderValue::String(text(key)) });
    }
    Message {
        id: Some(Uint128::from(message_id(consumed.topic(), consumed.partition(), consumed.offset()))),
        headers,
        payload: consumed.payload().unwrap_or_default().to_vec().into(),
        origin_timestamp: consumed.timestamp().to_millis().map(|ms| ms as u64 * 1000),
    }
}

/// The same job natively, as the group `consumer` was made for.
async fn native_source(
    consumer: StreamConsumer,
    topic: String,
    log: Arc<LocalLog>,
    streams: Arc<[StreamConfig]>,
    cursor: LoggedCursor,
    shape: Shape,
) -> Duration {
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(&topic, 0, Offset::Stored).unwrap();
    consumer.assign(&assignment).expect("assigned");
    let connector: Arc<str> = KEY.into();
    let (mut generation, mut start, mut next) = (0u64, None, 0i64);
    loop {
        // Connecting and finding the offsets come before the first message; ferry's
        // source polls through them (and its clock, as this one, starts later).
        let wait = if start.is_none() { Duration::from_secs(30) } else { FETCH_WAIT };
        let Ok(first) = tokio::time::timeout(wait, consumer.recv()).await else {
            // A fetch may find nothing for a moment before the topic is read to its
            // end; at the end, one that finds nothing is where ferry's clock stops too
            // (its source going idle).
            if next as u64 >= shape.messages {
                break;
            }
            continue;
        };
        let mut messages = Vec::with_capacity(shape.batch as usize);
        let first = first.expect("a message");
        next = first.offset() + 1;
        messages.push(message(&first));
        drop(first);
        while messages.len() < shape.batch as usize {
            let Some(Ok(consumed)) = consumer.recv().now_or_never() else { break };
            next = consumed.offset() + 1;
            messages.push(message(&consumed));
        }
        let state = serde_json::to_vec(&json!({ "next": { format!("{topic}/0"): next } })).unwrap();
        let delivery = Delivery {
            connector: connector.clone(),
            streams: streams.clone(),
            messages: Arc::new(messages),
            cursor: Some(StagedCursor { lineage: cursor.lineage(), generation: generation + 1, state: state.clone() }),
        };
        let receipt = log.deliver(delivery).await.expect("appending to the log");
        generation = cursor.commit(state, receipt).await.expect("committing the cursor").generation;
        // The clock starts where ferry's does: at its first ACK event, which the host
        // reports once the batch is committed, before the guest commits the group's
        // offset.
        start.get_or_insert_with(Instant::now);
        let mut offsets = TopicPartitionList::new();
        offsets.add_partition_offset(&topic, 0, Offset::Offset(next)).unwrap();
        consumer.commit(&offsets, CommitMode::Async).expect("the group's offset sent");
    }
    assert!(next > 0, "at least one batch");
    start.expect("at least one batch").elapsed()
}
