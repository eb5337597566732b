//! `cargo bench -p ferry-tests --bench file_source`: the file source in ferry against
//! a native program doing the same job, in one run, side by side: a file of JSON
//! lines (about 100 bytes each) read from its start into the local log, `batch`
//! lines a batch, each delivered with its cursor, exactly once.
//!
//! * ferry: the `file-source` component (`format = "json_lines"`, `batch_size` =
//!   batch) run by the host's source loop, the directory granted to it: per poll the
//!   guest lists the directory, learns each matching file's identity and size, reads
//!   from its offset, checks each line is JSON, makes a record of it with its `file`
//!   and `offset` headers, and returns the batch and its cursor; the host checks it,
//!   derives the ids, appends it to the local log with the staged cursor in the same
//!   transaction and commits the cursor.
//! * native: a loop in a task of the same tokio runtime that per batch does the same
//!   work with std: lists the directory, stats the file (identity and size), reads
//!   from the offset, checks each line is JSON, makes the same records with the same
//!   headers, serializes the same cursor, derives the ids as ferry does
//!   (`ferry::engine::batch::assign_ids`), and makes the same two calls into ferry's
//!   `LocalLog` and `LoggedCursor` the source loop makes.
//!
//! Checked after each shape: both logs hold every line once, the same payloads and
//! headers in the same order. (The ids differ: they derive from the committed
//! cursor, which holds the file's identity, a WASI `metadata-hash` in the guest and
//! the device and inode natively.)
//!
//! Each side runs three times per shape (`FERRY_BENCH_ROUNDS`), taking turns to go
//! first; printed are the medians and the ratio `ferry / native`.
//! `FERRY_BENCH_SCALE=0.3` reads 30% of the lines; `FERRY_BENCH_FORMAT=lines` reads
//! them as plain lines on both sides (no JSON check); `FERRY_BENCH_STAGES=1` prints
//! ferry's stages.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::config::{Grants, StreamConfig};
use ferry::contract::{Durability, Header, HeaderValue, Message};
use ferry::engine::batch::{self as ferry_batch, IdSource};
use ferry::engine::cursor::CursorStore;
use ferry::engine::delivery::{Delivery, StagedCursor, Target};
use ferry::engine::source::{SourceConnector, SourceSettings};
use ferry::runtime::{Runtime, Sandbox, SourceComponent};
use ferry::store::local_log::{LocalLog, LoggedCursor};
use ferry::store::state::StateDir;
use ferry_tests::bench::{self, Measured, Rounds, compare, time_source};
use ferry_tests::components::FILE_SOURCE;
use ferry_tests::harness::quick_settings;
use ferry_tests::iggy_server::created_stream;

/// Lines a batch, and lines in all (times the scale).
const SHAPES: &[(u64, u64)] = &[(100, 100_000), (1000, 400_000)];
const KEY: &str = "files";
const STREAM: &str = "bench";
/// `[state] sync = "interval"`, as in the fair benchmark's local-log rows.
const INTERVAL: Durability = Durability::Interval(Duration::from_secs(1));

fn main() {
    let scale = bench::scale();
    let b = Bench::start();
    println!("scale {scale}; each side {} times per shape, taking turns to go first", bench::rounds());
    println!();
    println!(
        "{:>5} {:>8} {:>12} {:>12} {:>9} {:>9}  ratio ferry/native (of the medians; lowest-highest of the pairs)",
        "batch", "lines", "ferry msg/s", "native msg/s", "ferry µs", "native µs"
    );
    for &(batch, lines) in SHAPES {
        let lines = ((lines as f64 * scale) as u64).max(batch * 20);
        let input = b.input(lines);
        let shape = Shape { batch, lines };
        let (ferry, native) = compare(|run| b.ferry(&input, shape, run), |run| b.native(&input, shape, run));
        b.check_same_logs(shape);
        print_row(shape, &ferry, &native);
    }
}

#[derive(Clone, Copy)]
struct Shape {
    batch: u64,
    lines: u64,
}

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
        let component = runtime.load_source(Path::new(FILE_SOURCE)).expect("the file source loads");
        Bench { tokio, runtime, component, dir: tempfile::tempdir().unwrap() }
    }

    /// A directory holding `app.log` of `lines` JSON lines of about 100 bytes.
    fn input(&self, lines: u64) -> PathBuf {
        let dir = self.dir.path().join(format!("in-{lines}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::with_capacity(lines as usize * 100);
        for seq in 0..lines {
            text.push_str(&format!(
                "{{\"seq\":{seq:>10},\"level\":\"info\",\"message\":\"a line of about one hundred bytes\"}}\n"
            ));
        }
        std::fs::write(dir.join("app.log"), text).unwrap();
        dir
    }

    fn name(side: &str, shape: Shape, run: u32) -> String {
        format!("{side}-{}-{run}", shape.batch)
    }

    fn logged(&self, name: &str) -> (Arc<LocalLog>, LoggedCursor) {
        let dir = self.dir.path().join(name);
        let log = Arc::new(LocalLog::new(dir.join("log")));
        let file = StateDir::new(dir.join("state")).open_with(KEY, INTERVAL).expect("a state file");
        let cursor = LoggedCursor::new(file, KEY, &log, vec![(STREAM.to_string(), name.to_string())]);
        (log, cursor)
    }

    fn ferry(&self, input: &Path, shape: Shape, run: u32) -> Measured {
        let name = Self::name("ferry", shape, run);
        let (log, cursor) = self.logged(&name);
        let grants: Grants =
            toml::from_str(&format!("dirs = [{{ host = {:?}, guest = \"/in\" }}]", input.display().to_string()))
                .expect("the grant");
        let connector = SourceConnector {
            key: KEY.into(),
            tenant: None,
            component: self.component.clone().into(),
            plugin_config:
                serde_json::json!({ "path": "/in/*.log", "format": "json_lines", "batch_size": shape.batch })
                    .to_string(),
            streams: vec![created_stream(STREAM, &name)].into(),
            settings: SourceSettings { poll_interval: Duration::from_millis(1), ..quick_settings() },
            sandbox: Sandbox { grants, ..Default::default() },
            target: log,
            transforms: None,
            cursor: Arc::new(cursor),
        };
        let elapsed = self.tokio.block_on(time_source(&self.runtime, connector));
        self.forget_later_runs(&name, run);
        Measured::after_first(shape.lines, shape.batch, elapsed)
    }

    fn native(&self, input: &Path, shape: Shape, run: u32) -> Measured {
        let name = Self::name("native", shape, run);
        let (log, cursor) = self.logged(&name);
        let streams: Arc<[StreamConfig]> = vec![created_stream(STREAM, &name)].into();
        let input = input.to_path_buf();
        let elapsed = self.tokio.block_on(async {
            tokio::spawn(native_source(input, log, streams, cursor, shape)).await.expect("the native source")
        });
        self.forget_later_runs(&name, run);
        Measured::after_first(shape.lines, shape.batch, elapsed)
    }

    fn forget_later_runs(&self, name: &str, run: u32) {
        if run > 0 {
            std::fs::remove_dir_all(self.dir.path().join(name)).expect("removing a run's directory");
        }
    }

    /// The first rounds' logs hold every line once, the same payloads and headers.
    fn check_same_logs(&self, shape: Shape) {
        let records = |side: &str| {
            let name = Self::name(side, shape, 0);
            let records =
                LocalLog::read_all(&self.dir.path().join(&name).join("log"), STREAM, &name).expect("the topic");
            std::fs::remove_dir_all(self.dir.path().join(&name)).expect("removing a run's directory");
            records
        };
        let (ferry, native) = (records("ferry"), records("native"));
        assert_eq!(ferry.len() as u64, shape.lines, "ferry's log holds every line");
        assert_eq!(native.len() as u64, shape.lines, "the native log holds every line");
        for (f, n) in ferry.iter().zip(&native) {
            assert_eq!(f.payload, n.payload, "the payload at offset {}", f.offset);
            assert_eq!(f.headers, n.headers, "the headers at offset {}", f.offset);
        }
    }
}

/// The native file source: per batch, list the directory, stat the file, read from
/// the offset, check and make the records, serialize the cursor, derive the ids,
/// deliver, commit. The time from the first batch's commit to the last's.
async fn native_source(
    dir: PathBuf,
    log: Arc<LocalLog>,
    streams: Arc<[StreamConfig]>,
    cursor: LoggedCursor,
    shape: Shape,
) -> Duration {
    use std::os::unix::fs::MetadataExt;
    let pattern = glob::Pattern::new("*.log").unwrap();
    let connector: Arc<str> = KEY.into();
    let (mut offset, mut committed, mut generation, mut delivered) = (0u64, None::<Vec<u8>>, 0u64, 0u64);
    let mut start = None;
    // The file the last batch filled up in, kept open as the guest keeps it: while
    // batches are full, the next is read from it without listing the directory.
    let mut open: Option<(std::fs::File, String, String)> = None;
    while delivered < shape.lines {
        let (mut file, name, identity) = match open.take() {
            Some(kept) => kept,
            None => {
                let mut names: Vec<String> = std::fs::read_dir(&dir)
                    .unwrap()
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|name| pattern.matches(name))
                    .collect();
                names.sort();
                let path = dir.join(&names[0]);
                let metadata = std::fs::metadata(&path).unwrap();
                let identity = format!("{:016x}{:016x}", metadata.dev(), metadata.ino());
                (std::fs::File::open(&path).unwrap(), names.swap_remove(0), identity)
            }
        };
        file.seek(SeekFrom::Start(offset)).unwrap();
        // Chunks growing from 16 KiB to 1 MiB, as the guest reads.
        let (mut buffer, mut chunk, mut ended) = (Vec::new(), 16 * 1024u64, false);
        let mut messages = Vec::with_capacity(shape.batch as usize);
        let mut taken = 0;
        loop {
            while (messages.len() as u64) < shape.batch {
                let Some(end) = buffer[taken..].iter().position(|b| *b == b'\n') else { break };
                let line = &buffer[taken..taken + end];
                if format() == "json_lines" {
                    serde_json::from_slice::<serde::de::IgnoredAny>(line).expect("a JSON line");
                }
                messages.push(Message {
                    id: None,
                    headers: vec![
                        Header { key: "file".into(), value: HeaderValue::String(name.clone()) },
                        Header { key: "offset".into(), value: HeaderValue::Uint64(offset + taken as u64) },
                    ],
                    payload: line.to_vec().into(),
                    origin_timestamp: None,
                });
                taken += end + 1;
            }
            if messages.len() as u64 >= shape.batch || ended {
                break;
            }
            let got = read_chunk(&mut file, &mut buffer, chunk as usize);
            ended = (got as u64) < chunk;
            chunk = (chunk * 2).min(1024 * 1024);
        }
        offset += taken as u64;
        let state = serde_json::to_vec(&serde_json::json!({
            "files": [{ "identity": identity, "name": name, "offset": offset }]
        }))
        .unwrap();
        ferry_batch::assign_ids(
            &mut messages,
            IdSource::Cursor { connector: KEY, committed_before: committed.as_deref() },
        );
        delivered += messages.len() as u64;
        if messages.len() as u64 >= shape.batch {
            open = Some((file, name, identity.clone()));
        }
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

/// The format both sides read the lines as: `json_lines` (each line checked to be
/// JSON), or `lines` with `FERRY_BENCH_FORMAT=lines` (to see what the check costs).
fn format() -> &'static str {
    match std::env::var("FERRY_BENCH_FORMAT").as_deref() {
        Ok("lines") => "lines",
        _ => "json_lines",
    }
}

/// Up to `chunk` more bytes of `file` into `buffer`, in as few reads as it allows
/// (as the guest reads).
fn read_chunk(file: &mut std::fs::File, buffer: &mut Vec<u8>, chunk: usize) -> usize {
    let start = buffer.len();
    buffer.resize(start + chunk, 0);
    let mut filled = 0;
    while filled < chunk {
        match file.read(&mut buffer[start + filled..]).unwrap() {
            0 => break,
            n => filled += n,
        }
    }
    buffer.truncate(start + filled);
    filled
}

fn print_row(shape: Shape, ferry: &Rounds, native: &Rounds) {
    let (f, n) = (&ferry.median, &native.median);
    println!(
        "{:>5} {:>8} {:>12.0} {:>12.0} {:>9.1} {:>9.1}  {}",
        shape.batch,
        shape.lines,
        f.rate(),
        n.rate(),
        f.micros_per_batch(),
        n.micros_per_batch(),
        Rounds::ratio(ferry, native),
    );
}
