//! `cargo bench -p ferry-tests --bench influxdb_source`: the InfluxDB source reading
//! a measurement into the local log, next to a native program doing the same job in
//! the same run, against the same server (Debian's `influxd`, started here).
//!
//! The measurement holds two series (`host=a`, `host=b`) with a point each at every
//! timestamp (~100 bytes a row: `seq` and `text`), so every page ends amid a tie.
//!
//! * ferry: the `influxdb-source` component run by the host's source loop: per poll
//!   the guest fills in the query (`time >= $cursor ... LIMIT $limit OFFSET
//!   $offset`), sends it through `wasi:http`, parses the answer, makes a JSON message
//!   of each row and returns the batch with its cursor; the host derives the ids,
//!   appends the batch to the local log with the staged cursor in the same
//!   transaction and commits the cursor.
//! * native: a loop doing the same per batch with `reqwest` (one kept-alive
//!   connection) and serde_json: the same query, the same messages and cursor, the
//!   ids derived as ferry does, and the same two calls into ferry's `LocalLog` and
//!   `LoggedCursor` the source loop makes.
//!
//! Checked after each shape: both logs hold every row once, the same payloads in the
//! same order. Three rounds (`FERRY_BENCH_ROUNDS`), taking turns to go first; the
//! medians and the ratio `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` reads
//! a fifth.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::config::{Grants, StreamConfig};
use ferry::contract::{Durability, Message};
use ferry::engine::batch::{self as ferry_batch, IdSource};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, StagedCursor, Target};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::runtime::{Runtime, Sandbox, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry_tests::bench::{self, Measured, compare, time_source};
use ferry_tests::components::INFLUXDB_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::created_stream;
use ferry_tests::influxdb_server::InfluxServer;
use serde_json::{Map, Value, json};

/// Rows a batch, and rows in all (times the scale).
const SHAPES: &[(u64, u64)] = &[(500, 100_000), (5000, 200_000)];
const KEY: &str = "influx";
const STREAM: &str = "bench";
const QUERY: &str = "SELECT * FROM points WHERE time >= $cursor ORDER BY time ASC LIMIT $limit OFFSET $offset";
/// `[state] sync = "interval"`, as in the other source benchmarks.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));

fn main() {
    let scale = bench::scale();
    let server = InfluxServer::start();
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    let component = runtime.load_source(Path::new(INFLUXDB_SOURCE)).expect("the source loads");
    let dir = tempfile::tempdir().unwrap();
    println!(
        "the server: influxd on {}; each side {} times per shape, taking turns",
        server.address(),
        bench::rounds()
    );
    bench::print_head("rows");
    for &(batch, rows) in SHAPES {
        let rows = ((rows as f64 * scale) as u64).max(batch * 20) / 2 * 2;
        let db = format!("rows_{rows}");
        fill(&server, &db, rows);
        let shape = Shape { batch, rows };
        let ferry = |run| ferry_source(&tokio, &runtime, &component, &server, &db, dir.path(), shape, run);
        let native = |run| {
            let (log, cursor) = logged(dir.path(), &name("native", shape, run));
            let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &name("native", shape, run))].into();
            let url = server.url("");
            let db = db.clone();
            let elapsed = tokio.block_on(async {
                tokio::spawn(native_source(url, db, log, streams, cursor, shape)).await.expect("the native source")
            });
            Measured::after_first(shape.rows, shape.batch, elapsed)
        };
        let (ferry, native) = compare(ferry, native);
        check_same_logs(dir.path(), shape);
        bench::print_row(batch, rows, &ferry, &native);
    }
}

#[derive(Clone, Copy)]
struct Shape {
    batch: u64,
    rows: u64,
}

/// `rows` points in `points` of `db`: two series, a point each every microsecond.
fn fill(server: &InfluxServer, db: &str, rows: u64) {
    server.create_database(db);
    let text = "x".repeat(60);
    let mut lines = String::new();
    for seq in 0..rows {
        let host = if seq % 2 == 0 { "a" } else { "b" };
        lines
            .push_str(&format!("points,host={host} seq={seq}i,text=\"{text}\" {}\n", 1_000_000_000 + (seq / 2) * 1000));
        if lines.len() > 1_000_000 || seq + 1 == rows {
            server.write(db, &lines);
            lines.clear();
        }
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
    server: &InfluxServer,
    db: &str,
    dir: &Path,
    shape: Shape,
    run: u32,
) -> Measured {
    let name = name("ferry", shape, run);
    let (log, cursor) = logged(dir, &name);
    let grants: Grants = toml::from_str(&format!("network = [{:?}]", server.address())).expect("the grant");
    let connector = SourceConnector {
        key: KEY.into(),
        tenant: None,
        component: component.clone().into(),
        plugin_config: json!({ "url": server.url(""), "db": db, "query": QUERY, "batch_size": shape.batch })
            .to_string(),
        streams: vec![created_stream(STREAM, &name)].into(),
        settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
        sandbox: Sandbox { grants, ..Default::default() },
        target: log,
        transforms: None,
        cursor: Arc::new(cursor),
    };
    let elapsed = tokio.block_on(time_source(runtime, connector));
    Measured::after_first(shape.rows, shape.batch, elapsed)
}

/// The first rounds' logs hold every row once, the same payloads in the same order.
fn check_same_logs(dir: &Path, shape: Shape) {
    let names = (name("ferry", shape, 0), name("native", shape, 0));
    bench::check_same_logs(dir, STREAM, (&names.0, &names.1), shape.rows, false);
}

/// `text` percent-encoded for a URL's query.
fn escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The native source: per batch, query, make the messages and the cursor, derive
/// the ids, deliver, commit. The time from the first batch's commit to the last's.
async fn native_source(
    url: String,
    db: String,
    log: Arc<LocalLog>,
    streams: Arc<[StreamConfig]>,
    cursor: LoggedCursor,
    shape: Shape,
) -> Duration {
    let client = reqwest::Client::builder().build().unwrap();
    let connector: Arc<str> = KEY.into();
    let (mut time, mut skip) = (0i64, 0u64);
    let (mut committed, mut generation, mut start) = (None::<Vec<u8>>, 0u64, None);
    loop {
        let query = QUERY
            .replace("$cursor", &time.to_string())
            .replace("$limit", &shape.batch.to_string())
            .replace("$offset", &skip.to_string());
        let answer = client
            .get(format!("{url}/query?db={}&epoch=ns&q={}", escape(&db), escape(&query)))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status().as_u16(), 200);
        let body: Value = serde_json::from_slice(&answer.bytes().await.expect("the body")).expect("JSON");
        let mut messages = Vec::new();
        let mut times = Vec::new();
        for series in body["results"][0]["series"].as_array().into_iter().flatten() {
            let measurement = series["name"].as_str().unwrap();
            let columns: Vec<&str> =
                series["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
            for values in series["values"].as_array().unwrap() {
                let mut row: Map<String, Value> =
                    columns.iter().zip(values.as_array().unwrap()).map(|(c, v)| (c.to_string(), v.clone())).collect();
                let at = row["time"].as_i64().unwrap();
                row.insert("measurement".into(), measurement.into());
                times.push(at);
                messages.push(Message {
                    id: None,
                    headers: Vec::new(),
                    payload: serde_json::to_vec(&row).unwrap().into(),
                    origin_timestamp: Some((at / 1000) as u64),
                });
            }
        }
        let Some(&last) = times.last() else { break };
        let at_last = times.iter().rev().take_while(|t| **t == last).count() as u64;
        skip = if last == time { skip + at_last } else { at_last };
        time = last;
        let state = serde_json::to_vec(&json!({ "time": time, "skip": skip })).unwrap();
        ferry_batch::assign_ids(
            &mut messages,
            IdSource::Cursor { connector: KEY, committed_before: committed.as_deref() },
        );
        let delivery = Delivery {
            connector: connector.clone(),
            streams: streams.clone(),
            messages: Arc::new(messages),
            cursor: Some(StagedCursor { lineage: cursor.lineage(), generation: generation + 1, state: state.clone() }),
        };
        let receipt = log.deliver(delivery).await.expect("appending to the log");
        generation = cursor.commit(state.clone(), receipt).await.expect("committing the cursor").generation;
        committed = Some(state);
        start.get_or_insert_with(Instant::now);
    }
    start.expect("at least one batch").elapsed()
}
