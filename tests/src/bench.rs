//! What the benchmarks (`tests/benches/`) share: their scale, a run's figures, the
//! rounds that set ferry against a native program in the same process, and timing
//! a connector in a host of its own from its first settled batch to its last.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::engine::sink::SinkConnector;
use ferry::engine::source::SourceConnector;
use ferry::engine::status::{Event, HistogramSnapshot, Phase, Stage, StageTimes};
use ferry::host::Host;
use ferry::runtime::Runtime;

use crate::harness::Running;

/// `FERRY_BENCH_SCALE` (1 by default): the share of the full workload to run,
/// `0.1` for a quick look.
pub fn scale() -> f64 {
    std::env::var("FERRY_BENCH_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}

/// Whether the benchmark's rows named `path` (such as `pg→log`) should run:
/// `FERRY_BENCH_ONLY` lists the ones wanted, comma-separated (all by default), for
/// a quick look at one path while working on it.
pub fn wanted(path: &str) -> bool {
    match std::env::var("FERRY_BENCH_ONLY") {
        Ok(only) => only.split(',').any(|wanted| wanted.trim() == path),
        Err(_) => true,
    }
}

/// Whether the shape of `batch` messages of `payload` bytes should run:
/// `FERRY_BENCH_SHAPES` lists the ones wanted as `BATCHxPAYLOAD`, comma-separated
/// (`1000x100,100x100`; all by default), to profile one shape alone.
pub fn shape_wanted(batch: u64, payload: usize) -> bool {
    match std::env::var("FERRY_BENCH_SHAPES") {
        Ok(only) => only.split(',').any(|wanted| wanted.trim() == format!("{batch}x{payload}")),
        Err(_) => true,
    }
}

/// One run: how many messages (or rows) in how many batches took how long. The
/// first batch is left out of every run (connecting, preparing, opening files), so
/// both sides are timed in their steady state.
pub struct Measured {
    pub messages: u64,
    pub batches: u64,
    pub elapsed: Duration,
}

impl Measured {
    /// A run over `total` messages in batches of `batch`, timed from the end of the
    /// first batch.
    pub fn after_first(total: u64, batch: u64, elapsed: Duration) -> Measured {
        Measured { messages: total - batch, batches: total.div_ceil(batch) - 1, elapsed }
    }

    /// Messages per second.
    pub fn rate(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64()
    }

    /// Microseconds per batch.
    pub fn micros_per_batch(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e6 / self.batches as f64
    }
}

/// How many times each side runs by default: the machine is noisy (a VM sharing its
/// disk), so each side runs [`rounds`] times, the two taking turns to go first, and
/// the median of each is compared.
pub const ROUNDS: u32 = 3;

/// The rounds per comparison: `FERRY_BENCH_ROUNDS` (odd numbers give a true
/// median), or [`ROUNDS`]. More rounds steady the medians on a busy machine.
pub fn rounds() -> u32 {
    std::env::var("FERRY_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()).filter(|&r| r > 0).unwrap_or(ROUNDS)
}

/// The median runs of `ferry` and of `native` (each given its round, for names of
/// its own), and the ratio of each round's pair.
pub fn compare(mut ferry: impl FnMut(u32) -> Measured, mut native: impl FnMut(u32) -> Measured) -> (Rounds, Rounds) {
    let (mut ferries, mut natives) = (Vec::new(), Vec::new());
    for run in 0..rounds() {
        if run % 2 == 0 {
            ferries.push(ferry(run));
            natives.push(native(run));
        } else {
            natives.push(native(run));
            ferries.push(ferry(run));
        }
    }
    let pairs: Vec<f64> = ferries.iter().zip(&natives).map(|(f, n)| f.rate() / n.rate()).collect();
    (Rounds::of(ferries, pairs.clone()), Rounds::of(natives, pairs))
}

/// The median of a side's runs, and the ratios of the rounds' pairs.
pub struct Rounds {
    pub median: Measured,
    pub pairs: Vec<f64>,
}

impl Rounds {
    fn of(mut runs: Vec<Measured>, pairs: Vec<f64>) -> Rounds {
        runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
        Rounds { median: runs.swap_remove(runs.len() / 2), pairs }
    }

    /// `ferry / native` of the medians, then the lowest and highest ratio of a
    /// round's pair: `0.91 (0.85-0.97)`.
    pub fn ratio(ferry: &Rounds, native: &Rounds) -> String {
        let low = native.pairs.iter().copied().fold(f64::INFINITY, f64::min);
        let high = native.pairs.iter().copied().fold(0.0, f64::max);
        format!("{:.2} ({low:.2}-{high:.2})", ferry.median.rate() / native.median.rate())
    }
}

/// The head of the table a bench of ferry next to a native program prints; `counted`
/// names what a shape counts (`messages`, `rows`).
pub fn print_head(counted: &str) {
    println!(
        "{:>6} {:>8} {:>12} {:>12} {:>10} {:>10}  ratio ferry/native (of the medians; lowest-highest of the pairs)",
        "batch", counted, "ferry msg/s", "native msg/s", "ferry µs", "native µs"
    );
}

/// One shape's row of that table: `count` messages (or rows) in batches of `batch`.
pub fn print_row(batch: impl std::fmt::Display, count: u64, ferry: &Rounds, native: &Rounds) {
    let (f, n) = (&ferry.median, &native.median);
    println!(
        "{:>6} {:>8} {:>12.0} {:>12.0} {:>10.1} {:>10.1}  {}",
        batch,
        count,
        f.rate(),
        n.rate(),
        f.micros_per_batch(),
        n.micros_per_batch(),
        Rounds::ratio(ferry, native)
    );
}

/// Run `connector` alone in a host until it goes idle (it has nothing more to
/// deliver); the time from its first ACK to then.
pub async fn time_source(runtime: &Arc<Runtime>, connector: SourceConnector) -> Duration {
    time_source_until(runtime, connector, |status| status.phase == Phase::Idle).await
}

/// Run `connector` alone in a host until it delivered `count` messages (for a source
/// that may find nothing for a moment before its input is read to the end); the time
/// from its first ACK to then.
pub async fn time_source_to(runtime: &Arc<Runtime>, connector: SourceConnector, count: u64) -> Duration {
    time_source_until(runtime, connector, |status| status.messages_delivered >= count).await
}

async fn time_source_until(
    runtime: &Arc<Runtime>,
    connector: SourceConnector,
    done: impl Fn(&ferry::engine::status::ConnectorStatus) -> bool,
) -> Duration {
    let key = connector.key.to_string();
    let mut host = Host::new(runtime.clone());
    host.add_source(connector, None);
    let board = host.status();
    let mut running = Running::start(host);
    running.wait_for("the first ACK", |e| matches!(e, Event::Acked { .. })).await;
    let meters = board.meters(&key).expect("the connector's meters");
    let at_start = SOURCE_STAGES.map(|stage| meters.stages.snapshot(stage));
    let start = Instant::now();
    // Not through the events, which would wake this task (and a thread) for every
    // batch: a cost the native loops it is compared with do not pay.
    board.wait_until(&key, done).await;
    let elapsed = start.elapsed();
    running.stop().await;
    print_stages(&key, &SOURCE_STAGES, &at_start, &meters.stages);
    elapsed
}

/// The stages of the source loop, in order.
const SOURCE_STAGES: [Stage; 6] =
    [Stage::Poll, Stage::Deliver, Stage::IggySend, Stage::StateSave, Stage::Ack, Stage::Total];

/// The stages of the sink loop, in order (`poll` is the read from its input).
const SINK_STAGES: [Stage; 5] = [Stage::Poll, Stage::Write, Stage::DeadLetters, Stage::StateSave, Stage::Total];

/// With `FERRY_BENCH_STAGES` set: the mean time of each of `order`'s stages over the
/// timed batches (those after the first), to see where a batch's time goes.
fn print_stages(key: &str, order: &[Stage], at_start: &[HistogramSnapshot], stages: &StageTimes) {
    if std::env::var_os("FERRY_BENCH_STAGES").is_none() {
        return;
    }
    // A stage it never went through (`deliver` or `iggy_send`) is left out.
    let went_through = |(stage, before): &(&Stage, &HistogramSnapshot)| stages.snapshot(**stage).count > before.count;
    let means = order.iter().zip(at_start).filter(went_through).map(|(stage, before)| {
        let now = stages.snapshot(*stage);
        let count = now.count.saturating_sub(before.count).max(1);
        format!("{} {:.1}", stage.as_str(), (now.sum_seconds - before.sum_seconds) * 1e6 / count as f64)
    });
    eprintln!("  {key}: µs per batch: {}", means.collect::<Vec<_>>().join(", "));
}

/// When [`time_sink`] stops a sink's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkEnd {
    /// The input holds exactly the messages to write (a topic the benchmark filled
    /// for the purpose): once the sink has written them and found nothing more to
    /// read, the last empty read included (one round trip at most). Woken by the
    /// sink's change of phase only: no wake-up per batch, which would show next to
    /// a fast sink.
    Drained,
    /// The input holds more than that (the topic a source's run wrote): once a
    /// settled batch reaches the position, seen in the event stream. One wake-up per
    /// batch, nothing next to batches that each take a database transaction.
    Reached,
}

/// Run `connector` alone in a host until it has written `end` messages (the topics
/// the benchmarks read start at offset 0: the position after the last), as `how`
/// says; the time from its first settled batch to then.
pub async fn time_sink(runtime: &Arc<Runtime>, connector: SinkConnector, end: u64, how: SinkEnd) -> Duration {
    let key = connector.key.to_string();
    let mut host = Host::new(runtime.clone());
    host.add_sink(connector, None);
    let board = host.status();
    let mut running = Running::start(host);
    running.wait_for("the first batch", |e| matches!(e, Event::Written { .. })).await;
    let meters = board.meters(&key).expect("the connector's meters");
    let at_start = SINK_STAGES.map(|stage| meters.stages.snapshot(stage));
    let start = Instant::now();
    match how {
        SinkEnd::Drained => {
            board.wait_until(&key, |status| status.phase == Phase::Idle && status.messages_delivered >= end).await
        }
        SinkEnd::Reached => {
            running.wait_for("the last batch", |e| matches!(e, Event::Written { end: at, .. } if *at >= end)).await;
        }
    }
    let elapsed = start.elapsed();
    running.stop().await;
    print_stages(&key, &SINK_STAGES, &at_start, &meters.stages);
    elapsed
}

/// Where a benchmark's source side delivers, both ferry's and the native program's:
/// the local log, or a live Iggy server.
pub enum Out<'a> {
    Log,
    Iggy(&'a crate::iggy_server::IggyServer),
}

impl Out<'_> {
    /// Its name in a row and in the names of a run's files and topics.
    pub fn name(&self) -> &'static str {
        match self {
            Out::Log => "log",
            Out::Iggy(_) => "iggy",
        }
    }
}

/// `messages` records of `payload` bytes (`{"seq":N,"text":"xx..."}`, ids from 1) in
/// `bench/t` of the local log in `log`: the input of the sink benchmarks.
pub async fn fill_local_log(log: &std::path::Path, messages: u64, payload: usize) {
    use ferry::config::StreamConfig;
    use ferry::contract::Message;
    use ferry::engine::delivery::{Delivery, Target};

    let target = ferry::store::local_log::LocalLog::new(log);
    let text = "x".repeat(payload.saturating_sub(24));
    let mut seq = 0;
    while seq < messages {
        let chunk: Vec<Message> = (seq..(seq + 5000).min(messages))
            .map(|n| Message {
                id: Some(u128::from(n + 1).into()),
                headers: vec![],
                payload: format!("{{\"seq\":{n},\"text\":\"{text}\"}}").into_bytes().into(),
                origin_timestamp: Some(1),
            })
            .collect();
        seq += chunk.len() as u64;
        let delivery = Delivery {
            connector: "fill".into(),
            streams: vec![StreamConfig::new("bench", "t")].into(),
            messages: Arc::new(chunk),
            cursor: None,
        };
        target.deliver(delivery).await.expect("filling the log");
    }
}

/// The local log and cursor of a source bench's run `name`: `dir/name/log`, a state
/// file for `key` at `durability` in `dir/name/state`, the cursor kept beside the
/// batches of the topic `stream/name`. The same for both sides, so that they make the
/// same `LocalLog::deliver` and `LoggedCursor::commit` calls.
pub fn logged_run(
    dir: &std::path::Path,
    name: &str,
    key: &str,
    stream: &str,
    durability: ferry::contract::Durability,
) -> (Arc<ferry::store::local_log::LocalLog>, ferry::store::local_log::LoggedCursor) {
    use ferry::store::local_log::{LocalLog, LoggedCursor};
    let dir = dir.join(name);
    let log = Arc::new(LocalLog::new(dir.join("log")));
    let file = ferry::store::state::StateDir::new(dir.join("state")).open_with(key, durability).expect("a state file");
    let cursor = LoggedCursor::new(file, key, &log, vec![(stream.to_string(), name.to_string())]);
    (log, cursor)
}

/// Check that the runs `ferry` and `native` (made by [`logged_run`] under `dir`) each
/// hold `count` records, the same payloads in the same order, and the same ids too when
/// `same_ids`. Ferry's records, for more checks.
pub fn check_same_logs(
    dir: &std::path::Path,
    stream: &str,
    (ferry, native): (&str, &str),
    count: u64,
    same_ids: bool,
) -> Vec<ferry::store::local_log::Record> {
    let records = |name: &str| {
        ferry::store::local_log::LocalLog::read_all(&dir.join(name).join("log"), stream, name).expect("the topic")
    };
    let (ferry, native) = (records(ferry), records(native));
    assert_eq!(ferry.len() as u64, count, "ferry's log holds every record");
    assert_eq!(native.len() as u64, count, "the native log holds every record");
    for (f, n) in ferry.iter().zip(&native) {
        assert_eq!(f.payload, n.payload, "the payload at offset {}", f.offset);
        assert!(!same_ids || f.id == n.id, "the id at offset {}: {:?} and {:?}", f.offset, f.id, n.id);
    }
    ferry
}
