//! What operators see: each connector's phase and counters, the log lines that go
//! with every change, and a stream of events (tests and the status file follow it).
//!
//! The source loop and supervisor report through a [`Reporter`]; they never format
//! a log line themselves, so the loop reads as the contract and nothing else.
//!
//! Errors, NACK details and trap messages often quote what a guest said, so the
//! reporter treats them as guest text: escaped and cut (see [`guest_text`]) before
//! they reach the log, the status file or an event, and the lines about them are
//! rate-limited per connector (every count in status stays exact).

mod file;
mod progress;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast};

use crate::batch::NackReason;
use crate::guest_text::{self, MAX_MESSAGE};
use crate::rate_limit::RateLimit;

pub use file::{StatusFile, keep_written, read_status_file, status_file_path, write_final};
pub use progress::log_progress;

/// Where a connector is in its life.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Being instantiated and opened.
    #[default]
    Starting,
    /// Delivering batches.
    Running,
    /// Polled, nothing to deliver; polling again at its interval.
    Idle,
    /// Marked failed (traps, or too many NACKs); will restart after a backoff.
    Failed,
    /// Will not be restarted (its state is corrupt, say); needs an operator.
    Refused,
    /// Stopped by a graceful shutdown.
    Stopped,
}

/// One connector's status.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnectorStatus {
    pub key: String,
    pub name: Option<String>,
    #[serde(default)]
    pub tenant: Option<String>,
    pub phase: Phase,
    /// Instances started so far (1 for the first start).
    pub instances: u64,
    pub batches_acked: u64,
    pub messages_delivered: u64,
    pub bytes_delivered: u64,
    pub nacks: u64,
    pub consecutive_nacks: u32,
    pub traps: u64,
    pub guest_errors: u64,
    pub committed_generation: Option<u64>,
    pub last_error: Option<String>,
    /// Fuel burnt by its calls (when the engine meters fuel).
    #[serde(default)]
    pub fuel_consumed: u64,
    /// Guest log lines dropped by the rate limit.
    #[serde(default)]
    pub log_lines_dropped: u64,
    /// Whether the current instance has been idle yet (to log that once).
    #[serde(skip)]
    pub idled_this_instance: bool,
}

/// Something that happened to a connector.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Started { key: Arc<str>, instance: u64 },
    Acked { key: Arc<str>, batch: u64, messages: usize, generation: Option<u64> },
    Nacked { key: Arc<str>, batch: u64, reason: NackReason, detail: String },
    GuestError { key: Arc<str>, message: String },
    Trapped { key: Arc<str>, message: String },
    Failed { key: Arc<str>, reason: String },
    Refused { key: Arc<str>, reason: String },
    Idle { key: Arc<str> },
    Stopped { key: Arc<str> },
}

impl Event {
    pub fn key(&self) -> &str {
        match self {
            Event::Started { key, .. }
            | Event::Acked { key, .. }
            | Event::Nacked { key, .. }
            | Event::GuestError { key, .. }
            | Event::Trapped { key, .. }
            | Event::Failed { key, .. }
            | Event::Refused { key, .. }
            | Event::Idle { key }
            | Event::Stopped { key } => key,
        }
    }
}

/// Counters the sandbox bumps on hot paths (every call, every guest log line), so
/// they are atomics rather than fields behind the board's lock.
#[derive(Debug, Default)]
pub struct Meters {
    pub fuel_consumed: Arc<AtomicU64>,
    pub log_lines_dropped: Arc<AtomicU64>,
}

impl Meters {
    fn fill(&self, status: &mut ConnectorStatus) {
        status.fuel_consumed = self.fuel_consumed.load(Ordering::Relaxed);
        status.log_lines_dropped = self.log_lines_dropped.load(Ordering::Relaxed);
    }
}

/// Every connector's status, and the event stream.
pub struct StatusBoard {
    connectors: Mutex<BTreeMap<String, ConnectorStatus>>,
    meters: Mutex<BTreeMap<String, Arc<Meters>>>,
    events: broadcast::Sender<Event>,
    changed: Notify,
    started_at_micros: u64,
}

impl StatusBoard {
    pub fn new() -> Arc<StatusBoard> {
        Arc::new(StatusBoard {
            connectors: Mutex::new(BTreeMap::new()),
            meters: Mutex::new(BTreeMap::new()),
            events: broadcast::channel(4096).0,
            changed: Notify::new(),
            started_at_micros: now_micros(),
        })
    }

    /// The reporter of connector `key` (of `tenant`, if any), which appears on the
    /// board from now on.
    pub fn reporter(self: &Arc<Self>, key: &str, name: Option<String>, tenant: Option<&str>) -> Reporter {
        let status =
            ConnectorStatus { key: key.to_string(), name, tenant: tenant.map(str::to_string), ..Default::default() };
        self.lock().insert(key.to_string(), status);
        let meters = Arc::new(Meters::default());
        self.meters.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), meters.clone());
        let problems = Arc::new(RateLimit::new(PROBLEM_LINES_PER_SECOND, PROBLEM_LINES_BURST));
        Reporter { key: key.into(), board: self.clone(), meters, problems }
    }

    /// The status of every connector, by key.
    pub fn snapshot(&self) -> Vec<ConnectorStatus> {
        let mut all: Vec<_> = self.lock().values().cloned().collect();
        for status in &mut all {
            self.fill_meters(status);
        }
        all
    }

    /// The status of one connector.
    pub fn get(&self, key: &str) -> Option<ConnectorStatus> {
        let mut status = self.lock().get(key).cloned()?;
        self.fill_meters(&mut status);
        Some(status)
    }

    fn fill_meters(&self, status: &mut ConnectorStatus) {
        if let Some(meters) = self.meters.lock().unwrap_or_else(|e| e.into_inner()).get(&status.key) {
            meters.fill(status);
        }
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    pub(crate) async fn changed(&self) {
        self.changed.notified().await
    }

    pub fn started_at_micros(&self) -> u64 {
        self.started_at_micros
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ConnectorStatus>> {
        self.connectors.lock().unwrap_or_else(|e| e.into_inner())
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
}

impl Reporter {
    pub fn key(&self) -> &Arc<str> {
        &self.key
    }

    /// The connector's sandbox counters.
    pub fn meters(&self) -> &Meters {
        &self.meters
    }

    fn update(&self, event: Event, change: impl FnOnce(&mut ConnectorStatus)) {
        if let Some(status) = self.board.lock().get_mut(&*self.key) {
            change(status);
        }
        self.board.changed.notify_one();
        // Nobody listening is fine.
        let _ = self.board.events.send(event);
    }

    pub fn starting(&self, instance: u64, committed: Option<u64>) {
        match committed {
            Some(generation) => tracing::info!(instance, generation, "starting from committed cursor"),
            None => tracing::info!(instance, "starting with no committed cursor (first run)"),
        }
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
        tracing::debug!(batch, messages, bytes, generation, "batch delivered, cursor committed, ACK");
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

    pub fn nacked(&self, batch: u64, reason: NackReason, detail: &str) {
        let detail = guest_text::clean(detail, MAX_MESSAGE);
        self.problem_line(|| {
            tracing::warn!(batch, reason = reason.as_str(), "NACK: {detail}; committed cursor unchanged")
        });
        let last_error = format!("{}: {detail}", reason.as_str());
        let event = Event::Nacked { key: self.key.clone(), batch, reason, detail };
        self.update(event, |s| {
            s.nacks += 1;
            s.consecutive_nacks += 1;
            s.last_error = Some(last_error);
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
}

/// The span every line about one connector is logged in: its key, and its tenant
/// when it has one.
pub fn connector_span(key: &str, tenant: Option<&str>) -> tracing::Span {
    match tenant {
        Some(tenant) => tracing::info_span!("connector", key = %key, tenant = %tenant),
        None => tracing::info_span!("connector", key = %key),
    }
}

pub(crate) fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}
