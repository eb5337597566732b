//! `cargo bench -p ferry-tests --bench postgres`: rows/s of the PostgreSQL source and
//! sink, next to a native program (tokio-postgres, and the `iggy` client) doing the
//! same work in the same run.
//!
//! A PostgreSQL server of the benchmark's own ([`PgServer`]) holds a table of
//! 1,000,000 small rows, `bench_rows (id int8 PRIMARY KEY, body text, amount float8,
//! created timestamptz, flag bool)`, vacuumed before anything is timed. Then:
//!
//! * `pg→log`: rows into the local log, at `batch_size` 1000 and 100.
//!   - ferry: the `postgres-source` connector (granted the server as `db`, no
//!     `after_ack`) in a host of its own, into a local log topic, its cursor
//!     committed to its state file after each delivered batch (two durable commits
//!     per batch, as `ferry run` makes them);
//!   - native: one tokio-postgres connection running the connector's own two
//!     statements, prepared once as the host's connection caches them (`SELECT *
//!     FROM "bench_rows" WHERE "id" IS NOT NULL ORDER BY "id" LIMIT n`, then `...
//!     WHERE "id" > $1 ...` from the last row's id); each row read by column into a
//!     struct and written as the same JSON object
//!     (`serde_json`; the timestamp as RFC 3339 by `humantime`), with the same id (the
//!     xxh3 of the table and the key, as the connector derives it) and the same
//!     headers (`table`, `primary_key`), appended with the same `LocalLog` in one
//!     transaction, then the same cursor (`{"after":{"tracking":{"int":N}}}`) committed
//!     to a state file of the same `StateDir`.
//!   - checked: the two logs of the first round hold the same records (id, headers,
//!     payload), and their cursors are the same bytes.
//! * `log→pg`: messages from a local log topic (the first ferry round's rows) into a
//!   table of the sink's default layout (`id` text primary key, `payload` jsonb, ...),
//!   at `batch_length` 1000 and 100, into a new table each round, after a
//!   `CHECKPOINT`.
//!   - ferry: the `postgres-sink` connector reading the topic through the host's
//!     local-log input: each batch one transaction of one `INSERT ... ON CONFLICT
//!     ("id") DO NOTHING` per message, committed, then the position stored in its
//!     state file;
//!   - native: the same reads (`TopicReader`), the same transaction of the same
//!     prepared INSERT per message (the same nine values: the id in decimal, the
//!     payload as jsonb after checking that it parses, the headers as typed JSON, ...),
//!     committed, then the position stored the same way.
//!   - checked: the two tables of the first round hold the same rows.
//! * With `FERRY_TEST_IGGY_SERVER` set (see `ferry_tests::iggy_server`), the same
//!   through a live Iggy server of the benchmark's own:
//!   - `pg→iggy`: ferry's source into a one-partition topic vs a native loop sending
//!     the same messages (same ids, headers, payloads) with the `iggy` client, one
//!     send awaited per batch, then committing the same cursor to a state file;
//!   - `iggy→pg`: ferry's sink reading the first round's topic in a consumer group
//!     vs a native `iggy` consumer in a group of its own (auto-commit off): poll, the
//!     same transaction, store the group's offset, poll again.
//!   - checked: the same ids, headers and payloads in both topics, and the same rows.
//!
//!   Without it these rows are skipped, and a line says so.
//!
//! What ferry does on top is what the sandbox costs: each query's rows are copied
//! into the guest's memory and its messages out of it, the JSON is written by wasm
//! code, and the batch is checked against the connector's limits; for the sink, the
//! statements (SQL text and values) are copied out of the guest.
//!
//! Every run starts from a fresh log, state directory, topic or table; the first
//! batch of every run is left out of the clock (connecting, preparing). Each side
//! runs three times (`FERRY_BENCH_ROUNDS`), taking turns to go first; the medians
//! are printed with the ratio `ferry / native` of the medians and the lowest and
//! highest ratio of a round's pair. Both sides run as tasks of one tokio runtime
//! in this process (the native loops are spawned, as a connector's loop is),
//! against the same servers.
//!
//! The sinks write 100,000 messages a run (they move fewer rows a second). With
//! `FERRY_BENCH_SCALE=0.1` everything moves a tenth of that (a quick look; at
//! least 20,000 rows). `FERRY_BENCH_ONLY=pg→log,pg→iggy` runs only the rows named
//! (a sink reads what its source's first ferry round wrote: keep the source).

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, BytesMut};
use ferry::capabilities::postgres::PgPools;
use ferry::capabilities::postgres::PostgresServer;
use ferry::config::StreamConfig;
use ferry::contract::{Header, HeaderValue, Message, Uint128};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, LogMark, Receipt, Target};
use ferry::engine::sink::{Input, SinkConnector, SinkSettings};
use ferry::engine::source::SourceConnector;
use ferry::iggy::{IggyInput, IggyTarget, Reading};
use ferry::runtime::{Runtime, Sandbox, SinkComponent, SinkWorld, SourceComponent};
use ferry::store::local_log::{LocalLog, LocalLogInput, TopicReader};
use ferry::store::state::{ConnectorState, StateDir};
use ferry_tests::bench::{self, Measured, Out, Rounds, SinkEnd, compare, time_sink, time_source};
use ferry_tests::components::{POSTGRES_SINK, POSTGRES_SOURCE};
use ferry_tests::harness::{quick_settings, quick_sink_settings};
use ferry_tests::iggy_server::{self, GroupConsumer, IggyServer, created_stream, live_server};
use ferry_tests::postgres_server::{self, PgServer};
use iggy::prelude::{HeaderKey, HeaderValue as IggyHeaderValue, IggyMessage, MessageClient, Partitioning};
use serde::Serialize;
use serde_json::json;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// The table the sources read.
const TABLE: &str = "bench_rows";
/// Its rows (times `FERRY_BENCH_SCALE`).
const ROWS: u64 = 1_000_000;
/// The sources' `batch_size`s.
const SOURCE_BATCHES: &[u64] = &[1000, 100];
/// The messages each sink run writes (times the scale): a sink moves fewer rows a
/// second than a source, and the whole benchmark should take minutes.
const SINK_MESSAGES: u64 = 100_000;
/// The sinks' `batch_length`s.
const SINK_BATCHES: &[u64] = &[1000, 100];
/// The name the server is granted under.
const DB: &str = "db";
/// The stream every topic is in.
const STREAM: &str = "bench";

fn main() {
    let scale = bench::scale();
    // Whole batches of the largest size, so that every run ends on a batch boundary.
    let round = |n: f64| ((n as u64) / 1000).max(20) * 1000;
    let rows = round(ROWS as f64 * scale);
    let sink_messages = round(SINK_MESSAGES as f64 * scale).min(rows);
    let b = Bench::start();
    b.tokio.block_on(b.fill(rows));
    println!("{rows} rows in `{TABLE}`; the sinks write {sink_messages} messages a run");
    println!();
    println!(
        "{:<8} {:<7} {:>6} {:>9} {:>8} {:>10} {:>10}  ratio (of the medians; lowest-highest of the pairs)",
        "rows", "side", "batch", "rows", "batches", "rows/s", "µs/batch"
    );

    for &batch in SOURCE_BATCHES.iter().filter(|_| bench::wanted("pg→log")) {
        let (ferry, native) = compare(
            |run| b.ferry_source(&Out::Log, batch, rows, run),
            |run| b.native_source(&Out::Log, batch, rows, run),
        );
        b.check_same_logs(batch);
        print_pair("pg→log", batch, &ferry, &native);
    }
    // The sinks read what the first ferry round of the first batch size delivered.
    let from = run_name("log", "ferry", SOURCE_BATCHES[0], 0);
    let input = LogTopic { dir: b.dir(&from).join("log"), topic: from };
    for &batch in SINK_BATCHES.iter().filter(|_| bench::wanted("log→pg")) {
        let (ferry, native) = compare(
            |run| b.ferry_sink(&In::Log(&input), batch, sink_messages, run),
            |run| b.native_sink(&In::Log(&input), batch, sink_messages, run),
        );
        b.check_same_tables("log", batch, sink_messages);
        print_pair("log→pg", batch, &ferry, &native);
    }

    let Some(iggy) = live_server("the PostgreSQL benchmark's rows through Iggy (pg→iggy, iggy→pg)") else { return };
    // The Iggy connections start their tasks on this runtime.
    let _entered = b.tokio.enter();
    for &batch in SOURCE_BATCHES.iter().filter(|_| bench::wanted("pg→iggy")) {
        let (ferry, native) = compare(
            |run| b.ferry_source(&Out::Iggy(&iggy), batch, rows, run),
            |run| b.native_source(&Out::Iggy(&iggy), batch, rows, run),
        );
        b.tokio.block_on(check_same_topics(&iggy, batch));
        print_pair("pg→iggy", batch, &ferry, &native);
    }
    let topic = run_name("iggy", "ferry", SOURCE_BATCHES[0], 0);
    for &batch in SINK_BATCHES.iter().filter(|_| bench::wanted("iggy→pg")) {
        let (ferry, native) = compare(
            |run| b.ferry_sink(&In::Iggy(&iggy, &topic), batch, sink_messages, run),
            |run| b.native_sink(&In::Iggy(&iggy, &topic), batch, sink_messages, run),
        );
        b.check_same_tables("iggy", batch, sink_messages);
        print_pair("iggy→pg", batch, &ferry, &native);
    }
}

/// Where a sink's messages come from.
enum In<'a> {
    Log(&'a LogTopic),
    /// A topic of `STREAM` on this server.
    Iggy(&'a IggyServer, &'a str),
}

impl In<'_> {
    fn name(&self) -> &'static str {
        match self {
            In::Log(_) => "log",
            In::Iggy(..) => "iggy",
        }
    }
}

/// A topic of `STREAM` in the local log under `dir`.
struct LogTopic {
    dir: PathBuf,
    topic: String,
}

/// The name of one run: its local log topic, Iggy topic, state key and directory
/// (`log-ferry-1000-0`).
fn run_name(path: &str, side: &str, batch: u64, run: u32) -> String {
    format!("{path}-{side}-{batch}-{run}")
}

/// The table one sink run writes into (`sink_log_ferry_1000_0`).
fn sink_table(from: &str, side: &str, batch: u64, run: u32) -> String {
    format!("sink_{}", run_name(from, side, batch, run).replace('-', "_"))
}

/// The server, the components, and a directory for the runs' logs and states.
struct Bench {
    tokio: tokio::runtime::Runtime,
    runtime: Arc<Runtime>,
    source: Arc<SourceComponent>,
    sink: Arc<SinkComponent>,
    pg: PgServer,
    servers: BTreeMap<String, PostgresServer>,
    dir: tempfile::TempDir,
}

impl Bench {
    fn start() -> Bench {
        let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let runtime = Arc::new(Runtime::new().expect("runtime"));
        let source = runtime.load_source(Path::new(POSTGRES_SOURCE)).expect("the source loads");
        let sink = runtime.load::<SinkWorld>(Path::new(POSTGRES_SINK)).expect("the sink loads");
        let pg = PgServer::start();
        let dir = tempfile::tempdir().unwrap();
        let servers = BTreeMap::from([(DB.to_string(), pg.ferry_server(dir.path(), DB, postgres_server::PASSWORD))]);
        Bench { tokio, runtime, source, sink, pg, servers, dir }
    }

    /// The directory of run `name`.
    fn dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `rows` rows in `TABLE`, vacuumed (hint bits set, statistics taken) so that no
    /// run pays for what the first reader of fresh rows would, and checkpointed.
    async fn fill(&self, rows: u64) {
        let statements = [
            format!(
                "CREATE TABLE {TABLE} (id int8 PRIMARY KEY, body text NOT NULL, amount float8 NOT NULL, \
                 created timestamptz NOT NULL, flag bool NOT NULL)"
            ),
            format!(
                "INSERT INTO {TABLE} SELECT n, 'order ' || n || ' ' || md5(n::text), (n % 100000) / 100.0, \
                 timestamptz '2024-01-01 00:00:00+00' + n * interval '1.000001 second', n % 3 = 0 \
                 FROM generate_series(1, {rows}) AS n"
            ),
            // Checkpoints come when this benchmark asks for them, between runs, not
            // every gigabyte of WAL in the middle of one.
            "ALTER SYSTEM SET max_wal_size = '8GB'".into(),
            "SELECT pg_reload_conf()".into(),
            format!("VACUUM ANALYZE {TABLE}"),
            "CHECKPOINT".into(),
        ];
        // One by one: VACUUM and ALTER SYSTEM refuse to run in a transaction.
        for statement in statements {
            self.pg.execute(&statement).await;
        }
    }

    /// The sandbox of a connector granted the server as `DB`.
    fn sandbox(&self) -> Sandbox {
        let mut sandbox = Sandbox::default();
        sandbox.grants.postgres = vec![DB.into()];
        sandbox.shared.postgres =
            PgPools::granted(&sandbox.grants.postgres, &self.servers).expect("the server is defined");
        sandbox
    }

    /// The state file of run `name`.
    fn state(&self, name: &str) -> ConnectorState {
        StateDir::new(self.dir(name).join("state")).open(name).expect("a state file")
    }

    /// `postgres-source` reading `TABLE` in batches of `batch` into `out`.
    fn ferry_source(&self, out: &Out, batch: u64, rows: u64, run: u32) -> Measured {
        let name = run_name(out.name(), "ferry", batch, run);
        let target: Arc<dyn Target> = match out {
            Out::Log => Arc::new(LocalLog::new(self.dir(&name).join("log"))),
            Out::Iggy(server) => {
                Arc::new(IggyTarget::start(&server.ferry_config(iggy_server::PASSWORD)).expect("a connection"))
            }
        };
        let connector = SourceConnector {
            key: name.as_str().into(),
            tenant: None,
            component: self.source.clone().into(),
            plugin_config: json!({ "connection": DB, "table": TABLE, "batch_size": batch }).to_string(),
            streams: vec![created_stream(STREAM, &name)].into(),
            settings: ferry::engine::source::SourceSettings {
                poll_interval: Duration::from_millis(1),
                ..quick_settings()
            },
            sandbox: self.sandbox(),
            target,
            transforms: None,
            cursor: Arc::new(self.state(&name)),
        };
        let elapsed = self.tokio.block_on(time_source(&self.runtime, connector));
        self.forget_later_runs(&name, run);
        Measured::after_first(rows, batch, elapsed)
    }

    /// The same as [`Bench::ferry_source`], natively.
    fn native_source(&self, out: &Out, batch: u64, rows: u64, run: u32) -> Measured {
        let name = run_name(out.name(), "native", batch, run);
        let elapsed = self.tokio.block_on(async {
            let sender = match out {
                Out::Log => Sender::Log(
                    LocalLog::new(self.dir(&name).join("log")),
                    vec![StreamConfig::new(STREAM, &name)].into(),
                ),
                Out::Iggy(server) => {
                    let client = server.client().await;
                    let (stream, topic) = IggyServer::create_topic(&client, STREAM, &name).await;
                    Sender::Iggy(client, stream, topic)
                }
            };
            let (client, state) = (self.pg.client().await, self.state(&name));
            // A task of the runtime, as a connector's loop is: not this thread.
            tokio::spawn(native_source(client, sender, name.clone(), state, batch)).await.expect("the native source")
        });
        self.forget_later_runs(&name, run);
        Measured::after_first(rows, batch, elapsed)
    }

    /// Remove what a run after the first wrote: only the first rounds are compared
    /// (and read by the sinks), and a million rows a run add up.
    fn forget_later_runs(&self, name: &str, run: u32) {
        if run > 0 {
            std::fs::remove_dir_all(self.dir(name)).expect("removing a run's directory");
        }
    }

    /// `postgres-sink` writing `messages` from `input` in batches of `batch`.
    fn ferry_sink(&self, input: &In, batch: u64, messages: u64, run: u32) -> Measured {
        let name = run_name(&format!("{}-pg", input.name()), "ferry", batch, run);
        let table = sink_table(input.name(), "ferry", batch, run);
        self.tokio.block_on(self.create_sink_table(&table));
        let reader: Arc<dyn Input> = match input {
            In::Log(log) => {
                let topics = vec![(STREAM.to_string(), log.topic.clone())];
                Arc::new(LocalLogInput::new(&name, &log.dir, topics, Arc::new(self.state(&name))))
            }
            In::Iggy(server, topic) => {
                let connection =
                    IggyTarget::start(&server.ferry_config(iggy_server::PASSWORD)).expect("a connection").connection();
                Arc::new(IggyInput::new(
                    connection,
                    vec![(STREAM.into(), topic.to_string())],
                    Reading::InGroup(name.clone()),
                ))
            }
        };
        let connector = SinkConnector {
            key: name.as_str().into(),
            tenant: None,
            component: self.sink.clone().into(),
            plugin_config: json!({ "connection": DB, "table": table }).to_string(),
            settings: SinkSettings {
                poll_interval: Duration::from_millis(1),
                batch_length: batch as u32,
                ..quick_sink_settings()
            },
            sandbox: self.sandbox(),
            input: reader,
            transforms: None,
            dead_letters: None,
        };
        // Its input is the topic of a source's run, longer than `messages`.
        let elapsed = self.tokio.block_on(time_sink(&self.runtime, connector, messages, SinkEnd::Reached));
        Measured::after_first(messages, batch, elapsed)
    }

    /// The same as [`Bench::ferry_sink`], natively.
    fn native_sink(&self, input: &In, batch: u64, messages: u64, run: u32) -> Measured {
        let name = run_name(&format!("{}-pg", input.name()), "native", batch, run);
        let table = sink_table(input.name(), "native", batch, run);
        let elapsed = self.tokio.block_on(async {
            self.create_sink_table(&table).await;
            let client = self.pg.client().await;
            let insert = client.prepare(&insert_sql(&table)).await.expect("the INSERT prepares");
            let writer = SinkWriter { client, insert, start: None };
            // Tasks of the runtime, as a connector's loop is: not this thread.
            let task = match input {
                In::Log(log) => {
                    let reader = TopicReader::open(&log.dir, STREAM, &log.topic).expect("the topic");
                    let state = self.state(&name);
                    tokio::spawn(native_log_sink(writer, reader, state, log.topic.clone(), batch, messages))
                }
                In::Iggy(server, topic) => {
                    let consumer = server.join_group(STREAM, topic, &name).await;
                    tokio::spawn(native_iggy_sink(writer, consumer, topic.to_string(), batch, messages))
                }
            };
            task.await.expect("the native sink")
        });
        Measured::after_first(messages, batch, elapsed)
    }

    /// A new table of the sink's default layout, then a checkpoint, so that every
    /// run starts with the same work pending on the server.
    async fn create_sink_table(&self, table: &str) {
        self.pg
            .execute(&format!(
                r#"CREATE TABLE {table} ("id" text PRIMARY KEY, "payload" jsonb, "payload_bytes" bytea,
                   "headers" jsonb NOT NULL, "stream" text NOT NULL, "topic" text NOT NULL,
                   "partition" int8 NOT NULL, "offset" int8 NOT NULL, "origin_timestamp" timestamptz)"#
            ))
            .await;
        self.pg.execute("CHECKPOINT").await;
    }

    /// The first rounds' logs hold the same records, and their cursors are the same.
    fn check_same_logs(&self, batch: u64) {
        let (ferry, native) = (run_name("log", "ferry", batch, 0), run_name("log", "native", batch, 0));
        let records = |name: &str| {
            let reader = TopicReader::open(&self.dir(name).join("log"), STREAM, name).expect("the topic");
            move |at| reader.read(at, 10_000).expect("reading the log")
        };
        let (ferry_records, native_records) = (records(&ferry), records(&native));
        let mut at = 0;
        loop {
            let (f, n) = (ferry_records(at), native_records(at));
            assert_eq!(f.len(), n.len(), "both logs end at the same offset (from {at})");
            for (f, n) in f.iter().zip(&n) {
                assert_eq!((f.id, &f.headers), (n.id, &n.headers), "the message at offset {}", f.offset);
                assert_eq!(
                    String::from_utf8_lossy(&f.payload),
                    String::from_utf8_lossy(&n.payload),
                    "the payload at offset {}",
                    f.offset
                );
            }
            match f.last() {
                Some(last) => at = last.offset + 1,
                None => break,
            }
        }
        let cursor = |name: &str| StateDir::new(self.dir(name).join("state")).read(name).unwrap().unwrap().state;
        let (ferry_cursor, native_cursor) = (cursor(&ferry), cursor(&native));
        assert_eq!(String::from_utf8_lossy(&ferry_cursor), String::from_utf8_lossy(&native_cursor), "the cursors");
        std::fs::remove_dir_all(self.dir(&native)).unwrap();
        if batch != SOURCE_BATCHES[0] {
            std::fs::remove_dir_all(self.dir(&ferry)).unwrap();
        }
    }

    /// The first rounds' tables hold the same rows, one per message; all the
    /// tables of `batch` are dropped then.
    fn check_same_tables(&self, from: &str, batch: u64, messages: u64) {
        self.tokio.block_on(async {
            let client = self.pg.client().await;
            let digest = |table: String| {
                // Past `messages`, ferry's sink may have written the batch it had in
                // hand when it was stopped.
                let sql = format!(
                    r#"SELECT count(*)::text, md5(string_agg(concat_ws('|', "id", "payload"::text, "payload_bytes"::text,
                       "headers"::text, "stream", "topic", "partition", "offset", "origin_timestamp"), ',' ORDER BY "offset"))
                       FROM {table} WHERE "offset" < {messages}"#
                );
                let client = &client;
                async move {
                    let row = client.query_one(&sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                    (row.get::<_, String>(0), row.get::<_, String>(1))
                }
            };
            let ferry = digest(sink_table(from, "ferry", batch, 0)).await;
            let native = digest(sink_table(from, "native", batch, 0)).await;
            assert_eq!(ferry.0, messages.to_string(), "every message one row");
            assert_eq!(ferry, native, "the same rows");
            for side in ["ferry", "native"] {
                for run in 0..bench::rounds() {
                    client.batch_execute(&format!("DROP TABLE {}", sink_table(from, side, batch, run))).await.unwrap();
                }
            }
        });
    }
}

/// Where the native source sends its messages.
enum Sender {
    /// The local log, into these streams.
    Log(LocalLog, Arc<[StreamConfig]>),
    /// An Iggy server: the client and the stream and topic.
    Iggy(iggy::prelude::IggyClient, iggy::prelude::Identifier, iggy::prelude::Identifier),
}

/// A row of `TABLE`, read by column.
#[derive(Serialize)]
struct Row<'a> {
    id: i64,
    body: &'a str,
    amount: f64,
    /// RFC 3339, in UTC, to the microsecond.
    created: String,
    flag: bool,
}

impl<'a> Row<'a> {
    fn of(row: &'a tokio_postgres::Row) -> Row<'a> {
        let created: SystemTime = row.get(3);
        Row {
            id: row.get(0),
            body: row.get(1),
            amount: row.get(2),
            created: humantime::format_rfc3339_micros(created).to_string(),
            flag: row.get(4),
        }
    }

    /// The message id the connector gives the row: the xxh3 of the table (its
    /// length first) and the key (tagged as an int), never 0.
    fn message_id(&self) -> u128 {
        let mut input = Vec::with_capacity(TABLE.len() + 17);
        input.extend_from_slice(&(TABLE.len() as u64).to_le_bytes());
        input.extend_from_slice(TABLE.as_bytes());
        input.push(b'i');
        input.extend_from_slice(&self.id.to_le_bytes());
        xxhash_rust::xxh3::xxh3_128(&input).max(1)
    }
}

/// The native source: read the table in batches of `batch` with the connector's
/// statements, send each batch, commit the cursor after it; the time from the first
/// batch's commit to the empty read after the last.
async fn native_source(
    client: tokio_postgres::Client,
    sender: Sender,
    name: String,
    state: ConnectorState,
    batch: u64,
) -> Duration {
    let first = format!(r#"SELECT * FROM "{TABLE}" WHERE "id" IS NOT NULL ORDER BY "id" LIMIT {batch}"#);
    let next = format!(r#"SELECT * FROM "{TABLE}" WHERE "id" > $1 ORDER BY "id" LIMIT {batch}"#);
    let (first, next) = (client.prepare(&first).await.unwrap(), client.prepare(&next).await.unwrap());
    let (mut after, mut start) = (None::<i64>, None);
    loop {
        let rows = match after {
            None => client.query(&first, &[]).await,
            Some(id) => client.query(&next, &[&id]).await,
        }
        .expect("reading the rows");
        let Some(last) = rows.last() else { break };
        let rows: Vec<Row> = rows.iter().map(Row::of).collect();
        let receipt = match &sender {
            Sender::Log(log, streams) => {
                let messages = rows
                    .iter()
                    .map(|row| Message {
                        id: Some(Uint128::from(row.message_id())),
                        headers: vec![
                            Header { key: "table".into(), value: HeaderValue::String(TABLE.into()) },
                            Header { key: "primary_key".into(), value: HeaderValue::Int64(row.id) },
                        ],
                        payload: serde_json::to_vec(row).unwrap().into(),
                        origin_timestamp: None,
                    })
                    .collect();
                let delivery = Delivery {
                    connector: name.as_str().into(),
                    streams: streams.clone(),
                    messages: Arc::new(messages),
                    cursor: None,
                };
                log.deliver(delivery).await.expect("appending to the log")
            }
            Sender::Iggy(client, stream, topic) => {
                let mut messages = rows
                    .iter()
                    .map(|row| {
                        let headers = BTreeMap::from([
                            (HeaderKey::try_from("table").unwrap(), IggyHeaderValue::try_from(TABLE).unwrap()),
                            (HeaderKey::try_from("primary_key").unwrap(), IggyHeaderValue::from(row.id)),
                        ]);
                        let payload = serde_json::to_vec(row).unwrap();
                        IggyMessage::builder()
                            .id(row.message_id())
                            .payload(payload.into())
                            .user_headers(headers)
                            .build()
                            .unwrap()
                    })
                    .collect::<Vec<_>>();
                client.send_messages(stream, topic, &Partitioning::balanced(), &mut messages).await.expect("sending");
                Receipt::default()
            }
        };
        after = Some(last.get(0));
        let cursor = serde_json::to_vec(&json!({ "after": { "tracking": { "int": after } } })).unwrap();
        state.commit(cursor, receipt).await.expect("committing the cursor");
        start.get_or_insert_with(Instant::now);
    }
    start.expect("at least one batch").elapsed()
}

/// The INSERT of `postgres-sink` into `table`.
fn insert_sql(table: &str) -> String {
    format!(
        r#"INSERT INTO "{table}" ("id", "payload", "payload_bytes", "headers", "stream", "topic", "partition",
           "offset", "origin_timestamp") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT ("id") DO NOTHING"#
    )
}

/// The values of one message's row, as the sink makes them.
struct SinkRow<'a> {
    /// The message id, in decimal.
    id: String,
    payload: &'a [u8],
    /// The headers as typed JSON (`{"table":{"string":"bench_rows"},...}`).
    headers: String,
    topic: &'a str,
    partition: i64,
    offset: i64,
    origin_timestamp: Option<SystemTime>,
}

impl<'a> SinkRow<'a> {
    fn of_record(record: &'a ferry::store::local_log::Record, topic: &'a str) -> SinkRow<'a> {
        SinkRow {
            id: record.id.expect("the source gives every message an id").to_string(),
            payload: &record.payload,
            headers: record.headers.as_ref().map_or_else(|| "{}".to_string(), |h| h.to_string()),
            topic,
            partition: 0,
            offset: record.offset as i64,
            origin_timestamp: record.origin_timestamp.map(|micros| UNIX_EPOCH + Duration::from_micros(micros)),
        }
    }

    fn of_iggy(message: &'a IggyMessage, topic: &'a str, partition: u32) -> SinkRow<'a> {
        let mut headers = serde_json::Map::new();
        for (key, value) in message.user_headers_map().expect("readable headers").unwrap_or_default() {
            let typed = match value.kind().to_string().as_str() {
                "string" => json!({ "string": value.as_str().unwrap() }),
                "int64" => json!({ "int64": value.as_int64().unwrap() }),
                kind => panic!("the benchmark's messages carry no {kind} header"),
            };
            headers.insert(key.as_str().unwrap().to_string(), typed);
        }
        let origin = message.header.origin_timestamp;
        SinkRow {
            id: message.header.id.to_string(),
            payload: &message.payload,
            headers: serde_json::Value::Object(headers).to_string(),
            topic,
            partition: i64::from(partition),
            offset: message.header.offset as i64,
            origin_timestamp: (origin != 0).then(|| UNIX_EPOCH + Duration::from_micros(origin)),
        }
    }
}

/// The native sink reading the local log: read a batch, write it, store the
/// position after it in the state file as the host's local-log input does.
async fn native_log_sink(
    mut writer: SinkWriter,
    reader: TopicReader,
    state: ConnectorState,
    topic: String,
    batch: u64,
    messages: u64,
) -> Duration {
    let mut at = 0;
    while at < messages {
        let records = reader.read(at, batch.min(messages - at)).expect("reading the log");
        let rows = records.iter().map(|r| SinkRow::of_record(r, &topic)).collect::<Vec<_>>();
        at = records.last().expect("the topic holds every message").offset + 1;
        writer.write(&rows).await;
        let positions = serde_json::to_vec(&json!({ format!("{STREAM}/{topic}"): at })).unwrap();
        let mark = LogMark::new(STREAM, topic.clone(), at);
        state.commit(positions, Receipt { marks: vec![mark] }).await.expect("storing the position");
        writer.batch_done();
    }
    writer.elapsed()
}

/// The native sink reading Iggy: poll a batch for its group, write it, store the
/// group's offset.
async fn native_iggy_sink(
    mut writer: SinkWriter,
    consumer: GroupConsumer,
    topic: String,
    batch: u64,
    messages: u64,
) -> Duration {
    let mut read = 0;
    while read < messages {
        let polled = consumer.poll(batch as u32).await;
        let rows = polled.messages.iter().map(|m| SinkRow::of_iggy(m, &topic, polled.partition_id)).collect::<Vec<_>>();
        let last = polled.messages.last().expect("the topic holds every message");
        writer.write(&rows).await;
        consumer.store(polled.partition_id, last.header.offset).await;
        read += polled.messages.len() as u64;
        writer.batch_done();
    }
    writer.elapsed()
}

/// The native sink's writes: one transaction per batch.
struct SinkWriter {
    client: tokio_postgres::Client,
    insert: tokio_postgres::Statement,
    /// When the first batch was done.
    start: Option<Instant>,
}

impl SinkWriter {
    /// `rows` in one transaction of one INSERT each, pipelined (all sent before the
    /// first answer is read, as the host's `transaction` does), committed.
    async fn write(&mut self, rows: &[SinkRow<'_>]) {
        let transaction = self.client.transaction().await.expect("BEGIN");
        let values: Vec<_> = rows
            .iter()
            .map(|row| {
                // As the sink does: jsonb when the payload is a document jsonb takes, else bytes.
                let text = std::str::from_utf8(row.payload).ok().filter(|text| is_jsonb(text));
                let (payload, payload_bytes) = match text {
                    Some(text) => (Some(Jsonb(text)), None),
                    None => (None, Some(row.payload)),
                };
                (payload, payload_bytes, Jsonb(&row.headers))
            })
            .collect();
        let executions = rows.iter().zip(&values).map(|(row, (payload, payload_bytes, headers))| {
            let params: [&(dyn ToSql + Sync); 9] = [
                &row.id,
                payload,
                payload_bytes,
                headers,
                &STREAM,
                &row.topic,
                &row.partition,
                &row.offset,
                &row.origin_timestamp,
            ];
            transaction.execute_raw(&self.insert, params)
        });
        for done in futures::future::join_all(executions).await {
            done.expect("the INSERT");
        }
        transaction.commit().await.expect("COMMIT");
    }

    /// A batch was written and its position stored: the clock starts after the first.
    fn batch_done(&mut self) {
        self.start.get_or_insert_with(Instant::now);
    }

    /// The time since the first batch was done.
    fn elapsed(&self) -> Duration {
        self.start.expect("at least one batch").elapsed()
    }
}

/// Whether `text` is a document `jsonb` takes, as the sink decides it.
fn is_jsonb(text: &str) -> bool {
    !text.contains("\\u0000") && serde_json::from_str::<serde_json::Value>(text).is_ok()
}

/// A JSON document's text bound to a `jsonb` parameter, as it is (no parsing again).
#[derive(Debug)]
struct Jsonb<'a>(&'a str);

impl ToSql for Jsonb<'_> {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        // jsonb's binary form: a version byte, then the text.
        out.put_u8(1);
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB
    }

    to_sql_checked!();
}

/// The first rounds' topics hold the same messages (ids, headers, payloads).
async fn check_same_topics(server: &IggyServer, batch: u64) {
    let ferry = server.read_all(STREAM, &run_name("iggy", "ferry", batch, 0)).await;
    let native = server.read_all(STREAM, &run_name("iggy", "native", batch, 0)).await;
    assert_eq!(ferry.len(), native.len(), "both topics hold every row");
    for (f, n) in ferry.iter().zip(&native) {
        assert_eq!(f.header.id, n.header.id, "the id at offset {}", f.header.offset);
        assert_eq!(f.user_headers_map().unwrap(), n.user_headers_map().unwrap(), "the headers at {}", f.header.offset);
        assert_eq!(f.payload, n.payload, "the payload at offset {}", f.header.offset);
    }
}

/// The medians of both sides of one comparison and the ratio.
fn print_pair(path: &str, batch: u64, ferry: &Rounds, native: &Rounds) {
    print_row(path, "ferry", batch, &ferry.median, String::new());
    print_row(path, "native", batch, &native.median, Rounds::ratio(ferry, native));
}

fn print_row(path: &str, side: &str, batch: u64, m: &Measured, ratio: String) {
    println!(
        "{:<8} {:<7} {:>6} {:>9} {:>8} {:>10.0} {:>10.0}  {}",
        path,
        side,
        batch,
        m.messages,
        m.batches,
        m.rate(),
        m.micros_per_batch(),
        ratio
    );
}
