//! A [`Reporter`] is how one connector's loops and supervisor say what happened: it
//! updates the connector's status, logs the line an operator needs, and publishes
//! the event, so that the loops never format a line themselves and read as their
//! contract.
//!
//! Errors, NACK details and trap messages often quote what a guest said, so they are
//! treated as guest text: escaped and cut (see [`ferry_contract::guest_text`]) before they
//! reach the log, the status file or an event, and the lines about them are
//! rate-limited per connector (every count in status stays exact).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{ConnectorStatus, Event, Meters, Phase, Stage, StatusBoard};
use ferry_contract::NackReason;
use ferry_contract::guest_text::{self, MAX_MESSAGE};
use ferry_contract::rate_limit::RateLimit;

/// Where an instance starts from, for its first line and its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartingFrom {
    /// A committed cursor (or sink positions) of Ferry's state store, this generation.
    Committed(u64),
    /// Nothing committed yet: a first run.
    Nothing,
    /// State kept somewhere else, e.g. "the consumer group's offsets on the Iggy
    /// server".
    Elsewhere(&'static str),
}

impl StartingFrom {
    /// [`StartingFrom::Committed`] with this generation, or [`StartingFrom::Nothing`].
    pub fn generation(generation: Option<u64>) -> Self {
        generation.map_or(StartingFrom::Nothing, StartingFrom::Committed)
    }
}

/// Where a sink's batch came from and how it ended, for [`Reporter::written`].
pub struct Written<'a> {
    pub stream: &'a str,
    pub topic: &'a str,
    pub partition: u32,
    /// The offset stored: the one after the batch's last message.
    pub end: u64,
    pub messages: usize,
    /// How many of them went to the dead letters.
    pub dead: usize,
    /// The generation of the stored positions, when the store counts them.
    pub generation: Option<u64>,
}

/// What a poll brought, for counting the messages polled: a source's guest's batch,
/// a sink's input's batch, and the result of a poll for one.
pub trait Polled {
    fn messages(&self) -> usize;
}

impl<B: Polled, E> Polled for Result<Option<B>, E> {
    fn messages(&self) -> usize {
        match self {
            Ok(Some(batch)) => batch.messages(),
            _ => 0,
        }
    }
}

/// Lines about a connector's errors, NACKs and traps, per second on average.
const PROBLEM_LINES_PER_SECOND: u32 = 10;
/// ... and at once.
const PROBLEM_LINES_BURST: u32 = 50;

/// Reports one connector's changes: updates its status, logs the line operators
/// need, and publishes the event.
#[derive(Clone)]
pub struct Reporter {
    key: Arc<str>,
    board: Arc<StatusBoard>,
    meters: Arc<Meters>,
    /// The budget of lines about problems, which a guest can provoke at will.
    problems: Arc<RateLimit>,
    /// Each settled batch logged at info level, not debug (the connector's `verbose`).
    verbose: Arc<AtomicBool>,
    /// Iggy's `benchmark`: a line per settled batch with its stage times.
    benchmark: Arc<Benchmark>,
}

/// What a benchmark line needs: the time of each stage of the batch being settled,
/// and what the batch was, until its `total` is known.
struct Benchmark {
    on: AtomicBool,
    /// Each stage's latest time in µs, `u64::MAX` for none since the last line.
    latest: [AtomicU64; Stage::ALL.len()],
    /// Records of the batch being settled that its transforms dropped.
    dropped: AtomicU64,
    /// The batch acknowledged or written, waiting for its `total`.
    settled: Mutex<Option<Settled>>,
}

impl Default for Benchmark {
    fn default() -> Self {
        Benchmark {
            on: AtomicBool::new(false),
            latest: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
            dropped: AtomicU64::new(0),
            settled: Mutex::new(None),
        }
    }
}

/// A batch settled, as its benchmark line describes it.
enum Settled {
    Source { sent: usize },
    Sink { stream: String, topic: String, partition: u32, end: u64, processed: usize },
}

/// The target of benchmark lines, as Iggy's runtime names it (`RUST_LOG` filters by it).
pub const BENCHMARK_TARGET: &str = "iggy_connectors::benchmark";

impl Reporter {
    pub(super) fn new(key: Arc<str>, board: Arc<StatusBoard>, meters: Arc<Meters>) -> Self {
        let problems = Arc::new(RateLimit::new(PROBLEM_LINES_PER_SECOND, PROBLEM_LINES_BURST));
        let benchmark = Arc::new(Benchmark::default());
        Reporter { key, board, meters, problems, verbose: Arc::new(AtomicBool::new(false)), benchmark }
    }

    /// Log a line per settled batch with its stage times (`true`), from now on.
    pub fn set_benchmark(&self, on: bool) {
        self.benchmark.on.store(on, Ordering::Relaxed);
    }

    /// Log each settled batch at info level (`true`) or debug, from now on.
    pub fn set_verbose(&self, verbose: bool) {
        self.verbose.store(verbose, Ordering::Relaxed);
    }

    fn verbose(&self) -> bool {
        self.verbose.load(Ordering::Relaxed)
    }

    pub fn key(&self) -> &Arc<str> {
        &self.key
    }

    /// The connector's sandbox counters.
    pub fn meters(&self) -> &Meters {
        &self.meters
    }

    /// Run one stage of the loop, timing it into the connector's histogram of that
    /// stage: the loop's one call for the stage.
    pub async fn timed<T>(&self, stage: Stage, work: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let output = work.await;
        let took = started.elapsed();
        self.meters.stages.observe(stage, took);
        if self.benchmark.on.load(Ordering::Relaxed) {
            self.benchmark.latest[stage.index()].store(took.as_micros() as u64, Ordering::Relaxed);
            if stage == Stage::Total {
                self.benchmark_line();
            }
        }
        output
    }

    /// The benchmark line of the batch just settled (none for a NACKed one), on
    /// [`BENCHMARK_TARGET`]: Iggy's fields where Ferry has the same stage (`prepare_us`,
    /// `iggy_send_us`, `state_save_us`, `total_us`), Ferry's own for the others.
    fn benchmark_line(&self) {
        let benchmark = &self.benchmark;
        let settled = benchmark.settled.lock().unwrap_or_else(|e| e.into_inner()).take();
        let dropped = benchmark.dropped.swap(0, Ordering::Relaxed) as usize;
        // Every stage's time taken (and forgotten), so that the next line has only its
        // own batch's.
        let [poll_us, deliver_us, iggy_send_us, state_save_us, _ack, write_us, dead_letters_us, prepare_us, total_us] =
            Stage::ALL.map(|stage| match benchmark.latest[stage.index()].swap(u64::MAX, Ordering::Relaxed) {
                u64::MAX => None,
                micros => Some(micros),
            });
        let key = &*self.key;
        match settled {
            None => {}
            Some(Settled::Source { sent }) => tracing::info!(
                target: BENCHMARK_TARGET,
                connector_type = "source",
                connector_key = key,
                batch_size = sent + dropped,
                sent_count = sent,
                poll_us,
                prepare_us,
                iggy_send_us,
                deliver_us,
                state_save_us,
                total_us,
                "benchmark"
            ),
            Some(Settled::Sink { stream, topic, partition, end, processed }) => tracing::info!(
                target: BENCHMARK_TARGET,
                connector_type = "sink",
                connector_key = key,
                stream,
                topic,
                partition_id = partition,
                current_offset = end,
                batch_size = processed + dropped,
                processed_count = processed,
                poll_us,
                prepare_us,
                write_us,
                dead_letters_us,
                state_save_us,
                total_us,
                "benchmark"
            ),
        }
    }

    /// Keep what the benchmark line of the batch being settled says about it.
    fn settling(&self, settled: impl FnOnce() -> Settled) {
        if self.benchmark.on.load(Ordering::Relaxed) {
            *self.benchmark.settled.lock().unwrap_or_else(|e| e.into_inner()) = Some(settled());
        }
    }

    /// [`Reporter::timed`] for [`Stage::Poll`], also counting the messages polled.
    pub async fn polled<P: Polled>(&self, poll: impl Future<Output = P>) -> P {
        let output = self.timed(Stage::Poll, poll).await;
        self.meters.messages_polled.fetch_add(output.messages() as u64, Ordering::Relaxed);
        output
    }

    fn update(&self, event: Event, change: impl FnOnce(&mut ConnectorStatus)) {
        if let Some(status) = self.board.lock().get_mut(&*self.key) {
            let before = status.phase;
            change(status);
            if status.phase != before {
                self.board.phase_changed.notify_waiters();
            }
        }
        self.board.changed.notify_one();
        // Nobody listening is fine.
        let _ = self.board.events.send(event);
    }

    pub fn starting(&self, instance: u64, from: StartingFrom) {
        let committed = match from {
            StartingFrom::Committed(generation) => {
                tracing::info!(instance, generation, "starting from committed cursor");
                Some(generation)
            }
            StartingFrom::Nothing => {
                tracing::info!(instance, "starting with no committed cursor (first run)");
                None
            }
            StartingFrom::Elsewhere(place) => {
                tracing::info!(instance, "starting from {place}");
                None
            }
        };
        self.update(Event::Started { key: self.key.clone(), instance }, |s| {
            s.phase = Phase::Starting;
            s.idled_this_instance = false;
            s.instances = instance;
            s.committed_generation = committed;
        });
    }

    pub fn running(&self) {
        tracing::info!("running");
        if let Some(status) = self.board.lock().get_mut(&*self.key) {
            status.phase = Phase::Running;
        }
        self.board.changed.notify_one();
    }

    pub fn acked(&self, batch: u64, messages: usize, bytes: usize, generation: Option<u64>) {
        self.settling(|| Settled::Source { sent: messages });
        if self.verbose() {
            tracing::info!(batch, messages, bytes, generation, "batch delivered, cursor committed, ACK");
        } else {
            tracing::debug!(batch, messages, bytes, generation, "batch delivered, cursor committed, ACK");
        }
        let event = Event::Acked { key: self.key.clone(), batch, messages, generation };
        self.update(event, |s| {
            s.phase = Phase::Running;
            s.batches_acked += 1;
            s.messages_delivered += messages as u64;
            s.bytes_delivered += bytes as u64;
            s.consecutive_nacks = 0;
            if generation.is_some() {
                s.committed_generation = generation;
            }
        });
    }

    /// `dropped` records of the batch about to be settled were dropped by the
    /// connector's transforms.
    pub fn filtered(&self, dropped: usize) {
        self.benchmark.dropped.store(dropped as u64, Ordering::Relaxed);
        if dropped == 0 {
            return;
        }
        if let Some(status) = self.board.lock().get_mut(&*self.key) {
            status.messages_filtered += dropped as u64;
        }
        self.board.changed.notify_one();
    }

    pub fn nacked(&self, batch: u64, reason: NackReason, detail: &str) {
        let detail = guest_text::clean(detail, MAX_MESSAGE);
        self.problem_line(|| {
            tracing::warn!(batch, reason = reason.as_str(), "NACK: {detail}; committed cursor unchanged")
        });
        let last_error = format!("{}: {detail}", reason.as_str());
        let event = Event::Nacked { key: self.key.clone(), batch, reason, detail };
        self.update(event, |s| {
            s.nacks += 1;
            *s.nacks_by_reason.entry(reason.as_str().to_string()).or_default() += 1;
            s.consecutive_nacks += 1;
            s.last_error = Some(last_error);
        });
    }

    /// A sink's batch is settled: of its `messages`, `dead` dead-lettered and the
    /// others written (`bytes` of payload), and the offset past them stored. The
    /// written and the dead-lettered are counted apart, so that they add up to what
    /// was read.
    pub fn written(&self, at: Written<'_>, bytes: usize) {
        let Written { stream, topic, partition, end, messages, dead, generation } = at;
        self.settling(|| Settled::Sink {
            stream: stream.to_string(),
            topic: topic.to_string(),
            partition,
            end,
            processed: messages.saturating_sub(dead),
        });
        if self.verbose() {
            tracing::info!(stream, topic, partition, end, messages, dead, bytes, "batch written, offset stored");
        } else {
            tracing::debug!(stream, topic, partition, end, messages, dead, bytes, "batch written, offset stored");
        }
        if dead > 0 {
            self.problem_line(|| {
                tracing::warn!(
                    stream,
                    topic,
                    partition,
                    "{dead} message(s) the sink can never write went to its dead letters; offset stored at {end}"
                )
            });
        }
        let event = Event::Written {
            key: self.key.clone(),
            stream: stream.to_string(),
            topic: topic.to_string(),
            partition,
            end,
            messages,
            dead,
        };
        self.update(event, |s| {
            s.phase = Phase::Running;
            s.batches_acked += 1;
            s.messages_delivered += messages.saturating_sub(dead) as u64;
            s.bytes_delivered += bytes as u64;
            s.dead_lettered += dead as u64;
            s.consecutive_nacks = 0;
            if generation.is_some() {
                s.committed_generation = generation;
            }
        });
    }

    /// A sink's guest answered `retry` (or rejected messages there is nowhere to put).
    pub fn retried(&self, reason: &str) {
        let reason = guest_text::clean(reason, MAX_MESSAGE);
        self.problem_line(|| tracing::warn!("retry: {reason}; offset unchanged, the same messages come again"));
        let last_error = format!("retry: {reason}");
        self.update(Event::Retried { key: self.key.clone(), reason }, |s| {
            s.nacks += 1;
            *s.nacks_by_reason.entry("retry".to_string()).or_default() += 1;
            s.consecutive_nacks += 1;
            s.last_error = Some(last_error);
        });
    }

    /// A sink read a message it cannot hand to its guest as it is stored, at `at`
    /// (stream, topic, partition, offset): `detail` says why and what becomes of it.
    pub fn unreadable(&self, at: (&str, &str, u32, u64), detail: &str) {
        let (stream, topic, partition, offset) = at;
        let detail = guest_text::clean(
            &format!("{stream}/{topic} partition {partition} offset {offset}: {detail}"),
            MAX_MESSAGE,
        );
        self.problem_line(|| tracing::warn!(stream, topic, partition, offset, "{detail}"));
        let event = Event::Unreadable {
            key: self.key.clone(),
            stream: stream.to_string(),
            topic: topic.to_string(),
            partition,
            offset,
            detail: detail.clone(),
        };
        self.update(event, |s| s.last_error = Some(detail));
    }

    /// A sink could not read its input, deliver its dead letters, or store its offset:
    /// the offset does not move, and it is tried again.
    pub fn input_failed(&self, detail: &str) {
        let detail = guest_text::clean(detail, MAX_MESSAGE);
        self.problem_line(|| tracing::warn!("{detail}"));
        self.update(Event::InputFailed { key: self.key.clone(), detail: detail.clone() }, |s| {
            s.consecutive_nacks += 1;
            s.last_error = Some(detail);
        });
    }

    pub fn guest_error(&self, message: &str) {
        let message = guest_text::clean(message, MAX_MESSAGE);
        self.problem_line(|| tracing::warn!("guest error: {message}"));
        self.update(Event::GuestError { key: self.key.clone(), message: message.clone() }, |s| {
            s.guest_errors += 1;
            s.consecutive_nacks += 1;
            s.last_error = Some(message);
        });
    }

    pub fn trapped(&self, message: &str) {
        let message = guest_text::clean(message, MAX_MESSAGE);
        self.problem_line(|| tracing::error!("{message}; dropping the instance"));
        self.update(Event::Trapped { key: self.key.clone(), message: message.clone() }, |s| {
            s.traps += 1;
            s.last_error = Some(message);
        });
    }

    pub fn failed(&self, reason: &str, restart_in: std::time::Duration) {
        let reason = guest_text::clean(reason, MAX_MESSAGE);
        self.problem_line(|| {
            tracing::error!("connector failed: {reason}; restarting from its committed cursor in {restart_in:?}")
        });
        self.update(Event::Failed { key: self.key.clone(), reason: reason.clone() }, |s| {
            s.phase = Phase::Failed;
            s.last_error = Some(reason);
        });
    }

    pub fn refused(&self, reason: &str) {
        let reason = guest_text::clean(reason, MAX_MESSAGE);
        tracing::error!("connector will not run: {reason}");
        self.update(Event::Refused { key: self.key.clone(), reason: reason.clone() }, |s| {
            s.phase = Phase::Refused;
            s.last_error = Some(reason);
        });
    }

    /// The connector's task died of a panic: a bug in ferry, not in the guest. It is
    /// not restarted (the same bug would strike again); its status must not look alive.
    pub fn crashed(&self, panic: &str) {
        let reason = format!(
            "the connector's task panicked, which is a bug in ferry (please report it): {}; it is not restarted",
            guest_text::clean(panic, MAX_MESSAGE)
        );
        tracing::error!("{reason}");
        self.update(Event::Failed { key: self.key.clone(), reason: reason.clone() }, |s| {
            s.phase = Phase::Failed;
            s.last_error = Some(reason);
        });
    }

    /// Log a line about a problem, within the connector's budget for such lines; say
    /// once a second how many were left out.
    fn problem_line(&self, log: impl FnOnce()) {
        let admission = self.problems.admit();
        if admission.admitted {
            log();
        }
        if let Some(left_out) = admission.refused_to_report {
            tracing::warn!(
                target: "ferry::limits",
                left_out,
                "more errors and NACKs than {PROBLEM_LINES_PER_SECOND} lines a second: {left_out} not logged \
                 (ferry status counts every one)"
            );
        }
    }

    /// The guest had nothing to deliver. Published once per idle spell; logged at
    /// info only the first time an instance goes idle (a paced source is idle between
    /// every two batches, and the progress line already shows its flow).
    pub fn idle(&self) {
        let (phase, first_time) = {
            let mut connectors = self.board.lock();
            match connectors.get_mut(&*self.key) {
                Some(status) => (status.phase, !std::mem::replace(&mut status.idled_this_instance, true)),
                None => return,
            }
        };
        if phase == Phase::Idle {
            return;
        }
        if first_time {
            tracing::info!("idle: nothing to deliver, polling at the poll interval");
        } else {
            tracing::debug!("idle: nothing to deliver");
        }
        self.update(Event::Idle { key: self.key.clone() }, |s| s.phase = Phase::Idle);
    }

    pub fn stopped(&self) {
        tracing::info!("stopped");
        self.update(Event::Stopped { key: self.key.clone() }, |s| s.phase = Phase::Stopped);
    }

    /// Paused by an operator: its last batch settled and its guest was closed.
    pub fn paused(&self) {
        tracing::info!("paused: it polls again when resumed");
        self.update(Event::Paused { key: self.key.clone() }, |s| s.phase = Phase::Paused);
    }

    /// Instances started so far (a restarted connector counts on from there).
    pub fn instances(&self) -> u64 {
        self.board.lock().get(&*self.key).map_or(0, |s| s.instances)
    }
}
