//! `cargo bench -p ferry-tests --bench http_source`: the HTTP source polling a paged
//! JSON endpoint into the local log, next to a native program doing the same job in
//! the same run, against the same endpoint.
//!
//! The endpoint is an axum server in this process (its own runtime) serving
//! `GET /records?page=N&per_page=M` from a list of ~100-byte JSON records, the JSON
//! of every page made once before the runs. For each page size:
//!
//! * ferry: the `http-source` component (`cursor = { kind = "page" }`) run by the
//!   host's source loop: per batch the guest asks for a page through `wasi:http`
//!   (one kept-alive connection), parses the answer with serde_json as far as the
//!   array at `$.data.records` (a level at a time, into raw values), makes a message
//!   of each record's own text and returns them with the next cursor; the host
//!   derives the ids, appends the batch to the local log with the cursor in the same
//!   transaction and commits it.
//! * native: a loop in a task of the same tokio runtime that per batch asks for the
//!   same page with `reqwest` (one kept-alive connection), parses it the same way,
//!   makes the same messages, serializes the same cursor,
//!   derives the ids as ferry does and makes the same two calls into ferry's
//!   `LocalLog` and `LoggedCursor` the source loop makes.
//!
//! Both ask for the empty page after the last and stop there. Checked after each
//! shape: both logs hold every record once, the same payloads in the same order.
//! Three rounds each (`FERRY_BENCH_ROUNDS`), taking turns to go first; printed are
//! the medians and the ratio `ferry / native`. `FERRY_BENCH_SCALE=0.2` reads a fifth.

use std::collections::BTreeMap;
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
use ferry::store::state::StateDir;
use ferry_tests::bench::{self, Measured, Rounds, compare, time_source};
use ferry_tests::components::HTTP_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::created_stream;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// Records a page (a batch), and records in all (times the scale).
const SHAPES: &[(u64, u64)] = &[(100, 50_000), (1000, 200_000)];
const KEY: &str = "api";
const STREAM: &str = "bench";
/// `[state] sync = "interval"`, as in the other source benchmarks' local-log rows.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));

fn main() {
    let scale = bench::scale();
    let b = Bench::start();
    println!("scale {scale}; each side {} times per shape, taking turns to go first", bench::rounds());
    println!();
    println!(
        "{:>5} {:>8} {:>12} {:>12} {:>9} {:>9}  ratio ferry/native (of the medians; lowest-highest of the pairs)",
        "page", "records", "ferry msg/s", "native msg/s", "ferry µs", "native µs"
    );
    for &(page, records) in SHAPES {
        let records = ((records as f64 * scale) as u64 / page).max(20) * page;
        let address = b.endpoint(page, records);
        let shape = Shape { page, records };
        let (ferry, native) = compare(|run| b.ferry(&address, shape, run), |run| b.native(&address, shape, run));
        b.check_same_logs(shape);
        let (f, n) = (&ferry.median, &native.median);
        println!(
            "{:>5} {:>8} {:>12.0} {:>12.0} {:>9.1} {:>9.1}  {}",
            page,
            records,
            f.rate(),
            n.rate(),
            f.micros_per_batch(),
            n.micros_per_batch(),
            Rounds::ratio(&ferry, &native),
        );
    }
}

#[derive(Clone, Copy)]
struct Shape {
    page: u64,
    records: u64,
}

struct Bench {
    tokio: tokio::runtime::Runtime,
    server: tokio::runtime::Runtime,
    runtime: Arc<Runtime>,
    component: Arc<SourceComponent>,
    dir: tempfile::TempDir,
}

impl Bench {
    fn start() -> Bench {
        let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let server = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let runtime = Arc::new(Runtime::new().expect("runtime"));
        let component = runtime.load_source(Path::new(HTTP_SOURCE)).expect("the HTTP source loads");
        Bench { tokio, server, runtime, component, dir: tempfile::tempdir().unwrap() }
    }

    /// An endpoint serving `records` records in pages of `page`; its address.
    fn endpoint(&self, page: u64, records: u64) -> String {
        let pages: Arc<Vec<String>> = Arc::new(
            (0..=records / page)
                .map(|p| {
                    let records: Vec<Value> = (p * page..((p + 1) * page).min(records))
                        .map(|id| json!({"id": id, "level": "info", "message": "a record of about one hundred bytes"}))
                        .collect();
                    json!({ "data": { "records": records } }).to_string()
                })
                .collect(),
        );
        let app = axum::Router::new().route(
            "/records",
            axum::routing::get(
                move |axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, u64>>| {
                    let pages = pages.clone();
                    async move {
                        let index = (query["page"] - 1) as usize;
                        pages.get(index).cloned().unwrap_or_else(|| json!({"data": {"records": []}}).to_string())
                    }
                },
            ),
        );
        let listener = self.server.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        self.server.spawn(async move { axum::serve(listener, app).await.unwrap() });
        address
    }

    fn name(side: &str, shape: Shape, run: u32) -> String {
        format!("{side}-{}-{run}", shape.page)
    }

    fn logged(&self, name: &str) -> (Arc<LocalLog>, LoggedCursor) {
        let dir = self.dir.path().join(name);
        let log = Arc::new(LocalLog::new(dir.join("log")));
        let file = StateDir::new(dir.join("state")).open_with(KEY, INTERVAL).expect("a state file");
        let cursor = LoggedCursor::new(file, KEY, &log, vec![(STREAM.to_string(), name.to_string())]);
        (log, cursor)
    }

    fn ferry(&self, address: &str, shape: Shape, run: u32) -> Measured {
        let name = Self::name("ferry", shape, run);
        let (log, cursor) = self.logged(&name);
        let grants: Grants = toml::from_str(&format!("network = [{address:?}]")).expect("the grant");
        let plugin_config = json!({
            "url": format!("http://{address}/records"),
            "records": "$.data.records",
            "cursor": { "kind": "page", "size": shape.page, "size_param": "per_page" },
        });
        let connector = SourceConnector {
            key: KEY.into(),
            tenant: None,
            component: self.component.clone().into(),
            plugin_config: plugin_config.to_string(),
            streams: vec![created_stream(STREAM, &name)].into(),
            settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
            sandbox: Sandbox { grants, ..Default::default() },
            target: log,
            transforms: None,
            cursor: Arc::new(cursor),
        };
        let elapsed = self.tokio.block_on(time_source(&self.runtime, connector));
        self.forget_later_runs(&name, run);
        Measured::after_first(shape.records, shape.page, elapsed)
    }

    fn native(&self, address: &str, shape: Shape, run: u32) -> Measured {
        let name = Self::name("native", shape, run);
        let (log, cursor) = self.logged(&name);
        let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &name)].into();
        let url = format!("http://{address}/records");
        let elapsed = self.tokio.block_on(async {
            tokio::spawn(native_source(url, log, streams, cursor, shape)).await.expect("the native source")
        });
        self.forget_later_runs(&name, run);
        Measured::after_first(shape.records, shape.page, elapsed)
    }

    fn forget_later_runs(&self, name: &str, run: u32) {
        if run > 0 {
            std::fs::remove_dir_all(self.dir.path().join(name)).expect("removing a run's directory");
        }
    }

    /// The first rounds' logs hold every record once, the same payloads.
    fn check_same_logs(&self, shape: Shape) {
        let records = |side: &str| {
            let name = Self::name(side, shape, 0);
            let records =
                LocalLog::read_all(&self.dir.path().join(&name).join("log"), STREAM, &name).expect("the topic");
            std::fs::remove_dir_all(self.dir.path().join(&name)).expect("removing a run's directory");
            records
        };
        let (ferry, native) = (records("ferry"), records("native"));
        assert_eq!(ferry.len() as u64, shape.records, "ferry's log holds every record");
        assert_eq!(native.len() as u64, shape.records, "the native log holds every record");
        for (f, n) in ferry.iter().zip(&native) {
            assert_eq!(f.payload, n.payload, "the payload at offset {}", f.offset);
        }
    }
}

/// The native HTTP source: per batch, ask for the page, parse it, take the records,
/// make the messages, serialize the cursor, derive the ids, deliver, commit. The
/// time from the first batch's commit to the empty page after the last.
async fn native_source(
    url: String,
    log: Arc<LocalLog>,
    streams: Arc<[StreamConfig]>,
    cursor: LoggedCursor,
    shape: Shape,
) -> Duration {
    let client = reqwest::Client::builder().build().unwrap();
    let connector: Arc<str> = KEY.into();
    let (mut page, mut committed, mut generation) = (1u64, None::<Vec<u8>>, 0u64);
    let mut start = None;
    loop {
        let answer = client
            .get(format!("{url}?page={page}&per_page={}", shape.page))
            .header("Accept", "application/json")
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .expect("an answer");
        assert!(answer.status().is_success(), "{}", answer.status());
        let bytes = answer.bytes().await.expect("the body");
        let body: &RawValue = serde_json::from_str(std::str::from_utf8(&bytes).expect("UTF-8")).expect("JSON");
        // `$.data.records`, a level parsed at a time, as the guest's path does.
        let mut at = body;
        for key in ["data", "records"] {
            at = serde_json::from_str::<BTreeMap<String, &RawValue>>(at.get())
                .expect("an object")
                .remove(key)
                .expect(key);
        }
        let records: Vec<&RawValue> = serde_json::from_str(at.get()).expect("the records");
        if records.is_empty() {
            break;
        }
        let mut messages: Vec<Message> = records
            .iter()
            .map(|record| Message {
                id: None,
                headers: Vec::new(),
                payload: record.get().as_bytes().to_vec().into(),
                origin_timestamp: None,
            })
            .collect();
        page += 1;
        let state = serde_json::to_vec(&json!({ "position": page })).unwrap();
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
