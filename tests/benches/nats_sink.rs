//! `cargo bench -p ferry-tests --bench nats_sink`: the NATS sink draining the local
//! log into a JetStream stream, next to a native program doing the same job in the
//! same run, against the same server.
//!
//! The server is Debian's `nats-server -js` started by the benchmark
//! (`ferry_tests::nats_server`). For each batch size, with a topic of ~100-byte JSON
//! records filled first, each run publishing to a stream of its own:
//!
//! * ferry: the `nats-sink` component reading the topic through the host's sink loop
//!   (read a batch, lift it into the guest, which makes each message's headers and
//!   publishes the batch through the host's `nats` import: every message sent, then
//!   every acknowledgement awaited), then the position stored in the state file;
//! * native: a loop reading the same batches with the same reader, publishing the same
//!   messages with the same headers with `async-nats` the same way (one connection),
//!   then storing the position the same way.
//!
//! Three rounds each (`FERRY_BENCH_ROUNDS`), taking turns to go first; the medians and
//! the ratio `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` writes a fifth.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use ferry::capabilities::nats::NatsServers;
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{LogMark, Receipt};
use ferry::engine::sink::SinkConnector;
use ferry::runtime::{Runtime, Sandbox, SinkWorld};
use ferry::store::local_log::{LocalLogInput, TopicReader};
use ferry::store::state::StateDir;
use ferry_tests::bench::{self, Measured, SinkEnd, compare, fill_local_log, time_sink};
use ferry_tests::components::NATS_SINK;
use ferry_tests::harness::quick_sink_settings;
use ferry_tests::nats_server::NatsServer;
use serde_json::json;

/// Messages a batch, messages in all (times the scale).
const SHAPES: &[(u32, u64)] = &[(100, 50_000), (1000, 100_000)];
const PAYLOAD: usize = 100;

fn main() {
    let scale = ferry_tests::bench::scale();
    let server = NatsServer::start();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!("the server: nats-server -js; each side {} times, taking turns", ferry_tests::bench::rounds());
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        tokio.block_on(fill_local_log(&dir.path().join("log"), messages, PAYLOAD));
        let ferry = |run| {
            let name = format!("FERRY{batch}R{run}");
            tokio.block_on(server.create_stream(&name, &[&subject(&name)]));
            let measured = tokio.block_on(ferry_sink(&runtime, dir.path(), &server, &name, batch, messages));
            assert_eq!(tokio.block_on(stored(&server, &name)), messages, "ferry stored every message");
            measured
        };
        let native = |run| {
            let name = format!("NATIVE{batch}R{run}");
            tokio.block_on(server.create_stream(&name, &[&subject(&name)]));
            let measured = tokio.block_on(native_sink(dir.path(), &server, &name, batch, messages));
            assert_eq!(tokio.block_on(stored(&server, &name)), messages, "the native side stored every message");
            measured
        };
        let (ferry, native) = compare(ferry, native);
        bench::print_row(batch, messages, &ferry, &native);
    }
}

/// The subject a run publishes to (each run's stream takes its own).
fn subject(name: &str) -> String {
    format!("bench.{name}")
}

async fn stored(server: &NatsServer, name: &str) -> u64 {
    let mut stream = server.jetstream().await.get_stream(name).await.expect("the stream");
    stream.info().await.expect("its info").state.messages
}

async fn ferry_sink(
    runtime: &Arc<Runtime>,
    dir: &Path,
    server: &NatsServer,
    name: &str,
    batch: u32,
    messages: u64,
) -> Measured {
    let state = StateDir::new(dir.join("state")).open(name).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    let mut sandbox = Sandbox::default();
    sandbox.grants.nats = vec!["bench".into()];
    let section = toml::from_str(&server.ferry_section("x", "UNUSED").replace("[nats.x]\n", "")).unwrap();
    let servers = BTreeMap::from([("bench".to_string(), section)]);
    sandbox.shared.nats = NatsServers::granted(&sandbox.grants.nats, &servers).unwrap();
    let connector = SinkConnector {
        key: name.into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(NATS_SINK)).expect("the sink loads").into(),
        plugin_config: json!({ "connection": "bench", "subject": subject(name) }).to_string(),
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

/// The same job natively: the same reader, messages, headers, publishes and position
/// store.
async fn native_sink(dir: &Path, server: &NatsServer, name: &str, batch: u32, messages: u64) -> Measured {
    let state = StateDir::new(dir.join("state")).open(name).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let jetstream = server.jetstream().await;
    let subject = subject(name);
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        let mut pending = Vec::with_capacity(records.len());
        for record in &records {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", record.id.unwrap_or(0).to_string().as_str());
            headers.insert("Iggy-Stream", "bench");
            headers.insert("Iggy-Topic", "t");
            headers.insert("Iggy-Partition", "0");
            headers.insert("Iggy-Offset", record.offset.to_string().as_str());
            let payload = record.payload.to_vec().into();
            pending.push(jetstream.publish_with_headers(subject.clone(), headers, payload).await.expect("sent"));
        }
        for acknowledgement in pending {
            acknowledgement.await.expect("stored");
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
