//! `cargo bench -p ferry-tests --bench mysql_sink`: the MySQL sink draining the local
//! log into a MariaDB table, next to a native program doing the same job in the same
//! run, against the same server.
//!
//! The server is Debian's `mariadbd` started by the benchmark
//! (`ferry_tests::mariadb_server`, `innodb_flush_log_at_trx_commit = 1`: every commit
//! on disk). For each batch size, with a topic of ~100-byte JSON records filled first,
//! each run writing a table of its own:
//!
//! * ferry: the `mysql-sink` component reading the topic through the host's sink loop
//!   (read a batch, lift it into the guest, which makes one multi-row `INSERT ... ON
//!   DUPLICATE KEY UPDATE` of the batch and runs it in a transaction through the host's
//!   `mysql` import), then the position stored in the state file;
//! * native: a loop reading the same batches with the same reader, running the same
//!   statement with the same eight values a row in a transaction with `mysql_async`
//!   (one connection, the statement prepared once by its cache as the host's is), then
//!   storing the position the same way.
//!
//! Each table is checked to hold every message. Three rounds each
//! (`FERRY_BENCH_ROUNDS`), taking turns to go first; the medians and the ratio
//! `ferry / native` are printed. `FERRY_BENCH_SCALE=0.2` writes a fifth.

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
use ferry_tests::components::MYSQL_SINK;
use ferry_tests::harness::quick_sink_settings;
use ferry_tests::mariadb_server::{MariaDbServer, PASSWORD};
use mysql_async::prelude::Queryable;
use mysql_async::{Params, TxOpts, Value};
use serde_json::json;

/// Messages a batch, messages in all (times the scale).
const SHAPES: &[(u32, u64)] = &[(100, 30_000), (1000, 60_000)];
const PAYLOAD: usize = 100;
const PASSWORD_ENV: &str = "FERRY_BENCH_MARIADB_PASSWORD";
/// The layout the sink makes with `create_table` (`connectors/mysql-sink`).
const LAYOUT: &str = "(id DECIMAL(39,0) NOT NULL PRIMARY KEY, stream VARCHAR(255) NOT NULL, \
    topic VARCHAR(255) NOT NULL, partition_id INT UNSIGNED NOT NULL, message_offset BIGINT UNSIGNED NOT NULL, \
    origin_timestamp BIGINT UNSIGNED NULL, headers JSON NOT NULL, payload LONGBLOB NOT NULL)";

fn main() {
    let scale = ferry_tests::bench::scale();
    let server = MariaDbServer::start();
    // SAFETY: set before any thread that reads the environment starts.
    unsafe { std::env::set_var(PASSWORD_ENV, PASSWORD) };
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let runtime = Arc::new(Runtime::new().expect("runtime"));
    println!(
        "the server: mariadbd (flush at every commit); each side {} times, taking turns",
        ferry_tests::bench::rounds()
    );
    bench::print_head("messages");
    for &(batch, messages) in SHAPES {
        let messages = ((messages as f64 * scale) as u64).max(u64::from(batch) * 20);
        let dir = tempfile::tempdir().unwrap();
        tokio.block_on(fill_local_log(&dir.path().join("log"), messages, PAYLOAD));
        let rows = |table: &str| server.sql(&format!("SELECT COUNT(*) FROM {table}")).trim().parse::<u64>().unwrap();
        let ferry = |run| {
            let table = format!("ferry_{batch}_{run}");
            let measured = tokio.block_on(ferry_sink(&runtime, dir.path(), &server, &table, batch, messages));
            assert_eq!(rows(&table), messages, "ferry wrote every message");
            measured
        };
        let native = |run| {
            let table = format!("native_{batch}_{run}");
            server.sql(&format!("CREATE TABLE {table} {LAYOUT}"));
            let measured = tokio.block_on(native_sink(dir.path(), &server, &table, batch, messages));
            assert_eq!(rows(&table), messages, "the native side wrote every message");
            measured
        };
        let (ferry, native) = compare(ferry, native);
        bench::print_row(batch, messages, &ferry, &native);
    }
}

async fn ferry_sink(
    runtime: &Arc<Runtime>,
    dir: &Path,
    server: &MariaDbServer,
    table: &str,
    batch: u32,
    messages: u64,
) -> Measured {
    let state = StateDir::new(dir.join("state")).open(table).expect("state");
    let input =
        Arc::new(LocalLogInput::new("bench", dir.join("log"), vec![("bench".into(), "t".into())], Arc::new(state)));
    let mut sandbox = Sandbox::default();
    sandbox.grants.mysql = vec!["bench".into()];
    sandbox.shared.mysql = server.granted("bench", PASSWORD_ENV);
    let connector = SinkConnector {
        key: table.into(),
        tenant: None,
        component: runtime.load::<SinkWorld>(Path::new(MYSQL_SINK)).expect("the sink loads").into(),
        plugin_config: json!({ "connection": "bench", "table": table, "create_table": true }).to_string(),
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

/// The same job natively: the same reader, statement, values and position store.
async fn native_sink(dir: &Path, server: &MariaDbServer, table: &str, batch: u32, messages: u64) -> Measured {
    let state = StateDir::new(dir.join("state")).open(table).expect("state");
    let reader = TopicReader::open(&dir.join("log"), "bench", "t").expect("the topic");
    let mut conn = mysql_async::Conn::from_url(server.url()).await.expect("the native side connects");
    let (mut at, mut batches, mut start) = (0u64, 0u64, None);
    while at < messages {
        let records = reader.read(at, u64::from(batch)).expect("reading");
        let rows = vec!["(?, ?, ?, ?, ?, ?, ?, ?)"; records.len()].join(", ");
        let sql = format!(
            "INSERT INTO `{table}` (id, stream, topic, partition_id, message_offset, origin_timestamp, headers, payload) \
             VALUES {rows} ON DUPLICATE KEY UPDATE id = id"
        );
        let mut params = Vec::with_capacity(records.len() * 8);
        for record in &records {
            let headers = record.headers.clone().unwrap_or_else(|| json!({}));
            params.extend([
                Value::Bytes(record.id.unwrap_or(0).to_string().into_bytes()),
                Value::Bytes(b"bench".to_vec()),
                Value::Bytes(b"t".to_vec()),
                Value::Int(0),
                Value::UInt(record.offset),
                record.origin_timestamp.map_or(Value::NULL, Value::UInt),
                Value::Bytes(headers.to_string().into_bytes()),
                Value::Bytes(record.payload.to_vec()),
            ]);
        }
        let mut transaction = conn.start_transaction(TxOpts::default()).await.expect("a transaction");
        transaction.exec_drop(sql, Params::Positional(params)).await.expect("the insert");
        transaction.commit().await.expect("the commit");
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
