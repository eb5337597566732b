//! `cargo bench -p ferry-tests --bench sinks`: how fast a sink drains the local log,
//! next to a native program doing the same work in the same run.
//!
//! A topic of the local log is filled first (outside the clock). Then, for each shape
//! (messages per batch × payload bytes):
//!
//! * `ferry-null`: a sink connector whose guest acknowledges every batch and writes
//!   nothing (`faulty-sink` with `record = false`): read a batch, lift it into the
//!   guest, answer, store the position in the state file (one fsync per batch);
//! * `native-null`: a plain loop doing exactly that without wasm: read the same
//!   batches with the same reader, store the position the same way;
//! * `ferry-file`: the `file-sink` connector: each message as a JSON line appended to a
//!   file and fsynced before the answer, then the position stored;
//! * `native-file`: the same lines (the same fields, built with `serde_json`) appended
//!   and fsynced by a plain loop, then the position stored the same way.
//!
//! Both sides run in one process on the same data, three times each
//! (`FERRY_BENCH_ROUNDS`), taking turns to go first (this machine is noisy); the
//! medians are printed, and the ratio `ferry / native` of the medians (the cost of
//! the sandboxed host) with the lowest and highest ratio of a round's pair. Printed: messages/s, MB/s of payload, µs per
//! batch.
//!
//! With `FERRY_TEST_IGGY_SERVER` set (see `ferry_tests::iggy_server`), the same four
//! from a topic of a live Iggy server of the benchmark's own (one partition, filled
//! first): ferry's sinks read it in a consumer group (poll, hand to the guest, store
//! the group's offset after the answer); `native-*` is a plain `iggy` consumer doing
//! the same: poll in its own consumer group with auto-commit off, write (or not) the
//! same lines and fsync, store the offset, poll again.
//!
//! `FERRY_BENCH_SCALE=0.1` reads a tenth of the messages (a quick look).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::capabilities::dirs::DirGrant;
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{LogMark, Receipt};
use ferry::engine::sink::{Input, SinkConnector, SinkSettings};
use ferry::iggy::{IggyInput, IggyTarget, Reading};
use ferry::runtime::{Runtime, Sandbox, SinkWorld};
use ferry::store::local_log::{LocalLogInput, TopicReader, headers_from_json};
use ferry::store::state::StateDir;
use ferry_tests::bench::{Measured, Rounds, SinkEnd, compare, fill_local_log, time_sink};
use ferry_tests::components::{FAULTY_SINK, FILE_SINK};
use ferry_tests::harness::quick_sink_settings;
use ferry_tests::iggy_server::{IggyServer, PASSWORD, live_server};
use iggy::prelude::{IggyMessage, MessageClient, Partitioning};
use serde_json::json;

const SHAPES: &[(u32, usize)] = &[(100, 100), (1000, 100), (1000, 1000)];
const MESSAGES: u64 = 200_000;

fn main() {
    let scale = ferry_tests::bench::scale();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!(
        "{:<17} {:>6} {:>8} {:>9} {:>12} {:>9} {:>11}  ratio (of the medians; lowest-highest of the pairs)",
        "sink", "batch", "payload", "batches", "msg/s", "MB/s", "µs/batch"
    );
    for &(batch, payload) in SHAPES {
        let messages = ((MESSAGES as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        tokio.block_on(fill_local_log(&log, messages, payload));
        for kind in ["null", "file"] {
            let (ferry, native) = compare(
                |run| tokio.block_on(ferry_sink(&runtime, dir.path(), kind, batch, messages, run)),
                |run| native_sink(dir.path(), kind, batch, messages, run),
            );
            print_pair(kind, "", batch, payload, &ferry, &native);
        }
    }
    if let Some(server) = live_server("the Iggy sink benchmark") {
        // The Iggy connections start their tasks on this runtime.
        let _entered = tokio.enter();
        println!();
        for &(batch, payload) in SHAPES {
            let messages = ((MESSAGES as f64 * scale) as u64).max(u64::from(batch) * 20);
            let topic = format!("sink-{batch}-{payload}");
            tokio.block_on(fill_iggy(&server, &topic, messages, payload));
            let dir = tempfile::tempdir().unwrap();
            for kind in ["null", "file"] {
                let ferry = |run| {
                    let connection =
                        IggyTarget::start(&server.ferry_config(PASSWORD)).expect("a connection").connection();
                    let group = format!("ferry-{kind}-{run}");
                    let input = Arc::new(IggyInput::new(
                        connection,
                        vec![("bench".into(), topic.clone())],
                        Reading::InGroup(group),
                    ));
                    let key = format!("iggy-ferry-{kind}-{batch}-{run}");
                    tokio.block_on(drain(&runtime, dir.path(), &key, kind, input, batch, messages))
                };
                let native =
                    |run| tokio.block_on(native_consumer(&server, dir.path(), &topic, kind, batch, messages, run));
                let (ferry, native) = compare(ferry, native);
                print_pair(kind, "iggy-", batch, payload, &ferry, &native);
            }
        }
    }
}

/// `messages` messages of `payload` bytes in `bench/topic` of `server` (one partition).
async fn fill_iggy(server: &IggyServer, topic: &str, messages: u64, payload: usize) {
    let client = server.client().await;
    let (stream, topic) = IggyServer::create_topic(&client, "bench", topic).await;
    let text = "x".repeat(payload.saturating_sub(24));
    for start in (0..messages).step_by(1000) {
        let mut chunk: Vec<IggyMessage> = (start..(start + 1000).min(messages))
            .map(|n| {
                let body = format!("{{\"seq\":{n},\"text\":\"{text}\"}}");
                IggyMessage::builder().id(u128::from(n + 1)).payload(body.into_bytes().into()).build().unwrap()
            })
            .collect();
        client.send_messages(&stream, &topic, &Partitioning::balanced(), &mut chunk).await.unwrap();
    }
}

/// The plain consumer ferry's sinks are measured against: one connection in a
/// consumer group of its own, auto-commit off; poll a batch, write it (or not),
/// store the group's offset past it, poll again.
async fn native_consumer(
    server: &IggyServer,
    dir: &Path,
    topic: &str,
    kind: &str,
    batch: u32,
    messages: u64,
    run: u32,
) -> Measured {
    let consumer = server.join_group("bench", topic, &format!("native-{kind}-{run}")).await;
    let mut file = (kind == "file").then(|| {
        let path = dir.join(format!("iggy-native-{kind}-{batch}-{run}.jsonl"));
        std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap()
    });
    let (mut read, mut batches, mut start) = (0u64, 0u64, None);
    while read < messages {
        let polled = consumer.poll(batch).await;
        let Some(last) = polled.messages.last() else { panic!("the topic holds {messages}, and {read} were read") };
        if let Some(file) = &mut file {
            let mut lines = Vec::with_capacity(polled.messages.len() * 256);
            for message in &polled.messages {
                assert!(message.user_headers.is_none(), "filled without headers");
                let line = Line {
                    partition: polled.partition_id,
                    offset: message.header.offset,
                    id: message.header.id,
                    timestamp: message.header.timestamp,
                    origin_timestamp: Some(message.header.origin_timestamp),
                    headers: json!({}),
                    payload: &message.payload,
                };
                line.append_to(&mut lines);
            }
            write_synced(file, &lines);
        }
        consumer.store(polled.partition_id, last.header.offset).await;
        read += polled.messages.len() as u64;
        if start.is_none() {
            start = Some(Instant::now());
        } else {
            batches += 1;
        }
    }
    Measured { messages: messages - u64::from(batch), batches, elapsed: start.unwrap().elapsed() }
}

/// A sink connector draining `bench/t` of the local log under `dir` into the null sink
/// or the file sink.
async fn ferry_sink(runtime: &Arc<Runtime>, dir: &Path, kind: &str, batch: u32, messages: u64, run: u32) -> Measured {
    let key = format!("ferry-{kind}-{batch}-{run}");
    let state = StateDir::new(dir.join("state")).open(&key).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    drain(runtime, dir, &key, kind, input, batch, messages).await
}

/// A sink connector `key` draining `input` (`messages` in all) into the null sink or
/// the file sink (writing under `dir`); the clock runs from its first settled batch
/// to the one that ends the topic.
async fn drain(
    runtime: &Arc<Runtime>,
    dir: &Path,
    key: &str,
    kind: &str,
    input: Arc<dyn Input>,
    batch: u32,
    messages: u64,
) -> Measured {
    let out = dir.join(key);
    std::fs::create_dir_all(&out).unwrap();
    let (component, plugin_config) = match kind {
        "null" => (FAULTY_SINK, json!({ "record": false })),
        _ => (FILE_SINK, json!({ "directory": "/out" })),
    };
    let mut sandbox = Sandbox::default();
    sandbox.grants.dirs = vec![DirGrant { host: out, guest: "/out".into(), writable: true }];
    sandbox.limits.memory = ferry::config::ByteSize::mib(256);
    let settings =
        SinkSettings { poll_interval: Duration::from_millis(1), batch_length: batch, ..quick_sink_settings() };
    let connector = SinkConnector {
        key: key.into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(component)).expect("the sink loads").into(),
        plugin_config: plugin_config.to_string(),
        settings,
        sandbox,
        input,
        transforms: None,
        dead_letters: None,
    };
    let elapsed = time_sink(runtime, connector, messages, SinkEnd::Drained).await;
    Measured::after_first(messages, u64::from(batch), elapsed)
}

/// The same work without wasm: read each batch with the same reader, write it (or
/// not), store the position in a state file the same way.
fn native_sink(dir: &Path, kind: &str, batch: u32, messages: u64, run: u32) -> Measured {
    let key = format!("native-{kind}-{batch}-{run}");
    let state = StateDir::new(dir.join("state")).open(&key).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let mut file = (kind == "file")
        .then(|| std::fs::OpenOptions::new().create(true).append(true).open(dir.join(format!("{key}.jsonl"))).unwrap());
    let tokio = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        if let Some(file) = &mut file {
            let mut lines = Vec::with_capacity(records.len() * 256);
            for record in &records {
                let headers = record.headers.as_ref().map(headers_from_json).transpose().unwrap().unwrap_or_default();
                let line = Line {
                    partition: 0,
                    offset: record.offset,
                    id: record.id.unwrap_or(0),
                    timestamp: record.appended_at_micros,
                    origin_timestamp: record.origin_timestamp,
                    headers: ferry::store::local_log::headers_json(&headers),
                    payload: &record.payload,
                };
                line.append_to(&mut lines);
            }
            write_synced(file, &lines);
        }
        at = records.last().map_or(at, |r| r.offset + 1);
        let positions = serde_json::to_vec(&json!({ "bench/t": at })).unwrap();
        let receipt = Receipt { marks: vec![LogMark::new("bench", "t", at)] };
        tokio.block_on(state.commit(positions, receipt)).expect("storing the position");
        if start.is_none() {
            start = Some(Instant::now());
        } else {
            batches += 1;
        }
    }
    Measured { messages: messages - u64::from(batch), batches, elapsed: start.unwrap().elapsed() }
}

/// One message as the file sink writes it (the same fields), for the native sides.
struct Line<'a> {
    partition: u32,
    offset: u64,
    id: u128,
    timestamp: u64,
    origin_timestamp: Option<u64>,
    headers: serde_json::Value,
    payload: &'a [u8],
}

impl Line<'_> {
    fn append_to(&self, lines: &mut Vec<u8>) {
        let line = json!({
            "stream": "bench", "topic": "t", "partition": self.partition, "offset": self.offset,
            "id": self.id.to_string(), "timestamp": self.timestamp,
            "origin_timestamp": self.origin_timestamp,
            "headers": self.headers,
            "payload": String::from_utf8_lossy(self.payload),
        });
        serde_json::to_writer(&mut *lines, &line).unwrap();
        lines.push(b'\n');
    }
}

/// Append `lines` to `file` and fsync it, as the file sink does before it answers.
fn write_synced(file: &mut std::fs::File, lines: &[u8]) {
    file.write_all(lines).unwrap();
    file.sync_data().unwrap();
}

/// The medians of both sides of one comparison, the ratio of the medians, and the
/// lowest and highest ratio of a round's pair.
fn print_pair(kind: &str, prefix: &str, batch: u32, payload: usize, ferry: &Rounds, native: &Rounds) {
    print_row(&format!("{prefix}ferry-{kind}"), batch, payload, &ferry.median, String::new());
    print_row(&format!("{prefix}native-{kind}"), batch, payload, &native.median, Rounds::ratio(ferry, native));
}

fn print_row(name: &str, batch: u32, payload: usize, m: &Measured, ratio: String) {
    let seconds = m.elapsed.as_secs_f64();
    println!(
        "{:<17} {:>6} {:>8} {:>9} {:>12.0} {:>9.1} {:>11.1}  {}",
        name,
        batch,
        payload,
        m.batches,
        m.rate(),
        (m.messages as f64 * payload as f64) / seconds / 1e6,
        m.micros_per_batch(),
        ratio,
    );
}
