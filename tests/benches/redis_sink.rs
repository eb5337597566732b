//! `cargo bench -p ferry-tests --bench redis_sink`: the Redis sink draining the local
//! log into a Redis stream, next to a native program doing the same job in the same
//! run, against the same server.
//!
//! The server is Debian's `redis-server` started by the benchmark
//! (`ferry_tests::redis_server`, its append-only file fsynced at every write). For
//! each batch size, with a topic of ~100-byte JSON records filled first, each run
//! writing into a stream of its own:
//!
//! * ferry: the `redis-sink` component reading the topic through the host's sink
//!   loop (read a batch, lift it into the guest, which makes each message the script
//!   that adds its entry once and sends the batch as one pipeline through the host's
//!   `redis` import), then the position stored in the state file;
//! * native: a loop reading the same batches with the same reader, sending the same
//!   scripts with the same arguments as one pipeline with the `redis` crate (one
//!   connection, each pipeline awaited), then storing the position the same way.
//!
//! Three rounds each (`FERRY_BENCH_ROUNDS`), taking turns to go first; the medians and
//! the ratio `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` writes a fifth.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::capabilities::redis::RedisServers;
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{LogMark, Receipt};
use ferry::engine::sink::SinkConnector;
use ferry::runtime::{Runtime, Sandbox, SinkWorld};
use ferry::store::local_log::{LocalLogInput, TopicReader};
use ferry::store::state::StateDir;
use ferry_tests::bench::{self, Measured, SinkEnd, compare, fill_local_log, time_sink};
use ferry_tests::components::REDIS_SINK;
use ferry_tests::harness::quick_sink_settings;
use ferry_tests::redis_server::RedisServer;
use serde_json::json;

/// Messages a batch, messages in all (times the scale).
const SHAPES: &[(u32, u64)] = &[(100, 50_000), (1000, 100_000)];
const PAYLOAD: usize = 100;

/// The sink's script, as `connectors/redis-sink/src/commands.rs` sends it.
const ADD_ONCE: &str = "if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then \
     if ARGV[2] == '' then return redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3)) end \
     return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3)) \
     end return false";

fn main() {
    let scale = ferry_tests::bench::scale();
    let server = RedisServer::start();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!(
        "the server: redis-server on port {} (appendfsync always); each side {} times, taking turns",
        server.port(),
        ferry_tests::bench::rounds()
    );
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        tokio.block_on(fill_local_log(&dir.path().join("log"), messages, PAYLOAD));
        let ferry = |run| {
            let key = format!("ferry-{batch}-{run}");
            let measured = tokio.block_on(ferry_sink(&runtime, dir.path(), &server, &key, batch, messages));
            assert_eq!(tokio.block_on(length(&server, &key)), messages, "ferry added every entry");
            measured
        };
        let native = |run| {
            let key = format!("native-{batch}-{run}");
            let measured = tokio.block_on(native_sink(dir.path(), &server, &key, batch, messages));
            assert_eq!(tokio.block_on(length(&server, &key)), messages, "the native side added every entry");
            measured
        };
        let (ferry, native) = compare(ferry, native);
        bench::print_row(batch, messages, &ferry, &native);
    }
}

async fn length(server: &RedisServer, key: &str) -> u64 {
    redis::cmd("XLEN").arg(key).query_async(&mut server.client().await).await.expect("XLEN")
}

async fn ferry_sink(
    runtime: &Arc<Runtime>,
    dir: &Path,
    server: &RedisServer,
    key: &str,
    batch: u32,
    messages: u64,
) -> Measured {
    let state = StateDir::new(dir.join("state")).open(key).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    let mut sandbox = Sandbox::default();
    sandbox.grants.redis = vec!["bench".into()];
    let section = toml::from_str(&server.ferry_section("x", "UNUSED").replace("[redis.x]\n", "")).unwrap();
    let servers = std::collections::BTreeMap::from([("bench".to_string(), section)]);
    sandbox.shared.redis = RedisServers::granted(&sandbox.grants.redis, &servers).unwrap();
    let connector = SinkConnector {
        key: key.into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(REDIS_SINK)).expect("the sink loads").into(),
        plugin_config: json!({ "connection": "bench", "key": key }).to_string(),
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

/// The same job natively: the same reader, scripts, pipelines and position store.
async fn native_sink(dir: &Path, server: &RedisServer, key: &str, batch: u32, messages: u64) -> Measured {
    let state = StateDir::new(dir.join("state")).open(key).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let mut connection = server.client().await;
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        let mut pipeline = redis::pipe();
        for record in &records {
            let id = record.id.unwrap_or(0).to_string();
            pipeline
                .cmd("EVAL")
                .arg(ADD_ONCE)
                .arg(2)
                .arg(key)
                .arg(format!("{key}:ferry-written:{id}"))
                .arg("86400000")
                .arg("")
                .arg("id")
                .arg(&id)
                .arg("stream")
                .arg("bench")
                .arg("topic")
                .arg("t")
                .arg("partition")
                .arg("0")
                .arg("offset")
                .arg(record.offset.to_string())
                .arg("payload")
                .arg(&record.payload[..]);
        }
        let replies: Vec<redis::Value> = pipeline.query_async(&mut connection).await.expect("the pipeline");
        assert!(replies.iter().all(|r| matches!(r, redis::Value::BulkString(_))), "every entry added");
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
