//! `cargo bench -p ferry-tests --bench nats_source`: the NATS source reading a
//! JetStream stream through a durable pull consumer into the local log, next to a
//! native program doing the same job in the same run, against the same server
//! (Debian's `nats-server -js`, started here).
//!
//! The stream holds ~100-byte JSON messages. Each run reads it from the start through
//! a durable consumer of its own (`max_ack_pending` = the batch, `AckAll`):
//!
//! * ferry: the `nats-source` component run by the host's source loop: per poll the
//!   guest fetches up to a batch through the host's `nats` import, makes a message of
//!   each (its id from the stream and sequence, three headers, the origin timestamp)
//!   and returns the batch with its cursor; the host appends it to the local log with
//!   the staged cursor in one transaction and commits the cursor, then the guest
//!   acknowledges the batch by its last message (the consumer's acknowledgements are
//!   cumulative, `AckAll`).
//! * native: a loop doing the same per batch with `async-nats` (one connection): the
//!   same consumer and fetch, the same messages and cursor, the same two calls into
//!   ferry's `LocalLog` and `LoggedCursor` the source loop makes, and the same
//!   acknowledgement (the last message's `+ACK` published, then a flush).
//!
//! Checked after each shape: both logs hold every message once, the same payloads and
//! ids in the same order. Three rounds (`FERRY_BENCH_ROUNDS`), taking turns to go
//! first; the medians and the ratio `ferry / native` are printed.
//! `FERRY_BENCH_SCALE=0.2` reads a fifth.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::Context;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use ferry::capabilities::nats::NatsServers;
use ferry::config::StreamConfig;
use ferry::contract::{Durability, Header, HeaderValue, Message, Uint128};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, StagedCursor, Target};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::runtime::{Runtime, Sandbox, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry_tests::bench::{self, Measured, compare, time_source};
use ferry_tests::components::NATS_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::created_stream;
use ferry_tests::nats_server::NatsServer;
use futures::StreamExt;
use serde_json::json;

/// Messages a batch, and messages in all (times the scale).
const SHAPES: &[(u64, u64)] = &[(100, 50_000), (1000, 100_000)];
const KEY: &str = "nats";
const STREAM: &str = "bench";
/// `[state] sync = "interval"`, as in the other source benchmarks.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));

fn main() {
    let scale = bench::scale();
    let server = NatsServer::start();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    let component = runtime.load_source(Path::new(NATS_SOURCE)).expect("the source loads");
    let dir = tempfile::tempdir().unwrap();
    println!("the server: nats-server -js; each side {} times per shape, taking turns", bench::rounds());
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(batch * 20);
        let name = format!("BENCH{batch}");
        tokio.block_on(fill(&server, &name, messages));
        let shape = Shape { batch, messages };
        let ferry = |run| ferry_source(&tokio, &runtime, &component, &server, &name, dir.path(), shape, run);
        let native = |run| {
            let durable = durable("native", shape, run);
            let (log, cursor) = logged(dir.path(), &durable);
            let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &durable)].into();
            let elapsed = tokio.block_on(async {
                let jetstream = server.jetstream().await;
                let work = native_source(jetstream, name.clone(), durable, log, streams, cursor, shape);
                tokio::spawn(work).await.expect("the native source")
            });
            Measured::after_first(shape.messages, shape.batch, elapsed)
        };
        let (ferry, native) = compare(ferry, native);
        check_same_logs(dir.path(), shape);
        bench::print_row(batch, messages, &ferry, &native);
    }
}

#[derive(Clone, Copy)]
struct Shape {
    batch: u64,
    messages: u64,
}

fn subject(stream: &str) -> String {
    format!("bench.{stream}")
}

/// `messages` ~100-byte JSON messages in a new stream `name`.
async fn fill(server: &NatsServer, name: &str, messages: u64) {
    server.create_stream(name, &[&subject(name)]).await;
    let jetstream = server.jetstream().await;
    let text = "x".repeat(70);
    for chunk in (0..messages).collect::<Vec<_>>().chunks(5000) {
        let mut pending = Vec::with_capacity(chunk.len());
        for seq in chunk {
            let payload = json!({ "seq": seq, "text": text }).to_string();
            pending.push(jetstream.publish(subject(name), payload.into()).await.expect("published"));
        }
        for acknowledgement in pending {
            acknowledgement.await.expect("stored");
        }
    }
}

fn durable(side: &str, shape: Shape, run: u32) -> String {
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
    server: &NatsServer,
    stream: &str,
    dir: &Path,
    shape: Shape,
    run: u32,
) -> Measured {
    let durable = durable("ferry", shape, run);
    let (log, cursor) = logged(dir, &durable);
    let mut sandbox = Sandbox::default();
    sandbox.grants.nats = vec!["bench".into()];
    let section = toml::from_str(&server.ferry_section("x", "UNUSED").replace("[nats.x]\n", "")).unwrap();
    let servers = BTreeMap::from([("bench".to_string(), section)]);
    sandbox.shared.nats = NatsServers::granted(&sandbox.grants.nats, &servers).unwrap();
    let plugin_config =
        json!({ "connection": "bench", "stream": stream, "durable": durable, "batch_size": shape.batch });
    let connector = SourceConnector {
        key: KEY.into(),
        tenant: None,
        component: component.clone().into(),
        plugin_config: plugin_config.to_string(),
        streams: vec![created_stream(STREAM, &durable)].into(),
        settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
        sandbox,
        target: log,
        transforms: None,
        cursor: Arc::new(cursor),
    };
    let elapsed = tokio.block_on(time_source(runtime, connector));
    Measured::after_first(shape.messages, shape.batch, elapsed)
}

/// The first rounds' logs hold every message once, the same payloads and ids in the
/// same order.
fn check_same_logs(dir: &Path, shape: Shape) {
    let names = (durable("ferry", shape, 0), durable("native", shape, 0));
    bench::check_same_logs(dir, STREAM, (&names.0, &names.1), shape.messages, true);
}

/// The id the source gives the message `sequence` of `stream`: FNV-1a of the stream's
/// name, then the sequence.
fn message_id(stream: &str, sequence: u64) -> u128 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in stream.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (u128::from(hash) << 64) | u128::from(sequence)
}

/// The same job natively, through the durable consumer `durable`.
async fn native_source(
    jetstream: Context,
    stream: String,
    durable: String,
    log: Arc<LocalLog>,
    streams: Arc<[StreamConfig]>,
    cursor: LoggedCursor,
    shape: Shape,
) -> Duration {
    let config = pull::Config {
        durable_name: Some(durable.clone()),
        ack_policy: AckPolicy::All,
        ack_wait: Duration::from_secs(30),
        max_ack_pending: shape.batch as i64,
        deliver_policy: DeliverPolicy::ByStartSequence { start_sequence: 1 },
        ..Default::default()
    };
    let consumer: PullConsumer =
        jetstream.get_stream(&stream).await.expect("the stream").create_consumer(config).await.expect("the consumer");
    let client = jetstream.client();
    let connector: Arc<str> = KEY.into();
    let (mut generation, mut start) = (0u64, None);
    loop {
        let mut fetched = consumer.fetch().max_messages(shape.batch as usize).messages().await.expect("a fetch");
        let (mut messages, mut last_reply, mut last) = (Vec::with_capacity(shape.batch as usize), None, 0);
        while let Some(message) = fetched.next().await {
            let message = message.expect("a message");
            let info = message.info().expect("its JetStream reply");
            let (sequence, published) = (info.stream_sequence, info.published.unix_timestamp_nanos() as u64);
            last = sequence;
            last_reply = message.reply.clone();
            messages.push(Message {
                id: Some(Uint128::from(message_id(&stream, sequence))),
                headers: vec![
                    Header { key: "nats_stream".into(), value: HeaderValue::String(stream.clone()) },
                    Header { key: "nats_subject".into(), value: HeaderValue::String(message.subject.to_string()) },
                    Header { key: "nats_sequence".into(), value: HeaderValue::Uint64(sequence) },
                ],
                payload: message.payload.clone(),
                origin_timestamp: Some(published / 1000),
            });
        }
        if messages.is_empty() {
            break;
        }
        let state = serde_json::to_vec(&json!({ "sequence": last })).unwrap();
        let delivery = Delivery {
            connector: connector.clone(),
            streams: streams.clone(),
            messages: Arc::new(messages),
            cursor: Some(StagedCursor { lineage: cursor.lineage(), generation: generation + 1, state: state.clone() }),
        };
        let receipt = log.deliver(delivery).await.expect("appending to the log");
        generation = cursor.commit(state, receipt).await.expect("committing the cursor").generation;
        // The clock starts where ferry's does: at its first ACK event, which the host
        // reports once the batch is committed, before the guest acknowledges it to the
        // server.
        start.get_or_insert_with(Instant::now);
        client.publish(last_reply.expect("its reply"), "+ACK".into()).await.expect("the acknowledgement");
        client.flush().await.expect("the acknowledgement flushed");
    }
    start.expect("at least one batch").elapsed()
}
