//! `cargo bench -p ferry-tests --bench clickhouse_sink`: the ClickHouse sink draining
//! the local log into a table of a real ClickHouse server (Debian's, started here),
//! next to a native program doing the same job in the same run, against the same
//! server.
//!
//! For each batch size, with a topic of ~100-byte JSON records filled first:
//!
//! * ferry: the `clickhouse-sink` component (`json_each_row`, `id_column`) read the
//!   topic through the host's sink loop: read a batch, lift it into the guest, which
//!   splices each message's id into its row and sends one insert through
//!   `wasi:http`, then the position stored in the state file;
//! * native: a loop reading the same batches with the same reader, making the same
//!   body (the same id spliced into each row), sending the same insert with
//!   `reqwest` (one kept-alive connection, awaited), then storing the position the
//!   same way.
//!
//! Each side inserts into a table of its own (a `ReplacingMergeTree` ordered by the
//! id), emptied before each round; after the first round both tables hold every
//! record once, checked. Three rounds each (`FERRY_BENCH_ROUNDS`), taking turns to
//! go first; the medians and the ratio `ferry / native` are printed.
//! `FERRY_BENCH_SCALE=0.2` sends a fifth.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{LogMark, Receipt};
use ferry::engine::sink::SinkConnector;
use ferry::runtime::{Runtime, Sandbox, SinkWorld};
use ferry::store::local_log::{LocalLogInput, TopicReader};
use ferry::store::state::StateDir;
use ferry_tests::bench::{self, Measured, SinkEnd, compare, fill_local_log, time_sink};
use ferry_tests::clickhouse_server::{ChServer, PASSWORD, USER};
use ferry_tests::components::CLICKHOUSE_SINK;
use ferry_tests::harness::quick_sink_settings;
use serde_json::json;

/// Messages a batch, messages in all (times the scale).
const SHAPES: &[(u32, u64)] = &[(100, 20_000), (1000, 200_000)];
const PAYLOAD: usize = 100;

fn main() {
    let scale = ferry_tests::bench::scale();
    let server = ChServer::start();
    for table in ["ferry_rows", "native_rows"] {
        server.query(&format!(
            "CREATE TABLE {table} (ferry_id String, seq UInt64, text String) ENGINE = ReplacingMergeTree() ORDER BY \
             ferry_id"
        ));
    }
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!(
        "ClickHouse {} at {}; each side {} times, taking turns",
        server.query("SELECT version()").trim(),
        server.address(),
        ferry_tests::bench::rounds()
    );
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        tokio.block_on(fill_local_log(&dir.path().join("log"), messages, PAYLOAD));
        let ferry = |run| {
            server.query("TRUNCATE TABLE ferry_rows");
            tokio.block_on(ferry_sink(&runtime, dir.path(), &server, batch, messages, run))
        };
        let native = |run| {
            server.query("TRUNCATE TABLE native_rows");
            native_sink(dir.path(), &server, batch, messages, run)
        };
        let (ferry, native) = compare(ferry, native);
        for table in ["ferry_rows", "native_rows"] {
            let rows = server.query(&format!("SELECT count(), uniqExact(seq) FROM {table} FINAL"));
            assert_eq!(rows.trim(), format!("{messages}\t{messages}"), "{table} holds every record once");
        }
        bench::print_row(batch, messages, &ferry, &native);
    }
}

async fn ferry_sink(
    runtime: &Arc<Runtime>,
    dir: &Path,
    server: &ChServer,
    batch: u32,
    messages: u64,
    run: u32,
) -> Measured {
    let key = format!("ferry-{batch}-{run}");
    let state = StateDir::new(dir.join("state")).open(&key).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    let mut sandbox = Sandbox::default();
    sandbox.grants.network = vec![server.address()];
    let plugin_config = json!({
        "url": format!("http://{}", server.address()),
        "table": "ferry_rows",
        "username": USER,
        "password": PASSWORD,
        "id_column": "ferry_id",
    });
    let connector = SinkConnector {
        key: key.as_str().into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(CLICKHOUSE_SINK)).expect("the sink loads").into(),
        plugin_config: plugin_config.to_string(),
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

/// The same job natively: the same reader, rows, insert and position store.
fn native_sink(dir: &Path, server: &ChServer, batch: u32, messages: u64, run: u32) -> Measured {
    let key = format!("native-{batch}-{run}");
    let state = StateDir::new(dir.join("state")).open(&key).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::builder().build().unwrap();
    let url = format!(
        "http://{}/?database=default&query=INSERT%20INTO%20default.native_rows%20FORMAT%20JSONEachRow",
        server.address()
    );
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        let mut body = Vec::new();
        for record in &records {
            let payload = record.payload.trim_ascii();
            let rest = payload[1..].trim_ascii_start();
            let id = serde_json::Value::String(format!("{:032x}", record.id.unwrap_or(0)));
            body.extend_from_slice(format!("{{\"ferry_id\":{id}").as_bytes());
            if rest != b"}" {
                body.push(b',');
            }
            body.extend_from_slice(rest);
            body.push(b'\n');
        }
        let request = client
            .post(&url)
            .header("X-ClickHouse-User", USER)
            .header("X-ClickHouse-Key", PASSWORD)
            .timeout(Duration::from_secs(30))
            .body(body);
        tokio.block_on(async {
            let response = request.send().await.expect("an answer");
            let status = response.status();
            let text = response.text().await.expect("the answer's body");
            assert!(status.is_success(), "{status}: {text}");
        });
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
