//! `cargo bench -p ferry-tests --bench fair`: the random source in ferry against a
//! native program doing the same work, in one run, side by side.
//!
//! `throughput` sets ferry against a producer that does less (one repeated
//! character for a payload, random ids, no cursor at all). Here the two sides do the
//! same work per batch, so that the ratio is what the sandbox costs and nothing else:
//!
//! * ferry: the `random-source` component (`messages_per_batch` = batch,
//!   `payload_size` = payload, `max_count`) run by the host's source loop, as
//!   `throughput` runs it: poll the guest, lift its batch out, check it against the
//!   connector's limits, derive the message ids, deliver, commit the staged cursor,
//!   ACK into the guest.
//! * native: a loop in a task of the same tokio runtime (as a connector's loop is)
//!   that, per batch, reads the clock once (every record's origin timestamp, as the
//!   guest does), makes the records with the guest's own code
//!   (`connectors/random-source/src/record.rs`, compiled here natively), written
//!   one after another into one buffer as the guest writes them into its batch,
//!   each payload a slice of it as the host's are (see [`records`]), serializes
//!   the cursor as the guest's SDK does (`serde_json` of `{"next_seq":N}`), gives the
//!   messages the ids ferry derives (`ferry::engine::batch::assign_ids`, from the connector's
//!   key, the cursor committed before the batch and the index), then delivers the
//!   batch and commits the cursor with the same durability as the ferry side.
//!
//! Two paths:
//!
//! * `local-log`: as `ferry run` is configured by the quickstart. Both sides append
//!   through ferry's `LocalLog` used as a library, with the batch's staged cursor in
//!   the same SQLite transaction (one fsync per batch), then commit the cursor to a
//!   `LoggedCursor` over a state file at `sync = "interval"` (no fsync): the very
//!   `Target::deliver` and `CursorStore::commit` calls the source loop makes, without
//!   the guest. A native program wanting the local log's exactly-once would make the
//!   same two calls.
//! * `iggy` (with `FERRY_TEST_IGGY_SERVER`, see `ferry_tests::iggy_server`; without
//!   it, skipped loudly): into a one-partition topic of a live server of the
//!   benchmark's own, made before each run the same way for both sides (see
//!   [`make_topic`]). Ferry delivers with its `IggyTarget`; the native side sends
//!   with the plain `iggy` client, as a native producer would (one connection,
//!   TCP_NODELAY, each send awaited, `Partitioning::balanced()`; the messages built
//!   field by field, the payloads moved into them uncopied, with the ids and the
//!   batch's origin timestamp). Both then commit the cursor to a state file of
//!   ferry's `StateDir` at `Durability::EveryCommit` (one fsync per batch, ferry's
//!   default): a native program needs a durable cursor too, and the same store makes
//!   the same fsync.
//!
//! What ferry does on top is the sandbox: the records are made by wasm code and
//! copied out of the guest's memory, the batch is decoded and checked against the
//! limits, its ACK goes back into the guest, and the host reports every stage.
//! `FERRY_BENCH_STAGES=1` prints the stages of both sides.
//!
//! Checked after each shape: the first round's two logs (or topics) hold the same
//! records (ids and payloads; the origin timestamps differ only by the clock), and
//! the two state files the same cursor.
//!
//! Every run starts from a fresh log, state directory and topic; the first batch is
//! left out of the clock (opening, connecting); ferry's clock runs from its first
//! ACK to the moment it goes idle, the native one from its first commit to its last.
//! Each side runs three times per shape (`FERRY_BENCH_ROUNDS` sets another number),
//! taking turns to go first
//! (`ferry_tests::bench::compare`): printed are the medians, the ratio
//! `ferry / native` of the medians, and the lowest and highest ratio of a round's
//! pair. The machine may be busy with other work; the ratio within one run is what
//! counts.
//!
//! `FERRY_BENCH_SCALE=0.3` runs 30% of the batches (at least 20 a run);
//! `FERRY_BENCH_ONLY=local-log` (or `iggy`) only that path; `FERRY_BENCH_SHAPES=1000x100`
//! only that shape.

#[path = "../../connectors/random-source/src/record.rs"]
mod record;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry::contract::Message;

use ferry::config::StreamConfig;
use ferry::contract::Durability;
use ferry::engine::batch::{self as ferry_batch, IdSource};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, Receipt, StagedCursor, Target};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::iggy::IggyTarget;
use ferry::runtime::{Runtime, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry::store::state::{ConnectorState, StateDir};
use ferry_tests::bench::{self, Measured, Out, Rounds, compare, time_source};
use ferry_tests::components::RANDOM_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::{IggyServer, PASSWORD, created_stream, live_server};
use iggy::prelude::{Identifier, IggyClient, IggyMessage, IggyMessageHeader, MessageClient, Partitioning};
use serde::Serialize;

/// Batch × payload (bytes per record), and the batches of a run into the local log
/// (times the scale): more of the small ones, so that no run is over in a fraction
/// of a second, where a few slow fsyncs of a busy disk would decide the ratio.
const SHAPES: &[(u64, usize, u64)] = &[(10, 100, 3000), (100, 100, 1000), (1000, 100, 600)];
/// Batches a run into Iggy (times the scale).
const IGGY_BATCHES: u64 = 1000;
/// The connector key of both sides: the message ids derive from it, so both sides
/// give their records the same ids.
const KEY: &str = "random";
/// The stream every topic is in.
const STREAM: &str = "bench";
/// `[state] sync = "interval"` at its default interval: the state file beside the
/// local log, as `ferry run` opens it.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));

fn main() {
    let scale = bench::scale();
    let b = Bench::start();
    println!("scale {scale}; each side {} times per shape, taking turns to go first", bench::rounds());
    println!();
    println!(
        "{:<9} {:>5} {:>7} {:>7} {:>12} {:>12} {:>9} {:>9}  ratio ferry/native (of the medians; lowest-highest of the pairs)",
        "path", "batch", "payload", "batches", "ferry msg/s", "native msg/s", "ferry µs", "native µs"
    );
    if bench::wanted("local-log") {
        for &(batch, payload, batches) in
            SHAPES.iter().filter(|(batch, payload, _)| bench::shape_wanted(*batch, *payload))
        {
            let batches = ((batches as f64 * scale) as u64).max(20);
            let shape = Shape { batch, payload, total: batch * batches };
            let (ferry, native) = compare(|run| b.ferry(&Out::Log, shape, run), |run| b.native(&Out::Log, shape, run));
            b.check_same_logs(shape);
            print_pair("local-log", shape, &ferry, &native);
        }
    }
    if !bench::wanted("iggy") {
        return;
    }
    let Some(server) = live_server("the fair benchmark into Iggy (the `iggy` rows)") else { return };
    // The Iggy target starts its connection task on this runtime.
    let _entered = b.tokio.enter();
    for &(batch, payload, _) in SHAPES.iter().filter(|(batch, payload, _)| bench::shape_wanted(*batch, *payload)) {
        let batches = ((IGGY_BATCHES as f64 * scale) as u64).max(20);
        let shape = Shape { batch, payload, total: batch * batches };
        let out = Out::Iggy(&server);
        let (ferry, native) = compare(|run| b.ferry(&out, shape, run), |run| b.native(&out, shape, run));
        b.tokio.block_on(b.check_same_topics(&server, shape));
        print_pair("iggy", shape, &ferry, &native);
    }
}

/// One shape of run: `total` records in batches of `batch`, of `payload` bytes each.
#[derive(Clone, Copy)]
struct Shape {
    batch: u64,
    payload: usize,
    total: u64,
}

/// The name of one run: its topic and directory (`log-ferry-100-100-0`).
fn run_name(out: &Out, side: &str, shape: Shape, run: u32) -> String {
    format!("{}-{side}-{}-{}-{run}", out.name(), shape.batch, shape.payload)
}

/// The runtime, the component, and a directory for the runs' logs and states.
struct Bench {
    tokio: tokio::runtime::Runtime,
    runtime: Arc<Runtime>,
    component: Arc<SourceComponent>,
    dir: tempfile::TempDir,
}

impl Bench {
    fn start() -> Bench {
        let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let runtime = Arc::new(Runtime::new().expect("runtime"));
        let component = runtime.load_source(std::path::Path::new(RANDOM_SOURCE)).expect("the random source loads");
        Bench { tokio, runtime, component, dir: tempfile::tempdir().unwrap() }
    }

    /// The directory of run `name`.
    fn dir(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The local log of run `name`, and its cursor kept in it (over a state file at
    /// `INTERVAL`), as `ferry run` sets up a source delivering to the local log.
    fn logged(&self, name: &str) -> (Arc<LocalLog>, LoggedCursor) {
        let log = Arc::new(LocalLog::new(self.dir(name).join("log")));
        let file = StateDir::new(self.dir(name).join("state")).open_with(KEY, INTERVAL).expect("a state file");
        let cursor = LoggedCursor::new(file, KEY, &log, vec![(STREAM.to_string(), name.to_string())]);
        (log, cursor)
    }

    /// The state file of run `name`, fsynced at every commit (ferry's default).
    fn state_file(&self, name: &str) -> ConnectorState {
        let states = StateDir::new(self.dir(name).join("state")).with_durability(Durability::EveryCommit);
        states.open(KEY).expect("a state file")
    }

    /// The random source in a host of its own, into `out`.
    fn ferry(&self, out: &Out, shape: Shape, run: u32) -> Measured {
        let name = run_name(out, "ferry", shape, run);
        let (target, cursor): (Arc<dyn Target>, Arc<dyn CursorStore>) = match out {
            Out::Log => {
                let (log, cursor) = self.logged(&name);
                (log, Arc::new(cursor))
            }
            Out::Iggy(server) => {
                self.tokio.block_on(make_topic(server, &name));
                let target = IggyTarget::start(&server.ferry_config(PASSWORD)).expect("a connection");
                (Arc::new(target), Arc::new(self.state_file(&name)))
            }
        };
        let connector = SourceConnector {
            key: KEY.into(),
            tenant: None,
            component: self.component.clone().into(),
            plugin_config: serde_json::json!({
                "messages_per_batch": shape.batch,
                "payload_size": shape.payload,
                "max_count": shape.total,
            })
            .to_string(),
            streams: vec![created_stream(STREAM, &name)].into(),
            settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
            sandbox: Default::default(),
            target,
            transforms: None,
            cursor,
        };
        let elapsed = self.tokio.block_on(time_source(&self.runtime, connector));
        self.forget_later_runs(&name, run);
        Measured::after_first(shape.total, shape.batch, elapsed)
    }

    /// The same as [`Bench::ferry`], natively.
    fn native(&self, out: &Out, shape: Shape, run: u32) -> Measured {
        let name = run_name(out, "native", shape, run);
        let elapsed = self.tokio.block_on(async {
            // A task of the runtime, as a connector's loop is: not this thread.
            let task = match out {
                Out::Log => {
                    let (log, cursor) = self.logged(&name);
                    let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &name)].into();
                    tokio::spawn(native_source(Sender::Log(log, streams), cursor, shape))
                }
                Out::Iggy(server) => {
                    let (stream, topic) = make_topic(server, &name).await;
                    let client = server.client().await;
                    tokio::spawn(native_source(Sender::Iggy(client, stream, topic), self.state_file(&name), shape))
                }
            };
            task.await.expect("the native source")
        });
        self.forget_later_runs(&name, run);
        Measured::after_first(shape.total, shape.batch, elapsed)
    }

    /// Remove what a run after the first wrote: only the first rounds are compared.
    fn forget_later_runs(&self, name: &str, run: u32) {
        if run > 0 {
            std::fs::remove_dir_all(self.dir(name)).expect("removing a run's directory");
        }
    }

    /// The first rounds' logs hold the same records (ids, payloads, an origin
    /// timestamp each), and their state files the same cursor.
    fn check_same_logs(&self, shape: Shape) {
        let (ferry, native) = (run_name(&Out::Log, "ferry", shape, 0), run_name(&Out::Log, "native", shape, 0));
        let records = |name: &str| LocalLog::read_all(&self.dir(name).join("log"), STREAM, name).expect("the topic");
        let (ferry_records, native_records) = (records(&ferry), records(&native));
        assert_eq!(ferry_records.len() as u64, shape.total, "ferry's log holds every record");
        assert_eq!(native_records.len() as u64, shape.total, "the native log holds every record");
        for (f, n) in ferry_records.iter().zip(&native_records) {
            assert_eq!(f.id, n.id, "the id at offset {}", f.offset);
            assert_eq!(f.payload, n.payload, "the payload at offset {}", f.offset);
            assert!(f.origin_timestamp.is_some() && n.origin_timestamp.is_some(), "origin timestamps at {}", f.offset);
        }
        self.check_same_cursors(&ferry, &native);
    }

    /// The first rounds' topics hold the same messages (ids and payloads), and their
    /// state files the same cursor.
    async fn check_same_topics(&self, server: &IggyServer, shape: Shape) {
        let out = Out::Iggy(server);
        let (ferry, native) = (run_name(&out, "ferry", shape, 0), run_name(&out, "native", shape, 0));
        let (ferry_messages, native_messages) =
            (server.read_all(STREAM, &ferry).await, server.read_all(STREAM, &native).await);
        assert_eq!(ferry_messages.len() as u64, shape.total, "ferry's topic holds every record");
        assert_eq!(native_messages.len() as u64, shape.total, "the native topic holds every record");
        for (f, n) in ferry_messages.iter().zip(&native_messages) {
            assert_eq!(f.header.id, n.header.id, "the id at offset {}", f.header.offset);
            assert_eq!(f.payload, n.payload, "the payload at offset {}", f.header.offset);
        }
        self.check_same_cursors(&ferry, &native);
    }

    /// Runs `ferry` and `native` ended on the same committed cursor; their
    /// directories are removed then.
    fn check_same_cursors(&self, ferry: &str, native: &str) {
        let cursor = |name: &str| {
            let committed = StateDir::new(self.dir(name).join("state")).read(KEY).expect("readable").expect("a cursor");
            String::from_utf8_lossy(&committed.state).into_owned()
        };
        assert_eq!(cursor(ferry), cursor(native), "the cursors");
        for name in [ferry, native] {
            std::fs::remove_dir_all(self.dir(name)).expect("removing a run's directory");
        }
    }
}

/// The topic of run `name`, made before the run by a client of its own, the same way
/// for both sides: each then sends over a connection of its own to a topic it finds.
/// When ferry made its topic itself on first delivery, over the connection it then
/// sent on, its sends took 40–60 µs longer (of about 350) than the native side's to a
/// topic made by another client, in runs of 2026-12-04 where the send alone was
/// timed on both sides; the way a topic is made is the server's business, not the
/// host's, so it is the same on both sides.
async fn make_topic(server: &IggyServer, name: &str) -> (Identifier, Identifier) {
    let admin = server.client().await;
    IggyServer::create_topic(&admin, STREAM, name).await
}

/// Where the native source delivers.
enum Sender {
    /// The local log, into these streams.
    Log(Arc<LocalLog>, Arc<[StreamConfig]>),
    /// An Iggy server: the client, the stream and the topic.
    Iggy(IggyClient, Identifier, Identifier),
}

/// The random source's cursor, serialized as its SDK serializes it.
#[derive(Serialize)]
struct Cursor {
    next_seq: u64,
}

/// The native source: per batch, one clock read, the records, the cursor after
/// them, the ids ferry derives; deliver, commit the cursor. The time from the first
/// batch's commit to the last's.
async fn native_source(sender: Sender, cursor: impl CursorStore, shape: Shape) -> Duration {
    let connector: Arc<str> = KEY.into();
    let (mut next_seq, mut committed, mut generation) = (0u64, None::<Vec<u8>>, 0u64);
    let mut start = None;
    let mut stages = NativeStages::default();
    while next_seq < shape.total {
        let batch_start = Instant::now();
        let end = (next_seq + shape.batch).min(shape.total);
        let mut messages = records(next_seq..end, shape.payload, now_micros());
        let state = serde_json::to_vec(&Cursor { next_seq: end }).expect("the cursor serializes");
        ferry_batch::assign_ids(
            &mut messages,
            IdSource::Cursor { connector: KEY, committed_before: committed.as_deref() },
        );
        let made = Instant::now();
        let receipt = match &sender {
            Sender::Log(log, streams) => {
                let delivery = Delivery {
                    connector: connector.clone(),
                    streams: streams.clone(),
                    messages: Arc::new(messages),
                    cursor: Some(StagedCursor {
                        lineage: cursor.lineage(),
                        generation: generation + 1,
                        state: state.clone(),
                    }),
                };
                log.deliver(delivery).await.expect("appending to the log")
            }
            Sender::Iggy(client, stream, topic) => {
                let mut messages: Vec<IggyMessage> = messages.into_iter().map(to_iggy).collect();
                client.send_messages(stream, topic, &Partitioning::balanced(), &mut messages).await.expect("sending");
                Receipt::default()
            }
        };
        let delivered = Instant::now();
        generation = cursor.commit(state.clone(), receipt).await.expect("committing the cursor").generation;
        committed = Some(state);
        next_seq = end;
        if start.is_some() {
            stages.add(batch_start, made, delivered);
        }
        start.get_or_insert_with(Instant::now);
    }
    stages.print();
    start.expect("at least one batch").elapsed()
}

/// The records `seqs` as the guest makes them: written one after another into one
/// buffer (as the guest writes them into its batch), each message's payload a slice
/// of it (as the host's are of the buffer it copies out of the guest), all with the
/// origin timestamp `now`. Measured against a vector per record moved into its
/// message, this is the faster way natively, by about 20 µs a batch of 1000.
fn records(seqs: std::ops::Range<u64>, payload: usize, now: u64) -> Vec<Message> {
    let count = (seqs.end - seqs.start) as usize;
    let (mut buffer, mut ends) = (Vec::with_capacity(count * payload), Vec::with_capacity(count));
    for seq in seqs {
        record::write_record(seq, payload, &mut buffer);
        ends.push(buffer.len());
    }
    let buffer = bytes::Bytes::from(buffer);
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let payload = buffer.slice(start..end);
            start = end;
            Message { id: None, headers: vec![], payload, origin_timestamp: Some(now) }
        })
        .collect()
}

/// With `FERRY_BENCH_STAGES` set, the native loop's stages, as ferry's are printed:
/// make (records, cursor and ids), deliver, state_save.
#[derive(Default)]
struct NativeStages {
    make: Duration,
    deliver: Duration,
    state_save: Duration,
    batches: u32,
}

impl NativeStages {
    fn add(&mut self, start: Instant, made: Instant, delivered: Instant) {
        self.make += made - start;
        self.deliver += delivered - made;
        self.state_save += delivered.elapsed();
        self.batches += 1;
    }

    fn print(&self) {
        if std::env::var_os("FERRY_BENCH_STAGES").is_none() || self.batches == 0 {
            return;
        }
        let mean = |total: Duration| total.as_secs_f64() * 1e6 / f64::from(self.batches);
        println!(
            "  native: µs per batch: make {:.1}, deliver {:.1}, state_save {:.1}",
            mean(self.make),
            mean(self.deliver),
            mean(self.state_save)
        );
    }
}

/// `message` as the `iggy` client sends it: its id, its payload (moved, not copied),
/// its origin timestamp; no headers.
fn to_iggy(message: Message) -> IggyMessage {
    let header = IggyMessageHeader {
        checksum: 0,
        id: message.id.expect("an id was assigned").get(),
        offset: 0,
        timestamp: 0,
        origin_timestamp: message.origin_timestamp.expect("every record has one"),
        user_headers_length: 0,
        payload_length: message.payload.len() as u32,
        reserved: 0,
    };
    IggyMessage { header, payload: message.payload, user_headers: None }
}

/// Microseconds since the epoch, as the guest reads its clock.
fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// One row per shape: both sides' medians and the ratio.
fn print_pair(path: &str, shape: Shape, ferry: &Rounds, native: &Rounds) {
    let (f, n) = (&ferry.median, &native.median);
    println!(
        "{:<9} {:>5} {:>7} {:>7} {:>12.0} {:>12.0} {:>9.1} {:>9.1}  {}",
        path,
        shape.batch,
        shape.payload,
        f.batches,
        f.rate(),
        n.rate(),
        f.micros_per_batch(),
        n.micros_per_batch(),
        Rounds::ratio(ferry, native),
    );
}
