//! `cargo bench -p ferry-tests --bench mysql_source`: the MySQL source reading a table
//! into the local log, next to a native program doing the same job in the same run,
//! against the same server (Debian's `mariadbd`, started here).
//!
//! The table holds rows of an id, a short name and a ~90-byte text (~130 bytes of JSON
//! a row). Each run reads it from the start:
//!
//! * ferry: the `mysql-source` component run by the host's source loop: per poll the
//!   guest runs `SELECT * ... WHERE id > ? ORDER BY id LIMIT batch` through the host's
//!   `mysql` import, makes a JSON message of each row (its id from the table and the
//!   key, two headers) and returns the batch with its cursor; the host appends it to
//!   the local log with the staged cursor in one transaction and commits the cursor.
//! * native: a loop doing the same per batch with `mysql_async` (one connection, the
//!   statement prepared once by its cache as the host's is): the same query, the same
//!   messages and cursor, and the same two calls into ferry's `LocalLog` and
//!   `LoggedCursor` the source loop makes.
//!
//! Checked after each shape: both logs hold every row once, the same payloads and ids
//! in the same order. Three rounds (`FERRY_BENCH_ROUNDS`), taking turns to go first;
//! the medians and the ratio `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2`
//! reads a fifth.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::config::StreamConfig;
use ferry::contract::{Durability, Header, HeaderValue, Message, Uint128};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, StagedCursor, Target};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::runtime::{Runtime, Sandbox, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry_tests::bench::{self, Measured, compare, time_source};
use ferry_tests::components::MYSQL_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::created_stream;
use ferry_tests::mariadb_server::{MariaDbServer, PASSWORD};
use mysql_async::prelude::Queryable;
use mysql_async::{Params, Row, Value};
use serde_json::json;

/// Rows a batch, and rows in all (times the scale).
const SHAPES: &[(u64, u64)] = &[(100, 50_000), (1000, 200_000)];
const KEY: &str = "mysql";
const STREAM: &str = "bench";
const TABLE: &str = "bench_rows";
const PASSWORD_ENV: &str = "FERRY_BENCH_MARIADB_PASSWORD";
/// `[state] sync = "interval"`, as in the other source benchmarks.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));

fn main() {
    let scale = bench::scale();
    let server = MariaDbServer::start();
    // SAFETY: set before any thread that reads the environment starts.
    unsafe { std::env::set_var(PASSWORD_ENV, PASSWORD) };
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    let component = runtime.load_source(Path::new(MYSQL_SOURCE)).expect("the source loads");
    let dir = tempfile::tempdir().unwrap();
    println!(
        "the server: mariadbd on port {}; each side {} times per shape, taking turns",
        server.port(),
        bench::rounds()
    );
    bench::print_head("rows");
    for &(batch, rows) in SHAPES {
        let rows = ((rows as f64 * scale) as u64).max(batch * 20);
        server.sql(&format!(
            "DROP TABLE IF EXISTS {TABLE}; \
             CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, name VARCHAR(20) NOT NULL, body VARCHAR(100) NOT NULL); \
             INSERT INTO {TABLE} SELECT seq, CONCAT('name ', seq), REPEAT('x', 90) FROM seq_1_to_{rows}"
        ));
        let shape = Shape { batch, rows };
        let ferry = |run| ferry_source(&tokio, &runtime, &component, &server, dir.path(), shape, run);
        let native = |run| {
            let name = name("native", shape, run);
            let (log, cursor) = logged(dir.path(), &name);
            let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &name)].into();
            let elapsed = tokio.block_on(async {
                let conn = mysql_async::Conn::from_url(server.url()).await.expect("the native side connects");
                tokio::spawn(native_source(conn, log, streams, cursor, shape)).await.expect("the native source")
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

fn name(side: &str, shape: Shape, run: u32) -> String {
    format!("{side}-{}-{run}", shape.batch)
}

fn logged(dir: &Path, name: &str) -> (Arc<LocalLog>, LoggedCursor) {
    bench::logged_run(dir, name, KEY, STREAM, INTERVAL)
}

fn ferry_source(
    tokio: &tokio::runtime::Runtime,
    runtime: &Arc<Runtime>,
    component: &Arc<SourceComponent>,
    server: &MariaDbServer,
    dir: &Path,
    shape: Shape,
    run: u32,
) -> Measured {
    let name = name("ferry", shape, run);
    let (log, cursor) = logged(dir, &name);
    let mut sandbox = Sandbox::default();
    sandbox.grants.mysql = vec!["bench".into()];
    sandbox.shared.mysql = server.granted("bench", PASSWORD_ENV);
    let connector = SourceConnector {
        key: KEY.into(),
        tenant: None,
        component: component.clone().into(),
        plugin_config: json!({ "connection": "bench", "table": TABLE, "batch_size": shape.batch }).to_string(),
        streams: vec![created_stream(STREAM, &name)].into(),
        settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
        sandbox,
        target: log,
        transforms: None,
        cursor: Arc::new(cursor),
    };
    let elapsed = tokio.block_on(time_source(runtime, connector));
    Measured::after_first(shape.rows, shape.batch, elapsed)
}

/// The first rounds' logs hold every row once, the same payloads and ids in the same order.
fn check_same_logs(dir: &Path, shape: Shape) {
    let names = (name("ferry", shape, 0), name("native", shape, 0));
    bench::check_same_logs(dir, STREAM, (&names.0, &names.1), shape.rows, true);
}

/// The same job natively.
async fn native_source(
    mut conn: mysql_async::Conn,
    log: Arc<LocalLog>,
    streams: Arc<[StreamConfig]>,
    cursor: LoggedCursor,
    shape: Shape,
) -> Duration {
    let first = format!("SELECT * FROM `{TABLE}` WHERE `id` IS NOT NULL ORDER BY `id` LIMIT {}", shape.batch);
    let next = format!("SELECT * FROM `{TABLE}` WHERE `id` > ? ORDER BY `id` LIMIT {}", shape.batch);
    let connector: Arc<str> = KEY.into();
    let (mut after, mut generation, mut start) = (None::<i64>, 0u64, None);
    loop {
        let rows: Vec<Row> = match after {
            None => conn.exec(&first, Params::Empty).await,
            Some(id) => conn.exec(&next, Params::Positional(vec![Value::Int(id)])).await,
        }
        .expect("reading the rows");
        if rows.is_empty() {
            break;
        }
        let mut messages = Vec::with_capacity(rows.len());
        for row in rows {
            let columns: Vec<String> = row.columns_ref().iter().map(|c| c.name_str().into_owned()).collect();
            let values = row.unwrap();
            let Value::Int(id) = values[0] else { panic!("an integer id") };
            let mut payload = Vec::with_capacity(160);
            payload.push(b'{');
            for (index, (column, value)) in columns.iter().zip(&values).enumerate() {
                if index > 0 {
                    payload.push(b',');
                }
                serde_json::to_writer(&mut payload, column).unwrap();
                payload.push(b':');
                match value {
                    Value::Int(n) => serde_json::to_writer(&mut payload, n).unwrap(),
                    Value::Bytes(text) => {
                        serde_json::to_writer(&mut payload, std::str::from_utf8(text).unwrap()).unwrap()
                    }
                    other => panic!("a column of {other:?}"),
                }
            }
            payload.push(b'}');
            messages.push(Message {
                id: Some(Uint128::from(message_id(id))),
                headers: vec![
                    Header { key: "table".into(), value: HeaderValue::String(TABLE.into()) },
                    Header { key: "primary_key".into(), value: HeaderValue::Int64(id) },
                ],
                payload: payload.into(),
                origin_timestamp: None,
            });
            after = Some(id);
        }
        let state = serde_json::to_vec(&json!({ "after": { "tracking": { "int": after } } })).unwrap();
        let delivery = Delivery {
            connector: connector.clone(),
            streams: streams.clone(),
            messages: Arc::new(messages),
            cursor: Some(StagedCursor { lineage: cursor.lineage(), generation: generation + 1, state: state.clone() }),
        };
        let receipt = log.deliver(delivery).await.expect("appending to the log");
        generation = cursor.commit(state, receipt).await.expect("committing the cursor").generation;
        start.get_or_insert_with(Instant::now);
    }
    start.expect("at least one batch").elapsed()
}

/// The id the connector gives the row of [`TABLE`] whose key is `id`
/// (`ferry_guest::row::stable_id`).
fn message_id(id: i64) -> u128 {
    let mut input = Vec::with_capacity(TABLE.len() + 17);
    input.extend_from_slice(&(TABLE.len() as u64).to_le_bytes());
    input.extend_from_slice(TABLE.as_bytes());
    input.push(b'i');
    input.extend_from_slice(&id.to_le_bytes());
    xxhash_rust::xxh3::xxh3_128(&input).max(1)
}
