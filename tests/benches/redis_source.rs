//! `cargo bench -p ferry-tests --bench redis_source`: the Redis source reading a
//! stream through a consumer group into the local log, next to a native program doing
//! the same job in the same run, against the same server (Debian's `redis-server`,
//! started here, its append-only file fsynced at every write).
//!
//! The stream holds entries of one ~100-byte `payload` field. Each run reads it from
//! the start through a consumer group of its own:
//!
//! * ferry: the `redis-source` component run by the host's source loop: per poll the
//!   guest sends `XREADGROUP ... COUNT batch` through the host's `redis` import, makes
//!   a message of each entry (its id from the entry id, two headers, the origin
//!   timestamp) and returns the batch with its cursor; the host appends it to the
//!   local log with the staged cursor in one transaction and commits the cursor, then
//!   the guest acknowledges the entries (`XACK`).
//! * native: a loop doing the same per batch with the `redis` crate (one connection):
//!   the same read, the same messages and cursor, the same two calls into ferry's
//!   `LocalLog` and `LoggedCursor` the source loop makes, and the same `XACK`.
//!
//! Checked after each shape: both logs hold every entry once, the same payloads in the
//! same order. Three rounds (`FERRY_BENCH_ROUNDS`), taking turns to go first; the
//! medians and the ratio `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` reads a
//! fifth.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::capabilities::redis::RedisServers;
use ferry::config::StreamConfig;
use ferry::contract::{Durability, HeaderValue, Message, Uint128};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, StagedCursor, Target};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::runtime::{Runtime, Sandbox, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry_tests::bench::{self, Measured, compare, time_source};
use ferry_tests::components::REDIS_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::created_stream;
use ferry_tests::redis_server::RedisServer;
use redis::aio::MultiplexedConnection;
use serde_json::json;

/// Entries a batch, and entries in all (times the scale).
const SHAPES: &[(u64, u64)] = &[(100, 50_000), (1000, 100_000)];
const KEY: &str = "redis";
const STREAM: &str = "bench";
/// `[state] sync = "interval"`, as in the other source benchmarks.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));

fn main() {
    let scale = bench::scale();
    let server = RedisServer::start();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    let component = runtime.load_source(Path::new(REDIS_SOURCE)).expect("the source loads");
    let dir = tempfile::tempdir().unwrap();
    println!(
        "the server: redis-server on port {}; each side {} times per shape, taking turns",
        server.port(),
        bench::rounds()
    );
    bench::print_head("entries");
    for &(batch, entries) in SHAPES {
        let entries = ((entries as f64 * scale) as u64).max(batch * 20);
        let key = format!("entries-{batch}");
        tokio.block_on(fill(&server, &key, entries));
        let shape = Shape { batch, entries };
        let ferry = |run| ferry_source(&tokio, &runtime, &component, &server, &key, dir.path(), shape, run);
        let native = |run| {
            let name = name("native", shape, run);
            let (log, cursor) = logged(dir.path(), &name);
            let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &name)].into();
            let elapsed = tokio.block_on(async {
                let connection = server.client().await;
                let work = native_source(connection, key.clone(), name, log, streams, cursor, shape);
                tokio::spawn(work).await.expect("the native source")
            });
            Measured::after_first(shape.entries, shape.batch, elapsed)
        };
        let (ferry, native) = compare(ferry, native);
        check_same_logs(dir.path(), shape);
        bench::print_row(batch, entries, &ferry, &native);
    }
}

#[derive(Clone, Copy)]
struct Shape {
    batch: u64,
    entries: u64,
}

/// `entries` entries in the stream `key`, each a ~100-byte JSON `payload`.
async fn fill(server: &RedisServer, key: &str, entries: u64) {
    let mut connection = server.client().await;
    let text = "x".repeat(70);
    for chunk in (0..entries).collect::<Vec<_>>().chunks(5000) {
        let mut pipe = redis::pipe();
        for seq in chunk {
            let payload = json!({ "seq": seq, "text": text }).to_string();
            pipe.cmd("XADD").arg(key).arg("*").arg("payload").arg(payload).ignore();
        }
        let _: () = pipe.query_async(&mut connection).await.expect("XADD");
    }
}

fn name(side: &str, shape: Shape, run: u32) -> String {
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
    server: &RedisServer,
    key: &str,
    dir: &Path,
    shape: Shape,
    run: u32,
) -> Measured {
    let name = name("ferry", shape, run);
    let (log, cursor) = logged(dir, &name);
    let mut sandbox = Sandbox::default();
    sandbox.grants.redis = vec!["bench".into()];
    let section = toml::from_str(&server.ferry_section("x", "UNUSED").replace("[redis.x]\n", "")).unwrap();
    let servers = BTreeMap::from([("bench".to_string(), section)]);
    sandbox.shared.redis = RedisServers::granted(&sandbox.grants.redis, &servers).unwrap();
    let connector = SourceConnector {
        key: KEY.into(),
        tenant: None,
        component: component.clone().into(),
        plugin_config: json!({ "connection": "bench", "stream": key, "group": name, "batch_size": shape.batch })
            .to_string(),
        streams: vec![created_stream(STREAM, &name)].into(),
        settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
        sandbox,
        target: log,
        transforms: None,
        cursor: Arc::new(cursor),
    };
    let elapsed = tokio.block_on(time_source(runtime, connector));
    Measured::after_first(shape.entries, shape.batch, elapsed)
}

/// The first rounds' logs hold every entry once, the same payloads in the same order.
fn check_same_logs(dir: &Path, shape: Shape) {
    let names = (name("ferry", shape, 0), name("native", shape, 0));
    bench::check_same_logs(dir, STREAM, (&names.0, &names.1), shape.entries, true);
}

/// The same job natively, through the consumer group `group`.
async fn native_source(
    mut connection: MultiplexedConnection,
    key: String,
    group: String,
    log: Arc<LocalLog>,
    streams: Arc<[StreamConfig]>,
    cursor: LoggedCursor,
    shape: Shape,
) -> Duration {
    let _: redis::Value =
        redis::cmd("XGROUP").arg("CREATE").arg(&key).arg(&group).arg("0").query_async(&mut connection).await.unwrap();
    let connector: Arc<str> = KEY.into();
    let (mut generation, mut start) = (0u64, None);
    loop {
        let read: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&group)
            .arg("ferry")
            .arg("COUNT")
            .arg(shape.batch)
            .arg("STREAMS")
            .arg(&key)
            .arg(">")
            .query_async(&mut connection)
            .await
            .expect("XREADGROUP");
        let entries = entries_of(read);
        let Some((last, _)) = entries.last() else { break };
        let last = last.clone();
        let mut ids = Vec::with_capacity(entries.len());
        let messages: Vec<Message> = entries
            .into_iter()
            .map(|(id, payload)| {
                let (ms, seq) = id.split_once('-').unwrap();
                let (ms, seq): (u64, u64) = (ms.parse().unwrap(), seq.parse().unwrap());
                let message = Message {
                    id: Some(Uint128::from((u128::from(ms) << 64) | u128::from(seq))),
                    headers: vec![
                        ferry::contract::Header { key: "redis_stream".into(), value: HeaderValue::String(key.clone()) },
                        ferry::contract::Header { key: "redis_id".into(), value: HeaderValue::String(id.clone()) },
                    ],
                    payload: payload.into(),
                    origin_timestamp: Some(ms * 1000),
                };
                ids.push(id);
                message
            })
            .collect();
        let state = serde_json::to_vec(&json!({ "last": last })).unwrap();
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
        let _: u64 =
            redis::cmd("XACK").arg(&key).arg(&group).arg(&ids).query_async(&mut connection).await.expect("XACK");
    }
    start.expect("at least one batch").elapsed()
}

/// The `(id, payload)` of each entry of an `XREADGROUP` reply.
fn entries_of(read: redis::Value) -> Vec<(String, Vec<u8>)> {
    let redis::Value::Array(streams) = read else { return Vec::new() };
    let Some(redis::Value::Array(stream)) = streams.into_iter().next() else { return Vec::new() };
    let Some(redis::Value::Array(entries)) = stream.into_iter().nth(1) else { return Vec::new() };
    entries
        .into_iter()
        .map(|entry| {
            let redis::Value::Array(mut parts) = entry else { panic!("an entry") };
            let redis::Value::Array(fields) = parts.pop().unwrap() else { panic!("its fields") };
            let redis::Value::BulkString(id) = parts.pop().unwrap() else { panic!("its id") };
            let redis::Value::BulkString(payload) = fields.into_iter().nth(1).unwrap() else { panic!("its payload") };
            (String::from_utf8(id).unwrap(), payload)
        })
        .collect()
}
