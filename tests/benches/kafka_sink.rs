//! `cargo bench -p ferry-tests --bench kafka_sink`: the Kafka sink draining the local
//! log into a topic, next to a native program doing the same job in the same run,
//! against the same broker (tansu, started here: `ferry_tests::kafka_broker`).
//!
//! For each batch size, with a topic of ~100-byte JSON records filled first, each run
//! producing to a topic of its own (one partition):
//!
//! * ferry: the `kafka-sink` component reading the topic through the host's sink loop
//!   (read a batch, lift it into the guest, which makes each message's key and headers
//!   and produces the batch through the host's `kafka` import: every message queued on
//!   the idempotent producer, then every delivery report awaited), then the position
//!   stored in the state file;
//! * native: a loop reading the same batches with the same reader, producing the same
//!   messages with the same key and headers with `rdkafka` the same way (one
//!   idempotent producer, the same properties), then storing the position the same way.
//!
//! Three rounds each (`FERRY_BENCH_ROUNDS`), taking turns to go first; the medians and
//! the ratio `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` writes a fifth.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::capabilities::kafka::KafkaClusters;
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{LogMark, Receipt};
use ferry::engine::sink::SinkConnector;
use ferry::runtime::{Runtime, Sandbox, SinkWorld};
use ferry::store::local_log::{LocalLogInput, TopicReader};
use ferry::store::state::StateDir;
use ferry_tests::bench::{self, Measured, SinkEnd, compare, fill_local_log, time_sink};
use ferry_tests::components::KAFKA_SINK;
use ferry_tests::harness::quick_sink_settings;
use ferry_tests::kafka_broker::KafkaBroker;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::json;

/// Messages a batch, messages in all (times the scale).
const SHAPES: &[(u32, u64)] = &[(100, 50_000), (1000, 100_000)];
const PAYLOAD: usize = 100;

fn main() {
    let scale = ferry_tests::bench::scale();
    let broker = KafkaBroker::start();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!("the broker: tansu 0.6 (SQLite); each side {} times, taking turns", ferry_tests::bench::rounds());
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        tokio.block_on(fill_local_log(&dir.path().join("log"), messages, PAYLOAD));
        let ferry = |run| {
            let topic = format!("ferry{batch}r{run}");
            tokio.block_on(broker.create_topic(&topic, 1));
            let measured = tokio.block_on(ferry_sink(&runtime, dir.path(), &broker, &topic, batch, messages));
            assert_eq!(stored(&broker, &topic), messages, "ferry stored every message");
            measured
        };
        let native = |run| {
            let topic = format!("native{batch}r{run}");
            tokio.block_on(broker.create_topic(&topic, 1));
            let measured = tokio.block_on(native_sink(dir.path(), &broker, &topic, batch, messages));
            assert_eq!(stored(&broker, &topic), messages, "the native side stored every message");
            measured
        };
        let (ferry, native) = compare(ferry, native);
        bench::print_row(batch, messages, &ferry, &native);
    }
}

/// How many messages `topic` (one partition) holds.
fn stored(broker: &KafkaBroker, topic: &str) -> u64 {
    let client: BaseConsumer = broker.client_config().create().expect("a client");
    let (low, high) = client.fetch_watermarks(topic, 0, Duration::from_secs(30)).expect("the watermarks");
    (high - low) as u64
}

async fn ferry_sink(
    runtime: &Arc<Runtime>,
    dir: &Path,
    broker: &KafkaBroker,
    topic: &str,
    batch: u32,
    messages: u64,
) -> Measured {
    let state = StateDir::new(dir.join("state")).open(topic).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    let mut sandbox = Sandbox::default();
    sandbox.grants.kafka = vec!["bench".into()];
    let section = toml::from_str(&broker.ferry_section("x").replace("[kafka.x]\n", "")).unwrap();
    let clusters = BTreeMap::from([("bench".to_string(), section)]);
    sandbox.shared.kafka = KafkaClusters::granted(&sandbox.grants.kafka, &clusters).unwrap();
    let connector = SinkConnector {
        key: topic.into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(KAFKA_SINK)).expect("the sink loads").into(),
        plugin_config: json!({ "connection": "bench", "topic": topic }).to_string(),
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

/// The same job natively: the same reader, messages, key, headers, producer settings
/// and position store.
async fn native_sink(dir: &Path, broker: &KafkaBroker, topic: &str, batch: u32, messages: u64) -> Measured {
    let state = StateDir::new(dir.join("state")).open(topic).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let producer: FutureProducer = broker
        .client_config()
        .set("linger.ms", "0")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .expect("a producer");
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        let mut pending = Vec::with_capacity(records.len());
        for record in &records {
            let id = record.id.unwrap_or(0).to_string();
            let offset = record.offset.to_string();
            let headers = OwnedHeaders::new_with_capacity(5)
                .insert(Header { key: "Iggy-Stream", value: Some("bench") })
                .insert(Header { key: "Iggy-Topic", value: Some("t") })
                .insert(Header { key: "Iggy-Partition", value: Some("0") })
                .insert(Header { key: "Iggy-Offset", value: Some(offset.as_str()) })
                .insert(Header { key: "Iggy-Id", value: Some(id.as_str()) });
            let message = FutureRecord::to(topic).payload(&record.payload[..]).key(id.as_bytes()).headers(headers);
            pending.push(producer.send_result(message).map_err(|(e, _)| e).expect("queued"));
        }
        for delivery in pending {
            delivery.await.expect("a report").map_err(|(e, _)| e).expect("stored");
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
