//! `cargo bench -p ferry-tests --bench http_sink`: the HTTP sink draining the local
//! log into an HTTP endpoint, next to a native program doing the same job in the same
//! run, against the same endpoint.
//!
//! The endpoint is an axum server in this process (its own runtime), answering every
//! `POST /ingest` 200 after reading the body. For each shape (`batch_mode` ×
//! messages per batch), with a topic of ~100-byte JSON records filled first:
//!
//! * ferry: the `http-sink` component reading the topic through the host's sink loop
//!   (read a batch, lift it into the guest, which builds Iggy's envelopes with
//!   serde_json and sends through `wasi:http`, one request per batch in `ndjson`, one
//!   per message in `individual`), then the position stored in the state file;
//! * native: a loop reading the same batches with the same reader, building the same
//!   bodies (the same envelope fields, serde_json) with the same `Idempotency-Key`s,
//!   sending them with `reqwest` (one kept-alive connection, each request awaited),
//!   then storing the position the same way.
//!
//! Three rounds each (`FERRY_BENCH_ROUNDS`), taking turns to go first; the medians
//! and the ratio `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` sends a fifth.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{LogMark, Receipt};
use ferry::engine::sink::SinkConnector;
use ferry::runtime::{Runtime, Sandbox, SinkWorld};
use ferry::store::local_log::{LocalLogInput, TopicReader};
use ferry::store::state::StateDir;
use ferry_tests::bench::{Measured, Rounds, SinkEnd, compare, fill_local_log, time_sink};
use ferry_tests::components::HTTP_SINK;
use ferry_tests::harness::quick_sink_settings;
use serde_json::{Value, json};

/// `batch_mode`, messages a batch, messages in all (times the scale).
const SHAPES: &[(&str, u32, u64)] = &[("ndjson", 100, 100_000), ("ndjson", 1000, 200_000), ("individual", 100, 10_000)];
const PAYLOAD: usize = 100;

fn main() {
    let scale = ferry_tests::bench::scale();
    let server = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let bytes = Arc::new(AtomicU64::new(0));
    let address = endpoint(&server, bytes.clone());
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!("the endpoint: http://{address}/ingest; each side {} times, taking turns", ferry_tests::bench::rounds());
    println!(
        "{:<11} {:>6} {:>8} {:>12} {:>12} {:>10} {:>10}  ratio ferry/native (of the medians; lowest-highest)",
        "batch_mode", "batch", "messages", "ferry msg/s", "native msg/s", "ferry µs", "native µs"
    );
    for &(mode, batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        tokio.block_on(fill_local_log(&dir.path().join("log"), messages, PAYLOAD));
        let ferry = |run| tokio.block_on(ferry_sink(&runtime, dir.path(), &address, mode, batch, messages, run));
        let native = |run| native_sink(dir.path(), &address, mode, batch, messages, run);
        let (ferry, native) = compare(ferry, native);
        let (f, n) = (&ferry.median, &native.median);
        println!(
            "{:<11} {:>6} {:>8} {:>12.0} {:>12.0} {:>10.1} {:>10.1}  {}",
            mode,
            batch,
            messages,
            f.rate(),
            n.rate(),
            f.micros_per_batch(),
            n.micros_per_batch(),
            Rounds::ratio(&ferry, &native)
        );
    }
    eprintln!("the endpoint took {} MB in all", bytes.load(Ordering::Relaxed) / 1_000_000);
}

/// The endpoint: every `POST /ingest` read whole and answered 200.
fn endpoint(server: &tokio::runtime::Runtime, bytes: Arc<AtomicU64>) -> String {
    let app = axum::Router::new().route(
        "/ingest",
        axum::routing::post(move |body: axum::body::Bytes| {
            let bytes = bytes.clone();
            async move {
                bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                "ok"
            }
        }),
    );
    let listener = server.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    server.spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

fn plugin_config(address: &str, mode: &str) -> Value {
    json!({ "url": format!("http://{address}/ingest"), "batch_mode": mode })
}

async fn ferry_sink(
    runtime: &Arc<Runtime>,
    dir: &Path,
    address: &str,
    mode: &str,
    batch: u32,
    messages: u64,
    run: u32,
) -> Measured {
    let key = format!("ferry-{mode}-{batch}-{run}");
    let state = StateDir::new(dir.join("state")).open(&key).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    let mut sandbox = Sandbox::default();
    sandbox.grants.network = vec![address.to_string()];
    let connector = SinkConnector {
        key: key.as_str().into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(HTTP_SINK)).expect("the sink loads").into(),
        plugin_config: plugin_config(address, mode).to_string(),
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

/// The same job natively: the same reader, bodies, keys and position store.
fn native_sink(dir: &Path, address: &str, mode: &str, batch: u32, messages: u64, run: u32) -> Measured {
    let key = format!("native-{mode}-{batch}-{run}");
    let state = StateDir::new(dir.join("state")).open(&key).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::builder().build().unwrap();
    let url = format!("http://{address}/ingest");
    let send = |body: Vec<u8>, key: String, content_type: &'static str| {
        let request = client
            .post(&url)
            .header("Content-Type", content_type)
            .header("Idempotency-Key", key)
            .timeout(Duration::from_secs(30))
            .body(body);
        tokio.block_on(async {
            let response = request.send().await.expect("an answer");
            assert!(response.status().is_success(), "{}", response.status());
            response.bytes().await.expect("the answer's body");
        });
    };
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        let envelope = |record: &ferry::store::local_log::Record| {
            let payload = serde_json::from_slice::<Value>(&record.payload).expect("JSON");
            json!({
                "metadata": {
                    "iggy_id": record.id.unwrap_or(0).to_string(),
                    "iggy_offset": record.offset,
                    "iggy_timestamp": record.appended_at_micros,
                    "iggy_stream": "bench",
                    "iggy_topic": "t",
                    "iggy_partition_id": 0,
                },
                "payload": payload,
            })
        };
        if mode == "ndjson" {
            let mut body = Vec::new();
            for record in &records {
                serde_json::to_writer(&mut body, &envelope(record)).unwrap();
                body.push(b'\n');
            }
            let (first, last) = (records[0].id.unwrap_or(0), records[records.len() - 1].id.unwrap_or(0));
            send(body, format!("{first:032x}-{last:032x}-{}", records.len()), "application/x-ndjson");
        } else {
            for record in &records {
                let body = serde_json::to_vec(&envelope(record)).unwrap();
                send(body, format!("{:032x}", record.id.unwrap_or(0)), "application/json");
            }
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
