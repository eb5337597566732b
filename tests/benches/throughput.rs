//! `cargo bench -p ferry-tests`: how fast the random source moves through the host.
//!
//! Four set-ups, each for a few batch and payload sizes:
//!
//! * `host`: null target, cursor kept in memory: the wasm host alone (poll, lift the
//!   batch out of the guest, ACK);
//! * `null`: null target, cursor committed to the state file (one fsync per batch);
//! * `null-intv`: the same with `[state] sync = "interval"` (committed, fsynced at
//!   most once a second);
//! * `local-log`: the local log, i.e. `ferry run` as configured by the quickstart: the
//!   cursor kept in the transaction that appends the batch (one fsync per batch), the
//!   state file committed without one;
//! * `log+state`: the same with the state file fsynced at every commit too, as before
//!   the log kept cursors (two fsyncs per batch).
//!
//! With a live server (`FERRY_TEST_IGGY_SERVER`): into Iggy with the cursor in memory
//! (`iggy-host`), committed at every batch (`iggy`) and at an interval (`iggy-intv`),
//! next to a native producer sending the same batches.
//!
//! One connector runs the random source to `max_count`; the clock runs from its first
//! ACK to the moment it goes idle (everything delivered and committed). Printed:
//! messages/s, MB/s of payload, µs per batch (poll + deliver + commit + ACK), then
//! the host's resident memory.
//!
//! With `FERRY_TEST_IGGY_SERVER` set (see `ferry_tests::iggy_server`), the same into
//! a live Iggy server of the benchmark's own, next to a plain native producer written
//! with the `iggy` crate that sends identical batches (same sizes, one connection,
//! awaiting each send, TCP_NODELAY): the ratio of the two is the cost of the wasm
//! host.
//!
//! `FERRY_BENCH_SCALE=0.1` runs a tenth of the batches (a quick look);
//! `FERRY_BENCH_ONLY=local-log,log+state` only the set-ups named;
//! `FERRY_BENCH_SHAPES=1000x100` only the shapes named (batch x payload).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::contract::Durability;
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{NullTarget, Target};
use ferry::engine::source::SourceConnector;
use ferry::iggy::IggyTarget;
use ferry::runtime::{Runtime, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry::store::state::StateDir;
use ferry_tests::bench::{self, Measured, time_source};
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::harness::{MemoryCursor, quick_settings};
use ferry_tests::iggy_server::{IggyServer, PASSWORD, created_stream};

const SHAPES: &[(u64, usize)] =
    &[(1, 100), (10, 100), (100, 100), (1000, 100), (100, 1000), (1000, 1000), (100, 10_000)];

async fn measure(
    runtime: &Arc<Runtime>,
    component: &Arc<SourceComponent>,
    target: Arc<dyn Target>,
    cursor: Arc<dyn CursorStore>,
    batch: u64,
    payload: usize,
    batches: u64,
) -> Measured {
    measure_into(runtime, component, target, cursor, &format!("bench-{batch}-{payload}"), batch, payload, batches).await
}

#[allow(clippy::too_many_arguments)]
async fn measure_into(
    runtime: &Arc<Runtime>,
    component: &Arc<SourceComponent>,
    target: Arc<dyn Target>,
    cursor: Arc<dyn CursorStore>,
    key: &str,
    batch: u64,
    payload: usize,
    batches: u64,
) -> Measured {
    let key = key.to_string();
    let max_count = batch * batches;
    let mut settings = quick_settings();
    settings.poll_interval = Duration::from_millis(1);
    let connector = SourceConnector {
        key: key.as_str().into(),
        tenant: None,
        component: component.clone().into(),
        plugin_config:
            serde_json::json!({ "messages_per_batch": batch, "payload_size": payload, "max_count": max_count })
                .to_string(),
        streams: vec![created_stream("bench", &key)].into(),
        settings,
        sandbox: Default::default(),
        target,
        transforms: None,
        cursor,
    };
    let elapsed = time_source(runtime, connector).await;
    Measured::after_first(max_count, batch, elapsed)
}

fn rss_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn main() {
    let scale = ferry_tests::bench::scale();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    let component = runtime.load_source(std::path::Path::new(RANDOM_SOURCE)).expect("the random source loads");
    println!("RSS after loading the component: {:.1} MiB", rss_mib("VmRSS:"));
    println!();
    println!(
        "{:<10} {:>6} {:>8} {:>8} {:>12} {:>9} {:>11}",
        "target", "batch", "payload", "batches", "msg/s", "MB/s", "µs/batch"
    );

    let set_ups = ["host", "null", "null-intv", "local-log", "log+state"];
    for target_name in set_ups.into_iter().filter(|name| ferry_tests::bench::wanted(name)) {
        for &(batch, payload) in SHAPES.iter().filter(|(batch, payload)| bench::shape_wanted(*batch, *payload)) {
            let dir = tempfile::tempdir().unwrap();
            let key = format!("bench-{batch}-{payload}");
            let state_file = |durability: Durability| -> Arc<dyn CursorStore> {
                Arc::new(StateDir::new(dir.path().join("state")).with_durability(durability).open(&key).expect("state"))
            };
            let (target, cursor, batches): (Arc<dyn Target>, Arc<dyn CursorStore>, u64) = match target_name {
                "host" => (Arc::new(NullTarget), Arc::new(MemoryCursor::default()), 50_000 / batch + 2000),
                "null" => (Arc::new(NullTarget), state_file(Durability::EveryCommit), 2000),
                "null-intv" => (Arc::new(NullTarget), state_file(INTERVAL), 2000),
                "local-log" => {
                    let log = Arc::new(LocalLog::new(dir.path().join("log")));
                    let file = StateDir::new(dir.path().join("state")).open_with(&key, INTERVAL).expect("state");
                    let cursor = LoggedCursor::new(file, &key, &log, vec![("bench".to_string(), key.clone())]);
                    (log as Arc<dyn Target>, Arc::new(cursor), 600)
                }
                _ => (Arc::new(LocalLog::new(dir.path().join("log"))), state_file(Durability::EveryCommit), 600),
            };
            let batches = ((batches as f64 * scale) as u64).max(20);
            let m = tokio.block_on(measure(&runtime, &component, target, cursor, batch, payload, batches));
            print_row(target_name, batch, payload, &m);
        }
    }
    if let Some(server) = ferry_tests::iggy_server::live_server("the Iggy benchmark") {
        // The Iggy target starts its connection task on this runtime.
        let _entered = tokio.enter();
        println!();
        for &(batch, payload) in IGGY_SHAPES.iter().filter(|(batch, payload)| bench::shape_wanted(*batch, *payload)) {
            let batches = ((IGGY_BATCHES as f64 * scale) as u64).max(20);
            let dir = tempfile::tempdir().unwrap();
            let key = format!("iggy-{batch}-{payload}");
            for (name, durability) in
                [("iggy-host", None), ("iggy", Some(Durability::EveryCommit)), ("iggy-intv", Some(INTERVAL))]
            {
                let target: Arc<dyn Target> = Arc::new(IggyTarget::start(&server.ferry_config(PASSWORD)).unwrap());
                let cursor: Arc<dyn CursorStore> = match durability {
                    Some(durability) => Arc::new(
                        StateDir::new(dir.path().join(name)).with_durability(durability).open(&key).expect("state"),
                    ),
                    None => Arc::new(MemoryCursor::default()),
                };
                let topic = format!("{key}-{name}");
                let m =
                    tokio.block_on(measure_into(&runtime, &component, target, cursor, &topic, batch, payload, batches));
                print_row(name, batch, payload, &m);
            }
            let m =
                tokio.block_on(native_producer(&server, &format!("native-{batch}-{payload}"), batch, payload, batches));
            print_row("native", batch, payload, &m);
        }
    }
    println!();
    println!("host RSS now {:.1} MiB, peak {:.1} MiB", rss_mib("VmRSS:"), rss_mib("VmHWM:"));
}

/// `[state] sync = "interval"` at its default interval.
const INTERVAL: Durability = Durability::Interval(std::time::Duration::from_secs(1));

const IGGY_SHAPES: &[(u64, usize)] = &[(100, 100), (1000, 100), (1000, 1000)];
const IGGY_BATCHES: u64 = 1000;

fn print_row(name: &str, batch: u64, payload: usize, m: &Measured) {
    let seconds = m.elapsed.as_secs_f64();
    println!(
        "{:<10} {:>6} {:>8} {:>8} {:>12.0} {:>9.1} {:>11.1}",
        name,
        batch,
        payload,
        m.batches,
        m.rate(),
        (m.messages as f64 * payload as f64) / seconds / 1e6,
        m.micros_per_batch(),
    );
}

/// The plain producer Ferry is measured against: one connection, each batch awaited.
async fn native_producer(server: &IggyServer, topic: &str, batch: u64, payload: usize, batches: u64) -> Measured {
    use iggy::prelude::{IggyMessage, MessageClient, Partitioning};
    let client = server.client().await;
    let (stream, topic_id) = IggyServer::create_topic(&client, "bench", topic).await;
    let text = "x".repeat(payload.saturating_sub(24));
    let mut seq = 0u64;
    let mut make = || -> Vec<IggyMessage> {
        (0..batch)
            .map(|_| {
                seq += 1;
                let body = format!("{{\"seq\":{seq},\"text\":\"{text}\"}}");
                IggyMessage::builder().id(fastrand::u128(1..)).payload(body.into_bytes().into()).build().unwrap()
            })
            .collect()
    };
    let mut first = make();
    client.send_messages(&stream, &topic_id, &Partitioning::balanced(), &mut first).await.unwrap();
    let start = Instant::now();
    for _ in 1..batches {
        let mut messages = make();
        client.send_messages(&stream, &topic_id, &Partitioning::balanced(), &mut messages).await.unwrap();
    }
    Measured { messages: (batches - 1) * batch, batches: batches - 1, elapsed: start.elapsed() }
}
